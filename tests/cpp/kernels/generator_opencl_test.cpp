// Generated "opencl-c" kernels built and run through OpenCL directly
// (libOpenCL loaded at run time, so the test links without the SDK):
// (base, byte offset) device pointers, the rounded-up global size, and
// results equal to the "c" kernels'. Skips when no OpenCL device is found.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

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

  // Builds @p src; returns its kernel or nullptr with a failure recorded.
  cl_kernel build(const Source& src) {
    const char* text = src.text.c_str();
    cl_int err;
    cl_program p = clCreateProgramWithSource(context, 1, &text, nullptr, &err);
    if (clBuildProgram(p, 1, &device, src.options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
      std::string log(1 << 16, '\0');
      clGetProgramBuildInfo(p, device, CL_PROGRAM_BUILD_LOG, log.size(), &log[0], nullptr);
      ADD_FAILURE() << "clBuildProgram:\n" << log.c_str() << "\n--- source:\n" << src.text;
      clReleaseProgram(p);
      return nullptr;
    }
    cl_kernel k = clCreateKernel(p, src.kernel_name.c_str(), &err);
    clReleaseProgram(p);
    EXPECT_EQ(err, CL_SUCCESS) << src.kernel_name;
    return err == CL_SUCCESS ? k : nullptr;
  }
};

#define REQUIRE_OPENCL() \
  Cl* cl = Cl::get();    \
  if (cl == nullptr) GTEST_SKIP() << "no OpenCL device"

// Runs one call through OpenCL: each tensor's whole storage in one buffer,
// its data pointer as (buffer, byte offset), the global size rounded up to
// a multiple of 64 (the kernels must check meta.work).
bool runOpenCL(Cl* cl, const Recipe& recipe, std::vector<HostTensor*> outs,
               std::vector<HostTensor*> ins, std::vector<flagosScalar> scalars, Variant variant) {
  std::vector<flagosTensor> o, i;
  for (auto* t : outs) o.push_back(t->view());
  for (auto* t : ins) i.push_back(t->view());
  Call call{o.data(),          (int32_t)o.size(), i.data(),
            (int32_t)i.size(), scalars.data(),    (int32_t)scalars.size()};
  Target target{"opencl-c", cl->fp64};
  KernelKey key;
  std::string why;
  if (!keyFor(recipe, call, variant, target, &key, &why)) {
    ADD_FAILURE() << why;
    return false;
  }
  cl_kernel kernel = cl->build(emit(recipe, *signatureOf(recipe, call), variant, target));
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
  size_t local = 64, global = (launch.global + 63) / 64 * 64;
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
// Slow with PoCL (~0.3 s a build): run with --gtest_also_run_disabled_tests.
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

// --- index / shape recipes (csrc/kernels/index.cpp) -----------------------

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
