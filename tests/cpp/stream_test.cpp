// Streams: in-order asynchronous execution, query/synchronize, destroy with
// work pending, many threads, and argument checking.
#include <thread>

#include "conformance.h"

namespace conformance {
namespace {

TEST(Stream, CreateDestroyOnEveryDevice) {
  for (int32_t d = 0; d < deviceCount(); ++d) {
    flagosStream_t s = nullptr;
    FLAGOS_ASSERT_OK(str().streamCreate(d, 0, &s));
    ASSERT_NE(nullptr, s);
    FLAGOS_EXPECT_OK(str().streamQuery(s));
    FLAGOS_EXPECT_OK(str().streamSynchronize(s));
    FLAGOS_EXPECT_OK(str().streamDestroy(s));
  }
  flagosStream_t s = nullptr;
  FLAGOS_ASSERT_OK(str().streamCreate(0, -1, &s));  // a priority is only a hint
  FLAGOS_EXPECT_OK(str().streamDestroy(s));
}

// 64 fills of one buffer, each followed by a copy of the buffer's last bytes
// into its own slot: every slot must show the fill queued just before it.
TEST(Stream, WorkRunsInOrder) {
  constexpr int kOps = 64;
  constexpr uint64_t kWorkBytes = 1 << 20;
  constexpr uint64_t kSlot = 256;
  Stream s(0);
  DeviceBuffer work(0, kWorkBytes), slots(0, kOps * kSlot);
  ASSERT_TRUE(s.get() && work.get() && slots.get());
  for (int i = 0; i < kOps; ++i) {
    const uint32_t value = 0x01010101u * static_cast<uint32_t>(i + 1);
    FLAGOS_ASSERT_OK(mem().memFill(work.get(), &value, 4, kWorkBytes / 4, s.get()));
    FLAGOS_ASSERT_OK(mem().memcpyAsync(slots.get() + i * kSlot, work.get() + kWorkBytes - kSlot,
                                       kSlot, FLAGOS_MEMCPY_DEVICE_TO_DEVICE, s.get()));
  }
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  const auto out = download(slots.get(), kOps * kSlot);
  for (int i = 0; i < kOps; ++i) {
    for (uint64_t b = 0; b < kSlot; ++b) {
      ASSERT_EQ(i + 1, out[i * kSlot + b]) << "slot " << i << " byte " << b;
    }
  }
}

TEST(Stream, QueryReportsPendingThenDone) {
  Stream s(0);
  DeviceBuffer scratch(0, scratchBytes(0));
  ASSERT_TRUE(s.get() && scratch.get());
  FLAGOS_EXPECT_OK(str().streamQuery(s.get()));
  EXPECT_TRUE(observePending([&](int n) { enqueueBusyWork(s.get(), scratch, n); },
                             [&] { return str().streamQuery(s.get()); },
                             [&] { FLAGOS_EXPECT_OK(str().streamSynchronize(s.get())); }))
      << "streamQuery never reported FLAGOS_ERROR_NOT_READY for queued work";
  FLAGOS_EXPECT_OK(str().streamQuery(s.get()));
}

// stream.h: "Destroy @p stream after its queued work completes."
TEST(Stream, DestroyCompletesQueuedWork) {
  constexpr uint64_t kBytes = 1 << 20;
  DeviceBuffer scratch(0, scratchBytes(0)), src(0, kBytes);
  ASSERT_TRUE(scratch.get() && src.get());
  const auto data = pattern(kBytes, 5);
  upload(src.get(), data);
  std::vector<uint8_t> out(kBytes);
  flagosStream_t s = nullptr;
  FLAGOS_ASSERT_OK(str().streamCreate(0, 0, &s));
  enqueueBusyWork(s, scratch, 4);
  FLAGOS_ASSERT_OK(
      mem().memcpyAsync(out.data(), src.get(), kBytes, FLAGOS_MEMCPY_DEVICE_TO_HOST, s));
  FLAGOS_ASSERT_OK(str().streamDestroy(s));
  FLAGOS_ASSERT_OK(dev().synchronize(0));
  EXPECT_TRUE(out == data);
}

TEST(Stream, ThreadsWithTheirOwnStreams) {
  constexpr int kThreads = 4;
  constexpr uint64_t kBytes = 256 << 10;
  std::vector<std::thread> threads;
  std::vector<int> ok(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const int32_t device = t % deviceCount();
      Stream s(device);
      DeviceBuffer buf(device, kBytes);
      const auto data = pattern(kBytes, static_cast<uint32_t>(t));
      std::vector<uint8_t> out(kBytes);
      for (int round = 0; round < 8; ++round) {
        mem().memcpyAsync(buf.get(), data.data(), kBytes, FLAGOS_MEMCPY_HOST_TO_DEVICE, s.get());
        mem().memcpyAsync(out.data(), buf.get(), kBytes, FLAGOS_MEMCPY_DEVICE_TO_HOST, s.get());
      }
      ok[t] = str().streamSynchronize(s.get()) == FLAGOS_SUCCESS && out == data;
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(ok[t]) << "thread " << t;
}

TEST(Stream, RejectsBadArguments) {
  flagosStream_t s = nullptr;
  FLAGOS_EXPECT_INVALID(str().streamCreate(0, 0, nullptr));
  FLAGOS_EXPECT_INVALID(str().streamCreate(-1, 0, &s));
  FLAGOS_EXPECT_INVALID(str().streamCreate(deviceCount(), 0, &s));
  FLAGOS_EXPECT_INVALID(str().streamDestroy(nullptr));
  FLAGOS_EXPECT_INVALID(str().streamSynchronize(nullptr));
  FLAGOS_EXPECT_INVALID(str().streamQuery(nullptr));
  Event e(0, FLAGOS_EVENT_DEFAULT);
  FLAGOS_EXPECT_INVALID(str().streamWaitEvent(nullptr, e.get()));
  Stream live(0);
  FLAGOS_EXPECT_INVALID(str().streamWaitEvent(live.get(), nullptr));
}

}  // namespace
}  // namespace conformance
