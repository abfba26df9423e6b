// Finding the CUDA SDK's libraries at run time (NVRTC, cuBLASLt, cuDNN,
// NCCL). They come as Python wheels (nvidia-cuda-nvrtc, nvidia-cublas, ...)
// in site-packages/nvidia/*/lib, which is on no loader path; the Python
// package puts those folders into FLAGOS_CUDA_LIBRARY_PATH before it loads
// the plugin (flagos_torchfl/backend.py), and a process that already loaded
// a library (torch's CUDA build loads its cuBLAS) shares it by soname.
#include <dlfcn.h>

#include <cstdlib>

#include "cuda_plugin.h"

namespace flagos_cuda {

void* openLibrary(const std::vector<std::string>& sonames, std::string* tried) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("FLAGOS_CUDA_LIBRARY_PATH")) {
    std::string rest = path;
    for (size_t start = 0; start <= rest.size();) {
      const size_t end = rest.find(':', start);
      const std::string dir = rest.substr(start, end == std::string::npos ? end : end - start);
      if (!dir.empty()) dirs.push_back(dir);
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  std::string list;
  for (const std::string& soname : sonames) {
    // RTLD_GLOBAL: cuDNN and NCCL open their own sub-libraries by soname.
    if (void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_GLOBAL)) return lib;
    list += (list.empty() ? "" : ", ") + soname;
    for (const std::string& dir : dirs) {
      const std::string path = dir + "/" + soname;
      if (void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return lib;
    }
  }
  if (tried != nullptr) {
    *tried = list + " (on the loader's path" +
             (dirs.empty() ? std::string(", FLAGOS_CUDA_LIBRARY_PATH unset")
                           : ", and in FLAGOS_CUDA_LIBRARY_PATH") +
             ")";
  }
  return nullptr;
}

void* symbolOf(void* lib, const char* name) {
  return lib == nullptr ? nullptr : dlsym(lib, name);
}

}  // namespace flagos_cuda
