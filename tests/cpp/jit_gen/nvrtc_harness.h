// Compiling the generator's "cuda-c" kernels with NVRTC, for an H100/H200
// (sm_90 cubin), on a machine without a GPU: NVRTC needs none. Every call a
// generator test runs through the "c" dialect (runC) is also emitted in
// "cuda-c" and compiled here, so each recipe, dtype and layout the tests
// cover is checked to build for the cuda plugin (backends/cuda). NVRTC is
// opened at run time: FLAGOS_TEST_NVRTC_LIBRARY (CMake found it beside
// nvrtc.h), else FLAGOS_NVRTC_LIBRARY in the environment. Without either the
// checks are skipped, and CudaGenerated.* say so.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
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
  bool build(const Source& src, std::string* why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (built.count(src.text)) return true;
    }
    Program p = nullptr;
    if (create(&p, src.text.c_str(), "flagos.cu", 0, nullptr, nullptr) != 0) {
      *why = "nvrtcCreateProgram failed";
      return false;
    }
    std::vector<std::string> words = {"--gpu-architecture=sm_90", "-default-device"};
    for (size_t s = 0, e; s < src.options.size(); s = e + 1) {
      e = src.options.find(' ', s);
      if (e == std::string::npos) e = src.options.size();
      if (e > s) words.push_back(src.options.substr(s, e - s));
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
      *why = text + "\n--- source:\n" + src.text;
    }
    destroy(&p);
    if (rc != 0 || cubin == 0) return false;
    std::lock_guard<std::mutex> lock(mu);
    built.insert(src.text);
    return true;
  }
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
  const Source src = emit(recipe, *signatureOf(recipe, call), variant, target);
  std::string why;
  EXPECT_TRUE(nvrtc->build(src, &why)) << "NVRTC rejected " << src.kernel_name << ":\n" << why;
}

}  // namespace flagos::kernels::testing
