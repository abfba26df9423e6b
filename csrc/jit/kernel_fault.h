// Fault injection for tests (FLAGOS_KERNEL_FAULT): the generated tier's
// sources, with a compile error for the one semantic op named there.
#pragma once

#include "jit/gen/generator.h"

namespace flagos::semantic {

// kernels::emit, plus an #error line when @p id is FLAGOS_KERNEL_FAULT.
kernels::Source emitFor(const char* id, const kernels::Recipe& recipe,
                        const kernels::Signature& sig, kernels::Variant variant,
                        const kernels::Target& target);

}  // namespace flagos::semantic
