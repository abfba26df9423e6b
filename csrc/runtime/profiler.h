// torch.profiler integration (profiler.cpp): the legacy ProfilerStubs and,
// where torch has the registry, the Kineto child profiler.
#pragma once

namespace flagos {

// Whether torch.profiler with ProfilerActivity.PrivateUse1 gets device
// activity: the core was built with the Kineto child profiler and the
// initialized plugin has a tracing table (flagos/trace.h).
bool profilerDeviceActivity() noexcept;
// Whether the core was built with the Kineto child profiler (the torch it was
// built against has PrivateUse1ProfilerRegistry: csrc/CMakeLists.txt).
bool kinetoProfilerBuilt() noexcept;

}  // namespace flagos
