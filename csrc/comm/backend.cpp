// FcclBackend's machinery: the task queue and its worker thread, coalescing,
// and FcclWork. The c10d entry points are in collectives.cpp. See backend.h
// and README.md.
//
// Note [Work completion]
// ~~~~~~~~~~~~~~~~~~~~~~
// The worker runs a task with the device's communication stream current
// (a high-priority pool stream): the route enqueues (vendor) or performs
// (host) the transfers there, the task's finish steps follow on the same
// stream, and the worker then synchronizes that stream. Only then is the
// Work complete: its "done" event is recorded on the stream, its future is
// marked completed (running DDP's comm-hook callbacks), and the buffers the
// task held are released. So:
//  * a collective's status is exact: one task at a time is in flight on the
//    communication stream, and an asynchronous failure reported by the
//    stream belongs to it (with several in flight, a failure could not be
//    told apart from its neighbours');
//  * Work::wait blocks the calling thread until the worker finished the
//    task (or the deadline passed, Note [Deadlines]), raises the wrapped
//    error if it failed, and makes the caller's current stream wait on the
//    done event (already complete; kept so that device-side ordering holds
//    if a later version stops blocking);
//  * the future carries the device, so work chained with then() is ordered
//    by events on the streams it runs on, as with CUDA futures.
// The price on a real accelerator: one collective in flight per group, and
// wait() blocks the host (NCCL's "blocking wait"). Issuing is asynchronous:
// the caller only records an event and queues the task.
//
// Note [Deadlines]
// ~~~~~~~~~~~~~~~~
// Routes time out by themselves: the vendor library gets the group timeout
// at commInitRank (and names the ranks that did not arrive), gloo gets it at
// construction. Work::wait keeps a backstop deadline: the op's timeout (or
// the group's) plus half that timeout plus 2 s, counted from when the worker
// started the task, or, while it is still queued, from when the worker
// started the task it is busy with. Past it, wait() aborts the route (so
// the worker and the other ranks stop waiting) and raises.
//
// Note [Comm workers at exit]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The worker drops a task's tensors when the task is done; a tensor that
// Python knows of releases its Python object, which takes the GIL. A
// program that ends without destroy_process_group() (accelerate's, most
// training scripts) leaves the worker running into interpreter shutdown:
// once Python finalizes, a thread taking the GIL is made to exit by
// pthread_exit, whose unwinding through the tensor's noexcept destructor
// called std::terminate ("terminate called without an active exception",
// SIGABRT of rank 0 after its work was done; seen 1 run in 40 under load).
// So every live backend's worker is a piece of background work (Note
// [Stopping background work], runtime/lifecycle.h): at exit, before Python
// finalizes, the queued tasks run to their end, the worker returns and is
// joined, within the exit bound. A collective issued after that raises.
//
// Note [Comm error messages]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every failure reaches the user as torch.distributed.DistBackendError:
//   fccl: all_reduce #3 (flagos:0, 4 x float32, sum) failed on rank 0 of 2
//   (group '0', route vendor/host-shm): <what the route or library said>
// The route's part names the ranks that did not arrive (timeouts) or each
// rank's call (mismatched operations), where it can know them.
#include "comm/backend.h"

#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>
#include <c10/util/thread_name.h>

#include <set>
#include <sstream>

#include "runtime/backend.h"
#include "runtime/lifecycle.h"
#include "runtime/stream.h"

namespace flagos::comm {

namespace {

constexpr auto kFlagos = c10::DeviceType::PrivateUse1;

struct LiveBackends {
  std::mutex mu;  // held while a stop runs, so no backend dies under it
  std::set<FcclBackend*> all;
};

LiveBackends& liveBackends() {
  static auto* live = new LiveBackends();  // leaked: used at exit
  return *live;
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void raiseDist(const std::string& message) {
  throw c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, message);
}

}  // namespace

// ---------------------------------------------------------------- work ---

void Progress::abortRoute() {
  std::function<void()> fn;
  {
    std::lock_guard<std::mutex> lock(abort_mutex);
    fn = abort;
  }
  if (fn) fn();
}

FcclWork::FcclWork(int rank, c10d::OpType type, std::string what, c10::DeviceIndex device,
                   std::chrono::milliseconds limit, std::vector<at::Tensor> outputs,
                   std::shared_ptr<Progress> progress)
    : c10d::Work(rank, type),
      what_(std::move(what)),
      device_(device),
      limit_(limit),
      outputs_(std::move(outputs)),
      progress_(std::move(progress)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()),
          std::vector<c10::Device>{c10::Device(kFlagos, device)})) {}

bool FcclWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool FcclWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

void FcclWork::markSubmitted() {
  std::lock_guard<std::mutex> lock(mutex_);
  submitted_ = true;
}

void FcclWork::markStarted() {
  std::lock_guard<std::mutex> lock(mutex_);
  started_ns_ = nowNs();
}

void FcclWork::addOutputs(const std::vector<at::Tensor>& outputs) {
  outputs_.insert(outputs_.end(), outputs.begin(), outputs.end());
}

bool FcclWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  TORCH_CHECK(submitted_, "fccl: wait() on ", what_,
              ", which is inside a coalescing block that has not ended; wait on the work "
              "that ends the block");
  const int64_t called = nowNs();
  const bool explicit_timeout = timeout > kNoTimeout;
  const int64_t limit_ns = (explicit_timeout ? timeout : limit_).count() * 1000000;
  while (!completed_) {
    const int64_t now = nowNs();
    const int64_t since =
        explicit_timeout ? called : (started_ns_ ? started_ns_ : progress_->busy_since.load());
    if (since != 0 && now - since > limit_ns) {
      const bool started = started_ns_ != 0;
      lock.unlock();
      progress_->abortRoute();
      std::ostringstream msg;
      msg << "fccl: " << what_ << " on rank " << rank_
          << (started ? " did not complete within "
                      : " is queued behind an operation that did "
                        "not complete within ")
          << limit_ns / 1000000
          << " ms, and the library reported no error; the communicator was aborted so that "
             "no rank waits forever (a rank may have died or called other operations)";
      raiseDist(msg.str());
    }
    cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
  if (exception_) std::rethrow_exception(exception_);
  if (done_recorded_) done_.block(flagos::currentStream(device_));
  lock.unlock();
  future_->wait();  // marked right after the work (complete())
  return true;
}

void FcclWork::synchronize() {
  wait(kNoTimeout);
}

std::vector<at::Tensor> FcclWork::result() {
  return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> FcclWork::getFuture() {
  return future_;
}

void FcclWork::abort() {
  progress_->abortRoute();
}

void FcclWork::complete(std::exception_ptr error, const std::optional<c10::Stream>& stream) {
  if (!error && stream) {
    try {
      done_.record(*stream);
      done_recorded_ = true;
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(c10::DistBackendError(
          {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
          "fccl: " + what_ + ": recording its completion event failed: " + messageOf(e)));
    }
  }
  // The work before the future: a then() callback may ask the work whether
  // it completed. wait() waits for the future too.
  finish(error);
  if (error) {
    future_->setErrorIfNeeded(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

// ------------------------------------------------------------- backend ---

FcclBackend::FcclBackend(GroupInfo group, std::unique_ptr<Route> route)
    : c10d::Backend(group.rank, group.size),
      group_(std::move(group)),
      route_(std::move(route)),
      timeout_ms_(group_.timeout.count()) {
  init();
  {
    std::lock_guard<std::mutex> lock(progress_->abort_mutex);
    progress_->abort = [route = route_.get()] { route->abort(); };
  }
  worker_ = std::thread([this] { workerLoop(); });
  // Note [Comm workers at exit].
  static const bool registered =
      (registerBackgroundStopper("the fccl communication workers", stopLiveWorkers), true);
  (void)registered;
  std::lock_guard<std::mutex> lock(liveBackends().mu);
  liveBackends().all.insert(this);
}

// Note [Comm workers at exit].
bool stopLiveWorkers(std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  LiveBackends& live = liveBackends();
  std::lock_guard<std::mutex> lock(live.mu);
  bool idle = true;
  for (FcclBackend* backend : live.all) idle = backend->stopWorkerBy(deadline) && idle;
  return idle;
}

FcclBackend::~FcclBackend() {
  {
    std::lock_guard<std::mutex> lock(liveBackends().mu);
    liveBackends().all.erase(this);
  }
  stopWorker();
  {
    std::lock_guard<std::mutex> lock(progress_->abort_mutex);
    progress_->abort = nullptr;
  }
  route_->shutdown();
}

c10::intrusive_ptr<c10d::Backend::Options> FcclBackend::getBackendOptions() {
  auto options =
      c10::make_intrusive<Options>(kBackendName, std::chrono::milliseconds(timeout_ms_.load()));
  options->group_name = group_.name;
  return options;
}

void FcclBackend::setTimeout(std::chrono::milliseconds timeout) {
  timeout_ms_ = timeout.count();
}

std::chrono::milliseconds FcclBackend::limitFor(std::chrono::milliseconds op_timeout) const {
  const auto t = op_timeout.count() > 0 ? op_timeout : std::chrono::milliseconds(timeout_ms_);
  return t + t / 2 + std::chrono::milliseconds(2000);
}

std::unique_ptr<Task> FcclBackend::newTask(const char* name, c10::DeviceIndex device) {
  auto task = std::make_unique<Task>();
  task->name = name;
  task->device = device;
  return task;
}

c10::intrusive_ptr<c10d::Work> FcclBackend::submit(std::unique_ptr<Task> task, c10d::OpType type,
                                                   std::vector<at::Tensor> outputs,
                                                   std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!stopping_, "fccl: ", task->name,
              " on a process group that was shut down or aborted");
  if (coalescing_) {
    if (!coalesced_) {
      coalesced_ = std::move(task);
      coalesced_work_ = c10::make_intrusive<FcclWork>(
          rank_, c10d::OpType::COALESCED, coalesced_->name + " (coalesced)", coalesced_->device,
          limitFor(timeout), std::move(outputs), progress_);
    } else {
      TORCH_CHECK(
          task->device == coalesced_->device,
          "fccl: a coalescing block mixes devices flagos:", static_cast<int>(coalesced_->device),
          " and flagos:", static_cast<int>(task->device));
      for (Op& op : task->ops) coalesced_->ops.push_back(std::move(op));
      for (auto& f : task->finish) coalesced_->finish.push_back(std::move(f));
      coalesced_work_->addOutputs(outputs);
    }
    return coalesced_work_;
  }
  task->seq = next_seq_++;
  if (task->involvesAll()) task->coll_seq = next_coll_seq_++;
  last_device_ = task->device;
  auto work = c10::make_intrusive<FcclWork>(rank_, type, task->describe(), task->device,
                                            limitFor(timeout), std::move(outputs), progress_);
  work->markSubmitted();
  enqueue(std::move(task), work);
  return work;
}

// Under mutex_.
void FcclBackend::enqueue(std::unique_ptr<Task> task, c10::intrusive_ptr<FcclWork> work) {
  task->ready.record(flagos::currentStream(task->device));
  queue_.emplace_back(std::move(task), std::move(work));
  queue_cv_.notify_one();
}

void FcclBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(!coalescing_, "fccl: startCoalescing inside a coalescing block");
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> FcclBackend::endCoalescing() {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(coalescing_, "fccl: endCoalescing without startCoalescing");
  coalescing_ = false;
  if (!coalesced_) {  // nothing was issued in the block
    auto work = c10::make_intrusive<FcclWork>(rank_, c10d::OpType::COALESCED,
                                              "empty coalescing block", flagos::currentDevice(),
                                              limitFor({}), std::vector<at::Tensor>{}, progress_);
    work->markSubmitted();
    work->complete(nullptr, std::nullopt);
    return work;
  }
  std::unique_ptr<Task> task = std::move(coalesced_);
  c10::intrusive_ptr<FcclWork> work = std::move(coalesced_work_);
  task->seq = next_seq_++;
  if (task->involvesAll()) task->coll_seq = next_coll_seq_++;
  work->rename(task->describe() + " (coalesced)");
  work->markSubmitted();
  enqueue(std::move(task), work);
  return work;
}

c10::Stream FcclBackend::commStream(c10::DeviceIndex device) {
  auto it = streams_.find(device);
  if (it == streams_.end()) it = streams_.emplace(device, flagos::newStream(device, -1)).first;
  return it->second;
}

std::string FcclBackend::wrap(const Task& task, const std::string& detail) const {
  std::ostringstream out;
  out << "fccl: " << task.describe() << " failed on rank " << rank_ << " of " << size_
      << " (group '" << group_.name << "', route " << routeName(route_->kind()) << "/"
      << route_->library() << "): " << detail;
  return out.str();
}

void FcclBackend::workerLoop() {
  c10::setThreadName("fccl-worker");
  for (;;) {
    std::unique_ptr<Task> task;
    c10::intrusive_ptr<FcclWork> work;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        worker_done_ = true;
        done_cv_.notify_all();
        return;
      }
      task = std::move(queue_.front().first);
      work = std::move(queue_.front().second);
      queue_.pop_front();
    }
    progress_->busy_since = nowNs();
    work->markStarted();
    execute(*task, *work);
    task.reset();  // releases the buffers only after the stream was drained
    progress_->busy_since = 0;
  }
}

// Note [Work completion].
void FcclBackend::execute(Task& task, FcclWork& work) {
  std::exception_ptr error;
  std::optional<c10::Stream> stream;
  std::optional<c10::StreamGuard> guard;
  try {
    stream = commStream(task.device);
    guard.emplace(*stream);
    route_->run(task, *stream);
    for (auto& step : task.finish) step();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(c10::DistBackendError(
        {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, wrap(task, messageOf(e))));
  }
  if (stream) {
    const flagosVendorTables& t = flagos::backend().tables;
    const flagosStatus_t status = t.stream->streamSynchronize(flagos::vendorStream(*stream));
    if (status != FLAGOS_SUCCESS && !error) {
      const char* message = t.getLastError();
      error = std::make_exception_ptr(c10::DistBackendError(
          {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
          wrap(task, message && *message ? message : "the communication stream failed")));
    }
  }
  try {
    work.complete(error, stream);
  } catch (const std::exception& e) {  // a future callback threw: it already holds the error
    TORCH_WARN("fccl: completing ", work.what(), " raised: ", messageOf(e));
  }
}

void FcclBackend::stopWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (worker_.joinable()) {
    if (worker_.get_id() == std::this_thread::get_id()) {
      worker_.detach();  // the last reference died in a future callback on the worker
    } else {
      worker_.join();
    }
  }
}

bool FcclBackend::stopWorkerBy(std::chrono::steady_clock::time_point deadline) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_cv_.notify_all();
    if (!done_cv_.wait_until(lock, deadline, [&] { return worker_done_; })) return false;
  }
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
  return true;
}

void FcclBackend::shutdown() {
  stopWorker();
  route_->shutdown();
}

void FcclBackend::abort() {
  route_->abort();
  std::deque<std::pair<std::unique_ptr<Task>, c10::intrusive_ptr<FcclWork>>> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  queue_cv_.notify_all();
  for (auto& [task, work] : dropped) {
    work->complete(std::make_exception_ptr(c10::DistBackendError(
                       {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                       wrap(*task, "the process group was aborted before it ran"))),
                   std::nullopt);
  }
  stopWorker();
}

}  // namespace flagos::comm
