// The compiler table (language "cuda-c"): CUDA C compiled by NVRTC for the
// device (nvrtc.cpp, Note [NVRTC targets]) and loaded as a module. Kernel
// launches, the table's last member, are in launch.cpp.
//
// Binaries (programGetBinary) are the cubin (or PTX) in the plugin kit's
// envelope (kit/flagos_kit/program_binary.h): magic "FLGOCUB1", keyed by the
// compile target (architecture and NVRTC version), so a cached kernel of
// another GPU generation or NVRTC is FLAGOS_ERROR_COMPILE (the core rebuilds
// it), never a bad module.
#include "cuda_plugin.h"
#include "flagos_kit/fnv1a.h"
#include "flagos_kit/program_binary.h"

namespace flagos_cuda {
namespace {

constexpr char kBinaryMagic[8] = {'F', 'L', 'G', 'O', 'C', 'U', 'B', '1'};

bool validProgram(const char* call, flagosProgram_t program) {
  return flagos_kit::validHandle(call, "program", program, flagosProgram_st::kMagic);
}

uint64_t keyHash(const CompileTarget& target) {
  return flagos_kit::fnv1a(target.key.data(), target.key.size());
}

// Loads @p image (a cubin or PTX) as a module of @p device.
flagosStatus_t load(const char* call, Device* device, const CompileTarget& target,
                    std::vector<unsigned char> image, flagosProgram_t* out) {
  flagosStatus_t st = useContext(*device, call);
  if (st != FLAGOS_SUCCESS) return st;
  CUmodule module = nullptr;
  const CUresult r = cu().cuModuleLoadData(&module, image.data());
  if (r != CUDA_SUCCESS) {
    check(r, call, "cuModuleLoadData");
    return fail(r == CUDA_ERROR_OUT_OF_MEMORY ? FLAGOS_ERROR_OUT_OF_MEMORY : FLAGOS_ERROR_COMPILE,
                "cuda %s: the driver cannot load the %s module for %s: %s", call,
                target.ptx ? "PTX" : "cubin", target.arch.c_str(), errorText(r).c_str());
  }
  auto program = std::make_unique<flagosProgram_st>();
  program->device = device;
  program->module = module;
  program->binary =
      flagos_kit::wrapBinary(kBinaryMagic, image.data(), image.size(), keyHash(target));
  *out = program.release();
  return FLAGOS_SUCCESS;
}

// The compiler table (compiler.h), one static member per entry.
struct CompilerCalls {
  static flagosStatus_t programBuild(int32_t index, const char* source, const char* options,
                                     flagosProgram_t* program) noexcept {
    return guard("programBuild", [&] {
      if (program == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda programBuild: program is NULL");
      }
      *program = nullptr;
      if (source == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda programBuild: source is NULL");
      }
      Device* device = findDevice("programBuild", index);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      const CompileTarget target = compileTarget(device->cc_major, device->cc_minor);
      std::vector<unsigned char> image;
      const flagosStatus_t st = compileCuda(target, source, options, "flagos.cu", &image);
      if (st != FLAGOS_SUCCESS) return st;
      return load("programBuild", device, target, std::move(image), program);
    });
  }

  static flagosStatus_t programGetBinary(flagosProgram_t program, void* buffer,
                                         uint64_t* size) noexcept {
    return guard("programGetBinary", [&] {
      if (!validProgram("programGetBinary", program)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      return flagos_kit::copyOut("programGetBinary", program->binary.data(), program->binary.size(),
                                 buffer, size);
    });
  }

  static flagosStatus_t programLoadBinary(int32_t index, const void* binary, uint64_t size,
                                          flagosProgram_t* program) noexcept {
    return guard("programLoadBinary", [&] {
      if (program == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda programLoadBinary: program is NULL");
      }
      *program = nullptr;
      if (binary == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "cuda programLoadBinary: binary is NULL");
      }
      Device* device = findDevice("programLoadBinary", index);
      if (device == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      const CompileTarget target = compileTarget(device->cc_major, device->cc_minor);
      std::string why;
      const unsigned char* payload = nullptr;
      size_t payload_bytes = 0;
      if (!flagos_kit::unwrapBinary(kBinaryMagic, "flagos CUDA binary", keyHash(target),
                                    "GPU architecture or NVRTC (this one is " + target.key + ")",
                                    binary, size, &payload, &payload_bytes, &why)) {
        return fail(FLAGOS_ERROR_COMPILE, "cuda programLoadBinary: binary rejected: %s",
                    why.c_str());
      }
      return load("programLoadBinary", device, target,
                  std::vector<unsigned char>(payload, payload + payload_bytes), program);
    });
  }

  // Waits for the device's streams first: a module must outlive the
  // launches already queued from it (compiler.h).
  static flagosStatus_t programDestroy(flagosProgram_t program) noexcept {
    return guard("programDestroy", [&] {
      if (!validProgram("programDestroy", program)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      Device* device = program->device;
      synchronizeDevice(device);
      if (useContext(*device, "programDestroy") == FLAGOS_SUCCESS)
        cu().cuModuleUnload(program->module);
      program->magic = 0;
      delete program;
      return FLAGOS_SUCCESS;
    });
  }

  static constexpr const char* language = "cuda-c";
  static constexpr auto kernelLaunch = flagos_cuda::kernelLaunch;  // launch.cpp
};

}  // namespace

const flagosCompilerTable* compilerTable() {
  return flagos_kit::compilerTable<CompilerCalls>();
}

}  // namespace flagos_cuda
