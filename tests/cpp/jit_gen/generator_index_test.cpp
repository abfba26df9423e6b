// Index and shape recipes (csrc/jit/gen/index.cpp): generated "c" kernels
// against references computed here, and what keyFor declines.
#include "generator_harness.h"

namespace flagos::kernels::testing {
namespace {

constexpr flagosDtype_t F32 = FLAGOS_DTYPE_FLOAT32, F64 = FLAGOS_DTYPE_FLOAT64,
                        I32 = FLAGOS_DTYPE_INT32, I64 = FLAGOS_DTYPE_INT64,
                        BOOL = FLAGOS_DTYPE_BOOL, F16 = FLAGOS_DTYPE_FLOAT16;

std::shared_ptr<const Recipe> indexRecipe(const std::string& id) {
  return catalogRecipe(id, {"index", "shape"});
}

HostTensor filled(HostTensor t, int seed) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    double x = testValue(i + seed, -9, 9);
    t.set(i, isFloating(t.dtype) ? x : std::round(x));
  }
  return t;
}
HostTensor ints(flagosDtype_t dt, std::vector<int64_t> shape, std::vector<int64_t> values) {
  HostTensor t = HostTensor::contiguous(dt, shape);
  for (size_t i = 0; i < values.size(); ++i) t.set((int64_t)i, (double)values[i]);
  return t;
}
// Row-major linear index of coordinates @p c in @p shape.
int64_t lin(const std::vector<int64_t>& shape, const std::vector<int64_t>& c) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + c[d];
  return i;
}
std::vector<int64_t> coords(const std::vector<int64_t>& shape, int64_t i) {
  std::vector<int64_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = i % shape[d];
    i /= shape[d];
  }
  return c;
}

TEST(IndexRecipes, CatalogRows) {
  for (const char* id :
       {"index_select", "gather", "scatter_src", "scatter_value", "scatter_add", "index_add",
        "embedding", "cat", "constant_pad_nd", "flip", "tril", "triu"}) {
    EXPECT_TRUE(indexRecipe(id)) << id;
  }
  std::string why;  // an index-family row without a recipe says why
  OpInfo masked{"masked_scatter", "index", "", {"self", "mask", "source"}, {}, 1};
  EXPECT_EQ(makeRecipe(masked, &why), nullptr);
  EXPECT_FALSE(why.empty());
}

TEST(IndexKernels, IndexSelectAndGather) {
  auto r = indexRecipe("index_select");
  HostTensor self = filled(HostTensor::reversedLayout(F32, {3, 4}), 1);
  HostTensor idx = ints(I64, {3}, {2, 0, 9});  // 9: out of range reads 0
  HostTensor out = HostTensor::contiguous(F32, {3, 3});
  ASSERT_TRUE(runC(*r, {&out}, {&self, &idx}, {intScalar(1)}, Variant::Generic));
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out.get(lin({3, 3}, {i, 0})), self.get(lin({3, 4}, {i, 2})));
    EXPECT_EQ(out.get(lin({3, 3}, {i, 1})), self.get(lin({3, 4}, {i, 0})));
    EXPECT_EQ(out.get(lin({3, 3}, {i, 2})), 0);
  }
  HostTensor idx32 = ints(I32, {2}, {1, 1});
  HostTensor out0 = HostTensor::contiguous(F32, {2, 4});
  ASSERT_TRUE(runC(*r, {&out0}, {&self, &idx32}, {intScalar(0)}, Variant::Generic));
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(out0.get(i), self.get(4 + i % 4));

  auto g = indexRecipe("gather");
  HostTensor gi = ints(I64, {3, 2}, {3, 0, 1, 1, 2, 3});
  HostTensor gout = HostTensor::contiguous(F32, {3, 2});
  ASSERT_TRUE(runC(*g, {&gout}, {&self, &gi}, {intScalar(1), intScalar(0)}, Variant::Generic));
  for (int64_t i = 0; i < 6; ++i) {
    auto c = coords({3, 2}, i);
    EXPECT_EQ(gout.get(i), self.get(lin({3, 4}, {c[0], (int64_t)gi.get(i)})));
  }
  std::string why;
  HostTensor fidx = HostTensor::contiguous(F32, {3});
  EXPECT_TRUE(declines(*r, {&out}, {&self, &fidx}, {intScalar(1)}, Target{"c", true}, &why));
  EXPECT_NE(why.find("int64"), std::string::npos) << why;
}

TEST(IndexKernels, Embedding) {
  auto r = indexRecipe("embedding");
  HostTensor w = filled(HostTensor::contiguous(F64, {5, 3}), 2);
  HostTensor idx = ints(I64, {2, 2}, {4, 0, 0, 2});
  HostTensor out = HostTensor::contiguous(F64, {2, 2, 3});
  ASSERT_TRUE(
      runC(*r, {&out}, {&w, &idx}, {intScalar(-1), intScalar(0), intScalar(0)}, Variant::Generic));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(out.get(i), w.get(idx.get(i / 3) * 3 + i % 3));
}

TEST(IndexKernels, TrilTriuFlip) {
  HostTensor x = filled(HostTensor::reversedLayout(I32, {2, 3, 4}), 3);
  for (const char* id : {"tril", "triu"}) {
    for (int64_t diag : {-1, 1}) {
      HostTensor out = HostTensor::contiguous(I32, {2, 3, 4});
      ASSERT_TRUE(runC(*indexRecipe(id), {&out}, {&x}, {intScalar(diag)}, Variant::Generic));
      for (int64_t i = 0; i < 24; ++i) {
        auto c = coords({2, 3, 4}, i);
        bool keep = id[2] == 'i' && id[3] == 'l' ? c[2] - c[1] <= diag : c[2] - c[1] >= diag;
        EXPECT_EQ(out.get(i), keep ? x.get(i) : 0) << id << diag << " " << i;
      }
    }
  }
  auto f = indexRecipe("flip");
  HostTensor out = HostTensor::contiguous(I32, {2, 3, 4});
  ASSERT_TRUE(runC(*f, {&out}, {&x}, {intScalar(0b101)}, Variant::Generic));
  for (int64_t i = 0; i < 24; ++i) {
    auto c = coords({2, 3, 4}, i);
    EXPECT_EQ(out.get(i), x.get(lin({2, 3, 4}, {1 - c[0], c[1], 3 - c[2]})));
  }
  std::string why;
  EXPECT_TRUE(declines(*f, {&out}, {&x}, {intScalar(7)}, Target{"c", true}, &why));
}

TEST(IndexKernels, CatSkipsEmptyAndPromotes) {
  auto r = indexRecipe("cat");
  HostTensor a = filled(HostTensor::contiguous(F32, {2, 1}), 4);
  HostTensor empty = HostTensor::contiguous(F32, {0});
  HostTensor b = filled(HostTensor::reversedLayout(I32, {2, 3}), 5);
  HostTensor out = HostTensor::contiguous(F32, {2, 4});
  ASSERT_TRUE(runC(*r, {&out}, {&a, &empty, &b}, {intScalar(1)}, Variant::Generic));
  for (int64_t i = 0; i < 8; ++i) {
    auto c = coords({2, 4}, i);
    double want = c[1] == 0 ? a.get(c[0]) : b.get(lin({2, 3}, {c[0], c[1] - 1}));
    EXPECT_EQ(out.get(i), want) << i;
  }
  HostTensor out0 = HostTensor::contiguous(F32, {4, 1});
  ASSERT_TRUE(runC(*r, {&out0}, {&a, &a}, {intScalar(0)}, Variant::Generic));
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(out0.get(i), a.get(i % 2));
}

TEST(IndexKernels, ConstantPad) {
  auto r = indexRecipe("constant_pad_nd");
  HostTensor x = filled(HostTensor::contiguous(F32, {2, 3}), 6);
  // pad=[1, 2] arrives repeated to 8 values; pad=[1, 0, 2, -1].
  std::vector<flagosScalar> s1(8, intScalar(2));
  s1[0] = intScalar(1);
  s1.push_back(floatScalar(7.5));
  HostTensor out1 = HostTensor::contiguous(F32, {2, 6});
  ASSERT_TRUE(runC(*r, {&out1}, {&x}, s1, Variant::Generic));
  for (int64_t i = 0; i < 12; ++i) {
    auto c = coords({2, 6}, i);
    bool in = c[1] >= 1 && c[1] < 4;
    EXPECT_EQ(out1.get(i), in ? x.get(lin({2, 3}, {c[0], c[1] - 1})) : 7.5) << i;
  }
  std::vector<flagosScalar> s2(8, intScalar(-1));
  s2[0] = intScalar(1);
  s2[1] = intScalar(0);
  s2[2] = intScalar(2);
  s2.push_back(intScalar(3));
  HostTensor out2 = HostTensor::contiguous(F32, {3, 4});
  ASSERT_TRUE(runC(*r, {&out2}, {&x}, s2, Variant::Generic));
  for (int64_t i = 0; i < 12; ++i) {
    auto c = coords({3, 4}, i);
    bool in = c[0] >= 2 && c[1] >= 1;
    EXPECT_EQ(out2.get(i), in ? x.get(lin({2, 3}, {c[0] - 2, c[1] - 1})) : 3) << i;
  }
}

TEST(IndexKernels, ScatterFunctionalAndInPlace) {
  // scatter.src, out != self: self is copied, duplicates: the last wins.
  HostTensor self = filled(HostTensor::contiguous(F32, {3, 4}), 7);
  HostTensor idx = ints(I64, {2, 3}, {0, 2, 1, 0, 1, 1});
  HostTensor src = filled(HostTensor::reversedLayout(F32, {2, 4}), 8);
  HostTensor out = HostTensor::contiguous(F32, {3, 4});
  ASSERT_TRUE(runC(*indexRecipe("scatter_src"), {&out}, {&self, &idx, &src}, {intScalar(0)},
                   Variant::Generic));
  std::vector<double> want(12), sum(12);
  for (int64_t i = 0; i < 12; ++i) want[i] = sum[i] = self.get(i);
  for (int64_t i = 0; i < 6; ++i) {
    auto c = coords({2, 3}, i);
    int64_t o = lin({3, 4}, {(int64_t)idx.get(i), c[1]});
    want[o] = src.get(lin({2, 4}, c));
    sum[o] += src.get(lin({2, 4}, c));
  }
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(out.get(i), want[i]) << i;

  HostTensor out_add = HostTensor::contiguous(F32, {3, 4});
  ASSERT_TRUE(runC(*indexRecipe("scatter_add"), {&out_add}, {&self, &idx, &src}, {intScalar(0)},
                   Variant::Generic));
  for (int64_t i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(out_add.get(i), sum[i]) << i;

  // scatter_.value in place (out is self).
  HostTensor inplace = self;
  ASSERT_TRUE(runC(*indexRecipe("scatter_value"), {&inplace}, {&inplace, &idx},
                   {intScalar(0), floatScalar(-2.5)}, Variant::Generic));
  for (int64_t i = 0; i < 12; ++i) {
    bool hit = false;
    for (int64_t k = 0; k < 6; ++k)
      hit |= lin({3, 4}, {(int64_t)idx.get(k), coords({2, 3}, k)[1]}) == i;
    EXPECT_EQ(inplace.get(i), hit ? -2.5 : self.get(i)) << i;
  }
}

TEST(IndexKernels, IndexAddInt64WithAlpha) {
  HostTensor self = filled(HostTensor::contiguous(I64, {4, 2}), 9);
  HostTensor idx = ints(I64, {3}, {3, 0, 3});
  HostTensor source = filled(HostTensor::contiguous(I64, {3, 2}), 10);
  HostTensor out = self;
  ASSERT_TRUE(runC(*indexRecipe("index_add"), {&out}, {&out, &idx, &source},
                   {intScalar(0), intScalar(2)}, Variant::Generic));
  std::vector<double> want(8);
  for (int64_t i = 0; i < 8; ++i) want[i] = self.get(i);
  for (int64_t i = 0; i < 6; ++i) want[idx.get(i / 2) * 2 + i % 2] += 2 * source.get(i);
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(out.get(i), want[i]) << i;
}

TEST(IndexKernels, KeyRules) {
  auto r = indexRecipe("scatter_add");
  HostTensor self = filled(HostTensor::contiguous(F32, {3, 4}), 7);
  HostTensor idx = ints(I64, {1, 2}, {0, 2});
  HostTensor src = filled(HostTensor::contiguous(F32, {1, 2}), 8);
  HostTensor out = HostTensor::contiguous(F32, {3, 4});
  std::string why;
  // OpenCL: only in place; no atomic add for 16-bit types.
  EXPECT_TRUE(
      declines(*r, {&out}, {&self, &idx, &src}, {intScalar(0)}, Target{"opencl-c", true}, &why));
  EXPECT_NE(why.find("in-place"), std::string::npos) << why;
  EXPECT_FALSE(
      declines(*r, {&self}, {&self, &idx, &src}, {intScalar(0)}, Target{"opencl-c", true}, &why))
      << why;
  HostTensor h = HostTensor::contiguous(F16, {3, 4}), hs = HostTensor::contiguous(F16, {1, 2});
  EXPECT_TRUE(declines(*r, {&h}, {&h, &idx, &hs}, {intScalar(0)}, Target{"opencl-c", true}, &why));
  // No specialized variant.
  std::vector<flagosTensor> o{self.view()}, i{self.view(), idx.view(), src.view()};
  flagosScalar dim = intScalar(0);
  Call call{o.data(), 1, i.data(), 3, &dim, 1};
  KernelKey key;
  EXPECT_FALSE(keyFor(*r, call, Variant::Specialized, Target{"c", true}, &key, &why));
  // bool output, in-place tril.
  HostTensor b = HostTensor::contiguous(BOOL, {3, 3});
  for (int64_t k = 0; k < 9; ++k) b.set(k, 1);
  ASSERT_TRUE(runC(*indexRecipe("triu"), {&b}, {&b}, {intScalar(0)}, Variant::Generic));
  for (int64_t k = 0; k < 9; ++k) EXPECT_EQ(b.get(k), k % 3 >= k / 3 ? 1 : 0);
}

}  // namespace
}  // namespace flagos::kernels::testing
