// The kernel bodies of the window operators (Note [Window kernels],
// window.cpp): one work item per output element, forward ops over their
// window, backward ops and col2im in gather form.
#include <sstream>

#include "jit/gen/emit.h"

namespace flagos::kernels {

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
  std::ostringstream s;
  s << "  " << L << " r = gid;\n";
  if (windowGathers(op)) {
    s << "  const " << L << " w = r % meta.iw; r /= meta.iw;\n"
      << "  const " << L << " h = r % meta.ih; r /= meta.ih;\n";
  } else {
    s << "  const " << L << " x = r % meta.ow; r /= meta.ow;\n"
      << "  const " << L << " y = r % meta.oh; r /= meta.oh;\n";
    if (op == WindowOp::Im2col) {
      s << "  const " << L << " j = r % meta.kw; r /= meta.kw;\n"
        << "  const " << L << " i = r % meta.kh; r /= meta.kh;\n";
    }
  }
  s << "  const " << L << " c = r % meta.c, n = r / meta.c;\n";
  // Adaptive windows: [floor(a * in / out), ceil((a + 1) * in / out)).
  auto adaptiveRange = [&](const std::string& a, const std::string& out, const std::string& in,
                           const std::string& lo, const std::string& hi) {
    s << "  const " << L << " " << lo << " = (" << a << " / " << out << ") * " << in << " + ((" << a
      << " % " << out << ") * " << in << ") / " << out << ";\n"
      << "  const " << L << " " << hi << " = 1 + ((" << a << " + 1) * " << in << " - 1) / " << out
      << ";\n";
  };
  switch (op) {
    case WindowOp::Im2col:
      s << "  const " << L << " h = y * meta.sh - meta.ph + i * meta.dh;\n"
        << "  const " << L << " w = x * meta.sw - meta.pw + j * meta.dw;\n"
        << "  const " << L << " o0 = n * " << ST(0, 0) << " + ((c * meta.kh + i) * meta.kw + j) * "
        << ST(0, 1) << " + (y * meta.ow + x) * " << ST(0, 2) << ";\n"
        << "  "
        << store(0, "o0",
                 "h >= 0 && h < meta.ih && w >= 0 && w < meta.iw ? " + load(1, at(1, "h", "w")) +
                     " : (" + T + ")0")
        << "\n";
      break;
    case WindowOp::Col2im:
      // torch adds columns in (i, j) order; one (y, x) per (i, j) at most.
      s << "  " << T << " acc = (" << T << ")0;\n"
        << "  for (" << L << " i = 0; i < meta.kh; ++i) {\n"
        << "    const " << L << " hh = h + meta.ph - i * meta.dh;\n"
        << "    if (hh < 0) break;\n"
        << "    if (hh % meta.sh != 0 || hh / meta.sh >= meta.oh) continue;\n"
        << "    for (" << L << " j = 0; j < meta.kw; ++j) {\n"
        << "      const " << L << " ww = w + meta.pw - j * meta.dw;\n"
        << "      if (ww < 0) break;\n"
        << "      if (ww % meta.sw != 0 || ww / meta.sw >= meta.ow) continue;\n"
        << "      acc += "
        << load(1, "n * " + ST(1, 0) + " + ((c * meta.kh + i) * meta.kw + j) * " + ST(1, 1) +
                       " + (hh / meta.sh * meta.ow + ww / meta.sw) * " + ST(1, 2))
        << ";\n    }\n  }\n"
        << "  " << store(0, at(0, "h", "w"), "acc") << "\n";
      break;
    case WindowOp::MaxPool:
    case WindowOp::AdaptiveMaxPool:
      if (op == WindowOp::MaxPool) {
        s << "  " << L << " h0 = y * meta.sh - meta.ph, w0 = x * meta.sw - meta.pw;\n"
          << "  " << L << " h1 = h0 + (meta.kh - 1) * meta.dh + 1, w1 = w0 + (meta.kw - 1) * "
          << "meta.dw + 1;\n"
          << "  if (h1 > meta.ih) h1 = meta.ih;\n  if (w1 > meta.iw) w1 = meta.iw;\n"
          << "  while (h0 < 0) h0 += meta.dh;\n  while (w0 < 0) w0 += meta.dw;\n"
          << "  const " << L << " dh = meta.dh, dw = meta.dw;\n";
      } else {
        adaptiveRange("y", "meta.oh", "meta.ih", "h0", "h1");
        adaptiveRange("x", "meta.ow", "meta.iw", "w0", "w1");
        s << "  const " << L << " dh = 1, dw = 1;\n";
      }
      s << "  " << T << " best = -INFINITY;\n"
        << "  " << L << " arg = h0 * meta.iw + w0;\n"
        << "  for (" << L << " h = h0; h < h1; h += dh)\n"
        << "    for (" << L << " w = w0; w < w1; w += dw) {\n"
        << "      const " << T << " v = " << load(2, at(2, "h", "w")) << ";\n"
        << "      if (v > best || isnan(v)) { best = v; arg = h * meta.iw + w; }\n"
        << "    }\n"
        << "  " << store(0, at(0, "y", "x"), "best") << "\n"
        << "  " << store(1, at(1, "y", "x"), "arg") << "\n";
      break;
    case WindowOp::MaxPoolBackward:
    case WindowOp::AdaptiveMaxPoolBackward:
      // grad_output where the saved index is this element, in (y, x) order.
      if (op == WindowOp::MaxPoolBackward) {
        s << "  const " << L << " qh = h + meta.ph - (meta.kh - 1) * meta.dh, qw = w + meta.pw - "
          << "(meta.kw - 1) * meta.dw;\n"
          << "  const " << L << " y0 = qh <= 0 ? 0 : (qh + meta.sh - 1) / meta.sh;\n"
          << "  const " << L << " x0 = qw <= 0 ? 0 : (qw + meta.sw - 1) / meta.sw;\n"
          << "  " << L << " y1 = (h + meta.ph) / meta.sh + 1, x1 = (w + meta.pw) / meta.sw + 1;\n";
      } else {
        s << "  const " << L << " y0 = h * meta.oh / meta.ih, x0 = w * meta.ow / meta.iw;\n"
          << "  " << L << " y1 = ((h + 1) * meta.oh - 1) / meta.ih + 1, x1 = ((w + 1) * meta.ow - "
          << "1) / meta.iw + 1;\n";
      }
      s << "  if (y1 > meta.oh) y1 = meta.oh;\n  if (x1 > meta.ow) x1 = meta.ow;\n"
        << "  const " << L << " me = h * meta.iw + w;\n"
        << "  " << T << " acc = (" << T << ")0;\n"
        << "  for (" << L << " y = y0; y < y1; ++y)\n"
        << "    for (" << L << " x = x0; x < x1; ++x)\n"
        << "      if (" << dl.load(FLAGOS_DTYPE_INT64, P(3), at(3, "y", "x"))
        << " == me) acc += " << load(1, at(1, "y", "x")) << ";\n"
        << "  " << store(0, at(0, "h", "w"), "acc") << "\n";
      break;
    case WindowOp::AvgPool:
      s << "  " << L << " h0 = y * meta.sh - meta.ph, w0 = x * meta.sw - meta.pw;\n"
        << "  " << L << " h1 = h0 + meta.kh, w1 = w0 + meta.kw;\n"
        << "  if (h1 > meta.ih + meta.ph) h1 = meta.ih + meta.ph;\n"
        << "  if (w1 > meta.iw + meta.pw) w1 = meta.iw + meta.pw;\n"
        << "  const " << L << " pool = (h1 - h0) * (w1 - w0);\n"
        << "  if (h0 < 0) h0 = 0;\n  if (w0 < 0) w0 = 0;\n"
        << "  if (h1 > meta.ih) h1 = meta.ih;\n  if (w1 > meta.iw) w1 = meta.iw;\n"
        << "  if (h0 >= h1 || w0 >= w1) { " << store(0, at(0, "y", "x"), "0") << " " << dl.skip()
        << "; }\n"
        << "  " << T << " sum = (" << T << ")0;\n"
        << "  for (" << L << " h = h0; h < h1; ++h)\n"
        << "    for (" << L << " w = w0; w < w1; ++w) sum += " << load(1, at(1, "h", "w")) << ";\n"
        << "  const " << L
        << " divisor = meta.div ? meta.div : meta.cip ? pool : (h1 - h0) * (w1 - w0);\n"
        << "  " << store(0, at(0, "y", "x"), "sum / (" + T + ")divisor") << "\n";
      break;
    case WindowOp::AvgPoolBackward:
      // Windows [y * sh - ph, +kh) that hold h; torch adds in (y, x) order.
      s << "  const " << L << " qh = h + meta.ph - meta.kh, qw = w + meta.pw - meta.kw;\n"
        << "  const " << L << " y0 = qh < 0 ? 0 : qh / meta.sh + 1;\n"
        << "  const " << L << " x0 = qw < 0 ? 0 : qw / meta.sw + 1;\n"
        << "  " << L << " y1 = (h + meta.ph) / meta.sh + 1, x1 = (w + meta.pw) / meta.sw + 1;\n"
        << "  if (y1 > meta.oh) y1 = meta.oh;\n  if (x1 > meta.ow) x1 = meta.ow;\n"
        << "  " << T << " acc = (" << T << ")0;\n"
        << "  for (" << L << " y = y0; y < y1; ++y) {\n"
        << "    " << L << " h0 = y * meta.sh - meta.ph, h1 = h0 + meta.kh;\n"
        << "    if (h1 > meta.ih + meta.ph) h1 = meta.ih + meta.ph;\n"
        << "    for (" << L << " x = x0; x < x1; ++x) {\n"
        << "      " << L << " w0 = x * meta.sw - meta.pw, w1 = w0 + meta.kw;\n"
        << "      if (w1 > meta.iw + meta.pw) w1 = meta.iw + meta.pw;\n"
        << "      " << L << " divisor = (h1 - h0) * (w1 - w0);\n"
        << "      if (meta.div) divisor = meta.div;\n"
        << "      else if (!meta.cip) divisor = ((h1 < meta.ih ? h1 : meta.ih) - (h0 > 0 ? h0 : "
           "0)) "
        << "* ((w1 < meta.iw ? w1 : meta.iw) - (w0 > 0 ? w0 : 0));\n"
        << "      acc += " << load(1, at(1, "y", "x")) << " / (" << T << ")divisor;\n"
        << "    }\n  }\n"
        << "  " << store(0, at(0, "h", "w"), "acc") << "\n";
      break;
    case WindowOp::AdaptiveAvgPool:
      adaptiveRange("y", "meta.oh", "meta.ih", "h0", "h1");
      adaptiveRange("x", "meta.ow", "meta.iw", "w0", "w1");
      s << "  " << T << " sum = (" << T << ")0;\n"
        << "  for (" << L << " h = h0; h < h1; ++h)\n"
        << "    for (" << L << " w = w0; w < w1; ++w) sum += " << load(1, at(1, "h", "w")) << ";\n"
        << "  " << store(0, at(0, "y", "x"), "sum / (" + T + ")(h1 - h0) / (" + T + ")(w1 - w0)")
        << "\n";
      break;
    case WindowOp::AdaptiveAvgPoolBackward:
      s << "  const " << L << " y0 = h * meta.oh / meta.ih, x0 = w * meta.ow / meta.iw;\n"
        << "  " << L << " y1 = ((h + 1) * meta.oh - 1) / meta.ih + 1, x1 = ((w + 1) * meta.ow - 1) "
        << "/ meta.iw + 1;\n"
        << "  if (y1 > meta.oh) y1 = meta.oh;\n  if (x1 > meta.ow) x1 = meta.ow;\n"
        << "  " << T << " acc = (" << T << ")0;\n"
        << "  for (" << L << " y = y0; y < y1; ++y) {\n";
      adaptiveRange("y", "meta.oh", "meta.ih", "h0", "h1");
      s << "    for (" << L << " x = x0; x < x1; ++x) {\n";
      adaptiveRange("x", "meta.ow", "meta.iw", "w0", "w1");
      s << "      acc += " << load(1, at(1, "y", "x")) << " / (" << T << ")(h1 - h0) / (" << T
        << ")(w1 - w0);\n"
        << "    }\n  }\n"
        << "  " << store(0, at(0, "h", "w"), "acc") << "\n";
      break;
    case WindowOp::UpsampleNearest:
    case WindowOp::UpsampleNearestBackward: {
      // torch's nearest_idx: exact for equal and doubled sizes, else
      // min(floor(dst * scale), in - 1) with a float scale (1 / scales_h
      // when given and > 0, else in / out).
      const bool fwd = op == WindowOp::UpsampleNearest;
      const std::string one = target.fp64 ? "1.0 / " : "1.0f / ";
      auto scale = [&](const std::string& name, const std::string& in, const std::string& out,
                       const std::string& given) {
        s << "  const float " << name << " = " << given << " > 0 ? (float)(" << one << given
          << ") : (float)" << in << " / (float)" << out << ";\n";
      };
      auto src = [&](const std::string& v, const std::string& in, const std::string& out,
                     const std::string& f) {
        const std::string fl = "(" + L + ")floor((float)(" + v + ") * " + f + ")";
        return "(" + out + " == " + in + " ? (" + v + ") : " + out + " == 2 * " + in + " ? (" + v +
               ") >> 1 : " + fl + " < " + in + " - 1 ? " + fl + " : " + in + " - 1)";
      };
      scale("fh", "meta.ih", "meta.oh", fwd ? "s2" : "s6");
      scale("fw", "meta.iw", "meta.ow", fwd ? "s3" : "s7");
      if (fwd) {
        s << "  "
          << store(0, at(0, "y", "x"),
                   load(1, at(1, src("y", "meta.ih", "meta.oh", "fh"),
                              src("x", "meta.iw", "meta.ow", "fw"))))
          << "\n";
        break;
      }
      // Gather form: the outputs whose source is (h, w) are a range (the map
      // is monotonic); start from an estimate, settle on its first element,
      // and add in torch's (y, x) order.
      auto first = [&](const std::string& name, const std::string& v, const std::string& in,
                       const std::string& out, const std::string& f) {
        const std::string at_v = src(name, in, out, f), before = src(name + " - 1", in, out, f);
        s << "  " << L << " " << name << " = 0;\n"
          << "  { const float e = " << f << " > 0 ? (float)" << v << " / " << f << " : (float)"
          << out << ";\n"
          << "    " << name << " = e >= (float)" << out << " ? " << out << " : (" << L << ")e; }\n"
          << "  while (" << name << " > 0 && " << before << " >= " << v << ") --" << name << ";\n"
          << "  while (" << name << " < " << out << " && " << at_v << " < " << v << ") ++" << name
          << ";\n";
      };
      first("y0", "h", "meta.ih", "meta.oh", "fh");
      first("x0", "w", "meta.iw", "meta.ow", "fw");
      s << "  " << T << " acc = (" << T << ")0;\n"
        << "  for (" << L << " y = y0; y < meta.oh && " << src("y", "meta.ih", "meta.oh", "fh")
        << " == h; ++y)\n"
        << "    for (" << L << " x = x0; x < meta.ow && " << src("x", "meta.iw", "meta.ow", "fw")
        << " == w; ++x) acc += " << load(1, at(1, "y", "x")) << ";\n"
        << "  " << store(0, at(0, "h", "w"), "acc") << "\n";
      break;
    }
    case WindowOp::UpsampleBilinear:
    case WindowOp::UpsampleBilinearBackward: {
      // torch CPU's area_pixel_compute_scale, area_pixel_compute_source_index
      // and compute_source_index_and_lambda (UpSample.h), in T: the scale is
      // (in - 1) / (out - 1) with align_corners, else 1 / scales_h when
      // given and > 0, else in / out; the source index is floored as a float
      // (floorf), as there.
      const bool fwd = op == WindowOp::UpsampleBilinear;
      const std::string ac = fwd ? "s2" : "s6";
      const std::string one = target.fp64 ? "1.0 / " : "1.0f / ";
      auto scale = [&](const std::string& name, const std::string& in, const std::string& out,
                       const std::string& given) {
        s << "  const " << T << " " << name << " = " << ac << " ? (" << out << " > 1 ? (" << T
          << ")(" << in << " - 1) / (" << T << ")(" << out << " - 1) : (" << T << ")0) : " << given
          << " > 0 ? (" << T << ")(" << one << given << ") : (" << T << ")" << in << " / (" << T
          << ")" << out << ";\n";
      };
      scale("rh", "meta.ih", "meta.oh", fwd ? "s3" : "s7");
      scale("rw", "meta.iw", "meta.ow", fwd ? "s4" : "s8");
      // Statements: source index i0 (and real index q) of destination v.
      auto source = [&](const std::string& v, const std::string& in, const std::string& out,
                        const std::string& r, const std::string& i0, const std::string& pad) {
        s << pad << L << " " << i0 << " = " << v << ";\n"
          << pad << T << " q = (" << T << ")0;\n"
          << pad << "if (" << out << " != " << in << ") {\n"
          << pad << "  q = " << ac << " ? " << r << " * (" << T << ")(" << v << ") : " << r
          << " * ((" << T << ")(" << v << ") + (" << T << ")0.5f) - (" << T << ")0.5f;\n"
          << pad << "  if (!" << ac << " && q < (" << T << ")0) q = (" << T << ")0;\n"
          << pad << "  " << i0 << " = (" << L << ")floor((float)q);\n"
          << pad << "  if (" << i0 << " > " << in << " - 1) " << i0 << " = " << in << " - 1;\n"
          << pad << "}\n";
      };
      // Statements declaring i0, i1 (source indices) and l0, l1 (their
      // weights) of destination v.
      auto weights = [&](const std::string& v, const std::string& in, const std::string& out,
                         const std::string& r, const std::string& i0, const std::string& i1,
                         const std::string& l0, const std::string& l1, const std::string& pad) {
        s << pad << L << " " << i0 << ", " << i1 << ";\n"
          << pad << T << " " << l0 << ", " << l1 << ";\n"
          << pad << "{\n";
        source(v, in, out, r, "i_", pad + "  ");
        s << pad << "  " << i0 << " = i_;\n"
          << pad << "  " << i1 << " = i_;\n"
          << pad << "  " << l0 << " = (" << T << ")1;\n"
          << pad << "  " << l1 << " = (" << T << ")0;\n"
          << pad << "  if (" << out << " != " << in << ") {\n"
          << pad << "    " << T << " lam = q - (" << T << ")i_;\n"
          << pad << "    lam = lam < (" << T << ")0 ? (" << T << ")0 : lam;\n"
          << pad << "    lam = (" << T << ")1 < lam ? (" << T << ")1 : lam;\n"
          << pad << "    " << i1 << " = i_ + (i_ < " << in << " - 1 ? 1 : 0);\n"
          << pad << "    " << l1 << " = lam;\n"
          << pad << "    " << l0 << " = (" << T << ")1 - lam;\n"
          << pad << "  }\n"
          << pad << "}\n";
      };
      if (fwd) {
        weights("y", "meta.ih", "meta.oh", "rh", "h0", "h1", "hl0", "hl1", "  ");
        weights("x", "meta.iw", "meta.ow", "rw", "w0", "w1", "wl0", "wl1", "  ");
        // torch's generic kernel: the w interpolation first, then h.
        s << "  " << T << " t0 = " << load(1, at(1, "h0", "w0")) << " * wl0;\n"
          << "  t0 += " << load(1, at(1, "h0", "w1")) << " * wl1;\n"
          << "  " << T << " t1 = " << load(1, at(1, "h1", "w0")) << " * wl0;\n"
          << "  t1 += " << load(1, at(1, "h1", "w1")) << " * wl1;\n"
          << "  " << T << " o = t0 * hl0;\n"
          << "  o += t1 * hl1;\n"
          << "  " << store(0, at(0, "y", "x"), "o") << "\n";
        break;
      }
      // Gather form: the outputs whose first source index is h - 1 or h are
      // a range (the map is monotonic: binary search for its start); add
      // their terms in torch's order: (y, x), then i00, i01, i10, i11.
      auto range = [&](const std::string& name, const std::string& v, const std::string& in,
                       const std::string& out, const std::string& r) {
        s << "  " << L << " " << name << " = 0;\n"
          << "  {\n"
          << "    " << L << " hi = " << out << ";\n"
          << "    while (" << name << " < hi) {\n"
          << "      const " << L << " mid = " << name << " + (hi - " << name << ") / 2;\n";
        source("mid", in, out, r, "f", "      ");
        s << "      (void)q;\n"
          << "      if (f < " << v << " - 1) " << name << " = mid + 1; else hi = mid;\n"
          << "    }\n"
          << "  }\n";
      };
      range("ya", "h", "meta.ih", "meta.oh", "rh");
      range("xa", "w", "meta.iw", "meta.ow", "rw");
      s << "  " << T << " acc = (" << T << ")0;\n"
        << "  for (" << L << " y = ya; y < meta.oh; ++y) {\n";
      weights("y", "meta.ih", "meta.oh", "rh", "h0", "h1", "hl0", "hl1", "    ");
      s << "    if (h0 > h) break;\n"
        << "    if (h0 != h && h1 != h) continue;\n"
        << "    for (" << L << " x = xa; x < meta.ow; ++x) {\n";
      weights("x", "meta.iw", "meta.ow", "rw", "w0", "w1", "wl0", "wl1", "      ");
      s << "      if (w0 > w) break;\n"
        << "      const " << T << " g = " << load(1, at(1, "y", "x")) << ";\n"
        << "      if (h0 == h && w0 == w) acc += hl0 * wl0 * g;\n"
        << "      if (h0 == h && w1 == w) acc += hl0 * wl1 * g;\n"
        << "      if (h1 == h && w0 == w) acc += hl1 * wl0 * g;\n"
        << "      if (h1 == h && w1 == w) acc += hl1 * wl1 * g;\n"
        << "    }\n"
        << "  }\n"
        << "  " << store(0, at(0, "h", "w"), "acc") << "\n";
      break;
    }
  }
  return s.str();
}

}  // namespace flagos::kernels
