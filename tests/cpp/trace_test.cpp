// The optional tracing table (trace.h, ABI 1.2): members complete, argument
// checks, and one record per traced fill with the correlation id of the
// thread that queued it and host-clock times inside the enable window.
#include <chrono>
#include <cstring>
#include <vector>

#include "conformance.h"

namespace conformance {
namespace {

int64_t monotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const flagosTraceTable* traceTable() {
  const flagosVendorTables& t = tables();
  // A plugin of ABI < 1.2 ends before the member (the suite zero-fills it).
  if (t.struct_size < offsetof(flagosVendorTables, trace) + sizeof(t.trace)) return nullptr;
  return t.trace;
}

std::vector<flagosTraceRecord> drainAll(const flagosTraceTable& t) {
  std::vector<flagosTraceRecord> out;
  std::vector<flagosTraceRecord> buf(256);
  for (;;) {
    int32_t n = -1;
    EXPECT_EQ(FLAGOS_SUCCESS, t.drain(buf.data(), static_cast<int32_t>(buf.size()), &n, nullptr));
    if (n <= 0) break;
    out.insert(out.end(), buf.begin(), buf.begin() + n);
    if (n < static_cast<int32_t>(buf.size())) break;
  }
  return out;
}

TEST(Trace, TableCompleteWhenPresent) {
  const flagosTraceTable* t = traceTable();
  if (t == nullptr) GTEST_SKIP() << "no tracing table (optional)";
  EXPECT_GE(t->struct_size, offsetof(flagosTraceTable, drain) + sizeof(t->drain));
  EXPECT_NE(nullptr, t->enable);
  EXPECT_NE(nullptr, t->disable);
  EXPECT_NE(nullptr, t->setCorrelationId);
  EXPECT_NE(nullptr, t->drain);
}

TEST(Trace, DrainChecksItsArguments) {
  const flagosTraceTable* t = traceTable();
  if (t == nullptr) GTEST_SKIP() << "no tracing table (optional)";
  flagosTraceRecord r{};
  int32_t n = 0;
  FLAGOS_EXPECT_INVALID(t->drain(nullptr, 1, &n, nullptr));
  FLAGOS_EXPECT_INVALID(t->drain(&r, -1, &n, nullptr));
  FLAGOS_EXPECT_INVALID(t->drain(&r, 1, nullptr, nullptr));
  FLAGOS_EXPECT_OK(t->drain(nullptr, 0, &n, nullptr));
  EXPECT_EQ(0, n);
}

TEST(Trace, FillsAreRecordedWithTheThreadsCorrelationId) {
  const flagosTraceTable* t = traceTable();
  if (t == nullptr) GTEST_SKIP() << "no tracing table (optional)";
  DeviceBuffer buf(0, 4096);
  Stream s(0);
  const uint32_t pattern = 0x01020304u;
  FLAGOS_ASSERT_OK(t->enable());
  const int64_t begin = monotonicNs();
  FLAGOS_EXPECT_OK(t->setCorrelationId(41));
  FLAGOS_EXPECT_OK(mem().memFill(buf.get(), &pattern, 4, 512, s.get()));
  FLAGOS_EXPECT_OK(t->setCorrelationId(42));
  FLAGOS_EXPECT_OK(mem().memFill(buf.get() + 2048, &pattern, 4, 512, s.get()));
  FLAGOS_EXPECT_OK(t->setCorrelationId(0));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  const int64_t end = monotonicNs();
  FLAGOS_EXPECT_OK(t->disable());
  // Work queued after disable is not recorded.
  FLAGOS_EXPECT_OK(mem().memFill(buf.get(), &pattern, 4, 512, s.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));

  std::vector<flagosTraceRecord> fills;
  for (const flagosTraceRecord& r : drainAll(*t))
    if (r.kind == FLAGOS_TRACE_MEMSET) fills.push_back(r);
  ASSERT_EQ(2u, fills.size());
  EXPECT_EQ(41u, fills[0].correlation_id);
  EXPECT_EQ(42u, fills[1].correlation_id);
  for (const flagosTraceRecord& r : fills) {
    EXPECT_EQ(0, r.device);
    EXPECT_EQ(fills[0].stream_id, r.stream_id);  // one stream, one id
    EXPECT_LE(r.start_ns, r.end_ns);
    // On the host clock (trace.h), inside [enable, synchronize] up to the
    // device-timer mapping's error (opencl samples one marker): a tolerance of 1 ms.
    EXPECT_GE(r.start_ns, begin - 1000000) << r.name;
    EXPECT_LE(r.end_ns, end + 1000000) << r.name;
    EXPECT_NE(nullptr, std::memchr(r.name, '\0', sizeof(r.name)));
  }
  EXPECT_TRUE(drainAll(*t).empty()) << "a drained record is gone";
}

}  // namespace
}  // namespace conformance
