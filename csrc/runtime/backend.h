// The active vendor plugin and the logical->physical device map.
//
// This is the one place the rest of the core asks "which vendor, which
// device": dispatch, allocator, streams and comm all go through it, so no
// core file ever names a vendor. See docs/architecture.md.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "flagos/vendor.h"

namespace flagos {

// A plugin that was loaded, ABI-checked, probed and initialized.
struct Backend {
  std::string name;  // tables.name, e.g. "host"
  std::string path;  // the shared library it came from
  flagosVendorTables tables{};
  flagosProbeInfo probe{};
  // Logical device i (what PyTorch sees) is physical device physical_ids[i]
  // (what the plugin sees); from FLAGOS_VISIBLE_DEVICES.
  std::vector<int32_t> physical_ids;
};

// What happened to one candidate plugin during discovery; for backend_info()
// and the doctor ("why was my plugin skipped?").
struct CandidateReport {
  std::string name;  // backend name, or the file name if it never said
  std::string path;
  std::string status;  // "selected", "usable", "skipped", "failed"
  std::string reason;  // empty when selected/usable
  int32_t priority = 0;
};

struct InitOptions {
  std::string backend = "auto";           // "auto" or a backend name
  std::vector<std::string> search_paths;  // folders and/or .so files, in order
  std::string visible_devices;            // FLAGOS_VISIBLE_DEVICES, "" = all
};

// Discover, load, probe and pick a plugin; idempotent once it succeeded
// (a second call with another explicit backend name raises). Throws
// c10::Error with a message naming each plugin and why it failed.
void initialize(const InitOptions& options);
bool isInitialized() noexcept;
// Runs @p hook at the end of every successful first initialize() (layers
// above the runtime start work there: the kernel preload, Note [Kernel
// preload]). Register at static-initialization time; a hook that throws is
// reported on stderr and ignored.
void onInitialized(void (*hook)());
const Backend& backend();  // throws if not initialized
const std::vector<CandidateReport>& discoveryReport();

// Devices as PyTorch sees them (logical). deviceCount never throws: 0 before
// initialize().
c10::DeviceIndex deviceCount() noexcept;
int32_t physicalDevice(c10::DeviceIndex logical);  // throws on a bad index
// Throws "flagos: invalid device index N <what>(K devices visible...)" unless
// 0 <= device < deviceCount(); the message says how to get more devices.
void checkDeviceIndex(int64_t device, const char* what = "");
c10::DeviceIndex currentDevice();
void setCurrentDevice(c10::DeviceIndex logical);

// Turn a vendor status into a C++ exception naming the call and carrying the
// plugin's last-error message. FLAGOS_ERROR_OUT_OF_MEMORY becomes
// c10::OutOfMemoryError; NOT_SUPPORTED/FALLBACK are never passed here (the
// dispatcher handles them as tier decisions).
void check(flagosStatus_t status, const char* what);

}  // namespace flagos

#define FLAGOS_CHECK(call) ::flagos::check((call), #call)
