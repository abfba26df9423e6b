// Entry of abi_conformance_test: loads the plugin the way the core does
// (dlopen RTLD_LOCAL, the versioned entry symbol, probe, init), runs the
// tests, then shuts the plugin down and unloads it (a worker thread that
// outlived shutdown() would crash the process at dlclose).
//
//   abi_conformance_test [gtest flags] [path/to/libflagos_<vendor>.so]
//
// The plugin is the argument, else $FLAGOS_CONFORMANCE_PLUGIN, else the host
// plugin of this build. Exit code 77 (ctest: skipped) when the plugin's
// probe finds no device on this machine.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "conformance.h"

namespace conformance {

namespace {
constexpr int kSkipExitCode = 77;
}  // namespace

Plugin& plugin() {
  static Plugin p;
  return p;
}

std::string lastError() {
  const char* message = tables().getLastError ? tables().getLastError() : nullptr;
  return message ? message : "(getLastError returned NULL)";
}

int32_t deviceCount() {
  return plugin().probe.device_count;
}

bool isHostPlugin() {
  return tables().name != nullptr && std::strcmp(tables().name, "host") == 0;
}

flagosProgram_t buildSuiteProgram(const char* source, const char* options) {
  flagosProgram_t program = nullptr;
  const flagosStatus_t status = cc().programBuild(0, source, options, &program);
  if (status == FLAGOS_SUCCESS) return program;
  ADD_FAILURE() << "programBuild: " << statusName(status) << ": " << lastError();
  return nullptr;
}

void destroySuiteProgram(flagosProgram_t& program) {
  if (program != nullptr) {
    FLAGOS_EXPECT_OK(cc().programDestroy(program));
  }
  program = nullptr;
}

std::vector<char> programBinary(flagosProgram_t program) {
  uint64_t size = 0;
  flagosStatus_t status = cc().programGetBinary(program, nullptr, &size);
  if (status != FLAGOS_SUCCESS || size <= 32) {
    ADD_FAILURE() << "programGetBinary size: " << statusName(status) << ", " << size << " bytes";
    return {};
  }
  std::vector<char> binary(size);
  uint64_t short_by_one = size - 1;
  EXPECT_TRUE(rejectedAsInvalid(cc().programGetBinary(program, binary.data(), &short_by_one)));
  status = cc().programGetBinary(program, binary.data(), &size);
  if (status != FLAGOS_SUCCESS || size != binary.size()) {
    ADD_FAILURE() << "programGetBinary: " << statusName(status) << ", " << size << " bytes";
    return {};
  }
  return binary;
}

const char* statusName(flagosStatus_t status) {
  return flagosStatusString(status);
}

::testing::AssertionResult rejectedAsInvalid(flagosStatus_t status) {
  if (status != FLAGOS_ERROR_INVALID_ARGUMENT) {
    return ::testing::AssertionFailure()
           << "returned " << statusName(status)
           << " instead of FLAGOS_ERROR_INVALID_ARGUMENT; last error: " << lastError();
  }
  if (lastError().empty()) {
    return ::testing::AssertionFailure() << "returned FLAGOS_ERROR_INVALID_ARGUMENT but left no "
                                            "last-error message";
  }
  return ::testing::AssertionSuccess();
}

DeviceBuffer::DeviceBuffer(int32_t device, uint64_t bytes) : device_(device), bytes_(bytes) {
  const flagosStatus_t status = mem().malloc(device, bytes, &ptr_);
  if (status != FLAGOS_SUCCESS) {
    ADD_FAILURE() << "malloc(" << device << ", " << bytes << ") -> " << statusName(status) << ": "
                  << lastError();
    ptr_ = nullptr;
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) {
    FLAGOS_EXPECT_OK(mem().free(device_, ptr_));
  }
}

Stream::Stream(int32_t device) {
  const flagosStatus_t status = str().streamCreate(device, 0, &stream_);
  if (status != FLAGOS_SUCCESS) {
    ADD_FAILURE() << "streamCreate(" << device << ") -> " << statusName(status) << ": "
                  << lastError();
    stream_ = nullptr;
  }
}

Stream::~Stream() {
  if (stream_ != nullptr) {
    FLAGOS_EXPECT_OK(str().streamDestroy(stream_));
  }
}

Event::Event(int32_t device, uint32_t flags) {
  const flagosStatus_t status = str().eventCreate(device, flags, &event_);
  if (status != FLAGOS_SUCCESS) {
    ADD_FAILURE() << "eventCreate(" << device << ") -> " << statusName(status) << ": "
                  << lastError();
    event_ = nullptr;
  }
}

Event::~Event() {
  if (event_ != nullptr) {
    FLAGOS_EXPECT_OK(str().eventDestroy(event_));
  }
}

void upload(void* device_dst, const std::vector<uint8_t>& host_src) {
  FLAGOS_EXPECT_OK(
      mem().memcpy(device_dst, host_src.data(), host_src.size(), FLAGOS_MEMCPY_HOST_TO_DEVICE));
}

std::vector<uint8_t> download(const void* device_src, uint64_t bytes) {
  std::vector<uint8_t> host(bytes);
  FLAGOS_EXPECT_OK(mem().memcpy(host.data(), device_src, bytes, FLAGOS_MEMCPY_DEVICE_TO_HOST));
  return host;
}

std::vector<uint8_t> pattern(uint64_t bytes, uint32_t seed) {
  std::vector<uint8_t> data(bytes);
  for (uint64_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>((i + seed) % 251);
  return data;
}

void enqueueBusyWork(flagosStream_t stream, const DeviceBuffer& scratch, int repeats) {
  for (int i = 0; i < repeats; ++i) {
    const uint32_t value = 0x01010101u * static_cast<uint32_t>(i & 0xff);
    FLAGOS_EXPECT_OK(mem().memFill(scratch.get(), &value, 4, scratch.size() / 4, stream));
  }
}

uint64_t scratchBytes(int32_t device) {
  uint64_t free_bytes = 0, total = 0;
  EXPECT_EQ(FLAGOS_SUCCESS, mem().memGetInfo(device, &free_bytes, &total)) << lastError();
  return std::min<uint64_t>(uint64_t{64} << 20, free_bytes / 4) / 256 * 256;
}

namespace {

bool load(const std::string& path, std::string* error) {
  Plugin& p = plugin();
  p.path = path;
  p.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (p.handle == nullptr) {
    *error = std::string("dlopen failed: ") + dlerror();
    return false;
  }
  p.entry = reinterpret_cast<flagosVendorGetTablesFn>(dlsym(p.handle, FLAGOS_VENDOR_ENTRY_SYMBOL));
  if (p.entry == nullptr) {
    *error = "the library does not export " FLAGOS_VENDOR_ENTRY_SYMBOL;
    return false;
  }
  p.tables.struct_size = sizeof(p.tables);
  const flagosStatus_t status =
      p.entry(FLAGOS_ABI_VERSION_MAJOR, FLAGOS_ABI_VERSION_MINOR, &p.tables);
  if (status != FLAGOS_SUCCESS) {
    *error = std::string("entry point returned ") + statusName(status);
    return false;
  }
  if (p.tables.abi_major != FLAGOS_ABI_VERSION_MAJOR) {
    *error = "the plugin reports ABI major " + std::to_string(p.tables.abi_major) +
             ", this suite speaks " + std::to_string(FLAGOS_ABI_VERSION_MAJOR);
    return false;
  }
  if (p.tables.device == nullptr || p.tables.device->probe == nullptr ||
      p.tables.device->init == nullptr || p.tables.getLastError == nullptr) {
    *error = "required members are missing (device table, probe, init, getLastError)";
    return false;
  }
  return true;
}

}  // namespace
}  // namespace conformance

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);  // removes the gtest flags from argv
  using namespace conformance;
  std::string path = FLAGOS_DEFAULT_CONFORMANCE_PLUGIN;
  if (const char* env = std::getenv("FLAGOS_CONFORMANCE_PLUGIN"); env && *env) path = env;
  if (argc > 1) path = argv[1];
  std::printf("plugin under test: %s\n", path.c_str());

  std::string error;
  if (!load(path, &error)) {
    std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), error.c_str());
    return 1;
  }
  Plugin& p = plugin();
  p.probe.struct_size = sizeof(p.probe);
  const flagosStatus_t probed = p.tables.device->probe(&p.probe);
  if (probed == FLAGOS_ERROR_NO_DEVICE) {
    std::printf("SKIPPED: %s probe found no device: %s\n", p.tables.name, p.probe.reason);
    return kSkipExitCode;
  }
  if (probed != FLAGOS_SUCCESS) {
    std::fprintf(stderr, "probe failed: %s: %s\n", statusName(probed), lastError().c_str());
    return 1;
  }
  const flagosStatus_t initialized = p.tables.device->init();
  if (initialized != FLAGOS_SUCCESS) {
    std::fprintf(stderr, "init failed: %s: %s\n", statusName(initialized), lastError().c_str());
    return 1;
  }
  std::printf("backend %s %s (ABI %u.%u), %d device(s), SDK %s %s\n", p.tables.name,
              p.tables.version, p.tables.abi_major, p.tables.abi_minor, p.probe.device_count,
              p.probe.sdk_name, p.probe.sdk_version);

  int rc = RUN_ALL_TESTS();

  const flagosStatus_t shut = p.tables.device->shutdown();
  if (shut != FLAGOS_SUCCESS) {
    std::fprintf(stderr, "shutdown failed: %s: %s\n", statusName(shut), lastError().c_str());
    rc = 1;
  }
  if (dlclose(p.handle) != 0) {
    std::fprintf(stderr, "dlclose failed: %s\n", dlerror());
    rc = 1;
  }
  return rc;
}
