// Scalar encoding (scalar_encoding.h): one function per Encoding.
#include "dispatch/bridge/scalar_encoding.h"

#include <c10/core/WrapDimMinimal.h>

#include <algorithm>
#include <string>

#include "runtime/dtype.h"
#include "runtime/generator.h"

namespace flagos::semantic {
namespace {

using Scalars = c10::SmallVectorImpl<flagosScalar>;

constexpr flagosScalar kNone{0, 0, 0, 0.0};

void pushInt(Scalars& out, int64_t i) {
  flagosScalar x{FLAGOS_DTYPE_INT64, 0, i, static_cast<double>(i)};
  out.push_back(x);
}

// Scalar/float -> f; int/bool/ScalarType -> i.
bool encodePlain(const c10::IValue& v, bool is_scalar_type, Scalars& out) {
  flagosScalar s = kNone;
  if (v.isNone()) {
    out.push_back(s);
  } else if (is_scalar_type) {
    const auto dt = toVendorDtype(static_cast<at::ScalarType>(v.toInt()));
    if (!dt) return false;
    pushInt(out, *dt);
  } else if (v.isDouble()) {
    s.dtype = FLAGOS_DTYPE_FLOAT64;
    s.f = v.toDouble();
    s.i = static_cast<int64_t>(s.f);
    out.push_back(s);
  } else if (v.isBool()) {
    s.dtype = FLAGOS_DTYPE_BOOL;
    s.i = v.toBool();
    s.f = static_cast<double>(s.i);
    out.push_back(s);
  } else if (v.isInt()) {
    pushInt(out, v.toInt());
  } else {
    return false;  // complex, symbolic, ...
  }
  return true;
}

// int[]/int/None -> bitmask of normalized dims (None/[] = all).
bool encodeDims(const c10::IValue& v, int64_t ndim, Scalars& out) {
  if (ndim > 63) return false;
  const int64_t wrap = ndim == 0 ? 1 : ndim;
  uint64_t mask = 0;
  if (v.isNone() || (v.isIntList() && v.toIntList().empty())) {
    mask = ndim ? ((uint64_t{1} << ndim) - 1) : 0;
  } else if (v.isInt()) {
    mask = uint64_t{1} << c10::maybe_wrap_dim(v.toInt(), wrap);
  } else if (v.isIntList()) {
    for (int64_t d : v.toIntList()) mask |= uint64_t{1} << c10::maybe_wrap_dim(d, wrap);
  } else {
    return false;
  }
  if (ndim == 0) mask = 0;
  pushInt(out, static_cast<int64_t>(mask));
  return true;
}

// str -> index into the spec's names.
bool encodeEnum(const ScalarSpec& spec, const c10::IValue& v, Scalars& out) {
  if (v.isNone()) {
    out.push_back(kNone);
    return true;
  }
  if (!v.isString()) return false;
  const std::string& str = v.toStringRef();
  for (int i = 0; i < spec.count; ++i) {
    if (str == spec.names[i]) {
      pushInt(out, i);
      return true;
    }
  }
  return false;
}

// int[]/bool[] -> `count` scalars (shorter lists repeat the last).
bool encodeList(const ScalarSpec& spec, const c10::IValue& v, Scalars& out) {
  if (v.isNone()) {
    for (int i = 0; i < spec.count; ++i) out.push_back(kNone);
    return true;
  }
  if (!v.isList()) return false;
  const auto& list = v.toListRef();
  if (static_cast<int>(list.size()) > spec.count) return false;
  for (int i = 0; i < spec.count; ++i) {
    const c10::IValue& e =
        list.empty() ? c10::IValue(int64_t{0}) : list[std::min<size_t>(i, list.size() - 1)];
    if (e.isBool()) {
      flagosScalar b{FLAGOS_DTYPE_BOOL, 0, e.toBool(), static_cast<double>(e.toBool())};
      out.push_back(b);
    } else if (e.isInt()) {
      pushInt(out, e.toInt());
    } else {
      return false;
    }
  }
  return true;
}

// Note [Random numbers on the device] (csrc/jit/gen/random.cpp): the
// generator's seed and the counter of the call's first element; the offset
// advances past the call's @p draws elements under the generator's lock, so
// two calls (two threads) never share a counter. A call that then takes the
// host tier draws from the advanced offset (Note [Random operators in the
// host fallback]).
bool encodePhilox(const c10::IValue& v, c10::Device device, int64_t draws, Scalars& out) {
  at::Generator gen;
  if (v.isNone()) {
    gen = defaultGenerator(device.index());
  } else if (v.isGenerator()) {
    gen = v.toGenerator();
    if (!isFlagosGenerator(gen)) return false;  // the host tier raises CPU's error
  } else {
    return false;
  }
  std::lock_guard<std::mutex> lock(gen.mutex());
  pushInt(out, static_cast<int64_t>(gen.current_seed()));
  pushInt(out, static_cast<int64_t>(gen.get_offset()));
  advanceOffset(gen, static_cast<uint64_t>(draws));
  return true;
}

}  // namespace

bool encodeScalar(const ScalarSpec& spec, const ScalarArg& arg, const c10::IValue* args,
                  int64_t ndim, c10::Device device, int64_t draws, Scalars& out) {
  const c10::IValue none;
  const c10::IValue& v = arg.arg >= 0 ? args[arg.arg] : none;
  switch (spec.encoding) {
    case Encoding::Plain:
      return encodePlain(v, arg.is_scalar_type, out);
    case Encoding::Dims:
      return encodeDims(v, ndim, out);
    case Encoding::Dim:
      if (v.isNone()) {
        out.push_back(kNone);
      } else {
        pushInt(out, c10::maybe_wrap_dim(v.toInt(), ndim == 0 ? 1 : ndim));
      }
      return true;
    case Encoding::Length:
      if (!v.isList()) return false;
      pushInt(out, static_cast<int64_t>(v.toListRef().size()));
      return true;
    case Encoding::Enum:
      return encodeEnum(spec, v, out);
    case Encoding::List:
      return encodeList(spec, v, out);
    case Encoding::Philox:
      return encodePhilox(v, device, draws, out);
  }
  return false;
}

}  // namespace flagos::semantic
