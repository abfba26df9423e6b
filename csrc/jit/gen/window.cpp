// Window operators (catalog families pooling/convolution): im2col/col2im,
// max/avg/adaptive pooling and their backwards, nearest and bilinear
// upsampling and their backwards: recipes, keys and launch meta (the
// kernel bodies: window_body.cpp).
//
// Note [Window kernels]
// ~~~~~~~~~~~~~~~~~~~~~
// * Every operand is one of three roles: an *image* (N?, C, IH, IW), a
//   *grid* of windows (N?, C, OH, OW: pooled values, indices, grad_output)
//   or *columns* (N?, C*kh*kw, OH*OW: im2col's output, col2im's input).
//   pack() reads N, C and the sizes from the operands (the bridge inferred
//   them, ceil_mode included), the window from the scalars, and passes
//   each operand as four strides (n, c, h, w): any layout, channels_last
//   included, a missing batch dim has stride 0.
// * One work item per output element, no atomics: forward ops walk their
//   window; backward ops and col2im are written in gather form (each
//   image element sums, in torch CPU's order, the window outputs that
//   reach it; max-pool backwards add grad_output where the saved index is
//   this element, so an index that is not in its window, which only a
//   hand-made indices tensor has, is ignored where torch CPU would scatter
//   it).
// * Values are computed as torch CPU does: float for float32 and the 16-bit
//   types, double for float64; a NaN is the max of a window (the last NaN
//   wins the index); avg_pool2d's divisor follows count_include_pad and
//   divisor_override; bilinear upsampling computes scales, source indices
//   and weights as torch CPU's UpSample.h does (align_corners, scales_h/w
//   present or not), its backward adds each output's four terms in torch
//   CPU's order. Only generic kernels (no shape baked in).
#include <algorithm>
#include <array>
#include <map>

#include "jit/gen/emit.h"

namespace flagos::kernels {
namespace {

enum Role : uint8_t { Image, Grid, Cols };

struct OpRow {
  WindowOp op;
  int num_scalars;          // after {len: N} expansion
  std::vector<Role> roles;  // outputs, then inputs
};

const std::map<std::string, OpRow>& windowOps() {
  static const std::map<std::string, OpRow> kOps = {
      {"im2col", {WindowOp::Im2col, 8, {Cols, Image}}},
      {"col2im", {WindowOp::Col2im, 10, {Image, Cols}}},
      {"max_pool2d", {WindowOp::MaxPool, 9, {Grid, Grid, Image}}},
      {"max_pool2d_backward", {WindowOp::MaxPoolBackward, 9, {Image, Grid, Image, Grid}}},
      {"avg_pool2d", {WindowOp::AvgPool, 9, {Grid, Image}}},
      {"avg_pool2d_backward", {WindowOp::AvgPoolBackward, 9, {Image, Grid, Image}}},
      {"adaptive_avg_pool2d", {WindowOp::AdaptiveAvgPool, 2, {Grid, Image}}},
      {"adaptive_avg_pool2d_backward",
       {WindowOp::AdaptiveAvgPoolBackward, 0, {Image, Grid, Image}}},
      {"adaptive_max_pool2d", {WindowOp::AdaptiveMaxPool, 2, {Grid, Grid, Image}}},
      {"adaptive_max_pool2d_backward",
       {WindowOp::AdaptiveMaxPoolBackward, 0, {Image, Grid, Image, Grid}}},
      {"upsample_nearest2d", {WindowOp::UpsampleNearest, 4, {Grid, Image}}},
      {"upsample_nearest2d_backward", {WindowOp::UpsampleNearestBackward, 8, {Image, Grid}}},
      {"upsample_bilinear2d", {WindowOp::UpsampleBilinear, 5, {Grid, Image}}},
      {"upsample_bilinear2d_backward", {WindowOp::UpsampleBilinearBackward, 9, {Image, Grid}}},
  };
  return kOps;
}

const OpRow& rowOf(const Recipe& r) {
  return windowOps().at(r.id);
}

// Operands holding int64 indices (max pools).
bool isIndices(WindowOp op, int k) {
  switch (op) {
    case WindowOp::MaxPool:
    case WindowOp::AdaptiveMaxPool:
      return k == 1;
    case WindowOp::MaxPoolBackward:
    case WindowOp::AdaptiveMaxPoolBackward:
      return k == 3;
    default:
      return false;
  }
}
bool reject(std::string* why_not, const std::string& why) {
  if (why_not) *why_not = why;
  return false;
}

// What the kernel reads from flagos_meta (Note [Window kernels]).
struct Geometry {
  int64_t n = 1, c = 1, ih = 0, iw = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t cip = 0, div = 0;  // avg_pool2d: count_include_pad, divisor_override (0: none)
  std::vector<std::array<int64_t, 4>> st;
  int64_t work = 0;
};

// The geometry of @p call, or false with *why when the operands do not
// have the shapes the operator implies.
bool geometryOf(const Recipe& recipe, const Call& call, Geometry* g, std::string* why) {
  const OpRow& row = rowOf(recipe);
  const std::string& id = recipe.id;
  const int nops = call.num_outputs + call.num_inputs;
  auto operand = [&](int k) -> const flagosTensor& {
    return k < call.num_outputs ? call.outputs[k] : call.inputs[k - call.num_outputs];
  };
  auto s = [&](int k) { return call.scalars[k].dtype == 0 ? int64_t{0} : call.scalars[k].i; };
  switch (row.op) {
    case WindowOp::Im2col:
      g->kh = s(0), g->kw = s(1), g->dh = s(2), g->dw = s(3);
      g->ph = s(4), g->pw = s(5), g->sh = s(6), g->sw = s(7);
      break;
    case WindowOp::Col2im:
      g->kh = s(2), g->kw = s(3), g->dh = s(4), g->dw = s(5);
      g->ph = s(6), g->pw = s(7), g->sh = s(8), g->sw = s(9);
      break;
    case WindowOp::MaxPool:
    case WindowOp::MaxPoolBackward:
    case WindowOp::AvgPool:
    case WindowOp::AvgPoolBackward: {
      const bool max = row.op == WindowOp::MaxPool || row.op == WindowOp::MaxPoolBackward;
      g->kh = s(0), g->kw = s(1), g->sh = s(2), g->sw = s(3), g->ph = s(4), g->pw = s(5);
      // stride=[] arrives as zeros: torch then strides by the kernel size.
      if (g->sh == 0 && g->sw == 0) g->sh = g->kh, g->sw = g->kw;
      if (max) {
        g->dh = s(6), g->dw = s(7);
      } else {
        g->cip = s(7);
        g->div = s(8);
        if (call.scalars[8].dtype != 0 && g->div == 0)
          return reject(why, id + ": divisor_override is 0");
      }
      break;
    }
    default:
      break;
  }
  if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->ph < 0 ||
      g->pw < 0)
    return reject(why, id + ": kernel size, stride or dilation below 1, or negative padding");

  // Sizes from the first image and the first grid/columns operand.
  int batched = -1;
  for (int k = 0; k < nops; ++k) {
    const flagosTensor& t = operand(k);
    const int want = row.roles[k] == Cols ? 2 : 3;
    if (t.ndim != want && t.ndim != want + 1)
      return reject(
          why, id + ": operand " + std::to_string(k) + " has " + std::to_string(t.ndim) + " dims");
    const int b = t.ndim == want + 1;
    if (batched >= 0 && b != batched) return reject(why, id + ": batched and unbatched operands");
    batched = b;
  }
  int image = -1, other = -1;
  for (int k = 0; k < nops; ++k) {
    if (row.roles[k] == Image && image < 0) image = k;
    if (row.roles[k] != Image && other < 0) other = k;
  }
  const flagosTensor& im = operand(image);
  const int d0 = im.ndim - 3;
  g->n = batched ? im.shape[0] : 1;
  g->c = im.shape[d0];
  g->ih = im.shape[d0 + 1];
  g->iw = im.shape[d0 + 2];
  const flagosTensor& ot = operand(other);
  if (row.roles[other] == Grid) {
    g->oh = ot.shape[ot.ndim - 2];
    g->ow = ot.shape[ot.ndim - 1];
  } else {
    g->oh = (g->ih + 2 * g->ph - (g->dh * (g->kh - 1) + 1)) / g->sh + 1;
    g->ow = (g->iw + 2 * g->pw - (g->dw * (g->kw - 1) + 1)) / g->sw + 1;
    if (g->oh < 1 || g->ow < 1) return reject(why, id + ": no complete window");
  }
  for (int k = 0; k < nops; ++k) {
    const flagosTensor& t = operand(k);
    const int b = batched;
    std::vector<int64_t> want;
    if (b) want.push_back(g->n);
    std::array<int64_t, 4> st{};
    if (b) st[0] = t.strides[0];
    switch (row.roles[k]) {
      case Image:
        want.insert(want.end(), {g->c, g->ih, g->iw});
        break;
      case Grid:
        want.insert(want.end(), {g->c, g->oh, g->ow});
        break;
      case Cols:
        want.insert(want.end(), {g->c * g->kh * g->kw, g->oh * g->ow});
        break;
    }
    for (int d = b; d < t.ndim; ++d) st[d - b + 1] = t.strides[d];
    if (!std::equal(want.begin(), want.end(), t.shape, t.shape + t.ndim))
      return reject(why, id + ": operand " + std::to_string(k) + " does not have the shape " +
                             "the window implies");
    g->st.push_back(st);
  }
  if (row.op == WindowOp::Im2col) {
    g->work = g->n * g->c * g->kh * g->kw * g->oh * g->ow;
  } else if (windowGathers(row.op)) {
    g->work = g->n * g->c * g->ih * g->iw;
  } else {
    g->work = g->n * g->c * g->oh * g->ow;
  }
  return true;
}

}  // namespace

bool windowGathers(WindowOp op) {
  return op == WindowOp::Col2im || op == WindowOp::MaxPoolBackward ||
         op == WindowOp::AvgPoolBackward || op == WindowOp::AdaptiveAvgPoolBackward ||
         op == WindowOp::AdaptiveMaxPoolBackward || op == WindowOp::UpsampleNearestBackward ||
         op == WindowOp::UpsampleBilinearBackward;
}

bool makeWindowRecipe(const OpInfo& op, Recipe* r, std::string* why_not) {
  auto it = windowOps().find(op.id);
  if (it == windowOps().end())
    return reject(why_not, op.family + " operator '" + op.id + "' has no generator recipe");
  if ((int)it->second.roles.size() != op.num_outputs + (int)op.inputs.size())
    return reject(why_not, op.id + ": catalog row has unexpected operands");
  r->kind = RecipeKind::Window;
  r->window_op = it->second.op;
  return true;
}

bool windowFloatScalar(const Recipe& r, int k) {
  // scales_h, scales_w
  return (r.window_op == WindowOp::UpsampleNearest && k >= 2) ||
         (r.window_op == WindowOp::UpsampleNearestBackward && k >= 6) ||
         (r.window_op == WindowOp::UpsampleBilinear && k >= 3) ||
         (r.window_op == WindowOp::UpsampleBilinearBackward && k >= 7);
}

bool windowKeyFor(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
                  KernelKey* key, std::string* why_not) {
  const std::string& id = recipe.id;
  const OpRow& row = rowOf(recipe);
  if (variant == Variant::Specialized) return reject(why_not, id + ": generic kernel only");
  if (call.num_outputs != recipe.num_outputs || call.num_inputs != (int)recipe.inputs.size() ||
      call.num_scalars != row.num_scalars)
    return reject(why_not, id + ": operand counts differ from the catalog's");
  const int nops = call.num_outputs + call.num_inputs;
  auto operand = [&](int k) -> const flagosTensor& {
    return k < call.num_outputs ? call.outputs[k] : call.inputs[k - call.num_outputs];
  };
  const flagosDtype_t dt = call.outputs[0].dtype;
  if (dt != FLAGOS_DTYPE_FLOAT32 && dt != FLAGOS_DTYPE_FLOAT64 && dt != FLAGOS_DTYPE_FLOAT16 &&
      dt != FLAGOS_DTYPE_BFLOAT16)
    return reject(why_not, id + std::string(": dtype ") + dtypeName(dt));
  if (dt == FLAGOS_DTYPE_FLOAT64 && !target.fp64)
    return reject(why_not, id + ": float64 on a device without fp64");
  for (int k = 0; k < nops; ++k) {
    const flagosTensor& t = operand(k);
    const flagosDtype_t want = isIndices(row.op, k) ? FLAGOS_DTYPE_INT64 : dt;
    if (t.dtype != want)
      return reject(why_not, id + ": operand " + std::to_string(k) + " is " + dtypeName(t.dtype) +
                                 ", expected " + dtypeName(want));
  }
  Geometry g;
  if (!geometryOf(recipe, call, &g, why_not)) return false;
  for (int k = 0; k < nops; ++k)
    if (operand(k).data == nullptr && g.work != 0)
      return reject(why_not, id + ": an operand is None");

  genericKey(recipe, call, variant, target, key);
  return true;
}

uint64_t packWindow(const Recipe& recipe, const Call& call, const Target& target,
                    std::vector<int64_t>* meta) {
  Geometry g;
  std::string why;
  if (!geometryOf(recipe, call, &g, &why)) return 0;  // keyFor accepted it
  meta->insert(meta->end(), {g.work, g.n, g.c, g.ih, g.iw, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.ph,
                             g.pw, g.dh, g.dw, g.cip, g.div});
  for (const auto& st : g.st) meta->insert(meta->end(), st.begin(), st.end());
  return static_cast<uint64_t>(g.work);
}

std::vector<MetaField> windowMetaLayout(int num_operands) {
  std::vector<MetaField> f;
  for (const char* name : {"work", "n", "c", "ih", "iw", "oh", "ow", "kh", "kw", "sh", "sw", "ph",
                           "pw", "dh", "dw", "cip", "div"})
    f.push_back({name, 1});
  f.push_back({"st[" + std::to_string(num_operands) + "]", 4});
  return f;
}

}  // namespace flagos::kernels
