// The host fallback (execution tier 4): any operator without a kernel on the
// flagos device runs on the CPU, with its tensors copied over and back.
#pragma once

namespace flagos {

// One stderr line per operator on its first fallback while enabled.
// Initially FLAGOS_LOG_FALLBACK=1 in the environment.
void setLogFallback(bool enabled);
bool logFallback();

}  // namespace flagos
