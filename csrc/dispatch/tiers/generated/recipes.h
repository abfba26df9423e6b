// The generator's recipe of each semantic op, made on first use and kept
// until exit.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/gen/generator.h"

namespace flagos::semantic {

class Recipes {
 public:
  static Recipes& get();
  // Null when op (index into kOps) has no recipe.
  const kernels::Recipe* find(int op);
  // Why op has no recipe ("" when it has one or was not asked yet).
  std::string whyNot(int op);

 private:
  Recipes();
  std::mutex mu_;
  std::unique_ptr<std::atomic<int>[]> state_;  // 0 unknown, 1 none, 2 ready
  std::vector<std::shared_ptr<const kernels::Recipe>> recipes_;
  std::vector<std::string> why_not_;
};

}  // namespace flagos::semantic
