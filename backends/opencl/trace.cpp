// The tracing table (trace.h) over OpenCL event profiling.
//
// Note [Traced commands]
// ~~~~~~~~~~~~~~~~~~~~~~
// Every command a stream queues goes through flagosStream_st::enqueue, which
// hands its event to traceCommand() while tracing is on (the queues are
// created with CL_QUEUE_PROFILING_ENABLE for timing events already). We keep
// the event (retained) with a record begun on the queueing thread (its
// correlation id, the name the launch set); drain's collect() turns each
// completed one into a finished record from CL_PROFILING_COMMAND_START/END,
// shifted onto CLOCK_MONOTONIC by the device's offset sampled at enable
// (markers' QUEUED times against the host clock around their enqueue).
// Markers and barriers (eventRecord, waits) are not work and are dropped.
#include <vector>

#include "opencl.h"

namespace flagos_opencl {
namespace {

struct Pending {
  cl_event event;
  flagosTraceRecord record;
};

struct Traced {
  std::mutex mu;
  std::vector<Pending> pending;
  std::vector<int64_t> offset_ns;  // per physical device: host = device + offset
};

Traced& traced() {
  static Traced* t = new Traced;  // never destroyed: Note in opencl.h on state()
  return *t;
}

cl_ulong profilingInfo(cl_event event, cl_profiling_info what) {
  cl_ulong value = 0;
  if (clGetEventProfilingInfo(event, what, sizeof(value), &value, nullptr) != CL_SUCCESS) return 0;
  return value;
}

// Device timer minus host clock, from markers: each gives the host clock
// before and after its enqueue and the device's QUEUED time, which lies in
// between. The narrowest of kSamples windows is kept: one sample on a busy
// machine was off by far more when the enqueue was descheduled, and records
// then fell outside the window they were traced in.
flagosStatus_t sampleOffset(Device& device, int64_t* offset) {
  constexpr int kSamples = 8;
  cl_int error = CL_SUCCESS;
  cl_command_queue q =
      clCreateCommandQueue(device.context, device.info.id, CL_QUEUE_PROFILING_ENABLE, &error);
  if (q == nullptr) {
    return fail(FLAGOS_ERROR_DEVICE, "opencl trace enable: clCreateCommandQueue failed: %s",
                clErrorName(error).c_str());
  }
  int64_t best_window = -1;
  for (int i = 0; i < kSamples && error == CL_SUCCESS; ++i) {
    cl_event ev = nullptr;
    const int64_t before = flagos_kit::trace::monotonicNs();
    error = clEnqueueMarkerWithWaitList(q, 0, nullptr, &ev);
    const int64_t after = flagos_kit::trace::monotonicNs();
    if (error == CL_SUCCESS) error = clWaitForEvents(1, &ev);
    const cl_ulong queued =
        error == CL_SUCCESS ? profilingInfo(ev, CL_PROFILING_COMMAND_QUEUED) : 0;
    if (ev != nullptr) clReleaseEvent(ev);
    if (error == CL_SUCCESS && queued == 0) error = CL_PROFILING_INFO_NOT_AVAILABLE;
    if (error == CL_SUCCESS && (best_window < 0 || after - before < best_window)) {
      best_window = after - before;
      *offset = before + (after - before) / 2 - static_cast<int64_t>(queued);
    }
  }
  clReleaseCommandQueue(q);
  if (error != CL_SUCCESS) {
    return fail(FLAGOS_ERROR_DEVICE, "opencl trace enable: cannot read the device timer: %s",
                clErrorName(error).c_str());
  }
  return FLAGOS_SUCCESS;
}

struct Hooks {
  static bool initialized() noexcept { return state().initialized; }

  static flagosStatus_t onEnable() noexcept {
    std::vector<int64_t> offsets;
    for (auto& device : state().devices) {
      int64_t offset = 0;
      const flagosStatus_t st = sampleOffset(*device, &offset);
      if (st != FLAGOS_SUCCESS) return st;
      offsets.push_back(offset);
    }
    Traced& t = traced();
    std::lock_guard<std::mutex> lock(t.mu);
    for (Pending& p : t.pending) clReleaseEvent(p.event);  // of an earlier enable
    t.pending.clear();
    t.offset_ns = std::move(offsets);
    return FLAGOS_SUCCESS;
  }

  static void collect() noexcept {
    Traced& t = traced();
    std::lock_guard<std::mutex> lock(t.mu);
    std::vector<Pending> running;
    for (Pending& p : t.pending) {
      cl_int status = CL_QUEUED;
      clGetEventInfo(p.event, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
      if (status > CL_COMPLETE) {  // queued, submitted or running: a later drain
        running.push_back(p);
        continue;
      }
      cl_command_type type = 0;
      clGetEventInfo(p.event, CL_EVENT_COMMAND_TYPE, sizeof(type), &type, nullptr);
      const cl_ulong start = profilingInfo(p.event, CL_PROFILING_COMMAND_START);
      const cl_ulong end = profilingInfo(p.event, CL_PROFILING_COMMAND_END);
      clReleaseEvent(p.event);
      if (status < 0 || start == 0 || end == 0) continue;  // failed, or no times
      flagosTraceRecord& r = p.record;
      const char* fallback = nullptr;
      switch (type) {
        case CL_COMMAND_NDRANGE_KERNEL:
        case CL_COMMAND_TASK:
          r.kind = FLAGOS_TRACE_KERNEL;
          fallback = "kernel";
          break;
        case CL_COMMAND_READ_BUFFER:
        case CL_COMMAND_READ_BUFFER_RECT:
          r.kind = FLAGOS_TRACE_MEMCPY;
          fallback = "Memcpy DtoH";
          break;
        case CL_COMMAND_WRITE_BUFFER:
        case CL_COMMAND_WRITE_BUFFER_RECT:
          r.kind = FLAGOS_TRACE_MEMCPY;
          fallback = "Memcpy HtoD";
          break;
        case CL_COMMAND_COPY_BUFFER:
        case CL_COMMAND_COPY_BUFFER_RECT:
          r.kind = FLAGOS_TRACE_MEMCPY;
          fallback = "Memcpy DtoD";
          break;
        case CL_COMMAND_FILL_BUFFER:
          r.kind = FLAGOS_TRACE_MEMSET;
          fallback = "Memset";
          break;
        default:
          continue;  // markers, barriers: not device work
      }
      if (r.name[0] == '\0') std::strncpy(r.name, fallback, FLAGOS_TRACE_NAME_BYTES - 1);
      const size_t d = static_cast<size_t>(r.device);
      const int64_t offset = d < t.offset_ns.size() ? t.offset_ns[d] : 0;
      r.start_ns = static_cast<int64_t>(start) + offset;
      r.end_ns = static_cast<int64_t>(end) + offset;
      flagos_kit::trace::finish(r);
    }
    t.pending = std::move(running);
  }
};

}  // namespace

uint64_t nextStreamId() {
  static std::atomic<uint64_t> next{0};
  return ++next;
}

void traceCommand(flagosStream_t stream, cl_event event) {
  if (clRetainEvent(event) != CL_SUCCESS) return;
  // Kind and default name are known once the command type is read (collect).
  flagosTraceRecord r =
      flagos_kit::trace::begin(FLAGOS_TRACE_KERNEL, stream->device->index, stream->trace_id,
                               flagos_kit::trace::takeName(nullptr));
  Traced& t = traced();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.pending.size() >= flagos_kit::trace::kMaxRecords) {
    clReleaseEvent(event);  // bounded like the finished records
    return;
  }
  t.pending.push_back({event, r});
}

const flagosTraceTable* traceTable() {
  return flagos_kit::traceTable<Hooks>();
}

}  // namespace flagos_opencl
