// Descriptor copies, stream submission and the kernel thread pool.
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "../host.h"
#include "kernels.h"

namespace flagos_host::kernels {

namespace {
// Bytes of the tensors copyTensor saw on this thread since the last submit:
// the default cost of the next task (Note [Inline execution], ../stream.cpp).
// A kernel that copies and then declines leaves a stale count; that only
// makes the next task look larger (queued rather than inline), never unsafe.
thread_local int64_t t_bytes = 0;

void countBytes(const flagosTensor& t) {
  if (t.data == nullptr || t.ndim < 0 || t.ndim > FLAGOS_MAX_DIMS) return;
  int64_t n = static_cast<int64_t>(FLAGOS_DTYPE_SIZE(t.dtype));
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] < 0 || __builtin_mul_overflow(n, t.shape[i], &n)) n = INT64_MAX / 2;
  t_bytes = n > INT64_MAX / 2 - t_bytes ? INT64_MAX / 2 : t_bytes + n;
}
}  // namespace

Tensor copyTensor(const flagosTensor& t) {
  countBytes(t);
  Tensor r{Tensor::Unfilled{}};
  r.data = static_cast<char*>(t.data);
  r.dtype = t.dtype;
  r.ndim = t.data == nullptr && t.dtype == 0 ? -1 : t.ndim;  // -1: absent optional
  // Every slot written: zeros past ndim.
  for (int i = 0; i < FLAGOS_MAX_DIMS; ++i) {
    const bool used = i < t.ndim;
    r.shape[i] = used ? t.shape[i] : 0;
    r.strides[i] = used ? t.strides[i] : 0;
  }
  return r;
}

int64_t takeSubmitCost(int64_t cost) {
  const int64_t bytes = t_bytes;
  t_bytes = 0;
  return cost >= 0 ? cost : bytes;
}

namespace {

// A small fork-join pool: the caller takes part, so a pool of size 0 (one
// core) is plain serial execution. One job at a time (jobs from several
// stream workers queue on the mutex).
class Pool {
 public:
  Pool() {
    unsigned n = std::thread::hardware_concurrency();
    for (unsigned i = 1; i < n; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  size_t size() const { return threads_.size() + 1; }

  void run(int64_t chunks, const std::function<void(int64_t)>& body) {
    std::lock_guard<std::mutex> job(job_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      body_ = &body;
      next_ = 0;
      chunks_ = chunks;
      pending_ = chunks;
      ++generation_;
    }
    cv_.notify_all();
    work();
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    body_ = nullptr;
  }

 private:
  void work() {
    for (;;) {
      int64_t c;
      const std::function<void(int64_t)>* body;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!body_ || next_ >= chunks_) return;
        c = next_++;
        body = body_;
      }
      (*body)(c);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
  void loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      work();
    }
  }

  std::mutex job_mu_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t)>* body_ = nullptr;
  int64_t next_ = 0, chunks_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

Pool& pool() {
  // Leaked on purpose: no static destructor joins threads at process exit.
  static Pool* p = new Pool();
  return *p;
}

}  // namespace

void parallelForPool(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  Pool& p = pool();
  const int64_t chunks =
      std::min<int64_t>((n + grain - 1) / grain, static_cast<int64_t>(p.size()) * 4);
  const int64_t per = (n + chunks - 1) / chunks;
  p.run(chunks, [&](int64_t c) {
    const int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) body(b, e);
  });
}

}  // namespace flagos_host::kernels
