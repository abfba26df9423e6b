// The device table: probe, count, properties, current device, synchronize.
#include <cstring>
#include <thread>

#include "conformance.h"

namespace conformance {
namespace {

bool terminated(const char* s, size_t capacity) {
  return std::memchr(s, '\0', capacity) != nullptr;
}

TEST(Device, ProbeIsRepeatableAndConsistent) {
  flagosProbeInfo info{};
  info.struct_size = sizeof(info);
  FLAGOS_ASSERT_OK(dev().probe(&info));
  EXPECT_GE(info.device_count, 1);
  EXPECT_EQ(plugin().probe.device_count, info.device_count);
  EXPECT_TRUE(terminated(info.sdk_name, sizeof(info.sdk_name)));
  EXPECT_TRUE(terminated(info.sdk_version, sizeof(info.sdk_version)));
  EXPECT_TRUE(terminated(info.driver_version, sizeof(info.driver_version)));
  EXPECT_TRUE(terminated(info.reason, sizeof(info.reason)));
  EXPECT_STRNE("", info.sdk_name);
  EXPECT_STREQ("", info.reason) << "a usable plugin leaves reason empty";
}

TEST(Device, ProbeRespectsSmallerStructSize) {
  union {
    flagosProbeInfo info;
    unsigned char bytes[sizeof(flagosProbeInfo)];
  } buffer;
  std::memset(buffer.bytes, 0xAB, sizeof(buffer.bytes));
  const size_t core_size = offsetof(flagosProbeInfo, driver_version);
  buffer.info.struct_size = static_cast<uint32_t>(core_size);
  FLAGOS_ASSERT_OK(dev().probe(&buffer.info));
  for (size_t i = core_size; i < sizeof(buffer.bytes); ++i) {
    ASSERT_EQ(0xAB, buffer.bytes[i]) << "probe wrote byte " << i << " past struct_size";
  }
}

TEST(Device, CountMatchesProbe) {
  int32_t count = -1;
  FLAGOS_ASSERT_OK(dev().getCount(&count));
  EXPECT_EQ(deviceCount(), count);
  FLAGOS_EXPECT_INVALID(dev().getCount(nullptr));
}

TEST(Device, Properties) {
  for (int32_t d = 0; d < deviceCount(); ++d) {
    flagosDeviceProperties props{};
    props.struct_size = sizeof(props);
    FLAGOS_ASSERT_OK(dev().getProperties(d, &props));
    EXPECT_EQ(sizeof(props), props.struct_size) << "struct_size keeps the caller's value";
    EXPECT_GE(props.compute_units, 1);
    EXPECT_GT(props.total_memory, 0u);
    EXPECT_TRUE(terminated(props.name, sizeof(props.name)));
    EXPECT_TRUE(terminated(props.arch, sizeof(props.arch)));
    EXPECT_STRNE("", props.name);
    EXPECT_STRNE("", props.arch) << "arch is part of kernel-cache keys";
  }
}

TEST(Device, PropertiesRejectBadArguments) {
  flagosDeviceProperties props{};
  props.struct_size = sizeof(props);
  FLAGOS_EXPECT_INVALID(dev().getProperties(-1, &props));
  FLAGOS_EXPECT_INVALID(dev().getProperties(deviceCount(), &props));
  FLAGOS_EXPECT_INVALID(dev().getProperties(0, nullptr));
}

TEST(Device, CurrentDevice) {
  int32_t current = -1;
  FLAGOS_ASSERT_OK(dev().getCurrent(&current));
  EXPECT_EQ(0, current) << "the current device starts at 0";
  const int32_t last = deviceCount() - 1;
  FLAGOS_ASSERT_OK(dev().setCurrent(last));
  FLAGOS_ASSERT_OK(dev().getCurrent(&current));
  EXPECT_EQ(last, current);
  FLAGOS_EXPECT_INVALID(dev().setCurrent(deviceCount()));
  FLAGOS_EXPECT_INVALID(dev().setCurrent(-1));
  FLAGOS_ASSERT_OK(dev().getCurrent(&current));
  EXPECT_EQ(last, current) << "a rejected setCurrent changes nothing";
  FLAGOS_EXPECT_INVALID(dev().getCurrent(nullptr));
  FLAGOS_EXPECT_OK(dev().setCurrent(0));
}

TEST(Device, CurrentDeviceIsPerThread) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs 2 devices (FLAGOS_HOST_DEVICES=2 for host)";
  FLAGOS_ASSERT_OK(dev().setCurrent(1));
  int32_t seen = -1;
  std::thread other([&] { dev().getCurrent(&seen); });
  other.join();
  EXPECT_EQ(0, seen) << "another thread's current device is its own";
  FLAGOS_EXPECT_OK(dev().setCurrent(0));
}

TEST(Device, SynchronizeIdleDevice) {
  for (int32_t d = 0; d < deviceCount(); ++d) FLAGOS_EXPECT_OK(dev().synchronize(d));
  FLAGOS_EXPECT_INVALID(dev().synchronize(deviceCount()));
  FLAGOS_EXPECT_INVALID(dev().synchronize(-1));
}

// Device-wide synchronize waits for the work of every stream of the device.
TEST(Device, SynchronizeWaitsForAllStreams) {
  constexpr uint64_t kBytes = 1 << 20;
  Stream a(0), b(0);
  DeviceBuffer scratch_a(0, 8 * kBytes), scratch_b(0, 8 * kBytes);
  DeviceBuffer src_a(0, kBytes), src_b(0, kBytes);
  ASSERT_TRUE(scratch_a.get() && scratch_b.get() && src_a.get() && src_b.get());
  const auto data_a = pattern(kBytes, 1), data_b = pattern(kBytes, 2);
  upload(src_a.get(), data_a);
  upload(src_b.get(), data_b);
  std::vector<uint8_t> out_a(kBytes), out_b(kBytes);
  enqueueBusyWork(a.get(), scratch_a, 8);
  enqueueBusyWork(b.get(), scratch_b, 8);
  FLAGOS_ASSERT_OK(
      mem().memcpyAsync(out_a.data(), src_a.get(), kBytes, FLAGOS_MEMCPY_DEVICE_TO_HOST, a.get()));
  FLAGOS_ASSERT_OK(
      mem().memcpyAsync(out_b.data(), src_b.get(), kBytes, FLAGOS_MEMCPY_DEVICE_TO_HOST, b.get()));
  FLAGOS_ASSERT_OK(dev().synchronize(0));
  EXPECT_EQ(FLAGOS_SUCCESS, str().streamQuery(a.get()));
  EXPECT_EQ(FLAGOS_SUCCESS, str().streamQuery(b.get()));
  EXPECT_TRUE(out_a == data_a);
  EXPECT_TRUE(out_b == data_b);
}

}  // namespace
}  // namespace conformance
