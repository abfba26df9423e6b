// The extension interface's kernels (Note [Custom kernels], custom_kernel.h).
#include "extension/custom_kernel.h"

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "jit/devices.h"
#include "jit/target.h"
#include "runtime/backend.h"
#include "runtime/stream.h"

namespace flagos::extension {
namespace {

std::atomic<uint64_t> g_launches{0};

// First word of every custom kernel's key; generated keys start with
// kGeneratorVersion (> 0).
constexpr int64_t kCustomTag = -1;
// First word of a fused kernel's key (Note [Fused kernels]).
constexpr int64_t kFusedTag = -2;

// @p text as key words: its length, then 8 bytes per word.
void appendText(std::vector<int64_t>* words, const std::string& text) {
  words->push_back(static_cast<int64_t>(text.size()));
  for (size_t i = 0; i < text.size(); i += 8) {
    uint64_t word = 0;
    for (size_t j = 0; j < 8 && i + j < text.size(); ++j)
      word |= static_cast<uint64_t>(static_cast<unsigned char>(text[i + j])) << (8 * j);
    words->push_back(static_cast<int64_t>(word));
  }
}

// compiler.h's conventions as macros. "opencl-c": a device pointer is two
// parameters (buffer, byte offset). "c": one function over a range of work
// items, every argument behind args[k].
const char kOpenclPrelude[] =
    "/* flagos custom-kernel prelude (Note [Custom kernels]) */\n"
    "#define FLAGOS_TENSOR(T, name) __global T* name##_base_, ulong name##_offset_\n"
    "#define FLAGOS_PTR(T, name) ((__global T*)((__global char*)name##_base_ + "
    "name##_offset_))\n"
    "#line 1\n";
// "cuda-c": a device pointer is one parameter; kernels are `extern "C"
// __global__` (found by name) and use CUDA's own indices.
const char kCudaPrelude[] =
    "/* flagos custom-kernel prelude (Note [Custom kernels]) */\n"
    "#define FLAGOS_TENSOR(T, name) T* name##_ptr_\n"
    "#define FLAGOS_PTR(T, name) ((T*)name##_ptr_)\n"
    "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"
    "#line 1\n";
const char kCPrelude[] =
    "/* flagos custom-kernel prelude (Note [Custom kernels]) */\n"
    "#include <math.h>\n#include <stddef.h>\n#include <stdint.h>\n"
    "#define FLAGOS_KERNEL(name) void name(void* const* flagos_args_, uint64_t flagos_begin_, "
    "uint64_t flagos_end_)\n"
    "#define FLAGOS_ITEMS(i) for (uint64_t i = flagos_begin_; i < flagos_end_; ++i)\n"
    "#define FLAGOS_TENSOR_ARG(T, k) (*(T* const*)flagos_args_[k])\n"
    "#define FLAGOS_SCALAR_ARG(T, k) (*(const T*)flagos_args_[k])\n"
    "#line 1\n";

}  // namespace

std::string language() {
  if (!isInitialized() || !semantic::hasCompiler()) return "";
  return backend().tables.compiler->language;
}

const std::string& preludeFor(const std::string& lang) {
  static const std::string opencl = kOpenclPrelude, c = kCPrelude, cuda = kCudaPrelude, none;
  if (lang == "opencl-c") return opencl;
  if (lang == "cuda-c") return cuda;
  if (lang == "c") return c;
  return none;
}

namespace {

// The program @p text (complete), keyed by @p tag, the plugin, @p name,
// @p options and the text; @p what names it in errors.
const kernels::CompiledKernel* buildText(c10::DeviceIndex device, int64_t tag,
                                         const std::string& name, const std::string& text,
                                         const std::string& options, const std::string& what) {
  const std::string lang = language();
  if (lang.empty()) {
    throw std::runtime_error(what + "s need a compiler: backend '" +
                             (isInitialized() ? backend().name : std::string("(none)")) +
                             "' has no compiler table (include/flagos/compiler.h)");
  }
  if (name.empty()) throw std::invalid_argument("a " + what + " needs an entry point name");
  const Backend& b = backend();
  kernels::KernelKey key;
  key.words = {tag};
  appendText(&key.words, b.name);
  appendText(&key.words, b.tables.version != nullptr ? b.tables.version : "");
  appendText(&key.words, name);
  appendText(&key.words, options);
  appendText(&key.words, text);
  semantic::DeviceGenerator& d = semantic::Generators::get().device(device);
  try {
    return d.cache->getOrBuild(key, [&] { return kernels::Source{text, name, options}; });
  } catch (const kernels::BuildError& e) {
    throw std::runtime_error(what + " '" + name + "' failed to compile (" + lang + ", " + b.name +
                             "):\n" + e.what());
  }
}

}  // namespace

const kernels::CompiledKernel* build(c10::DeviceIndex device, const std::string& name,
                                     const std::string& source, const std::string& options) {
  return buildText(device, kCustomTag, name, preludeFor(language()) + source, options,
                   "custom kernel");
}

const kernels::CompiledKernel* buildFused(c10::DeviceIndex device, const kernels::Source& source) {
  return buildText(device, kFusedTag, source.kernel_name, source.text, source.options,
                   "fused kernel");
}

void launch(const kernels::CompiledKernel& kernel, c10::DeviceIndex device,
            const std::vector<Arg>& args, const std::vector<uint64_t>& global,
            const std::vector<uint64_t>& local, bool custom) {
  if (global.empty() || global.size() > 3)
    throw std::invalid_argument("global_size needs 1 to 3 dimensions");
  if (!local.empty() && local.size() != global.size())
    throw std::invalid_argument("local_size needs as many dimensions as global_size");
  for (uint64_t l : local)
    if (l == 0) throw std::invalid_argument("local_size entries must be positive");
  // DEVICE_PTR values point to a void* holding the address.
  std::vector<const void*> addresses(args.size());
  std::vector<flagosKernelArg> packed(args.size());
  for (size_t k = 0; k < args.size(); ++k) {
    if (args[k].by_value) {
      packed[k] = {FLAGOS_ARG_BYTES, static_cast<uint32_t>(args[k].bytes.size()),
                   args[k].bytes.data()};
    } else {
      addresses[k] = args[k].address;
      packed[k] = {FLAGOS_ARG_DEVICE_PTR, sizeof(void*), &addresses[k]};
    }
  }
  const flagosStatus_t status = backend().tables.compiler->kernelLaunch(
      kernel.program, kernel.kernel_name.c_str(), packed.data(),
      static_cast<int32_t>(packed.size()), static_cast<int32_t>(global.size()), global.data(),
      local.empty() ? nullptr : local.data(), currentVendorStream(device));
  if (status != FLAGOS_SUCCESS) {
    const std::string what = "custom kernel '" + kernel.kernel_name + "' launch";
    check(status, what.c_str());
  }
  if (custom) g_launches.fetch_add(1, std::memory_order_relaxed);
}

uint64_t launches() {
  return g_launches.load(std::memory_order_relaxed);
}

}  // namespace flagos::extension
