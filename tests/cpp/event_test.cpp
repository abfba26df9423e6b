// Events: record/query/synchronize, ordering between streams, timing, event
// lifetime while waits are pending, and argument checking.
#include "conformance.h"

namespace conformance {
namespace {

TEST(Event, NeverRecordedCountsAsComplete) {
  Event e(0, FLAGOS_EVENT_DEFAULT);
  ASSERT_NE(nullptr, e.get());
  FLAGOS_EXPECT_OK(str().eventQuery(e.get()));
  FLAGOS_EXPECT_OK(str().eventSynchronize(e.get()));
  Stream s(0);
  FLAGOS_EXPECT_OK(str().streamWaitEvent(s.get(), e.get()));
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
}

TEST(Event, QueryReportsPendingThenDone) {
  Stream s(0);
  Event e(0, FLAGOS_EVENT_DEFAULT);
  DeviceBuffer scratch(0, scratchBytes(0));
  ASSERT_TRUE(s.get() && e.get() && scratch.get());
  EXPECT_TRUE(observePending(
      [&](int n) {
        enqueueBusyWork(s.get(), scratch, n);
        FLAGOS_EXPECT_OK(str().eventRecord(e.get(), s.get()));  // re-recording replaces
      },
      [&] { return str().eventQuery(e.get()); },
      [&] { FLAGOS_EXPECT_OK(str().eventSynchronize(e.get())); }))
      << "eventQuery never reported FLAGOS_ERROR_NOT_READY for pending work";
  FLAGOS_EXPECT_OK(str().eventQuery(e.get()));
  FLAGOS_EXPECT_OK(str().streamQuery(s.get())) << "the record was the stream's last work";
}

// Stream B waits on an event recorded on A after slow work; B's copy must
// see the value A wrote last.
TEST(Event, OrdersWorkAcrossStreams) {
  constexpr uint64_t kBytes = 4096;
  Stream a(0), b(0);
  Event e(0, FLAGOS_EVENT_DEFAULT);
  DeviceBuffer scratch(0, scratchBytes(0)), x(0, kBytes), y(0, kBytes);
  ASSERT_TRUE(a.get() && b.get() && e.get() && scratch.get() && x.get() && y.get());
  upload(x.get(), std::vector<uint8_t>(kBytes, 0));
  upload(y.get(), std::vector<uint8_t>(kBytes, 0));

  enqueueBusyWork(a.get(), scratch, 16);
  const uint8_t seven = 7;
  FLAGOS_ASSERT_OK(mem().memFill(x.get(), &seven, 1, kBytes, a.get()));
  FLAGOS_ASSERT_OK(str().eventRecord(e.get(), a.get()));
  FLAGOS_ASSERT_OK(str().streamWaitEvent(b.get(), e.get()));
  FLAGOS_ASSERT_OK(
      mem().memcpyAsync(y.get(), x.get(), kBytes, FLAGOS_MEMCPY_DEVICE_TO_DEVICE, b.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(b.get()));
  FLAGOS_EXPECT_OK(str().eventQuery(e.get())) << "B passed its wait, so the event is complete";
  EXPECT_TRUE(download(y.get(), kBytes) == std::vector<uint8_t>(kBytes, 7));
  FLAGOS_EXPECT_OK(str().streamSynchronize(a.get()));
}

// stream.h: "Destroy @p event; pending waits on it still complete."
TEST(Event, DestroyWhileWaitPending) {
  Stream a(0), b(0);
  DeviceBuffer scratch(0, scratchBytes(0));
  ASSERT_TRUE(a.get() && b.get() && scratch.get());
  flagosEvent_t e = nullptr;
  FLAGOS_ASSERT_OK(str().eventCreate(0, FLAGOS_EVENT_TIMING, &e));
  enqueueBusyWork(a.get(), scratch, 8);
  FLAGOS_ASSERT_OK(str().eventRecord(e, a.get()));
  FLAGOS_ASSERT_OK(str().streamWaitEvent(b.get(), e));
  FLAGOS_ASSERT_OK(str().eventDestroy(e));
  FLAGOS_EXPECT_OK(str().streamSynchronize(b.get()));
  FLAGOS_EXPECT_OK(str().streamSynchronize(a.get()));
}

TEST(Event, ElapsedTime) {
  Stream s(0);
  Event start(0, FLAGOS_EVENT_TIMING), end(0, FLAGOS_EVENT_TIMING);
  DeviceBuffer scratch(0, scratchBytes(0));
  ASSERT_TRUE(s.get() && start.get() && end.get() && scratch.get());
  FLAGOS_ASSERT_OK(str().eventRecord(start.get(), s.get()));
  enqueueBusyWork(s.get(), scratch, 4);
  FLAGOS_ASSERT_OK(str().eventRecord(end.get(), s.get()));
  FLAGOS_ASSERT_OK(str().eventSynchronize(end.get()));
  float ms = -1.0f;
  FLAGOS_ASSERT_OK(str().eventElapsedTime(&ms, start.get(), end.get()));
  EXPECT_GE(ms, 0.0f);
  FLAGOS_ASSERT_OK(str().eventElapsedTime(&ms, start.get(), start.get()));
  EXPECT_EQ(0.0f, ms);
}

TEST(Event, ElapsedTimeNotReadyWhilePending) {
  Stream s(0);
  Event start(0, FLAGOS_EVENT_TIMING), end(0, FLAGOS_EVENT_TIMING);
  DeviceBuffer scratch(0, scratchBytes(0));
  ASSERT_TRUE(s.get() && start.get() && end.get() && scratch.get());
  float ms = 0.0f;
  EXPECT_TRUE(observePending(
      [&](int n) {
        FLAGOS_EXPECT_OK(str().eventRecord(start.get(), s.get()));
        enqueueBusyWork(s.get(), scratch, n);
        FLAGOS_EXPECT_OK(str().eventRecord(end.get(), s.get()));
      },
      [&] { return str().eventElapsedTime(&ms, start.get(), end.get()); },
      [&] { FLAGOS_EXPECT_OK(str().streamSynchronize(s.get())); }));
}

TEST(Event, ElapsedTimeNeedsTimingEvents) {
  Stream s(0);
  Event plain(0, FLAGOS_EVENT_DEFAULT), timed(0, FLAGOS_EVENT_TIMING);
  FLAGOS_ASSERT_OK(str().eventRecord(plain.get(), s.get()));
  FLAGOS_ASSERT_OK(str().eventRecord(timed.get(), s.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  float ms = 0.0f;
  FLAGOS_EXPECT_INVALID(str().eventElapsedTime(&ms, plain.get(), timed.get()));
  FLAGOS_EXPECT_INVALID(str().eventElapsedTime(&ms, timed.get(), plain.get()));
  FLAGOS_EXPECT_INVALID(str().eventElapsedTime(nullptr, timed.get(), timed.get()));
}

TEST(Event, RejectsBadArguments) {
  flagosEvent_t e = nullptr;
  FLAGOS_EXPECT_INVALID(str().eventCreate(0, FLAGOS_EVENT_DEFAULT, nullptr));
  FLAGOS_EXPECT_INVALID(str().eventCreate(-1, FLAGOS_EVENT_DEFAULT, &e));
  FLAGOS_EXPECT_INVALID(str().eventCreate(deviceCount(), FLAGOS_EVENT_DEFAULT, &e));
  FLAGOS_EXPECT_INVALID(str().eventDestroy(nullptr));
  FLAGOS_EXPECT_INVALID(str().eventQuery(nullptr));
  FLAGOS_EXPECT_INVALID(str().eventSynchronize(nullptr));
  Stream s(0);
  Event live(0, FLAGOS_EVENT_TIMING);
  FLAGOS_EXPECT_INVALID(str().eventRecord(nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(str().eventRecord(live.get(), nullptr));
  float ms = 0.0f;
  FLAGOS_EXPECT_INVALID(str().eventElapsedTime(&ms, nullptr, live.get()));
  FLAGOS_EXPECT_INVALID(str().eventElapsedTime(&ms, live.get(), nullptr));
}

}  // namespace
}  // namespace conformance
