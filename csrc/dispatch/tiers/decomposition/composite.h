// Composite kernels: catalog operators computed from other catalog
// operators, for backends that have no kernel of their own for them.
//
// Note [Composite kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A composite is the bridge's decomposition tier written by us rather than
// taken from ATen (many ATen ops, convolution first, have no composite
// kernel: each device brings its own). It calls at:: operators on the
// device tensors, so every step takes its own best tier again: for
// convolution, im2col/col2im come from the kernel generator and the GEMMs
// from the vendor's BLAS (CLBlast on opencl). The bridge runs a composite
// after the native and generated tiers and counts it as "decomposition";
// the ops inside are counted under their own names.
//
// A composite first decides whether it can take the call (rank, layout,
// argument values) and leaves the stack untouched when it cannot: the call
// then goes to the host tier, which also raises CPU's exact error for
// invalid arguments. It never half-computes a call.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace flagos::composite {

// Computes the call on @p stack (the overload's arguments; replaced by its
// returns) and returns true, or returns false with the stack untouched.
using CompositeFn = bool (*)(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// A composite computes the functional (and out=) overloads of its operator;
// `in_place` ones also serve the in-place overload (computed, then copied
// into self): those never call their own operator's in-place form. An
// operator that returns nothing (the fused optimizers) updates its
// arguments itself and drops them from the stack.
//
// A factory's out= call (eye.m_out, linspace.out) names the device only
// through its out tensor, so a `sees_out` composite gets the out= call's
// whole stack, out tensors included, resizes and writes them itself and
// leaves them as the returns.
struct Composite {
  CompositeFn fn = nullptr;
  bool in_place = false;
  bool sees_out = false;
};

// The flags of a registration (a plain bool still means kInPlace or none).
constexpr unsigned kInPlace = 1u;
constexpr unsigned kSeesOut = 2u;

// Whether the randperm composite takes randperm(n) of @p dtype (random.cpp);
// the rest, which CPU may refuse, take the host tier.
bool randpermComposes(at::ScalarType dtype, int64_t n);

// The composite for semantic operator @p id, or nullptr.
const Composite* findComposite(const char* id);

// Each family's file registers its composites (composite.cpp calls them).
using Register = void (*)(const char* id, CompositeFn fn, unsigned flags);
void addConvolutionComposites(Register add);
void addNormalizationComposites(Register add);
void addLossComposites(Register add);
void addEmbeddingComposites(Register add);
void addIndexComposites(Register add);
void addAdvancedIndexComposites(Register add);
void addReductionComposites(Register add);
void addGemmComposites(Register add);
void addPointwiseComposites(Register add);
void addOptimizerComposites(Register add);
void addRandomComposites(Register add);
void addDataDependentComposites(Register add);
void addScanComposites(Register add);
void addResamplingComposites(Register add);
void addFactoryComposites(Register add);
void addSelectionComposites(Register add);
void addScatterReduceComposites(Register add);
void addFloatBitsComposites(Register add);
void addDistanceComposites(Register add);
void addHistogramComposites(Register add);
void addLinalgLuComposites(Register add);
void addLinalgTriangularComposites(Register add);
void addLinalgOrthogonalComposites(Register add);
void addLinalgFunctionComposites(Register add);

}  // namespace flagos::composite
