// Host tensors, catalog rows and a runner that compiles generated "c"
// kernels with the system compiler (FLAGOS_TEST_CC) and calls them: shared
// by the generator tests.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "jit/gen/generator.h"
#include "jit/gen/recipe.h"
#include "nvrtc_harness.h"

namespace flagos::kernels::testing {

inline size_t elemSize(flagosDtype_t d) {
  return FLAGOS_DTYPE_SIZE(d);
}

// IEEE half / bfloat16 from and to float, for filling and reading tensors.
inline float halfToFloat(uint16_t h) {
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0) return sign * std::ldexp((float)m, -24);
  if (e == 31) return m ? NAN : sign * INFINITY;
  return sign * std::ldexp((float)(m | 0x400), e - 25);
}
inline uint16_t floatToHalfSlow(float f) {  // exhaustive search: test only
  uint16_t best = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float v = halfToFloat((uint16_t)h);
    if (v == f && !std::signbit(v) == !std::signbit(f)) return (uint16_t)h;
    if (std::isnan(v)) continue;
    if (std::fabs(v - f) < std::fabs(halfToFloat(best) - f)) best = (uint16_t)h;
  }
  return best;
}
inline float bf16ToFloat(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A strided tensor over its own storage.
struct HostTensor {
  flagosDtype_t dtype = FLAGOS_DTYPE_FLOAT32;
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;  // elements
  std::vector<uint8_t> storage;

  static HostTensor contiguous(flagosDtype_t dtype, std::vector<int64_t> shape) {
    HostTensor t;
    t.dtype = dtype;
    t.shape = shape;
    t.strides.resize(shape.size());
    int64_t s = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      t.strides[d] = s;
      s *= shape[d];
    }
    t.storage.assign(s * elemSize(dtype) + 8, 0);
    return t;
  }
  // Same shape, the dims' memory order reversed (a transposed layout), and
  // an offset so that the data pointer is not the storage start.
  static HostTensor reversedLayout(flagosDtype_t dtype, std::vector<int64_t> shape) {
    HostTensor t;
    t.dtype = dtype;
    t.shape = shape;
    t.strides.resize(shape.size());
    int64_t s = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      t.strides[d] = s;
      s *= shape[d];
    }
    t.offset = 3;
    t.storage.assign((s + 3) * elemSize(dtype) + 8, 0);
    return t;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  // Element offset of linear (row-major) index i.
  int64_t at(int64_t i) const {
    int64_t off = offset;
    for (size_t d = shape.size(); d-- > 0;) {
      off += (i % shape[d]) * strides[d];
      i /= shape[d];
    }
    return off;
  }
  double get(int64_t i) const {
    const uint8_t* p = storage.data() + at(i) * elemSize(dtype);
    switch (dtype) {
      case FLAGOS_DTYPE_BOOL:
      case FLAGOS_DTYPE_UINT8:
        return *p;
      case FLAGOS_DTYPE_INT8:
        return *(const int8_t*)p;
      case FLAGOS_DTYPE_INT16:
        return *(const int16_t*)p;
      case FLAGOS_DTYPE_INT32:
        return *(const int32_t*)p;
      case FLAGOS_DTYPE_INT64:
        return (double)*(const int64_t*)p;
      case FLAGOS_DTYPE_FLOAT16:
        return halfToFloat(*(const uint16_t*)p);
      case FLAGOS_DTYPE_BFLOAT16:
        return bf16ToFloat(*(const uint16_t*)p);
      case FLAGOS_DTYPE_FLOAT32:
        return *(const float*)p;
      default:
        return *(const double*)p;
    }
  }
  void set(int64_t i, double v) {
    uint8_t* p = storage.data() + at(i) * elemSize(dtype);
    switch (dtype) {
      case FLAGOS_DTYPE_BOOL:
        *p = v != 0;
        break;
      case FLAGOS_DTYPE_UINT8:
        *p = (uint8_t)(int64_t)v;
        break;
      case FLAGOS_DTYPE_INT8:
        *(int8_t*)p = (int8_t)v;
        break;
      case FLAGOS_DTYPE_INT16:
        *(int16_t*)p = (int16_t)v;
        break;
      case FLAGOS_DTYPE_INT32:
        *(int32_t*)p = (int32_t)v;
        break;
      case FLAGOS_DTYPE_INT64:
        *(int64_t*)p = (int64_t)v;
        break;
      case FLAGOS_DTYPE_FLOAT16:
        *(uint16_t*)p = floatToHalfSlow((float)v);
        break;
      case FLAGOS_DTYPE_BFLOAT16: {
        float f = (float)v;
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        *(uint16_t*)p = (uint16_t)(bits >> 16);  // test values are exact in bf16
        break;
      }
      case FLAGOS_DTYPE_FLOAT32:
        *(float*)p = (float)v;
        break;
      default:
        *(double*)p = v;
        break;
    }
  }
  flagosTensor view() {
    return {storage.data() + offset * elemSize(dtype), dtype, (int32_t)shape.size(),
            shape.empty() ? nullptr : shape.data(), strides.empty() ? nullptr : strides.data()};
  }
};

inline flagosScalar floatScalar(double v) {
  flagosScalar s{};
  s.dtype = FLAGOS_DTYPE_FLOAT64;
  s.f = v;
  return s;
}
inline flagosScalar intScalar(int64_t v) {
  flagosScalar s{};
  s.dtype = FLAGOS_DTYPE_INT64;
  s.i = v;
  return s;
}
inline flagosScalar noneScalar() {
  return flagosScalar{};
}

// --- catalog rows -----------------------------------------------------------

struct CatalogRow {
  OpInfo info;
  std::string dtypes;  // the raw `dtypes:` list
};

// Top-level comma-separated items of a `[...]` list starting at s[pos].
inline std::vector<std::string> listItems(const std::string& s, size_t pos) {
  std::vector<std::string> items;
  int depth = 0;
  std::string cur;
  for (size_t i = pos; i < s.size(); ++i) {
    char c = s[i];
    if (c == '[' || c == '{') {
      if (depth++ == 0 && c == '[') continue;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) break;
    } else if (c == ',' && depth == 1) {
      items.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (!cur.empty()) items.push_back(cur);
  for (auto& it : items) {
    size_t a = it.find_first_not_of(' '), b = it.find_last_not_of(' ');
    it = a == std::string::npos ? "" : it.substr(a, b - a + 1);
    if (!it.empty() && it[0] == '{') {  // {name: x, ...}
      size_t n = it.find("name:");
      size_t start = it.find_first_not_of(' ', n + 5);
      size_t end = it.find_first_of(",}", start);
      it = it.substr(start, end - start);
    }
  }
  return items;
}

inline std::string field(const std::string& line, const std::string& key) {
  size_t p = line.find(" " + key + ": ");
  if (p == std::string::npos) return "";
  p += key.size() + 3;
  if (line[p] == '"') return line.substr(p + 1, line.find('"', p + 1) - p - 1);
  return line.substr(p, line.find_first_of(",}", p) - p);
}

// The catalog's rows of @p family, by a line scan of ops/catalog.yaml.
inline std::vector<CatalogRow> catalogRows(const std::string& family) {
  const std::string path = FLAGOS_CATALOG_YAML;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<CatalogRow> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("- {id:", 0) != 0 || field(line, "family") != family) continue;
    CatalogRow row;
    row.info.id = field(line, "{id");
    if (row.info.id.empty()) row.info.id = line.substr(7, line.find(',') - 7);
    row.info.family = family;
    row.info.expr = field(line, "expr");
    size_t p;
    if ((p = line.find(" inputs: [")) != std::string::npos)
      row.info.inputs = listItems(line, p + 9);
    if ((p = line.find(" scalars: [")) != std::string::npos) {
      row.info.scalars = listItems(line, p + 10);
    }
    if ((p = line.find(" outputs: [")) != std::string::npos) {
      row.info.num_outputs = (int32_t)listItems(line, p + 10).size();
    }
    if ((p = line.find(" dtypes: [")) != std::string::npos) {
      row.dtypes = line.substr(p + 10, line.find(']', p) - p - 10);
    }
    rows.push_back(row);
  }
  return rows;
}

inline OpInfo catalogOp(const std::string& id) {
  for (const char* family : {"pointwise", "reduction"}) {
    for (const auto& row : catalogRows(family)) {
      if (row.info.id == id) return row.info;
    }
  }
  ADD_FAILURE() << "no catalog row " << id;
  return {};
}

// --- compiling and running "c" kernels -----------------------------------

using CKernel = void (*)(void* const*, uint64_t, uint64_t);

// Compiles @p src into a shared object in a temporary directory and returns
// its kernel (cached by source text).
inline CKernel compileC(const Source& src, int* num_args) {
  static std::map<std::string, std::pair<void*, std::string>> cache;
  auto it = cache.find(src.text);
  if (it == cache.end()) {
    char dir[] = "/tmp/flagos_gen_XXXXXX";
    if (mkdtemp(dir) == nullptr) return nullptr;
    const std::string c = std::string(dir) + "/k.c", so = std::string(dir) + "/k.so";
    std::ofstream(c) << src.text;
    const std::string cmd = std::string(FLAGOS_TEST_CC) + " -std=c99 -O2 -shared -fPIC -Wall " +
                            "-Werror=implicit-function-declaration -o " + so + " " + c + " " +
                            src.options + " -lm 2> " + dir + "/log";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(std::string(dir) + "/log");
      std::stringstream ss;
      ss << log.rdbuf();
      ADD_FAILURE() << "cc failed:\n" << ss.str() << "\n--- source:\n" << src.text;
      return nullptr;
    }
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    // Mapped now: the files can go.
    std::remove(c.c_str());
    std::remove(so.c_str());
    std::remove((std::string(dir) + "/log").c_str());
    rmdir(dir);
    if (h == nullptr) {
      ADD_FAILURE() << dlerror();
      return nullptr;
    }
    it = cache.emplace(src.text, std::make_pair(h, src.kernel_name)).first;
  }
  void* h = it->second.first;
  auto* n = (const int*)dlsym(h, (src.kernel_name + "_num_args").c_str());
  if (n == nullptr) {
    ADD_FAILURE() << "no " << src.kernel_name << "_num_args";
    return nullptr;
  }
  *num_args = *n;
  return (CKernel)dlsym(h, src.kernel_name.c_str());
}

// Runs @p op on the host through the "c" dialect, as the generated tier
// does: scratchFor()'s buffers appended to the outputs and passesOf()
// launches (Note [Multi-pass calls]), each split in two as a plugin's
// threads would. Returns false (with a failure recorded) when the generator
// refuses or the compiler fails; @p passes gets the number of launches.
inline bool runC(const Recipe& recipe, std::vector<HostTensor*> outs, std::vector<HostTensor*> ins,
                 std::vector<flagosScalar> scalars, Variant variant, std::string* source = nullptr,
                 int* passes = nullptr) {
  std::vector<flagosTensor> o, i;
  for (auto* t : outs) o.push_back(t->view());
  for (auto* t : ins) i.push_back(t->view());
  Call call{o.data(),          (int32_t)o.size(), i.data(),
            (int32_t)i.size(), scalars.data(),    (int32_t)scalars.size()};
  Target target{"c", true};
  // The same call as the cuda plugin's kernel, compiled by NVRTC (nvrtc_harness.h).
  expectCudaBuilds(recipe, call, variant);
  std::vector<HostTensor> scratch;
  for (const ScratchBuffer& b : scratchFor(recipe, call, target))
    scratch.push_back(HostTensor::contiguous(b.dtype, {b.elements}));
  for (HostTensor& t : scratch) o.push_back(t.view());
  call.outputs = o.data();
  call.num_outputs = (int32_t)o.size();
  KernelKey key;
  std::string why;
  if (!keyFor(recipe, call, variant, target, &key, &why)) {
    ADD_FAILURE() << "keyFor: " << why;
    return false;
  }
  Source src = emit(recipe, *signatureOf(recipe, call), variant, target);
  if (source) *source = src.text;
  int num_args = 0;
  CKernel fn = compileC(src, &num_args);
  if (fn == nullptr) return false;
  const int n = passesOf(recipe, call);
  for (int pass = 0; pass < n; ++pass) {
    Launch launch;
    pack(recipe, call, target, &launch, pass);
    EXPECT_EQ(num_args, (int)launch.args.size());
    std::vector<void*> argv;
    for (const auto& a : launch.args) argv.push_back(const_cast<void*>(a.value));
    fn(argv.data(), 0, launch.global / 2);
    fn(argv.data(), launch.global / 2, launch.global);
  }
  if (passes) *passes = n;
  return true;
}

// The recipe of catalog row @p id of one of @p families; the test fails when
// the row is missing or has no recipe.
inline std::shared_ptr<const Recipe> catalogRecipe(const std::string& id,
                                                   std::initializer_list<const char*> families) {
  for (const char* family : families) {
    for (const auto& row : catalogRows(family)) {
      if (row.info.id != id) continue;
      std::string why;
      auto r = makeRecipe(row.info, &why);
      EXPECT_TRUE(r) << id << ": " << why;
      return r;
    }
  }
  ADD_FAILURE() << "no catalog row " << id;
  return nullptr;
}

// Whether the generator declines (keyFor fails, *why says why) a call on
// these host tensors for @p target and @p variant.
inline bool declines(const Recipe& r, std::vector<HostTensor*> outs, std::vector<HostTensor*> ins,
                     std::vector<flagosScalar> scalars, const Target& target, std::string* why,
                     Variant variant = Variant::Generic) {
  std::vector<flagosTensor> o, i;
  for (auto* t : outs) o.push_back(t->view());
  for (auto* t : ins) i.push_back(t->view());
  Call call{o.data(),          (int32_t)o.size(), i.data(),
            (int32_t)i.size(), scalars.data(),    (int32_t)scalars.size()};
  KernelKey key;
  return !keyFor(r, call, variant, target, &key, why);
}

inline std::shared_ptr<const Recipe> recipeFor(const std::string& id) {
  std::string why;
  auto r = makeRecipe(catalogOp(id), &why);
  EXPECT_TRUE(r) << id << ": " << why;
  return r;
}

// Deterministic test values in [lo, hi], with a few exact halves.
inline double testValue(int64_t i, double lo, double hi) {
  uint64_t x = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  double u = (double)(x % 10007) / 10006.0;
  double v = lo + (hi - lo) * u;
  return i % 7 == 3 ? std::round(v * 2) / 2 : v;
}

// --- references in double ------------------------------------------------------

// Reduction @p id ("sum", "mean", "prod", "amax", "amin", "any", "all") of
// @p in over the dims in @p mask, one value per output in row-major order
// of the kept dims. NaN propagates through max/min as in torch.
inline std::vector<double> referenceReduce(const std::string& id, const HostTensor& in,
                                           uint64_t mask) {
  std::vector<int64_t> kept;
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (!(mask >> d & 1)) kept.push_back(in.shape[d]);
  int64_t outputs = 1;
  for (int64_t k : kept) outputs *= k;
  std::vector<std::vector<double>> groups(outputs);
  for (int64_t i = 0; i < in.numel(); ++i) {
    int64_t rest = i, o = 0, scale = 1;
    for (size_t d = in.shape.size(); d-- > 0;) {
      const int64_t c = rest % in.shape[d];
      rest /= in.shape[d];
      if (!(mask >> d & 1)) {
        o += c * scale;
        scale *= in.shape[d];
      }
    }
    groups[o].push_back(in.get(i));
  }
  std::vector<double> out;
  for (const auto& g : groups) {
    double v = id == "prod" || id == "all" ? 1 : 0;
    if (id == "amax" || id == "amin") v = id == "amax" ? -INFINITY : INFINITY;
    for (double x : g) {
      if (id == "sum" || id == "mean") v += x;
      if (id == "prod") v *= x;
      if (id == "any") v = v || x != 0;
      if (id == "all") v = v && x != 0;
      if (id == "amax" || id == "amin") {
        v = std::isnan(v) || std::isnan(x) ? NAN : id == "amax" ? std::max(v, x) : std::min(v, x);
      }
    }
    if (id == "mean") v /= g.size();
    out.push_back(v);
  }
  return out;
}

// Row operator @p id (softmax, log_softmax: ins = {x}; their backwards: ins
// = {grad, output}) over dim @p dim, one value per element (row-major).
inline std::vector<double> referenceRows(const std::string& id,
                                         const std::vector<const HostTensor*>& ins, int dim) {
  const HostTensor& a = *ins[0];
  int64_t stride = 1;
  for (size_t d = dim + 1; d < a.shape.size(); ++d) stride *= a.shape[d];
  const int64_t len = a.shape[dim];
  std::vector<double> out(a.numel());
  for (int64_t i = 0; i < a.numel(); ++i) {
    const int64_t first = i - ((i / stride) % len) * stride;
    double m = -INFINITY, sum = 0;
    bool nan = false;
    for (int64_t j = 0; j < len; ++j) {
      const double x = a.get(first + j * stride);
      nan = nan || std::isnan(x);
      m = std::max(m, x);
    }
    if (nan) m = NAN;
    for (int64_t j = 0; j < len; ++j) {
      const double g = a.get(first + j * stride);
      sum += id == "softmax" || id == "log_softmax" ? std::exp(g - m)
             : id == "softmax_backward"             ? g * ins[1]->get(first + j * stride)
                                                    : g;
    }
    const double x = a.get(i);
    if (id == "softmax")
      out[i] = std::exp(x - m) / sum;
    else if (id == "log_softmax")
      out[i] = x - m - std::log(sum);
    else if (id == "softmax_backward")
      out[i] = ins[1]->get(i) * (x - sum);
    else
      out[i] = x - std::exp(ins[1]->get(i)) * sum;
  }
  return out;
}

// |got - want| <= atol + rtol * |want|, NaN where want is NaN, the same
// infinity where want is infinite.
inline ::testing::AssertionResult closeTo(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
  } else if (std::isinf(want)) {
    if (got == want) return ::testing::AssertionSuccess();
  } else if (std::fabs(got - want) <= atol + rtol * std::fabs(want)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

}  // namespace flagos::kernels::testing
