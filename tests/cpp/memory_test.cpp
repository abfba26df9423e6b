// The memory table: malloc/free, copies at offsets inside allocations, fills,
// memory info, pinned host memory, and argument checking.
#include <algorithm>
#include <cstring>

#include "conformance.h"

namespace conformance {
namespace {

TEST(Memory, MallocFreeAligned) {
  for (int32_t d = 0; d < deviceCount(); ++d) {
    for (uint64_t bytes :
         {uint64_t{1}, uint64_t{255}, uint64_t{256}, uint64_t{4097}, uint64_t{1} << 20}) {
      void* p = nullptr;
      FLAGOS_ASSERT_OK(mem().malloc(d, bytes, &p));
      ASSERT_NE(nullptr, p);
      EXPECT_EQ(0u, reinterpret_cast<uintptr_t>(p) % 256) << bytes << " bytes on device " << d;
      FLAGOS_EXPECT_OK(mem().free(d, p));
    }
  }
}

TEST(Memory, AllocationsDoNotOverlap) {
  constexpr uint64_t kBytes = 1000;
  DeviceBuffer a(0, kBytes), b(0, kBytes);
  ASSERT_TRUE(a.get() && b.get());
  EXPECT_TRUE(a.get() + kBytes <= b.get() || b.get() + kBytes <= a.get());
  upload(a.get(), std::vector<uint8_t>(kBytes, 0x11));
  upload(b.get(), std::vector<uint8_t>(kBytes, 0x22));
  EXPECT_TRUE(download(a.get(), kBytes) == std::vector<uint8_t>(kBytes, 0x11));
}

TEST(Memory, GetInfo) {
  for (int32_t d = 0; d < deviceCount(); ++d) {
    uint64_t free_bytes = 0, total = 0;
    FLAGOS_ASSERT_OK(mem().memGetInfo(d, &free_bytes, &total));
    EXPECT_GT(total, 0u);
    EXPECT_LE(free_bytes, total);
  }
  uint64_t value = 0;
  FLAGOS_EXPECT_INVALID(mem().memGetInfo(0, nullptr, &value));
  FLAGOS_EXPECT_INVALID(mem().memGetInfo(0, &value, nullptr));
  FLAGOS_EXPECT_INVALID(mem().memGetInfo(deviceCount(), &value, &value));
}

TEST(Memory, OutOfMemoryIsDistinct) {
  uint64_t free_bytes = 0, total = 0;
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &free_bytes, &total));
  void* p = nullptr;
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_OUT_OF_MEMORY, mem().malloc(0, total + (1u << 20), &p));
  EXPECT_FALSE(lastError().empty());
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_OUT_OF_MEMORY, mem().malloc(0, UINT64_MAX, &p));
}

TEST(Memory, MallocFreeRejectBadArguments) {
  static char stale;
  void* p = &stale;
  FLAGOS_EXPECT_INVALID(mem().malloc(0, 0, &p));
  EXPECT_EQ(nullptr, p);  // memory.h: the address is NULL on failure
  FLAGOS_EXPECT_INVALID(mem().malloc(0, 256, nullptr));
  FLAGOS_EXPECT_INVALID(mem().malloc(-1, 256, &p));
  FLAGOS_EXPECT_INVALID(mem().malloc(deviceCount(), 256, &p));

  FLAGOS_ASSERT_OK(mem().malloc(0, 512, &p));
  FLAGOS_EXPECT_INVALID(mem().free(deviceCount(), p));
  static char not_device_memory[512];
  FLAGOS_EXPECT_INVALID(mem().free(0, not_device_memory));
  FLAGOS_EXPECT_OK(mem().free(0, p));
  FLAGOS_EXPECT_INVALID(mem().free(0, p));  // double free
}

// H2D, D2D and D2H at odd offsets inside allocations, including the very
// last byte, with sizes that are not multiples of anything.
TEST(Memory, RoundTripsAtOffsets) {
  constexpr uint64_t kBytes = (1 << 20) + 77;
  constexpr uint64_t kOffset = 333;
  for (int32_t d = 0; d < deviceCount(); ++d) {
    DeviceBuffer a(d, kBytes + kOffset), b(d, kBytes + 1000);
    ASSERT_TRUE(a.get() && b.get());
    const auto data = pattern(kBytes, 7);
    upload(a.get() + kOffset, data);
    FLAGOS_ASSERT_OK(
        mem().memcpy(b.get() + 1000, a.get() + kOffset, kBytes, FLAGOS_MEMCPY_DEVICE_TO_DEVICE));
    EXPECT_TRUE(download(b.get() + 1000, kBytes) == data);
    // A sub-range ending exactly at the end of the allocation.
    const auto tail = download(a.get() + kOffset + kBytes - 5, 5);
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), data.end() - 5));
  }
}

TEST(Memory, AsyncRoundTrip) {
  constexpr uint64_t kBytes = (1 << 20) + 5;
  Stream s(0);
  DeviceBuffer a(0, kBytes + 64), b(0, kBytes + 64);
  ASSERT_TRUE(s.get() && a.get() && b.get());
  const auto data = pattern(kBytes, 3);
  std::vector<uint8_t> out(kBytes);
  FLAGOS_ASSERT_OK(
      mem().memcpyAsync(a.get() + 17, data.data(), kBytes, FLAGOS_MEMCPY_HOST_TO_DEVICE, s.get()));
  FLAGOS_ASSERT_OK(mem().memcpyAsync(b.get() + 64, a.get() + 17, kBytes,
                                     FLAGOS_MEMCPY_DEVICE_TO_DEVICE, s.get()));
  FLAGOS_ASSERT_OK(
      mem().memcpyAsync(out.data(), b.get() + 64, kBytes, FLAGOS_MEMCPY_DEVICE_TO_HOST, s.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  EXPECT_TRUE(out == data);
}

TEST(Memory, ZeroByteCopiesAreNoOps) {
  Stream s(0);
  DeviceBuffer a(0, 256);
  uint8_t host = 0;
  FLAGOS_EXPECT_OK(mem().memcpy(a.get(), &host, 0, FLAGOS_MEMCPY_HOST_TO_DEVICE));
  FLAGOS_EXPECT_OK(mem().memcpyAsync(&host, a.get(), 0, FLAGOS_MEMCPY_DEVICE_TO_HOST, s.get()));
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
}

TEST(Memory, CopiesRejectBadArguments) {
  Stream s(0);
  DeviceBuffer a(0, 256);
  uint8_t host[256] = {};
  FLAGOS_EXPECT_INVALID(mem().memcpy(nullptr, host, 16, FLAGOS_MEMCPY_HOST_TO_DEVICE));
  FLAGOS_EXPECT_INVALID(mem().memcpy(a.get(), nullptr, 16, FLAGOS_MEMCPY_HOST_TO_DEVICE));
  FLAGOS_EXPECT_INVALID(mem().memcpy(a.get(), host, 16, 0));
  FLAGOS_EXPECT_INVALID(mem().memcpy(a.get(), host, 16, 42));
  FLAGOS_EXPECT_INVALID(
      mem().memcpyAsync(a.get(), host, 16, FLAGOS_MEMCPY_HOST_TO_DEVICE, nullptr));
  FLAGOS_EXPECT_INVALID(
      mem().memcpyAsync(nullptr, host, 16, FLAGOS_MEMCPY_HOST_TO_DEVICE, s.get()));
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
}

template <typename T>
void checkFill(uint32_t size) {
  constexpr uint64_t kCount = 100003;
  constexpr uint64_t kGuard = 64;  // bytes before and after that must not change
  const uint64_t bytes = kCount * size + 2 * kGuard;
  Stream s(0);
  DeviceBuffer buf(0, bytes);
  ASSERT_TRUE(s.get() && buf.get());
  upload(buf.get(), std::vector<uint8_t>(bytes, 0xEE));
  T value;
  std::memset(&value, 0, sizeof(value));
  for (uint32_t i = 0; i < size; ++i)
    reinterpret_cast<uint8_t*>(&value)[i] = uint8_t(0x11 * (i + 1));
  FLAGOS_ASSERT_OK(mem().memFill(buf.get() + kGuard, &value, size, kCount, s.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  const auto out = download(buf.get(), bytes);
  for (uint64_t i = 0; i < kGuard; ++i) {
    ASSERT_EQ(0xEE, out[i]) << "byte before the fill changed";
    ASSERT_EQ(0xEE, out[bytes - 1 - i]) << "byte after the fill changed";
  }
  for (uint64_t i = 0; i < kCount; ++i) {
    T got;
    std::memcpy(&got, out.data() + kGuard + i * size, size);
    ASSERT_EQ(0, std::memcmp(&got, &value, size)) << "element " << i << ", pattern size " << size;
  }
}

TEST(Memory, FillPattern1) {
  checkFill<uint8_t>(1);
}
TEST(Memory, FillPattern2) {
  checkFill<uint16_t>(2);
}
TEST(Memory, FillPattern4) {
  checkFill<uint32_t>(4);
}
TEST(Memory, FillPattern8) {
  checkFill<uint64_t>(8);
}

TEST(Memory, FillRejectsBadArguments) {
  Stream s(0);
  DeviceBuffer buf(0, 1024);
  const uint64_t value = 0;
  for (uint32_t bad : {0u, 3u, 5u, 16u}) {
    FLAGOS_EXPECT_INVALID(mem().memFill(buf.get(), &value, bad, 8, s.get()));
  }
  FLAGOS_EXPECT_INVALID(mem().memFill(buf.get(), nullptr, 4, 8, s.get()));
  FLAGOS_EXPECT_INVALID(mem().memFill(buf.get(), &value, 4, 8, nullptr));
  // count * 4 wraps to 4 bytes, which lie inside the buffer.
  FLAGOS_EXPECT_INVALID(mem().memFill(buf.get(), &value, 4, UINT64_MAX / 4 + 2, s.get()));
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
}

TEST(Memory, PinnedHostMemory) {
  if (mem().hostAlloc == nullptr) GTEST_SKIP() << "plugin has no pinned host memory";
  constexpr uint64_t kBytes = 3 << 20;
  void* pinned = nullptr;
  FLAGOS_ASSERT_OK(mem().hostAlloc(kBytes, &pinned));
  ASSERT_NE(nullptr, pinned);
  const auto data = pattern(kBytes, 9);
  std::memcpy(pinned, data.data(), kBytes);
  Stream s(0);
  DeviceBuffer buf(0, kBytes);
  FLAGOS_ASSERT_OK(
      mem().memcpyAsync(buf.get(), pinned, kBytes, FLAGOS_MEMCPY_HOST_TO_DEVICE, s.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  EXPECT_TRUE(download(buf.get(), kBytes) == data);
  FLAGOS_EXPECT_OK(mem().hostFree(pinned));

  FLAGOS_EXPECT_INVALID(mem().hostAlloc(kBytes, nullptr));
  static char not_pinned[64];
  FLAGOS_EXPECT_INVALID(mem().hostFree(not_pinned));
}

}  // namespace
}  // namespace conformance
