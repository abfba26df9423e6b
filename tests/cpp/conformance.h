// The ABI conformance suite's harness: the plugin under test, loaded once per
// process by conformance_main.cpp, and small RAII helpers over its tables.
//
// The suite runs against ANY plugin library (command-line argument, or
// FLAGOS_CONFORMANCE_PLUGIN, or by default the host plugin). Tests that only
// make sense for the host reference plugin live in host_plugin_test.cpp and
// skip themselves for other plugins.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "flagos/vendor.h"

namespace conformance {

struct Plugin {
  std::string path;
  void* handle = nullptr;
  flagosVendorGetTablesFn entry = nullptr;
  flagosVendorTables tables{};
  flagosProbeInfo probe{};
};

// The plugin under test, probed and initialized.
Plugin& plugin();

inline const flagosVendorTables& tables() {
  return plugin().tables;
}
inline const flagosDeviceTable& dev() {
  return *plugin().tables.device;
}
inline const flagosMemoryTable& mem() {
  return *plugin().tables.memory;
}
inline const flagosStreamTable& str() {
  return *plugin().tables.stream;
}

// The plugin's compiler table (check tables().compiler first).
inline const flagosCompilerTable& cc() {
  return *plugin().tables.compiler;
}
// A test suite's one program (SetUpTestSuite): built from @p source with
// @p options on device 0, or nullptr with the failure recorded.
flagosProgram_t buildSuiteProgram(const char* source, const char* options);
// TearDownTestSuite's part: destroys @p program, if any, and clears it.
void destroySuiteProgram(flagosProgram_t& program);
// @p program's binary through programGetBinary's two calls (the size, then
// the bytes), checking that a buffer one byte short is refused; empty
// after a recorded failure.
std::vector<char> programBinary(flagosProgram_t program);

// The calling thread's last error message from the plugin.
std::string lastError();
int32_t deviceCount();
bool isHostPlugin();
// Readable name of a status code ("FLAGOS_ERROR_NOT_READY").
const char* statusName(flagosStatus_t status);
// Success when @p status is FLAGOS_ERROR_INVALID_ARGUMENT and the plugin left
// a last-error message.
::testing::AssertionResult rejectedAsInvalid(flagosStatus_t status);

// Owns a device allocation; fails the test if malloc fails.
class DeviceBuffer {
 public:
  DeviceBuffer(int32_t device, uint64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }
  uint64_t size() const { return bytes_; }

 private:
  int32_t device_;
  uint64_t bytes_;
  void* ptr_ = nullptr;
};

// Owns a stream.
class Stream {
 public:
  explicit Stream(int32_t device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  flagosStream_t get() const { return stream_; }

 private:
  flagosStream_t stream_ = nullptr;
};

// Owns an event.
class Event {
 public:
  Event(int32_t device, uint32_t flags);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  flagosEvent_t get() const { return event_; }

 private:
  flagosEvent_t event_ = nullptr;
};

// Copies between host vectors and device memory (synchronous calls).
void upload(void* device_dst, const std::vector<uint8_t>& host_src);
std::vector<uint8_t> download(const void* device_src, uint64_t bytes);

// Bytes 0, 1, 2, ... with a period that is not a power of two, so that a
// copy landing at the wrong offset is caught.
std::vector<uint8_t> pattern(uint64_t bytes, uint32_t seed = 0);

// Queues @p repeats fills of all of @p scratch on @p stream: "slow-ish" work
// that keeps the stream busy for a while.
void enqueueBusyWork(flagosStream_t stream, const DeviceBuffer& scratch, int repeats);

// Bytes for a scratch buffer on @p device: 64 MiB, or less on a small device.
uint64_t scratchBytes(int32_t device);

// Calls @p enqueue(repeats) with growing amounts of busy work until @p query
// sees the work pending (FLAGOS_ERROR_NOT_READY) or gives up; after each
// round @p settle waits for the work. Returns whether NOT_READY was seen.
// (Whether a query catches work in flight is a race; growing the work until
// it does keeps the test robust on fast devices.)
template <typename Enqueue, typename Query, typename Settle>
bool observePending(Enqueue enqueue, Query query, Settle settle) {
  for (int repeats = 4; repeats <= 1024; repeats *= 4) {
    enqueue(repeats);
    const flagosStatus_t status = query();
    settle();
    if (status == FLAGOS_ERROR_NOT_READY) return true;
    EXPECT_EQ(statusName(FLAGOS_SUCCESS), statusName(status)) << lastError();
  }
  return false;
}

}  // namespace conformance

// Status checks that print the status by name and the plugin's last error.
// All of them accept a streamed message like any gtest assertion.
#define FLAGOS_EXPECT_STATUS(expected, call)                                         \
  EXPECT_STREQ(::conformance::statusName(expected), ::conformance::statusName(call)) \
      << #call << "\n  last error: " << ::conformance::lastError()
#define FLAGOS_ASSERT_OK(call)                                                             \
  ASSERT_STREQ(::conformance::statusName(FLAGOS_SUCCESS), ::conformance::statusName(call)) \
      << #call << "\n  last error: " << ::conformance::lastError()
#define FLAGOS_EXPECT_OK(call) FLAGOS_EXPECT_STATUS(FLAGOS_SUCCESS, call)
// The call must be rejected as FLAGOS_ERROR_INVALID_ARGUMENT and leave a
// last-error message.
#define FLAGOS_EXPECT_INVALID(call) EXPECT_TRUE(::conformance::rejectedAsInvalid(call)) << #call
