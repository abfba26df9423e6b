// PyTorch streams <-> vendor stream handles.
//
// PyTorch names a stream by (device, id). Id 0 of each device is the default
// stream the core created at start-up; other ids index streams created via
// torch.Stream / torch.flagos.Stream. The guard keeps a per-thread current
// stream per device, as CUDA does.
#pragma once

#include <c10/core/Stream.h>

#include "flagos/vendor.h"

namespace flagos {

// The vendor handle behind a PyTorch stream of the flagos device.
flagosStream_t vendorStream(const c10::Stream& stream);
// The calling thread's current stream on logical `device`.
c10::Stream currentStream(c10::DeviceIndex device);
// vendorStream(currentStream(device)) with one lookup: every launch asks.
flagosStream_t currentVendorStream(c10::DeviceIndex device);
c10::Stream defaultStream(c10::DeviceIndex device);
void setCurrentStream(const c10::Stream& stream);
c10::Stream newStream(c10::DeviceIndex device, int priority);

}  // namespace flagos
