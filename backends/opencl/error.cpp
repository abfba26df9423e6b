// The per-thread last-error message (vendor.h: "on failure leaves a
// human-readable message for the calling thread") and names for OpenCL's
// error codes, so that every message carries the SDK's own reason.
//
// As in the host plugin (Note [Last error lifetime] there): a failing call
// overwrites the calling thread's message, a successful call leaves it, and
// the pointer getLastError() returns stays valid until this thread's next
// failing call into the plugin. Build logs make some messages long; they are
// kept whole.
#include <cstdarg>
#include <cstdio>
#include <string>

#include "opencl.h"

namespace flagos_opencl {
namespace {

thread_local std::string t_last_error;

const char* knownName(cl_int error) {
  switch (error) {
#define FLAGOS_CL_NAME(code) \
  case code:                 \
    return #code;
    FLAGOS_CL_NAME(CL_SUCCESS)
    FLAGOS_CL_NAME(CL_DEVICE_NOT_FOUND)
    FLAGOS_CL_NAME(CL_DEVICE_NOT_AVAILABLE)
    FLAGOS_CL_NAME(CL_COMPILER_NOT_AVAILABLE)
    FLAGOS_CL_NAME(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    FLAGOS_CL_NAME(CL_OUT_OF_RESOURCES)
    FLAGOS_CL_NAME(CL_OUT_OF_HOST_MEMORY)
    FLAGOS_CL_NAME(CL_PROFILING_INFO_NOT_AVAILABLE)
    FLAGOS_CL_NAME(CL_MEM_COPY_OVERLAP)
    FLAGOS_CL_NAME(CL_BUILD_PROGRAM_FAILURE)
    FLAGOS_CL_NAME(CL_MAP_FAILURE)
    FLAGOS_CL_NAME(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    FLAGOS_CL_NAME(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    FLAGOS_CL_NAME(CL_COMPILE_PROGRAM_FAILURE)
    FLAGOS_CL_NAME(CL_LINKER_NOT_AVAILABLE)
    FLAGOS_CL_NAME(CL_LINK_PROGRAM_FAILURE)
    FLAGOS_CL_NAME(CL_INVALID_VALUE)
    FLAGOS_CL_NAME(CL_INVALID_DEVICE_TYPE)
    FLAGOS_CL_NAME(CL_INVALID_PLATFORM)
    FLAGOS_CL_NAME(CL_INVALID_DEVICE)
    FLAGOS_CL_NAME(CL_INVALID_CONTEXT)
    FLAGOS_CL_NAME(CL_INVALID_QUEUE_PROPERTIES)
    FLAGOS_CL_NAME(CL_INVALID_COMMAND_QUEUE)
    FLAGOS_CL_NAME(CL_INVALID_HOST_PTR)
    FLAGOS_CL_NAME(CL_INVALID_MEM_OBJECT)
    FLAGOS_CL_NAME(CL_INVALID_BINARY)
    FLAGOS_CL_NAME(CL_INVALID_BUILD_OPTIONS)
    FLAGOS_CL_NAME(CL_INVALID_PROGRAM)
    FLAGOS_CL_NAME(CL_INVALID_PROGRAM_EXECUTABLE)
    FLAGOS_CL_NAME(CL_INVALID_KERNEL_NAME)
    FLAGOS_CL_NAME(CL_INVALID_KERNEL_DEFINITION)
    FLAGOS_CL_NAME(CL_INVALID_KERNEL)
    FLAGOS_CL_NAME(CL_INVALID_ARG_INDEX)
    FLAGOS_CL_NAME(CL_INVALID_ARG_VALUE)
    FLAGOS_CL_NAME(CL_INVALID_ARG_SIZE)
    FLAGOS_CL_NAME(CL_INVALID_KERNEL_ARGS)
    FLAGOS_CL_NAME(CL_INVALID_WORK_DIMENSION)
    FLAGOS_CL_NAME(CL_INVALID_WORK_GROUP_SIZE)
    FLAGOS_CL_NAME(CL_INVALID_WORK_ITEM_SIZE)
    FLAGOS_CL_NAME(CL_INVALID_GLOBAL_OFFSET)
    FLAGOS_CL_NAME(CL_INVALID_EVENT_WAIT_LIST)
    FLAGOS_CL_NAME(CL_INVALID_EVENT)
    FLAGOS_CL_NAME(CL_INVALID_OPERATION)
    FLAGOS_CL_NAME(CL_INVALID_BUFFER_SIZE)
    FLAGOS_CL_NAME(CL_INVALID_GLOBAL_WORK_SIZE)
    FLAGOS_CL_NAME(CL_INVALID_PROPERTY)
    FLAGOS_CL_NAME(CL_INVALID_COMPILER_OPTIONS)
    FLAGOS_CL_NAME(CL_INVALID_LINKER_OPTIONS)
    FLAGOS_CL_NAME(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef FLAGOS_CL_NAME
    case -1001:  // cl_khr_icd: the loader found no installable client driver
      return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
      return nullptr;
  }
}

}  // namespace

flagosStatus_t fail(flagosStatus_t status, const char* format, ...) noexcept {
  char buffer[512];
  va_list args;
  va_start(args, format);
  const int length = std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  try {
    if (length >= static_cast<int>(sizeof(buffer))) {  // build logs, long names
      std::string message(static_cast<size_t>(length) + 1, '\0');
      va_start(args, format);
      std::vsnprintf(&message[0], message.size(), format, args);
      va_end(args);
      message.resize(static_cast<size_t>(length));
      t_last_error = std::move(message);
    } else {
      t_last_error.assign(buffer, length > 0 ? static_cast<size_t>(length) : 0);
    }
  } catch (...) {
    // Out of host memory while reporting an error: keep the old message
    // rather than throw across the ABI; the status code still tells.
  }
  return status;
}

const char* lastError() noexcept {
  return t_last_error.c_str();
}

std::string clErrorName(cl_int error) {
  const char* name = knownName(error);
  return std::string(name != nullptr ? name : "OpenCL error") + " (" + std::to_string(error) + ")";
}

bool isOutOfMemory(cl_int error) {
  return error == CL_MEM_OBJECT_ALLOCATION_FAILURE || error == CL_OUT_OF_RESOURCES ||
         error == CL_OUT_OF_HOST_MEMORY;
}

}  // namespace flagos_opencl
