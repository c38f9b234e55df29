// The devices a plan can run on. Part of the public API (kiln::ComputeOptions::device) and of
// the plan cache's key; codegen/backend.hpp maps each to its backend.
#pragma once
#include <cstdint>
#include <string>

// Public API (installed: docs/INSTALL.md): exported from libkiln.so, whose other symbols are
// hidden.
#pragma GCC visibility push(default)
namespace kiln {

enum class Device : uint8_t {
  Default,  // KILN_DEVICE, else Cpu
  Cpu,      // kernels compiled by LLVM for the host CPU (codegen/cpu)
  Interp,   // the reference interpreter: kernel IR evaluated in plain C++, no JIT (codegen/interp)
  CudaEmu,  // CUDA kernels (codegen/cuda) compiled as host C++ and run serially: tests, no GPU
  Cuda,     // an NVIDIA GPU through the CUDA driver (codegen/cuda)
};

// Where an array's memory is: the host (Cpu, the default), or device `index` of a device kind
// with its own memory (CudaEmu, Cuda). NDArray::place(), from_buffer of device memory.
struct MemoryPlace {
  Device device = Device::Cpu;
  int index = 0;
  bool on_host() const { return device != Device::CudaEmu && device != Device::Cuda; }
  bool operator==(const MemoryPlace& o) const {
    return on_host() ? o.on_host() : device == o.device && index == o.index;
  }
  bool operator!=(const MemoryPlace& o) const { return !(*this == o); }
};
// "host", "cuda-emu:0", "cuda:1".
std::string place_name(const MemoryPlace& p);

const char* device_name(Device d);  // "cpu", "interp", "cuda-emu", "cuda" ("default": Default)
// "cpu", "interp", "cuda-emu" or "cuda" -> the device; anything else is a kiln::Error naming `what`
// (the option or variable it came from) and the devices there are.
Device device_from_name(const std::string& name, const std::string& what);
// Default resolved: KILN_DEVICE (flags().device), else Cpu.
Device resolve_device(Device d);

}  // namespace kiln
#pragma GCC visibility pop
