// The devices a plan can run on. Part of the public API (kiln::ComputeOptions::device) and of
// the plan cache's key; codegen/backend.hpp maps each to its backend.
#pragma once
#include <cstdint>
#include <string>

namespace kiln {

enum class Device : uint8_t {
  Default,  // KILN_DEVICE, else Cpu
  Cpu,      // kernels compiled by LLVM for the host CPU (codegen/cpu)
  Interp,   // the reference interpreter: kernel IR evaluated in plain C++, no JIT (codegen/interp)
  CudaEmu,  // CUDA kernels (codegen/cuda) compiled as host C++ and run serially: tests, no GPU
  Cuda,     // an NVIDIA GPU through the CUDA driver (codegen/cuda)
};

const char* device_name(Device d);  // "cpu", "interp", "cuda-emu", "cuda" ("default": Default)
// "cpu", "interp", "cuda-emu" or "cuda" -> the device; anything else is a kiln::Error naming `what`
// (the option or variable it came from) and the devices there are.
Device device_from_name(const std::string& name, const std::string& what);
// Default resolved: KILN_DEVICE (flags().device), else Cpu.
Device resolve_device(Device d);

}  // namespace kiln
