// The host plugin's compiler table (language "c", backends/host/compiler.cpp),
// run by host_compiler_test: the conformance harness (conformance_main.cpp)
// with the host plugin as its default. Kernels follow Note [Host C kernels]:
// `void NAME(void* const* args, uint64_t begin, uint64_t end)`, args[k]
// pointing to the k-th argument's value. Each build runs the system C
// compiler, slow next to a test, so the suite builds one program and shares it.
#include <link.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "conformance.h"

namespace conformance {
namespace {

constexpr const char* kSource = R"C(
#include <stdint.h>

/* out[i] = 2 * i for i < n; calls[0] counts the calls (chunks). */
const int twice_num_args = 3;
void twice(void* const* args, uint64_t begin, uint64_t end) {
  int64_t* out = *(int64_t* const*)args[0];
  int64_t* calls = *(int64_t* const*)args[1];
  uint64_t n = *(const uint64_t*)args[2];
  for (uint64_t i = begin; i < end && i < n; ++i) out[i] = 2 * (int64_t)i;
  if (calls) __atomic_fetch_add(calls, 1, __ATOMIC_RELAXED);
}

/* A struct by value (BYTES): out[i] = scale * i + shift. No _num_args. */
struct affine { double scale; int64_t shift; };
void affine(void* const* args, uint64_t begin, uint64_t end) {
  double* out = *(double* const*)args[0];
  const struct affine* a = (const struct affine*)args[1];
  for (uint64_t i = begin; i < end; ++i) out[i] = a->scale * (double)i + (double)a->shift;
}

/* Spins until *flag != 0 (the test holds the stream with it). */
const int wait_flag_num_args = 1;
void wait_flag(void* const* args, uint64_t begin, uint64_t end) {
  int32_t* flag = *(int32_t* const*)args[0];
  (void)begin; (void)end;
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0) {}
}
)C";

flagosKernelArg ptrArg(void* const* address) {
  return {FLAGOS_ARG_DEVICE_PTR, sizeof(void*), address};
}

// Objects the plugin dlopened for programs (their paths hold "flagos-hostcc-").
int loadedPrograms() {
  int count = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "flagos-hostcc-")) {
          ++*static_cast<int*>(data);
        }
        return 0;
      },
      &count);
  return count;
}

class HostCompiler : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (tables().compiler == nullptr || !isHostPlugin() || missingCompilerEntry()) return;
    program_ = buildSuiteProgram(kSource, "");
  }
  static void TearDownTestSuite() { destroySuiteProgram(program_); }
  void SetUp() override {
    if (!isHostPlugin()) GTEST_SKIP() << "host plugin only";
    if (missingCompilerEntry()) GTEST_SKIP() << "FLAGOS_HOST_CC=/nonexistent: no compiler";
    ASSERT_NE(nullptr, tables().compiler);
    ASSERT_NE(nullptr, program_) << "the shared program did not build";
  }
  // The host_compiler_missing_cc entry runs with FLAGOS_HOST_CC=/nonexistent.
  static bool missingCompilerEntry() {
    const char* value = std::getenv("FLAGOS_HOST_CC");
    return value != nullptr && std::string(value) == "/nonexistent";
  }

  static flagosProgram_t program_;
};
flagosProgram_t HostCompiler::program_ = nullptr;

// Runs `twice` over n items into a fresh buffer (with a guard word after
// it) and checks every item; returns how many calls the kernel got.
int64_t checkTwice(flagosProgram_t program, uint64_t n, const uint64_t* local) {
  Stream s(0);
  DeviceBuffer out(0, 8 * (n + 1)), calls(0, 8);
  if (!s.get() || !out.get() || !calls.get()) return -1;
  const std::vector<int64_t> sentinel(n + 1, -7);
  EXPECT_EQ(FLAGOS_SUCCESS,
            mem().memcpy(out.get(), sentinel.data(), 8 * (n + 1), FLAGOS_MEMCPY_HOST_TO_DEVICE));
  int64_t count = 0;
  EXPECT_EQ(FLAGOS_SUCCESS, mem().memcpy(calls.get(), &count, 8, FLAGOS_MEMCPY_HOST_TO_DEVICE));
  void* out_ptr = out.get();
  void* calls_ptr = calls.get();
  const flagosKernelArg args[] = {
      ptrArg(&out_ptr), ptrArg(&calls_ptr), {FLAGOS_ARG_BYTES, sizeof(n), &n}};
  FLAGOS_EXPECT_OK(cc().kernelLaunch(program, "twice", args, 3, 1, &n, local, s.get()));
  out_ptr = nullptr;  // values are copied at launch: later changes do not matter
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
  std::vector<int64_t> got(n + 1);
  FLAGOS_EXPECT_OK(mem().memcpy(got.data(), out.get(), 8 * (n + 1), FLAGOS_MEMCPY_DEVICE_TO_HOST));
  for (uint64_t i = 0; i < n; ++i) {
    if (got[i] != static_cast<int64_t>(2 * i)) {
      ADD_FAILURE() << "item " << i << " of " << n << ": " << got[i];
      break;
    }
  }
  EXPECT_EQ(-7, got[n]) << "written past the end";
  FLAGOS_EXPECT_OK(mem().memcpy(&count, calls.get(), 8, FLAGOS_MEMCPY_DEVICE_TO_HOST));
  return count;
}

TEST_F(HostCompiler, Identity) {
  EXPECT_STREQ("c", cc().language);
}

TEST_F(HostCompiler, WritesTwiceTheIndex) {
  EXPECT_EQ(1, checkTwice(program_, 1, nullptr));
  EXPECT_EQ(1, checkTwice(program_, 1000, nullptr)) << "a tiny launch runs as one call";
  const int64_t calls = checkTwice(program_, 1000000, nullptr);
  EXPECT_GE(calls, 1);
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_GT(calls, 1) << "split across threads";
  }
  const uint64_t local = 100000;  // the smallest chunk
  const int64_t chunked = checkTwice(program_, 1000000, &local);
  EXPECT_GE(chunked, 1);
  EXPECT_LE(chunked, 10);
}

TEST_F(HostCompiler, StructArgumentsByValue) {
  constexpr uint64_t kN = 5000;
  Stream s(0);
  DeviceBuffer out(0, 8 * kN);
  ASSERT_TRUE(s.get() && out.get());
  struct {
    double scale;
    int64_t shift;
  } affine{0.5, -3};
  void* out_ptr = out.get();
  const flagosKernelArg args[] = {ptrArg(&out_ptr), {FLAGOS_ARG_BYTES, sizeof(affine), &affine}};
  FLAGOS_ASSERT_OK(cc().kernelLaunch(program_, "affine", args, 2, 1, &kN, nullptr, s.get()));
  affine.scale = 100;  // copied at launch
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  std::vector<double> got(kN);
  FLAGOS_ASSERT_OK(mem().memcpy(got.data(), out.get(), 8 * kN, FLAGOS_MEMCPY_DEVICE_TO_HOST));
  for (uint64_t i = 0; i < kN; ++i) ASSERT_EQ(0.5 * i - 3, got[i]) << "item " << i;
}

TEST_F(HostCompiler, ZeroWorkItemsLaunchNothing) {
  Stream s(0);
  void* nothing = nullptr;  // NULL device pointers are allowed
  const uint64_t n = 0;
  const flagosKernelArg args[] = {ptrArg(&nothing), ptrArg(&nothing), {FLAGOS_ARG_BYTES, 8, &n}};
  FLAGOS_EXPECT_OK(cc().kernelLaunch(program_, "twice", args, 3, 1, &n, nullptr, s.get()));
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get()));
}

TEST_F(HostCompiler, BrokenSourceIsACompileError) {
  flagosProgram_t broken = nullptr;
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE,
                       cc().programBuild(0, "void k(void) { int x = ; }\n", "", &broken));
  EXPECT_EQ(nullptr, broken);
  EXPECT_NE(std::string::npos, lastError().find("error")) << "the build log: " << lastError();
  EXPECT_NE(std::string::npos, lastError().find("kernel.c:1")) << "the build log: " << lastError();
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE,
                       cc().programBuild(0, "int x;", "-fno-such-option-flagos", &broken))
      << "bad options reach the compiler";
  EXPECT_NE(std::string::npos, lastError().find("no-such-option-flagos")) << lastError();
}

TEST_F(HostCompiler, BinaryRoundTrip) {
  flagosProgram_t built = nullptr;
  FLAGOS_ASSERT_OK(cc().programBuild(0, kSource, "-O1", &built));
  const std::vector<char> binary = programBinary(built);
  ASSERT_FALSE(binary.empty());
  const uint64_t size = binary.size();
  EXPECT_EQ(0, std::memcmp(binary.data(), "FLGOHCB1", 8));
  FLAGOS_ASSERT_OK(cc().programDestroy(built));

  flagosProgram_t loaded = nullptr;
  FLAGOS_ASSERT_OK(cc().programLoadBinary(0, binary.data(), size, &loaded));
  ASSERT_NE(nullptr, loaded);
  EXPECT_EQ(1, checkTwice(loaded, 1, nullptr));
  checkTwice(loaded, 1000000, nullptr);
  uint64_t again = 0;
  FLAGOS_EXPECT_OK(cc().programGetBinary(loaded, nullptr, &again));
  EXPECT_EQ(size, again) << "a loaded program serializes to the same bytes";
  FLAGOS_EXPECT_OK(cc().programDestroy(loaded));
}

TEST_F(HostCompiler, BadBinariesAreCompileErrors) {
  uint64_t size = 0;
  FLAGOS_ASSERT_OK(cc().programGetBinary(program_, nullptr, &size));
  std::vector<char> real(size);
  FLAGOS_ASSERT_OK(cc().programGetBinary(program_, real.data(), &size));
  flagosProgram_t loaded = nullptr;
  auto expectRejected = [&](const std::vector<char>& bytes, uint64_t n, const char* reason) {
    FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE, cc().programLoadBinary(0, bytes.data(), n, &loaded))
        << reason;
    EXPECT_NE(std::string::npos, lastError().find(reason)) << lastError();
    EXPECT_EQ(nullptr, loaded);
  };
  expectRejected(real, size - 100, "truncated");
  expectRejected(real, 3, "too short");
  std::vector<char> flipped = real;
  flipped[size / 2] = static_cast<char>(flipped[size / 2] ^ 0x5a);
  expectRejected(flipped, size, "corrupted");
  std::vector<char> magic = real;
  magic[0] = 'X';
  expectRejected(magic, size, "bad magic");
  std::vector<char> foreign = real;
  foreign[24] = static_cast<char>(foreign[24] ^ 1);  // the machine key's hash
  expectRejected(foreign, size, "another machine");
  std::vector<char> garbage(4096);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 131 + 7);
  expectRejected(garbage, garbage.size(), "bad magic");

  // A well-formed header around a payload that is no shared object reaches
  // dlopen, which must refuse it.
  std::vector<char> forged = real;
  for (size_t i = 32; i < size; ++i) forged[i] = static_cast<char>(i * 31 + 1);
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 32; i < size; ++i)
    hash = (hash ^ static_cast<uint8_t>(forged[i])) * 0x100000001b3ull;
  std::memcpy(forged.data() + 16, &hash, sizeof(hash));
  expectRejected(forged, size, "cannot load");
  FLAGOS_EXPECT_INVALID(cc().programLoadBinary(0, nullptr, 16, &loaded));
  FLAGOS_EXPECT_INVALID(cc().programLoadBinary(deviceCount(), real.data(), size, &loaded));
}

TEST_F(HostCompiler, LaunchRejectsBadArguments) {
  Stream s(0);
  DeviceBuffer buf(0, 1024);
  void* p = buf.get();
  static char host_memory[64];
  void* not_device = host_memory;
  const uint64_t n = 1, zero_local = 0, global2[2] = {1, 1};
  const flagosKernelArg good[] = {ptrArg(&p), ptrArg(&p), {FLAGOS_ARG_BYTES, 8, &n}};
  const flagosKernelArg bad_ptr[] = {ptrArg(&not_device), ptrArg(&p), {FLAGOS_ARG_BYTES, 8, &n}};
  const flagosKernelArg no_bytes[] = {ptrArg(&p), ptrArg(&p), {FLAGOS_ARG_BYTES, 0, &n}};
  const flagosKernelArg bad_kind[] = {ptrArg(&p), ptrArg(&p), {7, 8, &n}};
  auto launch = [&](const char* name, const flagosKernelArg* args, int32_t count) {
    return cc().kernelLaunch(program_, name, args, count, 1, &n, nullptr, s.get());
  };
  FLAGOS_EXPECT_INVALID(launch("twice", good, 2)) << "twice_num_args is 3";
  EXPECT_NE(std::string::npos, lastError().find("wrong argument count")) << lastError();
  FLAGOS_EXPECT_INVALID(launch("twice", good, 4));
  FLAGOS_EXPECT_INVALID(launch("nope", good, 3));
  FLAGOS_EXPECT_INVALID(launch("free", good, 3)) << "a libc function is no kernel";
  FLAGOS_EXPECT_INVALID(launch("sin", good, 3)) << "a libm function is no kernel";
  FLAGOS_EXPECT_INVALID(launch("twice_num_args", good, 3)) << "a variable is no kernel";
  FLAGOS_EXPECT_INVALID(launch("twice; rm", good, 3));
  FLAGOS_EXPECT_INVALID(launch("", good, 3));
  FLAGOS_EXPECT_INVALID(launch(nullptr, good, 3));
  FLAGOS_EXPECT_INVALID(launch("twice", bad_ptr, 3)) << "not device memory";
  FLAGOS_EXPECT_INVALID(launch("twice", no_bytes, 3));
  FLAGOS_EXPECT_INVALID(launch("twice", bad_kind, 3));
  FLAGOS_EXPECT_INVALID(launch("twice", nullptr, 3));
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_NOT_SUPPORTED,
                       cc().kernelLaunch(program_, "twice", good, 3, 2, global2, nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(cc().kernelLaunch(program_, "twice", good, 3, 0, &n, nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(
      cc().kernelLaunch(program_, "twice", good, 3, 1, nullptr, nullptr, s.get()));
  FLAGOS_EXPECT_INVALID(cc().kernelLaunch(program_, "twice", good, 3, 1, &n, &zero_local, s.get()));
  FLAGOS_EXPECT_INVALID(cc().kernelLaunch(program_, "twice", good, 3, 1, &n, nullptr, nullptr));
  FLAGOS_EXPECT_INVALID(cc().kernelLaunch(nullptr, "twice", good, 3, 1, &n, nullptr, s.get()));
  flagosProgram_t out = nullptr;
  FLAGOS_EXPECT_INVALID(cc().programBuild(0, nullptr, "", &out));
  FLAGOS_EXPECT_INVALID(cc().programBuild(deviceCount(), kSource, "", &out));
  FLAGOS_EXPECT_INVALID(cc().programBuild(0, kSource, "", nullptr));
  FLAGOS_EXPECT_INVALID(cc().programDestroy(nullptr));
  FLAGOS_EXPECT_OK(str().streamSynchronize(s.get())) << "nothing failed asynchronously";
}

// The core builds from a background pool: builds on several threads, each
// with its own kernel under the same name, must not mix (RTLD_LOCAL, one
// private folder per build).
TEST_F(HostCompiler, ConcurrentBuilds) {
  constexpr int kThreads = 3;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string source =
          "#include <stdint.h>\nvoid k(void* const* a, uint64_t b, uint64_t e) { (void)b; "
          "(void)e; **(int32_t* const*)a[0] = " +
          std::to_string(100 + t) + "; }\n";
      flagosProgram_t program = nullptr;
      if (cc().programBuild(0, source.c_str(), "", &program) != FLAGOS_SUCCESS) {
        errors[t] = "build: " + lastError();
        return;
      }
      Stream s(0);
      DeviceBuffer out(0, 4);
      void* p = out.get();
      const flagosKernelArg args[] = {ptrArg(&p)};
      const uint64_t one = 1;
      int32_t got = 0;
      if (cc().kernelLaunch(program, "k", args, 1, 1, &one, nullptr, s.get()) != FLAGOS_SUCCESS ||
          str().streamSynchronize(s.get()) != FLAGOS_SUCCESS ||
          mem().memcpy(&got, p, 4, FLAGOS_MEMCPY_DEVICE_TO_HOST) != FLAGOS_SUCCESS) {
        errors[t] = "launch: " + lastError();
      } else if (got != 100 + t) {
        errors[t] = "got " + std::to_string(got) + ", another build's kernel";
      }
      cc().programDestroy(program);
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ("", errors[t]) << "thread " << t;
}

// programDestroy while the program's kernels are queued (and one running):
// the launches complete, then the library is unloaded.
TEST_F(HostCompiler, DestroyWhileLaunchesAreQueued) {
  constexpr uint64_t kN = 100000;
  const int before = loadedPrograms();
  flagosProgram_t program = nullptr;
  FLAGOS_ASSERT_OK(cc().programBuild(0, kSource, "", &program));
  EXPECT_EQ(before + 1, loadedPrograms());
  Stream s(0);
  DeviceBuffer flag(0, 4), out(0, 8 * kN);
  ASSERT_TRUE(s.get() && flag.get() && out.get());
  const int32_t zero = 0, one = 1;
  FLAGOS_ASSERT_OK(mem().memcpy(flag.get(), &zero, 4, FLAGOS_MEMCPY_HOST_TO_DEVICE));
  void* flag_ptr = flag.get();
  void* out_ptr = out.get();
  void* no_calls = nullptr;
  const uint64_t single = 1, n = kN;
  const flagosKernelArg wait_args[] = {ptrArg(&flag_ptr)};
  const flagosKernelArg twice_args[] = {
      ptrArg(&out_ptr), ptrArg(&no_calls), {FLAGOS_ARG_BYTES, 8, &n}};
  FLAGOS_ASSERT_OK(
      cc().kernelLaunch(program, "wait_flag", wait_args, 1, 1, &single, nullptr, s.get()));
  FLAGOS_ASSERT_OK(cc().kernelLaunch(program, "twice", twice_args, 3, 1, &n, nullptr, s.get()));
  FLAGOS_ASSERT_OK(cc().programDestroy(program));
  EXPECT_EQ(FLAGOS_ERROR_NOT_READY, str().streamQuery(s.get())) << "wait_flag holds the stream";
  EXPECT_EQ(before + 1, loadedPrograms()) << "unloaded under a running kernel";
  // The synchronous copy is not ordered after queued work: it releases wait_flag.
  FLAGOS_ASSERT_OK(mem().memcpy(flag.get(), &one, 4, FLAGOS_MEMCPY_HOST_TO_DEVICE));
  FLAGOS_ASSERT_OK(str().streamSynchronize(s.get()));
  std::vector<int64_t> got(kN);
  FLAGOS_ASSERT_OK(mem().memcpy(got.data(), out.get(), 8 * kN, FLAGOS_MEMCPY_DEVICE_TO_HOST));
  for (uint64_t i = 0; i < kN; ++i) ASSERT_EQ(static_cast<int64_t>(2 * i), got[i]);
  EXPECT_EQ(before, loadedPrograms()) << "the last launch unloads the library";
}

// Runs in the host_compiler_missing_cc entry (FLAGOS_HOST_CC=/nonexistent).
TEST(HostCompilerMissing, NoCompilerIsACompileError) {
  if (!isHostPlugin()) GTEST_SKIP() << "host plugin only";
  const char* value = std::getenv("FLAGOS_HOST_CC");
  if (value == nullptr || std::string(value) != "/nonexistent") {
    GTEST_SKIP() << "needs FLAGOS_HOST_CC=/nonexistent";
  }
  ASSERT_NE(nullptr, tables().compiler);
  flagosProgram_t program = nullptr;
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_COMPILE, cc().programBuild(0, kSource, "", &program));
  EXPECT_EQ(nullptr, program);
  EXPECT_NE(std::string::npos,
            lastError().find("no C compiler: FLAGOS_HOST_CC=/nonexistent not found"))
      << lastError();
}

}  // namespace
}  // namespace conformance
