// Random kernels (random.cpp, Note [Random numbers on the device]): the
// Philox helpers against the paper's known-answer vectors, and each
// operator's elements against a reference Philox here, through the "c"
// dialect (runC also builds the same call for CUDA where NVRTC is found).
#include <cstdint>

#include "generator_harness.h"
#include "jit/gen/emit.h"

namespace flagos::kernels::testing {
namespace {

struct Block {
  uint32_t w[4];
};

Block philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    const uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1, c3 = (uint32_t)p0, c0 = n0, c2 = n2;
  }
  return {{c0, c1, c2, c3}};
}

Block at(uint64_t seed, uint64_t n) {
  return philox((uint32_t)n, (uint32_t)(n >> 32), 0, 0, (uint32_t)seed, (uint32_t)(seed >> 32));
}

constexpr uint64_t kSeed = 0x0123456789abcdefULL, kOffset = 0xfffffffffffffff0ULL;  // wraps

std::vector<flagosScalar> withGenerator(std::vector<flagosScalar> s) {
  s.push_back(intScalar((int64_t)kSeed));
  s.push_back(intScalar((int64_t)kOffset));
  return s;
}

// The paper's (Random123's kat_vectors) philox4x32 10 lines.
const uint32_t kKat[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d, 0x41c83b0e,
     0xa20bc7c6, 0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09, 0x94fdcceb,
     0x5001e420, 0x24126ea1},
};

TEST(RandomGenerated, ReferencePhiloxMatchesThePaper) {
  for (const auto& v : kKat) {
    Block b = philox(v[0], v[1], v[2], v[3], v[4], v[5]);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(b.w[k], v[6 + k]);
  }
}

// The helpers every dialect's kernels include, compiled as C: the vectors.
TEST(RandomGenerated, GeneratedPhiloxMatchesThePaper) {
  Source src;
  src.kernel_name = "kat";
  src.text = dialectFor("c")->prelude(true) + randomHelpers(true) +
             "const int kat_num_args = 2;\n"
             "void kat(void* const* args, uint64_t begin, uint64_t end) {\n"
             "  const uint32_t* v = *(const uint32_t* const*)args[0];\n"
             "  uint32_t* out = *(uint32_t* const*)args[1];\n"
             "  for (uint64_t i = begin; i < end; ++i) {\n"
             "    const uint32_t* c = v + 10 * i;\n"
             "    flagos_philox_t w = flagos_philox(c[0], c[1], c[2], c[3], c[4], c[5]);\n"
             "    out[4 * i] = w.v0; out[4 * i + 1] = w.v1; out[4 * i + 2] = w.v2;\n"
             "    out[4 * i + 3] = w.v3;\n"
             "  }\n"
             "}\n";
  src.options = dialectFor("c")->strictFloatOptions();
  int num_args = 0;
  CKernel fn = compileC(src, &num_args);
  ASSERT_NE(fn, nullptr);
  uint32_t out[12] = {};
  const void* in_ptr = &kKat[0][0];
  void* out_ptr = out;
  void* argv[2] = {&in_ptr, &out_ptr};
  fn(argv, 0, 3);
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(out[4 * i + k], kKat[i][6 + k]) << i << " " << k;
}

float u24(uint32_t x) {
  return (float)(x >> 8) * 5.9604644775390625e-08f;
}

TEST(RandomGenerated, UniformIsTheStreamInAnyLayout) {
  auto r = catalogRecipe("uniform", {"random"});
  ASSERT_TRUE(r);
  for (bool reversed : {false, true}) {
    HostTensor out = reversed ? HostTensor::reversedLayout(FLAGOS_DTYPE_FLOAT32, {5, 7, 3})
                              : HostTensor::contiguous(FLAGOS_DTYPE_FLOAT32, {5, 7, 3});
    for (Variant v : {Variant::Generic, Variant::Specialized}) {
      ASSERT_TRUE(runC(*r, {&out}, {}, withGenerator({floatScalar(-1), floatScalar(3)}), v));
      for (int64_t i = 0; i < out.numel(); ++i) {
        const float want = -1.0f + 4.0f * u24(at(kSeed, kOffset + i).w[0]);
        ASSERT_EQ((float)out.get(i), want) << i;
      }
    }
  }
}

TEST(RandomGenerated, BernoulliDropoutAndIntegersAreTheStream) {
  auto bern = catalogRecipe("bernoulli_scalar", {"random"});
  HostTensor b = HostTensor::contiguous(FLAGOS_DTYPE_BOOL, {1000});
  ASSERT_TRUE(runC(*bern, {&b}, {}, withGenerator({floatScalar(0.3)}), Variant::Generic));
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(b.get(i) != 0, (at(kSeed, kOffset + i).w[0] >> 8) < 0.3 * 16777216) << i;

  auto drop = catalogRecipe("native_dropout", {"random"});
  HostTensor x = HostTensor::contiguous(FLAGOS_DTYPE_FLOAT32, {4, 250});
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, testValue(i, -2, 2));
  HostTensor out = HostTensor::contiguous(FLAGOS_DTYPE_FLOAT32, {4, 250});
  HostTensor mask = HostTensor::contiguous(FLAGOS_DTYPE_BOOL, {4, 250});
  ASSERT_TRUE(runC(*drop, {&out, &mask}, {&x}, withGenerator({floatScalar(0.2), noneScalar()}),
                   Variant::Generic));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = (at(kSeed, kOffset + i).w[0] >> 8) < 0.8 * 16777216;
    ASSERT_EQ(mask.get(i) != 0, keep) << i;
    ASSERT_EQ((float)out.get(i), (float)x.get(i) * (float)keep * (float)(1 / 0.8)) << i;
  }

  auto ints = catalogRecipe("random_from_to", {"random"});
  HostTensor r = HostTensor::contiguous(FLAGOS_DTYPE_INT64, {500});
  ASSERT_TRUE(
      runC(*ints, {&r}, {}, withGenerator({intScalar(-7), intScalar(1000)}), Variant::Generic));
  for (int64_t i = 0; i < 500; ++i)
    ASSERT_EQ((int64_t)r.get(i), (int64_t)(at(kSeed, kOffset + i).w[0] % 1007u) - 7) << i;

  // From a range of 2^28 on, 64 bits (w0 w1), as ATen's uniform_int_from_to:
  // 32 bits % 0.75 * 2^32 gave the low third of the range twice the weight.
  const int64_t wide = (int64_t{3} << 30);  // 0.75 * 2^32
  ASSERT_TRUE(
      runC(*ints, {&r}, {}, withGenerator({intScalar(0), intScalar(wide)}), Variant::Generic));
  for (int64_t i = 0; i < 500; ++i) {
    const Block b = at(kSeed, kOffset + i);
    const uint64_t w64 = (uint64_t{b.w[0]} << 32) | b.w[1];
    ASSERT_EQ((int64_t)r.get(i), (int64_t)(w64 % (uint64_t)wide)) << i;
  }
  const int64_t narrow = (int64_t{1} << 28) - 1;  // below the threshold: w0 alone
  ASSERT_TRUE(
      runC(*ints, {&r}, {}, withGenerator({intScalar(0), intScalar(narrow)}), Variant::Generic));
  for (int64_t i = 0; i < 500; ++i)
    ASSERT_EQ((int64_t)r.get(i), (int64_t)(at(kSeed, kOffset + i).w[0] % (uint32_t)narrow)) << i;
}

TEST(RandomGenerated, NormalsAreBoxMullerOnThePair) {
  auto r = catalogRecipe("normal", {"random"});
  HostTensor z = HostTensor::contiguous(FLAGOS_DTYPE_FLOAT32, {4000});
  ASSERT_TRUE(
      runC(*r, {&z}, {}, withGenerator({floatScalar(0), floatScalar(1)}), Variant::Generic));
  for (int64_t i = 0; i < z.numel(); ++i) {
    const Block b = at(kSeed, kOffset + i);
    const double u1 = 1.0 - (b.w[0] >> 8) / 16777216.0, u2 = (b.w[1] >> 8) / 16777216.0;
    const double want = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
    ASSERT_TRUE(closeTo(z.get(i), want, 2e-6, 2e-6)) << i;
  }
}

// Every operator and dtype builds, and values stay in their range.
TEST(RandomGenerated, EveryOperatorAndDtypeRuns) {
  const std::vector<std::pair<std::string, std::vector<flagosScalar>>> ops = {
      {"uniform", {floatScalar(0), floatScalar(1)}},
      {"normal", {floatScalar(0), floatScalar(1)}},
      {"log_normal", {floatScalar(0), floatScalar(1)}},
      {"exponential", {floatScalar(1)}},
      {"cauchy", {floatScalar(0), floatScalar(1)}},
      {"geometric", {floatScalar(0.25)}},
      {"random", {}},
  };
  for (flagosDtype_t d :
       {FLAGOS_DTYPE_FLOAT32, FLAGOS_DTYPE_FLOAT64, FLAGOS_DTYPE_FLOAT16, FLAGOS_DTYPE_BFLOAT16}) {
    for (const auto& [id, scalars] : ops) {
      auto r = catalogRecipe(id, {"random"});
      HostTensor t = HostTensor::contiguous(d, {257});
      ASSERT_TRUE(runC(*r, {&t}, {}, withGenerator(scalars), Variant::Generic)) << id;
      for (int64_t i = 0; i < t.numel(); ++i) {
        const double v = t.get(i);
        if (id == "uniform") {
          ASSERT_TRUE(v >= 0 && v < 1) << id << " " << v;
        }
        if (id == "exponential" || id == "log_normal") {
          ASSERT_TRUE(v > 0) << id << " " << v;
        }
        if (id == "geometric" || id == "random") {
          ASSERT_TRUE(v >= 0 && v == std::floor(v)) << id;
        }
        ASSERT_FALSE(std::isnan(v)) << id;
      }
    }
  }
  std::string why;
  auto uniform = catalogRecipe("uniform", {"random"});
  HostTensor i32 = HostTensor::contiguous(FLAGOS_DTYPE_INT32, {4});
  EXPECT_TRUE(declines(*uniform, {&i32}, {}, withGenerator({floatScalar(0), floatScalar(1)}),
                       Target{"c", true}, &why));
  HostTensor f = HostTensor::contiguous(FLAGOS_DTYPE_FLOAT32, {4});
  EXPECT_TRUE(declines(*uniform, {&f}, {}, withGenerator({floatScalar(1), floatScalar(0)}),
                       Target{"c", true}, &why));
}

}  // namespace
}  // namespace flagos::kernels::testing
