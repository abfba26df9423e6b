// fillTemplate: Note [Source templates] (source_template.h).
#include "jit/gen/source_template.h"

#include <stdexcept>

namespace flagos::kernels {

std::string fillTemplate(std::string_view text, const TemplateValues& values) {
  std::vector<bool> used(values.size(), false);
  std::string out;
  out.reserve(text.size() + 64);
  size_t at = 0;
  while (true) {
    const size_t open = text.find("${", at);
    if (open == std::string_view::npos) break;
    const size_t close = text.find('}', open + 2);
    if (close == std::string_view::npos) {
      throw std::logic_error("source template: unclosed ${ at offset " + std::to_string(open));
    }
    const std::string_view name = text.substr(open + 2, close - open - 2);
    size_t k = 0;
    while (k < values.size() && values[k].first != name) ++k;
    if (k == values.size()) {
      throw std::logic_error("source template: no value for ${" + std::string(name) + "}");
    }
    used[k] = true;
    out.append(text.substr(at, open - at));
    out.append(values[k].second);
    at = close + 1;
  }
  out.append(text.substr(at));
  for (size_t k = 0; k < values.size(); ++k) {
    if (!used[k]) {
      throw std::logic_error("source template: no hole takes the value " +
                             std::string(values[k].first));
    }
  }
  return out;
}

}  // namespace flagos::kernels
