// PyTorch scalar types <-> the ABI's flagosDtype_t (status.h).
#pragma once

#include <c10/core/ScalarType.h>

#include <optional>

#include "flagos/status.h"

namespace flagos {

// The ABI dtype of `type`, or nullopt for types the ABI has no code for
// (quantized, float8, ...): callers then take another tier or route.
inline std::optional<flagosDtype_t> toVendorDtype(c10::ScalarType type) {
  switch (type) {
    case c10::kBool:
      return FLAGOS_DTYPE_BOOL;
    case c10::kByte:
      return FLAGOS_DTYPE_UINT8;
    case c10::kChar:
      return FLAGOS_DTYPE_INT8;
    case c10::kShort:
      return FLAGOS_DTYPE_INT16;
    case c10::kInt:
      return FLAGOS_DTYPE_INT32;
    case c10::kLong:
      return FLAGOS_DTYPE_INT64;
    case c10::kHalf:
      return FLAGOS_DTYPE_FLOAT16;
    case c10::kBFloat16:
      return FLAGOS_DTYPE_BFLOAT16;
    case c10::kFloat:
      return FLAGOS_DTYPE_FLOAT32;
    case c10::kDouble:
      return FLAGOS_DTYPE_FLOAT64;
    case c10::kComplexFloat:
      return FLAGOS_DTYPE_COMPLEX64;
    case c10::kComplexDouble:
      return FLAGOS_DTYPE_COMPLEX128;
    default:
      return std::nullopt;
  }
}

}  // namespace flagos
