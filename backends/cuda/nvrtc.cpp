// NVRTC, opened at run time (libraries.cpp finds it: the nvidia-cuda-nvrtc
// wheel or the toolkit), and the one function that compiles CUDA C for a
// device (compiler.cpp, fill.cpp).
//
// Note [NVRTC targets]
// ~~~~~~~~~~~~~~~~~~~~
// A program is compiled for the device's own architecture as a cubin
// (sm_90 on an H100/H200), so no PTX is JIT-compiled at load and the kernel
// cache's binaries are final machine code. When the device is newer than
// the NVRTC at hand knows (its major is not among nvrtcGetSupportedArchs),
// the newest virtual architecture NVRTC has is compiled to PTX instead and
// the driver compiles that at load; binaries say which (their key holds the
// target and NVRTC's version).
//
// Note [NVRTC's builtins]
// ~~~~~~~~~~~~~~~~~~~~~~~
// NVRTC opens libnvrtc-builtins.so.<major>.<minor> by name when it first
// compiles. The wheel's folder is on no loader path and libnvrtc has no
// RUNPATH, so NVRTC found us its library but not its builtins ("failed to
// open libnvrtc-builtins.so.13.0"): we load the builtins from the folder
// NVRTC came from first, and NVRTC's dlopen then finds them loaded.
#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <sstream>

#include "cuda_plugin.h"

namespace flagos_cuda {
namespace {

struct Nvrtc {
// clang-format off
#define FLAGOS_NVRTC_FUNCTIONS(X) \
  X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcCompileProgram) \
  X(nvrtcDestroyProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX) \
  X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)
// clang-format on
#define FLAGOS_NVRTC_DECLARE(name) decltype(&::name) name = nullptr;
  FLAGOS_NVRTC_FUNCTIONS(FLAGOS_NVRTC_DECLARE)
#undef FLAGOS_NVRTC_DECLARE
  std::string version;
  std::vector<int> archs;  // e.g. 75 80 86 89 90 100 120
  std::string reason;      // "" when usable
};

Nvrtc& nvrtc() {
  static Nvrtc* n = [] {
    auto* n = new Nvrtc();  // never freed: builds may run at process exit
    std::string tried;
    void* lib = openLibrary({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, &tried);
    if (lib == nullptr) {
      n->reason = "NVRTC not found: tried " + tried;
      return n;
    }
#define FLAGOS_NVRTC_BIND(name)                                        \
  if (!bind(lib, #name, &n->name)) {                                   \
    n->reason = std::string("the NVRTC library found lacks ") + #name; \
    return n;                                                          \
  }
    FLAGOS_NVRTC_FUNCTIONS(FLAGOS_NVRTC_BIND)
#undef FLAGOS_NVRTC_BIND
    int major = 0, minor = 0, count = 0;
    n->nvrtcVersion(&major, &minor);
    n->version = std::to_string(major) + "." + std::to_string(minor);
    // Note [NVRTC's builtins]: loaded from NVRTC's own folder first.
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(n->nvrtcVersion), &info) != 0 && info.dli_fname) {
      std::string dir = info.dli_fname;
      dir = dir.substr(0, dir.rfind('/') + 1);
      dlopen((dir + "libnvrtc-builtins.so." + n->version).c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
    if (n->nvrtcGetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0) {
      n->archs.resize(static_cast<size_t>(count));
      n->nvrtcGetSupportedArchs(n->archs.data());
    }
    return n;
  }();
  return *n;
}

std::vector<std::string> splitOptions(const std::string& options) {
  std::istringstream in(options);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

}  // namespace

std::string nvrtcVersion(std::string* reason) {
  Nvrtc& n = nvrtc();
  if (reason != nullptr) *reason = n.reason;
  return n.reason.empty() ? n.version : "";
}

CompileTarget compileTarget(int cc_major, int cc_minor) {
  Nvrtc& n = nvrtc();
  const int cc = cc_major * 10 + cc_minor;
  CompileTarget t;
  int best = 0;
  for (int a : n.archs)
    if (a <= cc && a / 10 == cc_major) best = std::max(best, a);
  if (best > 0) {
    t.arch = "sm_" + std::to_string(best);
  } else {  // Note [NVRTC targets]: a device newer than this NVRTC
    for (int a : n.archs) best = std::max(best, a <= cc ? a : 0);
    t.arch = "compute_" + std::to_string(best > 0 ? best : cc);
    t.ptx = true;
  }
  t.key = "cuda:" + t.arch + ":nvrtc" + n.version;
  return t;
}

flagosStatus_t compileCuda(const CompileTarget& target, const char* source, const char* options,
                           const char* name, std::vector<unsigned char>* image) {
  Nvrtc& n = nvrtc();
  if (!n.reason.empty()) {
    return fail(FLAGOS_ERROR_COMPILE, "cuda programBuild: %s", n.reason.c_str());
  }
  nvrtcProgram program = nullptr;
  nvrtcResult r = n.nvrtcCreateProgram(&program, source, name, 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    return fail(r == NVRTC_ERROR_OUT_OF_MEMORY ? FLAGOS_ERROR_OUT_OF_MEMORY : FLAGOS_ERROR_DEVICE,
                "cuda programBuild: nvrtcCreateProgram: %s", n.nvrtcGetErrorString(r));
  }
  std::vector<std::string> words = {"--gpu-architecture=" + target.arch, "-default-device"};
  for (std::string& w : splitOptions(options != nullptr ? options : "")) words.push_back(w);
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  r = n.nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  std::string log;
  if (n.nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    n.nvrtcGetProgramLog(program, &log[0]);
    log.resize(log_size - 1);
  }
  if (r != NVRTC_SUCCESS) {
    n.nvrtcDestroyProgram(&program);
    return fail(FLAGOS_ERROR_COMPILE, "cuda programBuild: NVRTC %s for %s: %s\n%s",
                n.version.c_str(), target.arch.c_str(), n.nvrtcGetErrorString(r), log.c_str());
  }
  size_t size = 0;
  r = target.ptx ? n.nvrtcGetPTXSize(program, &size) : n.nvrtcGetCUBINSize(program, &size);
  if (r == NVRTC_SUCCESS) {
    image->resize(size);
    r = target.ptx ? n.nvrtcGetPTX(program, reinterpret_cast<char*>(image->data()))
                   : n.nvrtcGetCUBIN(program, reinterpret_cast<char*>(image->data()));
  }
  n.nvrtcDestroyProgram(&program);
  if (r != NVRTC_SUCCESS) {
    return fail(FLAGOS_ERROR_DEVICE, "cuda programBuild: reading the %s: %s",
                target.ptx ? "PTX" : "cubin", n.nvrtcGetErrorString(r));
  }
  return FLAGOS_SUCCESS;
}

}  // namespace flagos_cuda
