// Which semantic IDs a plugin's kernel table may name (kernel.h: checked at
// load). The runtime does not know the operator catalog (a layer above); the
// catalog registers its lookup here during static initialization, before
// any plugin is loaded. Without a catalog (FLAGOS_ENABLE_CATALOG=OFF)
// nothing is registered and every ID passes.
#pragma once

namespace flagos::detail {

using KernelIdCheck = bool (*)(const char* id);

// Installs the catalog's lookup (the last call wins).
void setKernelIdCheck(KernelIdCheck check);
// The installed lookup, or nullptr.
KernelIdCheck kernelIdCheck();

}  // namespace flagos::detail
