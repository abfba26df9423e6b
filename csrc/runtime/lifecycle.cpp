// Note [Stopping background work] in lifecycle.h.
#include "runtime/lifecycle.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

namespace flagos {
namespace {

struct Lifecycle {
  std::mutex mu;
  std::vector<std::pair<std::string, BackgroundStopper>> stoppers;
  bool stopped = false;
  bool all_idle = true;
};

std::atomic<bool> g_forked_child{false};

Lifecycle& lifecycle() {
  static Lifecycle* l = new Lifecycle();  // leaked: used from exit handlers
  return *l;
}

bool runStopper(const std::string& what, const BackgroundStopper& stop,
                std::chrono::milliseconds bound) {
  bool idle = false;
  try {
    idle = stop(bound);
  } catch (...) {  // at exit nothing may throw; the work is left as it is
  }
  if (!idle) {
    std::fprintf(stderr,
                 "flagos: %s was still running %lld ms after exit began; it is left "
                 "unfinished (nothing of it is written to the kernel cache)\n",
                 what.c_str(), static_cast<long long>(bound.count()));
  }
  return idle;
}

}  // namespace

void registerBackgroundStopper(std::string what, BackgroundStopper stop) {
  Lifecycle& l = lifecycle();
  std::unique_lock<std::mutex> lock(l.mu);
  if (l.stopped) {  // exit already began: this work must not start either
    lock.unlock();
    runStopper(what, stop, kDefaultExitBound);
    return;
  }
  // The C atexit hook, for programs without Python (the C++ tests); in a
  // Python process the atexit module's hook ran long before.
  static const bool hooked = (std::atexit([] { stopBackgroundWork(kDefaultExitBound); }), true);
  (void)hooked;
  l.stoppers.emplace_back(std::move(what), std::move(stop));
}

bool stopBackgroundWork(std::chrono::milliseconds bound) {
  if (inForkedChild()) return true;  // the running work is the parent's
  Lifecycle& l = lifecycle();
  std::vector<std::pair<std::string, BackgroundStopper>> stoppers;
  {
    std::lock_guard<std::mutex> lock(l.mu);
    if (l.stopped) return l.all_idle;
    l.stopped = true;
    stoppers.swap(l.stoppers);
  }
  bool idle = true;
  for (auto it = stoppers.rbegin(); it != stoppers.rend(); ++it)
    idle = runStopper(it->first, it->second, bound) && idle;
  std::lock_guard<std::mutex> lock(l.mu);
  l.all_idle = idle;
  return idle;
}

const char* const kForkedChildError =
    "flagos: Cannot re-initialize the flagos device in a forked subprocess (the parent "
    "used it before fork()). To use flagos with multiprocessing, use the 'spawn' start "
    "method";

void watchForks() {
  static const bool watching = [] {
    pthread_atfork(nullptr, nullptr, [] {
      g_forked_child.store(true);
      // The newest exit handler runs first: the child's exit() ends here,
      // before the SDK's static destructors (CLBlast's program cache, PoCL)
      // wait on the parent's threads. on_exit (glibc) passes the status.
      on_exit(
          [](int status, void*) {
            std::fflush(nullptr);
            _exit(status);
          },
          nullptr);
    });
    return true;
  }();
  (void)watching;
}

bool inForkedChild() noexcept {
  return g_forked_child.load(std::memory_order_relaxed);
}

}  // namespace flagos
