// Random number generators of the flagos device.
//
// Note [Generators of the flagos device]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A flagos generator's state is what CUDA's is, and what torch's own
// stacks expect of an accelerator: a 16-byte (seed: uint64, offset: uint64)
// pair, Philox style. DTensor's random-op tracker reads and rewrites those
// two fields to give each shard its own part of one random stream (FSDP2's
// meta-device init, `to_empty()` + `reset_parameters()`); torch.manual_seed,
// fork_rng and get/set_rng_state move the 16 bytes around.
//
// Random operators with a generated kernel draw Philox4x32-10 blocks keyed
// by the seed at counters offset + element index (Note [Random numbers on
// the device], csrc/jit/gen/random.cpp); the bridge reads (seed, offset)
// and advances the offset under the lock (scalar_encoding.cpp). The others
// run on the host (the host fallback): each call gets a CPU (mt19937)
// generator whose whole
// 624-word state is expanded from (seed, offset) by SplitMix64, so every
// call draws from its own full-quality mt19937 stream, keyed by 128 bits
// (no 32-bit seed collisions); afterwards the offset advances by the
// numbers the call produced (rounded up to 4, as Philox counts), under the
// flagos generator's lock (cpuTwin/advanceOffset). So the same seed gives the
// same numbers on every run, consecutive calls never repeat a stream, and
// two ranks with one seed agree, as on CUDA. The numbers differ from CPU's
// for the same seed, as CUDA's do.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace flagos {

// One default generator per logical device (-1: the current device),
// created on first use with a non-deterministic seed, as on CPU.
const at::Generator& defaultGenerator(c10::DeviceIndex device);
// torch.Generator(device="flagos").
at::Generator newGenerator(c10::DeviceIndex device);

bool isFlagosGenerator(const at::Generator& gen);
// A fresh CPU generator for one random call of flagos generator @p gen.
// Caller holds gen.mutex() until advanceOffset.
at::Generator cpuTwin(const at::Generator& gen);
// The call is done and produced @p numbers values: advance @p gen's offset.
void advanceOffset(const at::Generator& gen, uint64_t numbers);

}  // namespace flagos
