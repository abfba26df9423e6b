// Walks the plugin's tables: versions, struct sizes, required members, name
// format, and the entry point's own contract (ABI mismatch, struct_size).
#include <cstddef>
#include <cstring>
#include <set>
#include <string>

#include "conformance.h"

namespace conformance {
namespace {

// Sizes of the structs in ABI 1.0. Tables are append-only within a major, so
// a plugin of any 1.x must have at least these. When a minor appends members,
// replace sizeof(...) here by offsetof(first member added in 1.1).
constexpr size_t kVendorTables10 = offsetof(flagosVendorTables, trace);  // trace: ABI 1.2
constexpr size_t kDeviceTable10 = sizeof(flagosDeviceTable);
constexpr size_t kMemoryTable10 = sizeof(flagosMemoryTable);
constexpr size_t kStreamTable10 = sizeof(flagosStreamTable);
constexpr uint32_t kSaneStructSize = 1u << 16;

bool validName(const char* name) {
  if (name == nullptr || *name == '\0') return false;
  for (const char* c = name; *c; ++c) {
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  }
  return true;
}

// All function pointers of a table that starts with struct_size, laid out
// one after another (true for every table in the ABI but the kernel table).
template <typename Table>
int countNullMembers(const Table& table, size_t first_member_offset) {
  int nulls = 0;
  for (size_t offset = first_member_offset; offset + sizeof(void (*)(void)) <= sizeof(Table);
       offset += sizeof(void (*)(void))) {
    void (*fn)(void) = nullptr;
    std::memcpy(&fn, reinterpret_cast<const char*>(&table) + offset, sizeof(fn));
    if (fn == nullptr) ++nulls;
  }
  return nulls;
}

TEST(Tables, VersionAndIdentity) {
  const flagosVendorTables& t = tables();
  EXPECT_EQ(FLAGOS_ABI_VERSION_MAJOR, t.abi_major);
  EXPECT_GE(t.struct_size, kVendorTables10);
  EXPECT_LT(t.struct_size, kSaneStructSize);
  EXPECT_TRUE(validName(t.name)) << "name must be [a-z0-9_]+: " << (t.name ? t.name : "NULL");
  ASSERT_NE(nullptr, t.version);
  EXPECT_STRNE("", t.version);
  // vendor.h: the two named ranks, or a lower positive one (the skeleton).
  EXPECT_TRUE(t.priority == FLAGOS_PRIORITY_ACCELERATOR ||
              (t.priority >= 1 && t.priority <= FLAGOS_PRIORITY_CPU_HOSTED))
      << "priority " << t.priority;
  EXPECT_TRUE(t.host_addressable == 0 || t.host_addressable == 1);
  ASSERT_NE(nullptr, t.getLastError);
  EXPECT_NE(nullptr, t.getLastError());
}

TEST(Tables, RequiredTablesComplete) {
  const flagosVendorTables& t = tables();
  ASSERT_NE(nullptr, t.device);
  ASSERT_NE(nullptr, t.memory);
  ASSERT_NE(nullptr, t.stream);
  // ASSERT: the member checks below read this many bytes of each table.
  ASSERT_GE(t.device->struct_size, kDeviceTable10);
  ASSERT_GE(t.memory->struct_size, kMemoryTable10);
  ASSERT_GE(t.stream->struct_size, kStreamTable10);
  EXPECT_LT(t.device->struct_size, kSaneStructSize);
  EXPECT_LT(t.memory->struct_size, kSaneStructSize);
  EXPECT_LT(t.stream->struct_size, kSaneStructSize);

  EXPECT_EQ(0, countNullMembers(*t.device, offsetof(flagosDeviceTable, probe)))
      << "every device member is required";
  EXPECT_EQ(0, countNullMembers(*t.stream, offsetof(flagosStreamTable, streamCreate)))
      << "every stream/event member is required";
  const flagosMemoryTable& m = *t.memory;
  EXPECT_NE(nullptr, m.malloc);
  EXPECT_NE(nullptr, m.free);
  EXPECT_NE(nullptr, m.memcpy);
  EXPECT_NE(nullptr, m.memcpyAsync);
  EXPECT_NE(nullptr, m.memFill);
  EXPECT_NE(nullptr, m.memGetInfo);
  EXPECT_EQ(m.hostAlloc == nullptr, m.hostFree == nullptr)
      << "hostAlloc and hostFree are NULL together or not at all";
}

TEST(Tables, OptionalTablesWellFormed) {
  const flagosVendorTables& t = tables();
  if (t.kernels != nullptr) {
    EXPECT_GE(t.kernels->num_entries, 0);
    if (t.kernels->num_entries > 0) {
      ASSERT_NE(nullptr, t.kernels->entries);
    }
    std::set<std::string> ids;
    for (int32_t i = 0; i < t.kernels->num_entries; ++i) {
      const flagosKernelEntry& e = t.kernels->entries[i];
      EXPECT_TRUE(validName(e.op_id)) << "kernel " << i;
      EXPECT_NE(nullptr, e.fn) << (e.op_id ? e.op_id : "?");
      if (e.op_id) {
        EXPECT_TRUE(ids.insert(e.op_id).second) << "duplicate op_id " << e.op_id;
      }
    }
  }
  if (t.compiler != nullptr) {
    ASSERT_NE(nullptr, t.compiler->language);
    EXPECT_STRNE("", t.compiler->language);
    EXPECT_EQ(0, countNullMembers(*t.compiler, offsetof(flagosCompilerTable, programBuild)));
  }
  if (t.collectives != nullptr) {
    ASSERT_NE(nullptr, t.collectives->library_name);
    EXPECT_STRNE("", t.collectives->library_name);
    // allToAll (the last member) is the one optional collective.
    flagosCollectiveTable copy = *t.collectives;
    copy.allToAll = t.collectives->allGather;  // same signature, known non-NULL if valid
    EXPECT_EQ(0, countNullMembers(copy, offsetof(flagosCollectiveTable, getUniqueId)));
  }
}

TEST(Tables, EntryRefusesOtherMajor) {
  flagosVendorTables t{};
  t.struct_size = sizeof(t);
  FLAGOS_EXPECT_STATUS(FLAGOS_ERROR_ABI_MISMATCH,
                       plugin().entry(FLAGOS_ABI_VERSION_MAJOR + 98, 0, &t));
  EXPECT_FALSE(lastError().empty());
}

TEST(Tables, EntryAcceptsAnyMinorAndIsRepeatable) {
  flagosVendorTables t{};
  t.struct_size = sizeof(t);
  FLAGOS_EXPECT_OK(plugin().entry(FLAGOS_ABI_VERSION_MAJOR, 999, &t));
  EXPECT_EQ(tables().device, t.device);
  EXPECT_EQ(tables().getLastError, t.getLastError);
}

TEST(Tables, EntryRejectsNullTables) {
  EXPECT_NE(FLAGOS_SUCCESS, plugin().entry(FLAGOS_ABI_VERSION_MAJOR, 0, nullptr));
}

// A core built against an older minor passes a smaller struct: the plugin
// must not write past struct_size.
TEST(Tables, EntryRespectsSmallerStructSize) {
  union {
    flagosVendorTables t;
    unsigned char bytes[sizeof(flagosVendorTables)];
  } buffer;
  std::memset(buffer.bytes, 0xAB, sizeof(buffer.bytes));
  const size_t core_size = offsetof(flagosVendorTables, kernels);
  buffer.t.struct_size = static_cast<uint32_t>(core_size);
  FLAGOS_ASSERT_OK(plugin().entry(FLAGOS_ABI_VERSION_MAJOR, 0, &buffer.t));
  for (size_t i = core_size; i < sizeof(buffer.bytes); ++i) {
    ASSERT_EQ(0xAB, buffer.bytes[i]) << "entry wrote byte " << i << " past struct_size";
  }
  EXPECT_EQ(tables().memory, buffer.t.memory);
}

}  // namespace
}  // namespace conformance
