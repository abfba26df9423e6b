// Lowering of a parsed catalog expression (expr.h) to typed code shared by
// every dialect: values are bool (0/1), the integer compute type (int64) or
// the floating one, with C-like promotion between them.
#pragma once

#include <stdexcept>
#include <string>

#include "jit/gen/recipe.h"

namespace flagos::kernels {

// Thrown while lowering an expression the generator cannot type.
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Value kinds while lowering: bool (0/1 int), the integer compute type
// (int64), the floating compute type.
enum class Ty { B = 0, I = 1, F = 2 };

struct Val {
  std::string code;
  Ty ty;
};

class Lowering {
 public:
  Lowering(const Recipe& r, ComputeClass cls, bool bool_compute, uint32_t present, bool fp64,
           const std::string& i64)
      : r_(r), cls_(cls), bool_compute_(bool_compute), present_(present), i64_(i64) {
    ftype_ = cls == ComputeClass::F32 ? "float"
                                      : (cls == ComputeClass::F64 || fp64 ? "double" : "float");
  }
  const std::string& ftype() const { return ftype_; }
  Val lower(const Expr& e);
  std::string as(const Val& v, Ty to) const {
    if (v.ty == to) return v.code;
    if (to == Ty::F) return "((" + ftype_ + ")" + v.code + ")";
    if (to == Ty::I) return "((" + i64_ + ")" + v.code + ")";
    return "(" + v.code + " != 0)";
  }

 private:
  // A condition: OpenCL C does not take floats there.
  static std::string truth(const Val& v) {
    return v.ty == Ty::B ? v.code : "(" + v.code + " != 0)";
  }
  std::string suffix() const { return ftype_ == "float" ? "f" : "d"; }
  Val join2(const std::string& op, const Val& a, const Val& b, Ty min_ty) {
    Ty t = std::max(std::max(a.ty, b.ty), min_ty);
    return {"(" + as(a, t) + " " + op + " " + as(b, t) + ")", t};
  }
  Val call(const Expr& e);

  const Recipe& r_;
  ComputeClass cls_;
  bool bool_compute_;
  uint32_t present_;
  std::string i64_;
  std::string ftype_;
};

}  // namespace flagos::kernels
