// kiln doctor [--device D]: what this machine gives Kiln (the host's compile target, the device:
// a GPU's name, architecture, SMs, memory and driver), then small computations on the device
// checked against a reference, in order, stopping at the first failure with one line naming it:
// an element-wise kernel, sums (whole, along each axis) and argmax, bit for bit against
// cuda-emu's on a GPU (the same printed kernels run as host C++; within rounding of the
// interpreter's elsewhere); a 64 x 64 dgemm, the Gram product, a TSQR QR and an SVD against the
// CPU; cuRAND's normals against its host generator. Then the CUDA libraries loaded (their files)
// and any library call that fell back to the host. Returns 0 when every check passed, else 1.
#pragma once
#include "kiln/kiln.hpp"

namespace kiln::doctor {

int run(Device device);

}  // namespace kiln::doctor
