// Note [Kernel preload] (manifest.h): reading and writing the manifest.
//   flagos-kernel-manifest 3
//   fp64 0|1
//   <key> <globals> <args> <unused>     one kernel per line, first use first
// <key> is KernelKey::toString(); <globals> the launch's global sizes and
// <args> its argument sizes (0: a device pointer), comma-separated, "-"
// for none (Note [First launch]); <unused> how many processes in a row
// have not used it. Format 2 (no <unused>) is still read.
#include "jit/gen/manifest.h"

#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "jit/gen/disk_store.h"

namespace flagos::kernels {
namespace {

constexpr const char* kHeader = "flagos-kernel-manifest 3";
constexpr const char* kHeader2 = "flagos-kernel-manifest 2";  // read: unused 0
constexpr size_t kMaxArgs = 256;

// "1,2,3" or "-" (empty); false for anything else.
template <typename T>
bool parseList(const std::string& text, std::vector<T>* out, size_t max, bool zero_ok) {
  out->clear();
  if (text == "-") return true;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty() || item.size() > 20 ||
        item.find_first_not_of("0123456789") != std::string::npos || out->size() >= max)
      return false;
    const unsigned long long v = std::strtoull(item.c_str(), nullptr, 10);
    if (v == 0 && !zero_ok) return false;
    if (v > static_cast<unsigned long long>(std::numeric_limits<T>::max())) return false;
    out->push_back(static_cast<T>(v));
  }
  return !out->empty();
}

template <typename T>
void writeList(std::ostream& out, const std::vector<T>& values) {
  if (values.empty()) out << "-";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? "," : "") << values[i];
}

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
  if (!in || !std::getline(in, line) || (line != kHeader && line != kHeader2)) return false;
  const bool with_unused = line == kHeader;
  if (!std::getline(in, line) || (line != "fp64 0" && line != "fp64 1")) return false;
  Manifest m;
  m.fp64 = line == "fp64 1";
  while (std::getline(in, line) && m.kernels.size() < kManifestKeys) {
    std::istringstream fields(line);
    std::string key, globals, args, unused = "0", extra;
    UsedKernel k;
    std::vector<uint32_t> age;
    if (!(fields >> key >> globals >> args) || (with_unused && !(fields >> unused)) ||
        (fields >> extra) || !parseKey(key, &k.key) ||
        !parseList(globals, &k.shape.globals, LaunchLog::kGlobals, /*zero_ok=*/false) ||
        !parseList(args, &k.shape.arg_sizes, kMaxArgs, /*zero_ok=*/true) ||
        !parseList(unused, &age, 1, /*zero_ok=*/true))
      return false;
    k.unused = age[0];
    m.kernels.push_back(std::move(k));
  }
  *manifest = std::move(m);
  return true;
}

bool writeManifest(const std::string& path, const Manifest& manifest) {
  std::ostringstream text;
  text << kHeader << "\nfp64 " << (manifest.fp64 ? 1 : 0) << "\n";
  for (size_t i = 0; i < manifest.kernels.size() && i < kManifestKeys; ++i) {
    const UsedKernel& k = manifest.kernels[i];
    text << k.key.toString() << " ";
    writeList(text, k.shape.globals);
    text << " ";
    writeList(text, k.shape.arg_sizes);
    text << " " << k.unused << "\n";
  }
  return writeFileAtomically(path, text.str());
}

Manifest mergeManifests(Manifest used, const Manifest& earlier) {
  if (used.kernels.size() > kManifestKeys) used.kernels.resize(kManifestKeys);
  std::unordered_set<KernelKey, KernelKeyHash> seen;
  for (const UsedKernel& k : used.kernels) seen.insert(k.key);
  for (const UsedKernel& k : earlier.kernels) {
    if (used.kernels.size() >= kManifestKeys) break;
    if (k.unused >= kManifestMaxUnused || !seen.insert(k.key).second) continue;
    used.kernels.push_back(k);
    ++used.kernels.back().unused;
  }
  return used;
}

}  // namespace flagos::kernels
