// Sort recipes (csrc/jit/gen/sort.cpp, Note [Sort kernels]): rank sorts
// (sort, topk) and index-returning reductions (argmax, argmin, max_dim,
// min_dim); and the bilinear upsampling window kernels (window.cpp).
// Generated "c" kernels against straightforward references written here
// (torch CPU's rules: NaN sorts last ascending and first descending, stable
// ties, the first max/min and the first NaN win), and what keyFor declines.
#include <algorithm>
#include <functional>
#include <numeric>

#include "generator_harness.h"

namespace flagos::kernels::testing {
namespace {

constexpr flagosDtype_t F32 = FLAGOS_DTYPE_FLOAT32, F64 = FLAGOS_DTYPE_FLOAT64,
                        I16 = FLAGOS_DTYPE_INT16, I32 = FLAGOS_DTYPE_INT32,
                        I64 = FLAGOS_DTYPE_INT64, BF16 = FLAGOS_DTYPE_BFLOAT16,
                        BOOL = FLAGOS_DTYPE_BOOL, C64 = FLAGOS_DTYPE_COMPLEX64;

std::shared_ptr<const Recipe> recipeOf(const std::string& id) {
  return catalogRecipe(id, {"index", "reduction", "pooling"});
}

flagosScalar boolScalar(bool v) {
  flagosScalar s{};
  s.dtype = FLAGOS_DTYPE_BOOL;
  s.i = v;
  s.f = v;
  return s;
}

// Same values (NaN matches NaN; -0 matches 0) and, where given, indices.
void expectSame(const HostTensor& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), (int64_t)want.size()) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.get(i), w = want[i];
    if (std::isnan(w))
      EXPECT_TRUE(std::isnan(g)) << what << " [" << i << "] got " << g;
    else
      EXPECT_EQ(g, w) << what << " [" << i << "]";
  }
}

// A row-major shape split around `dim`: outer rows, the dim, inner rows.
struct Split {
  int64_t outer = 1, len = 1, inner = 1;
  Split(const std::vector<int64_t>& shape, int dim) {
    for (int d = 0; d < (int)shape.size(); ++d) {
      if (d < dim) outer *= shape[d];
      if (d == dim) len = shape[d];
      if (d > dim) inner *= shape[d];
    }
  }
};

// torch's sort order: NaN is the largest value; ties keep their positions.
bool before(double a, double b, bool descending) {
  if (descending) return std::isnan(a) ? !std::isnan(b) : !std::isnan(b) && a > b;
  return !std::isnan(a) && (std::isnan(b) || a < b);
}

// The first k of a stable sort of each row of @p x along @p dim.
void sortRef(const HostTensor& x, int dim, bool descending, int64_t k, std::vector<double>* values,
             std::vector<double>* indices) {
  const Split s(x.shape, dim);
  values->assign(s.outer * k * s.inner, 0);
  indices->assign(values->size(), 0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      std::vector<double> row(s.len);
      for (int64_t j = 0; j < s.len; ++j) row[j] = x.get((o * s.len + j) * s.inner + in);
      std::vector<int64_t> order(s.len);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return before(row[a], row[b], descending); });
      for (int64_t r = 0; r < k; ++r) {
        (*values)[(o * k + r) * s.inner + in] = row[order[r]];
        (*indices)[(o * k + r) * s.inner + in] = (double)order[r];
      }
    }
}

// Values with ties, NaN, infinities and signed zeros.
HostTensor awkward(HostTensor t, int seed) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t h = (i * 7 + seed * 13) % 23;
    double v = std::round(testValue(i + seed, -5, 5));  // many ties
    if (isFloating(t.dtype)) {
      if (h == 3 || h == 17) v = NAN;
      if (h == 5) v = INFINITY;
      if (h == 8) v = -INFINITY;
      if (h == 11) v = -0.0;
      if (h == 12) v = 0.0;
      if (h == 20) v += 0.25;
    }
    t.set(i, v);
  }
  return t;
}

std::vector<int64_t> withDim(std::vector<int64_t> shape, int dim, int64_t v) {
  shape[dim] = v;
  return shape;
}

TEST(SortRecipes, CatalogRows) {
  for (const char* id : {"sort", "topk", "argmax", "argmin", "max_dim", "min_dim",
                         "upsample_bilinear2d", "upsample_bilinear2d_backward"}) {
    auto r = recipeOf(id);
    ASSERT_TRUE(r) << id;
  }
  EXPECT_EQ(recipeOf("sort")->kind, RecipeKind::Sort);
  EXPECT_EQ(recipeOf("max_dim")->kind, RecipeKind::Sort);
  EXPECT_EQ(recipeOf("upsample_bilinear2d")->kind, RecipeKind::Window);
  // A row that does not have the catalog's operands is refused.
  std::string why;
  OpInfo bad{"sort", "index", "", {"self"}, {"dim"}, 2};
  EXPECT_EQ(makeRecipe(bad, &why), nullptr);
  EXPECT_NE(why.find("unexpected operands"), std::string::npos) << why;
}

TEST(SortKernels, SortAnyDimStridedStable) {
  const std::vector<int64_t> shape = {3, 9, 4};
  for (flagosDtype_t dt : {F32, F64, I32, I16, BF16}) {
    for (int dim : {0, 1, 2}) {
      for (bool descending : {false, true}) {
        const std::string at = std::string(dtypeName(dt)) + " dim " + std::to_string(dim) +
                               (descending ? " descending" : " ascending");
        HostTensor x = awkward(HostTensor::reversedLayout(dt, shape), dim + 1);
        HostTensor values = HostTensor::reversedLayout(dt, shape);
        HostTensor indices =
            dim == 1 ? HostTensor::reversedLayout(I64, shape) : HostTensor::contiguous(I64, shape);
        ASSERT_TRUE(runC(*recipeOf("sort"), {&values, &indices}, {&x},
                         {boolScalar(true), intScalar(dim), boolScalar(descending)},
                         Variant::Generic))
            << at;
        std::vector<double> wv, wi;
        sortRef(x, dim, descending, shape[dim], &wv, &wi);
        expectSame(values, wv, "sort values " + at);
        expectSame(indices, wi, "sort indices " + at);
      }
    }
  }
  // stable=None (the default of sort.stable) and a 0-dim tensor.
  HostTensor x = HostTensor::contiguous(F32, {}), v = x, i = HostTensor::contiguous(I64, {});
  x.set(0, 2.5);
  ASSERT_TRUE(runC(*recipeOf("sort"), {&v, &i}, {&x},
                   {noneScalar(), intScalar(0), boolScalar(false)}, Variant::Generic));
  EXPECT_EQ(v.get(0), 2.5);
  EXPECT_EQ(i.get(0), 0);
}

TEST(SortKernels, TopkLargestAndSmallest) {
  const std::vector<int64_t> shape = {4, 11, 3};
  for (flagosDtype_t dt : {F32, F64, I64}) {
    for (int dim : {1, 2}) {
      for (bool largest : {true, false}) {
        const int64_t k = dim == 1 ? 4 : 2;
        const std::string at = std::string(dtypeName(dt)) + " dim " + std::to_string(dim) +
                               (largest ? " largest" : " smallest");
        // Distinct values (topk's tie order is unspecified), a few NaN.
        HostTensor x = HostTensor::reversedLayout(dt, shape);
        for (int64_t e = 0; e < x.numel(); ++e)
          x.set(e, isFloating(dt) && e % 10 == 4 ? NAN : (double)((e * 37) % 131) - 60);
        HostTensor values = HostTensor::contiguous(dt, withDim(shape, dim, k));
        HostTensor indices = HostTensor::reversedLayout(I64, withDim(shape, dim, k));
        ASSERT_TRUE(runC(*recipeOf("topk"), {&values, &indices}, {&x},
                         {intScalar(k), intScalar(dim), boolScalar(largest), boolScalar(true)},
                         Variant::Generic))
            << at;
        std::vector<double> wv, wi;
        sortRef(x, dim, largest, k, &wv, &wi);
        expectSame(values, wv, "topk values " + at);
        expectSame(indices, wi, "topk indices " + at);
      }
    }
  }
}

// The number of launches runC() made (0 on failure).
int runPasses(const Recipe& recipe, std::vector<HostTensor*> outs, std::vector<HostTensor*> ins,
              std::vector<flagosScalar> scalars) {
  int passes = 0;
  return runC(recipe, outs, ins, scalars, Variant::Generic, nullptr, &passes) ? passes : 0;
}

// Note [Long sorts]: rows longer than 4096 as a block rank sort and merge
// passes over scratch; any dim and strides, ties, NaN, infinities, signed
// zeros, lengths that are not powers of two, topk.
TEST(SortKernels, LongRowsMergeSort) {
  struct Case {
    flagosDtype_t dt;
    std::vector<int64_t> shape;
    int dim;
    int expect_passes;
  };
  const std::vector<Case> cases = {
      {F32, {2, 5000}, 1, 8},   // 79 blocks of 64: 7 merges
      {F64, {4097, 3}, 0, 8},   // dim 0, a partner block past the row's end
      {I32, {3, 8192}, 1, 8},   // a power of two
      {BF16, {2, 6001}, 1, 8},  // many ties
      {I16, {2, 2, 4500}, 2, 8},
      {F32, {1, 70000}, 1, 12},  // 11 merges, the last of a full and a partial block
  };
  for (const Case& c : cases) {
    for (bool descending : {false, true}) {
      const std::string at = std::string(dtypeName(c.dt)) + " " + std::to_string(c.shape[c.dim]) +
                             " dim " + std::to_string(c.dim) +
                             (descending ? " descending" : " ascending");
      HostTensor x = awkward(c.dim == 0 ? HostTensor::reversedLayout(c.dt, c.shape)
                                        : HostTensor::contiguous(c.dt, c.shape),
                             c.dim + 3);
      if (c.dt == F32)  // mostly distinct values: the merges move elements far
        for (int64_t e = 0; e < x.numel(); e += 3) x.set(e, testValue(e, -1000, 1000));
      HostTensor values = HostTensor::reversedLayout(c.dt, c.shape);
      HostTensor indices = HostTensor::contiguous(I64, c.shape);
      EXPECT_EQ(runPasses(*recipeOf("sort"), {&values, &indices}, {&x},
                          {boolScalar(true), intScalar(c.dim), boolScalar(descending)}),
                c.expect_passes)
          << at;
      std::vector<double> wv, wi;
      sortRef(x, c.dim, descending, c.shape[c.dim], &wv, &wi);
      expectSame(values, wv, "long sort values " + at);
      expectSame(indices, wi, "long sort indices " + at);
      if (::testing::Test::HasFailure()) return;
    }
  }
  // topk of a long row: the first k of the full sort.
  const std::vector<int64_t> shape = {3, 9000};
  HostTensor x = HostTensor::contiguous(F32, shape);
  for (int64_t e = 0; e < x.numel(); ++e)
    x.set(e, e % 97 == 5 ? NAN : (double)((e * 7919) % 27011) - 13000);
  for (bool largest : {true, false}) {
    for (int64_t k : {1, 10, 9000}) {
      HostTensor values = HostTensor::contiguous(F32, withDim(shape, 1, k));
      HostTensor indices = HostTensor::reversedLayout(I64, withDim(shape, 1, k));
      EXPECT_EQ(runPasses(*recipeOf("topk"), {&values, &indices}, {&x},
                          {intScalar(k), intScalar(1), boolScalar(largest), boolScalar(true)}),
                9);
      std::vector<double> wv, wi;
      sortRef(x, 1, largest, k, &wv, &wi);
      const std::string at = "k " + std::to_string(k) + (largest ? " largest" : " smallest");
      expectSame(values, wv, "long topk values " + at);
      expectSame(indices, wi, "long topk indices " + at);
    }
  }
}

// torch CPU's argmax/argmin/max.dim/min.dim over @p dim (-1: flattened):
// the first max/min; a NaN is both, and the first NaN wins.
void argRef(const HostTensor& x, int dim, bool max, std::vector<double>* values,
            std::vector<double>* indices) {
  const Split s = dim < 0 ? Split({x.numel()}, 0) : Split(x.shape, dim);
  values->assign(s.outer * s.inner, 0);
  indices->assign(values->size(), 0);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      double best = 0;
      int64_t arg = -1;
      for (int64_t j = 0; j < s.len; ++j) {
        const double v = x.get((o * s.len + j) * s.inner + in);
        if (arg >= 0 && std::isnan(best)) break;
        if (arg < 0 || std::isnan(v) || (max ? v > best : v < best)) best = v, arg = j;
      }
      (*values)[o * s.inner + in] = best;
      (*indices)[o * s.inner + in] = (double)arg;
    }
}

TEST(SortKernels, ArgmaxArgminMaxMinDim) {
  const std::vector<int64_t> shape = {5, 6, 3};
  for (flagosDtype_t dt : {F32, F64, I32, BOOL}) {
    HostTensor x = awkward(HostTensor::reversedLayout(dt, shape), 4);
    if (!isFloating(dt)) {  // ties: the first one wins
      for (int64_t e = 0; e < x.numel(); ++e) x.set(e, (e * 5) % 7 < 3);
      if (dt == I32)
        for (int64_t e = 0; e < x.numel(); ++e) x.set(e, (e * 5) % 7 - 3);
    }
    for (int dim : {0, 1, 2, -1}) {
      for (bool keepdim : {false, true}) {
        std::vector<int64_t> oshape;
        for (int d = 0; d < (int)shape.size(); ++d) {
          if (dim >= 0 && d != dim)
            oshape.push_back(shape[d]);
          else if (keepdim)
            oshape.push_back(1);
        }
        const std::vector<flagosScalar> sc = {dim < 0 ? noneScalar() : intScalar(dim),
                                              boolScalar(keepdim)};
        for (bool max : {true, false}) {
          const std::string at = std::string(dtypeName(dt)) + " dim " + std::to_string(dim) +
                                 (keepdim ? " keepdim" : "") + (max ? " max" : " min");
          std::vector<double> wv, wi;
          argRef(x, dim, max, &wv, &wi);
          if (dt != BOOL) {
            HostTensor arg = HostTensor::reversedLayout(I64, oshape);
            ASSERT_TRUE(
                runC(*recipeOf(max ? "argmax" : "argmin"), {&arg}, {&x}, sc, Variant::Generic))
                << at;
            expectSame(arg, wi, "arg " + at);
          }
          if (dim < 0) continue;
          HostTensor values = HostTensor::reversedLayout(dt, oshape);
          HostTensor indices = HostTensor::contiguous(I64, oshape);
          ASSERT_TRUE(runC(*recipeOf(max ? "max_dim" : "min_dim"), {&values, &indices}, {&x}, sc,
                           Variant::Generic))
              << at;
          expectSame(values, wv, "values " + at);
          expectSame(indices, wi, "indices " + at);
        }
      }
    }
  }
  // A 0-dim input: index 0.
  HostTensor s = HostTensor::contiguous(F32, {}), arg = HostTensor::contiguous(I64, {});
  s.set(0, -1.5);
  arg.set(0, 7);
  ASSERT_TRUE(
      runC(*recipeOf("argmin"), {&arg}, {&s}, {noneScalar(), boolScalar(false)}, Variant::Generic));
  EXPECT_EQ(arg.get(0), 0);
}

TEST(SortKernels, Declines) {
  const Target c{"c", true};
  std::string why;
  auto sort = recipeOf("sort");
  const std::vector<flagosScalar> sc = {boolScalar(true), intScalar(1), boolScalar(false)};
  HostTensor x = HostTensor::contiguous(F32, {2, 5}), v = x,
             i = HostTensor::contiguous(I64, {2, 5});
  EXPECT_FALSE(declines(*sort, {&v, &i}, {&x}, sc, c, &why)) << why;
  // Rows longer than 4096 need a scratch operand (Note [Long sorts]); rows
  // of at most 4096 are one launch and take none.
  HostTensor big = HostTensor::contiguous(F32, {2, 4097}), bv = big,
             bi = HostTensor::contiguous(I64, {2, 4097});
  EXPECT_TRUE(declines(*sort, {&bv, &bi}, {&big}, sc, c, &why));
  EXPECT_NE(why.find("scratch"), std::string::npos) << why;
  {
    std::vector<flagosTensor> o{bv.view(), bi.view()};
    const flagosTensor bx = big.view();
    Call bcall{o.data(), 2, &bx, 1, sc.data(), 3};
    // 4097 in blocks of 64: 65 blocks, 7 merges, two ping-pong buffers of
    // 2 * 4097 positions and values each.
    const int64_t n = 2 * 2 * 4097;
    for (const Target& t : {c, Target{"opencl-c", false}}) {
      const std::vector<ScratchBuffer> need = scratchFor(*sort, bcall, t);
      ASSERT_EQ(need.size(), 2u);
      EXPECT_EQ(need[0].dtype, I64);
      EXPECT_EQ(need[0].elements, n);
      EXPECT_EQ(need[1].dtype, F32);
      EXPECT_EQ(need[1].elements, n);
    }
    HostTensor pos = HostTensor::contiguous(I64, {n}), val = HostTensor::contiguous(F32, {n});
    o.push_back(pos.view());
    o.push_back(val.view());
    bcall.outputs = o.data();
    bcall.num_outputs = 4;
    KernelKey key;
    EXPECT_TRUE(keyFor(*sort, bcall, Variant::Generic, c, &key, &why)) << why;
    EXPECT_EQ(passesOf(*sort, bcall), 8);
    HostTensor small = HostTensor::contiguous(F32, {n - 1});
    o[3] = small.view();
    EXPECT_FALSE(keyFor(*sort, bcall, Variant::Generic, c, &key, &why));
    EXPECT_NE(why.find("scratch 1"), std::string::npos) << why;
    o[3] = pos.view();  // positions where values go
    EXPECT_FALSE(keyFor(*sort, bcall, Variant::Generic, c, &key, &why));
    bcall.num_outputs = 3;  // one buffer short
    EXPECT_FALSE(keyFor(*sort, bcall, Variant::Generic, c, &key, &why));
    // float64 without fp64: declined, so no scratch is asked for.
    HostTensor x64 = HostTensor::contiguous(F64, {2, 4097}), v64 = x64;
    std::vector<flagosTensor> o64{v64.view(), bi.view()};
    const flagosTensor bx64 = x64.view();
    const Call call64{o64.data(), 2, &bx64, 1, sc.data(), 3};
    EXPECT_TRUE(scratchFor(*sort, call64, Target{"opencl-c", false}).empty());
  }
  HostTensor ok = HostTensor::contiguous(F32, {2, 4096}), ov = ok,
             oi = HostTensor::contiguous(I64, {2, 4096});
  EXPECT_FALSE(declines(*sort, {&ov, &oi}, {&ok}, sc, c, &why)) << why;
  {
    std::vector<flagosTensor> o{ov.view(), oi.view()};
    const flagosTensor ox = ok.view();
    const Call ocall{o.data(), 2, &ox, 1, sc.data(), 3};
    EXPECT_TRUE(scratchFor(*sort, ocall, c).empty());
    EXPECT_EQ(passesOf(*sort, ocall), 1);
    HostTensor pos = HostTensor::contiguous(I64, {16}), val = HostTensor::contiguous(F32, {16});
    EXPECT_TRUE(declines(*sort, {&ov, &oi, &pos, &val}, {&ok}, sc, c, &why));
  }
  // Indices not int64, values of another dtype, wrong shapes, a bad dim.
  HostTensor i32 = HostTensor::contiguous(I32, {2, 5});
  EXPECT_TRUE(declines(*sort, {&v, &i32}, {&x}, sc, c, &why));
  EXPECT_NE(why.find("expected int64"), std::string::npos) << why;
  HostTensor v64 = HostTensor::contiguous(F64, {2, 5});
  EXPECT_TRUE(declines(*sort, {&v64, &i}, {&x}, sc, c, &why));
  HostTensor v3 = HostTensor::contiguous(F32, {2, 3});
  EXPECT_TRUE(declines(*sort, {&v3, &i}, {&x}, sc, c, &why));
  EXPECT_TRUE(declines(*sort, {&v, &i}, {&x}, {boolScalar(true), intScalar(2), boolScalar(false)},
                       c, &why));
  EXPECT_TRUE(declines(*sort, {&v, &i}, {&x}, {boolScalar(true), noneScalar(), boolScalar(false)},
                       c, &why));
  // float64 without fp64, complex, specialized kernels.
  HostTensor x64 = HostTensor::contiguous(F64, {2, 5});
  EXPECT_TRUE(declines(*sort, {&v64, &i}, {&x64}, sc, Target{"opencl-c", false}, &why));
  EXPECT_NE(why.find("fp64"), std::string::npos) << why;
  EXPECT_FALSE(declines(*sort, {&v64, &i}, {&x64}, sc, Target{"opencl-c", true}, &why)) << why;
  HostTensor xc = HostTensor::contiguous(C64, {2, 5}), vc = xc;
  EXPECT_TRUE(declines(*sort, {&vc, &i}, {&xc}, sc, c, &why));
  EXPECT_TRUE(declines(*sort, {&v, &i}, {&x}, sc, c, &why, Variant::Specialized));
  // Values sharing memory with the input (sort(x, out=(x, i))).
  const flagosTensor xv = x.view();
  std::vector<flagosTensor> ao{xv, i.view()};
  Call acall{ao.data(), 2, &xv, 1, sc.data(), 3};
  KernelKey akey;
  EXPECT_FALSE(keyFor(*sort, acall, Variant::Generic, c, &akey, &why));
  EXPECT_NE(why.find("overlaps"), std::string::npos) << why;
  // topk: k beyond the row, outputs not of k elements.
  auto topk = recipeOf("topk");
  HostTensor tv = HostTensor::contiguous(F32, {2, 3}), ti = HostTensor::contiguous(I64, {2, 3});
  const auto tsc = [](int64_t k) {
    return std::vector<flagosScalar>{intScalar(k), intScalar(1), boolScalar(true),
                                     boolScalar(true)};
  };
  EXPECT_FALSE(declines(*topk, {&tv, &ti}, {&x}, tsc(3), c, &why)) << why;
  EXPECT_TRUE(declines(*topk, {&tv, &ti}, {&x}, tsc(2), c, &why));
  EXPECT_TRUE(declines(*topk, {&tv, &ti}, {&x}, tsc(6), c, &why));
  // max_dim needs a dim; argmax's output shape follows keepdim.
  auto max_dim = recipeOf("max_dim");
  HostTensor mv = HostTensor::contiguous(F32, {2}), mi = HostTensor::contiguous(I64, {2});
  EXPECT_FALSE(declines(*max_dim, {&mv, &mi}, {&x}, {intScalar(1), boolScalar(false)}, c, &why))
      << why;
  EXPECT_TRUE(declines(*max_dim, {&mv, &mi}, {&x}, {noneScalar(), boolScalar(false)}, c, &why));
  auto argmax = recipeOf("argmax");
  EXPECT_TRUE(declines(*argmax, {&mi}, {&x}, {intScalar(1), boolScalar(true)}, c, &why));
  HostTensor scalar = HostTensor::contiguous(I64, {});
  EXPECT_FALSE(declines(*argmax, {&scalar}, {&x}, {noneScalar(), boolScalar(false)}, c, &why))
      << why;
  HostTensor ones = HostTensor::contiguous(I64, {1, 1});
  EXPECT_FALSE(declines(*argmax, {&ones}, {&x}, {noneScalar(), boolScalar(true)}, c, &why)) << why;
  EXPECT_TRUE(declines(*argmax, {&ones}, {&x}, {noneScalar(), boolScalar(false)}, c, &why));
}

// Devices without fp64: no double anywhere in a float32 kernel's source.
TEST(SortKernels, NoDoubleWithoutFp64) {
  const Target cl{"opencl-c", false};
  HostTensor x = HostTensor::contiguous(F32, {3, 4}), v = x,
             i = HostTensor::contiguous(I64, {3, 4});
  HostTensor tv = HostTensor::contiguous(F32, {3, 2}), ti = HostTensor::contiguous(I64, {3, 2});
  HostTensor mv = HostTensor::contiguous(F32, {3}), mi = HostTensor::contiguous(I64, {3});
  HostTensor img = HostTensor::contiguous(F32, {1, 3, 4, 5}),
             up = HostTensor::contiguous(F32, {1, 3, 7, 9});
  // A long sort (Note [Long sorts]) with its scratch as a third output.
  HostTensor lx = HostTensor::contiguous(F32, {2, 5000}), lv = lx,
             li = HostTensor::contiguous(I64, {2, 5000}),
             lp = HostTensor::contiguous(I64, {2 * 2 * 5000}),
             ls = HostTensor::contiguous(F32, {2 * 2 * 5000});
  struct Case {
    const char* id;
    std::vector<HostTensor*> outs, ins;
    std::vector<flagosScalar> scalars;
  };
  const Case cases[] = {
      {"sort", {&v, &i}, {&x}, {boolScalar(true), intScalar(1), boolScalar(true)}},
      {"topk", {&tv, &ti}, {&x}, {intScalar(2), intScalar(1), boolScalar(true), boolScalar(true)}},
      {"sort", {&lv, &li, &lp, &ls}, {&lx}, {boolScalar(true), intScalar(1), boolScalar(false)}},
      {"argmin", {&mi}, {&x}, {intScalar(1), boolScalar(false)}},
      {"max_dim", {&mv, &mi}, {&x}, {intScalar(1), boolScalar(false)}},
      {"upsample_bilinear2d",
       {&up},
       {&img},
       {intScalar(7), intScalar(9), boolScalar(false), floatScalar(1.5), noneScalar()}},
      {"upsample_bilinear2d_backward",
       {&img},
       {&up},
       {intScalar(7), intScalar(9), intScalar(1), intScalar(3), intScalar(4), intScalar(5),
        boolScalar(true), noneScalar(), noneScalar()}},
  };
  for (const Case& k : cases) {
    auto r = recipeOf(k.id);
    std::vector<flagosTensor> o, in;
    for (auto* t : k.outs) o.push_back(t->view());
    for (auto* t : k.ins) in.push_back(t->view());
    Call call{o.data(),           (int32_t)o.size(), in.data(),
              (int32_t)in.size(), k.scalars.data(),  (int32_t)k.scalars.size()};
    KernelKey key;
    std::string why;
    ASSERT_TRUE(keyFor(*r, call, Variant::Generic, cl, &key, &why)) << k.id << ": " << why;
    Source src = emit(*r, *signatureOf(*r, call), Variant::Generic, cl);
    EXPECT_EQ(src.text.find("double"), std::string::npos) << k.id << "\n" << src.text;
    Launch launch;
    pack(*r, call, cl, &launch);
    EXPECT_LE(launch.meta.size(), 1024u) << k.id;  // CL_DEVICE_MAX_PARAMETER_SIZE's minimum
  }
}

// --- bilinear upsampling (window.cpp) ---------------------------------------

// torch CPU's UpSample.h in T: area_pixel_compute_scale,
// area_pixel_compute_source_index, compute_source_index_and_lambda.
template <typename T>
T areaScale(int64_t in, int64_t out, bool align, double scale) {
  if (align) return out > 1 ? (T)(in - 1) / (T)(out - 1) : (T)0;
  return scale > 0 ? (T)(1.0 / scale) : (T)in / (T)out;
}
template <typename T>
struct Lerp {
  int64_t i0, i1;
  T l0, l1;
};
template <typename T>
Lerp<T> lerpOf(T ratio, int64_t o, int64_t in, int64_t out, bool align) {
  if (out == in) return {o, o, (T)1, (T)0};
  T real = align ? ratio * (T)o : ratio * ((T)o + (T)0.5) - (T)0.5;
  if (!align && real < (T)0) real = (T)0;
  const int64_t i0 = std::min((int64_t)std::floor((float)real), in - 1);
  const T lam = std::min(std::max(real - (T)i0, (T)0), (T)1);
  return {i0, i0 + (i0 < in - 1 ? 1 : 0), (T)1 - lam, lam};
}

struct Bilinear {
  int64_t H, W, OH, OW;
  bool align;
  double sh, sw;  // 0: None
};

template <typename T>
void bilinearRef(const HostTensor& x, const Bilinear& b, int64_t NC, std::vector<double>* out) {
  const T rh = areaScale<T>(b.H, b.OH, b.align, b.sh), rw = areaScale<T>(b.W, b.OW, b.align, b.sw);
  out->assign(NC * b.OH * b.OW, 0);
  for (int64_t p = 0; p < NC; ++p)
    for (int64_t y = 0; y < b.OH; ++y) {
      const Lerp<T> h = lerpOf<T>(rh, y, b.H, b.OH, b.align);
      for (int64_t xx = 0; xx < b.OW; ++xx) {
        const Lerp<T> w = lerpOf<T>(rw, xx, b.W, b.OW, b.align);
        auto v = [&](int64_t i, int64_t j) { return (T)x.get((p * b.H + i) * b.W + j); };
        T t0 = v(h.i0, w.i0) * w.l0;
        t0 += v(h.i0, w.i1) * w.l1;
        T t1 = v(h.i1, w.i0) * w.l0;
        t1 += v(h.i1, w.i1) * w.l1;
        T o = t0 * h.l0;
        o += t1 * h.l1;
        (*out)[(p * b.OH + y) * b.OW + xx] = o;
      }
    }
}

// torch CPU's backward: scatter in (y, x) order, terms i00, i01, i10, i11.
template <typename T>
void bilinearBackwardRef(const HostTensor& g, const Bilinear& b, int64_t NC,
                         std::vector<double>* out) {
  const T rh = areaScale<T>(b.H, b.OH, b.align, b.sh), rw = areaScale<T>(b.W, b.OW, b.align, b.sw);
  std::vector<T> acc(NC * b.H * b.W, (T)0);
  for (int64_t p = 0; p < NC; ++p)
    for (int64_t y = 0; y < b.OH; ++y) {
      const Lerp<T> h = lerpOf<T>(rh, y, b.H, b.OH, b.align);
      for (int64_t xx = 0; xx < b.OW; ++xx) {
        const Lerp<T> w = lerpOf<T>(rw, xx, b.W, b.OW, b.align);
        const T v = (T)g.get((p * b.OH + y) * b.OW + xx);
        T* a = acc.data() + p * b.H * b.W;
        a[h.i0 * b.W + w.i0] += h.l0 * w.l0 * v;
        a[h.i0 * b.W + w.i1] += h.l0 * w.l1 * v;
        a[h.i1 * b.W + w.i0] += h.l1 * w.l0 * v;
        a[h.i1 * b.W + w.i1] += h.l1 * w.l1 * v;
      }
    }
  out->assign(acc.begin(), acc.end());
}

void expectClose(const HostTensor& got, const std::vector<double>& want, double tol,
                 const std::string& what) {
  ASSERT_EQ(got.numel(), (int64_t)want.size()) << what;
  for (int64_t i = 0; i < got.numel(); ++i)
    EXPECT_NEAR(got.get(i), want[i], tol * (1 + std::fabs(want[i]))) << what << " [" << i << "]";
}

TEST(SortBilinear, ForwardAndBackwardMatchTorchRules) {
  const int64_t N = 2, C = 3;
  const Bilinear cases[] = {
      {5, 7, 11, 13, false, 0, 0}, {5, 7, 11, 13, true, 0, 0},  {9, 8, 4, 3, false, 0, 0},
      {9, 8, 4, 3, true, 0, 0},    {5, 6, 8, 6, false, 1.7, 0}, {6, 5, 3, 12, false, 0.6, 2.5},
      {4, 5, 1, 1, true, 0, 0},    {4, 5, 1, 2, false, 0, 0},   {3, 3, 7, 3, true, 2.5, 1.0},
  };
  for (const Bilinear& b : cases) {
    for (flagosDtype_t dt : {F32, F64}) {
      const std::string at = std::string(dtypeName(dt)) + " " + std::to_string(b.H) + "x" +
                             std::to_string(b.W) + " -> " + std::to_string(b.OH) + "x" +
                             std::to_string(b.OW) + (b.align ? " align_corners" : "") + " scales " +
                             std::to_string(b.sh) + "," + std::to_string(b.sw);
      auto scale = [](double v) { return v ? floatScalar(v) : noneScalar(); };
      // Channels-last input (NHWC strides), transposed grad_output.
      HostTensor x = HostTensor::contiguous(dt, {N, C, b.H, b.W});
      x.strides = {C * b.H * b.W, 1, b.W * C, C};
      for (int64_t i = 0; i < x.numel(); ++i) x.set(i, testValue(i, -3, 3));
      HostTensor out = HostTensor::reversedLayout(dt, {N, C, b.OH, b.OW});
      ASSERT_TRUE(
          runC(*recipeOf("upsample_bilinear2d"), {&out}, {&x},
               {intScalar(b.OH), intScalar(b.OW), boolScalar(b.align), scale(b.sh), scale(b.sw)},
               Variant::Generic))
          << at;
      std::vector<double> want;
      if (dt == F32)
        bilinearRef<float>(x, b, N * C, &want);
      else
        bilinearRef<double>(x, b, N * C, &want);
      expectClose(out, want, dt == F32 ? 1e-6 : 1e-14, "upsample_bilinear2d " + at);

      HostTensor g = HostTensor::reversedLayout(dt, {N, C, b.OH, b.OW});
      for (int64_t i = 0; i < g.numel(); ++i) g.set(i, testValue(i + 5, -2, 2));
      HostTensor gi = HostTensor::contiguous(dt, {N, C, b.H, b.W});
      gi.strides = x.strides;  // channels last
      ASSERT_TRUE(
          runC(*recipeOf("upsample_bilinear2d_backward"), {&gi}, {&g},
               {intScalar(b.OH), intScalar(b.OW), intScalar(N), intScalar(C), intScalar(b.H),
                intScalar(b.W), boolScalar(b.align), scale(b.sh), scale(b.sw)},
               Variant::Generic))
          << at;
      if (dt == F32)
        bilinearBackwardRef<float>(g, b, N * C, &want);
      else
        bilinearBackwardRef<double>(g, b, N * C, &want);
      expectClose(gi, want, dt == F32 ? 1e-6 : 1e-14, "upsample_bilinear2d_backward " + at);
    }
  }
  // Unbatched (C, H, W) works; mismatched sizes are declined.
  std::string why;
  HostTensor x3 = HostTensor::contiguous(F32, {3, 4, 5}),
             o3 = HostTensor::contiguous(F32, {3, 8, 9});
  auto up = recipeOf("upsample_bilinear2d");
  const std::vector<flagosScalar> sc = {intScalar(8), intScalar(9), boolScalar(false), noneScalar(),
                                        noneScalar()};
  EXPECT_FALSE(declines(*up, {&o3}, {&x3}, sc, Target{"c", true}, &why)) << why;
  HostTensor wrong = HostTensor::contiguous(F32, {2, 8, 9});
  EXPECT_TRUE(declines(*up, {&wrong}, {&x3}, sc, Target{"c", true}, &why));
  HostTensor i3 = HostTensor::contiguous(I32, {3, 4, 5}),
             oi3 = HostTensor::contiguous(I32, {3, 8, 9});
  EXPECT_TRUE(declines(*up, {&oi3}, {&i3}, sc, Target{"c", true}, &why));
}

}  // namespace
}  // namespace flagos::kernels::testing
