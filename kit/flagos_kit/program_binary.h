// The envelope both plugins put around a compiled program's bytes
// (flagosCompilerTable.programGetBinary / programLoadBinary): a 32-byte
// header -- magic, payload size, FNV-1a of the payload, FNV-1a of the key
// of the machine/device/driver it was built for -- then the payload.
// programLoadBinary checks all four before the SDK sees a byte, so a
// truncated, corrupted or foreign file is FLAGOS_ERROR_COMPILE, never a crash.
//
// Part of the kit (kit/flagos_kit/): header-only helpers a plugin (or the
// core) compiles into itself. Not part of the vendor ABI; each plugin stays
// one self-contained library.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flagos_kit/fnv1a.h"

namespace flagos_kit {

struct BinaryHeader {
  char magic[8];
  uint64_t payload_bytes;
  uint64_t payload_hash;
  uint64_t key_hash;
};
static_assert(sizeof(BinaryHeader) == 32, "binary header layout");

// header + payload.
inline std::vector<unsigned char> wrapBinary(const char (&magic)[8], const void* payload,
                                             size_t bytes, uint64_t key_hash) {
  BinaryHeader header{};
  std::memcpy(header.magic, magic, sizeof(header.magic));
  header.payload_bytes = bytes;
  header.payload_hash = fnv1a(payload, bytes);
  header.key_hash = key_hash;
  std::vector<unsigned char> out(sizeof(header) + bytes);
  std::memcpy(out.data(), &header, sizeof(header));
  if (bytes != 0) std::memcpy(out.data() + sizeof(header), payload, bytes);
  return out;
}

// Checks @p binary; on success points @p payload/@p bytes at the payload.
// @p what names the format in messages ("flagos host binary"); @p target
// describes this machine for the "built for another ..." message.
inline bool unwrapBinary(const char (&magic)[8], const char* what, uint64_t key_hash,
                         const std::string& target, const void* binary, uint64_t size,
                         const unsigned char** payload, size_t* bytes, std::string* why) {
  BinaryHeader header{};
  if (size < sizeof(header)) {
    *why = std::string("too short for a ") + what + " (" + std::to_string(size) + " bytes)";
    return false;
  }
  std::memcpy(&header, binary, sizeof(header));
  const auto* data = static_cast<const unsigned char*>(binary) + sizeof(header);
  if (std::memcmp(header.magic, magic, sizeof(header.magic)) != 0) {
    *why = std::string("not a ") + what + " (bad magic)";
  } else if (header.payload_bytes != size - sizeof(header)) {
    *why = "truncated or padded: header says " + std::to_string(header.payload_bytes) +
           " payload bytes, got " + std::to_string(size - sizeof(header));
  } else if (header.payload_hash != fnv1a(data, header.payload_bytes)) {
    *why = "corrupted (checksum mismatch)";
  } else if (header.key_hash != key_hash) {
    *why = "built for another " + target;
  } else {
    *payload = data;
    *bytes = header.payload_bytes;
    return true;
  }
  return false;
}

}  // namespace flagos_kit
