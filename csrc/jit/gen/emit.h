// What an emitter for one source language provides (Dialect), and the
// language-independent kernel bodies built on it (emit.cpp). Adding a
// language (CUDA C) means one more Dialect.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jit/gen/recipe.h"

namespace flagos::kernels {

// One kernel parameter in generator.h's launch order.
struct Param {
  enum Kind { Pointer, Meta, Scalar } kind;
  std::string name;         // p0.. (operands), meta, s0..
  flagosDtype_t dtype = 0;  // Pointer: element dtype
  std::string scalar_type;  // Scalar: "double", "float" or the int64 type
  bool read_only = false;   // Pointer: an input
};

// How a fused kernel maps work items (Note [Fused kernels], fused.h).
enum class FusedMode {
  Pointwise,       // one work item per element
  ItemReduction,   // one work item per output row; the reduction is a serial loop
  GroupReduction,  // a segment of a work-group per output row, combined in local memory
};

// How a kernel's work items map onto its work (Note [Reduction strategies]
// in reduce_layout.cpp). Every mode defines `gid` (int64) for the body.
enum class Items : uint8_t {
  // gid: the work item; items past meta.work leave at once (skip()).
  PerItem,
  // Every item of a work-group runs the whole body, so the body may use
  // barrier(): gid is clamped to the last real item (meta.work > 0) and
  // `live` (int) says whether this item is a real one. Dialects with groups.
  Uniform,
  // Segments of a work-group, one unit of work each: the group's
  // `group_size` items form segments of `lanes` (int, meta.lanes: divides
  // the group size) items; gid is the segment's unit, `lane` (int) the
  // item's index in its segment, `seg` (int) the segment's index in the
  // group. Every segment of a launched group has work (the launch holds
  // whole groups of them), so the body may use barrier(). The group size
  // is baked in (reqd_work_group_size).
  Group,
  // C only: the body walks its items itself, over [rbegin, rend) (int64),
  // already clipped to meta.work; gid is not defined.
  Range,
};

class Dialect {
 public:
  virtual ~Dialect() = default;
  virtual std::string int64Type() const = 0;
  // Pragmas and helper functions every program of this language starts
  // with; @p fp64 says whether double may appear.
  virtual std::string prelude(bool fp64) const = 0;
  // An expression reading element @p index of @p ptr, as float for the
  // 16-bit types and as the storage type otherwise.
  virtual std::string load(flagosDtype_t dtype, const std::string& ptr,
                           const std::string& index) const = 0;
  // A statement writing @p value (already of a type convertible to the
  // element, float for the 16-bit types) to element @p index.
  virtual std::string store(flagosDtype_t dtype, const std::string& ptr, const std::string& index,
                            const std::string& value) const = 0;
  // An expression: float @p value rounded to @p dtype's precision and read
  // back as a float (a store and a load without memory; see Note
  // [Intermediates rounded to the inputs' type] in lower.cpp). The
  // prelude's helpers do it.
  virtual std::string roundTo(flagosDtype_t dtype, const std::string& value) const {
    if (dtype == FLAGOS_DTYPE_FLOAT16) return "flagos_h2f(flagos_f2h((float)(" + value + ")))";
    if (dtype == FLAGOS_DTYPE_BFLOAT16) return "flagos_bf2f(flagos_f2bf((float)(" + value + ")))";
    return value;
  }
  // The kernel's signature and preamble: pointers named after the params,
  // `meta`, the scalars, and the work item `gid` (int64) in scope as
  // @p items says (PerItem: valid, checked against meta.work). close()
  // ends what open() began; @p group_size: Items::Group's.
  virtual std::string open(const std::string& name, const std::vector<Param>& params, Items items,
                           uint64_t group_size) const = 0;
  // Statement leaving the current work item (C: continue, OpenCL: return).
  virtual const char* skip() const = 0;
  virtual std::string close(const std::string& name, const std::vector<Param>& params,
                            Items items) const = 0;
  // Whether kernels of this language run in work-groups with local memory
  // and barriers (Items::Uniform and Items::Group).
  virtual bool hasGroups() const { return false; }
  // Whether the body walks a range of items itself (Items::Range).
  virtual bool hasRanges() const { return false; }
  // A statement every item of a work-group must reach together.
  virtual std::string barrier() const { return ""; }
  // A declaration of group-shared scratch memory (in the kernel's body).
  virtual std::string localArray(const std::string& type, const std::string& name,
                                 uint64_t count) const {
    return "";
  }
  // Note [Work-group combine helpers]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
  // File-scope helpers combining one
  // value per work item into one result that every item receives:
  //   T flagos_group_<op>_<t>(T value, __local T* scratch)
  //     over the whole work-group;
  //   T flagos_segment_<op>_<t>(T value, __local T* scratch, int lane, int lanes)
  //     over the `lanes` items of one segment (Items::Group), `lane` being
  //     the caller's index in it and scratch that segment's own;
  // for op in sum, prod, max, min and t in f (float), d (double, only with
  // @p fp64) and l (int64); max/min propagate NaN as flagos_max/min do.
  // scratch holds groupScratch(lanes) values of T (localArray). Every item
  // of the work-group must call (they contain barriers), each segment with
  // its own scratch; the scratch may be reused as soon as the call returns.
  // A two-level tree of radix 8 (any number of lanes works): three
  // barriers, where a binary tree over 256 items takes nine, and on PoCL
  // each barrier costs about as much as the loads of a 4 KiB row.
  // "" where the dialect has no groups.
  virtual std::string groupPrelude(bool fp64) const { return ""; }
  // Elements one work item loads at once from contiguous memory
  // (loadVector), 1 where the dialect has no vector types.
  virtual int vectorWidth() const { return 1; }
  // An expression loading vectorWidth() contiguous elements of @p dtype
  // from element @p index of @p ptr as a vector of @p type ("float",
  // "double" or the int64 type): `float8` in OpenCL.
  virtual std::string loadVector(flagosDtype_t dtype, const std::string& ptr,
                                 const std::string& index, const std::string& type) const {
    return "";
  }
  // The vector forms of `type` and of the operations on them the reduction
  // kernels use (meaningful when vectorWidth() > 1):
  // the vector type; a statement storing @p value (a vector of float or
  // double) as vectorWidth() elements of @p dtype at @p index; lane @p k of
  // @p value; @p value converted to a vector of @p type; the NaN-propagating
  // max (or min) of two vectors of @p type; 1 where a lane of @p value is
  // nonzero (NaN included), else 0, as a vector of the int64 type.
  virtual std::string vectorType(const std::string& type) const { return type; }
  virtual std::string storeVector(flagosDtype_t dtype, const std::string& ptr,
                                  const std::string& index, const std::string& value,
                                  const std::string& type) const {
    return "";
  }
  virtual std::string vectorLane(const std::string& value, int k) const { return value; }
  virtual std::string convertVector(const std::string& type, const std::string& value) const {
    return value;
  }
  virtual std::string vectorMaxMin(bool max, const std::string& type, const std::string& a,
                                   const std::string& b) const {
    return "";
  }
  virtual std::string vectorTruth(const std::string& value) const { return ""; }
  // A line placed before a loop whose iterations are independent except
  // for @p reductions ("+:acc", "max:m"), so that the compiler vectorizes
  // it (C: `#pragma omp simd`, built with -fopenmp-simd); "" where the
  // language vectorizes across work items instead.
  virtual std::string simdLoop(const std::string& reductions) const { return ""; }
  // A statement adding @p value to element @p index atomically ("" where
  // the dialect has none; index.cpp only asks for float32/64, int32/64).
  virtual std::string atomicAdd(flagosDtype_t dtype, const std::string& ptr,
                                const std::string& index, const std::string& value) const {
    return "";
  }
  // File-scope lines a program needs before it uses atomicAdd on @p dtype.
  virtual std::string atomicsPrelude(flagosDtype_t dtype) const { return ""; }
  // Whether scatter-like index kernels run one work item per source element
  // (so only in place, adding with atomicAdd) rather than as one serial
  // work item that first copies self into out (Note [Index kernels]).
  virtual bool parallelScatters() const = 0;
  // Build options of a kernel; @p specialized: its shape is baked in.
  virtual std::string buildOptions(bool specialized) const { return ""; }
  // Note [Random numbers on the device] (random.cpp): file-scope lines and
  // build options that make float arithmetic the same on every compiler
  // (no contraction into fma; division and sqrt correctly rounded).
  virtual std::string strictFloatPrelude() const { return ""; }
  virtual std::string strictFloatOptions() const { return ""; }
  // A program that builds only where the device compiles double-precision
  // code (the generated tier's fp64 probe); "" where double always builds.
  virtual std::string fp64Probe() const { return ""; }

  // Fused kernels (fused.h); FusedMode::GroupReduction needs hasGroups().
  // File-scope text before a fused kernel: the prelude, the neutral body's
  // types and macros for @p mode (Note [Fused kernel bodies]).
  // @p group lanes serve one row, @p rows rows share a work-group.
  virtual std::string fusedPrelude(FusedMode mode, int group, int rows, bool fp64) const = 0;
  // The signature and preamble: parameters by name, `xindex` (int64) in
  // scope and below the parameter `xnumel`. fusedClose() ends it.
  virtual std::string fusedOpen(const std::string& name, const std::vector<Param>& params,
                                FusedMode mode) const = 0;
  virtual std::string fusedClose(const std::string& name,
                                 const std::vector<Param>& params) const = 0;
};

std::unique_ptr<Dialect> makeCDialect();
std::unique_ptr<Dialect> makeOpenCLDialect();
std::unique_ptr<Dialect> makeCudaDialect();
// The one place a language name maps to a Dialect (one instance per
// language, never freed); nullptr for a language without an emitter.
const Dialect* dialectFor(const std::string& language);

// How a dialect with work-groups (OpenCL C, CUDA C) spells what the group
// code shared by them (emit_groups.cpp) needs.
struct GroupSpelling {
  std::string fn;          // before a helper function: "" or "__device__ "
  std::string local_ptr;   // before the pointee type of a group-memory pointer: "__local " or ""
  std::string local_decl;  // before a group array declared in a kernel: "__local " or "__shared__ "
  std::string barrier;     // a statement all items of a group reach together
  std::string local_id;    // the item's index in its group
  std::string local_size;  // the group's size
  std::string group_id;    // the group's index
  std::string i64;         // the int64 type
};
// Note [Work-group combine helpers] for @p type (suffix f, d or l).
std::string groupHelpers(const GroupSpelling& g, const std::string& type,
                         const std::string& suffix);
// Fused GroupReduction kernels (Note [Fused kernel bodies]): the file-scope
// macros and helpers, and the lines after the signature (scratch arrays,
// xindex, flagos_valid).
std::string fusedGroupPrelude(const GroupSpelling& g, int group, int rows, bool fp64);
std::string fusedGroupOpen(const GroupSpelling& g);

// Helpers shared by the dialects' preludes: integer and NaN-propagating
// float helpers, written once over the macros FLAGOS_I64/FLAGOS_U64/FLAGOS_FN.
std::string commonHelpers(bool fp64);
// The orthogonal polynomials (special.cpp), prepended to a program whose
// body calls one (their names start with flagos_sf_).
std::string specialFunctionHelpers(bool fp64);
// The fused kernels' helpers every dialect shares (fused.cpp): the welford
// and argmax/argmin steps, written once over FLAGOS_FN / FLAGOS_I64.
std::string fusedHelpers(bool fp64);
// The reduction macros of a kernel without work-groups: FLAGOS_RLOOP walks
// the whole row, the group combines are identities (Note [Fused kernel bodies]).
std::string fusedSerialMacros();
// @p text with the word T replaced by @p type and an S that ends a
// lower-case word by @p suffix: helpers written once per float type.
std::string instantiate(const std::string& text, const std::string& type,
                        const std::string& suffix);

// Index arithmetic shared by the emitters: statements that split work index
// @p index over dims (runtime: the meta arrays `meta.<size_field>[d]`,
// `meta.<stride_field>[d]` per operand; baked: @p sizes / @p strides as
// constants) and add each operand's offset to `offsets[op]`.
struct IndexPlan {
  std::string index;                       // variable holding the linear index
  std::string count_field;                 // meta field with the number of dims
  std::string size_field;                  // meta field with the sizes
  std::vector<std::string> stride_fields;  // per operand: "kst[1]" etc.
  std::vector<std::string> offsets;        // per operand: variable to add to
};
std::string indexCode(const IndexPlan& p, bool baked, const std::vector<int64_t>& sizes,
                      const std::vector<std::vector<int64_t>>& strides, const std::string& i64,
                      const std::string& tmp);
// Elementwise kernels (pointwise, random): work item gid is output element
// gid (row-major). Statements declaring each operand's element offset
// (strided layouts: indexCode over meta's size/st, or baked), and in
// *index the expression of each operand's offset ("gid" when contiguous).
std::string elementOffsets(const Signature& sig, bool baked, const std::string& i64,
                           std::vector<std::string>* index);
// An int64 literal in the dialect's int64 type.
std::string int64Literal(int64_t v, const std::string& i64);

// The values of T a combine helper's scratch holds for @p lanes items
// (Note [Work-group combine helpers]).
inline uint64_t groupScratch(uint64_t lanes) {
  return lanes + 1 + (lanes + 7) / 8;
}

// Reductions and row operators (reduce.cpp, row.cpp, Note [Reduction strategies]):
// how their kernels' work items are laid out, and their bodies.
Items reduceItems(const Recipe& recipe, const Signature& sig, const Target& target);
std::string reduceBody(const Recipe& recipe, const Signature& sig, bool baked, const Dialect& dl,
                       const Target& target);
std::string rowBody(const Recipe& recipe, const Signature& sig, bool baked, const Dialect& dl,
                    const Target& target);

// Index / shape kernels (index.cpp): file-scope lines (pragmas) and body.
std::string indexPrelude(const Recipe& recipe, const Signature& sig, const Dialect& dl);
std::string indexBody(const Recipe& recipe, const Signature& sig, const Dialect& dl,
                      const Target& target);
// Window kernels (window_body.cpp, Note [Window kernels] in window.cpp): the body.
std::string windowBody(const Recipe& recipe, const Signature& sig, const Dialect& dl,
                       const Target& target);
// Random kernels (random.cpp): the Philox and distribution helpers (over
// FLAGOS_U32/U64 and the dialect's flagos_f2u/u2f/d2u/u2d bit casts), and
// the body.
std::string randomHelpers(bool fp64);
std::string randomBody(const Recipe& recipe, const Signature& sig, bool baked, const Dialect& dl,
                       bool fp64);
// Sort kernels (sort.cpp): the body.
std::string sortBody(const Recipe& recipe, const Signature& sig, const Dialect& dl,
                     const Target& target);

}  // namespace flagos::kernels
