// oneDNN convolution primitives (conv_dnnl.h). Compiled to stubs that return
// false when the plugin is built without oneDNN.
#include "conv_dnnl.h"

#ifdef FLAGOS_HOST_DNNL
#include <map>
#include <mutex>
#include <vector>

#include <dnnl.hpp>

namespace flagos_host::kernels {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// The engine, and each thread's oneDNN stream, are leaked on purpose: the
// plugin's stream workers outlive static destructors at process exit, and a
// oneDNN object torn down under them (or after the engine) aborts the exit.
dnnl::engine& eng() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

// Descriptors of one convolution shape, user (plain) and primitive-chosen.
struct Geo {
  memory::dims src, wei, dst, bias, strides, dil, pl, pr;
  tag wtag;
  explicit Geo(const ConvShape& s) {
    src = {s.N, s.C, s.H, s.W};
    dst = {s.N, s.OC, s.OH, s.OW};
    bias = {s.OC};
    if (s.G > 1) {
      wei = {s.G, s.OC / s.G, s.C / s.G, s.KH, s.KW};
      wtag = tag::goihw;
    } else {
      wei = {s.OC, s.C, s.KH, s.KW};
      wtag = tag::oihw;
    }
    strides = {s.sh, s.sw};
    dil = {s.dh - 1, s.dw - 1};
    pl = {s.ph, s.pw};
    pr = {(s.OH - 1) * s.sh + (s.KH - 1) * s.dh + 1 - s.H - s.ph,
          (s.OW - 1) * s.sw + (s.KW - 1) * s.dw + 1 - s.W - s.pw};
  }
  memory::desc any(const memory::dims& d) const { return memory::desc(d, dt::f32, tag::any); }
};

struct Prims {
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
  dnnl::convolution_backward_data bwd_data;
  dnnl::convolution_backward_weights::primitive_desc bwd_w_pd;
  dnnl::convolution_backward_weights bwd_w;
  bool has_bwd_data = false, has_bwd_w = false;
};

std::vector<int64_t> key(const ConvShape& s, bool bias) {
  return {s.N,  s.C,  s.H,  s.W,  s.OC, s.OH, s.OW, s.KH, s.KW,
          s.sh, s.sw, s.ph, s.pw, s.dh, s.dw, s.G,  bias};
}

std::mutex cache_mu;
std::map<std::vector<int64_t>, Prims>& cache() {
  static auto* c = new std::map<std::vector<int64_t>, Prims>();  // leaked: no exit-time teardown
  return *c;
}

// The cached primitives of a shape (forward always; backwards on demand).
Prims& prims(const ConvShape& s, bool bias, bool want_data, bool want_w) {
  std::lock_guard<std::mutex> lock(cache_mu);
  Prims& p = cache()[key(s, bias)];
  Geo g(s);
  if (!p.fwd) {
    const memory::desc bmd = bias ? memory::desc(g.bias, dt::f32, tag::x) : memory::desc();
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, g.any(g.src),
        g.any(g.wei), bmd, g.any(g.dst), g.strides, g.dil, g.pl, g.pr);
    p.fwd_pd = dnnl::convolution_forward::primitive_desc(d, eng());
    p.fwd = dnnl::convolution_forward(p.fwd_pd);
  }
  if (want_data && !p.has_bwd_data) {
    dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, g.any(g.src),
                                            g.any(g.wei), g.any(g.dst), g.strides, g.dil, g.pl,
                                            g.pr);
    p.bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(d, eng(), p.fwd_pd);
    p.bwd_data = dnnl::convolution_backward_data(p.bwd_data_pd);
    p.has_bwd_data = true;
  }
  if (want_w && !p.has_bwd_w) {
    const memory::desc bmd = bias ? memory::desc(g.bias, dt::f32, tag::x) : memory::desc();
    dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, g.any(g.src),
                                               g.any(g.wei), bmd, g.any(g.dst), g.strides, g.dil,
                                               g.pl, g.pr);
    p.bwd_w_pd = dnnl::convolution_backward_weights::primitive_desc(d, eng(), p.fwd_pd);
    p.bwd_w = dnnl::convolution_backward_weights(p.bwd_w_pd);
    p.has_bwd_w = true;
  }
  return p;
}

dnnl::stream& strm() {
  thread_local dnnl::stream* s = new dnnl::stream(eng());
  return *s;
}

// `user` in the layout `want` (a reorder into a scratch memory when needed).
memory in(const memory& user, const memory::desc& want) {
  if (user.get_desc() == want) return user;
  memory m(want, eng());
  dnnl::reorder(user, m).execute(strm(), const_cast<memory&>(user), m);
  return m;
}

// A memory of layout `want` to write, and the copy-back into `user` after.
memory outMem(const memory& user, const memory::desc& want) {
  return user.get_desc() == want ? user : memory(want, eng());
}
void finish(memory& got, const memory& user) {
  if (got.get(true) != user.get(true))
    dnnl::reorder(got, user).execute(strm(), got, const_cast<memory&>(user));
}

memory plain(const memory::dims& d, tag t, const void* p) {
  return memory(memory::desc(d, dt::f32, t), eng(), const_cast<void*>(p));
}

}  // namespace

bool dnnlConvForward(const ConvShape& s, const float* x, const float* w, const float* b, float* y) {
  try {
    Prims& p = prims(s, b != nullptr, false, false);
    Geo g(s);
    memory src = in(plain(g.src, tag::nchw, x), p.fwd_pd.src_desc());
    memory wei = in(plain(g.wei, g.wtag, w), p.fwd_pd.weights_desc());
    memory udst = plain(g.dst, tag::nchw, y);
    memory dst = outMem(udst, p.fwd_pd.dst_desc());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    if (b) args.emplace(DNNL_ARG_BIAS, plain(g.bias, tag::x, b));
    p.fwd.execute(strm(), args);
    finish(dst, udst);
    strm().wait();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool dnnlConvBackwardData(const ConvShape& s, const float* gy, const float* w, float* gx) {
  try {
    Prims& p = prims(s, false, true, false);
    Geo g(s);
    memory ddst = in(plain(g.dst, tag::nchw, gy), p.bwd_data_pd.diff_dst_desc());
    memory wei = in(plain(g.wei, g.wtag, w), p.bwd_data_pd.weights_desc());
    memory usrc = plain(g.src, tag::nchw, gx);
    memory dsrc = outMem(usrc, p.bwd_data_pd.diff_src_desc());
    p.bwd_data.execute(
        strm(), {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DIFF_SRC, dsrc}});
    finish(dsrc, usrc);
    strm().wait();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool dnnlConvBackwardWeights(const ConvShape& s, const float* x, const float* gy, float* gw,
                             float* gb) {
  try {
    Prims& p = prims(s, gb != nullptr, false, true);
    Geo g(s);
    memory src = in(plain(g.src, tag::nchw, x), p.bwd_w_pd.src_desc());
    memory ddst = in(plain(g.dst, tag::nchw, gy), p.bwd_w_pd.diff_dst_desc());
    memory uw = plain(g.wei, g.wtag, gw);
    memory dw = outMem(uw, p.bwd_w_pd.diff_weights_desc());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
    if (gb) args.emplace(DNNL_ARG_DIFF_BIAS, plain(g.bias, tag::x, gb));
    p.bwd_w.execute(strm(), args);
    finish(dw, uw);
    strm().wait();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace flagos_host::kernels

#else  // !FLAGOS_HOST_DNNL

namespace flagos_host::kernels {
bool dnnlConvForward(const ConvShape&, const float*, const float*, const float*, float*) {
  return false;
}
bool dnnlConvBackwardData(const ConvShape&, const float*, const float*, float*) {
  return false;
}
bool dnnlConvBackwardWeights(const ConvShape&, const float*, const float*, float*, float*) {
  return false;
}
}  // namespace flagos_host::kernels

#endif
