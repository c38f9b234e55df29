#include "support/device.hpp"

#include "support/error.hpp"
#include "support/flags.hpp"

namespace kiln {

const char* device_name(Device d) {
  switch (d) {
    case Device::Default:
      return "default";
    case Device::Cpu:
      return "cpu";
    case Device::Interp:
      return "interp";
    case Device::CudaEmu:
      return "cuda-emu";
    case Device::Cuda:
      return "cuda";
  }
  return "?";
}

std::string place_name(const MemoryPlace& p) {
  return p.on_host() ? "host" : device_name(p.device) + (":" + std::to_string(p.index));
}

Device device_from_name(const std::string& name, const std::string& what) {
  if (name == "cpu") return Device::Cpu;
  if (name == "interp") return Device::Interp;
  if (name == "cuda-emu") return Device::CudaEmu;
  if (name == "cuda") return Device::Cuda;
  throw Error(what + ": unknown device '" + name + "' (devices: cpu, interp, cuda-emu, cuda)");
}

Device resolve_device(Device d) {
  if (d != Device::Default) return d;
  const std::string& env = flags().device;
  return env.empty() ? Device::Cpu : device_from_name(env, "KILN_DEVICE");
}

}  // namespace kiln
