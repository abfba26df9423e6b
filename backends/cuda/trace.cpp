// The tracing table (trace.h) over CUDA events.
//
// Note [Traced work on CUDA streams]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// While tracing is on, every piece of work the plugin queues (a launch, an
// async copy, a fill) is bracketed by two timing events recorded on its
// stream (traceBegin/traceEnd), kept with a record begun on the queueing
// thread (its correlation id, the name). drain's collect() turns each pair
// whose end has completed into a finished record: the events' times relative
// to a reference event recorded at enable, whose host time was sampled then
// (the narrowest of eight record-and-wait windows), give CLOCK_MONOTONIC
// times. Off, the cost is the kit's flag load.
#include <vector>

#include "cuda_plugin.h"

namespace flagos_cuda {
namespace {

struct Pending {
  Device* device;
  CUevent start, end;
  flagosTraceRecord record;
};

struct Reference {
  CUevent event = nullptr;
  int64_t host_ns = 0;
};

struct Traced {
  std::mutex mu;
  std::vector<Pending> pending;
  std::vector<Reference> reference;  // per physical device
};

Traced& traced() {
  static Traced* t = new Traced;  // never destroyed: tables may run at process exit
  return *t;
}

CUevent newEvent() {
  CUevent e = nullptr;
  cu().cuEventCreate(&e, CU_EVENT_DEFAULT);
  return e;
}

flagosStatus_t sampleReference(Device& device, Reference* ref) {
  flagosStatus_t st = useContext(device, "trace enable");
  if (st != FLAGOS_SUCCESS) return st;
  const Driver& d = cu();
  CUstream s = nullptr;
  st = check(d.cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0), "trace enable",
             "cuStreamCreateWithPriority");
  if (st != FLAGOS_SUCCESS) return st;
  int64_t best = -1;
  for (int i = 0; i < 8 && st == FLAGOS_SUCCESS; ++i) {
    CUevent e = newEvent();
    const int64_t before = flagos_kit::trace::monotonicNs();
    st = check(d.cuEventRecord(e, s), "trace enable", "cuEventRecord");
    if (st == FLAGOS_SUCCESS) st = check(d.cuEventSynchronize(e), "trace enable", "cuEventSync");
    const int64_t after = flagos_kit::trace::monotonicNs();
    if (st == FLAGOS_SUCCESS && (best < 0 || after - before < best)) {
      best = after - before;
      if (ref->event != nullptr) d.cuEventDestroy(ref->event);
      ref->event = e;
      ref->host_ns = before + (after - before) / 2;
    } else {
      d.cuEventDestroy(e);
    }
  }
  d.cuStreamDestroy(s);
  return st;
}

int64_t hostTime(const Reference& ref, CUevent event) {
  float ms = 0;
  cu().cuEventElapsedTime(&ms, ref.event, event);
  return ref.host_ns + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
}

struct Hooks : flagos_kit::TraceHooks {
  static bool initialized() noexcept { return state().initialized; }

  static flagosStatus_t onEnable() noexcept {
    Traced& t = traced();
    std::lock_guard<std::mutex> lock(t.mu);
    State& s = state();
    t.reference.resize(s.devices.size());
    for (size_t i = 0; i < s.devices.size(); ++i) {
      const flagosStatus_t st = sampleReference(*s.devices[i], &t.reference[i]);
      if (st != FLAGOS_SUCCESS) return st;
    }
    return FLAGOS_SUCCESS;
  }

  static void collect() noexcept {
    Traced& t = traced();
    std::lock_guard<std::mutex> lock(t.mu);
    std::vector<Pending> left;
    for (Pending& p : t.pending) {
      if (useContext(*p.device, "trace drain") != FLAGOS_SUCCESS ||
          cu().cuEventQuery(p.end) != CUDA_SUCCESS ||
          static_cast<size_t>(p.device->index) >= t.reference.size()) {
        left.push_back(p);
        continue;
      }
      const Reference& ref = t.reference[static_cast<size_t>(p.device->index)];
      p.record.start_ns = hostTime(ref, p.start);
      p.record.end_ns = hostTime(ref, p.end);
      flagos_kit::trace::finish(p.record);
      cu().cuEventDestroy(p.start);
      cu().cuEventDestroy(p.end);
    }
    t.pending.swap(left);
  }
};

std::atomic<uint64_t> g_stream_ids{1};

}  // namespace

uint64_t nextStreamId() {
  return g_stream_ids.fetch_add(1);
}

TraceMark traceBegin(flagosStream_t stream, flagosTraceKind_t kind, const char* name) {
  TraceMark mark;
  if (!flagos_kit::trace::enabled()) return mark;
  mark.start = newEvent();
  if (mark.start == nullptr) return mark;
  cu().cuEventRecord(mark.start, stream->stream);
  mark.record = flagos_kit::trace::begin(
      kind, stream->device->index, stream->trace_id,
      kind == FLAGOS_TRACE_KERNEL ? flagos_kit::trace::takeName(name) : name);
  mark.on = true;
  return mark;
}

void traceEnd(flagosStream_t stream, TraceMark& mark) {
  if (!mark.on) return;
  CUevent end = newEvent();
  if (end == nullptr) return;
  cu().cuEventRecord(end, stream->stream);
  Traced& t = traced();
  std::lock_guard<std::mutex> lock(t.mu);
  t.pending.push_back({stream->device, mark.start, end, mark.record});
}

const flagosTraceTable* traceTable() {
  return flagos_kit::traceTable<Hooks>();
}

}  // namespace flagos_cuda
