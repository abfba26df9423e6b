// FcclBackend: the c10d backend of the flagos device ("fccl"), and its Work.
//
// Each c10d call checks its tensors, prepares flat buffers on the caller's
// current stream (Note [Flat operations], comm.h), records a "ready" event
// and queues a Task. One worker thread per backend runs the tasks in issue
// order (so every rank runs them in the same order) through the route, on a
// communication stream per device, and completes the Work. See
// Note [Work completion] in backend.cpp.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "comm/comm.h"

namespace flagos::comm {

// State the backend's works share with it, and outlive it with.
struct Progress {
  // steady_clock nanoseconds when the worker started its current task; 0 idle.
  std::atomic<int64_t> busy_since{0};
  std::mutex abort_mutex;
  std::function<void()> abort;  // aborts the route; cleared when the backend dies
  void abortRoute();
};

class FcclWork final : public c10d::Work {
 public:
  FcclWork(int rank, c10d::OpType type, std::string what, c10::DeviceIndex device,
           std::chrono::milliseconds limit, std::vector<at::Tensor> outputs,
           std::shared_ptr<Progress> progress);

  bool isCompleted() override;
  bool isSuccess() const override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  void abort() override;

  // Worker side.
  void markStarted();
  void markSubmitted();
  // Called on the worker with the communication stream current: records the
  // done event there, completes the future (running its callbacks) and
  // wakes waiters. `error` null on success.
  void complete(std::exception_ptr error, const std::optional<c10::Stream>& stream);
  const std::string& what() const { return what_; }
  void rename(std::string what) { what_ = std::move(what); }
  void addOutputs(const std::vector<at::Tensor>& outputs);

 private:
  std::string what_;
  c10::DeviceIndex device_;
  std::chrono::milliseconds limit_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<Progress> progress_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  c10::Event done_{c10::DeviceType::PrivateUse1};
  bool done_recorded_ = false;
  bool submitted_ = false;
  int64_t started_ns_ = 0;  // guarded by mutex_
};

class FcclBackend final : public c10d::Backend {
 public:
  FcclBackend(GroupInfo group, std::unique_ptr<Route> route);
  ~FcclBackend() override;

  const std::string getBackendName() const override { return kBackendName; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;

  void abort() override;
  void shutdown() override;

  RouteKind routeKind() const { return route_->kind(); }
  std::string library() const { return route_->library(); }
  const GroupInfo& group() const { return group_; }

 private:
  // The task being built by one c10d call.
  std::unique_ptr<Task> newTask(const char* name, c10::DeviceIndex device);
  // The start every entry point shares (collectives.cpp): `anchor` checked
  // as a dense flagos tensor, its device current for the call, the task.
  struct Call {
    c10::DeviceIndex device;
    c10::DeviceGuard guard;
    std::unique_ptr<Task> task;
    void add(Op op) { task->ops.push_back(std::move(op)); }
  };
  Call begin(const char* name, const at::Tensor& anchor, const char* what);
  // Queues `task` (or folds it into the open coalescing block) and returns
  // its Work, whose future holds `outputs`.
  c10::intrusive_ptr<c10d::Work> submit(std::unique_ptr<Task> task, c10d::OpType type,
                                        std::vector<at::Tensor> outputs,
                                        std::chrono::milliseconds timeout);
  void enqueue(std::unique_ptr<Task> task, c10::intrusive_ptr<FcclWork> work);
  std::chrono::milliseconds limitFor(std::chrono::milliseconds op_timeout) const;
  void workerLoop();
  void execute(Task& task, FcclWork& work);
  c10::Stream commStream(c10::DeviceIndex device);
  std::string wrap(const Task& task, const std::string& detail) const;
  void stopWorker();
  // Note [Comm workers at exit]: stops the worker once the queue is drained;
  // false when it was still running at @p deadline (it is left running).
  bool stopWorkerBy(std::chrono::steady_clock::time_point deadline);
  friend bool stopLiveWorkers(std::chrono::milliseconds bound);

  c10::intrusive_ptr<c10d::Work> allreduceTensors(const char* name, c10d::OpType type,
                                                  std::vector<at::Tensor>& tensors,
                                                  const c10d::ReduceOp& op,
                                                  std::chrono::milliseconds timeout);

  GroupInfo group_;
  std::unique_ptr<Route> route_;
  std::shared_ptr<Progress> progress_ = std::make_shared<Progress>();
  std::atomic<int64_t> timeout_ms_;

  std::mutex mutex_;  // everything below
  uint64_t next_seq_ = 0;
  uint64_t next_coll_seq_ = 0;
  c10::DeviceIndex last_device_ = -1;  // of the last task issued
  bool coalescing_ = false;
  std::unique_ptr<Task> coalesced_;
  c10::intrusive_ptr<FcclWork> coalesced_work_;
  std::deque<std::pair<std::unique_ptr<Task>, c10::intrusive_ptr<FcclWork>>> queue_;
  std::condition_variable queue_cv_;
  bool stopping_ = false;
  bool worker_done_ = false;         // workerLoop returned
  std::condition_variable done_cv_;  // signals worker_done_
  std::thread worker_;
  std::map<c10::DeviceIndex, c10::Stream> streams_;  // worker thread only
};

// Note [Comm workers at exit] (backend.cpp): stops every live backend's
// worker within @p bound; the background stopper registered at the first
// backend's construction.
bool stopLiveWorkers(std::chrono::milliseconds bound);

}  // namespace flagos::comm
