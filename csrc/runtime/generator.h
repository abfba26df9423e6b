// Random number generators of the flagos device.
//
// Note [Generators of the flagos device]
// Until backends bring their own RNG kernels, every random operator runs on
// the host (the host fallback), so a flagos generator is the CPU (mt19937)
// generator (at::CPUGeneratorImpl) that says it lives on the flagos
// device. The host fallback runs each random operator with a CPU generator
// whose state is copied from the flagos one and copies the advanced state
// back (cpuTwin/adoptState), under the flagos generator's lock. So:
// torch.manual_seed / torch.flagos.manual_seed make results reproducible,
// get/set_rng_state work, and the same seed gives the same numbers as on CPU.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

namespace flagos {

// One default generator per logical device (-1: the current device),
// created on first use with a non-deterministic seed, as on CPU.
const at::Generator& defaultGenerator(c10::DeviceIndex device);
// torch.Generator(device="flagos").
at::Generator newGenerator(c10::DeviceIndex device);

bool isFlagosGenerator(const at::Generator& gen);
// A fresh CPU generator in the same state as flagos generator `gen`.
// Caller holds gen.mutex() until adoptState.
at::Generator cpuTwin(const at::Generator& gen);
// Copy the (advanced) state of `twin` back into flagos generator `gen`.
void adoptState(const at::Generator& gen, const at::Generator& twin);

}  // namespace flagos
