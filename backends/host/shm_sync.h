// Waiting on other processes through shared memory: a counter that one
// process advances and others wait on, with a deadline and an abort word.
// Used by the host-shm collectives (collectives.h); nothing here knows about
// communicators.
//
// Note [Process-shared waiting]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every word that another process reads lives in the shared segment as a
// lock-free std::atomic (address-free, so the same object mapped at different
// addresses in different processes works). A waiter first spins briefly (a
// peer a few microseconds behind is the common case), then yields, then
// sleeps in futex(FUTEX_WAIT) on the counter itself, never longer than
// kPollSlice so that it sees the abort word and its deadline in time.
// Publishers wake sleepers only when one has registered (`waiters`), so the
// fast path costs no system call. The publisher's store and the waiter's
// registration are both sequentially consistent, which rules out the lost
// wake-up (the waiter registers, then re-reads the value; FUTEX_WAIT itself
// rechecks it atomically).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace flagos_host::shm {

static_assert(std::atomic<uint32_t>::is_always_lock_free, "needs lock-free 32-bit atomics");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "needs lock-free 64-bit atomics");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex needs a plain word");

using Clock = std::chrono::steady_clock;

// The longest a waiter sleeps before it looks at the abort word again.
constexpr std::chrono::milliseconds kPollSlice{5};

// A monotonically increasing 32-bit counter in shared memory, on its own
// cache line. Comparisons are wrap-safe (see reached()).
struct alignas(64) Counter {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> waiters{0};

  // Stores @p v (greater than the current value) and wakes sleepers.
  void publish(uint32_t v);
  // Adds one and wakes sleepers: a doorbell.
  void ring();
  uint32_t load() const { return value.load(std::memory_order_acquire); }
};

// Has @p value reached @p target? Wrap-safe while the two are within 2^31.
inline bool reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

enum class WaitResult { kReady, kTimeout, kAborted };

// The adaptive waiting loop of Note [Process-shared waiting]: spin, yield,
// then sleep on @p counter while its value still equals what was last seen.
// Returns kReady as soon as done() is true, kAborted when *abort is nonzero,
// kTimeout at @p deadline. done() must be cheap and must not block.
template <typename Done>
WaitResult waitUntil(Counter& counter, Done&& done, const std::atomic<uint32_t>* abort,
                     Clock::time_point deadline);

// Blocks in FUTEX_WAIT on @p counter for at most @p slice while its value is
// @p seen. Spurious returns are fine: callers loop.
void sleepOn(Counter& counter, uint32_t seen, std::chrono::nanoseconds slice);

// A relaxing instruction for spin loops.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void yieldThread();

template <typename Done>
WaitResult waitUntil(Counter& counter, Done&& done, const std::atomic<uint32_t>* abort,
                     Clock::time_point deadline) {
  for (int i = 0; i < 2000; ++i) {  // a few microseconds
    if (done()) return WaitResult::kReady;
    cpuRelax();
  }
  for (int i = 0; i < 16; ++i) {  // let a peer on this core run
    if (done()) return WaitResult::kReady;
    yieldThread();
  }
  for (;;) {
    const uint32_t seen = counter.load();
    if (done()) return WaitResult::kReady;
    if (abort != nullptr && abort->load(std::memory_order_acquire) != 0) {
      return WaitResult::kAborted;
    }
    const auto now = Clock::now();
    if (now >= deadline) return done() ? WaitResult::kReady : WaitResult::kTimeout;
    const auto left = deadline - now;
    sleepOn(counter, seen, left < kPollSlice ? left : Clock::duration(kPollSlice));
  }
}

}  // namespace flagos_host::shm
