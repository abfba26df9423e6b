// Streams: one in-order command queue each, created with
// CL_QUEUE_PROFILING_ENABLE so that markers carry timestamps for timing
// events (event.cpp). The stream remembers the event of the last command it
// enqueued: query looks at its status, synchronize waits for it, and a
// failure shows there (Note [Asynchronous errors] in opencl.h). A stream
// priority is only a hint in stream.h, and OpenCL 1.2 has none: ignored.
#include <algorithm>

#include "opencl.h"

// ------------------------------------------------------------ the queue

flagosStream_st::~flagosStream_st() {
  clFinish(queue);  // stream.h: destroy blocks until queued work completes
  if (last_ != nullptr) clReleaseEvent(last_);
  clReleaseCommandQueue(queue);
  magic = 0;  // a later call with this handle fails validStream (usually)
}

void flagosStream_st::replaceLast(cl_event event) {
  if (last_ != nullptr) clReleaseEvent(last_);
  last_ = event;
}

flagosStatus_t flagosStream_st::takeError(const char* call, cl_int status) {
  return flagos_opencl::fail(FLAGOS_ERROR_DEVICE,
                             "opencl %s: a command queued on device %d failed: %s", call,
                             device->index, flagos_opencl::clErrorName(status).c_str());
}

flagosStatus_t flagosStream_st::synchronize() {
  cl_event last = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (last_ == nullptr) return FLAGOS_SUCCESS;
    last = last_;
    clRetainEvent(last);  // wait without the lock: others may enqueue meanwhile
  }
  const cl_int waited = clWaitForEvents(1, &last);
  cl_int status = CL_COMPLETE;
  clGetEventInfo(last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  if (status == CL_COMPLETE && waited != CL_SUCCESS) status = waited;
  std::lock_guard<std::mutex> lock(mu_);
  if (last_ == last) replaceLast(nullptr);  // done (or reported below): nothing left to watch
  clReleaseEvent(last);
  return status < 0 ? takeError("streamSynchronize", status) : FLAGOS_SUCCESS;
}

flagosStatus_t flagosStream_st::query() {
  std::lock_guard<std::mutex> lock(mu_);
  if (last_ == nullptr) return FLAGOS_SUCCESS;
  clFlush(queue);  // some drivers start nothing until flushed
  cl_int status = CL_COMPLETE;
  const cl_int error =
      clGetEventInfo(last_, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, nullptr);
  if (error != CL_SUCCESS) status = error;
  if (status > CL_COMPLETE) return FLAGOS_ERROR_NOT_READY;  // queued, submitted or running
  replaceLast(nullptr);                                     // complete or failed: reported once
  return status < 0 ? takeError("streamQuery", status) : FLAGOS_SUCCESS;
}

namespace flagos_opencl {
namespace {

// The stream table (stream.h), one static member per entry; the members over
// OpenCL markers come from EventCalls (event.cpp).
// From the kit (events.h): streamSynchronize, streamQuery, eventCreate,
// eventDestroy (pending waits hold their own reference to the marker).
struct StreamCalls : EventCalls, flagos_kit::StreamCallsBase<findDevice> {
  static flagosStatus_t streamCreate(int32_t index, int32_t priority,
                                     flagosStream_t* stream) noexcept {
    return guard("streamCreate", [&] {
      (void)priority;  // a hint; OpenCL 1.2 queues have no priorities
      if (stream == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl streamCreate: stream is NULL");
      }
      *stream = nullptr;
      Device* device = findDevice("streamCreate", index);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      cl_int error = CL_SUCCESS;
      cl_command_queue queue =
          clCreateCommandQueue(device->context, device->info.id, CL_QUEUE_PROFILING_ENABLE, &error);
      if (queue == nullptr) {
        return fail(isOutOfMemory(error) ? FLAGOS_ERROR_OUT_OF_MEMORY : FLAGOS_ERROR_DEVICE,
                    "opencl streamCreate: clCreateCommandQueue on device %d failed: %s", index,
                    clErrorName(error).c_str());
      }
      auto created = std::make_unique<flagosStream_st>(device, queue);
      std::lock_guard<std::mutex> lock(device->streams_mutex);
      device->streams.push_back(created.get());
      *stream = created.release();
      return FLAGOS_SUCCESS;
    });
  }

  static flagosStatus_t streamDestroy(flagosStream_t stream) noexcept {
    return guard("streamDestroy", [&] {
      if (!validStream("streamDestroy", stream)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      Device* device = stream->device;
      {
        std::lock_guard<std::mutex> lock(device->streams_mutex);
        auto& streams = device->streams;
        streams.erase(std::remove(streams.begin(), streams.end(), stream), streams.end());
      }
      delete stream;  // finishes the queue first
      return FLAGOS_SUCCESS;
    });
  }
};

}  // namespace

const flagosStreamTable* streamTable() {
  return flagos_kit::streamTable<StreamCalls>();
}

}  // namespace flagos_opencl
