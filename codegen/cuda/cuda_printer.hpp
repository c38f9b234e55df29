// The CUDA printer: legalized kernel IR -> CUDA C++ source (docs/KERNEL_IR.md §9). One source
// serves two builds: NVRTC compiles it for a GPU (Flavor::Device), and a host C++ compiler
// compiles it with a serial prelude for `cuda-emu` (Flavor::Emu), which runs the same per-thread
// code and combines reduction partials in the same tree order as the GPU, so the test suite
// checks what this printer prints on machines without a GPU.
//
// Work is split by the kernel's reductions (KernelShape::mode):
//   Flat    no reduction keeps a dim (and no row stage): virtual thread t of T evaluates the
//           flat elements t, t + T, ... (grid-stride); full reductions accumulate per thread
//           (float sums compensated), then combine through the block's tree; the last block
//           to finish folds the blocks' partials with all its threads (thread t: blocks t,
//           t + 256, ... in order) and its tree again, into the Kiln block's one partial.
//   Owned   the dims every reduction keeps (`parallel`) are split over threads; each thread runs
//           the other dims serially, in the interpreter's order (rows, the row stage, strips of
//           inner sums), so its partials are its own and bit-identical to the interpreter's.
//           Where the items are few and the rows long (KernelShape::split), the outermost other
//           dim is cut into segments too: bit-identical while one segment suffices, otherwise
//           the segments' partials fold in order (within the reassociation bound).
//           Where the inner dim is reduced and the rows are long (KernelShape::rows, row_group),
//           a group of threads (a warp or the thread block) runs each item instead: lane j takes
//           the elements j, j + group, ... of every row (adjacent lanes, adjacent loads), float
//           sums compensated per lane, and the group folds its lanes by the flat kernels' tree.
//   Serial  no dim is kept by every reduction: one thread runs the block as the interpreter does.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_ir.hpp"

namespace kiln::cuda {

enum class Flavor : uint8_t { Device, Emu };

// row_group's sizes (below).
constexpr int64_t kRowsFrom = 256, kRowWarpItems = 4096, kRowBlockFrom = 8192;

struct KernelShape {
  enum class Mode : uint8_t { Flat, Owned, Serial } mode = Mode::Flat;
  std::vector<int> parallel;  // Owned: the dims split over threads, outermost first
  // Owned, split: every reduction keeps exactly `parallel`, and split_dim (the outermost other
  // dim but the inner one) is cut into split_segments(items, extent) segments, one thread per
  // item and segment, so a reduction over long columns with few of them (X.T @ r: 100 columns
  // of 10^5 rows) still fills the device. Segment 0 continues from the output's value; each
  // later one starts from the identity; a second kernel, kiln_fold, folds each item's segments
  // with a warp (lane j: segments j, j + 32, ... in order; then the warp tree) (docs/KERNEL_IR.md
  // §11).
  bool split = false;
  int split_dim = -1;
  // Owned, not split, the inner dim reduced: row_group(items, rows' length) threads per item
  // (1: one thread, as above; 32: a warp; 256: the thread block), chosen per launch.
  bool rows = false;
  int64_t rows_from = kRowsFrom;  // row_group's threshold (KILN_CUDA_ROWS_FROM)
  bool tree = false;    // Flat with reductions: per-thread partials combined on the device
  int block = 256;      // threads per block (KILN_BLOCK)
  int max_grid = 1024;  // blocks at most (grid-stride beyond)
  int acc_bytes = 8;    // tree kernels: an upper bound of sizeof(kiln_acc)
};

struct Printed {
  std::string source;  // the whole translation unit (prelude + kernel)
  KernelShape shape;
};

// Entry points: Device: extern "C" __global__ kiln_kernel(const __grid_constant__ kiln_args args,
// void* scratch, unsigned* status), where kiln_args is { long long I[ni]; double F[nf]; void*
// P[np]; } with the kernel's counts, each at least 1: the arrays by value, so a launch copies
// nothing and waits for nothing; errors are or-ed into *status, which stays set until the host
// clears it. Emu: extern "C" unsigned kiln_emu_launch(const long long* I, const double* F, void*
// const* P, long long grid), which returns the status word. status bit 1: an integer was raised
// to a negative power.
// scratch (tree kernels): 256 bytes holding the ticket counter, zero at launch (the last block
// leaves it zero again, so a launcher zeroes it once), then one partial per block. Split kernels
// of more than one segment: 256 bytes unused, then the segments' partials, which the module's
// second entry, extern "C" __global__ kiln_fold(const __grid_constant__ kiln_args args, void*
// scratch), launched after kiln_kernel with Launch::fold_grid blocks, folds into the outputs.
// Owned kernels over rows (KernelShape::rows) have a second entry with kiln_kernel's
// parameters, kiln_rows_kernel, launched instead of it where Launch::group > 1 (its registers
// are its own, so the one-thread path keeps its occupancy).
// kiln_math: the transcendental functions (pow too) from Kiln's own (codegen/math), the same
// bits as the CPU's (the default); else (KILN_MATH=libmvec, precise math) the device's libm.
// rows_from: row_group's threshold for this kernel (KernelShape::rows_from).
Printed print(const kir::Kernel& k, Flavor flavor, bool kiln_math, int64_t rows_from = kRowsFrom);
// A kernel's name in profiles (KILN_CUDA_PROFILE): its kernel IR's hash and work split, e.g.
// "0x3f2a...ull flat-tree".
std::string kernel_label(const kir::Kernel& k, const KernelShape& shape);

// The 8-byte words of a GPU kernel's kiln_args: I, F and P, in that order, each at least one.
struct ArgWords {
  int64_t ints = 1, floats = 1, pointers = 1;
  int64_t total() const { return ints + floats + pointers; }
};
ArgWords arg_words(const kir::Kernel& k);

// A kernel folding reduction partials, acc[e] = acc[e] (+) in[e] for e < n by the combine rules
// of docs/KERNEL_IR.md §8 (argmin/argmax: values, then indices at index_offset bytes): Device:
// extern "C" __global__ kiln_combine(n, acc, in, index_offset), grid-stride; Emu: extern "C"
// kiln_emu_combine(...), one loop.
std::string print_combine(ReduceFn fn, DType acc, Flavor flavor);

// Segments of a split owned kernel over `items` work items and a split dim of `extent`: none
// (1) for kSplitFrom rows or fewer (the interpreter's bits), else one per kSplitRows rows
// (rounded up), no more than fill about kSplitThreads threads (so 1 when the items alone fill
// the device), at most kSplitMaxSegments. A function of the block's shape only, so the order of
// the sums is the same on every GPU (the printer prints the same formula into the kernel).
constexpr int64_t kSplitFrom = 256, kSplitRows = 64, kSplitThreads = 131072,
                  kSplitMaxSegments = 1024;
int64_t split_segments(int64_t items, int64_t extent);

// Threads per item of an owned kernel that reduces rows (KernelShape::rows) of `extent`
// elements over `items` items: 1 for rows_from elements or fewer (kRowsFrom unless
// KILN_CUDA_ROWS_FROM says otherwise; the interpreter's bits),
// else a warp (32), or the thread block (256) where the items are fewer than kRowWarpItems and
// the rows at least kRowBlockFrom long. Like split_segments, a function of the block's shape
// only (printed into the kernel too). Lane j of a group takes the row's elements j, j + group,
// ...; the lanes fold by the warp tree (and, for a block, over its warps) of the flat kernels.
int row_group(int64_t items, int64_t extent, int64_t rows_from = kRowsFrom);

// The bytes one block's launch moves (KILN_CUDA_PROFILE's bytes and GB/s): each memory leaf's
// elements its strides reach (a broadcast dim once), each output's elements written (a
// reduction's kept ones, argmin/argmax with their indices). A lower bound of the traffic.
class Traffic {
 public:
  Traffic() = default;
  explicit Traffic(const kir::Kernel& k);
  int64_t bytes(const int64_t* I) const;

 private:
  struct Part {
    int base = 0;       // its ints in I (offset, then a stride per dim)
    int64_t size = 0;   // bytes per element
    int inner = -1;     // a leaf's inner stride when fixed (0, 1), -1: I's
    uint32_t kept = 0;  // an output's kept dims
    bool leaf = false;
  };
  int rank_ = 0;
  std::vector<Part> parts_;
};

// The launch of one block of the kernel: work items (threads' share, see Mode) and grid size.
struct Launch {
  int64_t items = 0;  // threads with work; 0: nothing to do (an empty block)
  int64_t grid = 0;
  int64_t scratch_bytes = 0;  // tree kernels, split kernels of more than one segment
  int64_t fold_grid = 0;      // split kernels of more than one segment: kiln_fold's blocks
  int group = 1;  // owned kernels over rows: threads per item (row_group); over 1, the module's
                  // entry kiln_rows_kernel runs the launch instead of kiln_kernel
};
Launch launch_for(int rank, const KernelShape& s, const int64_t* I);

// Parts of the prelude (prelude.cpp). kiln_fns: the Kiln math functions the kernel calls, bit
// vm::MathFn f set for each (0: none, and Kiln's math source is left out).
std::string prelude(Flavor flavor, bool normals, uint32_t kiln_fns);
std::string block_tree(Flavor flavor);

}  // namespace kiln::cuda
