// Python-visible introspection of the catalog and its tiers, registered as
// custom ops so the binding module needs no change (tests, coverage tools).
#include <torch/library.h>

#include <string>
#include <vector>

#include "dispatch/bridge/catalog.h"
#include "dispatch/tiers/decomposition/composite.h"
#include "dispatch/tiers/generated/tier.h"
#include "dispatch/tiers/native/kernel_index.h"

namespace flagos::semantic {
namespace {

// torch.ops.flagos._catalog_overloads() etc.
std::vector<std::string> catalogOverloads() {
  std::vector<std::string> out;
  out.reserve(kNumOverloads);
  for (int i = 0; i < kNumOverloads; ++i)
    out.push_back(std::string("aten::") + kOverloads[i].name + "=" + kOps[kOverloads[i].op].id);
  return out;
}

std::vector<std::string> catalogNativeIds() {
  std::vector<std::string> out;
  const KernelIndex* index = KernelIndex::get();
  if (!index) return out;
  for (int i = 0; i < kNumOps; ++i)
    if (index->find(kOps[i].id)) out.emplace_back(kOps[i].id);
  return out;
}

// Semantic IDs the generated tier can take on this backend (a recipe and a
// compiler table), and those with a composite (Note [Composite kernels]).
std::vector<std::string> catalogGeneratedIds() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumOps; ++i)
    if (hasGeneratedKernel(i)) out.emplace_back(kOps[i].id);
  return out;
}

std::vector<std::string> catalogGeneratedInPlaceOnlyIds() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumOps; ++i)
    if (generatedInPlaceOnly(i)) out.emplace_back(kOps[i].id);
  return out;
}

std::vector<std::string> catalogCompositeIds() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumOps; ++i)
    if (composite::findComposite(kOps[i].id)) out.emplace_back(kOps[i].id);
  return out;
}

// Composites that also serve their operator's self in-place overload.
std::vector<std::string> catalogInPlaceCompositeIds() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumOps; ++i) {
    const composite::Composite* c = composite::findComposite(kOps[i].id);
    if (c && c->in_place) out.emplace_back(kOps[i].id);
  }
  return out;
}

std::vector<std::string> catalogRoutes() {
  initRouting();
  std::vector<std::string> out;
  for (int i = 0; i < kNumOverloads; ++i) {
    const char* r = "auto";
    switch (routeFor(kOverloads[i].op, i)) {
      case Route::Auto:
        r = "auto";
        break;
      case Route::Native:
        r = "native";
        break;
      case Route::Generated:
        r = "generated";
        break;
      case Route::Fallback:
        r = "fallback";
        break;
    }
    out.push_back(std::string("aten::") + kOverloads[i].name + "=" + r);
  }
  return out;
}

}  // namespace
}  // namespace flagos::semantic

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  m.def("_catalog_overloads() -> str[]", &flagos::semantic::catalogOverloads);
  m.def("_catalog_native_ids() -> str[]", &flagos::semantic::catalogNativeIds);
  m.def("_catalog_routes() -> str[]", &flagos::semantic::catalogRoutes);
  m.def("_catalog_generated_ids() -> str[]", &flagos::semantic::catalogGeneratedIds);
  m.def("_catalog_composite_ids() -> str[]", &flagos::semantic::catalogCompositeIds);
  m.def("_catalog_in_place_composite_ids() -> str[]",
        &flagos::semantic::catalogInPlaceCompositeIds);
  m.def("_catalog_generated_in_place_only_ids() -> str[]",
        &flagos::semantic::catalogGeneratedInPlaceOnlyIds);
}
