// Generated "opencl-c" kernels built and run through OpenCL directly
// (libOpenCL loaded at run time, so the test links without the SDK):
// (base, byte offset) device pointers, the rounded-up global size, and
// results equal to the "c" kernels'. Skips when no OpenCL device is found.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "generator_harness.h"

namespace flagos::kernels::testing {
namespace {

struct Cl {
#define FLAGOS_CL_FN(name) decltype(&::name) name = nullptr;
  FLAGOS_CL_FN(clGetPlatformIDs)
  FLAGOS_CL_FN(clGetDeviceIDs)
  FLAGOS_CL_FN(clGetDeviceInfo)
  FLAGOS_CL_FN(clCreateContext)
  FLAGOS_CL_FN(clCreateCommandQueue)
  FLAGOS_CL_FN(clCreateProgramWithSource)
  FLAGOS_CL_FN(clBuildProgram)
  FLAGOS_CL_FN(clGetProgramBuildInfo)
  FLAGOS_CL_FN(clCreateKernel)
  FLAGOS_CL_FN(clGetKernelInfo)
  FLAGOS_CL_FN(clSetKernelArg)
  FLAGOS_CL_FN(clCreateBuffer)
  FLAGOS_CL_FN(clEnqueueNDRangeKernel)
  FLAGOS_CL_FN(clEnqueueReadBuffer)
  FLAGOS_CL_FN(clFinish)
  FLAGOS_CL_FN(clReleaseMemObject)
  FLAGOS_CL_FN(clReleaseKernel)
  FLAGOS_CL_FN(clReleaseProgram)
#undef FLAGOS_CL_FN
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  cl_device_id device = nullptr;
  bool fp64 = false;

  // The process-wide instance, or nullptr without a usable device.
  static Cl* get() {
    static Cl* cl = [] {
      void* lib = dlopen("libOpenCL.so.1", RTLD_NOW);
      if (lib == nullptr) return (Cl*)nullptr;
      auto* c = new Cl;
#define FLAGOS_CL_LOAD(name) c->name = (decltype(c->name))dlsym(lib, #name)
      FLAGOS_CL_LOAD(clGetPlatformIDs);
      FLAGOS_CL_LOAD(clGetDeviceIDs);
      FLAGOS_CL_LOAD(clGetDeviceInfo);
      FLAGOS_CL_LOAD(clCreateContext);
      FLAGOS_CL_LOAD(clCreateCommandQueue);
      FLAGOS_CL_LOAD(clCreateProgramWithSource);
      FLAGOS_CL_LOAD(clBuildProgram);
      FLAGOS_CL_LOAD(clGetProgramBuildInfo);
      FLAGOS_CL_LOAD(clCreateKernel);
      FLAGOS_CL_LOAD(clGetKernelInfo);
      FLAGOS_CL_LOAD(clSetKernelArg);
      FLAGOS_CL_LOAD(clCreateBuffer);
      FLAGOS_CL_LOAD(clEnqueueNDRangeKernel);
      FLAGOS_CL_LOAD(clEnqueueReadBuffer);
      FLAGOS_CL_LOAD(clFinish);
      FLAGOS_CL_LOAD(clReleaseMemObject);
      FLAGOS_CL_LOAD(clReleaseKernel);
      FLAGOS_CL_LOAD(clReleaseProgram);
#undef FLAGOS_CL_LOAD
      cl_platform_id platform;
      cl_uint n = 0;
      if (c->clGetPlatformIDs == nullptr || c->clGetPlatformIDs(1, &platform, &n) != CL_SUCCESS ||
          n == 0 ||
          c->clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &c->device, &n) != CL_SUCCESS ||
          n == 0) {
        return (Cl*)nullptr;
      }
      cl_int err;
      c->context = c->clCreateContext(nullptr, 1, &c->device, nullptr, nullptr, &err);
      if (err != CL_SUCCESS) return (Cl*)nullptr;
      c->queue = c->clCreateCommandQueue(c->context, c->device, 0, &err);
      if (err != CL_SUCCESS) return (Cl*)nullptr;
      char ext[8192] = {};
      c->clGetDeviceInfo(c->device, CL_DEVICE_EXTENSIONS, sizeof ext - 1, ext, nullptr);
      c->fp64 = std::strstr(ext, "cl_khr_fp64") != nullptr;
      return c;
    }();
    return cl;
  }

  // Builds @p src (once per source text); returns its kernel or nullptr
  // with a failure recorded.
  std::map<std::string, cl_program> programs;
  cl_kernel build(const Source& src) {
    cl_int err;
    auto known = programs.find(src.text);
    if (known != programs.end()) {
      cl_kernel k = clCreateKernel(known->second, src.kernel_name.c_str(), &err);
      return err == CL_SUCCESS ? k : nullptr;
    }
    const char* text = src.text.c_str();
    cl_program p = clCreateProgramWithSource(context, 1, &text, nullptr, &err);
    if (clBuildProgram(p, 1, &device, src.options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
      std::string log(1 << 16, '\0');
      clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, log.size(), &log[0], nullptr);
      ADD_FAILURE() << "clBuildProgram:\n" << log.c_str() << "\n--- source:\n" << src.text;
      clReleaseProgram(p);
      return nullptr;
    }
    cl_kernel k = clCreateKernel(p, src.kernel_name.c_str(), &err);
    programs.emplace(src.text, p);
    EXPECT_EQ(err, CL_SUCCESS) << src.kernel_name;
    return err == CL_SUCCESS ? k : nullptr;
  }
};

#define REQUIRE_OPENCL() \
  Cl* cl = Cl::get();    \
  if (cl == nullptr) GTEST_SKIP() << "no OpenCL device"

// Runs one call through OpenCL: each tensor's whole storage in one buffer,
// its data pointer as (buffer, byte offset), the global size rounded up to
// a multiple of the local size, @p local (the kernels must check
// meta.work), as the plugin does (Note [Launch geometry]).
bool runOpenCL(Cl* cl, const Recipe& recipe, std::vector<HostTensor*> outs,
               std::vector<HostTensor*> ins, std::vector<flagosScalar> scalars, Variant variant,
               uint64_t local_size = 64, std::string* source = nullptr) {
  std::vector<flagosTensor> o, i;
  for (auto* t : outs) o.push_back(t->view());
  for (auto* t : ins) i.push_back(t->view());
  Call call{o.data(),          (int32_t)o.size(), i.data(),
            (int32_t)i.size(), scalars.data(),    (int32_t)scalars.size()};
  Target target{"opencl-c", cl->fp64, local_size};
  KernelKey key;
  std::string why;
  if (!keyFor(recipe, call, variant, target, &key, &why)) {
    ADD_FAILURE() << why;
    return false;
  }
  const Source src = emit(recipe, *signatureOf(recipe, call), variant, target);
  if (source) *source = src.text;
  cl_kernel kernel = cl->build(src);
  if (kernel == nullptr) return false;
  Launch launch;
  pack(recipe, call, target, &launch);
  std::vector<HostTensor*> all = outs;
  all.insert(all.end(), ins.begin(), ins.end());
  std::vector<cl_mem> buffers;
  cl_uint index = 0;
  cl_int err = CL_SUCCESS;
  for (size_t k = 0; k < launch.args.size(); ++k) {
    const flagosKernelArg& a = launch.args[k];
    if (a.kind == FLAGOS_ARG_DEVICE_PTR) {
      HostTensor* t = all[k];
      cl_mem m = cl->clCreateBuffer(cl->context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                    t->storage.size(), t->storage.data(), &err);
      buffers.push_back(m);
      cl_ulong offset = (cl_ulong)((uint8_t*)*(void* const*)a.value - t->storage.data());
      err |= cl->clSetKernelArg(kernel, index++, sizeof m, &m);
      err |= cl->clSetKernelArg(kernel, index++, sizeof offset, &offset);
    } else {
      err |= cl->clSetKernelArg(kernel, index++, a.size, a.value);
    }
  }
  EXPECT_EQ(err, CL_SUCCESS);
  cl_uint num_args = 0;
  cl->clGetKernelInfo(kernel, CL_KERNEL_NUM_ARGS, sizeof num_args, &num_args, nullptr);
  EXPECT_EQ(num_args, index);
  EXPECT_EQ(launch.local, local_size);
  size_t local = launch.local, global = (launch.global + local - 1) / local * local;
  if (global > 0) {
    EXPECT_EQ(cl->clEnqueueNDRangeKernel(cl->queue, kernel, 1, nullptr, &global, &local, 0, nullptr,
                                         nullptr),
              CL_SUCCESS);
  }
  for (size_t k = 0; k < outs.size(); ++k) {
    cl->clEnqueueReadBuffer(cl->queue, buffers[k], CL_TRUE, 0, outs[k]->storage.size(),
                            outs[k]->storage.data(), 0, nullptr, nullptr);
  }
  cl->clFinish(cl->queue);
  for (cl_mem m : buffers) cl->clReleaseMemObject(m);
  cl->clReleaseKernel(kernel);
  return true;
}

// Runs @p id through OpenCL and through the "c" dialect and compares.
void compareWithC(const std::string& id, std::vector<HostTensor> ins, HostTensor out,
                  std::vector<flagosScalar> scalars, Variant variant, double rtol = 1e-5) {
  Cl* cl = Cl::get();
  auto r = recipeFor(id);
  ASSERT_TRUE(r);
  HostTensor out_cl = out, out_c = out;
  std::vector<HostTensor*> pins;
  for (auto& t : ins) pins.push_back(&t);
  ASSERT_TRUE(runOpenCL(cl, *r, {&out_cl}, pins, scalars, variant));
  ASSERT_TRUE(runC(*r, {&out_c}, pins, scalars, variant));
  for (int64_t i = 0; i < out.numel(); ++i) {
    double want = out_c.get(i), got = out_cl.get(i);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << id << " " << i;
    } else {
      EXPECT_NEAR(got, want, rtol * (1 + std::fabs(want))) << id << " " << i;
    }
  }
}

HostTensor filled(HostTensor t, double lo, double hi, int seed) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    double x = testValue(i + seed, lo, hi);
    t.set(i, isFloating(t.dtype) ? x : std::round(x));
  }
  return t;
}

TEST(OpenCLGenerated, PointwiseStridedAndBroadcast) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  HostTensor a = filled(HostTensor::reversedLayout(f32, {5, 7}), -3, 3, 1);
  HostTensor b = filled(HostTensor::contiguous(f32, {5, 7}), -3, 3, 2);
  b.strides[0] = 0;  // broadcast along dim 0
  compareWithC("add", {a, b}, HostTensor::contiguous(f32, {5, 7}), {floatScalar(2)},
               Variant::Generic);
  compareWithC("add", {a, b}, HostTensor::reversedLayout(f32, {5, 7}), {floatScalar(2)},
               Variant::Specialized);
  HostTensor c = filled(HostTensor::contiguous(f32, {33}), -3, 3, 3);
  compareWithC("gelu", {c}, HostTensor::contiguous(f32, {33}), {intScalar(1)}, Variant::Generic);
}

TEST(OpenCLGenerated, IntegerHalfAndBfloat16) {
  REQUIRE_OPENCL();
  HostTensor a = filled(HostTensor::contiguous(FLAGOS_DTYPE_INT32, {40}), -50, 50, 1);
  HostTensor b = filled(HostTensor::contiguous(FLAGOS_DTYPE_INT32, {40}), 1, 9, 2);
  compareWithC("remainder", {a, b}, HostTensor::contiguous(FLAGOS_DTYPE_INT32, {40}), {},
               Variant::Specialized);
  HostTensor h = filled(HostTensor::contiguous(FLAGOS_DTYPE_FLOAT16, {2, 9}), -2, 2, 3);
  compareWithC("exp", {h}, HostTensor::contiguous(FLAGOS_DTYPE_FLOAT16, {2, 9}), {},
               Variant::Generic, 1e-3);
  HostTensor bf = filled(HostTensor::contiguous(FLAGOS_DTYPE_BFLOAT16, {9}), -2, 2, 4);
  compareWithC("sigmoid", {bf}, HostTensor::contiguous(FLAGOS_DTYPE_BFLOAT16, {9}), {},
               Variant::Specialized, 1e-2);
}

// int64 values past 2^53 survive a NaN-guarded max/min (the guard of
// maximum's expression folds away for integers: no trip through double).
TEST(OpenCLGenerated, Int64ExtremesStayExact) {
  REQUIRE_OPENCL();
  const int64_t big = std::numeric_limits<int64_t>::max(),
                low = std::numeric_limits<int64_t>::min();
  const int64_t av[] = {big, low, (int64_t{1} << 53) + 1, -7};
  const int64_t bv[] = {low, big, 0, 3};
  HostTensor a = HostTensor::contiguous(FLAGOS_DTYPE_INT64, {4});
  HostTensor b = HostTensor::contiguous(FLAGOS_DTYPE_INT64, {4});
  std::memcpy(a.storage.data(), av, sizeof av);
  std::memcpy(b.storage.data(), bv, sizeof bv);
  for (const char* id : {"maximum", "minimum"}) {
    auto r = recipeFor(id);
    ASSERT_TRUE(r);
    HostTensor out = HostTensor::contiguous(FLAGOS_DTYPE_INT64, {4});
    std::string source;
    ASSERT_TRUE(runOpenCL(Cl::get(), *r, {&out}, {&a, &b}, {}, Variant::Generic, 64, &source));
    int64_t got[4];
    std::memcpy(got, out.storage.data(), sizeof got);
    for (int i = 0; i < 4; ++i) {
      const int64_t want =
          std::string(id) == "maximum" ? std::max(av[i], bv[i]) : std::min(av[i], bv[i]);
      EXPECT_EQ(want, got[i]) << id << " " << i << "\n--- source:\n" << source;
    }
  }
}

TEST(OpenCLGenerated, ReductionAndSoftmax) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  HostTensor x = filled(HostTensor::reversedLayout(f32, {3, 4, 5}), -2, 2, 1);
  compareWithC("sum", {x}, HostTensor::contiguous(f32, {4}),
               {intScalar(5), intScalar(0), noneScalar()}, Variant::Generic);
  compareWithC("amax", {x}, HostTensor::contiguous(f32, {3, 1, 1}), {intScalar(6), intScalar(1)},
               Variant::Specialized);
  compareWithC("softmax", {x}, HostTensor::contiguous(f32, {3, 4, 5}), {intScalar(1), intScalar(0)},
               Variant::Generic);
  HostTensor y = filled(HostTensor::contiguous(f32, {3, 4, 5}), -2, 2, 7);
  compareWithC("log_softmax_backward", {x, y}, HostTensor::contiguous(f32, {3, 4, 5}),
               {intScalar(2), intScalar(0)}, Variant::Specialized);
}

// Every catalog pointwise kernel builds as OpenCL C (float32, generic).
// Slow with PoCL (a build per kernel): run with --gtest_also_run_disabled_tests.
TEST(OpenCLGenerated, DISABLED_EveryPointwiseKernelBuilds) {
  REQUIRE_OPENCL();
  for (const auto& row : catalogRows("pointwise")) {
    auto r = makeRecipe(row.info, nullptr);
    if (!r) continue;
    for (flagosDtype_t dt :
         {FLAGOS_DTYPE_FLOAT32, FLAGOS_DTYPE_INT32, FLAGOS_DTYPE_BOOL, FLAGOS_DTYPE_FLOAT16}) {
      std::vector<HostTensor> ts(1 + row.info.inputs.size(), HostTensor::contiguous(dt, {2, 3}));
      std::vector<flagosTensor> views;
      for (auto& t : ts) views.push_back(t.view());
      std::vector<flagosScalar> scalars(row.info.scalars.size(), floatScalar(0.5));
      Call call{views.data(),     1,
                views.data() + 1, (int32_t)row.info.inputs.size(),
                scalars.data(),   (int32_t)scalars.size()};
      Variant v = dt == FLAGOS_DTYPE_FLOAT16 ? Variant::Specialized : Variant::Generic;
      KernelKey key;
      if (!keyFor(*r, call, v, Target{"opencl-c", cl->fp64}, &key, nullptr)) continue;
      cl_kernel k = cl->build(emit(*r, *signatureOf(*r, call), v, Target{"opencl-c", cl->fp64}));
      EXPECT_NE(k, nullptr) << row.info.id;
      if (k) cl->clReleaseKernel(k);
    }
  }
}

// Devices without fp64: no double anywhere in the source.
TEST(OpenCLGenerated, NoDoubleWithoutFp64) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  HostTensor x = filled(HostTensor::contiguous(f32, {4, 6}), -2, 2, 1);
  HostTensor out = HostTensor::contiguous(f32, {4});
  flagosTensor o = out.view(), in = x.view();
  flagosScalar s[3] = {intScalar(2), intScalar(0), noneScalar()};
  Call call{&o, 1, &in, 1, s, 3};
  auto r = recipeFor("sum");
  Source src = emit(*r, *signatureOf(*r, call), Variant::Generic, Target{"opencl-c", false});
  EXPECT_EQ(src.text.find("double"), std::string::npos) << src.text;
  cl_kernel k = cl->build(src);
  EXPECT_NE(k, nullptr);
  if (k) cl->clReleaseKernel(k);
}

// --- reductions and row operators (csrc/jit/gen/reduce.cpp, row.cpp) -------
// Note [Reduction strategies] against references in double: every row
// length around the segment size (32 items) and the group (64 here, and an
// odd 7), row counts that give a group one or two segments, NaN / inf rows,
// every dtype class, generic and specialized kernels.

// The scalars of reduction @p id over @p mask (keepdim false).
std::vector<flagosScalar> reduceScalars(const Recipe& r, uint64_t mask) {
  std::vector<flagosScalar> s;
  s.push_back(r.id == "prod" ? intScalar(__builtin_ctzll(mask)) : intScalar((int64_t)mask));
  while (s.size() < r.scalars.size()) s.push_back(intScalar(0));
  if (r.id == "sum" || r.id == "mean" || r.id == "prod") s.back() = noneScalar();  // dtype
  return s;
}

// Runs reduction @p id of @p in over @p mask through OpenCL (local size
// @p local) and compares with referenceReduce; returns the kernel source.
std::string checkReduceCL(const std::string& id, const HostTensor& in, uint64_t mask,
                          flagosDtype_t out_dtype, uint64_t local, Variant variant,
                          double rtol = 1e-6) {
  auto r = recipeFor(id);
  std::vector<int64_t> kept;
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (!(mask >> d & 1)) kept.push_back(in.shape[d]);
  HostTensor out = HostTensor::contiguous(out_dtype, kept);
  HostTensor input = in;
  std::string source;
  EXPECT_TRUE(
      runOpenCL(Cl::get(), *r, {&out}, {&input}, reduceScalars(*r, mask), variant, local, &source));
  const std::vector<double> want = referenceReduce(id, in, mask);
  int failures = 0;
  for (int64_t o = 0; o < out.numel() && failures < 5; ++o) {
    const auto ok = closeTo(out.get(o), want[o], rtol, rtol);
    if (!ok) ++failures;
    EXPECT_TRUE(ok) << id << " " << dtypeName(in.dtype) << " shape[0] " << in.shape[0] << " mask "
                    << mask << " local " << local << " output " << o << "\n"
                    << (failures == 1 ? source : "");
  }
  return source;
}

HostTensor rowsOf(flagosDtype_t dtype, int64_t rows, int64_t len, double lo, double hi, int seed) {
  HostTensor t = HostTensor::contiguous(dtype, {rows, len});
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = testValue(i * 7 + seed, lo, hi);
    t.set(i, isFloating(dtype) ? v : std::round(v));
  }
  return t;
}

TEST(OpenCLReductions, RowsOfEveryLengthAroundTheSegment) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  for (uint64_t local : {64, 7}) {
    for (int64_t len : {1, 5, 31, 32, 33, 63, 64, 65, 127, 128, 129, 257, 1000, 4099}) {
      for (int64_t rows : {1, 3, 10}) {
        const Variant v = len % 2 ? Variant::Generic : Variant::Specialized;
        HostTensor x = rowsOf(f32, rows, len, -2, 2, (int)len);
        checkReduceCL("sum", x, 2, f32, local, v, 1e-5);
        checkReduceCL("amax", x, 2, f32, local, v);
        if (len >= 64) checkReduceCL("amin", x, 2, f32, local, Variant::Generic);
      }
    }
  }
}

TEST(OpenCLReductions, DtypesAndReducers) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32, i64 = FLAGOS_DTYPE_INT64;
  for (int64_t len : {70, 1001}) {
    for (Variant v : {Variant::Generic, Variant::Specialized}) {
      checkReduceCL("mean", rowsOf(f32, 5, len, -2, 2, 1), 2, f32, 64, v, 1e-5);
      checkReduceCL("prod", rowsOf(f32, 5, len, 0.99, 1.01, 2), 2, f32, 64, v, 1e-5);
      checkReduceCL("sum", rowsOf(FLAGOS_DTYPE_FLOAT16, 5, len, -2, 2, 3), 2, f32, 64, v, 1e-5);
      checkReduceCL("sum", rowsOf(FLAGOS_DTYPE_BFLOAT16, 5, len, -2, 2, 4), 2,
                    FLAGOS_DTYPE_BFLOAT16, 64, v, 1e-2);
      checkReduceCL("sum", rowsOf(FLAGOS_DTYPE_INT32, 5, len, -1000, 1000, 5), 2, i64, 64, v);
      checkReduceCL("sum", rowsOf(FLAGOS_DTYPE_BOOL, 5, len, 0, 1, 6), 2, i64, 64, v);
      checkReduceCL("amax", rowsOf(FLAGOS_DTYPE_INT64, 5, len, -1e6, 1e6, 7), 2, i64, 64, v);
      checkReduceCL("amin", rowsOf(FLAGOS_DTYPE_UINT8, 5, len, 0, 250, 8), 2, FLAGOS_DTYPE_UINT8,
                    64, v);
      checkReduceCL("any", rowsOf(f32, 5, len, -0.01, 0.0101, 9), 2, FLAGOS_DTYPE_BOOL, 64, v);
      checkReduceCL("all", rowsOf(f32, 5, len, -3, 3, 10), 2, FLAGOS_DTYPE_BOOL, 64, v);
      if (cl->fp64) {
        checkReduceCL("sum", rowsOf(FLAGOS_DTYPE_FLOAT64, 5, len, -2, 2, 11), 2,
                      FLAGOS_DTYPE_FLOAT64, 64, v, 1e-12);
      }
    }
  }
  // A huge row, and a full reduction (no kept dims: one segment).
  checkReduceCL("sum", rowsOf(f32, 2, 300007, 0, 1, 12), 2, f32, 64, Variant::Generic, 1e-6);
  checkReduceCL("sum", rowsOf(f32, 37, 29, -1, 1, 13), 3, f32, 64, Variant::Specialized, 1e-5);
}

TEST(OpenCLReductions, NanAndInfinityRows) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  for (int64_t len : {64, 100, 1000}) {
    HostTensor x = rowsOf(f32, 6, len, -2, 2, 1);
    x.set(0 * len + len / 2, NAN);                                    // row 0: NaN in the middle
    x.set(1 * len + len - 1, NAN);                                    // row 1: NaN in the tail
    for (int64_t j = 0; j < len; ++j) x.set(2 * len + j, -INFINITY);  // row 2: all -inf
    x.set(3 * len + 3, INFINITY);                                     // row 3: one +inf
    x.set(4 * len + 1, INFINITY);                                     // row 4: +inf and -inf
    x.set(4 * len + 2, -INFINITY);
    for (const char* id : {"sum", "amax", "amin", "mean"}) {
      for (Variant v : {Variant::Generic, Variant::Specialized})
        checkReduceCL(id, x, 2, f32, 64, v, 1e-5);
    }
  }
}

TEST(OpenCLReductions, ColumnsAndOtherLayouts) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  for (int64_t cols : {1, 7, 8, 9, 17, 64, 65}) {
    for (int64_t rows : {1, 9, 33}) {
      HostTensor x = rowsOf(f32, rows, cols, -2, 2, (int)(rows * cols));
      x.set(cols / 2, NAN);  // column cols / 2
      const Variant v = (rows + cols) % 2 ? Variant::Generic : Variant::Specialized;
      checkReduceCL("sum", x, 1, f32, 64, v, 1e-5);
      checkReduceCL("amax", x, 1, f32, 64, v);
      checkReduceCL("any", x, 1, FLAGOS_DTYPE_BOOL, 64, v);
    }
  }
  // A middle dim, leading dims, a transposed layout, an int column sum.
  HostTensor t = filled(HostTensor::contiguous(f32, {3, 50, 17}), -2, 2, 3);
  checkReduceCL("sum", t, 2, f32, 64, Variant::Generic, 1e-5);
  checkReduceCL("amin", t, 3, f32, 64, Variant::Specialized);
  checkReduceCL("mean", t, 5, f32, 64, Variant::Generic, 1e-5);
  HostTensor r = filled(HostTensor::reversedLayout(f32, {70, 90}), -2, 2, 4);
  checkReduceCL("sum", r, 1, f32, 64, Variant::Generic, 1e-5);
  checkReduceCL("sum", r, 2, f32, 64, Variant::Specialized, 1e-5);
  checkReduceCL("sum", rowsOf(FLAGOS_DTYPE_INT32, 40, 20, -99, 99, 5), 1, FLAGOS_DTYPE_INT64, 64,
                Variant::Generic);
}

// Runs row operator @p id over the last dim of @p ins through OpenCL and
// compares with referenceRows; returns the kernel source.
std::string checkRowsCL(const std::string& id, std::vector<HostTensor> ins, int dim, uint64_t local,
                        Variant variant, double rtol = 2e-6) {
  auto r = recipeFor(id);
  HostTensor out = HostTensor::contiguous(FLAGOS_DTYPE_FLOAT32, ins[0].shape);
  std::vector<HostTensor*> pins;
  std::vector<const HostTensor*> refs;
  for (auto& t : ins) {
    pins.push_back(&t);
    refs.push_back(&t);
  }
  std::string source;
  EXPECT_TRUE(runOpenCL(Cl::get(), *r, {&out}, pins, {intScalar(dim), intScalar(0)}, variant, local,
                        &source));
  const std::vector<double> want = referenceRows(id, refs, dim);
  int failures = 0;
  for (int64_t i = 0; i < out.numel() && failures < 5; ++i) {
    const auto ok = closeTo(out.get(i), want[i], rtol, 1e-6);
    if (!ok) ++failures;
    EXPECT_TRUE(ok) << id << " shape " << ins[0].shape[0] << "x" << ins[0].shape[1] << " dim "
                    << dim << " local " << local << " element " << i << "\n"
                    << (failures == 1 ? source : "");
  }
  return source;
}

TEST(OpenCLRowOps, SoftmaxFamiliesAroundTheSegment) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  for (uint64_t local : {64, 7}) {
    for (int64_t len : {1, 7, 63, 64, 65, 129, 1000, 4099}) {
      const int64_t rows = len % 2 ? 9 : 10;
      HostTensor x = rowsOf(f32, rows, len, -5, 5, (int)len);
      HostTensor y = rowsOf(f32, rows, len, -3, 0, (int)len + 1);
      if (len > 1) {
        x.set(1 * len + len / 2, NAN);                                    // a NaN row
        for (int64_t j = 0; j < len; ++j) x.set(2 * len + j, -INFINITY);  // all -inf: NaN
        x.set(3 * len + len - 1, INFINITY);                               // +inf: NaN row
        x.set(4 * len + 1, -INFINITY);                                    // one -inf: 0
      }
      const Variant v = len % 2 ? Variant::Generic : Variant::Specialized;
      for (const char* id : {"softmax", "log_softmax"}) checkRowsCL(id, {x}, 1, local, v);
      HostTensor g = rowsOf(f32, rows, len, -2, 2, (int)len + 2);
      checkRowsCL("softmax_backward", {g, y}, 1, local, v, 1e-5);
      checkRowsCL("log_softmax_backward", {g, y}, 1, local, v, 1e-5);
    }
  }
  // Over the leading dim: an item a row, strided.
  HostTensor x = rowsOf(f32, 70, 33, -5, 5, 3);
  for (const char* id : {"softmax", "log_softmax"})
    for (Variant v : {Variant::Generic, Variant::Specialized}) checkRowsCL(id, {x}, 0, 64, v);
}

// Structure: which strategy a call's kernel takes (Note [Reduction
// strategies]), seen in its source.
TEST(OpenCLReductions, KernelsTakeTheirStrategy) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  // Long contiguous rows: a segment per row, vector loads, the combine helper.
  std::string src =
      checkReduceCL("sum", rowsOf(f32, 4, 512, -1, 1, 1), 2, f32, 64, Variant::Generic, 1e-5);
  EXPECT_NE(src.find("reqd_work_group_size(64, 1, 1)"), std::string::npos) << src;
  EXPECT_NE(src.find("flagos_segment_sum_d(acc"), std::string::npos) << src;
  EXPECT_NE(src.find("vload8"), std::string::npos) << src;
  src = checkRowsCL("softmax", {rowsOf(f32, 4, 512, -1, 1, 2)}, 1, 64, Variant::Specialized);
  EXPECT_NE(src.find("vstore8"), std::string::npos) << src;
  EXPECT_NE(src.find("flagos_segment_max_f(m"), std::string::npos) << src;
  EXPECT_NE(src.find("flagos_segment_sum_d(sum"), std::string::npos) << src;
  // Columns: every item stays for the barriers, 8 outputs an item.
  src = checkReduceCL("sum", rowsOf(f32, 512, 64, -1, 1, 3), 1, f32, 64, Variant::Generic, 1e-5);
  EXPECT_NE(src.find("barrier(CLK_LOCAL_MEM_FENCE)"), std::string::npos) << src;
  EXPECT_NE(src.find("if (live)"), std::string::npos) << src;
  EXPECT_EQ(src.find("flagos_segment_"), std::string::npos) << src;
  // Short rows: one item per row, no group helpers.
  src = checkReduceCL("sum", rowsOf(f32, 512, 16, -1, 1, 4), 2, f32, 64, Variant::Generic, 1e-5);
  EXPECT_EQ(src.find("flagos_segment_"), std::string::npos) << src;
  EXPECT_EQ(src.find("barrier("), std::string::npos) << src;
}

TEST(OpenCLReductions, LaunchGeometryFollowsTheStrategy) {
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  auto r = recipeFor("sum");
  auto launch = [&](std::vector<int64_t> shape, uint64_t mask, uint64_t local,
                    const char* language = "opencl-c") {
    HostTensor x = HostTensor::contiguous(f32, shape);
    std::vector<int64_t> kept;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!(mask >> d & 1)) kept.push_back(shape[d]);
    HostTensor out = HostTensor::contiguous(f32, kept);
    flagosTensor o = out.view(), i = x.view();
    std::vector<flagosScalar> s = reduceScalars(*r, mask);
    Call call{&o, 1, &i, 1, s.data(), (int32_t)s.size()};
    Launch l;
    pack(*r, call, Target{language, true, local}, &l);
    return std::make_pair(l.global, l.local);
  };
  // Group: segments of 32 in a group of 256 where the rows divide into 8
  // of them (4096 rows -> 512 groups), else fewer, longer ones: no segment
  // is past the work (100 rows: 4 segments of 64 a group, 25 groups).
  EXPECT_EQ(launch({4096, 4096}, 2, 256), std::make_pair(uint64_t{512 * 256}, uint64_t{256}));
  EXPECT_EQ(launch({100, 4096}, 2, 256), std::make_pair(uint64_t{25 * 256}, uint64_t{256}));
  // A full reduction: one group.
  EXPECT_EQ(launch({100, 4096}, 3, 256), std::make_pair(uint64_t{256}, uint64_t{256}));
  // Columns: 8 outputs an item (4096 / 8), the device's local size.
  EXPECT_EQ(launch({100, 4096}, 1, 256), std::make_pair(uint64_t{512}, uint64_t{256}));
  // Short rows: an item per row.
  EXPECT_EQ(launch({100, 16}, 2, 256), std::make_pair(uint64_t{100}, uint64_t{256}));
  // An odd group size: one segment a group.
  EXPECT_EQ(launch({100, 4096}, 2, 7), std::make_pair(uint64_t{100 * 7}, uint64_t{7}));
  // "c": an item per output, the smallest chunk a thread takes shrunk by
  // the elements an item reduces (4096 rows of 4096 are not one chunk).
  EXPECT_EQ(launch({4096, 4096}, 2, 4096, "c"), std::make_pair(uint64_t{4096}, uint64_t{1}));
  EXPECT_EQ(launch({100, 16}, 2, 4096, "c"), std::make_pair(uint64_t{100}, uint64_t{256}));
}

// --- index / shape recipes (csrc/jit/gen/index.cpp) -----------------------

std::shared_ptr<const Recipe> indexRecipeFor(const std::string& id) {
  for (const char* family : {"index", "shape"})
    for (const auto& row : catalogRows(family))
      if (row.info.id == id) return makeRecipe(row.info, nullptr);
  return nullptr;
}

// Runs @p id through OpenCL and "c"; in place (out is ins[0]) when @p inplace.
void compareIndex(const std::string& id, std::vector<HostTensor> ins, HostTensor out,
                  std::vector<flagosScalar> scalars, bool inplace = false) {
  auto r = indexRecipeFor(id);
  ASSERT_TRUE(r) << id;
  std::vector<HostTensor> ins_cl = ins, ins_c = ins;
  HostTensor out_cl = out, out_c = out;
  std::vector<HostTensor*> pcl, pc;
  for (size_t k = 0; k < ins.size(); ++k) {
    pcl.push_back(inplace && k == 0 ? &out_cl : &ins_cl[k]);
    pc.push_back(inplace && k == 0 ? &out_c : &ins_c[k]);
  }
  ASSERT_TRUE(runOpenCL(Cl::get(), *r, {&out_cl}, pcl, scalars, Variant::Generic));
  ASSERT_TRUE(runC(*r, {&out_c}, pc, scalars, Variant::Generic));
  for (int64_t i = 0; i < out.numel(); ++i)
    EXPECT_NEAR(out_cl.get(i), out_c.get(i), 1e-5 * (1 + std::fabs(out_c.get(i)))) << id << i;
}

HostTensor indices(std::vector<int64_t> shape, std::vector<int64_t> v) {
  HostTensor t = HostTensor::contiguous(FLAGOS_DTYPE_INT64, shape);
  for (size_t i = 0; i < v.size(); ++i) t.set((int64_t)i, (double)v[i]);
  return t;
}

TEST(OpenCLGenerated, IndexGatherLike) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  HostTensor x = filled(HostTensor::reversedLayout(f32, {3, 4}), -3, 3, 1);
  compareIndex("index_select", {x, indices({3}, {2, 0, 7})}, HostTensor::contiguous(f32, {3, 3}),
               {intScalar(1)});
  compareIndex("gather", {x, indices({2, 2}, {1, 0, 2, 2})}, HostTensor::contiguous(f32, {2, 2}),
               {intScalar(0), intScalar(0)});
  HostTensor h = filled(HostTensor::contiguous(FLAGOS_DTYPE_FLOAT16, {2, 3}), -3, 3, 2);
  compareIndex("cat", {h, HostTensor::contiguous(FLAGOS_DTYPE_FLOAT16, {0}), h},
               HostTensor::contiguous(FLAGOS_DTYPE_FLOAT16, {4, 3}), {intScalar(0)});
  std::vector<flagosScalar> pad(8, intScalar(1));
  pad.push_back(floatScalar(0.25));
  compareIndex("constant_pad_nd", {x}, HostTensor::contiguous(f32, {5, 6}), pad);
  compareIndex("triu", {x}, HostTensor::contiguous(f32, {3, 4}), {intScalar(-1)});
}

TEST(OpenCLGenerated, IndexScatterAtomics) {
  REQUIRE_OPENCL();
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  HostTensor x = filled(HostTensor::contiguous(f32, {3, 4}), -3, 3, 1);
  HostTensor src = filled(HostTensor::contiguous(f32, {4, 4}), -3, 3, 2);
  HostTensor idx = indices({4, 4}, {0, 1, 2, 0, 0, 1, 2, 0, 1, 1, 1, 1, 2, 2, 0, 0});
  compareIndex("scatter_add", {x, idx, src}, x, {intScalar(0)}, true);
  HostTensor xi = filled(HostTensor::contiguous(FLAGOS_DTYPE_INT64, {3, 4}), -9, 9, 3);
  HostTensor si = filled(HostTensor::contiguous(FLAGOS_DTYPE_INT64, {3, 5}), -9, 9, 4);
  compareIndex("index_add", {xi, indices({5}, {3, 3, 0, 3, 1}), si}, xi,
               {intScalar(1), intScalar(3)}, true);
  compareIndex("scatter_value", {x, indices({1, 4}, {2, 0, 1, 2})}, x,
               {intScalar(0), floatScalar(1.5)}, true);
}

}  // namespace
}  // namespace flagos::kernels::testing
