// The bridge's use of the shape store (Note [Shape inference across
// processes], shape_store.h).
#pragma once

namespace flagos::semantic {

// At initialize (initialize_hooks.cpp): the stored shape results into the
// overloads' caches; also arranges the save at exit.
void loadShapeStore();

}  // namespace flagos::semantic
