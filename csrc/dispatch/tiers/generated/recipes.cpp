// Recipes from the catalog's rows (recipes.h): a row becomes the
// generator's OpInfo once, under a lock; later lookups are one atomic load.
#include "dispatch/tiers/generated/recipes.h"

#include "dispatch/bridge/catalog.h"

namespace flagos::semantic {
namespace {

const char* familyName(Family f) {
  switch (f) {
    case Family::Pointwise:
      return "pointwise";
    case Family::Reduction:
      return "reduction";
    case Family::Normalization:
      return "normalization";
    case Family::Gemm:
      return "gemm";
    case Family::Convolution:
      return "convolution";
    case Family::Pooling:
      return "pooling";
    case Family::Index:
      return "index";
    case Family::Shape:
      return "shape";
    case Family::Random:
      return "random";
    case Family::Loss:
      return "loss";
    case Family::Optimizer:
      return "optimizer";
  }
  return "?";
}

kernels::OpInfo opInfoOf(const OpSpec& spec) {
  kernels::OpInfo info;
  info.id = spec.id;
  info.family = familyName(spec.family);
  info.expr = spec.expr ? spec.expr : "";
  for (int i = 0; i < spec.num_inputs; ++i) info.inputs.emplace_back(spec.inputs[i]);
  for (int i = 0; i < spec.num_scalars; ++i) info.scalars.emplace_back(spec.scalars[i].name);
  info.num_outputs = spec.num_outputs;
  return info;
}

}  // namespace

Recipes& Recipes::get() {
  static Recipes* r = new Recipes();  // leaked: used until exit
  return *r;
}

Recipes::Recipes() : state_(new std::atomic<int>[kNumOps]), recipes_(kNumOps), why_not_(kNumOps) {
  for (int i = 0; i < kNumOps; ++i) state_[i].store(0);
}

const kernels::Recipe* Recipes::find(int op) {
  int s = state_[op].load(std::memory_order_acquire);
  if (s == 2) return recipes_[op].get();
  if (s == 1) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  s = state_[op].load(std::memory_order_relaxed);
  if (s == 0) {
    std::string why;
    recipes_[op] = kernels::makeRecipe(opInfoOf(kOps[op]), &why);
    if (!recipes_[op]) why_not_[op] = why;
    s = recipes_[op] ? 2 : 1;
    state_[op].store(s, std::memory_order_release);
  }
  return s == 2 ? recipes_[op].get() : nullptr;
}

std::string Recipes::whyNot(int op) {
  std::lock_guard<std::mutex> lock(mu_);
  return why_not_[op];
}

}  // namespace flagos::semantic
