// FLAGOS_KERNEL_FAULT (kernel_fault.h): read once; unset, emitFor is emit.
#include "jit/kernel_fault.h"

#include <string>

#include "runtime/env.h"

namespace flagos::semantic {
namespace {

// FLAGOS_KERNEL_FAULT (testing): the semantic ID whose sources are broken.
const std::string& faultyOp() {
  static const std::string op = env::text("FLAGOS_KERNEL_FAULT");
  return op;
}

}  // namespace

kernels::Source emitFor(const char* id, const kernels::Recipe& recipe,
                        const kernels::Signature& sig, kernels::Variant variant,
                        const kernels::Target& target) {
  kernels::Source source = kernels::emit(recipe, sig, variant, target);
  if (!faultyOp().empty() && faultyOp() == id)
    source.text += "\n#error FLAGOS_KERNEL_FAULT injected a compile error\n";
  return source;
}

}  // namespace flagos::semantic
