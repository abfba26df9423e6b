// FNV-1a, 64-bit: the one non-cryptographic hash of the project. It names
// kernel-cache files, checks program-binary envelopes and shape-store lines,
// and hashes in-memory keys. Byte values are stable across processes and
// builds (they reach disk); the word form is for in-memory tables only.
//
// Part of the kit (kit/flagos_kit/): header-only helpers compiled into each
// plugin and into the core; never passed across the vendor ABI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flagos_kit {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// Hashes @p bytes bytes at @p data, continuing from @p seed.
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) seed = (seed ^ p[i]) * kFnvPrime;
  return seed;
}

inline uint64_t fnv1a(std::string_view text, uint64_t seed = kFnvOffset) {
  return fnv1a(text.data(), text.size(), seed);
}

// Mixes whole 64-bit words (one multiply per word, not per byte): for keys
// of integers that live only in memory, where speed matters more than
// stability across byte orders.
template <typename Range>
inline uint64_t fnv1aWords(const Range& words, uint64_t seed = kFnvOffset) {
  for (auto w : words) seed = (seed ^ static_cast<uint64_t>(w)) * kFnvPrime;
  return seed;
}

}  // namespace flagos_kit
