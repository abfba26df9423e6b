// What one reducer accumulates, as code (reduction.h).
#include "jit/gen/reduction.h"

namespace flagos::kernels {

Reduction reductionFor(Reducer reducer, flagosDtype_t in, bool fp64, const std::string& i64) {
  Reduction r;
  r.reducer = reducer;
  const bool floating = isFloating(in);
  const std::string ftype = fp64 ? "double" : "float";
  const std::string i64max = i64 == "long" ? "0x7fffffffffffffffL" : "INT64_MAX";
  const std::string i64min = i64 == "long" ? "(-0x7fffffffffffffffL - 1)" : "INT64_MIN";
  switch (reducer) {
    case Reducer::Sum:
    case Reducer::Mean:
    case Reducer::Prod: {
      const bool prod = reducer == Reducer::Prod;
      r.acc_type = r.x_type = floating ? ftype : i64;
      r.identity = prod ? "1" : "0";
      r.group_op = prod ? "prod" : "sum";
      r.simd = prod ? "*" : "+";
      break;
    }
    case Reducer::Max:
    case Reducer::Min: {
      const bool max = reducer == Reducer::Max;
      r.acc_type = r.x_type = !floating ? i64 : in == FLAGOS_DTYPE_FLOAT64 ? "double" : "float";
      r.group_op = max ? "max" : "min";
      r.simd = r.group_op;
      r.nan_flag = floating;
      r.identity = floating ? (max ? "-INFINITY" : "INFINITY") : (max ? i64min : i64max);
      break;
    }
    case Reducer::Any:
    case Reducer::All: {
      // The element as 0/1 (NaN is true, as on CPU), joined by max / min.
      const bool any = reducer == Reducer::Any;
      r.acc_type = i64;
      r.x_type = floating ? ftype : i64;
      r.identity = any ? "0" : "1";
      r.group_op = any ? "max" : "min";
      r.simd = any ? "|" : "&";
      break;
    }
  }
  r.suffix = r.acc_type == "float" ? "f" : r.acc_type == "double" ? "d" : "l";
  return r;
}

}  // namespace flagos::kernels
