// The compiler table (language "c"): generated C source built by the system C
// compiler into a shared object, loaded with dlopen and launched on a stream.
//
// Note [Host C kernels]
// ~~~~~~~~~~~~~~~~~~~~~
// A kernel is `void NAME(void* const* args, uint64_t begin, uint64_t end)`
// and computes work items [begin, end); args[k] points to a copy of the k-th
// argument's value (compiler.h). kernelLaunch splits global[0] across the
// kernel pool with parallelFor, local[0] (if given) being the smallest chunk.
// When the source defines `const int NAME_num_args`, launches are checked
// against it.
//
// Builds run `$FLAGOS_HOST_CC` (default "cc"; read at every build, split on
// spaces so that "ccache cc" works) through posix_spawnp, never a shell, in
// a private mkdtemp folder:
//     cc -O2 -march=native -mprefer-vector-width=512 -shared -fPIC -std=c99 -Wl,-Bsymbolic
//        -o kernel.so kernel.c <options> -lm
// The options come after the source, so "-O3" overrides and "-lfoo" links;
// -Bsymbolic binds the kernels' calls to their own helpers, never to a
// same-named symbol of the process. -march=native (x86-64 only: other GCC
// targets spell it -mcpu): the device is this CPU, and without it loops
// vectorize for SSE2 and call the 4-wide vector math (Note [Vector math in
// generated C], csrc/jit/gen/emit_c.cpp) where AVX-512 runs 16 lanes; and
// 512-bit vectors where the CPU has them (GCC's tuning for AVX-512 server
// parts picks 256), which made generated sigmoid and softmax rows faster
// in interleaved runs (docs/benchmarks.md, "Measurements behind design
// decisions"). No-op elsewhere.
//
// Binaries (programGetBinary) are the .so bytes behind a 32-byte header like
// the opencl plugin's: magic "FLGOHCB1", payload size, FNV-1a of the payload,
// FNV-1a of the machine key (uname machine, the CPU's feature flags, the
// compiler's --version line), so a truncated, corrupted or foreign file
// (another CPU's -march=native code among them) is FLAGOS_ERROR_COMPILE
// before dlopen sees a byte.
//
// Lifetime: a program handle shares its Library (the dlopen handle) with the
// launches it queued, so programDestroy while launches are pending only
// drops the handle; the last task to finish dlcloses the code.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "flagos_kit/calls.h"
#include "flagos_kit/env.h"
#include "flagos_kit/program_binary.h"
#include "flagos_kit/tables.h"
#include "host.h"
#include "kernels/kernels.h"

extern char** environ;

namespace flagos_host {
namespace {

using KernelFn = void (*)(void* const* args, uint64_t begin, uint64_t end);

constexpr uint32_t kProgramMagic = 0x50524f47u;  // "PROG"
constexpr char kBinaryMagic[8] = {'F', 'L', 'G', 'O', 'H', 'C', 'B', '1'};
// Build logs beyond this are cut (a broken generator can emit megabytes).
constexpr size_t kMaxLog = 16384;

using flagos_kit::fnv1a;

// --------------------------------------------------------------- files ---

// A private folder (mkdtemp) removed with the files it named. The pid and a
// counter make every path unique for the life of the process: dlopen
// returns an already loaded library whose path matches, whatever the file.
class TempDir {
 public:
  ~TempDir() {
    for (const auto& f : files_) unlink(f.c_str());
    if (!path_.empty()) rmdir(path_.c_str());
  }
  bool create(std::string* error) {
    static std::atomic<uint64_t> counter{0};
    std::string pattern = flagos_kit::envValue("TMPDIR").value_or("/tmp") + "/flagos-hostcc-" +
                          std::to_string(getpid()) + "-" + std::to_string(counter++) + "-XXXXXX";
    if (mkdtemp(&pattern[0]) == nullptr) {
      *error = "cannot create a folder like " + pattern + ": " + std::strerror(errno);
      return false;
    }
    path_ = pattern;
    return true;
  }
  std::string file(const char* name) {
    files_.push_back(path_ + "/" + name);
    return files_.back();
  }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

bool writeFile(const std::string& path, const void* data, size_t size, std::string* error) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const auto* p = static_cast<const char*>(data);
  while (fd >= 0 && size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    p += n;
    size -= static_cast<size_t>(n);
  }
  const bool ok = fd >= 0 && size == 0;
  if (!ok) *error = "cannot write " + path + ": " + std::strerror(errno);
  if (fd >= 0) close(fd);
  return ok;
}

bool readFile(const std::string& path, std::vector<unsigned char>* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out->clear();
  unsigned char buffer[16384];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return n == 0;
    }
    out->insert(out->end(), buffer, buffer + n);
  }
}

// ------------------------------------------------------ the C compiler ---

std::vector<std::string> splitSpaces(const char* text) {
  std::vector<std::string> words;
  std::string word;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c == ' ' || *c == '\t' || *c == '\n') {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += *c;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

// $FLAGOS_HOST_CC, or "cc" when unset or blank (the kit's envValue).
std::string compilerCommand() {
  return flagos_kit::envValue("FLAGOS_HOST_CC").value_or("cc");
}

struct RunResult {
  int spawn_error = 0;  // errno of posix_spawnp; 0 when the program ran
  int exit_code = -1;   // -1: killed by a signal
  std::string output;   // stdout and stderr together
};

// Runs @p argv (no shell) with stdout and stderr into @p log_path.
RunResult runTool(const std::vector<std::string>& argv, const std::string& log_path) {
  RunResult result;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // The caller may be a pool thread with signals blocked, in a process that
  // ignores SIGPIPE (Python): the compiler gets neither.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t signals;
  sigemptyset(&signals);
  posix_spawnattr_setsigmask(&attr, &signals);
  sigaddset(&signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &signals);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  result.spawn_error = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (result.spawn_error != 0) return result;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {  // e.g. SIGCHLD ignored by the application: status unknown
      result.spawn_error = errno;
      return result;
    }
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::vector<unsigned char> log;
  if (readFile(log_path, &log)) result.output.assign(log.begin(), log.end());
  return result;
}

// The compiler could not be started (glibc reports ENOENT from posix_spawnp;
// other C libraries let the child exit 127).
bool compilerMissing(const RunResult& r) {
  return r.spawn_error == ENOENT || (r.spawn_error == 0 && r.exit_code == 127 && r.output.empty());
}

// The compiler flags every build starts with (before -o).
const std::vector<const char*>& baseFlags() {
#if defined(__x86_64__)
  static const std::vector<const char*> flags = {
      "-O2",      "-march=native", "-mprefer-vector-width=512", "-shared", "-fPIC",
      "-std=c99", "-Wl,-Bsymbolic"};
#else
  static const std::vector<const char*> flags = {"-O2", "-shared", "-fPIC", "-std=c99",
                                                 "-Wl,-Bsymbolic"};
#endif
  return flags;
}

// The CPU's feature flags as /proc/cpuinfo lists them ("" where it does
// not): what -march=native code may use.
std::string cpuFlags() {
  std::vector<unsigned char> bytes;
  if (!readFile("/proc/cpuinfo", &bytes)) return "";
  const std::string text(bytes.begin(), bytes.end());
  for (const char* field : {"\nflags", "\nFeatures"}) {
    const size_t at = text.find(field);
    if (at == std::string::npos) continue;
    const size_t colon = text.find(':', at), end = text.find('\n', at + 1);
    if (colon != std::string::npos && colon < end) return text.substr(colon + 1, end - colon - 1);
  }
  return "";
}

// "x86_64 | <cpu flags> | cc (Debian 12.2.0-14) 12.2.0": what a binary must
// have been built for. Cached per compiler command (one `cc --version` per
// process).
std::string machineKey(const std::string& cc) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(cc);
    if (it != cache.end()) return it->second;
  }
  struct utsname names {};
  std::string key = uname(&names) == 0 ? names.machine : "unknown-machine";
  key += " |" + cpuFlags();
  std::string version = "(no compiler)";
  TempDir dir;
  std::string ignored;
  if (dir.create(&ignored)) {
    std::vector<std::string> argv = splitSpaces(cc.c_str());
    argv.push_back("--version");
    const RunResult r = runTool(argv, dir.file("version.log"));
    if (r.spawn_error == 0 && r.exit_code == 0) version = r.output.substr(0, r.output.find('\n'));
  }
  key += " | " + version;
  std::lock_guard<std::mutex> lock(mu);
  return cache.emplace(cc, key).first->second;
}

}  // namespace
}  // namespace flagos_host

// ------------------------------------------------------------ programs ---

namespace flagos_host {
namespace {

// One dlopen handle, shared by a program and the launches it queued.
struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle != nullptr) dlclose(handle);
  }
};

struct Kernel {
  KernelFn fn = nullptr;
  int num_args = -1;  // -1: the source defines no NAME_num_args
};

}  // namespace
}  // namespace flagos_host

// The opaque handle of compiler.h; only this file uses it.
struct flagosProgram_st {
  static constexpr uint32_t kMagic = flagos_host::kProgramMagic;
  uint32_t magic = kMagic;
  int32_t device = 0;
  std::shared_ptr<flagos_host::Library> library;
  std::vector<unsigned char> binary;  // header + .so bytes (programGetBinary)
  std::mutex mu;                      // guards kernels
  std::unordered_map<std::string, flagos_host::Kernel> kernels;
};

namespace flagos_host {
namespace {

bool validProgram(const char* call, flagosProgram_t program) noexcept {
  return flagos_kit::validHandle(call, "program", program, kProgramMagic);
}

// dlopens @p path and wraps the result into a program of @p device whose
// binary is @p so behind a header for @p key. The file may go afterwards:
// the mapping keeps the code (and its inode, so dlopen never mistakes a
// later file for this one).
flagosStatus_t makeProgram(const char* call, int32_t device, const std::string& path,
                           const std::vector<unsigned char>& so, const std::string& key,
                           flagosProgram_t* out) {
  auto library = std::make_shared<Library>();
  library->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library->handle == nullptr) {
    const char* why = dlerror();
    return fail(FLAGOS_ERROR_COMPILE, "host %s: cannot load the compiled kernels: %s", call,
                why != nullptr ? why : "dlopen failed");
  }
  auto program = std::make_unique<flagosProgram_st>();
  program->device = device;
  program->library = std::move(library);
  program->binary =
      flagos_kit::wrapBinary(kBinaryMagic, so.data(), so.size(), fnv1a(key.data(), key.size()));
  *out = program.release();
  return FLAGOS_SUCCESS;
}

bool isIdentifier(const char* name) {
  if (name[0] == '\0' || std::strlen(name) > 200 ||
      std::isdigit(static_cast<unsigned char>(name[0])))
    return false;
  for (const char* c = name; *c != '\0'; ++c) {
    if (!std::isalnum(static_cast<unsigned char>(*c)) && *c != '_') return false;
  }
  return true;
}

// @p symbol of the program's own library if it has ELF type @p type
// (STT_FUNC, STT_OBJECT), else nullptr. dlsym also searches the library's
// dependencies (libm, libc), and "free" must not pass for a kernel, nor a
// variable be called.
void* ownSymbol(void* handle, const std::string& symbol, unsigned type) {
  void* address = dlsym(handle, symbol.c_str());
  if (address == nullptr) return nullptr;
  link_map* own = nullptr;
  link_map* found = nullptr;
  ElfW(Sym)* entry = nullptr;
  Dl_info info{};
  if (dlinfo(handle, RTLD_DI_LINKMAP, &own) != 0 ||
      dladdr1(address, &info, reinterpret_cast<void**>(&found), RTLD_DL_LINKMAP) == 0 ||
      found != own ||
      dladdr1(address, &info, reinterpret_cast<void**>(&entry), RTLD_DL_SYMENT) == 0 ||
      entry == nullptr || ELF64_ST_TYPE(entry->st_info) != type) {
    return nullptr;
  }
  return address;
}

// The kernel @p name of @p program, looked up once. program->mu held.
flagosStatus_t findKernel(flagosProgram_t program, const char* name, Kernel* out) {
  auto it = program->kernels.find(name);
  if (it != program->kernels.end()) {
    *out = it->second;
    return FLAGOS_SUCCESS;
  }
  void* handle = program->library->handle;
  void* fn = isIdentifier(name) ? ownSymbol(handle, name, STT_FUNC) : nullptr;
  if (fn == nullptr) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host kernelLaunch: no kernel '%s' in the program",
                name);
  }
  Kernel kernel;
  kernel.fn = reinterpret_cast<KernelFn>(fn);
  if (const void* count = ownSymbol(handle, std::string(name) + "_num_args", STT_OBJECT)) {
    std::memcpy(&kernel.num_args, count, sizeof(int));
  }
  *out = program->kernels.emplace(name, kernel).first->second;
  return FLAGOS_SUCCESS;
}

// A launch's own copy of everything the task needs.
struct Launch {
  std::shared_ptr<Library> library;  // keeps the code mapped until the task ran
  KernelFn fn = nullptr;
  std::vector<std::max_align_t> values;  // the argument values, each aligned
  std::vector<void*> pointers;           // args[k] -> values
};

// Checks @p args and copies their values into @p launch (they die when
// kernelLaunch returns). Records the message on failure.
flagosStatus_t copyArguments(int32_t device, const char* name, const flagosKernelArg* args,
                             int32_t num_args, Launch* launch) {
  constexpr size_t kAlign = sizeof(std::max_align_t);
  std::vector<size_t> offsets;
  size_t total = 0;
  for (int32_t i = 0; i < num_args; ++i) {
    const flagosKernelArg& arg = args[i];
    const void* address = nullptr;  // a DEVICE_PTR's
    const flagosStatus_t checked = flagos_kit::checkKernelArg(name, i, arg, &address);
    if (checked != FLAGOS_SUCCESS) return checked;
    Arena* arena = address != nullptr ? findArena(address, 0) : nullptr;
    if (address != nullptr && arena != state().devices[static_cast<size_t>(device)]->arena.get()) {
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host kernelLaunch: '%s' argument %d: %p is not memory of device %d", name, i,
                  address, device);
    }
    offsets.push_back(total);
    total += (arg.size + kAlign - 1) / kAlign * kAlign;
  }
  launch->values.resize(total / kAlign);
  auto* base = reinterpret_cast<unsigned char*>(launch->values.data());
  for (int32_t i = 0; i < num_args; ++i) {
    std::memcpy(base + offsets[i], args[i].value, args[i].size);
    launch->pointers.push_back(base + offsets[i]);
  }
  return FLAGOS_SUCCESS;
}

// The compiler table (compiler.h), one static member per entry.
struct CompilerCalls {
  static flagosStatus_t programBuild(int32_t device, const char* source, const char* options,
                                     flagosProgram_t* program) noexcept {
    return guard("programBuild", [&] {
      if (program == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host programBuild: program is NULL");
      }
      *program = nullptr;
      if (source == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host programBuild: source is NULL");
      }
      if (findDevice("programBuild", device) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      TempDir dir;
      std::string error;
      if (!dir.create(&error))
        return fail(FLAGOS_ERROR_COMPILE, "host programBuild: %s", error.c_str());
      const std::string src = dir.file("kernel.c"), so = dir.file("kernel.so");
      if (!writeFile(src, source, std::strlen(source), &error)) {
        return fail(FLAGOS_ERROR_COMPILE, "host programBuild: %s", error.c_str());
      }
      const std::string cc = compilerCommand();
      std::vector<std::string> argv = splitSpaces(cc.c_str());
      for (const char* flag : baseFlags()) argv.push_back(flag);
      argv.push_back("-o");
      argv.push_back(so);
      argv.push_back(src);
      for (auto& option : splitSpaces(options != nullptr ? options : "")) argv.push_back(option);
      argv.push_back("-lm");
      const RunResult r = runTool(argv, dir.file("build.log"));
      if (compilerMissing(r)) {
        return fail(FLAGOS_ERROR_COMPILE,
                    "host programBuild: no C compiler: FLAGOS_HOST_CC=%s not found (set "
                    "FLAGOS_HOST_CC to a C compiler on PATH or its full path)",
                    cc.c_str());
      }
      if (r.spawn_error != 0) {
        return fail(FLAGOS_ERROR_COMPILE, "host programBuild: cannot run FLAGOS_HOST_CC=%s: %s",
                    cc.c_str(), std::strerror(r.spawn_error));
      }
      if (r.exit_code != 0) {
        const bool cut = r.output.size() > kMaxLog;
        return fail(
            FLAGOS_ERROR_COMPILE,
            "host programBuild: the C compiler (FLAGOS_HOST_CC=%s) failed with %s %d:\n%s%s",
            cc.c_str(), r.exit_code < 0 ? "a signal, code" : "exit code", r.exit_code,
            r.output.substr(0, kMaxLog).c_str(), cut ? "\n[build log cut]" : "");
      }
      std::vector<unsigned char> bytes;
      if (!readFile(so, &bytes) || bytes.empty()) {
        return fail(FLAGOS_ERROR_COMPILE, "host programBuild: the C compiler wrote no %s",
                    so.c_str());
      }
      return makeProgram("programBuild", device, so, bytes, machineKey(cc), program);
    });
  }

  static flagosStatus_t programGetBinary(flagosProgram_t program, void* buffer,
                                         uint64_t* size) noexcept {
    return guard("programGetBinary", [&] {
      if (!validProgram("programGetBinary", program)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      // The binary is immutable after creation.
      return flagos_kit::copyOut("programGetBinary", program->binary.data(), program->binary.size(),
                                 buffer, size);
    });
  }

  static flagosStatus_t programLoadBinary(int32_t device, const void* binary, uint64_t size,
                                          flagosProgram_t* program) noexcept {
    return guard("programLoadBinary", [&] {
      if (program == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host programLoadBinary: program is NULL");
      }
      *program = nullptr;
      if (binary == nullptr) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT, "host programLoadBinary: binary is NULL");
      }
      if (findDevice("programLoadBinary", device) == nullptr) return FLAGOS_ERROR_INVALID_ARGUMENT;
      const std::string key = machineKey(compilerCommand());
      std::string why;
      const unsigned char* payload = nullptr;
      size_t bytes = 0;
      if (!flagos_kit::unwrapBinary(kBinaryMagic, "flagos host binary",
                                    fnv1a(key.data(), key.size()),
                                    "machine or compiler (this one is " + key + ")", binary, size,
                                    &payload, &bytes, &why)) {
        return fail(FLAGOS_ERROR_COMPILE, "host programLoadBinary: binary rejected: %s",
                    why.c_str());
      }
      const std::vector<unsigned char> so(payload, payload + bytes);
      TempDir dir;  // the file goes when dir does, right after dlopen
      std::string error;
      if (!dir.create(&error)) {
        return fail(FLAGOS_ERROR_COMPILE, "host programLoadBinary: %s", error.c_str());
      }
      const std::string path = dir.file("kernel.so");
      if (!writeFile(path, so.data(), so.size(), &error)) {
        return fail(FLAGOS_ERROR_COMPILE, "host programLoadBinary: %s", error.c_str());
      }
      return makeProgram("programLoadBinary", device, path, so, key, program);
    });
  }

  static flagosStatus_t programDestroy(flagosProgram_t program) noexcept {
    return guard("programDestroy", [&] {
      if (!validProgram("programDestroy", program)) return FLAGOS_ERROR_INVALID_ARGUMENT;
      program->magic = 0;
      delete program;  // queued launches hold the Library: see Lifetime above
      return FLAGOS_SUCCESS;
    });
  }

  // ------------------------------------------------------------ launches ---

  static flagosStatus_t kernelLaunch(flagosProgram_t program, const char* name,
                                     const flagosKernelArg* args, int32_t num_args,
                                     int32_t work_dim, const uint64_t* global,
                                     const uint64_t* local, flagosStream_t stream) noexcept {
    return guard("kernelLaunch", [&] {
      const flagosStatus_t checked =
          flagos_kit::checkLaunch(program, stream, name, args, num_args, work_dim, global, local);
      if (checked != FLAGOS_SUCCESS) return checked;
      if (work_dim != 1) {
        return fail(FLAGOS_ERROR_NOT_SUPPORTED,
                    "host kernelLaunch: work_dim %d: \"c\" kernels are 1-D", work_dim);
      }
      if (global[0] > static_cast<uint64_t>(INT64_MAX)) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                    "host kernelLaunch: global[0] %" PRIu64 " is too large", global[0]);
      }
      if (program->device != stream->device) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                    "host kernelLaunch: program of device %d launched on a stream of device %d",
                    program->device, stream->device);
      }
      Kernel kernel;
      {
        std::lock_guard<std::mutex> lock(program->mu);
        const flagosStatus_t found = findKernel(program, name, &kernel);
        if (found != FLAGOS_SUCCESS) return found;
      }
      if (kernel.num_args >= 0 && kernel.num_args != num_args) {
        return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                    "host kernelLaunch: wrong argument count for '%s': %d given, the kernel takes "
                    "%d (%s_num_args)",
                    name, num_args, kernel.num_args, name);
      }
      auto launch = std::make_shared<Launch>();
      const flagosStatus_t copied =
          copyArguments(program->device, name, args, num_args, launch.get());
      if (copied != FLAGOS_SUCCESS || global[0] == 0) return copied;
      launch->library = program->library;
      launch->fn = kernel.fn;
      const auto n = static_cast<int64_t>(global[0]);
      const int64_t grain = local != nullptr
                                ? static_cast<int64_t>(std::min<uint64_t>(local[0], INT64_MAX))
                                : kDefaultGrain;
      stream->enqueue(FLAGOS_TRACE_KERNEL, name, [launch, n, grain] {
        kernels::parallelFor(n, grain, [&](int64_t begin, int64_t end) {
          launch->fn(launch->pointers.data(), static_cast<uint64_t>(begin),
                     static_cast<uint64_t>(end));
        });
      });
      return FLAGOS_SUCCESS;
    });
  }

  static constexpr const char* language = "c";  // Note [Language "c"] (compiler.h)
};

}  // namespace

const flagosCompilerTable* compilerTable() {
  return flagos_kit::compilerTable<CompilerCalls>();
}

}  // namespace flagos_host
