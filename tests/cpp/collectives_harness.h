// Multi-process harness for the collectives tests and benchmark: the parent
// loads a plugin and makes a unique id (nothing that starts threads), then
// forks one child per rank. Each child initializes the plugin as its own
// process would under torchrun, runs the rank's body and reports through a
// pipe: empty means success, anything else is the failure text. Children
// leave with _exit, so nothing of gtest runs twice.
#pragma once

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "flagos/vendor.h"

namespace shmtest {

struct Plugin {
  void* handle = nullptr;
  flagosVendorTables tables{};
  const flagosCollectiveTable& coll() const { return *tables.collectives; }
  const flagosMemoryTable& mem() const { return *tables.memory; }
  const flagosStreamTable& str() const { return *tables.stream; }
  std::string lastError() const {
    const char* e = tables.getLastError();
    return e ? e : "";
  }
};

// Loads @p path (once per process) without initializing it.
inline Plugin& loadPlugin(const std::string& path) {
  static Plugin p;
  if (p.handle != nullptr) return p;
  p.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (p.handle == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  auto entry =
      reinterpret_cast<flagosVendorGetTablesFn>(dlsym(p.handle, FLAGOS_VENDOR_ENTRY_SYMBOL));
  if (entry == nullptr) throw std::runtime_error("no entry symbol in " + path);
  p.tables.struct_size = sizeof(p.tables);
  if (entry(FLAGOS_ABI_VERSION_MAJOR, FLAGOS_ABI_VERSION_MINOR, &p.tables) != FLAGOS_SUCCESS ||
      p.tables.collectives == nullptr) {
    throw std::runtime_error(path + " has no collectives table");
  }
  return p;
}

// Thrown in a rank: fails it with this text.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One rank's view: the plugin initialized, a stream, and (after join()) a
// communicator.
struct Rank {
  Plugin& p;
  int rank;
  int nranks;
  flagosComm_t comm = nullptr;
  flagosStream_t stream = nullptr;
  std::vector<void*> allocations;

  Rank(Plugin& plugin, int r, int n) : p(plugin), rank(r), nranks(n) {
    flagosProbeInfo info{};
    info.struct_size = sizeof(info);
    ok(p.tables.device->probe(&info), "probe");
    ok(p.tables.device->init(), "init");
    ok(p.str().streamCreate(0, 0, &stream), "streamCreate");
  }
  // Leaves the process with _exit: no teardown needed (and a failed rank
  // may hold a communicator whose peers are gone).
  ~Rank() = default;

  void ok(flagosStatus_t status, const std::string& what) {
    if (status != FLAGOS_SUCCESS) {
      throw Failure("rank " + std::to_string(rank) + ": " + what + " -> status " +
                    std::to_string(status) + ": " + p.lastError());
    }
  }
  flagosStatus_t join(const flagosUniqueId& id, int64_t timeout_ms) {
    return p.coll().commInitRank(&comm, nranks, &id, rank, 0, timeout_ms);
  }
  // Device memory (host-addressable: the test reads and writes it directly).
  char* alloc(uint64_t bytes) {
    void* ptr = nullptr;
    ok(p.mem().malloc(0, bytes == 0 ? 1 : bytes, &ptr), "malloc");
    allocations.push_back(ptr);
    return static_cast<char*>(ptr);
  }
  flagosStatus_t sync() { return p.str().streamSynchronize(stream); }
  // Frees what alloc() returned (after a synchronize: nothing may use it).
  void freeAll() {
    for (void* ptr : allocations) ok(p.mem().free(0, ptr), "free");
    allocations.clear();
  }
};

struct Outcome {
  int status = 0;       // waitpid status
  std::string message;  // empty: the rank succeeded
};

// Runs @p body(rank) in @p nranks forked children; kills them all after
// @p limit, and the others as soon as one fails. Outcome i is rank i's.
inline std::vector<Outcome> runRanks(int nranks, const std::function<void(int)>& body,
                                     std::chrono::seconds limit = std::chrono::seconds(60)) {
  std::vector<pid_t> pids(nranks, -1);
  std::vector<int> fds(nranks, -1);
  std::vector<Outcome> out(nranks);
  for (int r = 0; r < nranks; ++r) {
    int pipefd[2];
    if (pipe(pipefd) != 0) throw std::runtime_error("pipe");
    const pid_t pid = fork();
    if (pid == 0) {
      close(pipefd[0]);
      std::string message;
      try {
        body(r);
      } catch (const std::exception& e) {
        message = e.what();
        if (message.empty()) message = "(empty failure message)";
      } catch (...) {
        message = "unknown exception";
      }
      size_t done = 0;
      while (done < message.size()) {
        const ssize_t n = write(pipefd[1], message.data() + done, message.size() - done);
        if (n <= 0) break;
        done += static_cast<size_t>(n);
      }
      _exit(message.empty() ? 0 : 1);
    }
    close(pipefd[1]);
    pids[r] = pid;
    fds[r] = pipefd[0];
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int open = nranks;
  while (open > 0) {
    std::vector<pollfd> polls;
    std::vector<int> which;
    for (int r = 0; r < nranks; ++r) {
      if (fds[r] >= 0) {
        polls.push_back({fds[r], POLLIN, 0});
        which.push_back(r);
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      for (int r : which) {
        kill(pids[r], SIGKILL);
        out[r].message += "(rank " + std::to_string(r) + " still running after the time limit)";
        close(fds[r]);
        fds[r] = -1;
      }
      break;
    }
    if (poll(polls.data(), polls.size(), 100) <= 0) continue;
    for (size_t i = 0; i < polls.size(); ++i) {
      if (polls[i].revents == 0) continue;
      const int r = which[i];
      char buffer[4096];
      const ssize_t n = read(fds[r], buffer, sizeof(buffer));
      if (n > 0) {
        out[r].message.append(buffer, static_cast<size_t>(n));
      } else {
        close(fds[r]);
        fds[r] = -1;
        --open;
        if (!out[r].message.empty()) {
          // A failed rank leaves its peers waiting for their timeout: stop
          // them now, so that a failing test fails fast.
          for (int q = 0; q < nranks; ++q) {
            if (fds[q] >= 0) kill(pids[q], SIGKILL);
          }
        }
      }
    }
  }
  for (int r = 0; r < nranks; ++r) {
    waitpid(pids[r], &out[r].status, 0);
    if (out[r].message.empty() && !(WIFEXITED(out[r].status) && WEXITSTATUS(out[r].status) == 0)) {
      out[r].message =
          "rank " + std::to_string(r) + " died (wait status " + std::to_string(out[r].status) + ")";
    }
  }
  return out;
}

// --------------------------------------------------- typed element access ---

inline float halfToFloat(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

// Exact for values a half can represent (all the tests store); rounds
// toward zero otherwise.
inline uint16_t floatToHalf(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  f = std::fabs(f);
  if (f == 0) return sign;
  int e;
  const float m = std::frexp(f, &e);  // f = m * 2^e, m in [0.5, 1)
  if (e > 16) return sign | 0x7c00;
  if (e < -13) return sign | static_cast<uint16_t>(std::ldexp(f, 24));  // subnormal
  return sign | static_cast<uint16_t>((e + 14) << 10) |
         static_cast<uint16_t>(static_cast<uint32_t>(std::ldexp(m, 11)) & 0x3ff);
}

inline float bf16ToFloat(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t floatToBf16(float f) {  // truncating: exact for what the tests store
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return static_cast<uint16_t>(u >> 16);
}

inline double loadAs(flagosDtype_t dtype, const void* base, uint64_t i) {
  const char* p = static_cast<const char*>(base);
  switch (dtype) {
    case FLAGOS_DTYPE_FLOAT32:
      return reinterpret_cast<const float*>(p)[i];
    case FLAGOS_DTYPE_FLOAT64:
      return reinterpret_cast<const double*>(p)[i];
    case FLAGOS_DTYPE_FLOAT16:
      return halfToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case FLAGOS_DTYPE_BFLOAT16:
      return bf16ToFloat(reinterpret_cast<const uint16_t*>(p)[i]);
    case FLAGOS_DTYPE_INT32:
      return reinterpret_cast<const int32_t*>(p)[i];
    case FLAGOS_DTYPE_INT64:
      return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case FLAGOS_DTYPE_INT8:
      return reinterpret_cast<const int8_t*>(p)[i];
    case FLAGOS_DTYPE_UINT8:
      return reinterpret_cast<const uint8_t*>(p)[i];
    case FLAGOS_DTYPE_INT16:
      return reinterpret_cast<const int16_t*>(p)[i];
    default:
      throw Failure("loadAs: dtype " + std::to_string(dtype));
  }
}

inline void storeAs(flagosDtype_t dtype, void* base, uint64_t i, double v) {
  char* p = static_cast<char*>(base);
  switch (dtype) {
    case FLAGOS_DTYPE_FLOAT32:
      reinterpret_cast<float*>(p)[i] = static_cast<float>(v);
      return;
    case FLAGOS_DTYPE_FLOAT64:
      reinterpret_cast<double*>(p)[i] = v;
      return;
    case FLAGOS_DTYPE_FLOAT16:
      reinterpret_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v));
      return;
    case FLAGOS_DTYPE_BFLOAT16:
      reinterpret_cast<uint16_t*>(p)[i] = floatToBf16(static_cast<float>(v));
      return;
    case FLAGOS_DTYPE_INT32:
      reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      return;
    case FLAGOS_DTYPE_INT64:
      reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      return;
    case FLAGOS_DTYPE_INT8:
      reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
      return;
    case FLAGOS_DTYPE_UINT8:
      reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
      return;
    case FLAGOS_DTYPE_INT16:
      reinterpret_cast<int16_t*>(p)[i] = static_cast<int16_t>(v);
      return;
    default:
      throw Failure("storeAs: dtype " + std::to_string(dtype));
  }
}

}  // namespace shmtest
