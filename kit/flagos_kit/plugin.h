// What the kit needs to know about the plugin it is compiled into: the name
// its messages start with ("host", "opencl"). Each plugin defines it once:
//
//   const char* const flagos_kit::kPluginName = "mychip";
//
// Part of the kit (kit/flagos_kit/): header-only helpers compiled into each
// plugin; never passed across the vendor ABI. Each plugin stays one
// self-contained library (the kit's state, e.g. the last error, is per
// plugin because plugins hide their symbols and bind them first).
#pragma once

namespace flagos_kit {

extern const char* const kPluginName;

}  // namespace flagos_kit
