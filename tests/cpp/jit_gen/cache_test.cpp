// The kernel cache (csrc/jit/gen/kernel_cache.h, disk_store.h) against a
// fake in-test compiler, so every test is deterministic and fast: a
// "program" is the source string on the heap, its binary is the source
// bytes, and a source containing "#error" is rejected. One optional test
// goes through the real opencl plugin when an OpenCL device is present.
#include <dlfcn.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flagos/vendor.h"
#include "jit/gen/disk_store.h"
#include "jit/gen/kernel_cache.h"
#include "jit/gen/manifest.h"

namespace flagos::kernels {
namespace {

namespace fs = std::filesystem;

// --- the fake compiler ------------------------------------------------------

struct FakeProgram {
  std::string source;
};

std::atomic<int> g_builds{0};          // programBuild calls
std::atomic<int> g_live{0};            // programs not destroyed yet
std::atomic<int> g_build_delay_ms{0};  // makes builds slow enough to overlap
std::atomic<bool> g_reject_loads{false};
thread_local std::string t_last_error;

flagosStatus_t fakeBuild(int32_t, const char* source, const char*, flagosProgram_t* program) {
  g_builds.fetch_add(1);
  if (int ms = g_build_delay_ms.load()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  if (std::strstr(source, "#error") != nullptr) {
    t_last_error = std::string("fake.src:1: error: ") + source;
    return FLAGOS_ERROR_COMPILE;
  }
  *program = reinterpret_cast<flagosProgram_t>(new FakeProgram{source});
  g_live.fetch_add(1);
  return FLAGOS_SUCCESS;
}

flagosStatus_t fakeGetBinary(flagosProgram_t program, void* buffer, uint64_t* size) {
  const std::string& s = reinterpret_cast<FakeProgram*>(program)->source;
  if (buffer != nullptr) {
    if (*size < s.size()) return FLAGOS_ERROR_INVALID_ARGUMENT;
    std::memcpy(buffer, s.data(), s.size());
  }
  *size = s.size();
  return FLAGOS_SUCCESS;
}

flagosStatus_t fakeLoadBinary(int32_t, const void* binary, uint64_t size,
                              flagosProgram_t* program) {
  if (g_reject_loads.load()) {
    t_last_error = "fake: binary of another driver";
    return FLAGOS_ERROR_COMPILE;
  }
  *program = reinterpret_cast<flagosProgram_t>(
      new FakeProgram{std::string(static_cast<const char*>(binary), size)});
  g_live.fetch_add(1);
  return FLAGOS_SUCCESS;
}

flagosStatus_t fakeDestroy(flagosProgram_t program) {
  delete reinterpret_cast<FakeProgram*>(program);
  g_live.fetch_sub(1);
  return FLAGOS_SUCCESS;
}

flagosStatus_t fakeLaunch(flagosProgram_t, const char*, const flagosKernelArg*, int32_t, int32_t,
                          const uint64_t*, const uint64_t*, flagosStream_t) {
  return FLAGOS_ERROR_NOT_SUPPORTED;
}

const flagosCompilerTable kFake = {sizeof(flagosCompilerTable),
                                   "fake",
                                   fakeBuild,
                                   fakeGetBinary,
                                   fakeLoadBinary,
                                   fakeDestroy,
                                   fakeLaunch};

// --- helpers ----------------------------------------------------------------

constexpr const char* kArch = "fake-arch-1";

KernelKey keyOf(int64_t i) {
  return KernelKey{{7, -1, i}};
}

Source sourceOf(int64_t i, size_t padding = 0) {
  return {"kernel body " + std::to_string(i) + std::string(padding, 'x'), "k" + std::to_string(i),
          ""};
}

std::function<Source()> sourceFn(int64_t i, size_t padding = 0) {
  return [i, padding] { return sourceOf(i, padding); };
}

// A source function that must not run (the kernel should come from disk).
std::function<Source()> noBuild() {
  return [] {
    ADD_FAILURE() << "source() called on what should be a disk hit";
    return Source{"unexpected", "unexpected", ""};
  };
}

const std::string& programText(const CompiledKernel* k) {
  return reinterpret_cast<FakeProgram*>(k->program)->source;
}

std::string fileOf(const fs::path& dir, int64_t i, const std::string& arch = kArch) {
  return (dir / DiskStore::fileName(fileKeyOf(keyOf(i), "fake", arch))).string();
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_builds = 0;
    g_build_delay_ms = 0;
    g_reject_loads = false;
    char tmpl[] = "/tmp/flagos_cache_test_XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    root_ = tmpl;
    dir_ = root_ / "kernels";  // created by the store (mkdir -p)
  }
  void TearDown() override {
    EXPECT_EQ(0, g_live.load()) << "programs leaked past their caches";
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  CacheConfig config(uint64_t max_bytes = uint64_t{1} << 30, int threads = 1) const {
    CacheConfig c;
    c.dir = dir_.string();
    c.max_disk_bytes = max_bytes;
    c.compile_threads = threads;
    c.device_arch = kArch;
    c.last_error = [] { return t_last_error; };
    return c;
  }

  std::vector<std::string> cacheFiles() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    return out;
  }

  fs::path root_, dir_;
};

// --- memory -----------------------------------------------------------------

TEST_F(CacheTest, FindCountsHitsAndMisses) {
  CacheConfig c = config();
  c.dir = "";  // memory only
  KernelCache cache(&kFake, 0, c);
  EXPECT_EQ(nullptr, cache.find(keyOf(1)));
  const CompiledKernel* k = cache.getOrBuild(keyOf(1), sourceFn(1));
  ASSERT_NE(nullptr, k);
  EXPECT_EQ("k1", k->kernel_name);
  EXPECT_EQ("kernel body 1", programText(k));
  EXPECT_EQ(k, cache.find(keyOf(1)));
  EXPECT_EQ(k, cache.find(keyOf(1)));
  EXPECT_EQ(nullptr, cache.find(keyOf(2)));
  EXPECT_EQ(k, cache.getOrBuild(keyOf(1), noBuild()));  // memory, no rebuild

  const CacheStats s = cache.stats();
  EXPECT_EQ(2u, s.memory_hits);
  EXPECT_EQ(2u, s.memory_misses);
  EXPECT_EQ(1u, s.sync_builds);
  EXPECT_EQ(0u, s.async_builds);
  EXPECT_EQ(0u, s.disk_writes);
  EXPECT_EQ(1u, s.entries);
  EXPECT_GE(s.build_seconds, 0.0);
  EXPECT_EQ(1, g_builds.load());
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(CacheTest, ConcurrentGetOrBuildCompilesOnce) {
  g_build_delay_ms = 50;
  KernelCache cache(&kFake, 0, config());
  constexpr int kThreads = 8;
  std::vector<const CompiledKernel*> got(kThreads * 2);
  std::vector<std::thread> threads;
  std::atomic<int> calls{0};
  for (int t = 0; t < kThreads * 2; ++t) {
    threads.emplace_back([&, t] {
      const int64_t id = t % 2;  // two keys, kThreads callers each
      got[t] = cache.getOrBuild(keyOf(id), [&, id] {
        calls.fetch_add(1);
        return sourceOf(id);
      });
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads * 2; ++t) {
    ASSERT_NE(nullptr, got[t]);
    EXPECT_EQ(got[t % 2], got[t]);
  }
  EXPECT_NE(got[0], got[1]);
  EXPECT_EQ(2, g_builds.load());
  EXPECT_EQ(2, calls.load());
  EXPECT_EQ(2u, cache.stats().sync_builds);
  EXPECT_GT(cache.stats().build_seconds, 0.05);
}

// --- disk -------------------------------------------------------------------

TEST_F(CacheTest, DiskPersistsAcrossCaches) {
  {
    KernelCache cache(&kFake, 0, config());
    for (int i = 0; i < 3; ++i) cache.getOrBuild(keyOf(i), sourceFn(i));
    EXPECT_EQ(3u, cache.stats().disk_writes);
  }
  EXPECT_EQ(3u, cacheFiles().size());
  for (const std::string& f : cacheFiles()) {
    EXPECT_EQ(20u, f.size()) << f;  // 16 hex digits + ".fkc"
    EXPECT_EQ(".fkc", f.substr(16));
  }
  g_builds = 0;
  KernelCache cache(&kFake, 0, config());
  for (int i = 0; i < 3; ++i) {
    const CompiledKernel* k = cache.getOrBuild(keyOf(i), noBuild());
    EXPECT_EQ("k" + std::to_string(i), k->kernel_name);
    EXPECT_EQ(sourceOf(i).text, programText(k));
  }
  const CacheStats s = cache.stats();
  EXPECT_EQ(0, g_builds.load());
  EXPECT_EQ(3u, s.disk_hits);
  EXPECT_EQ(0u, s.sync_builds);
  EXPECT_EQ(0u, s.disk_writes);
  EXPECT_EQ(0u, s.disk_corrupt);
}

// Another device architecture (or language, or generator version) never
// sees the first one's binaries.
TEST_F(CacheTest, DiskKeyIncludesTarget) {
  { KernelCache(&kFake, 0, config()).getOrBuild(keyOf(1), sourceFn(1)); }
  CacheConfig other = config();
  other.device_arch = "fake-arch-2";
  KernelCache cache(&kFake, 0, other);
  cache.getOrBuild(keyOf(1), sourceFn(1));
  EXPECT_EQ(0u, cache.stats().disk_hits);
  EXPECT_EQ(1u, cache.stats().sync_builds);
  EXPECT_EQ(2u, cacheFiles().size());
  EXPECT_NE(fileKeyOf(keyOf(1), "fake", kArch), fileKeyOf(keyOf(1), "c", kArch));
  EXPECT_NE(fileKeyOf(keyOf(1), "fake", kArch), fileKeyOf(keyOf(2), "fake", kArch));
}

struct Damage {
  const char* name;
  std::function<std::string(const std::string&)> apply;
};

class DiskCorruptionTest : public CacheTest, public ::testing::WithParamInterface<Damage> {};

TEST_P(DiskCorruptionTest, DetectedCountedRebuiltRewritten) {
  { KernelCache(&kFake, 0, config()).getOrBuild(keyOf(5), sourceFn(5, 100)); }
  const std::string path = fileOf(dir_, 5);
  const std::string good = readFile(path);
  ASSERT_GT(good.size(), 100u);
  writeFile(path, GetParam().apply(good));

  g_builds = 0;
  {
    KernelCache cache(&kFake, 0, config());
    const CompiledKernel* k = cache.getOrBuild(keyOf(5), sourceFn(5, 100));
    EXPECT_EQ(sourceOf(5, 100).text, programText(k));
    EXPECT_EQ(1u, cache.stats().disk_corrupt);
    EXPECT_EQ(0u, cache.stats().disk_hits);
    EXPECT_EQ(1u, cache.stats().sync_builds);
    EXPECT_EQ(1u, cache.stats().disk_writes);
  }
  EXPECT_EQ(good, readFile(path)) << "the rebuilt kernel's file is written again";
  KernelCache cache(&kFake, 0, config());
  cache.getOrBuild(keyOf(5), noBuild());
  EXPECT_EQ(1u, cache.stats().disk_hits);
  EXPECT_EQ(0u, cache.stats().disk_corrupt);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, DiskCorruptionTest,
    ::testing::Values(
        Damage{"Empty", [](const std::string&) { return std::string(); }},
        Damage{"HeaderOnly", [](const std::string& s) { return s.substr(0, 32); }},
        Damage{"Truncated", [](const std::string& s) { return s.substr(0, s.size() - 7); }},
        Damage{"Padded", [](const std::string& s) { return s + "zz"; }},
        Damage{"PayloadByteFlipped",
               [](const std::string& s) {
                 std::string t = s;
                 t[t.size() - 10] ^= 0x40;
                 return t;
               }},
        Damage{"MagicFlipped",
               [](const std::string& s) {
                 std::string t = s;
                 t[3] ^= 1;
                 return t;
               }},
        Damage{"LengthFieldGarbled",
               [](const std::string& s) {
                 std::string t = s;
                 t[16] ^= 0x7f;  // payload_len
                 return t;
               }},
        Damage{"Garbage", [](const std::string& s) { return std::string(s.size(), '\xa5'); }}),
    [](const ::testing::TestParamInfo<Damage>& info) { return std::string(info.param.name); });

// A binary the plugin refuses (driver changed) is treated like a bad file.
TEST_F(CacheTest, DiskRejectedBinaryIsRebuilt) {
  { KernelCache(&kFake, 0, config()).getOrBuild(keyOf(1), sourceFn(1)); }
  g_reject_loads = true;
  g_builds = 0;
  {
    KernelCache cache(&kFake, 0, config());
    EXPECT_EQ(sourceOf(1).text, programText(cache.getOrBuild(keyOf(1), sourceFn(1))));
    EXPECT_EQ(1u, cache.stats().disk_corrupt);
    EXPECT_EQ(1, g_builds.load());
    EXPECT_EQ(1u, cache.stats().disk_writes);
  }
  g_reject_loads = false;
  KernelCache cache(&kFake, 0, config());
  cache.getOrBuild(keyOf(1), noBuild());
  EXPECT_EQ(1u, cache.stats().disk_hits);
}

// A well-formed file whose stored key differs (a name hash collision) is a
// miss, not someone else's kernel.
TEST_F(CacheTest, DiskForeignKeyIsAMiss) {
  DiskStore store(dir_.string(), 1 << 20);
  ASSERT_TRUE(store.store("key-a", "AAAA", 4));
  // Make key-b's file a valid file of key-a.
  fs::copy_file(store.pathOf("key-a"), store.pathOf("key-b"));
  std::vector<uint8_t> payload;
  EXPECT_FALSE(store.load("key-b", &payload));
  EXPECT_EQ(0u, store.stats().corrupt);
  ASSERT_TRUE(store.load("key-a", &payload));
  EXPECT_EQ("AAAA", std::string(payload.begin(), payload.end()));
  ASSERT_TRUE(store.store("key-b", "BB", 2));
  ASSERT_TRUE(store.load("key-b", &payload));
  EXPECT_EQ("BB", std::string(payload.begin(), payload.end()));
}

// --- failures ---------------------------------------------------------------

TEST_F(CacheTest, CompileFailureIsRememberedWithItsLog) {
  KernelCache cache(&kFake, 0, config());
  const auto bad = [] { return Source{"#error broken kernel", "bad", ""}; };
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      cache.getOrBuild(keyOf(9), bad);
      ADD_FAILURE() << "no BuildError";
    } catch (const BuildError& e) {
      EXPECT_NE(nullptr, std::strstr(e.what(), "fake.src:1: error: #error broken kernel"))
          << e.what();
      EXPECT_NE(nullptr, std::strstr(e.what(), "'bad'")) << e.what();
    }
  }
  cache.buildAsync(keyOf(9), bad);  // failed: not queued again
  cache.waitIdle();
  EXPECT_EQ(nullptr, cache.find(keyOf(9)));
  const CacheStats s = cache.stats();
  EXPECT_EQ(1, g_builds.load());
  EXPECT_EQ(1u, s.build_failures);
  EXPECT_EQ(1u, s.sync_builds);
  EXPECT_EQ(0u, s.async_builds);
  EXPECT_EQ(0u, s.disk_writes);
  EXPECT_EQ(0u, s.entries);
  // Other keys are unaffected.
  EXPECT_NE(nullptr, cache.getOrBuild(keyOf(1), sourceFn(1)));
}

TEST_F(CacheTest, CompileFailureDefaultLogAndConcurrentWaiters) {
  CacheConfig c = config();
  c.last_error = nullptr;
  g_build_delay_ms = 30;
  KernelCache cache(&kFake, 0, c);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      try {
        cache.getOrBuild(keyOf(3), [] { return Source{"#error", "bad", ""}; });
      } catch (const BuildError& e) {
        if (std::strstr(e.what(), "compile failed") != nullptr) errors.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(4, errors.load());
  EXPECT_EQ(1, g_builds.load());
}

// An exception from the generator is reported but not remembered.
TEST_F(CacheTest, SourceExceptionIsNotSticky) {
  KernelCache cache(&kFake, 0, config());
  EXPECT_THROW(
      cache.getOrBuild(keyOf(1), []() -> Source { throw std::runtime_error("generator bug"); }),
      BuildError);
  EXPECT_NE(nullptr, cache.getOrBuild(keyOf(1), sourceFn(1)));
}

TEST_F(CacheTest, AsyncFailureIsReportedByGetOrBuild) {
  KernelCache cache(&kFake, 0, config());
  cache.buildAsync(keyOf(4), [] { return Source{"#error async", "bad", ""}; });
  cache.waitIdle();
  EXPECT_THROW(cache.getOrBuild(keyOf(4), sourceFn(4)), BuildError);
  EXPECT_EQ(1, g_builds.load());
  EXPECT_EQ(1u, cache.stats().build_failures);
  EXPECT_EQ(1u, cache.stats().async_builds);
}

// --- background builds ------------------------------------------------------

TEST_F(CacheTest, BuildAsyncDedupesAndFindSeesResult) {
  g_build_delay_ms = 20;
  KernelCache cache(&kFake, 0, config(uint64_t{1} << 30, 2));
  cache.getOrBuild(keyOf(0), sourceFn(0));  // ready: never queued
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 4; ++i) cache.buildAsync(keyOf(i), sourceFn(i));
  }
  EXPECT_LE(cache.stats().async_pending, 3u);
  cache.waitIdle();
  for (int i = 0; i < 4; ++i) {
    const CompiledKernel* k = cache.find(keyOf(i));
    ASSERT_NE(nullptr, k) << i;
    EXPECT_EQ(sourceOf(i).text, programText(k));
  }
  for (int i = 1; i < 4; ++i) cache.buildAsync(keyOf(i), sourceFn(i));  // done: ignored
  cache.waitIdle();
  const CacheStats s = cache.stats();
  EXPECT_EQ(4, g_builds.load());
  EXPECT_EQ(3u, s.async_builds);
  EXPECT_EQ(1u, s.sync_builds);
  EXPECT_EQ(0u, s.async_pending);
  EXPECT_EQ(4u, s.entries);
  EXPECT_EQ(4u, s.disk_writes);
}

// getOrBuild() of a key still in the queue builds it now; the pool skips it.
TEST_F(CacheTest, GetOrBuildTakesOverQueuedBuild) {
  g_build_delay_ms = 100;
  KernelCache cache(&kFake, 0, config(uint64_t{1} << 30, 1));
  cache.buildAsync(keyOf(1), sourceFn(1));  // occupies the only thread
  cache.buildAsync(keyOf(2), sourceFn(2));  // waits in the queue
  const CompiledKernel* k = cache.getOrBuild(keyOf(2), sourceFn(2));
  ASSERT_NE(nullptr, k);
  cache.waitIdle();
  EXPECT_EQ(k, cache.find(keyOf(2)));
  EXPECT_EQ(2, g_builds.load());
  EXPECT_EQ(1u, cache.stats().sync_builds);
  EXPECT_EQ(1u, cache.stats().async_builds);
}

// The async path loads from disk too.
TEST_F(CacheTest, BuildAsyncLoadsFromDisk) {
  { KernelCache(&kFake, 0, config()).getOrBuild(keyOf(1), sourceFn(1)); }
  g_builds = 0;
  KernelCache cache(&kFake, 0, config());
  cache.buildAsync(keyOf(1), noBuild());
  cache.waitIdle();
  EXPECT_NE(nullptr, cache.find(keyOf(1)));
  EXPECT_EQ(0, g_builds.load());
  EXPECT_EQ(1u, cache.stats().disk_hits);
}

// --- preload (Note [Kernel preload]) ----------------------------------------

// usedKernels() lists what callers got, in order of first use, once each;
// preload() in a new cache loads exactly those from disk, never compiling,
// drops a key whose file is gone, and a caller of a dropped key builds it.
TEST_F(CacheTest, PreloadLoadsUsedKeysInOrderAndNeverCompiles) {
  std::vector<KernelKey> used;
  {
    KernelCache cache(&kFake, 0, config());
    cache.getOrBuild(keyOf(3), sourceFn(3));
    cache.getOrBuild(keyOf(1), sourceFn(1));
    cache.getOrBuild(keyOf(2), sourceFn(2));
    EXPECT_NE(nullptr, cache.find(keyOf(3)));  // again: not listed twice
    cache.buildAsync(keyOf(9), sourceFn(9));   // built but never handed out
    cache.waitIdle();
    for (const UsedKernel& k : cache.usedKernels()) used.push_back(k.key);
  }
  ASSERT_EQ(3u, used.size());
  EXPECT_EQ(keyOf(3), used[0]);
  EXPECT_EQ(keyOf(1), used[1]);
  EXPECT_EQ(keyOf(2), used[2]);

  fs::remove(fileOf(dir_, 2));  // evicted meanwhile
  g_builds = 0;
  KernelCache cache(&kFake, 0, config());
  std::vector<KernelKey> loaded;  // once, after the loads: the ready ones, in order
  int calls = 0;
  cache.preload(used, [&](const std::vector<std::pair<KernelKey, const CompiledKernel*>>& ready) {
    ++calls;
    for (const auto& [key, k] : ready) {
      EXPECT_NE(nullptr, k->program);
      loaded.push_back(key);
    }
  });
  cache.waitIdle();
  EXPECT_EQ(1, calls);
  EXPECT_EQ((std::vector<KernelKey>{keyOf(3), keyOf(1)}), loaded);
  EXPECT_EQ(0, g_builds.load());
  EXPECT_NE(nullptr, cache.find(keyOf(3)));
  EXPECT_NE(nullptr, cache.find(keyOf(1)));
  EXPECT_EQ(nullptr, cache.find(keyOf(2)));  // dropped, not failed
  const CacheStats s = cache.stats();
  EXPECT_EQ(2u, s.preloaded);
  EXPECT_EQ(0u, s.build_failures);
  EXPECT_EQ("kernel body 2", programText(cache.getOrBuild(keyOf(2), sourceFn(2))));
  EXPECT_EQ(1, g_builds.load());
}

// A caller waiting on a preload that finds no file builds the kernel itself.
TEST_F(CacheTest, CallerWaitingOnAMissedPreloadBuildsIt) {
  KernelCache cache(&kFake, 0, config());
  cache.preload({keyOf(5)});
  const CompiledKernel* k = cache.getOrBuild(keyOf(5), sourceFn(5));
  EXPECT_EQ("kernel body 5", programText(k));
  cache.waitIdle();
  EXPECT_EQ(0u, cache.stats().build_failures);
}

TEST(Manifest, RoundTripAndRejectsGarbage) {
  char tmpl[] = "/tmp/flagos_manifest_XXXXXX";
  ASSERT_NE(nullptr, ::mkdtemp(tmpl));
  const std::string path = std::string(tmpl) + "/manifest.txt";
  Manifest m;
  m.fp64 = true;
  m.kernels = {{keyOf(1), {{0, 0, 336, 8}, {4096, 32}}},
               {KernelKey{{1, 0x7fffffffffffffff, 0, 42}}, {}, 2},  // used, never launched
               {keyOf(-5), {{0, 16}, {1}}}};
  ASSERT_TRUE(writeManifest(path, m));
  Manifest back;
  ASSERT_TRUE(readManifest(path, &back));
  EXPECT_TRUE(back.fp64);
  ASSERT_EQ(m.kernels.size(), back.kernels.size());
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    EXPECT_EQ(m.kernels[i].key, back.kernels[i].key);
    EXPECT_EQ(m.kernels[i].shape.arg_sizes, back.kernels[i].shape.arg_sizes);
    EXPECT_EQ(m.kernels[i].shape.globals, back.kernels[i].shape.globals);
    EXPECT_EQ(m.kernels[i].unused, back.kernels[i].unused);
  }
  // Format 2 (before `unused`) still reads, every key as just used.
  writeFile(path, "flagos-kernel-manifest 2\nfp64 1\n1.2 4096 0,8\n");
  ASSERT_TRUE(readManifest(path, &back));
  ASSERT_EQ(1u, back.kernels.size());
  EXPECT_EQ(0u, back.kernels[0].unused);

  const std::string head = "flagos-kernel-manifest 2\nfp64 0\n";
  for (const std::string& bad :
       {std::string(""), std::string("flagos-kernel-manifest 1\nfp64 1\n1.2 - -\n"),
        std::string("flagos-kernel-manifest 2\nfp64 yes\n"), head + "1.2.zz - -\n",
        head + "1..2 - -\n", head + "1.2\n", head + "1.2 - - extra\n", head + "1.2 0 8\n",
        head + "1.2 1,x 8\n", head + "1.2 1,2,3,4,5 8\n", head + "1.2 1 99999999999\n",
        std::string("flagos-kernel-manifest 3\nfp64 0\n1.2 - -\n"),  // no `unused`
        std::string("flagos-kernel-manifest 3\nfp64 0\n1.2 - - x\n"),
        std::string("flagos-kernel-manifest 3\nfp64 0\n1.2 - - 1,2\n")}) {
    writeFile(path, bad);
    Manifest junk;
    EXPECT_FALSE(readManifest(path, &junk)) << bad;
  }
  EXPECT_FALSE(readManifest(std::string(tmpl) + "/missing.txt", &back));
  EXPECT_FALSE(writeManifest(std::string(tmpl) + "/no/such/dir/manifest.txt", m));
  std::error_code ec;
  fs::remove_all(tmpl, ec);
}

// The last process's keys first, then the earlier manifest's others (with
// their launch shapes, one process older), never a key twice, never one
// that kManifestMaxUnused processes in a row did not use, never more than
// kManifestKeys.
TEST(Manifest, MergeKeepsEarlierKeysAfterThisProcesss) {
  Manifest earlier, used;
  earlier.fp64 = false;
  earlier.kernels = {{keyOf(1), {{0}, {64}}, 0},
                     {keyOf(2), {{0, 8}, {128}}, 1},
                     {keyOf(3), {}, 0},
                     {keyOf(5), {}, kManifestMaxUnused}};  // aged out now
  used.fp64 = true;
  used.kernels = {{keyOf(3), {{0}, {32}}}, {keyOf(4), {}}};
  const Manifest m = mergeManifests(used, earlier);
  EXPECT_TRUE(m.fp64);
  ASSERT_EQ(4u, m.kernels.size());
  const KernelKey order[] = {keyOf(3), keyOf(4), keyOf(1), keyOf(2)};
  const uint32_t unused[] = {0, 0, 1, 2};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(order[i], m.kernels[i].key) << i;
    EXPECT_EQ(unused[i], m.kernels[i].unused) << i;
  }
  EXPECT_EQ(std::vector<uint64_t>{32}, m.kernels[0].shape.globals) << "this process's shapes";
  EXPECT_EQ(std::vector<uint64_t>{128}, m.kernels[3].shape.globals) << "carried with the key";
  // Two scripts in turn keep each other's keys: each is used every other run.
  Manifest a, b;
  a.kernels = {{keyOf(10), {}}};
  b.kernels = {{keyOf(20), {}}};
  Manifest file = a;
  for (int run = 0; run < 6; ++run) file = mergeManifests(run % 2 ? a : b, file);
  ASSERT_EQ(2u, file.kernels.size());
  EXPECT_EQ(keyOf(20), file.kernels[1].key);

  Manifest many;
  for (int i = 0; i < static_cast<int>(kManifestKeys); ++i)
    many.kernels.push_back({keyOf(100 + i), {}});
  const Manifest capped = mergeManifests(used, many);
  ASSERT_EQ(kManifestKeys, capped.kernels.size());
  EXPECT_EQ(keyOf(3), capped.kernels[0].key);
  EXPECT_EQ(keyOf(100), capped.kernels[2].key);
}

// The destructor waits for running builds and frees every program
// (TearDown checks g_live); queued builds are dropped.
TEST_F(CacheTest, DestructorJoinsPoolAndFreesPrograms) {
  g_build_delay_ms = 30;
  {
    KernelCache cache(&kFake, 0, config(uint64_t{1} << 30, 2));
    for (int i = 0; i < 6; ++i) cache.buildAsync(keyOf(i), sourceFn(i));
    while (g_builds.load() == 0) std::this_thread::yield();  // one is running
  }
  EXPECT_GE(g_builds.load(), 1);
  EXPECT_LT(g_builds.load(), 6) << "queued builds ran after the destructor started";
}

// --- LRU bound ------------------------------------------------------------

TEST_F(CacheTest, DiskEvictsLeastRecentlyUsed) {
  constexpr size_t kPad = 1000;  // each file a little over 1 KB
  {
    KernelCache cache(&kFake, 0, config());
    for (int i = 0; i < 4; ++i) cache.getOrBuild(keyOf(i), sourceFn(i, kPad));
  }
  const uint64_t file_bytes = fs::file_size(fileOf(dir_, 0));
  // Ages: key 0 oldest ... key 3 newest.
  for (int i = 0; i < 4; ++i) {
    const timespec t[2] = {{1000000 + i * 10, 0}, {1000000 + i * 10, 0}};
    ASSERT_EQ(0, ::utimensat(AT_FDCWD, fileOf(dir_, i).c_str(), t, 0));
  }
  // Room for 4.5 files: the 5th pushes it over, evicting down to 90%.
  const uint64_t max_bytes = file_bytes * 9 / 2;
  g_builds = 0;
  KernelCache cache(&kFake, 0, config(max_bytes));
  cache.getOrBuild(keyOf(0), noBuild());  // used now: the newest file
  cache.getOrBuild(keyOf(4), sourceFn(4, kPad));
  EXPECT_TRUE(fs::exists(fileOf(dir_, 0))) << "recently used file evicted";
  EXPECT_TRUE(fs::exists(fileOf(dir_, 4))) << "new file evicted";
  EXPECT_FALSE(fs::exists(fileOf(dir_, 1))) << "oldest file kept";
  EXPECT_TRUE(fs::exists(fileOf(dir_, 3)));
  uint64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir_)) total += e.file_size();
  EXPECT_LE(total, max_bytes * 9 / 10);
  EXPECT_GE(cache.stats().disk_evictions, 1u);
  EXPECT_EQ(1, g_builds.load());
}

// Temporary files of a writer that died are removed by the next scan.
TEST_F(CacheTest, DiskRemovesStaleTemporaryFiles) {
  DiskStore store(dir_.string(), 1 << 20);
  ASSERT_TRUE(store.store("a", "1", 1));
  const std::string stale = store.pathOf("b") + ".tmp.1.1.0";
  const std::string fresh = store.pathOf("c") + ".tmp.1.1.1";
  writeFile(stale, "half");
  writeFile(fresh, "half");
  const timespec old[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(0, ::utimensat(AT_FDCWD, stale.c_str(), old, 0));
  DiskStore again(dir_.string(), 1 << 20);  // scans on its first store
  ASSERT_TRUE(again.store("d", "2", 1));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh)) << "a live writer's file was removed";
}

// --- several processes ----------------------------------------------------

std::string payloadOf(int key, int round) {
  // Different sizes per round, so a torn file cannot pass as a whole one.
  std::string s(512 + (key * 977 + round * 131) % 8000, static_cast<char>('a' + key % 26));
  s += "|" + std::to_string(key) + "|" + std::to_string(round);
  return s;
}

// Stores and loads the same keys in a loop; returns the number of problems
// (corrupt files, payloads of the wrong key).
int hammer(const std::string& dir, uint64_t max_bytes, int rounds) {
  DiskStore store(dir, max_bytes);
  int problems = 0;
  for (int round = 0; round < rounds; ++round) {
    for (int key = 0; key < 16; ++key) {
      const std::string fk = "shared-key-" + std::to_string(key);
      const std::string p = payloadOf(key, round);
      if (!store.store(fk, p.data(), p.size())) ++problems;
      std::vector<uint8_t> got;
      if (store.load(fk, &got)) {
        const std::string s(got.begin(), got.end());
        if (s.find("|" + std::to_string(key) + "|") == std::string::npos) ++problems;
      }
    }
  }
  return problems + static_cast<int>(store.stats().corrupt);
}

void hammerTwoProcesses(const std::string& dir, uint64_t max_bytes) {
  const pid_t child = ::fork();
  ASSERT_NE(-1, child);
  if (child == 0) _exit(hammer(dir, max_bytes, 60) == 0 ? 0 : 1);
  const int problems = hammer(dir, max_bytes, 60);
  int status = 0;
  ASSERT_EQ(child, ::waitpid(child, &status, 0));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child process saw problems";
  EXPECT_EQ(0, problems);
  // Every file left is whole and no temporary file remains.
  DiskStore check(dir, max_bytes);
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_EQ(std::string::npos, e.path().string().find(".tmp.")) << e.path();
  }
  for (int key = 0; key < 16; ++key) {
    std::vector<uint8_t> got;
    check.load("shared-key-" + std::to_string(key), &got);
  }
  EXPECT_EQ(0u, check.stats().corrupt);
}

TEST_F(CacheTest, DiskTwoProcessesSameKeys) {
  hammerTwoProcesses(dir_.string(), uint64_t{1} << 30);
}

// With a bound far below the working set both processes evict all the
// time: files vanish under readers and evictors (ENOENT), never corrupt.
TEST_F(CacheTest, DiskTwoProcessesEvicting) {
  hammerTwoProcesses(dir_.string(), 20000);
}

TEST_F(CacheTest, DiskTwoProcessCachesShareFiles) {
  g_build_delay_ms = 2;
  const pid_t child = ::fork();
  ASSERT_NE(-1, child);
  if (child == 0) {
    bool ok = true;
    {
      KernelCache cache(&kFake, 0, config());
      for (int i = 0; i < 20; ++i) ok = ok && cache.getOrBuild(keyOf(i), sourceFn(i, 300));
      ok = ok && cache.stats().disk_corrupt == 0;
    }
    _exit(ok ? 0 : 1);
  }
  {
    KernelCache cache(&kFake, 0, config());
    for (int i = 0; i < 20; ++i) cache.getOrBuild(keyOf(i), sourceFn(i, 300));
    EXPECT_EQ(0u, cache.stats().disk_corrupt);
  }
  int status = 0;
  ASSERT_EQ(child, ::waitpid(child, &status, 0));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  g_builds = 0;
  KernelCache cache(&kFake, 0, config());
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(sourceOf(i, 300).text, programText(cache.getOrBuild(keyOf(i), noBuild())));
  }
  EXPECT_EQ(20u, cache.stats().disk_hits);
  EXPECT_EQ(0u, cache.stats().disk_corrupt);
}

// --- an unusable directory ------------------------------------------------

TEST_F(CacheTest, DiskUnwritableDirDegradesToMemory) {
  writeFile((root_ / "file").string(), "not a directory");
  CacheConfig c = config();
  c.dir = (root_ / "file" / "kernels").string();
  ::testing::internal::CaptureStderr();
  {
    KernelCache cache(&kFake, 0, c);
    for (int i = 0; i < 3; ++i) EXPECT_NE(nullptr, cache.getOrBuild(keyOf(i), sourceFn(i)));
    EXPECT_NE(nullptr, cache.find(keyOf(2)));
    const CacheStats s = cache.stats();
    EXPECT_EQ(0u, s.disk_writes);
    EXPECT_EQ(1u, s.disk_write_errors);  // writing is off after the first
    EXPECT_EQ(3u, s.sync_builds);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(std::string::npos, err.find("memory only")) << err;
  EXPECT_EQ(err.find("warning"), err.rfind("warning")) << "warned more than once: " << err;
}

TEST_F(CacheTest, DiskReadOnlyDirDegradesToMemory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  fs::create_directories(dir_);
  ::chmod(dir_.c_str(), 0555);
  ::testing::internal::CaptureStderr();
  {
    KernelCache cache(&kFake, 0, config());
    for (int i = 0; i < 3; ++i) EXPECT_NE(nullptr, cache.getOrBuild(keyOf(i), sourceFn(i)));
    EXPECT_EQ(1u, cache.stats().disk_write_errors);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(std::string::npos, err.find("memory only")) << err;
  ::chmod(dir_.c_str(), 0755);
}

// --- the real opencl plugin (optional) ------------------------------------

#ifdef FLAGOS_OPENCL_PLUGIN
TEST_F(CacheTest, OpenclPluginPersistsAndReloads) {
  void* lib = ::dlopen(FLAGOS_OPENCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) GTEST_SKIP() << "cannot load the opencl plugin: " << ::dlerror();
  auto entry = reinterpret_cast<flagosVendorGetTablesFn>(::dlsym(lib, FLAGOS_VENDOR_ENTRY_SYMBOL));
  ASSERT_NE(nullptr, entry);
  flagosVendorTables tables{};
  tables.struct_size = sizeof tables;
  ASSERT_EQ(FLAGOS_SUCCESS, entry(FLAGOS_ABI_VERSION_MAJOR, FLAGOS_ABI_VERSION_MINOR, &tables));
  flagosProbeInfo info{};
  info.struct_size = sizeof info;
  if (tables.device->probe(&info) != FLAGOS_SUCCESS) GTEST_SKIP() << "no OpenCL device";
  ASSERT_EQ(FLAGOS_SUCCESS, tables.device->init()) << tables.getLastError();
  ASSERT_NE(nullptr, tables.compiler);
  flagosDeviceProperties props{};
  props.struct_size = sizeof props;
  ASSERT_EQ(FLAGOS_SUCCESS, tables.device->getProperties(0, &props));

  CacheConfig c = config();
  c.device_arch = props.arch;
  c.last_error = [&] { return std::string(tables.getLastError()); };
  const auto src = [] {
    return Source{"__kernel void twice(__global float* p, ulong off) { p[get_global_id(0)] *= 2; }",
                  "twice", "-cl-std=CL1.2"};
  };
  {
    KernelCache cache(tables.compiler, 0, c);
    EXPECT_EQ("twice", cache.getOrBuild(keyOf(1), src)->kernel_name);
    EXPECT_EQ(1u, cache.stats().disk_writes);
    try {
      cache.getOrBuild(keyOf(2), [] { return Source{"__kernel void bad( {", "bad", ""}; });
      ADD_FAILURE() << "no BuildError";
    } catch (const BuildError& e) {
      EXPECT_NE(nullptr, std::strstr(e.what(), "bad")) << e.what();
    }
  }
  KernelCache cache(tables.compiler, 0, c);
  const CompiledKernel* k = cache.getOrBuild(keyOf(1), noBuild());
  EXPECT_NE(nullptr, k->program);
  EXPECT_EQ("twice", k->kernel_name);
  EXPECT_EQ(1u, cache.stats().disk_hits);
  EXPECT_EQ(0u, cache.stats().sync_builds);
  // The plugin is left initialized (init is idempotent; other tests may use it).
}
#endif

}  // namespace
}  // namespace flagos::kernels
