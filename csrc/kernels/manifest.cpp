// Note [Kernel preload] (manifest.h): reading and writing the manifest.
//   flagos-kernel-manifest 1
//   fp64 0|1
//   <key>            one KernelKey::toString() per line, first use first
#include "kernels/manifest.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "kernels/disk_store.h"

namespace flagos::kernels {
namespace {

constexpr const char* kHeader = "flagos-kernel-manifest 1";

}  // namespace

bool parseKey(const std::string& text, KernelKey* key) {
  key->words.clear();
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t dot = text.find('.', pos);
    const std::string word =
        text.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (word.empty() || word.size() > 16 ||
        word.find_first_not_of("0123456789abcdef") != std::string::npos)
      return false;
    key->words.push_back(static_cast<int64_t>(std::strtoull(word.c_str(), nullptr, 16)));
    if (dot == std::string::npos) return true;
    pos = dot + 1;
  }
  return false;
}

bool readManifest(const std::string& path, Manifest* manifest) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != kHeader) return false;
  if (!std::getline(in, line) || (line != "fp64 0" && line != "fp64 1")) return false;
  Manifest m;
  m.fp64 = line == "fp64 1";
  while (std::getline(in, line) && m.keys.size() < kManifestKeys) {
    KernelKey key;
    if (!parseKey(line, &key)) return false;
    m.keys.push_back(std::move(key));
  }
  *manifest = std::move(m);
  return true;
}

bool writeManifest(const std::string& path, const Manifest& manifest) {
  std::ostringstream text;
  text << kHeader << "\nfp64 " << (manifest.fp64 ? 1 : 0) << "\n";
  for (size_t i = 0; i < manifest.keys.size() && i < kManifestKeys; ++i)
    text << manifest.keys[i].toString() << "\n";
  return writeFileAtomically(path, text.str());
}

}  // namespace flagos::kernels
