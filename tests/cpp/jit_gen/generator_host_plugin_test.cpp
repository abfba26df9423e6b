// Generated "c" kernels through the host plugin's compiler table, as the
// bridge will run them: programBuild, pack()'s arguments, kernelLaunch on a
// stream with device memory from the plugin.
#include "flagos/vendor.h"
#include "generator_harness.h"

namespace flagos::kernels::testing {
namespace {

const flagosVendorTables* hostTables() {
  static const flagosVendorTables* tables = []() -> const flagosVendorTables* {
    void* lib = dlopen(FLAGOS_HOST_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::printf("dlopen %s: %s\n", FLAGOS_HOST_PLUGIN, dlerror());
      return nullptr;
    }
    auto entry = (flagosVendorGetTablesFn)dlsym(lib, FLAGOS_VENDOR_ENTRY_SYMBOL);
    static flagosVendorTables t{};
    t.struct_size = sizeof t;
    if (entry == nullptr ||
        entry(FLAGOS_ABI_VERSION_MAJOR, FLAGOS_ABI_VERSION_MINOR, &t) != FLAGOS_SUCCESS ||
        t.compiler == nullptr) {
      std::printf("host plugin: no tables or no compiler\n");
      return nullptr;
    }
    flagosProbeInfo info{};
    info.struct_size = sizeof info;
    if (t.device->probe(&info) != FLAGOS_SUCCESS || t.device->init() != FLAGOS_SUCCESS) {
      std::printf("host plugin: %s\n", t.getLastError());
      return nullptr;
    }
    return &t;
  }();
  return tables;
}

// Copies @p t's storage to device memory; returns the device tensor view.
struct DeviceCopy {
  const flagosVendorTables* vt;
  HostTensor* host;
  void* base = nullptr;
  DeviceCopy(const flagosVendorTables* v, HostTensor* h) : vt(v), host(h) {
    EXPECT_EQ(vt->memory->malloc(0, h->storage.size(), &base), FLAGOS_SUCCESS);
    vt->memory->memcpy(base, h->storage.data(), h->storage.size(), FLAGOS_MEMCPY_HOST_TO_DEVICE);
  }
  ~DeviceCopy() { vt->memory->free(0, base); }
  flagosTensor view() {
    flagosTensor t = host->view();
    t.data = (uint8_t*)base + host->offset * elemSize(host->dtype);
    return t;
  }
  void readBack() {
    vt->memory->memcpy(host->storage.data(), base, host->storage.size(),
                       FLAGOS_MEMCPY_DEVICE_TO_HOST);
  }
};

void launchOnHost(const std::string& id, std::vector<HostTensor*> outs,
                  std::vector<HostTensor*> ins, std::vector<flagosScalar> scalars,
                  Variant variant) {
  const flagosVendorTables* vt = hostTables();
  auto r = recipeFor(id);
  ASSERT_TRUE(r);
  std::vector<std::unique_ptr<DeviceCopy>> copies;
  std::vector<flagosTensor> o, i;
  for (auto* t : outs) {
    copies.push_back(std::make_unique<DeviceCopy>(vt, t));
    o.push_back(copies.back()->view());
  }
  for (auto* t : ins) {
    copies.push_back(std::make_unique<DeviceCopy>(vt, t));
    i.push_back(copies.back()->view());
  }
  Call call{o.data(),          (int32_t)o.size(), i.data(),
            (int32_t)i.size(), scalars.data(),    (int32_t)scalars.size()};
  Target target{vt->compiler->language, true};
  KernelKey key;
  std::string why;
  ASSERT_TRUE(keyFor(*r, call, variant, target, &key, &why)) << why;
  Source src = emit(*r, *signatureOf(*r, call), variant, target);
  flagosProgram_t program = nullptr;
  ASSERT_EQ(vt->compiler->programBuild(0, src.text.c_str(), src.options.c_str(), &program),
            FLAGOS_SUCCESS)
      << vt->getLastError();
  Launch launch;
  pack(*r, call, target, &launch);
  flagosStream_t stream = nullptr;
  ASSERT_EQ(vt->stream->streamCreate(0, 0, &stream), FLAGOS_SUCCESS);
  EXPECT_EQ(
      vt->compiler->kernelLaunch(program, src.kernel_name.c_str(), launch.args.data(),
                                 (int32_t)launch.args.size(), 1, &launch.global, nullptr, stream),
      FLAGOS_SUCCESS)
      << vt->getLastError();
  EXPECT_EQ(vt->stream->streamSynchronize(stream), FLAGOS_SUCCESS);
  vt->stream->streamDestroy(stream);
  vt->compiler->programDestroy(program);
  for (size_t k = 0; k < outs.size(); ++k) copies[k]->readBack();
}

TEST(HostPluginGenerated, PointwiseAndReduction) {
  if (hostTables() == nullptr) GTEST_SKIP() << "host plugin has no compiler";
  ASSERT_STREQ(hostTables()->compiler->language, "c");
  const flagosDtype_t f32 = FLAGOS_DTYPE_FLOAT32;
  HostTensor a = HostTensor::reversedLayout(f32, {64, 33}),
             b = HostTensor::contiguous(f32, {64, 33});
  for (int64_t i = 0; i < a.numel(); ++i) {
    a.set(i, testValue(i, -3, 3));
    b.set(i, testValue(i + 7, -3, 3));
  }
  for (Variant v : {Variant::Generic, Variant::Specialized}) {
    HostTensor out = HostTensor::contiguous(f32, {64, 33});
    launchOnHost("mul", {&out}, {&a, &b}, {}, v);
    for (int64_t i = 0; i < out.numel(); ++i) {
      ASSERT_FLOAT_EQ(out.get(i), (float)(a.get(i) * b.get(i))) << i;
    }
    HostTensor sum = HostTensor::contiguous(f32, {33});
    launchOnHost("sum", {&sum}, {&a}, {intScalar(1), intScalar(0), noneScalar()}, v);
    for (int64_t j = 0; j < 33; ++j) {
      double want = 0;
      for (int64_t r = 0; r < 64; ++r) want += a.get(r * 33 + j);
      EXPECT_NEAR(sum.get(j), want, 1e-4) << j;
    }
  }
}

}  // namespace
}  // namespace flagos::kernels::testing
