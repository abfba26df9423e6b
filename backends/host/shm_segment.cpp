// Note [Segment lifecycle]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// One POSIX shared-memory object per communicator, named from the unique id
// (/dev/shm/flagos-shm-<creator pid>-<token>). Every rank calls join():
//
//  1. shm_open(O_CREAT | O_EXCL): exactly one rank wins and becomes the
//     creator, whichever arrives first (not necessarily rank 0). It sizes the
//     object, reserves its pages with posix_fallocate (a full /dev/shm is an
//     error now, not a SIGBUS later), constructs the header and the control
//     blocks, and publishes state = kReady. The others open the existing
//     object (retrying while it does not exist yet) and wait for kReady.
//  2. Each rank claims pids[rank] (a second claim is INVALID_ARGUMENT) and
//     adds itself to `join` with a CAS that fails once kJoinFailed is set.
//     The rank that completes the count shm_unlinks the name: from then on
//     the object lives only as long as the ranks' mappings, so a crash
//     leaves nothing behind in /dev/shm.
//  3. Ranks wait for the count to reach nranks. A rank whose deadline passes
//     first sets kJoinFailed (by CAS, so "everyone joined" and "someone gave
//     up" cannot both happen), unlinks the name and reports the ranks that
//     never claimed their pid; waiting ranks see the flag and fail likewise.
#include "shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <thread>

#include "host.h"

namespace flagos_host::shm {
namespace {

constexpr char kIdMagic[8] = "flgshm1";
constexpr uint64_t kSegmentMagic = 0x31534d4853474c46ull;  // "FLGSHMS1"
constexpr uint32_t kLayoutVersion = 1;
constexpr uint64_t kPage = 4096;

struct IdBytes {
  char magic[8];
  uint8_t token[16];
  int32_t creator_pid;
};
static_assert(sizeof(IdBytes) <= FLAGOS_UNIQUE_ID_BYTES, "id too large");

uint64_t roundUp(uint64_t n, uint64_t to) {
  return (n + to - 1) / to * to;
}

// "ranks 1, 3 of 4" / "rank 2 of 3": the ranks whose pid slot is empty.
std::string missingRanks(SegmentHeader& h, int32_t nranks) {
  std::string list;
  int missing = 0;
  for (int32_t r = 0; r < nranks; ++r) {
    if (h.pids[r].load(std::memory_order_acquire) != 0) continue;
    list += (missing++ == 0 ? "" : ", ") + std::to_string(r);
  }
  if (missing == 0) return "not every rank";
  return (missing == 1 ? "rank " : "ranks ") + list + " of " + std::to_string(nranks);
}

// Opens the object, creating it if nobody has. Retries while it is being
// unlinked and re-created. Returns the fd, or -1 with errno set.
int openOrCreate(const std::string& name, bool* created, Clock::time_point deadline) {
  for (;;) {
    int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      *created = true;
      return fd;
    }
    if (errno != EEXIST) return -1;
    fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd >= 0) {
      *created = false;
      return fd;
    }
    if (errno != ENOENT) return -1;
    if (Clock::now() >= deadline) {
      errno = ETIMEDOUT;
      return -1;
    }
  }
}

}  // namespace

bool makeId(flagosUniqueId* id, std::string* error) {
  std::memset(id, 0, sizeof(*id));
  IdBytes bytes{};
  std::memcpy(bytes.magic, kIdMagic, sizeof(kIdMagic));
  if (getrandom(bytes.token, sizeof(bytes.token), 0) != static_cast<ssize_t>(sizeof(bytes.token))) {
    *error = std::string("getrandom: ") + std::strerror(errno);
    return false;
  }
  bytes.creator_pid = static_cast<int32_t>(getpid());
  std::memcpy(id->internal, &bytes, sizeof(bytes));
  return true;
}

bool segmentName(const flagosUniqueId& id, std::string* name) {
  IdBytes bytes;
  std::memcpy(&bytes, id.internal, sizeof(bytes));
  if (std::memcmp(bytes.magic, kIdMagic, sizeof(kIdMagic)) != 0) return false;
  char buffer[64];
  int n = std::snprintf(buffer, sizeof(buffer), "/flagos-shm-%d-", bytes.creator_pid);
  for (uint8_t b : bytes.token) n += std::snprintf(buffer + n, sizeof(buffer) - n, "%02x", b);
  *name = buffer;
  return true;
}

Layout Layout::forRanks(int32_t nranks) {
  Layout l;
  l.nranks = nranks;
  l.chunk_bytes = nranks <= 8 ? (1u << 20) : (256u << 10);
  // Every rank owns nranks mailboxes; keep their total near 2 MiB a rank.
  l.ring_bytes = std::clamp<uint64_t>((2u << 20) / nranks / kPage * kPage, 16u << 10, 256u << 10);
  l.ranks_offset = roundUp(sizeof(SegmentHeader), kPage);
  l.coll_offset = roundUp(l.ranks_offset + nranks * sizeof(RankControl), kPage);
  l.rings_offset = l.coll_offset + 2 * static_cast<uint64_t>(nranks) * l.chunk_bytes;
  l.ring_stride = roundUp(sizeof(RingControl) + l.ring_bytes, 64);
  l.total_bytes = roundUp(l.rings_offset + static_cast<uint64_t>(nranks) *
                                               static_cast<uint64_t>(nranks) * l.ring_stride,
                          kPage);
  return l;
}

Segment::~Segment() {
  munmap(base_, layout_.total_bytes);
}

flagosStatus_t Segment::join(const std::string& name, int32_t nranks, int32_t rank,
                             std::chrono::milliseconds timeout, std::unique_ptr<Segment>* out) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  const Layout layout = Layout::forRanks(nranks);
  bool created = false;
  const int fd = openOrCreate(name, &created, deadline);
  if (fd < 0) {
    return fail(FLAGOS_ERROR_DEVICE, "host-shm: commInitRank: shm_open(%s): %s", name.c_str(),
                std::strerror(errno));
  }
  auto closeFd = [fd] { close(fd); };

  char* base = nullptr;
  if (created) {
    // Reserve the pages now: writing to a full tmpfs later would be SIGBUS.
    int err = ftruncate(fd, static_cast<off_t>(layout.total_bytes)) == 0 ? 0 : errno;
    if (err == 0) err = posix_fallocate(fd, 0, static_cast<off_t>(layout.total_bytes));
    if (err == 0) {
      void* p = mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) err = errno;
      base = static_cast<char*>(p);
    }
    if (err != 0) {
      shm_unlink(name.c_str());
      closeFd();
      return fail(FLAGOS_ERROR_DEVICE,
                  "host-shm: commInitRank: cannot reserve %llu bytes of shared memory for %d "
                  "ranks in /dev/shm: %s (a container may need a larger --shm-size)",
                  static_cast<unsigned long long>(layout.total_bytes), nranks, std::strerror(err));
    }
    auto* h = new (base) SegmentHeader();
    for (int32_t r = 0; r < nranks; ++r) {
      new (&reinterpret_cast<RankControl*>(base + layout.ranks_offset)[r]) RankControl();
      for (int32_t d = 0; d < nranks; ++d) {
        new (base + layout.rings_offset +
             (static_cast<uint64_t>(r) * nranks + d) * layout.ring_stride) RingControl();
      }
    }
    h->version = kLayoutVersion;
    h->magic = kSegmentMagic;
    h->nranks = nranks;
    h->creator_pid = static_cast<int32_t>(getpid());
    h->chunk_bytes = layout.chunk_bytes;
    h->ring_bytes = layout.ring_bytes;
    h->total_bytes = layout.total_bytes;
    h->state.store(kReady, std::memory_order_release);
  } else {
    // The creator sizes the object, then fills the header: wait for both.
    const SegmentHeader* h = nullptr;
    void* p = MAP_FAILED;
    for (;;) {
      struct stat st {};
      if (p == MAP_FAILED && fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) >= kPage) {
        p = mmap(nullptr, kPage, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) h = static_cast<const SegmentHeader*>(p);
      }
      if (h != nullptr && h->state.load(std::memory_order_acquire) != kCreating) break;
      if (Clock::now() >= deadline) {
        if (p != MAP_FAILED) munmap(p, kPage);
        closeFd();
        shm_unlink(name.c_str());  // the creator died half-way: leave nothing behind
        return fail(FLAGOS_ERROR_TIMEOUT,
                    "host-shm: commInitRank timed out after %lld ms: the rank that created %s "
                    "never finished setting it up",
                    static_cast<long long>(timeout.count()), name.c_str());
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const bool usable =
        h->state.load() == kReady && h->magic == kSegmentMagic && h->version == kLayoutVersion;
    const int32_t their_nranks = h->nranks;
    const bool same_layout = h->chunk_bytes == layout.chunk_bytes &&
                             h->ring_bytes == layout.ring_bytes &&
                             h->total_bytes == layout.total_bytes;
    const int32_t creator = h->creator_pid;
    munmap(p, kPage);
    if (!usable) {
      closeFd();
      return fail(FLAGOS_ERROR_DEVICE, "host-shm: commInitRank: %s is not a usable segment",
                  name.c_str());
    }
    if (their_nranks != nranks) {
      closeFd();
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host-shm: commInitRank: rank %d passed nranks=%d, but the communicator was "
                  "created with nranks=%d (by pid %d)",
                  rank, nranks, their_nranks, creator);
    }
    if (!same_layout) {
      closeFd();
      return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                  "host-shm: commInitRank: the segment of pid %d has another layout (plugins of "
                  "different versions in one communicator?)",
                  creator);
    }
    p = mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      closeFd();
      return fail(FLAGOS_ERROR_DEVICE, "host-shm: commInitRank: mmap %s: %s", name.c_str(),
                  std::strerror(err));
    }
    base = static_cast<char*>(p);
  }
  closeFd();  // the mapping keeps the object alive
  std::unique_ptr<Segment> segment(new Segment(base, layout));
  SegmentHeader& h = segment->header();

  // Step 2: claim the rank, then count in.
  int32_t holder = 0;
  if (!h.pids[rank].compare_exchange_strong(holder, static_cast<int32_t>(getpid()))) {
    return fail(FLAGOS_ERROR_INVALID_ARGUMENT,
                "host-shm: commInitRank: rank %d of %d joined twice (pid %d already holds it)",
                rank, nranks, holder);
  }
  uint64_t joined = h.join.load();
  do {
    if (joined & kJoinFailed) break;
  } while (!h.join.compare_exchange_weak(joined, joined + 1));
  if (!(joined & kJoinFailed)) {
    if (joined + 1 == static_cast<uint64_t>(nranks)) shm_unlink(name.c_str());
    h.join_bell.ring();
  }

  // Step 3: wait for everyone, or give up and say who is missing.
  const auto everyone = [&] { return h.join.load() == static_cast<uint64_t>(nranks); };
  const auto given_up = [&] { return (h.join.load() & kJoinFailed) != 0; };
  const WaitResult result = waitUntil(
      h.join_bell, [&] { return everyone() || given_up(); }, nullptr, deadline);
  if (result == WaitResult::kReady && everyone()) {
    *out = std::move(segment);
    return FLAGOS_SUCCESS;
  }
  if (!given_up()) {
    uint64_t seen = h.join.load();
    while (seen != static_cast<uint64_t>(nranks) && !(seen & kJoinFailed) &&
           !h.join.compare_exchange_weak(seen, seen | kJoinFailed)) {
    }
    if (seen == static_cast<uint64_t>(nranks)) {  // the last rank came in just in time
      *out = std::move(segment);
      return FLAGOS_SUCCESS;
    }
    h.join_bell.ring();  // wake the others: they fail too
    shm_unlink(name.c_str());
    if (!(seen & kJoinFailed)) {
      return fail(FLAGOS_ERROR_TIMEOUT,
                  "host-shm: commInitRank timed out after %lld ms: %s did not join",
                  static_cast<long long>(timeout.count()), missingRanks(h, nranks).c_str());
    }
  }
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  return fail(FLAGOS_ERROR_TIMEOUT,
              "host-shm: commInitRank gave up after %lld ms (another rank timed out): %s did "
              "not join",
              static_cast<long long>(waited), missingRanks(h, nranks).c_str());
}

}  // namespace flagos_host::shm
