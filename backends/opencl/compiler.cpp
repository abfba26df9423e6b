// The compiler table (language "opencl-c"): programs built from OpenCL C
// source or loaded from a binary. Kernel launches, the table's last member,
// are in launch.cpp (Note [Device pointer arguments]).
//
// Binaries (programGetBinary) are the driver's CL_PROGRAM_BINARIES in the
// plugin kit's envelope (kit/flagos_kit/program_binary.h): magic "FLGOCLB1",
// and the key is the device key (deviceKey()). programLoadBinary checks it
// before the driver sees a byte, so a truncated, corrupted or foreign file
// is FLAGOS_ERROR_COMPILE rather than a driver crash.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "flagos_kit/program_binary.h"
#include "opencl.h"

namespace flagos_opencl {
namespace {

constexpr char kBinaryMagic[8] = {'F', 'L', 'G', 'O', 'C', 'L', 'B', '1'};

uint64_t deviceHash(const Device& device) {
  const std::string key = deviceKey(device.info);
  return fnv1a(key.data(), key.size());
}

// Builds @p program (from source or binary) for @p device; on failure
// releases it and returns FLAGOS_ERROR_COMPILE with the build log.
flagosStatus_t buildFor(const char* call, Device* device, cl_program program, const char* options,
                        flagosProgram_t* out) {
  const cl_int error = clBuildProgram(program, 1, &device->info.id, options, nullptr, nullptr);
  if (error != CL_SUCCESS) {
    const std::string log = buildLog(program, device->info.id);
    clReleaseProgram(program);
    return fail(FLAGOS_ERROR_COMPILE, "opencl %s: build failed on device %d (%s): %s\n%s", call,
                device->index, device->info.name.c_str(), clErrorName(error).c_str(), log.c_str());
  }
  *out = new flagosProgram_st(device, program);
  return FLAGOS_SUCCESS;
}

flagosStatus_t serialize(flagosProgram_t program) {
  if (!program->binary.empty()) return FLAGOS_SUCCESS;
  size_t payload_bytes = 0;  // one device per program
  cl_int error = clGetProgramInfo(program->program, CL_PROGRAM_BINARY_SIZES, sizeof(payload_bytes),
                                  &payload_bytes, nullptr);
  if (error != CL_SUCCESS) {
    return fail(FLAGOS_ERROR_DEVICE, "opencl programGetBinary: CL_PROGRAM_BINARY_SIZES: %s",
                clErrorName(error).c_str());
  }
  if (payload_bytes == 0) {
    return fail(FLAGOS_ERROR_NOT_SUPPORTED,
                "opencl programGetBinary: the driver of device %d offers no program binary",
                program->device->index);
  }
  std::vector<unsigned char> bytes(payload_bytes);
  unsigned char* payload = bytes.data();
  error =
      clGetProgramInfo(program->program, CL_PROGRAM_BINARIES, sizeof(payload), &payload, nullptr);
  if (error != CL_SUCCESS) {
    return fail(FLAGOS_ERROR_DEVICE, "opencl programGetBinary: CL_PROGRAM_BINARIES: %s",
                clErrorName(error).c_str());
  }
  program->binary =
      flagos_kit::wrapBinary(kBinaryMagic, payload, payload_bytes, deviceHash(*program->device));
  return FLAGOS_SUCCESS;
}

// The compiler table (compiler.h), one static member per entry.
struct CompilerCalls {
  static flagosStatus_t programBuild(int32_t index, const char* source, const char* options,
                                     flagosProgram_t* program) noexcept {
    return guard("programBuild", [&] {
      const CompileLock compiling(CompileLock::kYield);
      if (program == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl programBuild: program is NULL");
      }
      *program = nullptr;
      if (source == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl programBuild: source is NULL");
      }
      Device* device = findDevice("programBuild", index);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      cl_int error = CL_SUCCESS;
      cl_program built = clCreateProgramWithSource(device->context, 1, &source, nullptr, &error);
      if (built == nullptr) {
        return fail(isOutOfMemory(error) ? FLAGOS_ERROR_OUT_OF_MEMORY : FLAGOS_ERROR_DEVICE,
                    "opencl programBuild: clCreateProgramWithSource failed: %s",
                    clErrorName(error).c_str());
      }
      return buildFor("programBuild", device, built, options != nullptr ? options : "", program);
    });
  }

  // The header + payload of @p program, made once; mu held.
  static flagosStatus_t programGetBinary(flagosProgram_t program, void* buffer,
                                         uint64_t* size) noexcept {
    return guard("programGetBinary", [&] {
      const CompileLock compiling;
      if (!validProgram("programGetBinary", program)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      if (size == nullptr) return flagos_kit::copyOut("programGetBinary", nullptr, 0, buffer, size);
      std::lock_guard<std::mutex> lock(program->mu);
      const flagosStatus_t status = serialize(program);
      if (status != FLAGOS_SUCCESS) return status;
      return flagos_kit::copyOut("programGetBinary", program->binary.data(), program->binary.size(),
                                 buffer, size);
    });
  }

  static flagosStatus_t programLoadBinary(int32_t index, const void* binary, uint64_t size,
                                          flagosProgram_t* program) noexcept {
    return guard("programLoadBinary", [&] {
      const CompileLock compiling(CompileLock::kYield);
      if (program == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl programLoadBinary: program is NULL");
      }
      *program = nullptr;
      if (binary == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "opencl programLoadBinary: binary is NULL");
      }
      Device* device = findDevice("programLoadBinary", index);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      std::string why;
      const unsigned char* payload = nullptr;
      size_t payload_bytes = 0;
      if (!flagos_kit::unwrapBinary(
              kBinaryMagic, "flagos OpenCL binary", deviceHash(*device),
              "device or driver (this one is " + deviceKey(device->info) + ")", binary, size,
              &payload, &payload_bytes, &why)) {
        return fail(FLAGOS_ERROR_COMPILE, "opencl programLoadBinary: binary rejected: %s",
                    why.c_str());
      }
      cl_int binary_status = CL_SUCCESS, error = CL_SUCCESS;
      cl_program loaded = clCreateProgramWithBinary(
          device->context, 1, &device->info.id, &payload_bytes, &payload, &binary_status, &error);
      if (loaded == nullptr) {
        return fail(
            FLAGOS_ERROR_COMPILE,
            "opencl programLoadBinary: the driver rejected the binary: %s (binary status %s)",
            clErrorName(error).c_str(), clErrorName(binary_status).c_str());
      }
      return buildFor("programLoadBinary", device, loaded, "", program);
    });
  }

  static flagosStatus_t programDestroy(flagosProgram_t program) noexcept {
    return guard("programDestroy", [&] {
      if (!validProgram("programDestroy", program)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      program->magic = 0;
      delete program;
      return FLAGOS_SUCCESS;
    });
  }

  static constexpr const char* language = "opencl-c";
  static constexpr auto kernelLaunch = flagos_opencl::kernelLaunch;  // launch.cpp
};

}  // namespace

std::string buildLog(cl_program program, cl_device_id device) {
  size_t size = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) !=
          CL_SUCCESS ||
      size == 0) {
    return "(no build log)";
  }
  std::string log(size, '\0');
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, &log[0], nullptr);
  log.resize(std::min(log.find('\0'), log.size()));
  return log.empty() ? "(empty build log)" : log;
}

bool validProgram(const char* call, flagosProgram_t program) noexcept {
  return flagos_kit::validHandle(call, "program", program, kProgramMagic);
}

const flagosCompilerTable* compilerTable() {
  return flagos_kit::compilerTable<CompilerCalls>();
}

namespace {
std::atomic<bool> g_serialize_compiles{false};
std::atomic<int> g_compile_waiters{0};
std::recursive_mutex& compileMutex() {
  static std::recursive_mutex* mu = new std::recursive_mutex();  // used until exit
  return *mu;
}
}  // namespace

void setSerializeCompiles(bool on) {
  g_serialize_compiles.store(on);
}

CompileLock::CompileLock(Priority priority)
    : held_(g_serialize_compiles.load(std::memory_order_relaxed)) {
  if (!held_) return;
  if (priority == kBackground) {  // the warm-up waited for the callers itself
    compileMutex().lock();
    return;
  }
  // Note [Launches without the compile lock]: builds and loads go after
  // the launches and builds already waiting.
  while (priority == kYield && g_compile_waiters.load() > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  g_compile_waiters.fetch_add(1);
  compileMutex().lock();
  g_compile_waiters.fetch_sub(1);
}
int compileWaiters() {
  return g_compile_waiters.load();
}
void waitIfFirst(const std::optional<CompileLock>& lock, cl_event event) {
  if (event == nullptr) return;
  // A failed command is the stream's error, reported by its next sync.
  if (lock && lock->held()) clWaitForEvents(1, &event);
  clReleaseEvent(event);
}
CompileLock::~CompileLock() {
  if (held_) compileMutex().unlock();
}

}  // namespace flagos_opencl
