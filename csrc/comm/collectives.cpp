// The c10d entry points of FcclBackend: argument checks, then the flat
// operations of Note [Flat operations] (comm.h), prepared on the caller's
// current stream, and submit().
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <numeric>

#include "comm/backend.h"
#include "runtime/backend.h"

namespace flagos::comm {
namespace {

constexpr auto kFlagos = c10::DeviceType::PrivateUse1;

// A dense tensor of the flagos device; returns its device index.
c10::DeviceIndex checkTensor(const char* call, const char* what, const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "fccl ", call, ": ", what, " is undefined");
  TORCH_CHECK(t.device().type() == kFlagos, "fccl ", call, ": ", what, " is on ", t.device(),
              "; fccl moves flagos tensors (for CPU tensors create the group with "
              "backend='cpu:gloo,flagos:fccl')");
  TORCH_CHECK(t.layout() == at::kStrided, "fccl ", call, ": ", what,
              " is not a strided (dense) tensor");
  return t.device().index();
}

void checkSameDevice(const char* call, c10::DeviceIndex expected, const at::Tensor& t) {
  TORCH_CHECK(t.device().index() == expected, "fccl ", call,
              ": tensors on flagos:", static_cast<int>(expected), " and ", t.device(),
              " in one call");
}

void checkDtype(const char* call, const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "fccl ", call, ": dtypes differ (",
              a.scalar_type(), " and ", b.scalar_type(), ")");
}

// One tensor of a call's list: dense, on `device`, of `like`'s dtype.
void checkMember(const char* call, c10::DeviceIndex device, const char* what, const at::Tensor& t,
                 const at::Tensor& like) {
  checkTensor(call, what, t);
  checkSameDevice(call, device, t);
  checkDtype(call, like, t);
}

// A rank argument (a root, a peer) of a group of `size` ranks.
void checkRank(const char* call, const char* what, int64_t rank, int size) {
  TORCH_CHECK(rank >= 0 && rank < size, "fccl ", call, ": ", what, " ", rank,
              " is not a rank of 0..", size - 1);
}

// An input and an output of one operation: both dense flagos tensors on
// `device`, of one dtype.
void checkPair(const char* call, c10::DeviceIndex device, const at::Tensor& input,
               const at::Tensor& output) {
  checkTensor(call, "input", input);
  checkTensor(call, "output", output);
  checkSameDevice(call, device, input);
  checkSameDevice(call, device, output);
  checkDtype(call, input, output);
}

at::Tensor& single(const char* call, std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(tensors.size() == 1, "fccl ", call,
              ": expects exactly one tensor per process (one device per rank), got ",
              tensors.size());
  return tensors[0];
}

// Note [Flat operations]: the flat view the route reads.
at::Tensor flatIn(const at::Tensor& t) {
  return t.is_contiguous() ? t.view({-1}) : t.contiguous().view({-1});
}

// The flat buffer a route writes `t` through; a staging buffer (copied back
// by a finish step) when `t` is not contiguous. `read` also copies `t` in
// (in-place operations).
at::Tensor flatOut(Task& task, const at::Tensor& t, bool read) {
  if (t.is_contiguous()) return t.view({-1});
  at::Tensor staged = read ? t.contiguous().view({-1}) : at::empty({t.numel()}, t.options());
  task.finish.push_back([t, staged]() mutable { t.copy_(staged.view(t.sizes())); });
  return staged;
}

// torch 2.11 named the factor's holder after NCCL.
#if FLAGOS_TORCH_MINOR <= 11
using PreMulSumFactor = c10d::NCCLPreMulSumSupplement;
#else
using PreMulSumFactor = c10d::PreMulSumSupplement;
#endif

// Resolves PREMUL_SUM (scale `buffer` by the factor, then SUM); in place
// when `inplace`, else on a copy. Returns the operator the route runs.
c10d::ReduceOp::RedOpType resolveReduce(const c10d::ReduceOp& op, at::Tensor& buffer,
                                        bool inplace) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return op.op_;
  TORCH_CHECK(op.supplement_, "fccl: PREMUL_SUM without a factor");
  const auto* factor = static_cast<const PreMulSumFactor*>(op.supplement_.get());
  if (factor->tensor_factor.defined()) {
    at::Tensor f = factor->tensor_factor.to(buffer.device(), buffer.scalar_type());
    buffer = inplace ? buffer.mul_(f) : buffer.mul(f);
  } else {
    buffer = inplace ? buffer.mul_(factor->double_factor) : buffer.mul(factor->double_factor);
  }
  return c10d::ReduceOp::SUM;
}

// list[i] (flattened) -> flat[i*n : (i+1)*n], on the current stream.
at::Tensor concatFlat(const std::vector<at::Tensor>& list, int64_t total,
                      const at::TensorOptions& options) {
  at::Tensor flat = at::empty({total}, options);
  int64_t offset = 0;
  for (const at::Tensor& t : list) {
    flat.narrow(0, offset, t.numel()).copy_(t.reshape({-1}));
    offset += t.numel();
  }
  return flat;
}

// A finish step: flat[offset...] -> each of `list`, in order.
void splitInto(Task& task, at::Tensor flat, std::vector<at::Tensor> list) {
  task.finish.push_back([flat, list]() mutable {
    int64_t offset = 0;
    for (at::Tensor& t : list) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  });
}

}  // namespace

FcclBackend::Call FcclBackend::begin(const char* name, const at::Tensor& anchor, const char* what) {
  const c10::DeviceIndex device = checkTensor(name, what, anchor);
  return Call{device, c10::DeviceGuard(anchor.device()), newTask(name, device)};
}

c10::intrusive_ptr<c10d::Work> FcclBackend::allreduceTensors(const char* name, c10d::OpType type,
                                                             std::vector<at::Tensor>& tensors,
                                                             const c10d::ReduceOp& op,
                                                             std::chrono::milliseconds timeout) {
  TORCH_CHECK(!tensors.empty(), "fccl ", name, ": no tensors");
  Call c = begin(name, tensors[0], "tensor");
  for (at::Tensor& t : tensors) {
    checkTensor(name, "tensor", t);
    checkSameDevice(name, c.device, t);
    Op o;
    o.kind = Kind::kAllReduce;
    o.input = flatOut(*c.task, t, /*read=*/true);
    o.reduce = resolveReduce(op, o.input, /*inplace=*/true);
    o.output = o.input;
    o.count = t.numel();
    c.add(std::move(o));
  }
  return submit(std::move(c.task), type, tensors, timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  single("all_reduce", tensors);
  return allreduceTensors("all_reduce", c10d::OpType::ALLREDUCE, tensors, opts.reduceOp,
                          opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return allreduceTensors("all_reduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors,
                          opts.reduceOp, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  at::Tensor& t = single("broadcast", tensors);
  checkRank("broadcast", "root", opts.rootRank, size_);
  Call c = begin("broadcast", t, "tensor");
  Op o;
  o.kind = Kind::kBroadcast;
  o.output = flatOut(*c.task, t, /*read=*/rank_ == opts.rootRank);
  o.input = o.output;
  o.root = static_cast<int>(opts.rootRank);
  o.count = t.numel();
  c.add(std::move(o));
  return submit(std::move(c.task), c10d::OpType::BROADCAST, tensors, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  at::Tensor& t = single("reduce", tensors);
  checkRank("reduce", "root", opts.rootRank, size_);
  Call c = begin("reduce", t, "tensor");
  Op o;
  o.kind = Kind::kReduce;
  o.root = static_cast<int>(opts.rootRank);
  o.input = flatIn(t);
  o.reduce = resolveReduce(opts.reduceOp, o.input, /*inplace=*/false);
  if (rank_ == o.root) o.output = flatOut(*c.task, t, /*read=*/false);
  o.count = t.numel();
  c.add(std::move(o));
  return submit(std::move(c.task), c10d::OpType::REDUCE, tensors, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  at::Tensor& in = single("all_gather", inputs);
  TORCH_CHECK(outputs.size() == 1, "fccl all_gather: expects one output list, got ",
              outputs.size());
  std::vector<at::Tensor>& list = outputs[0];
  TORCH_CHECK(static_cast<int>(list.size()) == size_, "fccl all_gather: the output list has ",
              list.size(), " tensors, the group ", size_, " ranks");
  Call c = begin("all_gather", in, "input");
  bool even = true;
  for (const at::Tensor& o : list) {
    checkMember("all_gather", c.device, "output", o, in);
    even = even && o.numel() == in.numel();
  }
  TORCH_CHECK(list[rank_].numel() == in.numel(), "fccl all_gather: output ", rank_, " has ",
              list[rank_].numel(), " elements, this rank's input ", in.numel());
  if (even) {
    Op o;
    o.kind = Kind::kAllGather;
    o.input = flatIn(in);
    o.output = at::empty({in.numel() * size_}, in.options());
    o.count = in.numel();
    splitInto(*c.task, o.output, list);
    c.add(std::move(o));
  } else {
    // Uneven sizes: one broadcast per rank (as NCCL's process group does).
    for (int r = 0; r < size_; ++r) {
      Op o;
      o.kind = Kind::kBroadcast;
      o.root = r;
      o.output = flatOut(*c.task, list[r], /*read=*/false);
      o.input = r == rank_ ? flatIn(in) : o.output;
      o.count = list[r].numel();
      c.add(std::move(o));
    }
  }
  return submit(std::move(c.task), c10d::OpType::ALLGATHER, list, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return allgather_into_tensor_coalesced(outs, ins, opts);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* name = "all_gather_into_tensor";
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "fccl ", name, ": ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  Call c = begin(name, inputs[0], "input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkPair(name, c.device, inputs[i], outputs[i]);
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_, "fccl ", name, ": the output has ",
                outputs[i].numel(), " elements, expected ", size_, " x ", inputs[i].numel());
    Op o;
    o.kind = Kind::kAllGather;
    o.input = flatIn(inputs[i]);
    o.output = flatOut(*c.task, outputs[i], /*read=*/false);
    o.count = inputs[i].numel();
    c.add(std::move(o));
  }
  return submit(std::move(c.task),
                inputs.size() == 1 ? c10d::OpType::_ALLGATHER_BASE : c10d::OpType::COALESCED,
                outputs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  at::Tensor& in = single("gather", inputs);
  const int root = static_cast<int>(opts.rootRank);
  checkRank("gather", "root", root, size_);
  Call c = begin("gather", in, "input");
  Op o;
  o.kind = Kind::kGather;
  o.root = root;
  o.input = flatIn(in);
  o.count = in.numel();
  std::vector<at::Tensor> results;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "fccl gather: the root needs one output list of ", size_, " tensors");
    for (const at::Tensor& t : outputs[0]) {
      checkMember("gather", c.device, "output", t, in);
      TORCH_CHECK(t.numel() == in.numel(), "fccl gather: outputs must match the input's ",
                  in.numel(), " elements, got ", t.numel());
    }
    o.output = at::empty({in.numel() * size_}, in.options());
    splitInto(*c.task, o.output, outputs[0]);
    results = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "fccl gather: only the root (rank ", root, ") takes outputs");
  }
  c.add(std::move(o));
  return submit(std::move(c.task), c10d::OpType::GATHER, results, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  at::Tensor& out = single("scatter", outputs);
  const int root = static_cast<int>(opts.rootRank);
  checkRank("scatter", "root", root, size_);
  Call c = begin("scatter", out, "output");
  Op o;
  o.kind = Kind::kScatter;
  o.root = root;
  o.count = out.numel();
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "fccl scatter: the root needs one input list of ", size_, " tensors");
    for (const at::Tensor& t : inputs[0]) {
      checkMember("scatter", c.device, "input", t, out);
      TORCH_CHECK(t.numel() == out.numel(), "fccl scatter: inputs must match the output's ",
                  out.numel(), " elements, got ", t.numel());
    }
    o.input = concatFlat(inputs[0], out.numel() * size_, out.options());
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "fccl scatter: only the root (rank ", root, ") takes inputs");
  }
  o.output = flatOut(*c.task, out, /*read=*/false);
  c.add(std::move(o));
  return submit(std::move(c.task), c10d::OpType::SCATTER, outputs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor& out = single("reduce_scatter", outputs);
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
              "fccl reduce_scatter: expects one input list of ", size_, " tensors");
  Call c = begin("reduce_scatter", out, "output");
  bool even = true;
  int64_t total = 0;
  for (const at::Tensor& t : inputs[0]) {
    checkMember("reduce_scatter", c.device, "input", t, out);
    even = even && t.numel() == out.numel();
    total += t.numel();
  }
  TORCH_CHECK(inputs[0][rank_].numel() == out.numel(), "fccl reduce_scatter: input ", rank_,
              " has ", inputs[0][rank_].numel(), " elements, the output ", out.numel());
  if (even) {
    Op o;
    o.kind = Kind::kReduceScatter;
    o.input = concatFlat(inputs[0], total, out.options());
    o.reduce = resolveReduce(opts.reduceOp, o.input, /*inplace=*/true);
    o.output = flatOut(*c.task, out, /*read=*/false);
    o.count = out.numel();
    c.add(std::move(o));
  } else {
    // Uneven sizes: one reduce per rank.
    for (int r = 0; r < size_; ++r) {
      Op o;
      o.kind = Kind::kReduce;
      o.root = r;
      o.input = flatIn(inputs[0][r]);
      o.reduce = resolveReduce(opts.reduceOp, o.input, /*inplace=*/false);
      if (r == rank_) o.output = flatOut(*c.task, out, /*read=*/false);
      o.count = inputs[0][r].numel();
      c.add(std::move(o));
    }
  }
  return submit(std::move(c.task), c10d::OpType::REDUCE_SCATTER, outputs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{output}, ins{input};
  return reduce_scatter_tensor_coalesced(outs, ins, opts);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor";
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "fccl ", name, ": ",
              outputs.size(), " outputs for ", inputs.size(), " inputs");
  Call c = begin(name, inputs[0], "input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkPair(name, c.device, inputs[i], outputs[i]);
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_, "fccl ", name, ": the input has ",
                inputs[i].numel(), " elements, expected ", size_, " x ", outputs[i].numel());
    Op o;
    o.kind = Kind::kReduceScatter;
    o.input = flatIn(inputs[i]);
    o.reduce = resolveReduce(opts.reduceOp, o.input, /*inplace=*/false);
    o.output = flatOut(*c.task, outputs[i], /*read=*/false);
    o.count = outputs[i].numel();
    c.add(std::move(o));
  }
#if FLAGOS_TORCH_MINOR <= 11
  const c10d::OpType coalesced = c10d::OpType::COALESCED;  // 2.11 has no specific type
#else
  const c10d::OpType coalesced = c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED;
#endif
  return submit(std::move(c.task),
                inputs.size() == 1 ? c10d::OpType::_REDUCE_SCATTER_BASE : coalesced, outputs,
                opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& output_split_sizes,
                                                          std::vector<int64_t>& input_split_sizes,
                                                          const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all_single";
  Call c = begin(name, input, "input");
  checkPair(name, c.device, input, output);
  // Split sizes count rows of dim 0; turn them into element counts.
  auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& splits, const char* what) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row = rows == 0 ? 0 : t.numel() / rows;
    std::vector<int64_t> out(size_);
    if (splits.empty()) {
      TORCH_CHECK(rows % size_ == 0, "fccl ", name, ": the ", what, "'s ", rows,
                  " rows do not split evenly over ", size_, " ranks");
      std::fill(out.begin(), out.end(), rows / size_ * row);
    } else {
      TORCH_CHECK(static_cast<int>(splits.size()) == size_, "fccl ", name, ": ", splits.size(), " ",
                  what, " split sizes for ", size_, " ranks");
      TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows, "fccl ", name,
                  ": the ", what, " split sizes do not add up to its ", rows, " rows");
      for (int r = 0; r < size_; ++r) out[r] = splits[r] * row;
    }
    return out;
  };
  Op o;
  o.kind = Kind::kAllToAll;
  o.send_counts = counts(input, input_split_sizes, "input");
  o.recv_counts = counts(output, output_split_sizes, "output");
  o.input = flatIn(input);
  o.output = flatOut(*c.task, output, /*read=*/false);
  o.count = -1;
  c.add(std::move(o));
  std::vector<at::Tensor> outs{output};
  return submit(std::move(c.task), c10d::OpType::ALLTOALL_BASE, outs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all";
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
              "fccl ", name, ": expects ", size_, " inputs and outputs, got ", inputs.size(),
              " and ", outputs.size());
  Call c = begin(name, inputs[0], "input");
  Op o;
  o.kind = Kind::kAllToAll;
  int64_t in_total = 0, out_total = 0;
  for (int r = 0; r < size_; ++r) {
    checkMember(name, c.device, "input", inputs[r], inputs[0]);
    checkMember(name, c.device, "output", outputs[r], inputs[0]);
    o.send_counts.push_back(inputs[r].numel());
    o.recv_counts.push_back(outputs[r].numel());
    in_total += inputs[r].numel();
    out_total += outputs[r].numel();
  }
  o.input = concatFlat(inputs, in_total, inputs[0].options());
  o.output = at::empty({out_total}, inputs[0].options());
  o.count = -1;
  splitInto(*c.task, o.output, outputs);
  c.add(std::move(o));
  return submit(std::move(c.task), c10d::OpType::ALLTOALL, outputs, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::barrier(const c10d::BarrierOptions& opts) {
  // The barrier tensor's device does not reach backends (c10d::barrier
  // passes only device_ids); guess as NCCL's process group does: the bound
  // device, the given ids, the device of the last operation, the current one.
  c10::DeviceIndex device = -1;
  const std::optional<at::Device> bound = getBoundDeviceId();
  if (opts.device && opts.device->type() == kFlagos && opts.device->has_index()) {
    device = opts.device->index();
  } else if (bound && bound->type() == kFlagos) {
    device = bound->index();
  } else if (!opts.device_ids.empty()) {
    device = static_cast<c10::DeviceIndex>(opts.device_ids[0]);
  } else {
    std::lock_guard<std::mutex> lock(mutex_);
    device = last_device_;
  }
  if (device < 0) device = flagos::currentDevice();
  c10::DeviceGuard guard(c10::Device(kFlagos, device));
  auto task = newTask("barrier", device);
  Op o;
  o.kind = Kind::kBarrier;
  o.input = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(kFlagos, device));
  o.output = o.input;
  task->ops.push_back(std::move(o));
  return submit(std::move(task), c10d::OpType::BARRIER, {}, opts.timeout);
}

c10::intrusive_ptr<c10d::Work> FcclBackend::send(std::vector<at::Tensor>& tensors, int dst_rank,
                                                 int tag) {
  at::Tensor& t = single("send", tensors);
  checkRank("send", "destination", dst_rank, size_);
  Call c = begin("send", t, "tensor");
  Op o;
  o.kind = Kind::kSend;
  o.peer = dst_rank;
  o.tag = tag;
  o.input = flatIn(t);
  o.count = t.numel();
  c.add(std::move(o));
  return submit(std::move(c.task), c10d::OpType::SEND, {}, std::chrono::milliseconds(0));
}

c10::intrusive_ptr<c10d::Work> FcclBackend::recv(std::vector<at::Tensor>& tensors, int src_rank,
                                                 int tag) {
  at::Tensor& t = single("recv", tensors);
  checkRank("recv", "source", src_rank, size_);
  Call c = begin("recv", t, "tensor");
  Op o;
  o.kind = Kind::kRecv;
  o.peer = src_rank;
  o.tag = tag;
  o.output = flatOut(*c.task, t, /*read=*/false);
  o.count = t.numel();
  c.add(std::move(o));
  return submit(std::move(c.task), c10d::OpType::RECV, tensors, std::chrono::milliseconds(0));
}

}  // namespace flagos::comm
