// Kernel text written as it reads: raw-string templates with named holes.
//
// Note [Source templates]
// ~~~~~~~~~~~~~~~~~~~~~~~
// An emitter writes each piece of kernel text as a raw string in which
// ${name} marks a hole, and fills the holes from a table of (name, text)
// pairs: the template reads as the code it emits, and what differs between
// dialects (C, OpenCL C, CUDA C) enters as hole values spelled by the
// Dialect (loads, stores, atomics, the early exit of a work item). A hole
// without a value, or a value no hole takes, is a bug of the emitter:
// fillTemplate throws std::logic_error naming it, so a generator test that
// emits the kernel fails.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flagos::kernels {

using TemplateValues = std::vector<std::pair<std::string_view, std::string>>;

// @p text with every ${name} replaced by the value named so in @p values.
std::string fillTemplate(std::string_view text, const TemplateValues& values);

}  // namespace flagos::kernels
