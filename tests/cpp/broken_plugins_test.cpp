// Checks that each deliberately broken plugin (tests/plugins) is broken in
// exactly the way the core's loader tests expect, and otherwise well formed.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "flagos/vendor.h"

namespace {

struct Library {
  explicit Library(const char* path) : handle(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle) dlclose(handle);
  }
  flagosVendorGetTablesFn entry() const {
    return reinterpret_cast<flagosVendorGetTablesFn>(dlsym(handle, FLAGOS_VENDOR_ENTRY_SYMBOL));
  }
  void* handle;
};

flagosVendorTables getTables(const Library& lib) {
  flagosVendorTables t{};
  t.struct_size = sizeof(t);
  EXPECT_NE(nullptr, lib.entry());
  if (lib.entry()) {
    EXPECT_EQ(FLAGOS_SUCCESS, lib.entry()(FLAGOS_ABI_VERSION_MAJOR, FLAGOS_ABI_VERSION_MINOR, &t));
  }
  return t;
}

TEST(BrokenPlugins, WrongAbi) {
  Library lib(FLAGOS_TEST_PLUGIN_WRONG_ABI);
  ASSERT_NE(nullptr, lib.handle) << dlerror();
  const flagosVendorTables t = getTables(lib);
  EXPECT_EQ(99, t.abi_major);
  EXPECT_STREQ("test_wrong_abi", t.name);
  EXPECT_NE(nullptr, t.device);
}

TEST(BrokenPlugins, NoEntry) {
  Library lib(FLAGOS_TEST_PLUGIN_NO_ENTRY);
  ASSERT_NE(nullptr, lib.handle) << dlerror();
  EXPECT_EQ(nullptr, lib.entry());
}

TEST(BrokenPlugins, ProbeFails) {
  Library lib(FLAGOS_TEST_PLUGIN_PROBE_FAILS);
  ASSERT_NE(nullptr, lib.handle) << dlerror();
  const flagosVendorTables t = getTables(lib);
  ASSERT_NE(nullptr, t.device);
  EXPECT_EQ(FLAGOS_ABI_VERSION_MAJOR, t.abi_major);
  flagosProbeInfo info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(FLAGOS_ERROR_NO_DEVICE, t.device->probe(&info));
  EXPECT_STREQ("no test device present", info.reason);
  EXPECT_EQ(0, info.device_count);
}

TEST(BrokenPlugins, InitFails) {
  Library lib(FLAGOS_TEST_PLUGIN_INIT_FAILS);
  ASSERT_NE(nullptr, lib.handle) << dlerror();
  const flagosVendorTables t = getTables(lib);
  ASSERT_NE(nullptr, t.device);
  flagosProbeInfo info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(FLAGOS_SUCCESS, t.device->probe(&info));
  EXPECT_EQ(FLAGOS_ERROR_DEVICE, t.device->init());
  EXPECT_NE(std::string::npos, std::string(t.getLastError()).find("init failed"))
      << t.getLastError();
}

}  // namespace
