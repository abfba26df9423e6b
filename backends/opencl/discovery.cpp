// Platforms and devices: which OpenCL devices the plugin uses.
//
// Every platform the ICD loader knows is asked for devices of the type
// FLAGOS_OPENCL_DEVICE_TYPE names. A device is usable when it is available
// and speaks OpenCL 1.2 or later (fill, markers and barriers with wait lists
// are 1.2). Under "all", GPUs and accelerators win: when there is at least
// one, CPU devices are left out, so that PoCL's CPU device installed next to
// a GPU driver never becomes device 0. Devices are numbered in platform
// order, then in each platform's own order.
#include <cstdio>
#include <string>
#include <vector>

#include "opencl.h"

namespace flagos_opencl {
namespace {

std::string platformString(cl_platform_id platform, cl_platform_info param) {
  size_t size = 0;
  if (clGetPlatformInfo(platform, param, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string value(size, '\0');
  if (clGetPlatformInfo(platform, param, size, &value[0], nullptr) != CL_SUCCESS) return "";
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

std::string deviceString(cl_device_id device, cl_device_info param) {
  size_t size = 0;
  if (clGetDeviceInfo(device, param, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string value(size, '\0');
  if (clGetDeviceInfo(device, param, size, &value[0], nullptr) != CL_SUCCESS) return "";
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

template <typename T>
T deviceValue(cl_device_id device, cl_device_info param) {
  T value{};
  if (clGetDeviceInfo(device, param, sizeof(value), &value, nullptr) != CL_SUCCESS) return T{};
  return value;
}

cl_device_type typeMask(DeviceType type) {
  switch (type) {
    case DeviceType::kGpu:
      return CL_DEVICE_TYPE_GPU;
    case DeviceType::kCpu:
      return CL_DEVICE_TYPE_CPU;
    case DeviceType::kAccelerator:
      return CL_DEVICE_TYPE_ACCELERATOR;
    case DeviceType::kAll:
      break;
  }
  return CL_DEVICE_TYPE_ALL;
}

const char* typeName(DeviceType type) {
  switch (type) {
    case DeviceType::kGpu:
      return "gpu";
    case DeviceType::kCpu:
      return "cpu";
    case DeviceType::kAccelerator:
      return "accelerator";
    case DeviceType::kAll:
      break;
  }
  return "";
}

}  // namespace

bool discoverDevices(const Config& config, std::vector<DeviceInfo>* devices, std::string* reason) {
  devices->clear();
  cl_uint platform_count = 0;
  cl_int error = clGetPlatformIDs(0, nullptr, &platform_count);
  if (error != CL_SUCCESS || platform_count == 0) {
    // With ocl-icd and no ICD file this is CL_PLATFORM_NOT_FOUND_KHR.
    *reason = "no OpenCL platform: the ICD loader found no driver (" +
              (error != CL_SUCCESS ? clErrorName(error) : std::string("0 platforms")) +
              "; are ICD files in /etc/OpenCL/vendors or OCL_ICD_VENDORS?)";
    return false;
  }
  std::vector<cl_platform_id> platforms(platform_count);
  error = clGetPlatformIDs(platform_count, platforms.data(), nullptr);
  if (error != CL_SUCCESS) {
    *reason = "clGetPlatformIDs failed: " + clErrorName(error);
    return false;
  }

  std::vector<DeviceInfo> found;
  std::string skipped;  // why devices of the right type were not taken
  for (cl_platform_id platform : platforms) {
    cl_uint count = 0;
    const cl_device_type mask = typeMask(config.device_type);
    if (clGetDeviceIDs(platform, mask, 0, nullptr, &count) != CL_SUCCESS || count == 0) continue;
    std::vector<cl_device_id> ids(count);
    if (clGetDeviceIDs(platform, mask, count, ids.data(), nullptr) != CL_SUCCESS) continue;
    const std::string platform_version = platformString(platform, CL_PLATFORM_VERSION);
    const bool pocl =
        platformString(platform, CL_PLATFORM_NAME).find("Portable Computing Language") !=
        std::string::npos;
    for (cl_device_id id : ids) {
      DeviceInfo info;
      info.platform = platform;
      info.id = id;
      info.name = deviceString(id, CL_DEVICE_NAME);
      const std::string version = deviceString(id, CL_DEVICE_VERSION);  // "OpenCL 1.2 ..."
      if (std::sscanf(version.c_str(), "OpenCL %d.%d", &info.cl_major, &info.cl_minor) != 2 ||
          info.cl_major * 100 + info.cl_minor < 102) {
        skipped += " " + info.name + " (" + version + ", needs OpenCL 1.2);";
        continue;
      }
      if (!deviceValue<cl_bool>(id, CL_DEVICE_AVAILABLE)) {
        skipped += " " + info.name + " (not available);";
        continue;
      }
      const auto type = deviceValue<cl_device_type>(id, CL_DEVICE_TYPE);
      info.accelerator =
          (type & (CL_DEVICE_TYPE_GPU | CL_DEVICE_TYPE_ACCELERATOR | CL_DEVICE_TYPE_CUSTOM)) != 0;
      info.vendor = deviceString(id, CL_DEVICE_VENDOR);
      info.driver_version = deviceString(id, CL_DRIVER_VERSION);
      info.platform_version = platform_version;
      info.pocl = pocl;
      info.global_memory = deviceValue<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
      info.max_alloc = deviceValue<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      info.compute_units =
          static_cast<int32_t>(deviceValue<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS));
      info.max_work_group_size = deviceValue<size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      // OpenCL 1.2: a device without double support reports no fp config.
      info.fp64 = deviceValue<cl_device_fp_config>(id, CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
      found.push_back(std::move(info));
    }
  }

  bool any_accelerator = false;
  for (const DeviceInfo& info : found) any_accelerator = any_accelerator || info.accelerator;
  for (DeviceInfo& info : found) {
    if (info.accelerator || !any_accelerator) devices->push_back(std::move(info));
  }
  if (devices->empty()) {
    *reason = std::string("no usable OpenCL ") +
              (config.device_type == DeviceType::kAll ? "" : typeName(config.device_type)) +
              (config.device_type == DeviceType::kAll ? "" : " ") + "device on " +
              std::to_string(platform_count) + " platform(s)" +
              (skipped.empty() ? "" : "; skipped:" + skipped.substr(0, skipped.size() - 1));
    return false;
  }
  return true;
}

}  // namespace flagos_opencl
