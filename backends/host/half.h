// IEEE half and bfloat16 <-> float for the host plugin (collective
// reductions, half-precision GEMMs): float16/bfloat16 -> float is exact,
// float -> float16/bfloat16 rounds to nearest even; subnormals, infinities
// and NaN included (half: the branch-free formulation of M. Dukhan's FP16
// library).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace flagos_host {

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float halfToFloat(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  const float normalized = floatOf((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  const float denormalized = floatOf((two_w >> 17) | (126u << 23)) - 0.5f;
  return floatOf(sign | (two_w < (1u << 27) ? bitsOf(denormalized) : bitsOf(normalized)));
}

inline uint16_t floatToHalf(float f) {
  float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = bitsOf(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = floatOf((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = bitsOf(base);
  const uint32_t nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

inline float bf16ToFloat(uint16_t h) {
  return floatOf(static_cast<uint32_t>(h) << 16);
}

inline uint16_t floatToBf16(float f) {
  const uint32_t u = bitsOf(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a NaN
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace flagos_host
