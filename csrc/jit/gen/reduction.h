// What one reducer (sum, prod, max, any, ...) accumulates, as code, for
// the reduction and row-operator bodies (reduce.cpp, row.cpp); and a
// kernel signature's reduce layout (reduce_layout.cpp).
#pragma once

#include <string>

#include "jit/gen/emit.h"
#include "jit/gen/recipe.h"

namespace flagos::kernels {

// The bodies' text helpers: @p v in decimal, and as the dialect's int64
// literal (@p i64: its int64 type).
inline std::string str(int64_t v) {
  return std::to_string(v);
}
inline std::string lit(int64_t v, const std::string& i64) {
  return int64Literal(v, i64);
}

// What one reducer accumulates, as code: the accumulator's type, the type
// an element is loaded as, the identity, and how an element (or another
// accumulator) joins an accumulator, scalar and vector.
struct Reduction {
  Reducer reducer;
  std::string acc_type, x_type, identity;
  std::string group_op;   // flagos_group_<op>_<suffix>
  std::string suffix;     // f, d, l
  std::string simd;       // "c" reduction clause operator
  bool nan_flag = false;  // floating max/min: the vector loop keeps NaN aside

  // acc joined by x (an element, or for any/all a 0/1 accumulator too).
  std::string combine(const std::string& a, const std::string& x) const {
    switch (reducer) {
      case Reducer::Sum:
      case Reducer::Mean:
        return a + " + " + x;
      case Reducer::Prod:
        return a + " * " + x;
      case Reducer::Any:
        return "(" + a + " | (" + x + " != 0))";
      case Reducer::All:
        return "(" + a + " & (" + x + " != 0))";
      case Reducer::Max:
      case Reducer::Min: {
        const bool max = reducer == Reducer::Max;
        const std::string fn = suffix == "l" ? (max ? "flagos_imax" : "flagos_imin")
                                             : (max ? "flagos_max" : "flagos_min") + suffix;
        return fn + "(" + a + ", " + x + ")";
      }
    }
    return a;
  }
  // The same over vectors (@p x: a vector of x_type, a variable).
  std::string combineVector(const Dialect& dl, const std::string& a, const std::string& x) const {
    switch (reducer) {
      case Reducer::Sum:
      case Reducer::Mean:
        return a + " + " + (x_type == acc_type ? x : dl.convertVector(acc_type, x));
      case Reducer::Prod:
        return a + " * " + (x_type == acc_type ? x : dl.convertVector(acc_type, x));
      case Reducer::Any:
        return dl.vectorMaxMin(true, acc_type, a, dl.vectorTruth(x));
      case Reducer::All:
        return dl.vectorMaxMin(false, acc_type, a, dl.vectorTruth(x));
      case Reducer::Max:
      case Reducer::Min:
        return dl.vectorMaxMin(reducer == Reducer::Max, acc_type, a, x);
    }
    return a;
  }
  // The lanes of vector accumulator @p v joined, as one accumulator.
  std::string horizontal(const Dialect& dl, const std::string& v, int width) const {
    std::vector<std::string> lanes;
    for (int k = 0; k < width; ++k) lanes.push_back(dl.vectorLane(v, k));
    const Reducer join = reducer == Reducer::Any   ? Reducer::Max
                         : reducer == Reducer::All ? Reducer::Min
                                                   : reducer;
    Reduction r = *this;
    r.reducer = join;
    while (lanes.size() > 1) {
      std::vector<std::string> next;
      for (size_t k = 0; k + 1 < lanes.size(); k += 2)
        next.push_back("(" + r.combine(lanes[k], lanes[k + 1]) + ")");
      if (lanes.size() % 2) next.push_back(lanes.back());
      lanes = std::move(next);
    }
    return lanes[0];
  }
};

// The Reduction of @p reducer over elements of dtype @p in (floating sums
// accumulate in double when @p fp64); @p i64: the dialect's int64 type.
Reduction reductionFor(Reducer reducer, flagosDtype_t in, bool fp64, const std::string& i64);

// The reduce layout of a kernel signature's operands (recipe.h's
// reduceLayout over the signature's shapes, strides and dims mask).
ReduceLayout reduceLayout(const Recipe& recipe, const Signature& sig);

}  // namespace flagos::kernels
