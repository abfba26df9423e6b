// Tier 1 through a library slot: torch.fft's three primitives as native
// kernels over the plugin's FFT table (include/flagos/fft.h).
#pragma once

#include "flagos/fft.h"
#include "flagos/kernel.h"

namespace flagos::semantic {

// The kernel serving catalog operator @p id ("fft_c2c", "fft_r2c",
// "fft_c2r") through the active plugin's FFT table, or nullptr for any
// other id.
flagosKernelFn fftLibraryKernel(const char* id);

}  // namespace flagos::semantic
