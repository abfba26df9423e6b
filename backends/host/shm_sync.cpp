// The futex side of Note [Process-shared waiting] (shm_sync.h).
#include "shm_sync.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace flagos_host::shm {
namespace {

// Not FUTEX_PRIVATE_FLAG: the word is shared between processes, so the
// kernel must key it by the backing page, not by this address space.
long futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

void wakeAll(Counter& counter) {
  if (counter.waiters.load(std::memory_order_seq_cst) != 0) {
    futex(&counter.value, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

}  // namespace

void Counter::publish(uint32_t v) {
  value.store(v, std::memory_order_seq_cst);
  wakeAll(*this);
}

void Counter::ring() {
  value.fetch_add(1, std::memory_order_seq_cst);
  wakeAll(*this);
}

void sleepOn(Counter& counter, uint32_t seen, std::chrono::nanoseconds slice) {
  if (slice.count() <= 0) return;
  timespec timeout{};
  timeout.tv_sec = static_cast<time_t>(slice.count() / 1000000000);
  timeout.tv_nsec = static_cast<long>(slice.count() % 1000000000);
  counter.waiters.fetch_add(1, std::memory_order_seq_cst);
  // Returns at once (EAGAIN) if the value moved on since `seen` was read.
  futex(&counter.value, FUTEX_WAIT, seen, &timeout);
  counter.waiters.fetch_sub(1, std::memory_order_seq_cst);
}

void yieldThread() {
  sched_yield();
}

}  // namespace flagos_host::shm
