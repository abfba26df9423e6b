// The kernel bodies of the window operators (Note [Window kernels],
// window.cpp): one work item per output element, forward ops over their
// window, backward ops and col2im in gather form.
#include "jit/gen/emit.h"
#include "jit/gen/source_template.h"

namespace flagos::kernels {
namespace {

// Note [Source templates]: ${L} is the dialect's int64 type, ${T} the
// compute type; loads and stores arrive spelled by the dialect.

// The element's coordinates: (n, c, h, w) of an image element for the
// gather-form ops, (n, c, [i, j,] y, x) of an output element otherwise.
constexpr const char* kImageCoordinates = R"(  ${L} r = gid;
  const ${L} w = r % meta.iw; r /= meta.iw;
  const ${L} h = r % meta.ih; r /= meta.ih;
  const ${L} c = r % meta.c, n = r / meta.c;
)";
constexpr const char* kOutputCoordinates = R"(  ${L} r = gid;
  const ${L} x = r % meta.ow; r /= meta.ow;
  const ${L} y = r % meta.oh; r /= meta.oh;
${kernel_position}  const ${L} c = r % meta.c, n = r / meta.c;
)";
constexpr const char* kKernelPosition = R"(  const ${L} j = r % meta.kw; r /= meta.kw;
  const ${L} i = r % meta.kh; r /= meta.kh;
)";
// Adaptive windows: [floor(a * in / out), ceil((a + 1) * in / out)).
constexpr const char* kAdaptiveRange =
    R"(  const ${L} ${lo} = (${a} / ${out}) * ${in} + ((${a} % ${out}) * ${in}) / ${out};
  const ${L} ${hi} = 1 + ((${a} + 1) * ${in} - 1) / ${out};
)";
// The outputs whose adaptive window holds (h, w): [y0, y1) x [x0, x1).
constexpr const char* kAdaptiveSources =
    R"(  const ${L} y0 = h * meta.oh / meta.ih, x0 = w * meta.ow / meta.iw;
  ${L} y1 = ((h + 1) * meta.oh - 1) / meta.ih + 1, x1 = ((w + 1) * meta.ow - 1) / meta.iw + 1;
)";

constexpr const char* kIm2col = R"(  const ${L} h = y * meta.sh - meta.ph + i * meta.dh;
  const ${L} w = x * meta.sw - meta.pw + j * meta.dw;
  const ${L} o0 = n * ${st0} + ((c * meta.kh + i) * meta.kw + j) * ${st1} + (y * meta.ow + x) * ${st2};
  ${store}
)";
// torch adds columns in (i, j) order; one (y, x) per (i, j) at most.
constexpr const char* kCol2im = R"(  ${T} acc = (${T})0;
  for (${L} i = 0; i < meta.kh; ++i) {
    const ${L} hh = h + meta.ph - i * meta.dh;
    if (hh < 0) break;
    if (hh % meta.sh != 0 || hh / meta.sh >= meta.oh) continue;
    for (${L} j = 0; j < meta.kw; ++j) {
      const ${L} ww = w + meta.pw - j * meta.dw;
      if (ww < 0) break;
      if (ww % meta.sw != 0 || ww / meta.sw >= meta.ow) continue;
      acc += ${column};
    }
  }
  ${store}
)";

// Max pools: the window [h0, h1) x [w0, w1) by (dh, dw), then its max
// (NaN wins) and the max's index in the image.
constexpr const char* kMaxPoolWindow =
    R"(  ${L} h0 = y * meta.sh - meta.ph, w0 = x * meta.sw - meta.pw;
  ${L} h1 = h0 + (meta.kh - 1) * meta.dh + 1, w1 = w0 + (meta.kw - 1) * meta.dw + 1;
  if (h1 > meta.ih) h1 = meta.ih;
  if (w1 > meta.iw) w1 = meta.iw;
  while (h0 < 0) h0 += meta.dh;
  while (w0 < 0) w0 += meta.dw;
  const ${L} dh = meta.dh, dw = meta.dw;
)";
constexpr const char* kAdaptiveMaxPoolWindow = R"(${h_range}${w_range}  const ${L} dh = 1, dw = 1;
)";
constexpr const char* kMaxOverWindow = R"(${window}  ${T} best = -INFINITY;
  ${L} arg = h0 * meta.iw + w0;
  for (${L} h = h0; h < h1; h += dh)
    for (${L} w = w0; w < w1; w += dw) {
      const ${T} v = ${x};
      if (v > best || isnan(v)) { best = v; arg = h * meta.iw + w; }
    }
  ${store_best}
  ${store_arg}
)";
// The outputs whose max-pool window holds (h, w).
constexpr const char* kMaxPoolSources =
    R"(  const ${L} qh = h + meta.ph - (meta.kh - 1) * meta.dh, qw = w + meta.pw - (meta.kw - 1) * meta.dw;
  const ${L} y0 = qh <= 0 ? 0 : (qh + meta.sh - 1) / meta.sh;
  const ${L} x0 = qw <= 0 ? 0 : (qw + meta.sw - 1) / meta.sw;
  ${L} y1 = (h + meta.ph) / meta.sh + 1, x1 = (w + meta.pw) / meta.sw + 1;
)";
// grad_output where the saved index is this element, in (y, x) order.
constexpr const char* kMaxPoolBackward = R"(${sources}  if (y1 > meta.oh) y1 = meta.oh;
  if (x1 > meta.ow) x1 = meta.ow;
  const ${L} me = h * meta.iw + w;
  ${T} acc = (${T})0;
  for (${L} y = y0; y < y1; ++y)
    for (${L} x = x0; x < x1; ++x)
      if (${index} == me) acc += ${g};
  ${store}
)";

// The divisor: divisor_override, else the window with its padding
// (count_include_pad), else the window inside the image.
constexpr const char* kAvgPool = R"(  ${L} h0 = y * meta.sh - meta.ph, w0 = x * meta.sw - meta.pw;
  ${L} h1 = h0 + meta.kh, w1 = w0 + meta.kw;
  if (h1 > meta.ih + meta.ph) h1 = meta.ih + meta.ph;
  if (w1 > meta.iw + meta.pw) w1 = meta.iw + meta.pw;
  const ${L} pool = (h1 - h0) * (w1 - w0);
  if (h0 < 0) h0 = 0;
  if (w0 < 0) w0 = 0;
  if (h1 > meta.ih) h1 = meta.ih;
  if (w1 > meta.iw) w1 = meta.iw;
  if (h0 >= h1 || w0 >= w1) { ${store_zero} ${skip}; }
  ${T} sum = (${T})0;
  for (${L} h = h0; h < h1; ++h)
    for (${L} w = w0; w < w1; ++w) sum += ${x};
  const ${L} divisor = meta.div ? meta.div : meta.cip ? pool : (h1 - h0) * (w1 - w0);
  ${store}
)";
// Windows [y * sh - ph, +kh) that hold h; torch adds in (y, x) order.
constexpr const char* kAvgPoolBackward =
    R"(  const ${L} qh = h + meta.ph - meta.kh, qw = w + meta.pw - meta.kw;
  const ${L} y0 = qh < 0 ? 0 : qh / meta.sh + 1;
  const ${L} x0 = qw < 0 ? 0 : qw / meta.sw + 1;
  ${L} y1 = (h + meta.ph) / meta.sh + 1, x1 = (w + meta.pw) / meta.sw + 1;
  if (y1 > meta.oh) y1 = meta.oh;
  if (x1 > meta.ow) x1 = meta.ow;
  ${T} acc = (${T})0;
  for (${L} y = y0; y < y1; ++y) {
    ${L} h0 = y * meta.sh - meta.ph, h1 = h0 + meta.kh;
    if (h1 > meta.ih + meta.ph) h1 = meta.ih + meta.ph;
    for (${L} x = x0; x < x1; ++x) {
      ${L} w0 = x * meta.sw - meta.pw, w1 = w0 + meta.kw;
      if (w1 > meta.iw + meta.pw) w1 = meta.iw + meta.pw;
      ${L} divisor = (h1 - h0) * (w1 - w0);
      if (meta.div) divisor = meta.div;
      else if (!meta.cip) divisor = ((h1 < meta.ih ? h1 : meta.ih) - (h0 > 0 ? h0 : 0)) * ((w1 < meta.iw ? w1 : meta.iw) - (w0 > 0 ? w0 : 0));
      acc += ${g} / (${T})divisor;
    }
  }
  ${store}
)";
constexpr const char* kAdaptiveAvgPool = R"(${h_range}${w_range}  ${T} sum = (${T})0;
  for (${L} h = h0; h < h1; ++h)
    for (${L} w = w0; w < w1; ++w) sum += ${x};
  ${store}
)";
constexpr const char* kAdaptiveAvgPoolBackward = R"(${sources}  if (y1 > meta.oh) y1 = meta.oh;
  if (x1 > meta.ow) x1 = meta.ow;
  ${T} acc = (${T})0;
  for (${L} y = y0; y < y1; ++y) {
${h_range}    for (${L} x = x0; x < x1; ++x) {
${w_range}      acc += ${g} / (${T})(h1 - h0) / (${T})(w1 - w0);
    }
  }
  ${store}
)";

// torch's nearest_idx: exact for equal and doubled sizes, else
// min(floor(dst * scale), in - 1) with a float scale (1 / scales_h when
// given and > 0, else in / out).
constexpr const char* kNearestScale =
    R"(  const float ${name} = ${given} > 0 ? (float)(${one}${given}) : (float)${in} / (float)${out};
)";
constexpr const char* kNearest = R"(${scales}  ${store}
)";
// Gather form: the outputs whose source is (h, w) are a range (the map is
// monotonic); start from an estimate, settle on its first element, and add
// in torch's (y, x) order.
constexpr const char* kNearestFirst = R"(  ${L} ${name} = 0;
  { const float e = ${f} > 0 ? (float)${v} / ${f} : (float)${out};
    ${name} = e >= (float)${out} ? ${out} : (${L})e; }
  while (${name} > 0 && ${source_before} >= ${v}) --${name};
  while (${name} < ${out} && ${source} < ${v}) ++${name};
)";
constexpr const char* kNearestBackward = R"(${scales}${y_first}${x_first}  ${T} acc = (${T})0;
  for (${L} y = y0; y < meta.oh && ${source_y} == h; ++y)
    for (${L} x = x0; x < meta.ow && ${source_x} == w; ++x) acc += ${g};
  ${store}
)";

// torch CPU's area_pixel_compute_scale, area_pixel_compute_source_index
// and compute_source_index_and_lambda (UpSample.h), in T: the scale is
// (in - 1) / (out - 1) with align_corners (${ac}), else 1 / scales_h when
// given and > 0, else in / out; the source index is floored as a float
// (floorf), as there.
constexpr const char* kBilinearScale =
    R"(  const ${T} ${name} = ${ac} ? (${out} > 1 ? (${T})(${in} - 1) / (${T})(${out} - 1) : (${T})0) : ${given} > 0 ? (${T})(${one}${given}) : (${T})${in} / (${T})${out};
)";
// Statements: source index ${i0} (and real index q) of destination ${v}.
constexpr const char* kBilinearSource = R"(${_}${L} ${i0} = ${v};
${_}${T} q = (${T})0;
${_}if (${out} != ${in}) {
${_}  q = ${ac} ? ${r} * (${T})(${v}) : ${r} * ((${T})(${v}) + (${T})0.5f) - (${T})0.5f;
${_}  if (!${ac} && q < (${T})0) q = (${T})0;
${_}  ${i0} = (${L})floor((float)q);
${_}  if (${i0} > ${in} - 1) ${i0} = ${in} - 1;
${_}}
)";
// Statements declaring ${i0}, ${i1} (source indices) and ${l0}, ${l1}
// (their weights) of a destination (${source}).
constexpr const char* kBilinearWeights = R"(${_}${L} ${i0}, ${i1};
${_}${T} ${l0}, ${l1};
${_}{
${source}${_}  ${i0} = i_;
${_}  ${i1} = i_;
${_}  ${l0} = (${T})1;
${_}  ${l1} = (${T})0;
${_}  if (${out} != ${in}) {
${_}    ${T} lam = q - (${T})i_;
${_}    lam = lam < (${T})0 ? (${T})0 : lam;
${_}    lam = (${T})1 < lam ? (${T})1 : lam;
${_}    ${i1} = i_ + (i_ < ${in} - 1 ? 1 : 0);
${_}    ${l1} = lam;
${_}    ${l0} = (${T})1 - lam;
${_}  }
${_}}
)";
// torch's generic kernel: the w interpolation first, then h.
constexpr const char* kBilinear = R"(${scales}${h_weights}${w_weights}  ${T} t0 = ${x00} * wl0;
  t0 += ${x01} * wl1;
  ${T} t1 = ${x10} * wl0;
  t1 += ${x11} * wl1;
  ${T} o = t0 * hl0;
  o += t1 * hl1;
  ${store}
)";
// Gather form: the outputs whose first source index is h - 1 or h are a
// range (the map is monotonic: binary search for its start); add their
// terms in torch's order: (y, x), then i00, i01, i10, i11.
constexpr const char* kBilinearRangeStart = R"(  ${L} ${name} = 0;
  {
    ${L} hi = ${out};
    while (${name} < hi) {
      const ${L} mid = ${name} + (hi - ${name}) / 2;
${source}      (void)q;
      if (f < ${v} - 1) ${name} = mid + 1; else hi = mid;
    }
  }
)";
constexpr const char* kBilinearBackward = R"(${scales}${y_start}${x_start}  ${T} acc = (${T})0;
  for (${L} y = ya; y < meta.oh; ++y) {
${h_weights}    if (h0 > h) break;
    if (h0 != h && h1 != h) continue;
    for (${L} x = xa; x < meta.ow; ++x) {
${w_weights}      if (w0 > w) break;
      const ${T} g = ${g};
      if (h0 == h && w0 == w) acc += hl0 * wl0 * g;
      if (h0 == h && w1 == w) acc += hl0 * wl1 * g;
      if (h1 == h && w0 == w) acc += hl1 * wl0 * g;
      if (h1 == h && w1 == w) acc += hl1 * wl1 * g;
    }
  }
  ${store}
)";

}  // namespace

std::string windowBody(const Recipe& r, const Signature& sig, const Dialect& dl,
                       const Target& target) {
  const std::string L = dl.int64Type();
  const WindowOp op = r.window_op;
  const flagosDtype_t dt = sig.operands[0].dtype;
  const std::string T = dt == FLAGOS_DTYPE_FLOAT64 ? "double" : "float";
  auto P = [](int k) { return "p" + std::to_string(k); };
  auto ST = [](int k, int d) {
    return "meta.st[" + std::to_string(k) + "][" + std::to_string(d) + "]";
  };
  // Offset of operand k at (n, c, y, x).
  auto at = [&](int k, const std::string& y, const std::string& x) {
    return "n * " + ST(k, 0) + " + c * " + ST(k, 1) + " + " + y + " * " + ST(k, 2) + " + " + x +
           " * " + ST(k, 3);
  };
  auto load = [&](int k, const std::string& off) {
    return "(" + T + ")" + dl.load(sig.operands[k].dtype, P(k), off);
  };
  auto store = [&](int k, const std::string& off, const std::string& v) {
    return dl.store(sig.operands[k].dtype, P(k), off, v);
  };
  const std::string s =
      windowGathers(op)
          ? fillTemplate(kImageCoordinates, {{"L", L}})
          : fillTemplate(
                kOutputCoordinates,
                {{"L", L},
                 {"kernel_position",
                  op == WindowOp::Im2col ? fillTemplate(kKernelPosition, {{"L", L}}) : ""}});
  auto adaptiveRange = [&](const std::string& a, const std::string& out, const std::string& in,
                           const std::string& lo, const std::string& hi) {
    return fillTemplate(kAdaptiveRange,
                        {{"L", L}, {"lo", lo}, {"a", a}, {"out", out}, {"in", in}, {"hi", hi}});
  };
  const std::string h_range = adaptiveRange("y", "meta.oh", "meta.ih", "h0", "h1");
  const std::string w_range = adaptiveRange("x", "meta.ow", "meta.iw", "w0", "w1");
  switch (op) {
    case WindowOp::Im2col:
      return s + fillTemplate(kIm2col,
                              {{"L", L},
                               {"st0", ST(0, 0)},
                               {"st1", ST(0, 1)},
                               {"st2", ST(0, 2)},
                               {"store", store(0, "o0",
                                               "h >= 0 && h < meta.ih && w >= 0 && w < "
                                               "meta.iw ? " +
                                                   load(1, at(1, "h", "w")) + " : (" + T + ")0")}});
    case WindowOp::Col2im:
      return s + fillTemplate(
                     kCol2im,
                     {{"T", T},
                      {"L", L},
                      {"column", load(1, "n * " + ST(1, 0) +
                                             " + ((c * meta.kh + i) * meta.kw + j) * " + ST(1, 1) +
                                             " + (hh / meta.sh * meta.ow + ww / "
                                             "meta.sw) * " +
                                             ST(1, 2))},
                      {"store", store(0, at(0, "h", "w"), "acc")}});
    case WindowOp::MaxPool:
    case WindowOp::AdaptiveMaxPool:
      return s + fillTemplate(
                     kMaxOverWindow,
                     {{"window",
                       op == WindowOp::MaxPool
                           ? fillTemplate(kMaxPoolWindow, {{"L", L}})
                           : fillTemplate(kAdaptiveMaxPoolWindow,
                                          {{"h_range", h_range}, {"w_range", w_range}, {"L", L}})},
                      {"T", T},
                      {"L", L},
                      {"x", load(2, at(2, "h", "w"))},
                      {"store_best", store(0, at(0, "y", "x"), "best")},
                      {"store_arg", store(1, at(1, "y", "x"), "arg")}});
    case WindowOp::MaxPoolBackward:
    case WindowOp::AdaptiveMaxPoolBackward:
      return s + fillTemplate(
                     kMaxPoolBackward,
                     {{"sources", fillTemplate(op == WindowOp::MaxPoolBackward ? kMaxPoolSources
                                                                               : kAdaptiveSources,
                                               {{"L", L}})},
                      {"L", L},
                      {"T", T},
                      {"index", dl.load(FLAGOS_DTYPE_INT64, P(3), at(3, "y", "x"))},
                      {"g", load(1, at(1, "y", "x"))},
                      {"store", store(0, at(0, "h", "w"), "acc")}});
    case WindowOp::AvgPool:
      return s + fillTemplate(kAvgPool,
                              {{"L", L},
                               {"store_zero", store(0, at(0, "y", "x"), "0")},
                               {"skip", dl.skip()},
                               {"T", T},
                               {"x", load(1, at(1, "h", "w"))},
                               {"store", store(0, at(0, "y", "x"), "sum / (" + T + ")divisor")}});
    case WindowOp::AvgPoolBackward:
      return s + fillTemplate(kAvgPoolBackward, {{"L", L},
                                                 {"T", T},
                                                 {"g", load(1, at(1, "y", "x"))},
                                                 {"store", store(0, at(0, "h", "w"), "acc")}});
    case WindowOp::AdaptiveAvgPool:
      return s +
             fillTemplate(kAdaptiveAvgPool,
                          {{"h_range", h_range},
                           {"w_range", w_range},
                           {"T", T},
                           {"L", L},
                           {"x", load(1, at(1, "h", "w"))},
                           {"store", store(0, at(0, "y", "x"),
                                           "sum / (" + T + ")(h1 - h0) / (" + T + ")(w1 - w0)")}});
    case WindowOp::AdaptiveAvgPoolBackward:
      return s + fillTemplate(kAdaptiveAvgPoolBackward,
                              {{"sources", fillTemplate(kAdaptiveSources, {{"L", L}})},
                               {"T", T},
                               {"L", L},
                               {"h_range", h_range},
                               {"w_range", w_range},
                               {"g", load(1, at(1, "y", "x"))},
                               {"store", store(0, at(0, "h", "w"), "acc")}});
    case WindowOp::UpsampleNearest:
    case WindowOp::UpsampleNearestBackward: {
      const bool fwd = op == WindowOp::UpsampleNearest;
      const std::string one = target.fp64 ? "1.0 / " : "1.0f / ";
      auto scale = [&](const std::string& name, const std::string& in, const std::string& out,
                       const std::string& given) {
        return fillTemplate(
            kNearestScale,
            {{"name", name}, {"given", given}, {"one", one}, {"in", in}, {"out", out}});
      };
      auto src = [&](const std::string& v, const std::string& in, const std::string& out,
                     const std::string& f) {
        const std::string fl = "(" + L + ")floor((float)(" + v + ") * " + f + ")";
        return "(" + out + " == " + in + " ? (" + v + ") : " + out + " == 2 * " + in + " ? (" + v +
               ") >> 1 : " + fl + " < " + in + " - 1 ? " + fl + " : " + in + " - 1)";
      };
      const std::string scales = scale("fh", "meta.ih", "meta.oh", fwd ? "s2" : "s6") +
                                 scale("fw", "meta.iw", "meta.ow", fwd ? "s3" : "s7");
      if (fwd) {
        return s +
               fillTemplate(kNearest,
                            {{"scales", scales},
                             {"store", store(0, at(0, "y", "x"),
                                             load(1, at(1, src("y", "meta.ih", "meta.oh", "fh"),
                                                        src("x", "meta.iw", "meta.ow", "fw"))))}});
      }
      auto first = [&](const std::string& name, const std::string& v, const std::string& in,
                       const std::string& out, const std::string& f) {
        return fillTemplate(kNearestFirst, {{"L", L},
                                            {"name", name},
                                            {"f", f},
                                            {"v", v},
                                            {"out", out},
                                            {"source_before", src(name + " - 1", in, out, f)},
                                            {"source", src(name, in, out, f)}});
      };
      return s + fillTemplate(kNearestBackward,
                              {{"scales", scales},
                               {"y_first", first("y0", "h", "meta.ih", "meta.oh", "fh")},
                               {"x_first", first("x0", "w", "meta.iw", "meta.ow", "fw")},
                               {"T", T},
                               {"L", L},
                               {"source_y", src("y", "meta.ih", "meta.oh", "fh")},
                               {"source_x", src("x", "meta.iw", "meta.ow", "fw")},
                               {"g", load(1, at(1, "y", "x"))},
                               {"store", store(0, at(0, "h", "w"), "acc")}});
    }
    case WindowOp::UpsampleBilinear:
    case WindowOp::UpsampleBilinearBackward: {
      const bool fwd = op == WindowOp::UpsampleBilinear;
      const std::string ac = fwd ? "s2" : "s6";
      const std::string one = target.fp64 ? "1.0 / " : "1.0f / ";
      auto scale = [&](const std::string& name, const std::string& in, const std::string& out,
                       const std::string& given) {
        return fillTemplate(kBilinearScale, {{"T", T},
                                             {"name", name},
                                             {"ac", ac},
                                             {"out", out},
                                             {"in", in},
                                             {"given", given},
                                             {"one", one}});
      };
      const std::string scales = scale("rh", "meta.ih", "meta.oh", fwd ? "s3" : "s7") +
                                 scale("rw", "meta.iw", "meta.ow", fwd ? "s4" : "s8");
      auto source = [&](const std::string& v, const std::string& in, const std::string& out,
                        const std::string& r, const std::string& i0, const std::string& pad) {
        return fillTemplate(kBilinearSource, {{"_", pad},
                                              {"L", L},
                                              {"i0", i0},
                                              {"v", v},
                                              {"T", T},
                                              {"out", out},
                                              {"in", in},
                                              {"ac", ac},
                                              {"r", r}});
      };
      auto weights = [&](const std::string& v, const std::string& in, const std::string& out,
                         const std::string& r, const std::string& i0, const std::string& i1,
                         const std::string& l0, const std::string& l1, const std::string& pad) {
        return fillTemplate(kBilinearWeights, {{"_", pad},
                                               {"L", L},
                                               {"i0", i0},
                                               {"i1", i1},
                                               {"T", T},
                                               {"l0", l0},
                                               {"l1", l1},
                                               {"source", source(v, in, out, r, "i_", pad + "  ")},
                                               {"out", out},
                                               {"in", in}});
      };
      if (fwd) {
        return s + fillTemplate(kBilinear, {{"scales", scales},
                                            {"h_weights", weights("y", "meta.ih", "meta.oh", "rh",
                                                                  "h0", "h1", "hl0", "hl1", "  ")},
                                            {"w_weights", weights("x", "meta.iw", "meta.ow", "rw",
                                                                  "w0", "w1", "wl0", "wl1", "  ")},
                                            {"T", T},
                                            {"x00", load(1, at(1, "h0", "w0"))},
                                            {"x01", load(1, at(1, "h0", "w1"))},
                                            {"x10", load(1, at(1, "h1", "w0"))},
                                            {"x11", load(1, at(1, "h1", "w1"))},
                                            {"store", store(0, at(0, "y", "x"), "o")}});
      }
      auto rangeStart = [&](const std::string& name, const std::string& v, const std::string& in,
                            const std::string& out, const std::string& r) {
        return fillTemplate(kBilinearRangeStart,
                            {{"L", L},
                             {"name", name},
                             {"out", out},
                             {"source", source("mid", in, out, r, "f", "      ")},
                             {"v", v}});
      };
      return s + fillTemplate(kBilinearBackward,
                              {{"scales", scales},
                               {"y_start", rangeStart("ya", "h", "meta.ih", "meta.oh", "rh")},
                               {"x_start", rangeStart("xa", "w", "meta.iw", "meta.ow", "rw")},
                               {"T", T},
                               {"L", L},
                               {"h_weights", weights("y", "meta.ih", "meta.oh", "rh", "h0", "h1",
                                                     "hl0", "hl1", "    ")},
                               {"w_weights", weights("x", "meta.iw", "meta.ow", "rw", "w0", "w1",
                                                     "wl0", "wl1", "      ")},
                               {"g", load(1, at(1, "y", "x"))},
                               {"store", store(0, at(0, "h", "w"), "acc")}});
    }
  }
  return s;
}

}  // namespace flagos::kernels
