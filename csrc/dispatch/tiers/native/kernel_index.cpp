// The index of the plugin's kernel table (kernel_index.h): one hash map,
// built once, so a first call per overload costs one lookup, not a walk of
// the table.
#include "dispatch/tiers/native/kernel_index.h"

#include <atomic>
#include <cstddef>
#include <mutex>

#include "dispatch/tiers/native/fft_library.h"
#include "runtime/backend.h"

namespace flagos::semantic {

const KernelIndex* KernelIndex::get() {
  static std::atomic<const KernelIndex*> instance{nullptr};
  const KernelIndex* k = instance.load(std::memory_order_acquire);
  if (k) return k;
  if (!flagos::isInitialized()) return nullptr;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  k = instance.load(std::memory_order_relaxed);
  if (!k) {
    k = new KernelIndex(flagos::backend().tables);
    instance.store(k, std::memory_order_release);
  }
  return k;
}

KernelIndex::KernelIndex(const flagosVendorTables& tables) {
  const flagosKernelTable* table = tables.kernels;
  constexpr size_t kNeeded = offsetof(flagosKernelTable, entries) + sizeof(table->entries);
  if (table && table->struct_size >= kNeeded && table->entries) {
    for (int32_t i = 0; i < table->num_entries; ++i) {
      const flagosKernelEntry& e = table->entries[i];
      if (e.op_id && e.fn) fns_.emplace(e.op_id, e.fn);
    }
  }
  // A plugin's own kernel under one of these ids comes first (emplace keeps it).
  if (tables.fft) {
    for (const char* id : {"fft_c2c", "fft_r2c", "fft_c2r"}) fns_.emplace(id, fftLibraryKernel(id));
  }
}

}  // namespace flagos::semantic
