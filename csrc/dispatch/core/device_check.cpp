// Note [Tensors on one device] in device_check.h.
#include "dispatch/core/device_check.h"

#include <ATen/core/op_registration/adaption.h>

#include <optional>
#include <string>
#include <unordered_set>

namespace flagos {
namespace {

bool isCpuScalar(const at::Tensor& t) {
  return t.dim() == 0 && t.is_cpu();
}

// check_and_update_common_device's rule, with the method name built only
// for the error (the check runs on every call; the name is a string).
template <class Name>
void visit(std::optional<c10::Device>& common, const at::Tensor& t, const Name& method,
           const char* arg, bool written = false) {
  if (!t.defined() || (isCpuScalar(t) && !written)) return;
  if (!common) {
    common = t.device();
  } else if (C10_UNLIKELY(*common != t.device())) {
    c10::impl::common_device_check_failure(*common, t, method().c_str(), arg);
  }
}

}  // namespace

bool mixesDevicesByDesign(const c10::OperatorHandle& op) {
  static const std::unordered_set<std::string> kOps = {
      "aten::copy_",
      "aten::copy",
      "aten::_copy_from",
      "aten::_copy_from_and_resize",
      "aten::_to_copy",
      "aten::_foreach_copy_",
      "aten::_foreach_copy",
      "aten::is_pinned",
      "aten::_pin_memory",
      "aten::index",
      "aten::_unsafe_index",
      "aten::index_put",
      "aten::index_put_",
      "aten::_index_put_impl_",
      "aten::_unsafe_index_put",
  };
  return kOps.count(op.schema().name()) != 0;
}

namespace {

// Whether every tensor in @p args is on one device: then nothing can fail,
// and the schema walk below (names, alias info) is skipped. It ran on every
// call of every operator.
bool allOnOneDevice(c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> common;
  auto same = [&](const at::Tensor& t) {
    if (!t.defined()) return true;
    if (!common) common = t.device();
    return *common == t.device();
  };
  for (const c10::IValue& v : args) {
    if (v.isTensor()) {
      if (!same(v.toTensor())) return false;
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor() && !same(e.toTensor())) return false;
    }
  }
  return true;
}

}  // namespace

void checkSameDevice(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  if (allOnOneDevice(args)) return;
  const auto& schema = op.schema().arguments();
  std::optional<c10::Device> common;
  const auto method = [&] {
    std::string name = op.schema().name();
    if (!op.schema().overload_name().empty()) name += "." + op.schema().overload_name();
    return name;
  };
  for (size_t i = 0; i < args.size() && i < schema.size(); ++i) {
    const c10::IValue& v = args[i];
    const char* name = schema[i].name().c_str();
    // A 0-dim CPU tensor passes as a scalar input, never as an output.
    const bool written = schema[i].alias_info() && schema[i].alias_info()->isWrite();
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (t.defined() && t.is_cpu() && schema[i].name() == "scalars") continue;  // _foreach_addcdiv
      visit(common, t, method, name, written);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) visit(common, t, method, name, written);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor()) visit(common, e.toTensor(), method, name);
    }
  }
}

void checkSameDevice(const char* op,
                     std::initializer_list<std::pair<const char*, const at::Tensor*>> tensors) {
  std::optional<c10::Device> common;
  const auto method = [op] { return std::string(op); };
  for (const auto& [name, t] : tensors)
    if (t != nullptr) visit(common, *t, method, name);
}

}  // namespace flagos
