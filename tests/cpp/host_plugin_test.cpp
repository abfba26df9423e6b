// Behaviour specific to the host reference plugin: its environment variables,
// its arena (exact accounting, OOM message, coalescing, pages given back) and
// separate arenas per device. Every test skips itself for other plugins; the
// ones that need a particular environment (FLAGOS_HOST_MEMORY_LIMIT=1MiB,
// FLAGOS_HOST_DEVICES=2) skip unless ctest's entry for them set it.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "conformance.h"

namespace conformance {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class Host : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!isHostPlugin()) GTEST_SKIP() << "host plugin only";
  }
};

// Sets an environment variable for the scope, restoring the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// probe() re-reads the environment on every call.
flagosStatus_t probeWith(const char* name, const char* value, std::string* reason) {
  ScopedEnv env(name, value);
  flagosProbeInfo info{};
  info.struct_size = sizeof(info);
  const flagosStatus_t status = dev().probe(&info);
  *reason = info.reason;
  return status;
}

TEST_F(Host, ProbeReportsGarbageDeviceCount) {
  std::string reason;
  for (const char* bad : {"abc", "-1", "65", "2x", "1.5"}) {
    FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NO_DEVICE, probeWith("FLAGOS_HOST_DEVICES", bad, &reason));
    EXPECT_NE(std::string::npos, reason.find("FLAGOS_HOST_DEVICES")) << reason;
    EXPECT_NE(std::string::npos, reason.find(bad)) << reason;
    EXPECT_NE(std::string::npos, lastError().find(reason)) << "last error repeats the reason";
  }
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NO_DEVICE, probeWith("FLAGOS_HOST_DEVICES", "0", &reason));
  EXPECT_NE(std::string::npos, reason.find("FLAGOS_HOST_DEVICES=0")) << reason;
  FLAGOS_EXPECT_OK(probeWith("FLAGOS_HOST_DEVICES", " 3 ", &reason));
  FLAGOS_EXPECT_OK(probeWith("FLAGOS_HOST_DEVICES", "", &reason));   // empty = unset
  FLAGOS_EXPECT_OK(probeWith("FLAGOS_HOST_DEVICES", " ", &reason));  // blank too (kit env.h)
}

TEST_F(Host, ProbeReportsGarbageMemoryLimit) {
  std::string reason;
  for (const char* bad : {"lots", "12X", "1.5G", "-4G", "100", "1K", "99999999999999999999G"}) {
    FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NO_DEVICE,
                         probeWith("FLAGOS_HOST_MEMORY_LIMIT", bad, &reason));
    EXPECT_NE(std::string::npos, reason.find("FLAGOS_HOST_MEMORY_LIMIT")) << reason;
    EXPECT_NE(std::string::npos, lastError().find(bad)) << lastError();
  }
  for (const char* good : {"4096", "4K", "4k", "512M", "512MB", "2GiB", "2 gib", "1T", "64 KiB"}) {
    FLAGOS_EXPECT_OK(probeWith("FLAGOS_HOST_MEMORY_LIMIT", good, &reason));
    EXPECT_STREQ("", reason.c_str()) << good;
  }
}

TEST_F(Host, AllocationsAreAccountedIn256ByteUnits) {
  uint64_t before = 0, after = 0, total = 0;
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &before, &total));
  void* p = nullptr;
  FLAGOS_ASSERT_OK(mem().malloc(0, 1, &p));
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &after, &total));
  EXPECT_EQ(before - 256, after);
  FLAGOS_ASSERT_OK(mem().free(0, p));
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &after, &total));
  EXPECT_EQ(before, after);

  flagosDeviceProperties props{};
  props.struct_size = sizeof(props);
  FLAGOS_ASSERT_OK(dev().getProperties(0, &props));
  EXPECT_EQ(total, props.total_memory);
  EXPECT_STREQ("host", props.name);
}

TEST_F(Host, FreeRejectsInteriorPointer) {
  void* p = nullptr;
  FLAGOS_ASSERT_OK(mem().malloc(0, 4096, &p));
  FLAGOS_EXPECT_INVALID(mem().free(0, static_cast<char*>(p) + 256));
  FLAGOS_EXPECT_OK(mem().free(0, p));
}

TEST_F(Host, CopiesRejectMemoryOutsideTheArena) {
  static char host_buffer[64];
  char other[64];
  FLAGOS_EXPECT_INVALID(mem().memcpy(host_buffer, other, 64, FLAGOS_MEMCPY_HOST_TO_DEVICE));
  FLAGOS_EXPECT_INVALID(mem().memcpy(other, host_buffer, 64, FLAGOS_MEMCPY_DEVICE_TO_HOST));
  DeviceBuffer buf(0, 256);
  uint64_t free_bytes = 0, total = 0;
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &free_bytes, &total));
  // Past the end of the whole arena.
  FLAGOS_EXPECT_INVALID(mem().memcpy(buf.get(), other, total + 1, FLAGOS_MEMCPY_HOST_TO_DEVICE));
}

TEST_F(Host, EventAndStreamOfDifferentDevices) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs FLAGOS_HOST_DEVICES=2";
  Stream s(1);
  Event e(0, FLAGOS_EVENT_DEFAULT);
  FLAGOS_EXPECT_INVALID(str().eventRecord(e.get(), s.get()));
}

TEST_F(Host, UnknownEventFlags) {
  flagosEvent_t e = nullptr;
  FLAGOS_EXPECT_INVALID(str().eventCreate(0, 0x80u, &e));
}

uint64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// Freed large ranges go back to the kernel (MADV_DONTNEED).
TEST_F(Host, FreeGivesPagesBack) {
  constexpr uint64_t kBytes = 64 * kMiB;
  uint64_t free_bytes = 0, total = 0;
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &free_bytes, &total));
  if (free_bytes < 2 * kBytes) GTEST_SKIP() << "arena too small";
  void* p = nullptr;
  FLAGOS_ASSERT_OK(mem().malloc(0, kBytes, &p));
  Stream s(0);
  const uint8_t one = 1;
  FLAGOS_ASSERT_OK(mem().memFill(p, &one, 1, kBytes, s.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  const uint64_t touched = residentBytes();
  FLAGOS_ASSERT_OK(mem().free(0, p));
  const uint64_t released = residentBytes();
  EXPECT_GE(touched, released + kBytes * 3 / 4)
      << "RSS " << touched << " -> " << released << " after freeing " << kBytes;
}

// Run by ctest entry abi_conformance_oom with FLAGOS_HOST_MEMORY_LIMIT=1MiB.
TEST_F(Host, SmallArenaOutOfMemoryAndCoalescing) {
  uint64_t free_bytes = 0, total = 0;
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &free_bytes, &total));
  if (total != kMiB) GTEST_SKIP() << "needs FLAGOS_HOST_MEMORY_LIMIT=1MiB";
  ASSERT_EQ(total, free_bytes) << "arena not empty at test start";

  constexpr uint64_t kBlock = 64 << 10;
  std::vector<void*> blocks(total / kBlock);
  for (auto& block : blocks) FLAGOS_ASSERT_OK(mem().malloc(0, kBlock, &block));
  void* p = nullptr;
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_OUT_OF_MEMORY, mem().malloc(0, kBlock, &p));
  EXPECT_EQ(0u, lastError().find("host device 0: out of memory: requested 65536 bytes, 0 free of "
                                 "1048576"))
      << lastError();
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &free_bytes, &total));
  EXPECT_EQ(0u, free_bytes);

  // Free every other block: half the arena is free but no 128K hole exists.
  for (size_t i = 0; i < blocks.size(); i += 2) FLAGOS_ASSERT_OK(mem().free(0, blocks[i]));
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_OUT_OF_MEMORY, mem().malloc(0, 2 * kBlock, &p));
  EXPECT_NE(std::string::npos, lastError().find("524288 free of 1048576")) << lastError();
  // Free the rest: the holes merge back into one block of the whole arena.
  for (size_t i = 1; i < blocks.size(); i += 2) FLAGOS_ASSERT_OK(mem().free(0, blocks[i]));
  FLAGOS_ASSERT_OK(mem().malloc(0, total, &p));
  FLAGOS_EXPECT_OK(mem().free(0, p));
}

// Run by ctest entry abi_conformance_multi_device with FLAGOS_HOST_DEVICES=2.
TEST_F(Host, DevicesHaveSeparateArenas) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs FLAGOS_HOST_DEVICES=2";
  uint64_t free0 = 0, free1 = 0, total = 0, after0 = 0, after1 = 0;
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &free0, &total));
  FLAGOS_ASSERT_OK(mem().memGetInfo(1, &free1, &total));
  void* p0 = nullptr;
  FLAGOS_ASSERT_OK(mem().malloc(0, kMiB, &p0));
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &after0, &total));
  FLAGOS_ASSERT_OK(mem().memGetInfo(1, &after1, &total));
  EXPECT_EQ(free0 - kMiB, after0);
  EXPECT_EQ(free1, after1) << "device 1 must not see device 0's allocation";
  FLAGOS_EXPECT_INVALID(mem().free(1, p0));
  FLAGOS_EXPECT_OK(mem().free(0, p0));

  // Copies between devices (device-to-device across arenas) work.
  DeviceBuffer a(0, 4096), b(1, 4096);
  const auto data = pattern(4096, 11);
  upload(a.get(), data);
  FLAGOS_ASSERT_OK(mem().memcpy(b.get(), a.get(), 4096, FLAGOS_MEMCPY_DEVICE_TO_DEVICE));
  EXPECT_TRUE(download(b.get(), 4096) == data);
}

}  // namespace
}  // namespace conformance
