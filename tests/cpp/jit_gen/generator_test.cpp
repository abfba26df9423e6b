// The kernel generator (csrc/jit/gen/generator.h): the expression parser,
// catalog coverage, kernel keys, and generated "c" kernels compiled with the
// system compiler and checked against values computed here in double.
#include <algorithm>
#include <functional>

#include "generator_harness.h"
#include "jit/gen/emit.h"
#include "jit/gen/expr.h"
#include "jit/gen/recipe.h"

namespace flagos::kernels::testing {
namespace {

constexpr flagosDtype_t F32 = FLAGOS_DTYPE_FLOAT32, F64 = FLAGOS_DTYPE_FLOAT64,
                        I32 = FLAGOS_DTYPE_INT32, I64 = FLAGOS_DTYPE_INT64,
                        BOOL = FLAGOS_DTYPE_BOOL, U8 = FLAGOS_DTYPE_UINT8,
                        F16 = FLAGOS_DTYPE_FLOAT16, BF16 = FLAGOS_DTYPE_BFLOAT16;

// --- parser -----------------------------------------------------------------

std::string parsed(const std::string& s) {
  std::string error;
  ExprPtr e = parseExpr(s, &error);
  return e ? toString(*e) : "error: " + error;
}

TEST(ExprParser, PrecedenceAndForms) {
  EXPECT_EQ(parsed("a + b * c"), "(a + (b * c))");
  EXPECT_EQ(parsed("-a * b"), "((-a) * b)");
  EXPECT_EQ(parsed("a < b == c > d"), "((a < b) == (c > d))");
  EXPECT_EQ(parsed("a && b || c"), "((a && b) || c)");
  EXPECT_EQ(parsed("a | b ^ c & d"), "(a | (b ^ (c & d)))");
  EXPECT_EQ(parsed("a ? b : c ? d : e"), "(a ? b : (c ? d : e))");
  EXPECT_EQ(parsed("x is None ? 1 : f(x, 2.5e-3)"), "((x is None) ? 1 : f(x, 2.5e-3))");
  EXPECT_EQ(parsed("!~a % 3"), "((!(~a)) % 3)");
  EXPECT_EQ(parsed("z * 2 where z = a + 1"), "((a + 1) * 2)");
  EXPECT_EQ(parsed("t + k where t = k * 2 where k = a"), "((a * 2) + a)");
}

TEST(ExprParser, ErrorsSayWhereAndWhat) {
  std::string error;
  EXPECT_EQ(parseExpr("self +", &error), nullptr);
  EXPECT_NE(error.find("at 6: expected an operand"), std::string::npos) << error;
  EXPECT_EQ(parseExpr("(self", &error), nullptr);
  EXPECT_NE(error.find("expected ')'"), std::string::npos) << error;
  EXPECT_EQ(parseExpr("a ? b", &error), nullptr);
  EXPECT_NE(error.find("expected ':'"), std::string::npos) << error;
  EXPECT_EQ(parseExpr("self $ 2", &error), nullptr);
  EXPECT_NE(error.find("at 5: unexpected character '$'"), std::string::npos) << error;
  EXPECT_EQ(parseExpr("see torch.nn.functional.elu", &error), nullptr);
  EXPECT_NE(error.find("at 9: unexpected character '.'"), std::string::npos) << error;
  EXPECT_EQ(parseExpr("see torch", &error), nullptr);
  EXPECT_NE(error.find("at 4: unexpected 'torch'"), std::string::npos) << error;
  EXPECT_EQ(parseExpr("x is 3", &error), nullptr);
  EXPECT_NE(error.find("expected 'None'"), std::string::npos) << error;
  EXPECT_EQ(parseExpr("a where = 1", &error), nullptr);
  EXPECT_NE(error.find("expected a name after 'where'"), std::string::npos) << error;
}

// --- catalog coverage -------------------------------------------------------

TEST(Recipes, CatalogPointwiseCoverage) {
  auto rows = catalogRows("pointwise");
  ASSERT_GT(rows.size(), 100u);
  int ok = 0;
  std::string missing;
  for (const auto& row : rows) {
    std::string why;
    auto r = makeRecipe(row.info, &why);
    if (r) {
      ++ok;
    } else {
      EXPECT_FALSE(why.empty()) << row.info.id;
      missing += "  " + row.info.id + ": " + why + "\n";
    }
  }
  std::printf("pointwise recipes: %d of %zu\nwithout a recipe:\n%s", ok, rows.size(),
              missing.c_str());
  EXPECT_GE(ok, 125);
}

TEST(Recipes, ReductionsAndRows) {
  for (const char* id :
       {"sum", "mean", "prod", "prod_all", "amax", "amin", "max_all", "min_all", "any", "all",
        "softmax", "log_softmax", "softmax_backward", "log_softmax_backward"}) {
    std::string why;
    EXPECT_TRUE(makeRecipe(catalogOp(id), &why)) << id << ": " << why;
  }
  for (const char* id : {"var", "cumsum"}) {  // composites, not generated kernels
    std::string why;
    EXPECT_FALSE(makeRecipe(catalogOp(id), &why)) << id;
    EXPECT_FALSE(why.empty());
  }
  std::string why;
  EXPECT_FALSE(makeRecipe(OpInfo{"mm", "gemm", "", {"self", "mat2"}, {}, 1}, &why));
  EXPECT_NE(why.find("gemm"), std::string::npos);
}

// Note [Support checks on first use]: makeRecipe lowers only until one
// combination works; the others are lowered when asked and the answer kept.
TEST(Recipes, SupportChecksOnFirstUse) {
  std::string why;
  auto gelu = makeRecipe(catalogOp("gelu"), &why);
  ASSERT_TRUE(gelu) << why;
  ASSERT_EQ(gelu->scalars.size(), 1u);  // approximate: optional
  // float32 with `approximate` present: checked by makeRecipe itself.
  EXPECT_TRUE(gelu->support[(1u << 1) | 1u].known.load());
  EXPECT_FALSE(gelu->support[(0u << 1) | 0u].known.load()) << "int class lowered eagerly";
  // Asked now, the same answer as lowering it directly, and kept.
  const std::string& absent = gelu->pointwiseSupport(ComputeClass::Int, 0);
  EXPECT_EQ(absent, checkPointwise(*gelu, ComputeClass::Int, 0));
  EXPECT_NE(absent.find("approximate"), std::string::npos) << absent;
  EXPECT_TRUE(gelu->support[0].known.load());
  EXPECT_EQ(&absent, &gelu->pointwiseSupport(ComputeClass::Int, 0));
  EXPECT_EQ("", gelu->pointwiseSupport(ComputeClass::F64, 1));
  // An expression that lowers for no combination still has no recipe.
  OpInfo never{"never", "pointwise", "self + missing", {"self"}, {}, 1};
  EXPECT_FALSE(makeRecipe(never, &why));
  EXPECT_NE(why.find("missing"), std::string::npos) << why;
}

// Every generated pointwise kernel compiles, for a float and (where the
// catalog allows) an integer and a bool dtype, generic and specialized.
TEST(Recipes, EveryPointwiseKernelCompiles) {
  char dir[] = "/tmp/flagos_gen_all_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string files;
  int n = 0;
  for (const auto& row : catalogRows("pointwise")) {
    auto r = makeRecipe(row.info, nullptr);
    if (!r) continue;
    std::vector<flagosDtype_t> dtypes;
    if (row.dtypes.find("integral") == std::string::npos) dtypes.push_back(F32);
    if (row.dtypes.find("all") != std::string::npos ||
        row.dtypes.find("numeric") != std::string::npos ||
        row.dtypes.find("integral") != std::string::npos) {
      dtypes.push_back(I32);
    }
    if (row.dtypes.find("all") != std::string::npos ||
        row.dtypes.find("bool") != std::string::npos) {
      dtypes.push_back(BOOL);
    }
    if (!dtypes.empty() && dtypes[0] == F32) dtypes.push_back(F16);
    for (flagosDtype_t dt : dtypes) {
      for (Variant v : {Variant::Generic, Variant::Specialized}) {
        std::vector<HostTensor> ts;
        for (size_t k = 0; k < 1 + row.info.inputs.size(); ++k) {
          ts.push_back(k == 1 ? HostTensor::reversedLayout(dt, {2, 3})
                              : HostTensor::contiguous(dt, {2, 3}));
        }
        std::vector<flagosTensor> views;
        for (auto& t : ts) views.push_back(t.view());
        std::vector<flagosScalar> scalars(row.info.scalars.size(), floatScalar(0.5));
        if (dt != F32 && dt != F16) scalars.assign(row.info.scalars.size(), intScalar(1));
        Call call{views.data(),     1,
                  views.data() + 1, (int32_t)row.info.inputs.size(),
                  scalars.data(),   (int32_t)scalars.size()};
        KernelKey key;
        std::string why;
        if (!keyFor(*r, call, v, Target{"c", true}, &key, &why)) {
          EXPECT_NE(dt, F32) << row.info.id << ": " << why;
          continue;
        }
        Source src = emit(*r, *signatureOf(*r, call), v, Target{"c", true});
        std::string path = std::string(dir) + "/k" + std::to_string(n++) + ".c";
        std::ofstream(path) << src.text;
        files += " " + path;
      }
    }
  }
  ASSERT_GT(n, 300);
  std::string cmd = std::string(FLAGOS_TEST_CC) + " -std=c99 -fsyntax-only -Wall -Werror " +
                    "-Wno-unused-function -Wno-unused-variable" + files + " 2>&1 | head -50";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t got = fread(buf, 1, sizeof buf, p)) out.append(buf, got);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_EQ(out, "");
  std::system(("rm -rf " + std::string(dir)).c_str());
}

// --- kernel keys ------------------------------------------------------------

KernelKey keyOf(const Recipe& r, HostTensor& out, HostTensor& a, HostTensor& b, Variant v) {
  flagosTensor o = out.view();
  flagosTensor in[2] = {a.view(), b.view()};
  flagosScalar alpha = intScalar(1);
  Call call{&o, 1, in, 2, &alpha, 1};
  KernelKey key;
  std::string why;
  EXPECT_TRUE(keyFor(r, call, v, Target{"c", true}, &key, &why)) << why;
  return key;
}

TEST(KernelKeys, GenericIgnoresShapesSpecializedDoesNot) {
  auto add = recipeFor("add");
  auto o1 = HostTensor::contiguous(F32, {4, 5}), a1 = o1, b1 = o1;
  auto o2 = HostTensor::contiguous(F32, {7}), a2 = o2, b2 = o2;
  EXPECT_EQ(keyOf(*add, o1, a1, b1, Variant::Generic), keyOf(*add, o2, a2, b2, Variant::Generic));
  EXPECT_NE(keyOf(*add, o1, a1, b1, Variant::Specialized),
            keyOf(*add, o2, a2, b2, Variant::Specialized));
  // Layout class and dtype are part of every key.
  auto t = HostTensor::reversedLayout(F32, {4, 5});
  EXPECT_NE(keyOf(*add, o1, a1, b1, Variant::Generic), keyOf(*add, o1, t, b1, Variant::Generic));
  auto d = HostTensor::contiguous(F64, {4, 5}), d2 = d, d3 = d;
  EXPECT_NE(keyOf(*add, o1, a1, b1, Variant::Generic), keyOf(*add, d, d2, d3, Variant::Generic));
  // Stable text: version first, hex words.
  std::string s = keyOf(*add, o1, a1, b1, Variant::Generic).toString();
  EXPECT_EQ(s.rfind(std::to_string(kGeneratorVersion) + ".", 0), 0u) << s;
  EXPECT_EQ(s, keyOf(*add, o2, a2, b2, Variant::Generic).toString());
  KernelKeyHash hash;
  EXPECT_EQ(hash(keyOf(*add, o1, a1, b1, Variant::Generic)),
            hash(keyOf(*add, o2, a2, b2, Variant::Generic)));
  // Different operators never share a key.
  auto sub = recipeFor("sub");
  EXPECT_NE(keyOf(*add, o1, a1, b1, Variant::Generic), keyOf(*sub, o1, a1, b1, Variant::Generic));
}

TEST(KernelKeys, RefusesWhatItCannotGenerate) {
  auto bitand_ = recipeFor("bitwise_and");
  auto o = HostTensor::contiguous(F32, {3}), a = o, b = o;
  flagosTensor ov = o.view(), in[2] = {a.view(), b.view()};
  Call call{&ov, 1, in, 2, nullptr, 0};
  KernelKey key;
  std::string why;
  EXPECT_FALSE(keyFor(*bitand_, call, Variant::Generic, Target{"c", true}, &key, &why));
  EXPECT_NE(why.find("bitwise"), std::string::npos) << why;
  auto d = HostTensor::contiguous(F64, {3}), d2 = d, d3 = d;
  flagosTensor dv = d.view(), din[2] = {d2.view(), d3.view()};
  flagosScalar alpha = intScalar(1);
  Call dcall{&dv, 1, din, 2, &alpha, 1};
  EXPECT_FALSE(
      keyFor(*recipeFor("add"), dcall, Variant::Generic, Target{"opencl-c", false}, &key, &why));
  EXPECT_NE(why.find("fp64"), std::string::npos) << why;
  // A language without an emitter.
  EXPECT_FALSE(
      keyFor(*recipeFor("add"), dcall, Variant::Generic, Target{"spir-v", true}, &key, &why));
  EXPECT_TRUE(
      keyFor(*recipeFor("add"), dcall, Variant::Generic, Target{"cuda-c", true}, &key, &why));
}

// Language questions are Dialect methods (emit.h); only dialectFor maps a
// language name to a class, one instance each.
TEST(Dialects, AnswerTheLanguageQuestions) {
  const Dialect* c = dialectFor("c");
  const Dialect* cl = dialectFor("opencl-c");
  ASSERT_NE(c, nullptr);
  ASSERT_NE(cl, nullptr);
  EXPECT_EQ(dialectFor("c"), c);
  EXPECT_EQ(dialectFor("spir-v"), nullptr);
  // "cuda-c" (emit_cuda.cpp): work-groups with shared memory, atomic
  // scatters, scalar loads, no build options of its own.
  const Dialect* cu = dialectFor("cuda-c");
  ASSERT_NE(cu, nullptr);
  EXPECT_TRUE(cu->hasGroups());
  EXPECT_FALSE(cu->hasRanges());
  EXPECT_TRUE(cu->parallelScatters());
  EXPECT_EQ(cu->vectorWidth(), 1);
  EXPECT_EQ(cu->buildOptions(true), "");
  EXPECT_EQ(cu->barrier(), "__syncthreads();");
  EXPECT_NE(cu->groupPrelude(true).find("flagos_group_sum_f("), std::string::npos);
  EXPECT_EQ(cu->groupPrelude(false).find("double"), std::string::npos);
  EXPECT_FALSE(c->parallelScatters());
  EXPECT_TRUE(cl->parallelScatters());
  // Note [Vector math in generated C]: -O3, no errno, `omp simd` loops.
  EXPECT_EQ(c->buildOptions(true), "-O3 -fno-math-errno -fopenmp-simd");
  EXPECT_EQ(c->buildOptions(false), c->buildOptions(true));
  EXPECT_EQ(cl->buildOptions(true), "");
  // Note [Reduction strategies]: work-groups (and their combine helpers)
  // in OpenCL, item ranges and vector loops in C.
  EXPECT_TRUE(cl->hasGroups());
  EXPECT_FALSE(c->hasGroups());
  EXPECT_TRUE(c->hasRanges());
  EXPECT_FALSE(cl->hasRanges());
  EXPECT_EQ(c->groupPrelude(true), "");
  for (const char* helper : {"flagos_group_sum_f(", "flagos_group_max_l(", "flagos_group_min_d(",
                             "flagos_group_prod_f("})
    EXPECT_NE(cl->groupPrelude(true).find(helper), std::string::npos) << helper;
  EXPECT_EQ(cl->groupPrelude(false).find("double"), std::string::npos);
  EXPECT_EQ(c->simdLoop("+:acc"), "#pragma omp simd reduction(+:acc)");
  EXPECT_EQ(cl->simdLoop("+:acc"), "");
  EXPECT_EQ(c->fp64Probe(), "");
  EXPECT_NE(cl->fp64Probe().find("cl_khr_fp64"), std::string::npos);
  EXPECT_EQ(c->atomicsPrelude(I64), "");
  EXPECT_NE(cl->atomicsPrelude(I64).find("cl_khr_int64_base_atomics"), std::string::npos);
  EXPECT_EQ(cl->atomicsPrelude(F32), "");
}

TEST(Pack, ArgumentsFollowTheLaunchConvention) {
  auto add = recipeFor("add");
  // b broadcasts along dim 0; dims 1 and 2 merge for every operand.
  auto o = HostTensor::contiguous(F32, {2, 3, 4}), a = o, b = o;
  b.strides = {0, 4, 1};
  flagosTensor ov = o.view(), in[2] = {a.view(), b.view()};
  flagosScalar alpha = floatScalar(0.5);
  Call call{&ov, 1, in, 2, &alpha, 1};
  Launch launch;
  pack(*add, call, Target{"c", true}, &launch);
  ASSERT_EQ(launch.args.size(), 5u);  // out, self, other, meta, alpha
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(launch.args[k].kind, FLAGOS_ARG_DEVICE_PTR);
    EXPECT_EQ(*(void* const*)launch.args[k].value, k == 0 ? ov.data : in[k - 1].data);
  }
  EXPECT_EQ(launch.args[3].kind, FLAGOS_ARG_BYTES);
  EXPECT_EQ(launch.args[3].size % 8, 0u);
  const int64_t* meta = (const int64_t*)launch.meta.data();
  EXPECT_EQ(meta[0], 24);  // work
  EXPECT_EQ(meta[1], 2);   // ndim after merging dims 1 and 2
  EXPECT_EQ(meta[2], 2);
  EXPECT_EQ(meta[3], 12);
  double alpha_value;
  std::memcpy(&alpha_value, launch.args[4].value, 8);
  EXPECT_EQ(alpha_value, 0.5);
  EXPECT_EQ(launch.global, 24u);
  // And the kernel agrees.
  for (int64_t i = 0; i < 24; ++i) a.set(i, i);
  for (int64_t i = 0; i < 12; ++i) b.set(i, 100 + i);
  ASSERT_TRUE(runC(*add, {&o}, {&a, &b}, {alpha}, Variant::Generic));
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(o.get(i), i + 0.5 * (100 + i % 12)) << i;
}

// --- pointwise kernels ------------------------------------------------------

using Ref = std::function<double(const std::vector<double>&)>;

// Runs @p id generic and specialized over contiguous, transposed and
// broadcast layouts and compares with @p ref.
void checkPointwise(const std::string& id, flagosDtype_t in_dtype, flagosDtype_t out_dtype,
                    std::vector<flagosScalar> scalars, Ref ref, double lo = -3, double hi = 3,
                    double rtol = 1e-5) {
  auto r = recipeFor(id);
  ASSERT_TRUE(r);
  const size_t nin = r->inputs.size();
  for (int layout = 0; layout < 3; ++layout) {
    for (Variant v : {Variant::Generic, Variant::Specialized}) {
      const std::vector<int64_t> shape = {3, 5};
      HostTensor out = layout == 1 ? HostTensor::reversedLayout(out_dtype, shape)
                                   : HostTensor::contiguous(out_dtype, shape);
      std::vector<HostTensor> ins;
      for (size_t k = 0; k < nin; ++k) {
        ins.push_back(layout == 1 && k == 0 ? HostTensor::reversedLayout(in_dtype, shape)
                                            : HostTensor::contiguous(in_dtype, shape));
        if (layout == 2 && k == nin - 1) {  // broadcast the last input along dim 0
          ins.back().strides[0] = 0;
        }
      }
      for (size_t k = 0; k < nin; ++k) {
        for (int64_t i = 0; i < ins[k].numel(); ++i) {
          if (ins[k].strides.size() && ins[k].strides[0] == 0 && i >= shape[1]) break;
          double x = testValue(i * 3 + (int64_t)k * 101, lo, hi);
          if (!isFloating(in_dtype)) x = std::round(x);
          ins[k].set(i, x);
        }
      }
      std::vector<HostTensor*> pins;
      for (auto& t : ins) pins.push_back(&t);
      std::string source;
      ASSERT_TRUE(runC(*r, {&out}, pins, scalars, v, &source));
      for (int64_t i = 0; i < out.numel(); ++i) {
        std::vector<double> args;
        for (auto& t : ins) args.push_back(t.get(i));
        double want = ref(args), got = out.get(i);
        if (out_dtype == BOOL) want = want != 0;
        if (!isFloating(out_dtype) && out_dtype != BOOL) want = (double)(int64_t)want;
        if (std::isnan(want) || std::isinf(want)) {
          EXPECT_EQ(std::isnan(got), std::isnan(want)) << id << " layout " << layout << " i " << i;
          if (std::isinf(want)) {
            EXPECT_EQ(got, want) << id;
          }
        } else {
          EXPECT_NEAR(got, want, rtol * (1 + std::fabs(want)))
              << id << " layout " << layout << " variant " << (int)v << " i " << i << " args "
              << args[0] << "\n"
              << (i == 0 ? source : "");
        }
      }
    }
  }
}

TEST(Pointwise, Arithmetic) {
  checkPointwise("add", F32, F32, {floatScalar(2)}, [](auto a) { return a[0] + 2 * a[1]; });
  checkPointwise("add", F64, F64, {floatScalar(0.5)}, [](auto a) { return a[0] + 0.5 * a[1]; });
  checkPointwise("sub", I32, I32, {intScalar(3)}, [](auto a) { return a[0] - 3 * a[1]; });
  checkPointwise(
      "mul", U8, U8, {}, [](auto a) { return (double)(uint8_t)(a[0] * a[1]); }, 0, 20);
  checkPointwise("addcmul", F32, F32, {floatScalar(0.25)},
                 [](auto a) { return a[0] + 0.25 * a[1] * a[2]; });
  checkPointwise("lerp_tensor", F32, F32, {}, [](auto a) { return a[0] + a[2] * (a[1] - a[0]); });
}

TEST(Pointwise, IntegerDivisionIsExact) {
  auto nz = [](double b) { return b == 0 ? 1 : b; };
  (void)nz;
  checkPointwise(
      "floor_divide", I64, I64, {}, [](auto a) { return std::floor(a[0] / a[1]); }, 1, 9);
  checkPointwise(
      "remainder", I32, I32, {}, [](auto a) { return a[0] - std::floor(a[0] / a[1]) * a[1]; }, -9,
      -1);
  checkPointwise(
      "div_mode", I32, I32, {intScalar(0)}, [](auto a) { return std::trunc(a[0] / a[1]); }, 1, 9);
  checkPointwise(
      "div_mode", F32, F32, {noneScalar()}, [](auto a) { return a[0] / a[1]; }, 1, 9);
  checkPointwise(
      "div_mode", F32, F32, {intScalar(1)}, [](auto a) { return std::floor(a[0] / a[1]); }, 1, 9);
  checkPointwise(
      "pow", I64, I64, {}, [](auto a) { return std::pow(a[0], std::fabs(a[1])); }, 0, 4);
  checkPointwise(
      "fmod", I32, I32, {}, [](auto a) { return std::fmod(a[0], a[1]); }, 1, 9);
}

TEST(Pointwise, MathFunctions) {
  checkPointwise("exp", F32, F32, {}, [](auto a) { return std::exp(a[0]); });
  checkPointwise("sigmoid", F64, F64, {}, [](auto a) { return 1 / (1 + std::exp(-a[0])); });
  checkPointwise("round", F32, F32, {}, [](auto a) { return std::nearbyint(a[0]); });
  checkPointwise(
      "erfinv", F64, F64, {}, [](auto a) { return a[0]; }, 0, 0);  // erfinv(0)
  checkPointwise(
      "lgamma", F32, F32, {}, [](auto a) { return std::lgamma(a[0]); }, 0.1, 5);
  checkPointwise("atan2", F32, F32, {}, [](auto a) { return std::atan2(a[0], a[1]); });
  checkPointwise("gelu", F32, F32, {intScalar(0)},
                 [](auto a) { return 0.5 * a[0] * (1 + std::erf(a[0] / std::sqrt(2.0))); });
  checkPointwise("gelu", F32, F32, {intScalar(1)}, [](auto a) {
    double x = a[0];
    return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  });
  checkPointwise("abs", I32, I32, {}, [](auto a) { return std::fabs(a[0]); });
  checkPointwise("sign", F32, F32, {}, [](auto a) { return (a[0] > 0) - (a[0] < 0); });
}

TEST(Pointwise, SpecialValuesMatchTorch) {
  // nearbyint rounds half to even; erfinv inverts erf; digamma.
  auto r = recipeFor("round");
  auto in = HostTensor::contiguous(F32, {6}), out = in;
  const double xs[] = {0.5, 1.5, 2.5, -0.5, -2.5, 3.4999};
  const double want[] = {0, 2, 2, -0.0, -2, 3};
  for (int i = 0; i < 6; ++i) in.set(i, xs[i]);
  ASSERT_TRUE(runC(*r, {&out}, {&in}, {}, Variant::Generic));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out.get(i), want[i]) << xs[i];

  auto e = HostTensor::contiguous(F64, {5}), eo = e;
  const double ys[] = {-0.999, -0.3, 0.1, 0.9, 0.999999};
  for (int i = 0; i < 5; ++i) e.set(i, ys[i]);
  ASSERT_TRUE(runC(*recipeFor("erfinv"), {&eo}, {&e}, {}, Variant::Generic));
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(std::erf(eo.get(i)), ys[i], 1e-12) << ys[i];

  auto g = HostTensor::contiguous(F64, {4}), go = g;
  const double gs[] = {1, 0.5, 10.5, -1.5};
  const double gw[] = {-0.5772156649015329, -1.9635100260214235, 2.3030010342976857,
                       0.7031566406452432};
  for (int i = 0; i < 4; ++i) g.set(i, gs[i]);
  ASSERT_TRUE(runC(*recipeFor("digamma"), {&go}, {&g}, {}, Variant::Generic));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(go.get(i), gw[i], 1e-12) << gs[i];
}

TEST(Pointwise, FloorDivisionClampAndLerpLikeTorch) {
  checkPointwise(
      "floor_divide", F32, F32, {}, [](auto a) { return std::floor(a[0] / a[1]); }, -9, 9);
  checkPointwise(
      "floor_divide", I32, I32, {}, [](auto a) { return std::floor(a[0] / a[1]); }, 1, 9);
  checkPointwise(
      "floor_divide", I64, I64, {}, [](auto a) { return std::floor(a[0] / a[1]); }, -9, -1);
  checkPointwise(
      "div_mode", I64, I64, {intScalar(1)}, [](auto a) { return std::floor(a[0] / a[1]); }, -9, -1);
  checkPointwise("clamp", F32, F32, {noneScalar(), floatScalar(1)},
                 [](auto a) { return std::min(a[0], 1.0); });
  checkPointwise("clamp", I32, I32, {intScalar(-1), noneScalar()},
                 [](auto a) { return std::max(a[0], -1.0); });
  checkPointwise("clamp", F32, F32, {noneScalar(), noneScalar()}, [](auto a) { return a[0]; });
  checkPointwise("lerp", F32, F32, {floatScalar(0.75)},
                 [](auto a) { return a[0] + 0.75 * (a[1] - a[0]); });
}

TEST(Pointwise, BesselI0RemainderLogaddexp) {
  checkPointwise(
      "i0", F64, F64, {}, [](auto a) { return std::cyl_bessel_i(0.0, std::fabs(a[0])); }, -30, 30,
      1e-12);
  checkPointwise(
      "i0", F32, F32, {}, [](auto a) { return std::cyl_bessel_i(0.0, std::fabs(a[0])); }, -89, 89,
      1e-5);
  // Python's modulo: the result takes the divisor's sign.
  checkPointwise(
      "remainder", F32, F32, {}, [](auto a) { return a[0] - std::floor(a[0] / a[1]) * a[1]; }, -3,
      3, 1e-5);
  auto r = recipeFor("logaddexp");
  auto x = HostTensor::contiguous(F32, {3}), y = x, o = x;
  const double xs[] = {-INFINITY, INFINITY, 1}, ys[] = {-INFINITY, INFINITY, 2};
  for (int i = 0; i < 3; ++i) {
    x.set(i, xs[i]);
    y.set(i, ys[i]);
  }
  ASSERT_TRUE(runC(*r, {&o}, {&x, &y}, {}, Variant::Generic));
  EXPECT_EQ(o.get(0), -INFINITY);
  EXPECT_EQ(o.get(1), INFINITY);
  EXPECT_NEAR(o.get(2), std::log(std::exp(1.0) + std::exp(2.0)), 1e-6);
}

TEST(Pointwise, NanPropagatesThroughMaxMin) {
  for (const char* id : {"relu", "clamp_min"}) {
    auto r = recipeFor(id);
    auto in = HostTensor::contiguous(F32, {3}), out = in;
    in.set(0, NAN);
    in.set(1, -1);
    in.set(2, 2);
    std::vector<flagosScalar> s(r->scalars.size(), floatScalar(0));
    ASSERT_TRUE(runC(*r, {&out}, {&in}, s, Variant::Specialized));
    EXPECT_TRUE(std::isnan(out.get(0))) << id;
    EXPECT_EQ(out.get(1), 0);
    EXPECT_EQ(out.get(2), 2);
  }
  checkPointwise("maximum", F32, F32, {}, [](auto a) { return std::max(a[0], a[1]); });
  checkPointwise("hardtanh", I32, I32, {intScalar(-1), intScalar(1)},
                 [](auto a) { return std::min(std::max(a[0], -1.0), 1.0); });
}

TEST(Pointwise, ComparisonsLogicalAndBitwise) {
  checkPointwise("lt", F32, BOOL, {}, [](auto a) { return a[0] < a[1]; });
  checkPointwise("ge_scalar", I32, BOOL, {intScalar(1)}, [](auto a) { return a[0] >= 1; });
  checkPointwise(
      "logical_xor", F32, BOOL, {}, [](auto a) { return (a[0] > 0) != (a[1] > 0); }, 0, 1.4);
  checkPointwise(
      "bitwise_xor", I32, I32, {}, [](auto a) { return (double)((int64_t)a[0] ^ (int64_t)a[1]); },
      -9, 9);
  checkPointwise(
      "bitwise_not", BOOL, BOOL, {}, [](auto a) { return a[0] == 0; }, 0, 1);
  checkPointwise("bitwise_not", I32, I32, {}, [](auto a) { return (double)~(int64_t)a[0]; });
  checkPointwise("isnan", F32, BOOL, {}, [](auto a) { return 0; });
  checkPointwise(
      "add", BOOL, BOOL, {intScalar(1)}, [](auto a) { return a[0] || a[1]; }, 0, 1);
}

TEST(Pointwise, MixedDtypesAndOptionalScalars) {
  // where: a bool condition with float values.
  auto r = recipeFor("where");
  auto c = HostTensor::contiguous(BOOL, {4}), x = HostTensor::contiguous(F32, {4}), y = x, o = x;
  for (int i = 0; i < 4; ++i) {
    c.set(i, i % 2);
    x.set(i, i);
    y.set(i, -i);
  }
  ASSERT_TRUE(runC(*r, {&o}, {&c, &x, &y}, {}, Variant::Generic));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(o.get(i), i % 2 ? i : -i);
  // Integer inputs, floating output: computed in the output's dtype.
  checkPointwise(
      "sqrt", I32, F32, {}, [](auto a) { return std::sqrt(a[0]); }, 0, 9);
  // logit: `eps is None` decided per call.
  checkPointwise(
      "logit", F64, F64, {noneScalar()}, [](auto a) { return std::log(a[0] / (1 - a[0])); }, 0.05,
      0.95);
  checkPointwise(
      "logit", F64, F64, {floatScalar(0.2)},
      [](auto a) {
        double z = std::min(std::max(a[0], 0.2), 0.8);
        return std::log(z / (1 - z));
      },
      0.05, 0.95);
  checkPointwise("nan_to_num", F32, F32, {floatScalar(0), floatScalar(9), floatScalar(-9)},
                 [](auto a) { return a[0]; });
}

TEST(Pointwise, HalfAndBfloat16) {
  checkPointwise(
      "mul", F16, F16, {}, [](auto a) { return halfToFloat(floatToHalfSlow(a[0] * a[1])); }, -3, 3,
      1e-3);
  checkPointwise(
      "neg", BF16, BF16, {}, [](auto a) { return -a[0]; }, -3, 3, 1e-2);
  checkPointwise(
      "exp", F16, F32, {}, [](auto a) { return std::exp(a[0]); }, -3, 3, 1e-5);
}

// --- reductions ---------------------------------------------------------------

struct ReduceCase {
  const char* id;
  uint64_t mask;
  bool keepdim;
};

// Reference reduction over @p mask of a [2, 3, 4] tensor.
void checkReduce(const std::string& id, flagosDtype_t in_dtype, flagosDtype_t out_dtype,
                 uint64_t mask, bool keepdim, bool transposed, double lo, double hi) {
  auto r = recipeFor(id);
  const std::vector<int64_t> shape = {2, 3, 4};
  HostTensor in = transposed ? HostTensor::reversedLayout(in_dtype, shape)
                             : HostTensor::contiguous(in_dtype, shape);
  for (int64_t i = 0; i < in.numel(); ++i) {
    double x = testValue(i, lo, hi);
    in.set(i, isFloating(in_dtype) ? x : std::round(x));
  }
  const uint64_t eff = mask == 0 ? 7 : mask;
  std::vector<int64_t> oshape;
  for (int d = 0; d < 3; ++d) {
    if (!(eff >> d & 1))
      oshape.push_back(shape[d]);
    else if (keepdim)
      oshape.push_back(1);
  }
  for (Variant v : {Variant::Generic, Variant::Specialized}) {
    HostTensor out = HostTensor::contiguous(out_dtype, oshape);
    std::vector<flagosScalar> scalars;
    if (r->scalars.size() >= 1) {
      scalars.push_back(id == "prod" ? intScalar(__builtin_ctzll(eff)) : intScalar((int64_t)mask));
    }
    while (scalars.size() < r->scalars.size()) scalars.push_back(intScalar(keepdim));
    if (id == "sum" || id == "mean" || id == "prod") scalars.back() = noneScalar();  // dtype
    std::string source;
    ASSERT_TRUE(runC(*r, {&out}, {&in}, scalars, v, &source));
    // Reference: walk every input element into its output slot.
    std::vector<std::vector<double>> groups(out.numel());
    for (int64_t i = 0; i < in.numel(); ++i) {
      int64_t c[3] = {i / 12, (i / 4) % 3, i % 4}, o = 0;
      for (int d = 0; d < 3; ++d) {
        if (!(eff >> d & 1)) o = o * shape[d] + c[d];
      }
      groups[o].push_back(in.get(i));
    }
    for (int64_t o = 0; o < out.numel(); ++o) {
      const auto& g = groups[o];
      double want = 0;
      if (id == "sum" || id == "mean") {
        for (double x : g) want += x;
        if (id == "mean") want /= g.size();
      } else if (id == "prod" || id == "prod_all") {
        want = 1;
        for (double x : g) want *= x;
      } else if (id == "amax" || id == "max_all" || id == "amin" || id == "min_all") {
        bool is_max = id == "amax" || id == "max_all";
        want = g[0];
        for (double x : g) {
          if (std::isnan(x) || std::isnan(want))
            want = NAN;
          else
            want = is_max ? std::max(want, x) : std::min(want, x);
        }
      } else if (id == "any") {
        for (double x : g) want = want || x != 0;
      } else if (id == "all") {
        want = 1;
        for (double x : g) want = want && x != 0;
      }
      double got = out.get(o);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << id << " mask " << mask;
      } else {
        EXPECT_NEAR(got, want, 1e-5 * (1 + std::fabs(want)))
            << id << " mask " << mask << " keepdim " << keepdim << " variant " << (int)v << " o "
            << o << "\n"
            << (o == 0 ? source : "");
      }
    }
  }
}

TEST(Reductions, OverDimMasks) {
  for (uint64_t mask : {0, 1, 2, 4, 3, 5, 6, 7}) {
    for (bool keepdim : {false, true}) {
      checkReduce("sum", F32, F32, mask, keepdim, mask % 2, -2, 2);
      checkReduce("mean", F64, F64, mask, keepdim, !(mask % 2), -2, 2);
      checkReduce("amax", F32, F32, mask, keepdim, false, -5, 5);
      checkReduce("amin", I32, I32, mask, keepdim, true, -5, 5);
      checkReduce("any", F32, BOOL, mask, keepdim, false, -0.4, 0.45);
      checkReduce("all", I64, BOOL, mask, keepdim, true, -0.4, 3);
    }
  }
  checkReduce("sum", I32, I64, 6, false, false, -100, 100);
  checkReduce("sum", BOOL, I64, 0, false, false, 0, 1);
  checkReduce("prod", F64, F64, 2, false, false, 0.5, 1.5);
  checkReduce("prod", I64, I64, 4, true, true, -3, 3);
  checkReduce("prod_all", F32, F32, 0, false, false, 0.8, 1.2);
  checkReduce("max_all", F16, F16, 0, false, true, -8, 8);
  checkReduce("min_all", U8, U8, 0, false, false, 0, 200);
  checkReduce("sum", BF16, F32, 3, false, false, -4, 4);
}

TEST(Reductions, MaxPropagatesNan) {
  auto r = recipeFor("amax");
  auto in = HostTensor::contiguous(F32, {2, 3}), out = HostTensor::contiguous(F32, {2});
  for (int i = 0; i < 6; ++i) in.set(i, i);
  in.set(4, NAN);
  ASSERT_TRUE(runC(*r, {&out}, {&in}, {intScalar(2), intScalar(0)}, Variant::Generic));
  EXPECT_EQ(out.get(0), 2);
  EXPECT_TRUE(std::isnan(out.get(1)));
}

// Note [Reduction strategies] in "c": column sums in blocks of up to 512
// outputs (across block and row-run boundaries, the launch split in two as
// the plugin's threads would), rows by vector loops (NaN kept aside for
// max/min), against references in double.
TEST(Reductions, ColumnBlocksAndVectorRows) {
  auto check = [](const std::string& id, HostTensor in, uint64_t mask, flagosDtype_t out_dtype,
                  Variant v, double rtol) {
    auto r = recipeFor(id);
    std::vector<int64_t> kept;
    for (size_t d = 0; d < in.shape.size(); ++d)
      if (!(mask >> d & 1)) kept.push_back(in.shape[d]);
    HostTensor out = HostTensor::contiguous(out_dtype, kept);
    std::vector<flagosScalar> s = {intScalar((int64_t)mask)};
    while (s.size() < r->scalars.size()) s.push_back(intScalar(0));
    if (id == "sum" || id == "mean") s.back() = noneScalar();
    std::string source;
    ASSERT_TRUE(runC(*r, {&out}, {&in}, s, v, &source));
    const std::vector<double> want = referenceReduce(id, in, mask);
    int failures = 0;
    for (int64_t o = 0; o < out.numel() && failures < 3; ++o) {
      const auto ok = closeTo(out.get(o), want[o], rtol, rtol);
      failures += !ok;
      EXPECT_TRUE(ok) << id << " mask " << mask << " output " << o << "\n"
                      << (failures == 1 ? source : "");
    }
  };
  auto filled = [](std::vector<int64_t> shape, double lo, double hi, int seed) {
    HostTensor t = HostTensor::contiguous(F32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, testValue(i * 3 + seed, lo, hi));
    return t;
  };
  for (Variant v : {Variant::Generic, Variant::Specialized}) {
    // Columns: 1300 outputs (blocks of 512 and a tail), runs of 7 (a block
    // stops at each run's end), a transposed input (strided columns).
    HostTensor x = filled({50, 1300}, -2, 2, 1);
    x.set(700, NAN);
    check("sum", x, 1, F32, v, 1e-5);
    check("amax", x, 1, F32, v, 0);
    check("amin", filled({3, 40, 7}, -2, 2, 2), 2, F32, v, 0);
    HostTensor t = HostTensor::reversedLayout(F32, {60, 30});
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, testValue(i, -1, 1));
    check("sum", t, 1, F32, v, 1e-5);
    // Rows: vector loops with NaN and infinities.
    HostTensor y = filled({5, 1003}, -2, 2, 3);
    y.set(17, NAN);
    y.set(1003 + 5, INFINITY);
    for (int64_t j = 0; j < 1003; ++j) y.set(2 * 1003 + j, -INFINITY);
    for (const char* id : {"sum", "mean", "amax", "amin"}) check(id, y, 2, F32, v, 1e-6);
  }
}

// --- row operators --------------------------------------------------------------

void checkRows(const std::string& id, int dim, bool transposed) {
  auto r = recipeFor(id);
  const std::vector<int64_t> shape = {3, 4, 5};
  const bool backward = r->inputs.size() == 2;
  std::vector<HostTensor> ins;
  for (size_t k = 0; k < r->inputs.size(); ++k) {
    ins.push_back(transposed ? HostTensor::reversedLayout(F32, shape)
                             : HostTensor::contiguous(F32, shape));
    for (int64_t i = 0; i < ins[k].numel(); ++i) ins[k].set(i, testValue(i + 31 * k, -3, 3));
  }
  for (Variant v : {Variant::Generic, Variant::Specialized}) {
    HostTensor out = HostTensor::contiguous(F32, shape);
    std::vector<HostTensor*> pins;
    for (auto& t : ins) pins.push_back(&t);
    ASSERT_TRUE(runC(*r, {&out}, pins, {intScalar(dim), intScalar(0)}, v));
    int64_t stride = dim == 2 ? 1 : dim == 1 ? 5 : 20;
    for (int64_t i = 0; i < out.numel(); ++i) {
      int64_t pos = (i / stride) % shape[dim], first = i - pos * stride;
      double m = -INFINITY, sum = 0, want;
      for (int64_t j = 0; j < shape[dim]; ++j) m = std::max(m, ins[0].get(first + j * stride));
      for (int64_t j = 0; j < shape[dim]; ++j) {
        double g = ins[0].get(first + j * stride);
        sum += !backward                  ? std::exp(g - m)
               : id == "softmax_backward" ? g * ins[1].get(first + j * stride)
                                          : g;
      }
      double x = ins[0].get(i);
      if (id == "softmax")
        want = std::exp(x - m) / sum;
      else if (id == "log_softmax")
        want = x - m - std::log(sum);
      else if (id == "softmax_backward")
        want = ins[1].get(i) * (x - sum);
      else
        want = x - std::exp(ins[1].get(i)) * sum;
      EXPECT_NEAR(out.get(i), want, 1e-5 * (1 + std::fabs(want))) << id << " dim " << dim;
    }
  }
}

TEST(RowOps, SoftmaxFamilies) {
  for (const char* id : {"softmax", "log_softmax", "softmax_backward", "log_softmax_backward"}) {
    for (int dim = 0; dim < 3; ++dim) checkRows(id, dim, dim == 1);
  }
}

}  // namespace
}  // namespace flagos::kernels::testing
