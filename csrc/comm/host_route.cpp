// The host route: copy the task's buffers to host memory, run the operation
// on an inner gloo backend, copy the results back. Always available; what
// the vendor route falls back to.
//
// Note [Descriptors]
// ~~~~~~~~~~~~~~~~~~
// gloo trusts its callers: ranks that pass different sizes or dtypes to one
// collective crash the process (SIGABRT) or get silently wrong data
// (broadcast). So before each task that involves every rank, the ranks
// all-gather a small int64 descriptor over gloo: magic, collective number,
// kind, dtype, per-rank count, reduction, root, number of ops, a hash of all
// ops and, for all_to_all, the per-rank send and receive counts. A mismatch
// fails the task on every rank with a message listing each rank's call, and
// gloo stays in step (every rank made the same exchange). Sends and
// receives carry a header instead (Note [Host p2p]). This costs one small
// all-gather per collective, the price of never crashing on a mistake.
//
// Note [Who did not arrive]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// gloo's timeout error does not say which rank is missing. A rank that has
// waited more than kPublishAfter for a collective publishes
// "fccl/progress/<rank>" = its collective number in the group's store; on a
// timeout every rank reads the others' numbers: a rank whose number is
// below the failed collective's (or absent) did not arrive. Fast
// collectives never touch the store.
//
// Note [Host p2p]
// ~~~~~~~~~~~~~~~
// Every send is a 2-element int64 header (count, dtype) and then the
// payload, on the caller's tag. All sends of a batch are posted first, then
// the receivers read the headers, allocate what the sender announced, and
// receive the payloads, so a batch of pairs or a ring cannot deadlock, a
// size or dtype mismatch is reported (naming both sides) rather than
// corrupting memory, and the message stream stays in step.
#include <ATen/ATen.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <sstream>

#include "comm/comm.h"

namespace flagos::comm {
namespace {

constexpr int64_t kMagic = 0x6663636c;  // "fccl"
constexpr auto kPublishAfter = std::chrono::milliseconds(250);
constexpr int kFixed = 10;  // descriptor entries before the all_to_all counts

int64_t mix(int64_t h, int64_t v) {
  uint64_t x = static_cast<uint64_t>(h) ^
               (static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (static_cast<uint64_t>(h) << 6) +
                (static_cast<uint64_t>(h) >> 2));
  return static_cast<int64_t>(x & 0x7fffffffffffffffull);
}

const at::Tensor& dataOf(const Op& op) {
  return op.input.defined() ? op.input : op.output;
}

class HostRoute final : public Route {
 public:
  HostRoute(const GroupInfo& group, c10::intrusive_ptr<c10d::Backend> gloo)
      : group_(group), gloo_(std::move(gloo)) {}

  RouteKind kind() const override { return RouteKind::kHost; }
  std::string library() const override { return "gloo"; }
  void run(Task& task, const c10::Stream& stream) override;
  void abort() noexcept override { aborted_ = true; }
  void shutdown() noexcept override {}

 private:
  std::vector<int64_t> descriptor(const Task& task) const;
  void checkDescriptors(const Task& task);
  std::string describe(const int64_t* d) const;
  // Waits for a gloo work (Note [Who did not arrive]); throws CommFailure.
  void waitFor(const c10::intrusive_ptr<c10d::Work>& work, const Task& task,
               const std::string& step);
  void publish(uint64_t coll_seq);
  std::string missingRanks(uint64_t coll_seq);
  void collective(const Op& op, const Task& task);
  void pointToPoint(Task& task, size_t begin, size_t end);

  GroupInfo group_;
  c10::intrusive_ptr<c10d::Backend> gloo_;
  std::atomic<bool> aborted_{false};
};

std::vector<int64_t> HostRoute::descriptor(const Task& task) const {
  const int n = group_.size;
  std::vector<int64_t> d(kFixed + 2 * n, 0);
  d[0] = kMagic;
  d[1] = static_cast<int64_t>(task.coll_seq);
  int64_t ops = 0, hash = 0;
  const Op* first = nullptr;
  for (const Op& op : task.ops) {
    if (isP2P(op.kind)) continue;
    if (first == nullptr) first = &op;
    ++ops;
    const at::Tensor& t = dataOf(op);
    hash = mix(hash, static_cast<int64_t>(op.kind));
    hash = mix(hash, op.kind == Kind::kBarrier ? -1 : static_cast<int64_t>(t.scalar_type()));
    hash = mix(hash, op.count);
    hash = mix(hash, op.reduce);
    hash = mix(hash, op.root);
  }
  const at::Tensor& t = dataOf(*first);
  d[2] = static_cast<int64_t>(first->kind);
  d[3] = first->kind == Kind::kBarrier ? -1 : static_cast<int64_t>(t.scalar_type());
  d[4] = first->count;
  const bool reduces = first->kind == Kind::kAllReduce || first->kind == Kind::kReduce ||
                       first->kind == Kind::kReduceScatter;
  d[5] = reduces ? static_cast<int64_t>(first->reduce) : -1;
  d[6] = first->root;
  d[7] = ops;
  d[8] = hash;
  if (first->kind == Kind::kAllToAll) {
    for (int r = 0; r < n; ++r) {
      d[kFixed + r] = first->send_counts[r];
      d[kFixed + n + r] = first->recv_counts[r];
    }
  }
  return d;
}

std::string HostRoute::describe(const int64_t* d) const {
  std::ostringstream out;
  out << kindName(static_cast<Kind>(d[2])) << " #" << d[1];
  if (d[3] >= 0) {
    out << " of ";
    if (d[4] >= 0) out << d[4] << " x ";
    out << c10::toString(static_cast<at::ScalarType>(d[3]));
  }
  if (d[5] >= 0) out << " (" << describeReduce(static_cast<c10d::ReduceOp::RedOpType>(d[5])) << ")";
  if (d[6] >= 0) out << " root " << d[6];
  if (d[7] > 1) out << ", " << d[7] << " ops";
  return out.str();
}

void HostRoute::checkDescriptors(const Task& task) {
  const int n = group_.size, me = group_.rank;
  const std::vector<int64_t> mine = descriptor(task);
  const int64_t L = static_cast<int64_t>(mine.size());
  at::Tensor in = at::tensor(mine, at::kLong);
  at::Tensor all = at::empty({L * n}, at::kLong);
  waitFor(gloo_->_allgather_base(all, in), task, "exchanging the call descriptors");
  const int64_t* d = all.const_data_ptr<int64_t>();
  bool differ = false;
  for (int r = 0; r < n; ++r) {
    const int64_t* dr = d + r * L;
    for (int i = 0; i < kFixed; ++i) differ |= dr[i] != mine[i];
  }
  std::string detail;
  if (differ) {
    detail = "the ranks called different collectives: ";
    for (int r = 0; r < n && r < 16; ++r) {
      const int64_t* dr = d + r * L;
      detail += (r ? "; rank " : "rank ") + std::to_string(r) + ": ";
      detail += dr[0] == kMagic ? describe(dr) : "(not an fccl call)";
      if (dr[0] == kMagic && dr[8] != mine[8] && std::equal(dr, dr + 8, mine.begin())) {
        detail += " [different tensors in the list]";
      }
    }
    if (n > 16) detail += "; ...";
  } else if (static_cast<Kind>(mine[2]) == Kind::kAllToAll) {
    // Rank s sends d_s.send[r] elements to r, which expects d_r.recv[s].
    for (int s = 0; s < n && detail.empty(); ++s) {
      for (int r = 0; r < n; ++r) {
        const int64_t sent = d[s * L + kFixed + r], expected = d[r * L + kFixed + n + s];
        if (sent != expected) {
          detail = "all_to_all split sizes disagree: rank " + std::to_string(s) + " sends " +
                   std::to_string(sent) + " elements to rank " + std::to_string(r) +
                   ", which expects " + std::to_string(expected) + " from it";
          break;
        }
      }
    }
  }
  (void)me;
  if (!detail.empty()) throw CommFailure(detail);
}

void HostRoute::publish(uint64_t coll_seq) {
  try {
    group_.store->set("fccl/progress/" + std::to_string(group_.rank), std::to_string(coll_seq));
  } catch (const std::exception&) {  // diagnosis only
  }
}

std::string HostRoute::missingRanks(uint64_t coll_seq) {
  std::string missing;
  int count = 0;
  for (int q = 0; q < group_.size; ++q) {
    if (q == group_.rank) continue;
    const std::string key = "fccl/progress/" + std::to_string(q);
    int64_t seen = -1;
    try {
      if (group_.store->check({key})) {
        const std::vector<uint8_t> v = group_.store->get(key);
        seen = std::stoll(std::string(v.begin(), v.end()));
      }
    } catch (const std::exception&) {
    }
    if (seen >= static_cast<int64_t>(coll_seq)) continue;
    missing += (count++ ? ", " : "") + std::to_string(q);
    if (seen >= 0) missing += " (last seen waiting in collective #" + std::to_string(seen) + ")";
  }
  if (count == 0) return "every rank arrived; one may have failed or left during the transfer";
  return std::string(count == 1 ? "rank " : "ranks ") + missing + " of " +
         std::to_string(group_.size) + " did not arrive";
}

void HostRoute::waitFor(const c10::intrusive_ptr<c10d::Work>& work, const Task& task,
                        const std::string& step) {
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto state = std::make_shared<State>();
  c10::intrusive_ptr<c10::ivalue::Future> future;
  try {
    future = work->getFuture();
  } catch (const c10::Error&) {  // some gloo works have none: poll them
  }
  if (future) {
    future->addCallback([state](c10::ivalue::Future&) {
      {
        std::lock_guard<std::mutex> lock(state->mutex);
        state->done = true;
      }
      state->cv.notify_all();
    });
  } else {
    // Works without a future (isCompleted() may stay false until wait()):
    // announce the wait up front, then let gloo's own timeout end it.
    publish(task.coll_seq);
    state->done = true;
  }
  {  // (the predicate returns at once when already done)
    std::unique_lock<std::mutex> lock(state->mutex);
    if (!state->cv.wait_for(lock, kPublishAfter, [&] { return state->done; })) {
      lock.unlock();
      publish(task.coll_seq);
      lock.lock();
      // gloo gives up after the group timeout by itself; this is a backstop.
      const auto backstop = group_.timeout * 2 + std::chrono::seconds(5);
      if (!state->cv.wait_for(lock, backstop, [&] { return state->done; })) {
        aborted_ = true;
        throw CommFailure(step + ": gloo neither completed nor failed within " +
                          std::to_string(backstop.count()) + " ms; " + missingRanks(task.coll_seq));
      }
    }
  }
  try {
    work->wait();
  } catch (const std::exception& e) {
    aborted_ = true;  // gloo's pairs are out of step after a failure
    throw CommFailure(step + " failed after at most " + std::to_string(group_.timeout.count()) +
                      " ms: " + missingRanks(task.coll_seq) + " (gloo: " + messageOf(e) + ")");
  }
}

void HostRoute::run(Task& task, const c10::Stream& /*stream*/) {
  if (aborted_) throw CommFailure("the gloo route was aborted after an earlier failure");
  task.ready.synchronize();  // the staging copies read the inputs on the host's behalf
  if (task.involvesAll()) checkDescriptors(task);
  for (size_t i = 0; i < task.ops.size();) {
    if (!isP2P(task.ops[i].kind)) {
      collective(task.ops[i++], task);
      continue;
    }
    size_t j = i;
    while (j < task.ops.size() && isP2P(task.ops[j].kind)) ++j;
    pointToPoint(task, i, j);
    i = j;
  }
}

at::Tensor toHost(const at::Tensor& t) {
  return t.to(at::kCPU);  // synchronous on the (current) communication stream
}

at::Tensor hostLike(int64_t numel, const at::Tensor& like) {
  return at::empty({numel}, like.options().device(at::kCPU));
}

void HostRoute::collective(const Op& op, const Task& task) {
  const std::string step = kindName(op.kind);
  const int me = group_.rank, n = group_.size;
  if (op.kind == Kind::kBarrier) {
    waitFor(gloo_->barrier(c10d::BarrierOptions()), task, step);
    return;
  }
  switch (op.kind) {
    case Kind::kAllReduce: {
      std::vector<at::Tensor> host{toHost(op.input)};
      c10d::AllreduceOptions o;
      o.reduceOp = c10d::ReduceOp(op.reduce);
      waitFor(gloo_->allreduce(host, o), task, step);
      op.output.copy_(host[0]);
      return;
    }
    case Kind::kBroadcast: {
      const bool root = me == op.root;
      std::vector<at::Tensor> host{root ? toHost(op.input) : hostLike(op.count, op.output)};
      c10d::BroadcastOptions o;
      o.rootRank = op.root;
      waitFor(gloo_->broadcast(host, o), task, step);
      if (!root || op.output.data_ptr() != op.input.data_ptr()) op.output.copy_(host[0]);
      return;
    }
    case Kind::kReduce: {
      std::vector<at::Tensor> host{toHost(op.input)};
      c10d::ReduceOptions o;
      o.reduceOp = c10d::ReduceOp(op.reduce);
      o.rootRank = op.root;
      waitFor(gloo_->reduce(host, o), task, step);
      if (me == op.root) op.output.copy_(host[0]);
      return;
    }
    case Kind::kAllGather: {
      at::Tensor in = toHost(op.input), out = hostLike(op.count * n, op.input);
      waitFor(gloo_->_allgather_base(out, in, c10d::AllgatherOptions()), task, step);
      op.output.copy_(out);
      return;
    }
    case Kind::kReduceScatter: {
      // gloo's reduce-scatter is an all-reduce underneath (and its work has
      // no future): all-reduce the whole input, keep this rank's block.
      std::vector<at::Tensor> host{toHost(op.input)};
      c10d::AllreduceOptions o;
      o.reduceOp = c10d::ReduceOp(op.reduce);
      waitFor(gloo_->allreduce(host, o), task, step);
      op.output.copy_(host[0].narrow(0, me * op.count, op.count));
      return;
    }
    case Kind::kAllToAll: {
      int64_t total = 0;
      for (int64_t c : op.recv_counts) total += c;
      at::Tensor in = toHost(op.input), out = hostLike(total, op.output);
      std::vector<int64_t> sends = op.send_counts, recvs = op.recv_counts;
      waitFor(gloo_->alltoall_base(out, in, recvs, sends, c10d::AllToAllOptions()), task, step);
      op.output.copy_(out);
      return;
    }
    case Kind::kGather: {
      std::vector<at::Tensor> in{toHost(op.input)};
      std::vector<std::vector<at::Tensor>> outs;
      at::Tensor flat;
      if (me == op.root) {
        flat = hostLike(op.count * n, op.input);
        outs.emplace_back();
        for (int r = 0; r < n; ++r) outs[0].push_back(flat.narrow(0, r * op.count, op.count));
      }
      c10d::GatherOptions o;
      o.rootRank = op.root;
      waitFor(gloo_->gather(outs, in, o), task, step);
      if (me == op.root) op.output.copy_(flat);
      return;
    }
    case Kind::kScatter: {
      std::vector<at::Tensor> out{hostLike(op.count, op.output)};
      std::vector<std::vector<at::Tensor>> ins;
      if (me == op.root) {
        at::Tensor flat = toHost(op.input);
        ins.emplace_back();
        for (int r = 0; r < n; ++r) ins[0].push_back(flat.narrow(0, r * op.count, op.count));
      }
      c10d::ScatterOptions o;
      o.rootRank = op.root;
      waitFor(gloo_->scatter(out, ins, o), task, step);
      op.output.copy_(out[0]);
      return;
    }
    default:
      throw CommFailure("unexpected operation " + step);
  }
}

// Note [Host p2p].
void HostRoute::pointToPoint(Task& task, size_t begin, size_t end) {
  struct Transfer {
    Op* op;
    at::Tensor header, payload;
    c10::intrusive_ptr<c10d::Work> header_work, payload_work;
    std::string mismatch;
  };
  std::vector<Transfer> transfers;
  for (size_t i = begin; i < end; ++i) transfers.push_back({&task.ops[i], {}, {}, {}, {}, {}});
  auto timedWait = [&](const c10::intrusive_ptr<c10d::Work>& w, const Op& op) {
    try {
      w->wait(group_.timeout);
    } catch (const std::exception& e) {
      aborted_ = true;
      const bool send = op.kind == Kind::kSend;
      throw CommFailure(std::string(send ? "send to" : "recv from") + " rank " +
                        std::to_string(op.peer) + " (tag " + std::to_string(op.tag) +
                        ") did not complete within " + std::to_string(group_.timeout.count()) +
                        " ms: rank " + std::to_string(op.peer) + " did not post the matching " +
                        (send ? "recv" : "send") + " (gloo: " + messageOf(e) + ")");
    }
  };
  for (Transfer& t : transfers) {  // every send first
    if (t.op->kind != Kind::kSend) continue;
    t.header = at::tensor({t.op->input.numel(), static_cast<int64_t>(t.op->input.scalar_type())},
                          at::kLong);
    t.payload = toHost(t.op->input);
    std::vector<at::Tensor> h{t.header}, p{t.payload};
    t.header_work = gloo_->send(h, t.op->peer, t.op->tag);
    t.payload_work = gloo_->send(p, t.op->peer, t.op->tag);
  }
  for (Transfer& t : transfers) {
    if (t.op->kind != Kind::kRecv) continue;
    t.header = at::empty({2}, at::kLong);
    std::vector<at::Tensor> h{t.header};
    t.header_work = gloo_->recv(h, t.op->peer, t.op->tag);
  }
  for (Transfer& t : transfers) {
    if (t.op->kind != Kind::kRecv) continue;
    timedWait(t.header_work, *t.op);
    const int64_t count = t.header[0].item<int64_t>();
    const auto dtype = static_cast<at::ScalarType>(t.header[1].item<int64_t>());
    const at::Tensor& out = t.op->output;
    if (count != out.numel() || dtype != out.scalar_type()) {
      t.mismatch = "recv from rank " + std::to_string(t.op->peer) + ": rank " +
                   std::to_string(t.op->peer) + " sent " + std::to_string(count) + " x " +
                   c10::toString(dtype) + ", this rank expected " + std::to_string(out.numel()) +
                   " x " + c10::toString(out.scalar_type());
    }
    t.payload = at::empty({count}, at::TensorOptions().dtype(dtype));
    std::vector<at::Tensor> p{t.payload};
    t.payload_work = gloo_->recv(p, t.op->peer, t.op->tag);
  }
  std::string mismatch;
  for (Transfer& t : transfers) {
    if (t.op->kind == Kind::kSend) timedWait(t.header_work, *t.op);
    timedWait(t.payload_work, *t.op);
    if (t.op->kind != Kind::kRecv) continue;
    if (t.mismatch.empty()) {
      t.op->output.copy_(t.payload);
    } else if (mismatch.empty()) {
      mismatch = t.mismatch;
    }
  }
  if (!mismatch.empty()) throw CommFailure(mismatch);
}

}  // namespace

std::unique_ptr<Route> makeHostRoute(const GroupInfo& group,
                                     c10::intrusive_ptr<c10d::Backend> gloo) {
  TORCH_CHECK(gloo, "fccl: the host route needs a gloo backend");
  return std::make_unique<HostRoute>(group, std::move(gloo));
}

}  // namespace flagos::comm
