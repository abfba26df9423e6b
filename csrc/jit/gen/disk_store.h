// The kernel cache's on-disk half (Note [Kernel cache], kernel_cache.h):
// one file per kernel in a directory that several processes may share.
//
// Note [Kernel cache files]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
//  - name: 16 hex digits of FNV-1a64(file key) + ".fkc"; the file key
//    (fileKeyOf) is the kernel key's string, the language, the device
//    architecture, kGeneratorVersion and the generator's fingerprint (a
//    hash of csrc/jit/gen/, the catalog and compiler.h, computed at build
//    time by cmake/generator_fingerprint.cmake), so a new driver or any
//    change to the generator never reuses an old binary. (Before the
//    fingerprint, a changed helper kept loading the old kernels from disk
//    until someone remembered to bump kGeneratorVersion.)
//  - content: a 32-byte header {magic "FLGKC001", u32 format version,
//    u32 key length, u64 payload length, u64 FNV-1a64 of the payload}, the
//    file key (compared on read: a hash collision is a miss, not a wrong
//    kernel), the payload.
//  - writes go to "<name>.tmp.<pid>.<tid>.<n>" and rename() over the name,
//    so a reader sees a whole old file or a whole new one, never a torn
//    one. No fsync: a file that a crash left garbled fails the checksum and
//    is rebuilt, which is cheaper than syncing every write.
//  - a file that fails a check is counted, unlinked and reported as a miss;
//    the caller rebuilds and stores it again.
//  - LRU: a hit touches the file's mtime; when a store pushes the directory
//    past max_bytes, the oldest files go until it is under 90%. Other
//    processes delete files too, so every ENOENT is expected.
//  - I/O errors never throw: the first failed write prints one warning and
//    turns writing off (memory-only from then on); loads still work.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "jit/gen/generator.h"

namespace flagos::kernels {

// The string that names a kernel's file (see Note [Kernel cache files]).
std::string fileKeyOf(const KernelKey& key, const std::string& language,
                      const std::string& device_arch);

// Writes @p bytes to "<path>.tmp.<pid>.<n>" and renames it over @p path,
// so readers see the old file or the new one, never a torn one. False on
// any I/O error (the temporary file is removed); never throws.
bool writeFileAtomically(const std::string& path, const std::string& bytes);

class DiskStore {
 public:
  struct Stats {
    uint64_t hits = 0, writes = 0, corrupt = 0, evictions = 0, write_errors = 0;
  };

  // @p dir "" disables the store (every load misses, stores do nothing).
  DiskStore(std::string dir, uint64_t max_bytes);

  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  // The file name (no directory) for @p file_key.
  static std::string fileName(const std::string& file_key);
  // Full path of @p file_key's file.
  std::string pathOf(const std::string& file_key) const;

  // The payload stored for @p file_key, or false. A damaged file is
  // counted as corrupt and removed.
  bool load(const std::string& file_key, std::vector<uint8_t>* payload);

  // Atomically (re)writes @p file_key's file, then evicts if over the bound.
  // False on failure (counted; never throws).
  bool store(const std::string& file_key, const void* payload, size_t size);

  // The caller could not use what load() returned (the plugin rejected the
  // binary): count it as corrupt and remove the file.
  void discard(const std::string& file_key);

  Stats stats() const;

 private:
  bool ensureDir();
  void writeFailed(const std::string& what, int err);
  void evictIfNeeded(uint64_t just_written);
  uint64_t scanAndEvict();

  std::string dir_;
  uint64_t max_bytes_;
  std::atomic<bool> writable_{true};
  std::atomic<bool> dir_made_{false};
  std::atomic<bool> warned_{false};
  std::atomic<uint64_t> counter_{0};  // temporary file names
  std::mutex evict_mu_;               // one scan at a time in this process
  bool size_known_ = false;           // evict_mu_
  uint64_t approx_bytes_ = 0;         // evict_mu_: last scan + our writes since
  std::atomic<uint64_t> hits_{0}, writes_{0}, corrupt_{0}, evictions_{0}, write_errors_{0};
};

}  // namespace flagos::kernels
