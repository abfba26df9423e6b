// The kernel manifest: what the next process should load before it asks.
//
// Note [Kernel preload]
// ~~~~~~~~~~~~~~~~~~~~~
// A fresh process with a warm disk cache still paid, on its first
// iteration, for loading every kernel it used (PoCL parses each binary's
// bitcode) and for a probe build deciding fp64 (a whole compile). At exit
// each device's cache writes a manifest next to its kernel files: the
// device's fp64 answer and the keys this process used, in the order it
// first used them (at most kManifestKeys). At initialize the next process
// reads it, skips the probe, and queues those keys on the cache's
// background pool as disk-only loads (never a compile: a key whose file is
// gone is dropped). The first iteration then finds them in memory, or
// waits only for the load already in flight. Several processes share a
// manifest: the last one to exit writes it, its own keys first, then those
// of the manifest it read that it did not use (mergeManifests) unless
// kManifestMaxUnused processes in a row have not used them, up to
// kManifestKeys in all: re-running a script preloads its kernels first, and
// two or three scripts run in turn (training, evaluation) keep each other's
// (when the last process simply won, an opencl CNN's first step after an
// MLP run took several times as long, its ~40 kernels loaded on demand).
// The age bound matters as much: every listed kernel is loaded in the
// background at start, and a manifest grown to 512 keys by an OpInfo sweep
// made a small MLP's first step several times longer, and its next ones
// slower, while the loads ran (docs/benchmarks.md, "Measurements behind
// design decisions"). A missing or garbled manifest is ignored (probe, no
// preload).
// FLAGOS_PRELOAD=off turns both halves off. Each key comes with its launch
// shapes, repeated with no work after the load (Note [First launch] in
// kernel_cache.h).
#pragma once

#include <string>
#include <vector>

#include "jit/gen/kernel_cache.h"

namespace flagos::kernels {

constexpr size_t kManifestKeys = 512;
constexpr uint32_t kManifestMaxUnused = 2;  // processes in a row that did not use a key

struct Manifest {
  bool fp64 = false;
  std::vector<UsedKernel> kernels;  // in order of first use
};

// @p used's kernels, then @p earlier's that are not among them and whose
// `unused` is below kManifestMaxUnused (carried with unused + 1), in their
// order, at most kManifestKeys in all; fp64 is @p used's.
Manifest mergeManifests(Manifest used, const Manifest& earlier);

// KernelKey::toString()'s inverse; false for anything else.
bool parseKey(const std::string& text, KernelKey* key);

// False when the file is missing or not a manifest of this format.
bool readManifest(const std::string& path, Manifest* manifest);
// Atomic (temporary file + rename); false on any I/O error (never throws).
bool writeManifest(const std::string& path, const Manifest& manifest);

}  // namespace flagos::kernels
