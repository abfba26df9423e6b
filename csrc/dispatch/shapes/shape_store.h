// The bridge's shape inference results, kept across processes.
//
// Note [Shape inference across processes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The first call of each operator signature runs the overload on meta
// tensors (Note [Shape inference cache]); PyTorch's Python meta
// registrations make that costly for every signature, and the first meta
// call of a process may import torch._dynamo. With kernels preloaded (Note
// [Kernel preload]) this was most of a fresh process's first iteration. At
// exit the bridge writes the signatures this process used (their cache
// keys and results, at most kMaxStoredShapes) to one file under the cache
// directory, named by the torch version and the catalog; at initialize the
// next process loads them into the per-overload caches, so a repeated
// signature skips the meta call (and its argument checks, which passed for
// the identical key). A garbled file is ignored; FLAGOS_PRELOAD=off turns
// it off. The last process to exit writes the file: its own signatures
// first, then up to kMaxCarriedShapes more of those it loaded and did not
// use (mergeShapes), so that two scripts run in turn (a host CNN, an opencl
// MLP: one file for every backend) do not evict each other's signatures. A
// missing one costs its first call a Python meta kernel (batch norm's runs
// a Python decomposition); a stored one costs a small fraction of that at
// initialize, even with kMaxStoredShapes of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flagos::semantic {

constexpr size_t kMaxStoredShapes = 8192;
constexpr size_t kMaxCarriedShapes = 2048;  // earlier processes' unused ones kept

// One shape inference result as stored: the overload, its cache key, and
// per output dtype (-1: undefined), sizes and strides; layout as in the
// bridge's MetaResult (-1: a tensor return, n: a list of n).
struct StoredShape {
  std::string overload;  // "add.Tensor"
  std::vector<int64_t> key;
  std::vector<int32_t> layout;
  struct Out {
    int32_t dtype = -1;
    std::vector<int64_t> sizes, strides;
  };
  std::vector<Out> outs;
};

// The file for this torch version and catalog ("" without a cache dir).
std::string shapeStorePath();
// False when missing, of another format or garbled (nothing is returned
// then). Lines failing their checksum are left out and counted in @p dropped.
bool readShapeStore(const std::string& path, std::vector<StoredShape>* shapes,
                    size_t* dropped = nullptr);
// @p used (this process's), then the entries of @p earlier (the loaded
// file) that are not in @p used, in their order, while the total stays
// under kMaxCarriedShapes; never more than kMaxStoredShapes in all.
std::vector<StoredShape> mergeShapes(std::vector<StoredShape> used,
                                     const std::vector<StoredShape>& earlier);
// Atomic (temporary file + rename); false on an I/O error. Never throws.
bool writeShapeStore(const std::string& path, const std::vector<StoredShape>& shapes);

}  // namespace flagos::semantic
