// The backends of codegen/cuda behind codegen/backend.hpp: cuda-emu (emu.cpp) and the GPU
// (device.cpp). Neither needs CUDA headers or libraries to build: NVRTC and the driver are
// loaded at run time.
#pragma once
#include <memory>
#include <string>

#include "codegen/backend.hpp"

namespace kiln::cuda {

std::unique_ptr<backend::Backend> make_emu_backend();

// Throws kiln::Error saying why when there is no usable GPU (no driver, no device).
std::unique_ptr<backend::Backend> make_device_backend();

// Whether a CUDA driver with at least one device can be loaded; if not, why.
bool cuda_device_present(std::string* why);

// Whether cuBLAS loads with every function the GPU's GEMM calls use (no GPU needed); if not, why.
bool cublas_available(std::string* why);

// The CUDA source of the kernel that mirrors a Gram product's triangle on a GPU (for tests that
// compile it with NVRTC).
std::string gram_mirror_source();

// Whether cuSOLVER loads with every routine the GPU's LAPACK calls use (no GPU needed); if not,
// why.
bool cusolver_available(std::string* why);

// The CUDA source of the strided copy kernel of the GPU's LAPACK calls (operands into cuSOLVER's
// workspaces, results out; for tests that compile it with NVRTC).
std::string lapack_copy_source();

// Whether the GPU runs LAPACK function f through cuSOLVER (else on the host, on copies); cuda-emu
// runs the same set on its devices, so its plans split calls between device and host as a GPU's.
bool gpu_lapack_runs(LinalgFn f);

}  // namespace kiln::cuda
