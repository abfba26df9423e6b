// Autograd's device threads drained at interpreter exit: Note [Autograd
// threads at exit] in autograd_exit.cpp.
#pragma once

#include <chrono>

namespace flagos::python {

// Waits, at most @p bound and without the GIL, until autograd's device thread
// of every flagos device has finished the work it holds. Returns false when
// the bound passed first. A no-op when those threads never started. Never
// throws.
bool drainAutogradDeviceThreads(std::chrono::milliseconds bound) noexcept;

}  // namespace flagos::python
