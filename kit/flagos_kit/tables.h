// The ABI's function tables, filled from a plugin's struct of static members.
// Every plugin used to end each table file with the same list of
// `t.member = member;` lines; here that list is written once per table. A
// plugin writes each member once, as a static member function named as in
// the C header, and hands out the table:
//
//   struct StreamCalls {
//     static flagosStatus_t streamCreate(int32_t device, int32_t priority,
//                                        flagosStream_t* stream) noexcept { ... }
//     ...
//   };
//   const flagosStreamTable* streamTable() {
//     return flagos_kit::streamTable<StreamCalls>();
//   }
//
// A member may also be a kit template (`static constexpr auto eventDestroy =
// flagos_kit::eventDestroy<>;`). A missing required member does not compile;
// the optional ones (memory hostAlloc/hostFree) are NULL when the struct has
// none. Each table is built once, on first use, and
// the same pointer is returned every time (vendor.h).
//
// Part of the kit (kit/flagos_kit/): header-only, never crosses the ABI.
#pragma once

#include <type_traits>

#include "flagos/compiler.h"
#include "flagos/device.h"
#include "flagos/memory.h"
#include "flagos/stream.h"

namespace flagos_kit {

namespace detail {
template <typename Calls, typename = void>
struct HasHostMemory : std::false_type {};
template <typename Calls>
struct HasHostMemory<Calls, std::void_t<decltype(&Calls::hostAlloc), decltype(&Calls::hostFree)>>
    : std::true_type {};
}  // namespace detail

// device.h: every member required.
template <typename Calls>
const flagosDeviceTable* deviceTable() {
  static const flagosDeviceTable table = [] {
    flagosDeviceTable t{};
    t.struct_size = sizeof(t);
    t.probe = Calls::probe;
    t.init = Calls::init;
    t.shutdown = Calls::shutdown;
    t.getCount = Calls::getCount;
    t.getProperties = Calls::getProperties;
    t.setCurrent = Calls::setCurrent;
    t.getCurrent = Calls::getCurrent;
    t.synchronize = Calls::synchronize;
    return t;
  }();
  return &table;
}

// memory.h: hostAlloc and hostFree are optional, both or neither.
template <typename Calls>
const flagosMemoryTable* memoryTable() {
  static const flagosMemoryTable table = [] {
    flagosMemoryTable t{};
    t.struct_size = sizeof(t);
    t.malloc = Calls::malloc;
    t.free = Calls::free;
    t.memcpy = Calls::memcpy;
    t.memcpyAsync = Calls::memcpyAsync;
    t.memFill = Calls::memFill;
    t.memGetInfo = Calls::memGetInfo;
    if constexpr (detail::HasHostMemory<Calls>::value) {
      t.hostAlloc = Calls::hostAlloc;
      t.hostFree = Calls::hostFree;
    }
    return t;
  }();
  return &table;
}

// stream.h: every member required.
template <typename Calls>
const flagosStreamTable* streamTable() {
  static const flagosStreamTable table = [] {
    flagosStreamTable t{};
    t.struct_size = sizeof(t);
    t.streamCreate = Calls::streamCreate;
    t.streamDestroy = Calls::streamDestroy;
    t.streamSynchronize = Calls::streamSynchronize;
    t.streamQuery = Calls::streamQuery;
    t.streamWaitEvent = Calls::streamWaitEvent;
    t.eventCreate = Calls::eventCreate;
    t.eventDestroy = Calls::eventDestroy;
    t.eventRecord = Calls::eventRecord;
    t.eventQuery = Calls::eventQuery;
    t.eventSynchronize = Calls::eventSynchronize;
    t.eventElapsedTime = Calls::eventElapsedTime;
    return t;
  }();
  return &table;
}

// compiler.h (an optional table): `language` is a static string member of
// @p Calls; every function member is required.
template <typename Calls>
const flagosCompilerTable* compilerTable() {
  static const flagosCompilerTable table = [] {
    flagosCompilerTable t{};
    t.struct_size = sizeof(t);
    t.language = Calls::language;
    t.programBuild = Calls::programBuild;
    t.programGetBinary = Calls::programGetBinary;
    t.programLoadBinary = Calls::programLoadBinary;
    t.programDestroy = Calls::programDestroy;
    t.kernelLaunch = Calls::kernelLaunch;
    return t;
  }();
  return &table;
}

}  // namespace flagos_kit
