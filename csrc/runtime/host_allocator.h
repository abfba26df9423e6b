// Pinned host memory for the flagos device: Tensor.pin_memory(), is_pinned(),
// the DataLoader, and the buffers of non_blocking copies.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace at {
struct HostAllocator;
}

namespace flagos {

// The registered host allocator (also at::getHostAllocator(kPrivateUse1)).
at::HostAllocator* pinnedAllocator();

// Does `ptr` lie inside a live pinned allocation? GIL-free.
bool isPinnedPtr(const void* ptr);

// If `data_ptr` is pinned memory from pinnedAllocator(), keep it alive until
// the work queued on `stream` so far has run (a non_blocking copy reads or
// writes it), and return true; return false for any other memory.
bool recordPinnedUse(const c10::DataPtr& data_ptr, c10::Stream stream);

}  // namespace flagos
