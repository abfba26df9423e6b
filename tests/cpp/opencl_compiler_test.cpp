// Behaviour specific to the opencl plugin, run by the opencl_plugin_test
// executable (the conformance harness, conformance_main.cpp, with the opencl
// plugin as its default): the compiler table (OpenCL C programs, binaries,
// the two-argument device pointer convention of Note [Device pointer
// arguments] in backends/opencl/compiler.cpp), identity and priority, and
// the virtual address space (Note [Virtual device addresses]). A build is
// slow on PoCL, so the suite builds one program and shares it.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "conformance.h"

namespace conformance {
namespace {

// Every DEVICE_PTR is (base, byte offset); see Note [Device pointer arguments].
constexpr const char* kSource = R"CL(
#define PTR(T, name) ((__global T*)((__global char*)name##_base + name##_off))

__kernel void vadd(__global float* a_base, ulong a_off, __global float* b_base, ulong b_off,
                   __global float* out_base, ulong out_off, uint n) {
  __global const float* a = PTR(const float, a);
  __global const float* b = PTR(const float, b);
  __global float* out = PTR(float, out);
  size_t i = get_global_id(0);
  if (i < n) out[i] = a[i] + b[i];
}

// Writes 1 to flag[0] if p arrived as NULL, else 2 + its byte offset.
__kernel void probe_ptr(__global int* p_base, ulong p_off, __global int* flag_base,
                        ulong flag_off) {
  __global int* flag = PTR(int, flag);
  flag[0] = p_base == 0 ? 1 : 2 + (int)p_off;
}
)CL";

// The suite's one program built from source, shared by the tests.
class OpenclCompiler : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (tables().compiler == nullptr) return;
    program_ = buildSuiteProgram(kSource, "-cl-std=CL1.2");
  }
  static void TearDownTestSuite() { destroySuiteProgram(program_); }
  void SetUp() override {
    if (std::strcmp(tables().name, "opencl") != 0) GTEST_SKIP() << "opencl plugin only";
    ASSERT_NE(nullptr, tables().compiler);
    ASSERT_NE(nullptr, program_) << "the shared program did not build";
  }

  static flagosProgram_t program_;
};
flagosProgram_t OpenclCompiler::program_ = nullptr;

flagosKernelArg ptrArg(void* const* address) {
  return {FLAGOS_ARG_DEVICE_PTR, sizeof(void*), address};
}

// Runs vadd over n floats at byte offsets inside ONE allocation and checks
// the result and the bytes around it.
void checkVectorAdd(flagosProgram_t program, const uint64_t* local) {
  constexpr uint32_t kN = 1000;  // not a multiple of any work-group size
  constexpr uint64_t kA = 4 * 17, kB = kA + 4 * kN + 4 * 3, kOut = kB + 4 * kN + 4 * 5;
  constexpr uint64_t kBytes = kOut + 4 * kN + 256;
  Stream s(0);
  DeviceBuffer buf(0, kBytes);
  ASSERT_TRUE(s.get() && buf.get());
  std::vector<float> host(kBytes / 4, -7.0f);
  for (uint32_t i = 0; i < kN; ++i) {
    host[kA / 4 + i] = static_cast<float>(i);
    host[kB / 4 + i] = 0.5f * static_cast<float>(i);
  }
  FLAGOS_ASSERT_OK(mem().memcpy(buf.get(), host.data(), kBytes, FLAGOS_MEMCPY_HOST_TO_DEVICE));
  void* a = buf.get() + kA;
  void* b = buf.get() + kB;
  void* out = buf.get() + kOut;
  const uint32_t n = kN;
  const flagosKernelArg args[] = {
      ptrArg(&a), ptrArg(&b), ptrArg(&out), {FLAGOS_ARG_BYTES, sizeof(n), &n}};
  const uint64_t global = kN;
  FLAGOS_ASSERT_OK(cc().kernelLaunch(program, "vadd", args, 4, 1, &global, local, s.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  std::vector<float> got(kBytes / 4);
  FLAGOS_ASSERT_OK(mem().memcpy(got.data(), buf.get(), kBytes, FLAGOS_MEMCPY_DEVICE_TO_HOST));
  for (uint32_t i = 0; i < kN; ++i) {
    ASSERT_EQ(1.5f * static_cast<float>(i), got[kOut / 4 + i]) << "element " << i;
  }
  for (uint64_t i = kOut / 4 - 5; i < kOut / 4; ++i) ASSERT_EQ(-7.0f, got[i]) << "before out";
  for (uint64_t i = kOut / 4 + kN; i < kBytes / 4; ++i) ASSERT_EQ(-7.0f, got[i]) << "after out";
}

TEST_F(OpenclCompiler, VectorAddAtOffsetsInsideOneBuffer) {
  checkVectorAdd(program_, nullptr);  // the driver chooses the work-group size
  const uint64_t local = 64;          // global 1000 is rounded up to 1024
  checkVectorAdd(program_, &local);
}

TEST_F(OpenclCompiler, BinaryRoundTrip) {
  const std::vector<char> binary = programBinary(program_);
  ASSERT_FALSE(binary.empty());
  flagosProgram_t loaded = nullptr;
  FLAGOS_ASSERT_OK(cc().programLoadBinary(0, binary.data(), binary.size(), &loaded));
  ASSERT_NE(nullptr, loaded);
  checkVectorAdd(loaded, nullptr);
  FLAGOS_EXPECT_OK(cc().programDestroy(loaded));
}

TEST_F(OpenclCompiler, BrokenSourceIsACompileError) {
  flagosProgram_t broken = nullptr;
  FLAGOS_EXPECT_STATUS(
      FLAGOS_ERROR_COMPILE,
      cc().programBuild(0, "__kernel void k(__global int* p) { p[0] = ; }", "", &broken));
  EXPECT_EQ(nullptr, broken);
  EXPECT_NE(std::string::npos, lastError().find("error")) << "the build log: " << lastError();
}

TEST_F(OpenclCompiler, BadBinariesAreCompileErrors) {
  flagosProgram_t loaded = nullptr;
  std::vector<char> garbage(4096);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 131 + 7);
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE,
                       cc().programLoadBinary(0, garbage.data(), garbage.size(), &loaded));
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE, cc().programLoadBinary(0, garbage.data(), 3, &loaded));
  FLAGOS_EXPECT_INVALID(cc().programLoadBinary(0, nullptr, 16, &loaded));

  uint64_t size = 0;
  FLAGOS_ASSERT_OK(cc().programGetBinary(program_, nullptr, &size));
  std::vector<char> real(size);
  FLAGOS_ASSERT_OK(cc().programGetBinary(program_, real.data(), &size));
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE,
                       cc().programLoadBinary(0, real.data(), size - 100, &loaded))
      << "truncated";
  std::vector<char> flipped = real;
  flipped[size / 2] = static_cast<char>(flipped[size / 2] ^ 0x5a);
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE,
                       cc().programLoadBinary(0, flipped.data(), size, &loaded))
      << "corrupted";

  // A well-formed header around garbage reaches the driver, which must
  // refuse it (header: magic, payload bytes, FNV-1a of the payload, FNV-1a
  // of the device key; see backends/opencl/compiler.cpp).
  std::vector<char> forged = real;
  for (size_t i = 32; i < size; ++i) forged[i] = static_cast<char>(i * 31 + 1);
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 32; i < size; ++i)
    hash = (hash ^ static_cast<uint8_t>(forged[i])) * 0x100000001b3ull;
  std::memcpy(forged.data() + 16, &hash, sizeof(hash));
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE,
                       cc().programLoadBinary(0, forged.data(), size, &loaded))
      << "garbage payload";
  std::vector<char> foreign = real;
  foreign[24] = static_cast<char>(foreign[24] ^ 1);  // another device key
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE,
                       cc().programLoadBinary(0, foreign.data(), size, &loaded))
      << "foreign device";
  EXPECT_NE(std::string::npos, lastError().find("another device")) << lastError();
  EXPECT_EQ(nullptr, loaded);
}

TEST_F(OpenclCompiler, NullAndOnePastTheEndPointers) {
  Stream s(0);
  DeviceBuffer flag(0, 256), other(0, 1024);
  ASSERT_TRUE(s.get() && flag.get() && other.get());
  void* flag_ptr = flag.get();
  int32_t got = 0;
  auto run = [&](void* p) {
    const flagosKernelArg args[] = {ptrArg(&p), ptrArg(&flag_ptr)};
    const uint64_t global = 1;
    FLAGOS_EXPECT_OK(
        cc().kernelLaunch(program_, "probe_ptr", args, 2, 1, &global, nullptr, s.get()));
    FLAGOS_EXPECT_OK(mem().memcpyAsync(&got, flag_ptr, 4, FLAGOS_MEMCPY_DEVICE_TO_HOST, s.get()));
    FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
    return got;
  };
  EXPECT_EQ(1, run(nullptr)) << "a NULL address arrives as a NULL base";
  EXPECT_EQ(2 + 100, run(other.get() + 100)) << "the byte offset arrives as the second argument";
  EXPECT_EQ(2 + 1024, run(other.get() + 1024)) << "one past the end is a valid address";
}

TEST_F(OpenclCompiler, LaunchRejectsBadArguments) {
  Stream s(0);
  DeviceBuffer buf(0, 1024);
  void* p = buf.get();
  static char host_memory[64];
  void* not_device = host_memory;
  const flagosKernelArg good[] = {ptrArg(&p), ptrArg(&p)};
  const flagosKernelArg bad_ptr[] = {ptrArg(&not_device), ptrArg(&p)};
  void* past = buf.get() + 1025;
  const flagosKernelArg past_end[] = {ptrArg(&past), ptrArg(&p)};
  const uint64_t global = 1, zero_local = 0;
  FLAGOS_EXPECT_INVALID(cc().kernelLaunch(program_, "nope", good, 2, 1, &global, nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(
      cc().kernelLaunch(program_, "probe_ptr", good, 1, 1, &global, nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(
      cc().kernelLaunch(program_, "probe_ptr", bad_ptr, 2, 1, &global, nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(
      cc().kernelLaunch(program_, "probe_ptr", past_end, 2, 1, &global, nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(
      cc().kernelLaunch(program_, "probe_ptr", good, 2, 0, &global, nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(
      cc().kernelLaunch(program_, "probe_ptr", good, 2, 1, nullptr, nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(
      cc().kernelLaunch(program_, "probe_ptr", good, 2, 1, &global, &zero_local, s.get()));
  FLAGOS_EXPECT_INVALID(
      cc().kernelLaunch(program_, "probe_ptr", good, 2, 1, &global, nullptr, nullptr));
  FLAGOS_EXPECT_INVALID(
      cc().kernelLaunch(nullptr, "probe_ptr", good, 2, 1, &global, nullptr, s.get()));
  flagosProgram_t out = nullptr;
  FLAGOS_EXPECT_INVALID(cc().programBuild(0, nullptr, "", &out));
  FLAGOS_EXPECT_INVALID(cc().programBuild(deviceCount(), kSource, "", &out));
  FLAGOS_EXPECT_INVALID(cc().programDestroy(nullptr));
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
}

// clSetKernelArg is not thread-safe per kernel object: the plugin serializes
// setting arguments and enqueueing. Four threads launch the same kernel with
// their own buffers and streams.
TEST_F(OpenclCompiler, ConcurrentLaunchesOfOneKernel) {
  constexpr int kThreads = 4, kRounds = 16;
  std::vector<std::thread> threads;
  std::vector<int> ok(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Stream s(0);
      DeviceBuffer target(0, 1024), flag(0, 256);
      void* p = target.get() + 4 * t;
      void* f = flag.get();
      int32_t got = 0;
      bool all = true;
      for (int round = 0; round < kRounds; ++round) {
        const flagosKernelArg args[] = {ptrArg(&p), ptrArg(&f)};
        const uint64_t global = 1;
        all = all && cc().kernelLaunch(program_, "probe_ptr", args, 2, 1, &global, nullptr,
                                       s.get()) == FLAGOS_SUCCESS;
        all = all && mem().memcpyAsync(&got, f, 4, FLAGOS_MEMCPY_DEVICE_TO_HOST, s.get()) ==
                         FLAGOS_SUCCESS;
        all = all && str().streamSynchronize(s.get()) == FLAGOS_SUCCESS && got == 2 + 4 * t;
      }
      ok[t] = all;
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(ok[t]) << "thread " << t;
}

// ------------------------------------------------ identity and priority ---

class Opencl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::strcmp(tables().name, "opencl") != 0) GTEST_SKIP() << "opencl plugin only";
  }
};

// Does this machine have an OpenCL GPU or accelerator (asked directly)?
bool machineHasAccelerator() {
  cl_uint count = 0;
  if (clGetPlatformIDs(0, nullptr, &count) != CL_SUCCESS || count == 0) return false;
  std::vector<cl_platform_id> platforms(count);
  clGetPlatformIDs(count, platforms.data(), nullptr);
  for (cl_platform_id platform : platforms) {
    cl_uint devices = 0;
    const cl_device_type mask =
        CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR | CL_DEVICE_TYPE_CUSTOM;
    if (clGetDeviceIDs(platform, mask, 0, nullptr, &devices) == CL_SUCCESS && devices > 0) {
      return true;
    }
  }
  return false;
}

// What Tables.VersionAndIdentity checks, with this plugin's priority rule
// (Note [OpenCL plugin priority] in backends/opencl/entry.cpp).
TEST_F(Opencl, IdentityAndPriority) {
  const flagosVendorTables& t = tables();
  EXPECT_EQ(0, t.host_addressable);
  // The kernel table exists only when the plugin was built with CLBlast
  // (backends/opencl/kernels/, tested by opencl_kernels_test.cpp).
  if (t.kernels != nullptr) {
    EXPECT_GT(t.kernels->num_entries, 0);
  }
  EXPECT_EQ(nullptr, t.collectives);
  ASSERT_NE(nullptr, t.compiler);
  EXPECT_STREQ("opencl-c", t.compiler->language);
  const char* type = std::getenv("FLAGOS_OPENCL_DEVICE_TYPE");
  const bool cpu_only = (type != nullptr && std::string(type) == "cpu") || !machineHasAccelerator();
  EXPECT_EQ(FLAGOS_PRIORITY_ACCELERATOR, t.priority);
  EXPECT_EQ(cpu_only ? FLAGOS_PRIORITY_CPU_HOSTED - 5 : 0, plugin().probe.priority);

  EXPECT_STREQ("OpenCL", plugin().probe.sdk_name);
  EXPECT_EQ(0, std::strncmp(plugin().probe.sdk_version, "OpenCL ", 7))
      << "the platform version: " << plugin().probe.sdk_version;
  flagosDeviceProperties props{};
  props.struct_size = sizeof(props);
  FLAGOS_ASSERT_OK(dev().getProperties(0, &props));
  EXPECT_EQ(0, std::strncmp(props.arch, "opencl:", 7)) << props.arch;
  EXPECT_GE(props.capability_major * 100 + props.capability_minor, 102) << "OpenCL 1.2+";
}

TEST_F(Opencl, ProbeReportsGarbageEnvironment) {
  for (const char* name :
       {"FLAGOS_OPENCL_DEVICE_TYPE", "FLAGOS_OPENCL_MEMORY_LIMIT", "FLAGOS_OPENCL_SMALL_GEMM"}) {
    const char* old = std::getenv(name);
    const std::string saved = old != nullptr ? old : "";
    setenv(name, "garbage", 1);
    flagosProbeInfo info{};
    info.struct_size = sizeof(info);
    FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NO_DEVICE, dev().probe(&info));
    EXPECT_NE(std::string::npos, std::string(info.reason).find(name)) << info.reason;
    if (old != nullptr) {
      setenv(name, saved.c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
}

// ------------------------------------------------------ virtual addresses ---

TEST_F(Opencl, FreeTakesOnlyTheBaseAddress) {
  void* p = nullptr;
  FLAGOS_ASSERT_OK(mem().malloc(0, 4096, &p));
  FLAGOS_EXPECT_INVALID(mem().free(0, static_cast<char*>(p) + 256));
  FLAGOS_EXPECT_INVALID(mem().free(0, static_cast<char*>(p) + 4096));
  FLAGOS_EXPECT_OK(mem().free(0, p));
}

TEST_F(Opencl, RangesMustStayInsideOneAllocation) {
  DeviceBuffer a(0, 1000), b(0, 1000);
  ASSERT_TRUE(a.get() && b.get());
  EXPECT_NE(a.get() + 1000, b.get()) << "a gap separates allocations";
  std::vector<uint8_t> host(2000);
  FLAGOS_EXPECT_INVALID(mem().memcpy(a.get() + 1, host.data(), 1000, FLAGOS_MEMCPY_HOST_TO_DEVICE));
  FLAGOS_EXPECT_INVALID(mem().memcpy(host.data(), a.get() - 1, 2, FLAGOS_MEMCPY_DEVICE_TO_HOST));
  FLAGOS_EXPECT_OK(mem().memcpy(host.data(), a.get() + 999, 1, FLAGOS_MEMCPY_DEVICE_TO_HOST));
  char on_stack[16];
  FLAGOS_EXPECT_INVALID(mem().memcpy(on_stack, host.data(), 16, FLAGOS_MEMCPY_HOST_TO_DEVICE));
}

// Overlapping device-to-device copies inside one allocation behave like
// memmove (clEnqueueCopyBuffer alone refuses them).
TEST_F(Opencl, OverlappingCopiesAreMemmoves) {
  constexpr uint64_t kBytes = 4096;
  Stream s(0);
  DeviceBuffer buf(0, kBytes + 512);
  ASSERT_TRUE(s.get() && buf.get());
  const auto data = pattern(kBytes + 512, 3);
  upload(buf.get(), data);
  FLAGOS_ASSERT_OK(
      mem().memcpy(buf.get() + 100, buf.get(), kBytes, FLAGOS_MEMCPY_DEVICE_TO_DEVICE));
  auto expected = data;
  std::memmove(expected.data() + 100, expected.data(), kBytes);
  EXPECT_TRUE(download(buf.get(), kBytes + 512) == expected) << "forward overlap";
  FLAGOS_ASSERT_OK(mem().memcpyAsync(buf.get(), buf.get() + 300, kBytes,
                                     FLAGOS_MEMCPY_DEVICE_TO_DEVICE, s.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  std::memmove(expected.data(), expected.data() + 300, kBytes);
  EXPECT_TRUE(download(buf.get(), kBytes + 512) == expected) << "backward overlap";
}

// clEnqueueFillBuffer needs the offset to be a multiple of the pattern
// size; the plugin splits misaligned fills.
TEST_F(Opencl, FillAtMisalignedOffsets) {
  constexpr uint64_t kBytes = 256;
  Stream s(0);
  DeviceBuffer buf(0, kBytes);
  ASSERT_TRUE(s.get() && buf.get());
  const uint8_t value[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (uint32_t size : {2u, 4u, 8u}) {
    for (uint64_t offset : {uint64_t{1}, uint64_t{3}, uint64_t{6}}) {
      for (uint64_t count : {uint64_t{1}, uint64_t{5}}) {
        upload(buf.get(), std::vector<uint8_t>(kBytes, 0xEE));
        FLAGOS_ASSERT_OK(mem().memFill(buf.get() + offset, value, size, count, s.get()));
        FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
        const auto got = download(buf.get(), kBytes);
        for (uint64_t i = 0; i < kBytes; ++i) {
          const bool inside = i >= offset && i < offset + count * size;
          const uint8_t want = inside ? value[(i - offset) % size] : 0xEE;
          ASSERT_EQ(want, got[i]) << "size " << size << " offset " << offset << " count " << count
                                  << " byte " << i;
        }
      }
    }
  }
}

// Runs under the opencl_plugin_memory_limit entry
// (FLAGOS_OPENCL_MEMORY_LIMIT=4MiB): the limit is the device's size and
// malloc says OUT_OF_MEMORY at it, naming the numbers.
TEST_F(Opencl, MemoryLimitIsHonoured) {
  const char* limit = std::getenv("FLAGOS_OPENCL_MEMORY_LIMIT");
  if (limit == nullptr || std::string(limit) != "4MiB") {
    GTEST_SKIP() << "needs FLAGOS_OPENCL_MEMORY_LIMIT=4MiB";
  }
  constexpr uint64_t kMiB = 1 << 20;
  uint64_t free_bytes = 0, total = 0;
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &free_bytes, &total));
  EXPECT_EQ(4 * kMiB, total);
  ASSERT_EQ(total, free_bytes) << "nothing else allocated";
  void* blocks[4] = {};
  for (auto& block : blocks) FLAGOS_ASSERT_OK(mem().malloc(0, kMiB, &block));
  FLAGOS_ASSERT_OK(mem().memGetInfo(0, &free_bytes, &total));
  EXPECT_EQ(0u, free_bytes);
  void* more = nullptr;
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_OUT_OF_MEMORY, mem().malloc(0, 1, &more));
  EXPECT_NE(std::string::npos, lastError().find("out of memory")) << lastError();
  FLAGOS_EXPECT_OK(mem().free(0, blocks[2]));
  FLAGOS_EXPECT_OK(mem().malloc(0, kMiB, &blocks[2]));
  for (auto* block : blocks) FLAGOS_EXPECT_OK(mem().free(0, block));
}

// ------------------------------------------------ two devices (contexts) ---

// Under the opencl_plugin_two_devices entry (POCL_DEVICES="pthread
// pthread"): copies between devices go through the host, a stream of one
// device waits on an event of the other through a user event.
TEST_F(Opencl, CopiesAndWaitsAcrossDevices) {
  if (deviceCount() < 2) GTEST_SKIP() << "needs 2 devices (POCL_DEVICES=\"pthread pthread\")";
  constexpr uint64_t kBytes = (1 << 20) + 3;
  Stream s0(0), s1(1);
  Event e0(0, FLAGOS_EVENT_DEFAULT);
  DeviceBuffer a(0, kBytes + 8), b(1, kBytes + 8), scratch(0, 16 << 20);
  ASSERT_TRUE(s0.get() && s1.get() && e0.get() && a.get() && b.get() && scratch.get());
  const auto data = pattern(kBytes, 11);
  upload(a.get() + 5, data);
  FLAGOS_ASSERT_OK(mem().memcpy(b.get() + 1, a.get() + 5, kBytes, FLAGOS_MEMCPY_DEVICE_TO_DEVICE));
  EXPECT_TRUE(download(b.get() + 1, kBytes) == data);

  // Device 0 fills a after slow work; device 1's stream waits, then copies.
  enqueueBusyWork(s0.get(), scratch, 8);
  const uint8_t nine = 9;
  FLAGOS_ASSERT_OK(mem().memFill(a.get(), &nine, 1, kBytes + 8, s0.get()));
  FLAGOS_ASSERT_OK(str().eventRecord(e0.get(), s0.get()));
  FLAGOS_ASSERT_OK(str().streamWaitEvent(s1.get(), e0.get()));
  std::vector<uint8_t> out(kBytes);
  // Memory of device 0 on a stream of device 1: drains s1 (its wait
  // included), then copies through the host.
  FLAGOS_ASSERT_OK(
      mem().memcpyAsync(b.get(), a.get(), kBytes, FLAGOS_MEMCPY_DEVICE_TO_DEVICE, s1.get()));
  FLAGOS_ASSERT_OK(
      mem().memcpyAsync(out.data(), b.get(), kBytes, FLAGOS_MEMCPY_DEVICE_TO_HOST, s1.get()));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s1.get()));
  EXPECT_TRUE(out == std::vector<uint8_t>(kBytes, 9));
  FLAGOS_EXPECT_INVALID(mem().memFill(b.get(), &nine, 1, 8, s0.get())) << "memory of device 1";
  FLAGOS_EXPECT_INVALID(str().eventRecord(e0.get(), s1.get())) << "event of device 0";
}

}  // namespace
}  // namespace conformance
