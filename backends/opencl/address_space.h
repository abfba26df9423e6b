// Virtual device addresses for one OpenCL device.
//
// Note [Virtual device addresses]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// OpenCL 1.2 buffers are handles (cl_mem), not pointers, while the core and
// PyTorch treat device memory as addresses: they add byte offsets to
// data_ptr and hand the results back (views, slices, storage offsets). SVM
// would give real pointers but many drivers lack it, so the plugin makes up
// its own address space instead:
//
//  - each device owns a window of addresses reserved with mmap(PROT_NONE,
//    MAP_NORESERVE): 1 TiB of address space, no memory. The core never
//    dereferences a device address; reserving the window only guarantees
//    that no host allocation ever has the same address, so a stray
//    dereference faults instead of corrupting host memory, and that the
//    windows of two devices never overlap;
//  - malloc creates a cl_mem and hands out an address range for it, carved
//    from the window by a first-fit allocator: 256-byte aligned, followed by
//    a 256-byte gap, so that "one past the end" of one allocation is never
//    the start of the next;
//  - an ordered map (base address -> allocation) resolves any address with
//    one upper_bound: addresses inside an allocation and one past its end
//    are accepted and become (cl_mem, byte offset). Every copy, fill and
//    kernel argument goes through that translation;
//  - free takes the exact base address malloc returned; anything else
//    (an interior address, a freed one, a foreign one) is rejected.
//
// Lookups take a shared lock; malloc/free an exclusive one.
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120  // also set by CMakeLists.txt
#endif
#include <CL/cl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>

namespace flagos_opencl {

class AddressSpace {
 public:
  // Allocations start on this boundary; each is followed by a gap of it.
  static constexpr uint64_t kAlignment = 256;

  // Reserves a window of addresses for @p device (1 TiB, or less if the
  // process's address space is limited, but at least @p min_bytes).
  // Returns nullptr after recording the error.
  static std::unique_ptr<AddressSpace> create(int32_t device, uint64_t min_bytes);
  ~AddressSpace();

  AddressSpace(const AddressSpace&) = delete;
  AddressSpace& operator=(const AddressSpace&) = delete;

  // Maps a range of @p bytes to @p buffer (ownership passes to the address
  // space); returns its base address, or 0 when the window is full (the
  // caller still owns @p buffer then).
  uint64_t insert(cl_mem buffer, uint64_t bytes);

  // Unmaps the allocation starting exactly at @p base and returns its buffer
  // (ownership passes to the caller) and size; nullptr for any other address.
  cl_mem erase(uint64_t base, uint64_t* bytes);

  // Resolves [address, address + bytes) to (buffer, offset); false when the
  // range is not inside one live allocation (one past the end counts as
  // inside).
  bool find(uint64_t address, uint64_t bytes, cl_mem* buffer, uint64_t* offset) const;

  // Does @p address fall in this device's window? Lock-free: fixed bounds.
  bool owns(uint64_t address) const { return address >= base_ && address < base_ + size_; }

  // Releases every live buffer (shutdown with allocations left over).
  void releaseAll();

 private:
  AddressSpace(void* base, uint64_t size);

  struct Allocation {
    cl_mem buffer;
    uint64_t bytes;
  };

  const uint64_t base_;
  const uint64_t size_;
  mutable std::shared_mutex mu_;
  std::map<uint64_t, Allocation> live_;  // base address -> allocation
  std::map<uint64_t, uint64_t> free_;    // free address ranges: start -> length
};

}  // namespace flagos_opencl
