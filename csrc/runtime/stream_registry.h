// Internal to the runtime: how backend.cpp hands the default streams to the
// stream registry (stream.cpp). Everyone else uses stream.h.
#pragma once

#include "runtime/backend.h"
#include "runtime/stream.h"

namespace flagos::detail {

// Create one vendor stream per logical device of `backend`; these become
// stream id 0 of each device. Called once by initialize(); throws on a
// vendor error.
void createDefaultStreams(const Backend& backend);

}  // namespace flagos::detail
