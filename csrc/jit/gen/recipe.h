// Internals shared by recipes.cpp, selection.cpp, pack.cpp and the emitters: the
// Recipe and Signature behind generator.h's opaque types, dtype facts and
// the layout of the `flagos_meta` struct.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/gen/expr.h"
#include "jit/gen/generator.h"

namespace flagos::kernels {

enum class RecipeKind : uint8_t { Pointwise, Reduce, Row, Index, Window, Sort, Random };
enum class Reducer : uint8_t { Sum, Mean, Prod, Max, Min, Any, All };
// Where a reduction finds its dims: scalar 0 as a bitmask ({as: dims}),
// scalar 0 as one dim ({as: dim}), or always every dim.
enum class DimsArg : uint8_t { Mask, Single, All };
enum class RowOp : uint8_t { Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward };
// Index / shape operators (index.cpp, Note [Index kernels]).
enum class IndexOp : uint8_t {
  IndexSelect,
  Gather,
  Embedding,
  ScatterSrc,
  ScatterValue,
  ScatterAdd,
  IndexAdd,
  Tril,
  Triu,
  Flip,
  Cat,
  Pad
};
// Window operators (window.cpp, Note [Window kernels]).
enum class WindowOp : uint8_t {
  Im2col,
  Col2im,
  MaxPool,
  MaxPoolBackward,
  AvgPool,
  AvgPoolBackward,
  AdaptiveAvgPool,
  AdaptiveAvgPoolBackward,
  AdaptiveMaxPool,
  AdaptiveMaxPoolBackward,
  UpsampleNearest,
  UpsampleNearestBackward,
  UpsampleBilinear,
  UpsampleBilinearBackward
};
// Whether a window operator's work items walk the image (gather form: the
// backwards and col2im) rather than the grid of windows.
bool windowGathers(WindowOp op);
// Rank sorts and index-returning reductions (sort.cpp, Note [Sort kernels]).
enum class SortOp : uint8_t { Sort, Topk, Argmax, Argmin, MaxDim, MinDim };

// Random operators (random.cpp, Note [Random numbers on the device]).
enum class RandomOp : uint8_t {
  Uniform,
  Normal,
  LogNormal,
  Exponential,
  Cauchy,
  Geometric,
  BernoulliScalar,
  BernoulliTensor,
  Dropout,
  RandomFromTo,
  Random
};

// How values are computed: int64 for integral and bool, float for float32
// and the 16-bit types, double for float64.
enum class ComputeClass : uint8_t { Int = 0, F32 = 1, F64 = 2 };

struct Recipe {
  RecipeKind kind = RecipeKind::Pointwise;
  std::string id;
  uint64_t identity = 0;  // stable hash of what the kernel computes
  std::vector<std::string> inputs;
  std::vector<std::string> scalars;
  int32_t num_outputs = 1;
  // Pointwise.
  ExprPtr expr;
  // Why (compute class, present-scalars mask) cannot be generated, "" when
  // it can (Note [Support checks on first use]).
  const std::string& pointwiseSupport(ComputeClass cls, uint32_t present_mask) const;
  struct SupportEntry {
    std::atomic<bool> known{false};
    std::string why;  // written once, before known
  };
  // index = class << num_scalars | mask; sized by makeRecipe.
  std::unique_ptr<SupportEntry[]> support;
  mutable std::mutex support_mu;
  // Reduce / Row.
  Reducer reducer = Reducer::Sum;
  DimsArg dims_arg = DimsArg::All;
  RowOp row = RowOp::Softmax;
  // Index.
  IndexOp index_op = IndexOp::IndexSelect;
  // Window.
  WindowOp window_op = WindowOp::Im2col;
  // Sort.
  SortOp sort_op = SortOp::Sort;
  // Random.
  RandomOp random_op = RandomOp::Uniform;
  int random_float_scalars = 0;  // leading scalars passed as floats
};

struct Operand {
  flagosDtype_t dtype = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

struct Signature {
  std::vector<Operand> operands;  // outputs, then inputs
  int32_t num_outputs = 0;
  std::vector<flagosDtype_t> scalar_dtypes;  // 0: absent
  bool contiguous = false;                   // pointwise layout class
  uint64_t dims_mask = 0;                    // Reduce: reduced dims; Row: 1 << row dim
};

// --- dtypes ---------------------------------------------------------------
inline bool isFloating(flagosDtype_t d) {
  return (d >> 8) == 2 || (d >> 8) == 4;
}
inline bool isSupportedDtype(flagosDtype_t d) {
  switch (d) {
    case FLAGOS_DTYPE_BOOL:
    case FLAGOS_DTYPE_UINT8:
    case FLAGOS_DTYPE_INT8:
    case FLAGOS_DTYPE_INT16:
    case FLAGOS_DTYPE_INT32:
    case FLAGOS_DTYPE_INT64:
    case FLAGOS_DTYPE_FLOAT16:
    case FLAGOS_DTYPE_BFLOAT16:
    case FLAGOS_DTYPE_FLOAT32:
    case FLAGOS_DTYPE_FLOAT64:
      return true;
    default:
      return false;
  }
}
const char* dtypeName(flagosDtype_t d);

// The dtype values are computed in for a pointwise call (generator.h rules)
// and its class.
flagosDtype_t computeDtype(const Signature& sig);
ComputeClass classOf(flagosDtype_t compute);

// --- flagos_meta ----------------------------------------------------------
// The struct is a sequence of int64 arrays (`long` in OpenCL, 8-byte
// aligned everywhere); emitters declare it and pack() fills it in this
// order.
struct MetaField {
  std::string name;
  int count;  // 1: a plain field, else an array
};
std::vector<MetaField> metaLayout(const Recipe& recipe, int num_operands);

// Normalized dims a call reduces (Reduce) or 1 << the row dim (Row).
uint64_t dimsMaskOf(const Recipe& recipe, const flagosScalar* scalars, int32_t num_scalars,
                    int32_t input_ndim);

// --- reductions and row operators (reduce_layout.cpp) ----------------------
// The dims of a Reduce or Row call as its kernels walk them: kept dims
// (one output element, or one row, each) and the reduced dims (Reduce) or
// the row dim (Row), size-1 dims dropped and neighbours every operand walks
// as one merged. pack() fills meta with it; specialized kernels bake it.
struct ReduceLayout {
  std::vector<int64_t> ksize;             // kept dims
  std::vector<std::vector<int64_t>> kst;  // per operand (Reduce: out, in)
  std::vector<int64_t> rsize;             // reduced dims (Row: the row dim)
  std::vector<std::vector<int64_t>> rst;  // per operand (Reduce: in only)
  int64_t work = 1;                       // outputs (Reduce) or rows (Row)
  int64_t count = 1;                      // elements reduced per output / row
};
// @p shapes / @p strides: every operand's (Reduce: output, then input).
ReduceLayout reduceLayout(const Recipe& recipe, const std::vector<std::vector<int64_t>>& shapes,
                          const std::vector<std::vector<int64_t>>& strides, uint64_t dims_mask);
// The same for a call (outputs, then inputs).
ReduceLayout reduceLayout(const Recipe& recipe, const Call& call);

// Note [Reduction strategies] (reduce_layout.cpp): how a Reduce or Row kernel
// maps its work onto work items; part of its key.
enum class ReduceStrategy : uint8_t {
  Rows = 1,     // one work item per output / row, walking its elements
  Columns = 2,  // neighbouring work items own neighbouring outputs / rows,
                // so they walk their elements in step
  Group = 3,    // a segment of a work-group per output / row, its items
                // striding over it together
};
ReduceStrategy reduceStrategy(const Recipe& recipe, const ReduceLayout& layout,
                              const Target& target);
// The work-group size of Group kernels on @p target (0: no groups); the
// segments a group of a call with @p rows outputs (rows) holds: a power of
// two that divides both, so that no segment is past the work, with
// segments of at least 32 items where the rows allow (meta.lanes holds the
// group size over it); the scratch values a Group kernel declares for any
// of them.
uint64_t groupSize(const Target& target);
uint64_t segmentsPerGroup(const Target& target, int64_t rows);
uint64_t groupScratchMax(uint64_t group);
// Work items of a Reduce or Row launch (meta.work), before rounding to
// groups: outputs / rows, or for OpenCL Columns reductions the lanes that
// own up to vectorWidth() neighbouring outputs each.
int64_t reduceWorkItems(const Recipe& recipe, const ReduceLayout& layout, ReduceStrategy strategy,
                        const Target& target);

// Why a pointwise expression cannot be generated for this compute class
// and set of present scalars ("" when it can). Defined in emit.cpp.
std::string checkPointwise(const Recipe& recipe, ComputeClass cls, uint32_t present_mask);

// The key of a generic kernel whose code depends only on the call's dtypes
// and which optional scalars are present (index, window and sort kernels):
// generator version, recipe, variant, target, operand count, the scalars'
// presence mask, then every operand's dtype (outputs, then inputs).
void genericKey(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
                KernelKey* key);

// --- index / shape operators (index.cpp) -----------------------------------
// Fills r's Index fields for a catalog row of family index/shape, or false
// with *why_not.
bool makeIndexRecipe(const OpInfo& op, Recipe* r, std::string* why_not);
bool indexKeyFor(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
                 KernelKey* key, std::string* why_not);
// Fills flagos_meta's words; returns the launch's global size.
uint64_t packIndex(const Recipe& recipe, const Call& call, const Target& target,
                   std::vector<int64_t>* meta);
std::vector<MetaField> indexMetaLayout(int num_operands);
// Whether scalar k is passed as a float (double; float without fp64).
bool indexFloatScalar(const Recipe& recipe, int k, flagosDtype_t out_dtype);

// --- window operators (window.cpp) -----------------------------------------
// Fills r's Window fields for a catalog row of family pooling/convolution
// (im2col, col2im, pools, nearest upsampling), or false with *why_not.
bool makeWindowRecipe(const OpInfo& op, Recipe* r, std::string* why_not);
bool windowKeyFor(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
                  KernelKey* key, std::string* why_not);
// Fills flagos_meta's words; returns the launch's global size.
uint64_t packWindow(const Recipe& recipe, const Call& call, const Target& target,
                    std::vector<int64_t>* meta);
std::vector<MetaField> windowMetaLayout(int num_operands);
// Whether scalar k is passed as a float (double; float without fp64).
bool windowFloatScalar(const Recipe& recipe, int k);

// --- sort, topk and arg reductions (sort.cpp) --------------------------------
// Whether @p id is one of sort.cpp's operators (sort, topk, argmax, argmin,
// max_dim, min_dim).
bool isSortOp(const std::string& id);
// Fills r's Sort fields, or false with *why_not.
bool makeSortRecipe(const OpInfo& op, Recipe* r, std::string* why_not);
bool sortKeyFor(const Recipe& recipe, const Call& call, Variant variant, const Target& target,
                KernelKey* key, std::string* why_not);
// Fills flagos_meta's words for pass @p pass; returns the launch's global
// size.
uint64_t packSort(const Recipe& recipe, const Call& call, const Target& target,
                  std::vector<int64_t>* meta, int pass);
// Note [Multi-pass calls] for sort.cpp's operators (Note [Long sorts]).
std::vector<ScratchBuffer> sortScratch(const Recipe& recipe, const Call& call,
                                       const Target& target);
int sortPasses(const Recipe& recipe, const Call& call);
std::vector<MetaField> sortMetaLayout(const Recipe& recipe, int num_operands);

// --- random operators (random.cpp) ------------------------------------------
// Fills r's Random fields for a catalog row of family random, or false with
// *why_not. Its kernels take the pointwise meta layout and packing: element
// i of the output (row-major) is work item i.
bool makeRandomRecipe(const OpInfo& op, Recipe* r, std::string* why_not);
// The scalars a call passes: the catalog's, the generator as two (seed,
// offset: Note [Random numbers on the device]).
int randomScalarCount(const Recipe& recipe);
// Whether scalar k is passed as a float (double; float without fp64).
bool randomFloatScalar(const Recipe& recipe, int k);
// Whether the call's dtypes and argument values are generated (else the
// next tier, whose CPU kernel raises CPU's error for bad arguments).
bool randomSupports(const Recipe& recipe, const Call& call, std::string* why_not);

}  // namespace flagos::kernels
