// The bridge's use of the shape store (Note [Shape inference across
// processes], shape_store.h): at initialize, the stored results go into each
// overload's meta-shape cache (and those overloads are prepared); at exit,
// the results this process used are written back.
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "dispatch/bridge/catalog.h"
#include "dispatch/bridge/semantic_kernel.h"
#include "dispatch/shapes/shape_cache.h"
#include "dispatch/shapes/shape_preload.h"
#include "dispatch/shapes/shape_store.h"
#include "jit/cache_dir.h"
#include "runtime/backend.h"

namespace flagos::semantic {
namespace {

// Loaded and dropped store entries (_shape_store_info).
std::atomic<int64_t> g_shapes_loaded{0}, g_shapes_dropped{0};

// @p k's used signatures, appended to @p out while it holds fewer than
// kMaxStoredShapes.
void exportShapes(const SemanticKernel& k, std::vector<StoredShape>* out) {
  k.shapes().forEachUsed([&](const ShapeKey& key, const MetaResult& r) {
    if (out->size() >= kMaxStoredShapes) return false;
    StoredShape s{k.overloadName(), key, r.layout, {}};
    for (const OutShape& o : r.outs)
      s.outs.push_back({static_cast<int32_t>(
                            o.dtype == at::ScalarType::Undefined ? -1 : static_cast<int>(o.dtype)),
                        {o.sizes.begin(), o.sizes.end()},
                        {o.strides.begin(), o.strides.end()}});
    out->push_back(std::move(s));
    return true;
  });
}

// One stored signature into @p k's cache; a malformed entry is ignored.
void importShape(SemanticKernel& k, const StoredShape& s) {
  auto r = std::make_shared<MetaResult>();
  r->layout = s.layout;
  size_t listed = 0;
  for (int32_t n : s.layout) listed += n < 0 ? 1 : static_cast<size_t>(n);
  if (listed != s.outs.size()) return;  // not what this bridge writes
  for (const StoredShape::Out& o : s.outs) {
    if (o.dtype < -1 || o.dtype >= static_cast<int>(at::ScalarType::NumOptions) ||
        o.sizes.size() != o.strides.size())
      return;
    OutShape m{
        o.dtype < 0 ? at::ScalarType::Undefined : static_cast<at::ScalarType>(o.dtype), {}, {}};
    m.sizes.assign(o.sizes.begin(), o.sizes.end());
    m.strides.assign(o.strides.begin(), o.strides.end());
    r->outs.push_back(std::move(m));
  }
  k.shapes().insert(s.key, std::move(r));
}

// Its schema analysis and recipe too, off the first call.
void prepareOverload(SemanticKernel& k, const std::string& overload) {
  const size_t dot = overload.find('.');
  const auto op = c10::Dispatcher::singleton().findSchema(
      {"aten::" + overload.substr(0, dot),
       dot == std::string::npos ? "" : overload.substr(dot + 1)});
  if (op) k.prepare(*op);
}

}  // namespace

// Note [Shape inference across processes]: load at initialize, save at exit.
// What loadShapeStore read: kept for the merge at exit (leaked: exit reads it).
static std::vector<StoredShape>& earlierShapes() {
  static auto* shapes = new std::vector<StoredShape>();
  return *shapes;
}

static void saveShapeStore() {
  try {
    const std::string path = shapeStorePath();
    if (path.empty()) return;
    std::vector<StoredShape> shapes;
    for (const SemanticKernel* k : SemanticKernel::registry())
      if (k) exportShapes(*k, &shapes);
    shapes = mergeShapes(std::move(shapes), earlierShapes());
    if (!shapes.empty()) writeShapeStore(path, shapes);
  } catch (...) {  // at exit: losing the store only costs the next start
  }
}

void loadShapeStore() {
  if (!preloadEnabled()) return;
  const std::string path = shapeStorePath();
  std::vector<StoredShape> shapes;
  size_t dropped = 0;
  const bool read = !path.empty() && readShapeStore(path, &shapes, &dropped);
  if (dropped > 0) {
    g_shapes_dropped.store(static_cast<int64_t>(dropped));
    std::fprintf(stderr,
                 "[flagos] %zu entr%s of %s failed %s checksum and %s ignored (the shapes are "
                 "inferred again)\n",
                 dropped, dropped == 1 ? "y" : "ies", path.c_str(), dropped == 1 ? "its" : "their",
                 dropped == 1 ? "is" : "are");
  }
  if (read) {
    g_shapes_loaded.store(static_cast<int64_t>(shapes.size()));
    std::unordered_map<std::string, int> index;
    for (int i = 0; i < kNumOverloads; ++i) index.emplace(kOverloads[i].name, i);
    std::vector<bool> prepared(kNumOverloads, false);
    for (const StoredShape& s : shapes) {
      auto it = index.find(s.overload);
      SemanticKernel* k = it == index.end() ? nullptr : SemanticKernel::registry()[it->second];
      if (!k) continue;
      importShape(*k, s);
      if (!prepared[it->second]) {
        prepared[it->second] = true;
        prepareOverload(*k, s.overload);
      }
    }
    earlierShapes() = std::move(shapes);
  }
  static const bool saved_at_exit = (std::atexit(saveShapeStore), true);
  (void)saved_at_exit;
}

}  // namespace flagos::semantic

TORCH_LIBRARY_FRAGMENT(flagos, m) {
  m.def("_shape_store_info() -> str", [] {
    using namespace flagos::semantic;
    return "{\"path\": \"" + shapeStorePath() +
           "\", \"loaded\": " + std::to_string(g_shapes_loaded.load()) +
           ", \"dropped\": " + std::to_string(g_shapes_dropped.load()) +
           ", \"meta_calls\": " + std::to_string(g_meta_calls.load()) +
           ", \"class_hits\": " + std::to_string(g_class_hits.load()) + "}";
  });
}
