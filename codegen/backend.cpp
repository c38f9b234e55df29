// The backend registry: the one file that knows every backend.
#include "codegen/backend.hpp"

#include "codegen/cpu/jit.hpp"
#include "codegen/cuda/cuda_backend.hpp"
#include "codegen/interp/interp.hpp"
#include "support/error.hpp"

namespace kiln::backend {

Backend& backend_for(Device d) {
  d = resolve_device(d);
  switch (d) {
    case Device::Cpu: {
      static Backend* cpu = cpu::make_backend().release();  // lives for the process
      return *cpu;
    }
    case Device::Interp: {
      static Backend* interp = interp::make_backend(cpu::math_mode).release();
      return *interp;
    }
    case Device::CudaEmu: {
      static Backend* emu = cuda::make_emu_backend().release();
      return *emu;
    }
    case Device::Cuda: {
      static Backend* gpu = cuda::make_device_backend().release();  // throws without a GPU
      return *gpu;
    }
    case Device::Default:
      break;
  }
  throw InternalError(std::string("backend_for: no backend for device ") + device_name(d));
}

}  // namespace kiln::backend
