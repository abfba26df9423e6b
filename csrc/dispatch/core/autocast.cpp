// torch.autocast("flagos"): ATen registers nothing for AutocastPrivateUse1,
// so without this file autocast either errors or is a silent no-op. We use
// the same op lists and policies as CUDA and XPU (ATen/autocast_mode.h):
// matmul/conv family in the lower-precision dtype, numerically sensitive
// ops in fp32, mixed inputs promoted. The dtype itself comes from
// torch.autocast / torch.flagos.get_amp_supported_dtype().
#include <ATen/autocast_mode.h>
#include <torch/library.h>

// The list macros name ATen types unqualified, so this lives in ATen's
// namespace like ATen's own autocast registrations.
namespace at::autocast {
namespace {

// As on CUDA: binary_cross_entropy is unsafe to autocast (it takes
// probabilities; fp16 saturates). Same advice as CUDA's message.
at::Tensor binaryCrossEntropyBanned(const at::Tensor&, const at::Tensor&,
                                    const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast on the flagos device.\nMany models use a sigmoid layer right before the "
              "binary cross entropy layer.\nIn this case, combine the two layers using "
              "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss."
              "  binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.");
}

// Ops not in the lists run unchanged below autocast.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define FLAGOS_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define FLAGOS_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define FLAGOS_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define FLAGOS_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_LOWER_PRECISION_FP(FLAGOS_LOWER_PRECISION)
  AT_FORALL_FP32(FLAGOS_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(FLAGOS_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(FLAGOS_PROMOTE)
#undef FLAGOS_LOWER_PRECISION
#undef FLAGOS_FP32
#undef FLAGOS_FP32_SET_OPT_DTYPE
#undef FLAGOS_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&binaryCrossEntropyBanned)));
}

}  // namespace
}  // namespace at::autocast
