// Note [Shape inference across processes] (shape_store.h): the file.
//   flagos-shapes 2
//   <overload> <n> key... <n> layout... <n> (<dtype> <rank> sizes... strides...)... #<sum>
// one line per signature, integers in decimal; <sum> is the FNV-1a 64 of the
// line before " #", in hex. A line whose sum does not match (an edited or
// damaged entry: a wrong stored size made mm return [17, 64] for
// [16, 3] @ [3, 64], computed from memory past the input) is dropped and
// counted, and the others are used: each line is checked on its own.
#include "dispatch/shapes/shape_store.h"

#include <torch/version.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "dispatch/bridge/catalog.h"
#include "flagos_kit/fnv1a.h"
#include "jit/cache_dir.h"
#include "jit/gen/disk_store.h"

namespace flagos::semantic {
namespace {

constexpr const char* kHeader = "flagos-shapes 2";

template <typename T>
bool readList(std::istringstream& in, std::vector<T>* out, size_t max) {
  size_t n = 0;
  if (!(in >> n) || n > max) return false;
  out->resize(n);
  for (T& v : *out)
    if (!(in >> v)) return false;
  return true;
}

template <typename T>
void writeList(std::ostringstream& out, const std::vector<T>& v) {
  out << ' ' << v.size();
  for (const T& x : v) out << ' ' << x;
}

}  // namespace

std::string shapeStorePath() {
  const std::string root = defaultCacheDir();
  if (root.empty()) return "";
  // Meta results depend on torch and on the catalog's overloads.
  std::string id = std::string(TORCH_VERSION) + "|";
  for (int i = 0; i < kNumOverloads; ++i) id += std::string(kOverloads[i].name) + ",";
  char name[48];
  std::snprintf(name, sizeof name, "/shapes-%016llx.txt",
                static_cast<unsigned long long>(flagos_kit::fnv1a(id.data(), id.size())));
  return root + name;
}

std::string lineSum(const std::string& body) {
  char sum[24];
  std::snprintf(sum, sizeof sum, "%016llx",
                static_cast<unsigned long long>(flagos_kit::fnv1a(body.data(), body.size())));
  return sum;
}

// The line's body when its checksum matches, else nullopt.
std::optional<std::string> checkedBody(const std::string& line) {
  const size_t mark = line.rfind(" #");
  if (mark == std::string::npos) return std::nullopt;
  std::string body = line.substr(0, mark);
  if (line.compare(mark + 2, std::string::npos, lineSum(body)) != 0) return std::nullopt;
  return body;
}

bool readShapeStore(const std::string& path, std::vector<StoredShape>* shapes, size_t* dropped) {
  std::ifstream in(path);
  std::string line;
  if (dropped) *dropped = 0;
  if (!in || !std::getline(in, line) || line != kHeader) return false;
  std::vector<StoredShape> out;
  while (std::getline(in, line) && out.size() < kMaxStoredShapes) {
    const std::optional<std::string> body = checkedBody(line);
    if (!body) {
      if (dropped) ++*dropped;
      continue;
    }
    std::istringstream fields(*body);
    StoredShape s;
    size_t n = 0;
    if (!(fields >> s.overload) || !readList(fields, &s.key, 4096) ||
        !readList(fields, &s.layout, 64) || !(fields >> n) || n > 64)
      return false;
    s.outs.resize(n);
    for (StoredShape::Out& o : s.outs) {
      size_t rank = 0;
      if (!(fields >> o.dtype >> rank) || rank > 64) return false;
      o.sizes.resize(rank);
      o.strides.resize(rank);
      for (int64_t& v : o.sizes)
        if (!(fields >> v)) return false;
      for (int64_t& v : o.strides)
        if (!(fields >> v)) return false;
    }
    std::string extra;
    if (fields >> extra) return false;
    out.push_back(std::move(s));
  }
  *shapes = std::move(out);
  return true;
}

bool writeShapeStore(const std::string& path, const std::vector<StoredShape>& shapes) {
  // The cache dir may not exist yet (no kernel was ever stored in it).
  std::error_code ignored;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
  std::ostringstream text;
  text << kHeader << '\n';
  for (size_t i = 0; i < shapes.size() && i < kMaxStoredShapes; ++i) {
    const StoredShape& s = shapes[i];
    std::ostringstream line;
    line << s.overload;
    writeList(line, s.key);
    writeList(line, s.layout);
    line << ' ' << s.outs.size();
    for (const StoredShape::Out& o : s.outs) {
      line << ' ' << o.dtype << ' ' << o.sizes.size();
      for (int64_t v : o.sizes) line << ' ' << v;
      for (int64_t v : o.strides) line << ' ' << v;
    }
    const std::string body = line.str();
    text << body << " #" << lineSum(body) << '\n';
  }
  return kernels::writeFileAtomically(path, text.str());
}

std::vector<StoredShape> mergeShapes(std::vector<StoredShape> used,
                                     const std::vector<StoredShape>& earlier) {
  if (used.size() > kMaxStoredShapes) used.resize(kMaxStoredShapes);
  std::unordered_set<std::string> seen;
  auto id = [](const StoredShape& s) {
    std::string k = s.overload;
    for (int64_t v : s.key) k += ' ' + std::to_string(v);
    return k;
  };
  for (const StoredShape& s : used) seen.insert(id(s));
  for (const StoredShape& s : earlier) {
    if (used.size() >= kMaxCarriedShapes) break;
    if (seen.insert(id(s)).second) used.push_back(s);
  }
  return used;
}

}  // namespace flagos::semantic
