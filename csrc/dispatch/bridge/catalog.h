// The operator catalog as the bridge sees it: static tables generated from
// ops/catalog.yaml by codegen/gen_catalog.py (catalog_table.cpp in the build
// dir), and the one boxed kernel that serves every overload listed there.
//
// See Note [The semantic bridge] in bridge.cpp for the call path.
#pragma once

#include <torch/library.h>

#include <cstdint>
#include <string>
#include <vector>

namespace flagos::semantic {

enum class Family : uint8_t {
  Pointwise,
  Reduction,
  Normalization,
  Gemm,
  Convolution,
  Pooling,
  Index,
  Shape,
  Random,
  Loss,
  Optimizer,
  Fft,     // torch.fft's primitives: the FFT library slot (include/flagos/fft.h)
  Linalg,  // torch.linalg: composites over the linear-algebra library slot (linalg.h)
};

// How a schema argument becomes flagosScalar values (catalog `scalars`).
enum class Encoding : uint8_t {
  Plain,   // Scalar/float -> f; int/bool/ScalarType -> i
  Dims,    // int[]/int/None -> bitmask of normalized dims (None/[] = all)
  Dim,     // int -> normalized dim
  Length,  // int[] -> its length
  Enum,    // str -> index into `names`
  List,    // int[]/bool[] -> `count` scalars (shorter lists repeat the last)
  Philox,  // Generator? -> seed, offset (two int64); the generator advances
           // by the call's elements (Note [Random numbers on the device])
};

struct ScalarSpec {
  const char* name;
  Encoding encoding;
  int32_t count;             // Enum: names; List: scalars emitted; else 1
  const char* const* names;  // Enum only
};

struct OpSpec {
  const char* id;
  Family family;
  const char* const* inputs;
  int32_t num_inputs;
  const ScalarSpec* scalars;
  int32_t num_scalars;
  int32_t num_outputs;
  uint32_t promote_mask;  // bit i: inputs[i] takes part in type promotion
  uint32_t mutates_mask;  // bit i: inputs[i] is written although not (a!)
  const char* host_op;    // host tier runs aten::<host_op> instead (or nullptr)
  const char* expr;       // the generator's expression (or nullptr)
  bool integral;          // defined for integer dtypes: integer inputs compute as integers
};

struct OverloadSpec {
  const char* name;   // "add.Tensor"
  int32_t op;         // index into kOps
  bool decomposable;  // has a CompositeExplicitAutograd kernel to fall to
};

// Generated (catalog_table.cpp).
extern const OpSpec kOps[];
extern const int kNumOps;
extern const OverloadSpec kOverloads[];
extern const int kNumOverloads;

// Registers the bridge kernel for every overload (called from the generated
// TORCH_LIBRARY_IMPL block).
void registerCatalog(torch::Library& m);

// Index of semantic id `id` in kOps, or -1.
int findOp(const std::string& id);

// ---- routing (routing.cpp) ---------------------------------------------

// Where an operator may go, from FLAGOS_OP_<ID> and FLAGOS_FORCE_FALLBACK.
enum class Route : uint8_t {
  Auto,       // native, then generated, decomposition, host
  Native,     // same as Auto (explicit)
  Generated,  // skip the native kernel
  Fallback,   // straight to the host
};

// Route of semantic op `op` for overload `overload`. The environment is parsed
// once, on the first call; malformed values or unknown operator names throw
// c10::Error naming the variable.
Route routeFor(int op, int overload);
// Parse the environment now (idempotent); throws like routeFor.
void initRouting();

}  // namespace flagos::semantic
