// Kiln's switches, one registry: each has an environment variable, and tools/kiln sets the same
// fields from its command line. Read once, on first use, strictly: booleans are 0/1, true/false,
// yes/no or on/off, numbers are range-checked, an empty value is unset, and anything else is a
// kiln::Error naming the variable (support/flags.cpp).
//
// | variable          | field        | meaning                                                   |
// | KILN_DEBUG=N      | debug        | 1 pass timings, 2 IR after each pass, 3 kernel IR,        |
// |                   |              | 4 LLVM IR, 5 optimized LLVM IR (all on stderr)            |
// | KILN_THREADS=N    | threads      | worker threads, up to 256 (default: all cores)            |
// | KILN_NO_FUSE=1    | no_fuse      | every op its own kernel and task (push_slices still runs) |
// | KILN_NO_ROW_FUSION=1 | no_row_fusion | a reduction along rows stays its own kernel  |
// |                   |              | instead of joining the kernel that reads it row by row    |
// | KILN_NO_PUSH_SLICES=1 | no_push_slices | skip push_slices: views stay where they are  |
// |                   |              | built, leaves make every element (fusion unchanged)       |
// | KILN_NO_COMPILE=1 | no_compile   | compiling a kernel is an error (tests of the caches)     |
// | KILN_PRECISE_MATH=1 | precise_math | transcendental functions from glibc's scalar libm (bit |
// |                   |              | for bit glibc's results) instead of the vector functions, |
// |                   |              | which differ by up to 4 ulp and are several times faster  |
// | KILN_MATH=M       | math         | the vector functions (pow too): kiln (the default, also   |
// |                   |              | for ""), Kiln's own (codegen/math), the same bits on every |
// |                   |              | CPU ISA and GPU; libmvec, glibc's vector variants         |
// | KILN_TARGET_CPU=C | target_cpu   | kernels for LLVM CPU C (x86-64-v3: AVX2 and its libmvec   |
// |                   |              | variant on an AVX-512 host) instead of the host's CPU     |
// | KILN_FAIL_ALLOC_ABOVE=B | fail_alloc_above | tests: block allocations over B bytes fail |
// |                   |              | as if malloc returned null (0: off)                       |
// | KILN_NO_BLOCK_POOL=1 | no_block_pool | free every block at once instead of keeping freed |
// |                   |              | large blocks for reuse (runtime/memory.cpp)               |
// | KILN_DEVICE=D     | device       | where compute() runs when ComputeOptions::device is       |
// |                   |              | Default: cpu (LLVM kernels), interp (the reference        |
// |                   |              | interpreter, for tests; slow), cuda-emu (printed CUDA     |
// |                   |              | compiled as host C++) or cuda (a GPU)                     |
// | KILN_DEVICES=N    | devices      | devices a plan's blocks are spread over, for backends with|
// |                   |              | device memory (cuda: default every GPU; cuda-emu: 1, up   |
// |                   |              | to 16 emulated)                                           |
// | KILN_NO_DEVICE_LIBRARY=1 | no_device_library | device plans run library calls (GEMM,  |
// |                   |              | LAPACK) on the host, on copies (the path of a GPU without |
// |                   |              | cuBLAS or cuSOLVER), not on the devices                   |
// | KILN_CUDA_CHECK=A | cuda_check   | cuda-emu also compiles each kernel's GPU source with NVRTC|
// |                   |              | for these architectures ("80,90"); a failure is an error  |
// | KILN_CUDA_CHECK_DIR=D | cuda_check_dir | ... and writes each such GPU source to D/<hash>.cu  |
// |                   |              | (for `ptxas -v`: scripts/ptxas-report.sh)                 |
// | KILN_CUDA_ROWS_FROM=N | cuda_rows_from | cuda, cuda-emu: rows over N elements are reduced |
// |                   |              | by a warp or a block per item (default 256; at N or fewer, |
// |                   |              | a thread per item: the interpreter's bits)                |
// | KILN_CUDA_LIB_DIR=D | cuda_lib_dir | directories (colon-separated) searched first for NVRTC,|
// |                   |              | cuBLAS, cuSOLVER, cuRAND (codegen/cuda/nvrtc.hpp)         |
// | KILN_CUDA_STRICT=1 | cuda_strict | a cuda plan whose GEMM or LAPACK call would run on the   |
// |                   |              | host (cuBLAS/cuSOLVER missing) is an error, not a warning |
// | KILN_CUDA_SYNC=1  | cuda_sync    | cuda: synchronize after every launch and copy, and name   |
// |                   |              | the kernel (its source kept) in the error of a fault      |
// | KILN_CUDA_PROFILE=1 | cuda_profile | cuda: CUDA events around each kernel launch, cuda-emu:  |
// |                   |              | the host's clock; `kiln run --json` reports them          |
// | KILN_EMU_CXX=C    | emu_cxx      | the host compiler cuda-emu runs (default c++)             |
// | KILN_MPI=1        | mpi          | the first compute() starts MPI (runtime/distributed.hpp):|
// |                   |              | the program's ranks share its work (docs/DISTRIBUTED.md)  |
// | KILN_MPI_TIMEOUT=S | mpi_timeout | seconds a rank waits for another's message or the end of |
// |                   |              | a run before it decides that rank is lost and ends the job|
// |                   |              | (default 300)                                             |
// | KILN_MPI_PLUGIN=F | mpi_plugin   | the MPI plugin to load (default: libkiln_mpi.so beside    |
// |                   |              | libkiln.so or the program, else the build tree's)        |
// | KILN_MPI_PIECE=N  | (the plugin) | bytes of the largest piece one MPI call sends (default    |
// |                   |              | 2^30; the tests send in small pieces)                     |
// | KILN_CACHE_DIR=D  | cache_dir    | on-disk kernel object cache ("" disables; default         |
// |                   |              | $XDG_CACHE_HOME/kiln when absolute, or ~/.cache/kiln;     |
// |                   |              | support/cache.hpp)                                        |
#pragma once
#include <cstdint>
#include <string>

namespace kiln {

struct Flags {
  int debug = 0;
  int threads = 0;  // 0: all hardware threads
  bool no_fuse = false;
  bool no_row_fusion = false;
  bool no_push_slices = false;
  bool no_compile = false;
  bool precise_math = false;
  std::string math;              // "" or "kiln" (codegen/math), "libmvec" (glibc's vector variants)
  std::string target_cpu;        // read when the JIT starts, the first compile of the process
  int64_t fail_alloc_above = 0;  // bytes
  bool no_block_pool = false;
  std::string cache_dir;
  std::string device;  // "" (cpu), "cpu", "interp", ...; checked when used (support/device.hpp)
  int devices = 0;     // 0: the backend's default
  bool no_device_library = false;
  std::string cuda_check;        // "80,90": NVRTC architectures cuda-emu also compiles for
  std::string cuda_check_dir;    // where cuda-emu writes the GPU sources it checks ("" nowhere)
  int64_t cuda_rows_from = 256;  // cuda::row_group's threshold (KernelShape::rows_from)
  std::string cuda_lib_dir;      // where CUDA's libraries are looked for first (colon-separated)
  bool cuda_strict = false;      // a library call of a cuda plan may not fall back to the host
  bool cuda_sync = false;        // synchronize and check after every launch and copy
  bool cuda_profile = false;     // time each device kernel (backend::kernel_times)
  std::string emu_cxx = "c++";
  bool mpi = false;        // the first compute() starts MPI
  int mpi_timeout = 300;   // seconds
  std::string mpi_plugin;  // libkiln_mpi.so's path ("": looked for)
};

// The process's flags; mutable so tools and tests can change them (not while computing).
Flags& flags();

}  // namespace kiln
