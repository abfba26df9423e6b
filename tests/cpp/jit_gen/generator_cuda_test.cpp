// The "cuda-c" dialect (emit_cuda.cpp) compiled by NVRTC for sm_90, without
// a GPU: every catalog pointwise operator in seven dtypes and three
// layouts, the reductions and row operators in each strategy, and fused
// kernels in each mode. (Every call the other generator tests run through
// runC is compiled for CUDA too: nvrtc_harness.h.) Running them is the
// device check's job (scripts/device_check.sh).
#include "generator_harness.h"
#include "jit/gen/fused.h"

namespace flagos::kernels::testing {
namespace {

constexpr flagosDtype_t F32 = FLAGOS_DTYPE_FLOAT32, F64 = FLAGOS_DTYPE_FLOAT64,
                        F16 = FLAGOS_DTYPE_FLOAT16, BF16 = FLAGOS_DTYPE_BFLOAT16,
                        I32 = FLAGOS_DTYPE_INT32, I64 = FLAGOS_DTYPE_INT64,
                        BOOL = FLAGOS_DTYPE_BOOL;

#define REQUIRE_NVRTC()                                                                    \
  Nvrtc* nvrtc = Nvrtc::get();                                                             \
  if (nvrtc == nullptr)                                                                    \
  GTEST_SKIP() << "NVRTC not found: configure with the nvidia-cuda-nvrtc wheel installed " \
                  "(cmake/cuda_sdk.cmake) or set FLAGOS_NVRTC_LIBRARY"

// Emits @p call's kernel for CUDA into @p sources; false when the cuda
// target declines it.
bool emitted(const Recipe& r, const Call& call, Variant v, std::vector<Source>* sources) {
  const Target target{"cuda-c", true, 256};
  KernelKey key;
  if (!keyFor(r, call, v, target, &key, nullptr)) return false;
  sources->push_back(emit(r, *signatureOf(r, call), v, target));
  return true;
}

// Builds every source (nvrtc_harness.h: batched, on every core).
void expectAllBuild(Nvrtc* nvrtc, const std::vector<Source>& sources) {
  const std::vector<std::string> failures = buildAll(nvrtc, sources);
  EXPECT_TRUE(failures.empty()) << failures.size() << " rejected; the first:\n"
                                << (failures.empty() ? "" : failures[0]);
}

TEST(CudaGenerated, NvrtcIsFound) {
  REQUIRE_NVRTC();
  int major = 0, minor = 0;
  nvrtc->version(&major, &minor);
  std::printf("NVRTC %d.%d from %s\n", major, minor, nvrtc->path.c_str());
  EXPECT_GE(major, 12);
}

TEST(CudaGenerated, EveryPointwiseKernelBuilds) {
  REQUIRE_NVRTC();
  int built = 0, rows = 0;
  std::vector<Source> sources;
  for (const auto& row : catalogRows("pointwise")) {
    auto r = makeRecipe(row.info, nullptr);
    if (!r) continue;
    ++rows;
    for (flagosDtype_t dt : {F32, F64, F16, BF16, I32, I64, BOOL}) {
      // Contiguous; for float32 also one operand transposed (strided index
      // arithmetic) and a specialized kernel (shape baked in).
      const int layouts = dt == F32 ? 3 : 1;
      for (int layout = 0; layout < layouts; ++layout) {
        const Variant v = layout == 2 ? Variant::Specialized : Variant::Generic;
        std::vector<HostTensor> ts;
        for (size_t k = 0; k < 1 + row.info.inputs.size(); ++k) {
          ts.push_back(layout == 1 && k == 1 ? HostTensor::reversedLayout(dt, {4, 5})
                                             : HostTensor::contiguous(dt, {4, 5}));
        }
        std::vector<flagosTensor> views;
        for (auto& t : ts) views.push_back(t.view());
        const bool floating = dt == F32 || dt == F64 || dt == F16 || dt == BF16;
        std::vector<flagosScalar> scalars(row.info.scalars.size(),
                                          floating ? floatScalar(0.5) : intScalar(1));
        Call call{views.data(),     1,
                  views.data() + 1, (int32_t)row.info.inputs.size(),
                  scalars.data(),   (int32_t)scalars.size()};
        built += emitted(*r, call, v, &sources);
      }
    }
  }
  expectAllBuild(nvrtc, sources);
  std::printf("%d pointwise kernels of %d operators built for sm_90\n", built, rows);
  EXPECT_GT(built, 900);
}

// Each reduction over the last dim of [64, 256] (a work-group segment per
// row), the first (columns), both, and short rows [64, 8] (an item per row).
TEST(CudaGenerated, ReductionsAndRowOperatorsInEachStrategy) {
  REQUIRE_NVRTC();
  int built = 0;
  std::vector<Source> sources;
  for (const auto& row : catalogRows("reduction")) {
    auto r = makeRecipe(row.info, nullptr);
    if (!r) continue;
    for (flagosDtype_t dt : {F32, BF16, I64}) {
      for (int shape = 0; shape < 2; ++shape) {
        const std::vector<int64_t> in_shape = {64, shape == 0 ? 256 : 8};
        for (uint64_t mask : {uint64_t{2}, uint64_t{1}, uint64_t{3}}) {
          for (Variant v : {Variant::Generic, Variant::Specialized}) {
            std::vector<HostTensor> ins;
            for (size_t k = 0; k < row.info.inputs.size(); ++k)
              ins.push_back(HostTensor::contiguous(dt, in_shape));
            std::vector<int64_t> out_shape;
            if (r->kind == RecipeKind::Row) {
              out_shape = in_shape;
            } else {
              for (int d = 0; d < 2; ++d)
                if (!(mask >> d & 1)) out_shape.push_back(in_shape[d]);
            }
            std::vector<HostTensor> outs;
            for (int k = 0; k < row.info.num_outputs; ++k) {
              const bool index_out = k == 1 || row.info.id.find("arg") == 0;
              outs.push_back(HostTensor::contiguous(index_out ? I64 : dt, out_shape));
            }
            std::vector<flagosScalar> scalars;
            const int64_t dim = mask == 1 ? 0 : 1;
            const bool by_dim = r->kind == RecipeKind::Row || row.info.id == "prod" ||
                                row.info.id.find("arg") == 0 || row.info.num_outputs > 1;
            if (!row.info.scalars.empty())
              scalars.push_back(by_dim ? intScalar(dim) : intScalar((int64_t)mask));
            while (scalars.size() < row.info.scalars.size()) scalars.push_back(noneScalar());
            std::vector<flagosTensor> o, i;
            for (auto& t : outs) o.push_back(t.view());
            for (auto& t : ins) i.push_back(t.view());
            Call call{o.data(),          (int32_t)o.size(), i.data(),
                      (int32_t)i.size(), scalars.data(),    (int32_t)scalars.size()};
            built += emitted(*r, call, v, &sources);
          }
        }
      }
    }
  }
  expectAllBuild(nvrtc, sources);
  std::printf("%d reduction and row kernels built for sm_90\n", built);
  EXPECT_GT(built, 300);
}

// Fused kernels (Note [Fused kernel bodies]) in each mode, with the group
// combines, welford and argmax.
TEST(CudaGenerated, FusedKernelsInEachMode) {
  REQUIRE_NVRTC();
  const Dialect* dl = dialectFor("cuda-c");
  ASSERT_NE(dl, nullptr);
  auto kernel = [&](FusedMode mode, const std::string& body, bool fp64) {
    FusedKernel k;
    k.name = "flagos_fused_test";
    k.params = {{Param::Pointer, "in_ptr0", F32, "", true},
                {Param::Pointer, "in_ptr1", F16, "", true},
                {Param::Pointer, "out_ptr0", F32, "", false},
                {Param::Pointer, "out_ptr1", I64, "", false},
                {Param::Scalar, "xnumel", 0, dl->int64Type(), false},
                {Param::Scalar, "rnumel", 0, dl->int64Type(), false}};
    k.body = body;
    k.mode = mode;
    k.group = 32;
    k.rows = 4;
    k.fp64 = fp64;
    const Source src = emitFused(k, *dl);
    std::string why;
    EXPECT_TRUE(nvrtc->build(src, &why)) << why;
  };
  for (bool fp64 : {false, true}) {
    kernel(FusedMode::Pointwise,
           "  float x = in_ptr0[xindex] + FLAGOS_LD_F16(in_ptr1, xindex);\n"
           "  out_ptr0[xindex] = tanh(x) * flagos_rsqrt(x * x + 1.0f);\n"
           "  FLAGOS_ATOMIC_ADD(i64, out_ptr1, (flagos_i64)x);\n",
           fp64);
    const std::string reduce =
        "  float acc = 0.0f, best = -INFINITY, mean = 0.0f, m2 = 0.0f, w = 0.0f;\n"
        "  flagos_i64 arg = 0;\n"
        "  FLAGOS_RLOOP(r, rnumel) {\n"
        "    const float x = in_ptr0[xindex * rnumel + r];\n"
        "    acc += x;\n"
        "    if (flagos_argmax_betterf(best, arg, x, r)) { best = x; arg = r; }\n"
        "    flagos_welford_combinef(&mean, &m2, &w, x, 0.0f, 1.0f);\n"
        "  }\n"
        "  acc = FLAGOS_GROUP_SUM(f, acc);\n"
        "  FLAGOS_GROUP_ARGMAX(f, best, arg);\n"
        "  FLAGOS_GROUP_WELFORD(f, mean, m2, w);\n"
        "  if (FLAGOS_GROUP_LEADER) { out_ptr0[xindex] = acc + mean + m2; out_ptr1[xindex] = arg; "
        "}\n";
    kernel(FusedMode::ItemReduction, reduce, fp64);
    kernel(FusedMode::GroupReduction, reduce, fp64);
  }
}

}  // namespace
}  // namespace flagos::kernels::testing
