// The table of composite kernels by semantic ID (Note [Composite kernels]).
#include <string>
#include <unordered_map>

#include "dispatch/tiers/decomposition/composite.h"

namespace flagos::composite {
namespace {

std::unordered_map<std::string, Composite>& table() {
  static std::unordered_map<std::string, Composite> t;
  return t;
}

void add(const char* id, CompositeFn fn, unsigned flags) {
  table().emplace(id, Composite{fn, (flags & kInPlace) != 0, (flags & kSeesOut) != 0});
}

}  // namespace

const Composite* findComposite(const char* id) {
  static const bool filled = [] {
    addConvolutionComposites(add);
    addNormalizationComposites(add);
    addLossComposites(add);
    addEmbeddingComposites(add);
    addIndexComposites(add);
    addAdvancedIndexComposites(add);
    addReductionComposites(add);
    addGemmComposites(add);
    addPointwiseComposites(add);
    addOptimizerComposites(add);
    addRandomComposites(add);
    addDataDependentComposites(add);
    addScanComposites(add);
    addResamplingComposites(add);
    addFactoryComposites(add);
    addSelectionComposites(add);
    addScatterReduceComposites(add);
    addFloatBitsComposites(add);
    addDistanceComposites(add);
    addHistogramComposites(add);
    addLinalgLuComposites(add);
    addLinalgTriangularComposites(add);
    addLinalgOrthogonalComposites(add);
    addLinalgFunctionComposites(add);
    return true;
  }();
  (void)filled;
  auto it = table().find(id);
  return it == table().end() ? nullptr : &it->second;
}

}  // namespace flagos::composite
