// Compiling the generator's "cuda-c" kernels with NVRTC, for an H100/H200
// (sm_90 cubin), on a machine without a GPU: NVRTC needs none. Every call a
// generator test runs through the "c" dialect (runC) is also emitted in
// "cuda-c" and compiled here, so each recipe, dtype and layout the tests
// cover is checked to build for the cuda plugin (backends/cuda). NVRTC is
// opened at run time: FLAGOS_TEST_NVRTC_LIBRARY (CMake found it beside
// nvrtc.h), else FLAGOS_NVRTC_LIBRARY in the environment. Without either the
// checks are skipped, and CudaGenerated.* say so.
//
// Note [Batched NVRTC builds]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// NVRTC's cost is mostly per program, not per kernel: sixteen generated
// kernels built as one program take a fraction of sixteen programs' time
// (docs/testing.md). buildAll() therefore puts up to kBatch sources in one
// program, each in a namespace of its own and its extern "C" entry point
// renamed (kernels of one recipe share a name), on every core. A batch
// NVRTC rejects is built again source by source, so a failure names the
// kernel and shows its own log and text. The runC calls of the other
// generator tests queue their kernels (expectCudaBuilds) and the queue is
// built once, after the last test (PendingCudaBuilds).
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "jit/gen/generator.h"

namespace flagos::kernels::testing {

struct Nvrtc {
  // nvrtc.h's entry points, declared here so the test builds without it.
  using Program = void*;
  int (*create)(Program*, const char*, const char*, int, const char* const*,
                const char* const*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*logSize)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*cubinSize)(Program, size_t*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  int (*version)(int*, int*) = nullptr;
  std::string path;
  std::mutex mu;
  std::set<std::string> built;  // sources compiled already (by text)

  // The process-wide instance, or nullptr when NVRTC is not available.
  static Nvrtc* get() {
    static Nvrtc* n = [] {
      std::string path;
#ifdef FLAGOS_TEST_NVRTC_LIBRARY
      path = FLAGOS_TEST_NVRTC_LIBRARY;
#endif
      if (const char* env = std::getenv("FLAGOS_NVRTC_LIBRARY")) path = env;
      if (path.empty()) return (Nvrtc*)nullptr;
      void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib == nullptr) return (Nvrtc*)nullptr;
      auto* n = new Nvrtc;
      n->path = path;
      n->create = (decltype(n->create))dlsym(lib, "nvrtcCreateProgram");
      n->compile = (decltype(n->compile))dlsym(lib, "nvrtcCompileProgram");
      n->logSize = (decltype(n->logSize))dlsym(lib, "nvrtcGetProgramLogSize");
      n->log = (decltype(n->log))dlsym(lib, "nvrtcGetProgramLog");
      n->cubinSize = (decltype(n->cubinSize))dlsym(lib, "nvrtcGetCUBINSize");
      n->destroy = (decltype(n->destroy))dlsym(lib, "nvrtcDestroyProgram");
      n->version = (decltype(n->version))dlsym(lib, "nvrtcVersion");
      if (!n->create || !n->compile || !n->logSize || !n->log || !n->cubinSize || !n->destroy ||
          !n->version) {
        return (Nvrtc*)nullptr;
      }
      // NVRTC opens libnvrtc-builtins.so.<major>.<minor> by name; the
      // wheel's folder is on no loader path (backends/cuda/nvrtc.cpp).
      int major = 0, minor = 0;
      n->version(&major, &minor);
      const std::string dir = path.substr(0, path.rfind('/') + 1);
      dlopen((dir + "libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor))
                 .c_str(),
             RTLD_NOW | RTLD_GLOBAL);
      return n;
    }();
    return n;
  }

  // Compiles @p src for sm_90 with the plugin's options (backends/cuda/
  // nvrtc.cpp); false with the log in @p why when NVRTC rejects it.
  // Builds one source; on failure @p why gets NVRTC's log and the source.
  bool build(const Source& src, std::string* why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (built.count(src.text)) return true;
    }
    if (!compileProgram(src.text, src.options, why)) {
      *why += "\n--- source:\n" + src.text;
      return false;
    }
    std::lock_guard<std::mutex> lock(mu);
    built.insert(src.text);
    return true;
  }

  // Builds @p group (sources with the same options) as one program: see
  // Note [Batched NVRTC builds]. False, with NVRTC's log, when it rejects
  // the program.
  bool buildTogether(const std::vector<const Source*>& group, std::string* why) {
    std::string text;
    for (size_t i = 0; i < group.size(); ++i) {
      std::string t = group[i]->text;
      const std::string name = group[i]->kernel_name + "(";
      const size_t at = t.find(name, t.find("__global__"));
      if (at == std::string::npos) {
        *why = "no entry point " + group[i]->kernel_name;
        return false;
      }
      t.replace(at, name.size(), group[i]->kernel_name + "_" + std::to_string(i) + "(");
      text += "namespace flagos_batch_" + std::to_string(i) + " {\n" + t + "\n}\n";
    }
    if (!compileProgram(text, group[0]->options, why)) return false;
    std::lock_guard<std::mutex> lock(mu);
    for (const Source* s : group) built.insert(s->text);
    return true;
  }

 private:
  bool compileProgram(const std::string& text, const std::string& options, std::string* why) {
    Program p = nullptr;
    if (create(&p, text.c_str(), "flagos.cu", 0, nullptr, nullptr) != 0) {
      *why = "nvrtcCreateProgram failed";
      return false;
    }
    std::vector<std::string> words = {"--gpu-architecture=sm_90", "-default-device"};
    for (size_t s = 0, e; s < options.size(); s = e + 1) {
      e = options.find(' ', s);
      if (e == std::string::npos) e = options.size();
      if (e > s) words.push_back(options.substr(s, e - s));
    }
    std::vector<const char*> argv;
    for (const auto& w : words) argv.push_back(w.c_str());
    const int rc = compile(p, (int)argv.size(), argv.data());
    size_t cubin = 0;
    if (rc == 0) cubinSize(p, &cubin);
    if (rc != 0 || cubin == 0) {
      size_t n = 0;
      logSize(p, &n);
      std::string text(n, '\0');
      if (n > 0) log(p, &text[0]);
      *why = text;
    }
    destroy(&p);
    return rc == 0 && cubin != 0;
  }
};

// Builds every source (Note [Batched NVRTC builds]) and returns one line
// per rejected kernel: its name, NVRTC's log and its text.
inline std::vector<std::string> buildAll(Nvrtc* nvrtc, const std::vector<Source>& sources) {
  constexpr size_t kBatch = 16;
  // Batches of one options string, in the order given.
  std::map<std::string, std::vector<const Source*>> by_options;
  for (const Source& s : sources) by_options[s.options].push_back(&s);
  std::vector<std::vector<const Source*>> batches;
  for (const auto& [options, group] : by_options)
    for (size_t i = 0; i < group.size(); i += kBatch)
      batches.emplace_back(group.begin() + i, group.begin() + std::min(group.size(), i + kBatch));
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::vector<std::string> failures;
  auto work = [&] {
    for (size_t b = next++; b < batches.size(); b = next++) {
      std::string why;
      if (nvrtc->buildTogether(batches[b], &why)) continue;
      for (const Source* s : batches[b]) {
        if (nvrtc->build(*s, &why)) continue;
        std::lock_guard<std::mutex> lock(mu);
        failures.push_back(s->kernel_name + ":\n" + why);
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < std::max(1u, std::thread::hardware_concurrency()); ++t)
    threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return failures;
}

// The kernels runC's calls queued (expectCudaBuilds), built after the last
// test; a rejected one fails the run with the test that queued it.
class PendingCudaBuilds : public ::testing::Environment {
 public:
  static PendingCudaBuilds& get() {
    static PendingCudaBuilds* p = [] {
      auto* env = new PendingCudaBuilds;
      ::testing::AddGlobalTestEnvironment(env);  // gtest owns it
      return env;
    }();
    return *p;
  }
  void add(Source src) {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    if (t != nullptr)
      src.kernel_name =
          std::string(t->test_suite_name()) + "." + t->name() + ": " + src.kernel_name;
    sources_.push_back(std::move(src));
  }
  void TearDown() override {
    Nvrtc* nvrtc = Nvrtc::get();
    if (nvrtc == nullptr || sources_.empty()) return;
    const std::vector<std::string> failures = buildAll(nvrtc, sources_);
    for (const std::string& f : failures) ADD_FAILURE() << "NVRTC rejected " << f;
    std::printf("NVRTC: %zu kernels of the generator tests' calls built for sm_90, %zu rejected\n",
                sources_.size(), failures.size());
  }

 private:
  std::vector<Source> sources_;
};

// A scratch tensor's descriptor for emit(): only dtype and shape matter.
struct ScratchView {
  int64_t shape[1];
  int64_t stride[1] = {1};
  flagosTensor view(const ScratchBuffer& b) {
    shape[0] = b.elements;
    return {reinterpret_cast<void*>(uintptr_t{256}), b.dtype, 1, shape, stride};
  }
};

// The "cuda-c" kernel of @p call (outputs without scratch) as the cuda
// plugin would build it (local size 256), compiled with NVRTC. Calls the
// cuda target declines are not the plugin's either: nothing to check.
inline void expectCudaBuilds(const Recipe& recipe, Call call, Variant variant) {
  Nvrtc* nvrtc = Nvrtc::get();
  if (nvrtc == nullptr) return;
  const Target target{"cuda-c", true, 256};
  std::vector<flagosTensor> outs(call.outputs, call.outputs + call.num_outputs);
  const std::vector<ScratchBuffer> scratch = scratchFor(recipe, call, target);
  std::vector<ScratchView> views(scratch.size());
  for (size_t k = 0; k < scratch.size(); ++k) outs.push_back(views[k].view(scratch[k]));
  call.outputs = outs.data();
  call.num_outputs = (int32_t)outs.size();
  KernelKey key;
  if (!keyFor(recipe, call, variant, target, &key, nullptr)) return;
  PendingCudaBuilds::get().add(emit(recipe, *signatureOf(recipe, call), variant, target));
}

}  // namespace flagos::kernels::testing
