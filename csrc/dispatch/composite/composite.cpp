// The table of composite kernels by semantic ID (Note [Composite kernels]).
#include <string>
#include <unordered_map>

#include "dispatch/composite/composite.h"

namespace flagos::composite {
namespace {

std::unordered_map<std::string, CompositeFn>& table() {
  static std::unordered_map<std::string, CompositeFn> t;
  return t;
}

void add(const char* id, CompositeFn fn) {
  table().emplace(id, fn);
}

}  // namespace

CompositeFn findComposite(const char* id) {
  static const bool filled = [] {
    addConvolutionComposites(add);
    addNormalizationComposites(add);
    addLossComposites(add);
    addEmbeddingComposites(add);
    addIndexComposites(add);
    addReductionComposites(add);
    addGemmComposites(add);
    return true;
  }();
  (void)filled;
  auto it = table().find(id);
  return it == table().end() ? nullptr : it->second;
}

}  // namespace flagos::composite
