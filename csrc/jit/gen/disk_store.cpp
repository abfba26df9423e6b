// The on-disk kernel store; see Note [Kernel cache files] in disk_store.h.
#include "jit/gen/disk_store.h"

#include "flagos_kit/fnv1a.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include "generator_fingerprint.h"

namespace flagos::kernels {
namespace {

constexpr char kMagic[8] = {'F', 'L', 'G', 'K', 'C', '0', '0', '1'};
constexpr uint32_t kFormatVersion = 1;
constexpr const char* kSuffix = ".fkc";
// Larger files are not ours (or are garbage); never read them whole.
constexpr uint64_t kMaxFileBytes = uint64_t{1} << 30;
// Temporary files this old were left by a writer that died mid-write.
constexpr time_t kStaleTmpSeconds = 3600;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t key_len;
  uint64_t payload_len;
  uint64_t payload_fnv;
};
static_assert(sizeof(Header) == 32, "cache file header layout");

bool writeAll(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void* data, size_t size) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // error, or the file shrank under us
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool endsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool olderThan(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

}  // namespace

std::string fileKeyOf(const KernelKey& key, const std::string& language,
                      const std::string& device_arch) {
  return key.toString() + "|" + language + "|" + device_arch + "|gen" +
         std::to_string(kGeneratorVersion) + "." + FLAGOS_GENERATOR_FINGERPRINT;
}

bool writeFileAtomically(const std::string& path, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())) ||
        !out.flush()) {
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

DiskStore::DiskStore(std::string dir, uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
}

std::string DiskStore::fileName(const std::string& file_key) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64,
                flagos_kit::fnv1a(file_key.data(), file_key.size()));
  return std::string(buf) + kSuffix;
}

std::string DiskStore::pathOf(const std::string& file_key) const {
  return dir_ + "/" + fileName(file_key);
}

bool DiskStore::load(const std::string& file_key, std::vector<uint8_t>* payload) {
  if (!enabled()) return false;
  const std::string path = pathOf(file_key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // ENOENT (a plain miss) or unreadable: rebuild
  struct stat st {};
  std::vector<uint8_t> bytes;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
            static_cast<uint64_t>(st.st_size) >= sizeof(Header) &&
            static_cast<uint64_t>(st.st_size) <= kMaxFileBytes;
  if (ok) {
    bytes.resize(static_cast<size_t>(st.st_size));
    ok = readAll(fd, bytes.data(), bytes.size());
  }
  Header h{};
  if (ok) {
    std::memcpy(&h, bytes.data(), sizeof h);
    ok = std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.version == kFormatVersion &&
         uint64_t{h.key_len} + h.payload_len == bytes.size() - sizeof h;
  }
  const uint8_t* key_bytes = bytes.data() + sizeof h;
  const uint8_t* body = key_bytes + (ok ? h.key_len : 0);
  if (ok && (h.key_len != file_key.size() ||
             std::memcmp(key_bytes, file_key.data(), file_key.size()) != 0)) {
    // A well-formed file of another key with the same name hash: a miss.
    // The caller's store() replaces it.
    ::close(fd);
    return false;
  }
  if (ok) ok = flagos_kit::fnv1a(body, h.payload_len) == h.payload_fnv;
  if (!ok) {
    // Remove it unless another process already replaced it with a new file.
    struct stat now {};
    if (::stat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) {
      ::unlink(path.c_str());
    }
    ::close(fd);
    corrupt_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  ::futimens(fd, nullptr);  // LRU: used now (best effort)
  ::close(fd);
  payload->assign(body, body + h.payload_len);
  hits_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void DiskStore::discard(const std::string& file_key) {
  if (!enabled()) return;
  ::unlink(pathOf(file_key).c_str());
  corrupt_.fetch_add(1, std::memory_order_relaxed);
}

// mkdir -p, until it worked once. Errors on the way are expected (existing
// or unwritable parents); only the final stat decides.
bool DiskStore::ensureDir() {
  if (dir_made_.load(std::memory_order_acquire)) return true;
  int err = ENOTDIR;
  for (size_t pos = 1;; ++pos) {
    pos = dir_.find('/', pos);
    if (::mkdir(dir_.substr(0, pos).c_str(), 0755) != 0 && errno != EEXIST) err = errno;
    if (pos == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    writeFailed("create directory " + dir_, err);
    return false;
  }
  dir_made_.store(true, std::memory_order_release);
  return true;
}

void DiskStore::writeFailed(const std::string& what, int err) {
  write_errors_.fetch_add(1, std::memory_order_relaxed);
  writable_.store(false, std::memory_order_relaxed);
  if (!warned_.exchange(true)) {
    std::fprintf(stderr,
                 "flagos: warning: kernel cache: cannot %s (%s); generated kernels are cached "
                 "in memory only (FLAGOS_CACHE_DIR)\n",
                 what.c_str(), std::strerror(err));
  }
}

bool DiskStore::store(const std::string& file_key, const void* payload, size_t size) {
  if (!enabled() || !writable_.load(std::memory_order_relaxed) || !ensureDir()) return false;
  const std::string path = pathOf(file_key);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                          std::to_string(::syscall(SYS_gettid)) + "." +
                          std::to_string(counter_.fetch_add(1, std::memory_order_relaxed));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    writeFailed("create " + tmp, errno);
    return false;
  }
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kFormatVersion;
  h.key_len = static_cast<uint32_t>(file_key.size());
  h.payload_len = size;
  h.payload_fnv = flagos_kit::fnv1a(payload, size);
  bool ok = writeAll(fd, &h, sizeof h) && writeAll(fd, file_key.data(), file_key.size()) &&
            writeAll(fd, payload, size);
  int err = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    writeFailed("write " + path, err);
    return false;
  }
  writes_.fetch_add(1, std::memory_order_relaxed);
  evictIfNeeded(sizeof h + file_key.size() + size);
  return true;
}

// Scans the directory only on the first store and when our running estimate
// passes the bound (other processes' writes show up at the next scan).
void DiskStore::evictIfNeeded(uint64_t just_written) {
  std::lock_guard<std::mutex> lock(evict_mu_);
  if (!size_known_) {
    size_known_ = true;
    approx_bytes_ = scanAndEvict();
    return;
  }
  approx_bytes_ += just_written;
  if (approx_bytes_ > max_bytes_) approx_bytes_ = scanAndEvict();
}

// Total bytes of cache files after removing the least recently used ones
// while over max_bytes_ (down to 90%); also removes stale temporary files.
uint64_t DiskStore::scanAndEvict() {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return 0;
  const int dfd = ::dirfd(d);
  struct File {
    timespec mtime;
    uint64_t size;
    std::string name;
  };
  std::vector<File> files;
  uint64_t total = 0;
  const time_t now = ::time(nullptr);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const bool cache_file = endsWith(name, kSuffix);
    const bool tmp_file = name.find(std::string(kSuffix) + ".tmp.") != std::string::npos;
    if (!cache_file && !tmp_file) continue;
    struct stat st {};
    if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;  // gone already (another process), or not ours
    }
    if (tmp_file) {
      if (now - st.st_mtim.tv_sec > kStaleTmpSeconds) ::unlinkat(dfd, name.c_str(), 0);
      continue;
    }
    total += static_cast<uint64_t>(st.st_size);
    files.push_back({st.st_mtim, static_cast<uint64_t>(st.st_size), name});
  }
  if (total > max_bytes_) {
    std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
      if (olderThan(a.mtime, b.mtime)) return true;
      if (olderThan(b.mtime, a.mtime)) return false;
      return a.name < b.name;
    });
    const uint64_t target = max_bytes_ / 10 * 9;
    for (const File& f : files) {
      if (total <= target) break;
      if (::unlinkat(dfd, f.name.c_str(), 0) == 0) {
        evictions_.fetch_add(1, std::memory_order_relaxed);
        total -= f.size;
      } else if (errno == ENOENT) {
        total -= f.size;  // another process evicted it first
      }
    }
  }
  ::closedir(d);
  return total;
}

DiskStore::Stats DiskStore::stats() const {
  Stats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.writes = writes_.load(std::memory_order_relaxed);
  s.corrupt = corrupt_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  s.write_errors = write_errors_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace flagos::kernels
