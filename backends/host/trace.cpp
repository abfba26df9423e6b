// The tracing table (trace.h): the kit's recorder; streams stamp the host
// clock around each traced task (Note [Traced tasks], stream.cpp), which is
// already the clock trace.h asks for.
#include "host.h"

namespace flagos_host {
namespace {

struct Hooks : flagos_kit::TraceHooks {
  static bool initialized() noexcept { return state().initialized; }
};

}  // namespace

const flagosTraceTable* traceTable() {
  return flagos_kit::traceTable<Hooks>();
}

}  // namespace flagos_host
