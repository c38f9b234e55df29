#include "runtime/plan.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <ostream>
#include <thread>
#include <unordered_map>

#include "codegen/library.hpp"
#include "ir/graph.hpp"
#include "runtime/distributed.hpp"
#include "runtime/memory.hpp"
#include "support/checked.hpp"
#include "support/error.hpp"
#include "support/flags.hpp"

namespace kiln {

namespace {
constexpr size_t kFanIn = 8;  // partials folded per combine task

int64_t grid_blocks(const Chunks& c) {
  int64_t n = 1;
  for (const auto& d : c) n *= static_cast<int64_t>(d.size());
  return n;
}

// A leaf's flat index map over its reader's domain, offset + sum_d i_d * strides[d], seen as
// coordinates in the array it reads: coordinate k = off[k] + sum over reader dims d with
// dim_of[d] == k of step[d] * i_d. Exists for slices, transposes, broadcasts and integer indices
// of the array (each reader dim moves along at most one array dim); nullopt otherwise.
struct Coords {
  std::vector<int64_t> off;
  std::vector<int> dim_of;  // -1: the reader dim does not move (stride 0)
  std::vector<int64_t> step;
};

std::optional<Coords> array_coords(const Shape& shape, int64_t offset,
                                   const std::vector<int64_t>& strides) {
  const int64_t total = num_elements(shape);
  if (total <= 0 || offset < 0 || offset >= total) return std::nullopt;
  Shape cs = c_strides(shape);
  Coords c;
  for (size_t k = 0; k < shape.size(); ++k) c.off.push_back((offset / cs[k]) % shape[k]);
  for (int64_t s : strides) {
    int dim = -1;
    int64_t step = 0;
    for (size_t k = 0; k < shape.size() && s != 0; ++k) {
      if (shape[k] > 1 && s % cs[k] == 0 && std::abs(s / cs[k]) < shape[k]) {
        dim = static_cast<int>(k);
        step = s / cs[k];
        break;
      }
    }
    if (s != 0 && dim < 0) return std::nullopt;
    c.dim_of.push_back(dim);
    c.step.push_back(step);
  }
  return c;
}

// The block of the producer's grid that holds everything a reader block reads, with the map
// local to it (C order within the block); nullopt when the reader block spans several blocks.
std::optional<BlockRead> read_in_block(const PlanGroup& producer, const Shape& shape,
                                       const Coords& c, const int64_t* lo, const int64_t* ext,
                                       int rank) {
  BlockRead br;
  for (int d = 0; d < rank; ++d)
    if (ext[d] == 0) return br;  // an empty block reads nothing
  const size_t n = shape.size();
  std::vector<int64_t> first(c.off), low(c.off), high(c.off);
  for (int d = 0; d < rank; ++d) {
    int k = c.dim_of[d];
    if (k < 0) continue;
    int64_t a = c.step[d] * lo[d], b = c.step[d] * (lo[d] + ext[d] - 1);
    first[k] += a;
    low[k] += std::min(a, b);
    high[k] += std::max(a, b);
  }
  std::vector<int64_t> bstart(n), bext(n);
  int64_t block = 0;
  for (size_t k = 0; k < n; ++k) {
    if (low[k] < 0 || high[k] >= shape[k]) return std::nullopt;
    const auto& starts = producer.starts[k];
    size_t q = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), low[k]) -
                                   starts.begin()) -
               1;
    bstart[k] = starts[q];
    bext[k] = producer.chunks[k][q];
    if (high[k] >= bstart[k] + bext[k]) return std::nullopt;
    block = block * static_cast<int64_t>(starts.size()) + static_cast<int64_t>(q);
  }
  Shape bcs = c_strides(bext);
  br.block = block;
  for (size_t k = 0; k < n; ++k) br.base += (first[k] - bstart[k]) * bcs[k];
  for (int d = 0; d < rank; ++d)
    br.strides.push_back(c.dim_of[d] < 0 ? 0 : c.step[d] * bcs[c.dim_of[d]]);
  return br;
}

// Where each task of GEMM call l reads its operand a (or b), an array of `shape` written per block
// by `producer`: one block and a BLAS layout within it per task, or empty when some task's region
// spans blocks or is not BLAS-readable there (or the call has no tasks).
std::vector<LibraryRead> library_reads(const Plan& p, const PlanLibrary& l, bool b,
                                       const PlanGroup& producer, const Shape& shape) {
  const LibraryOperand& op = b ? l.b : l.a;
  const MatrixLayout& m = op.layout;
  auto c = array_coords(shape, m.offset, {m.row_stride, m.col_stride});
  if (!c) return {};
  const PlanGroup& g = p.groups[l.group];
  const int64_t splits = static_cast<int64_t>(l.k_starts.size()) - 1;
  std::vector<LibraryRead> reads;
  for (int64_t blk = 0; blk < g.blocks; ++blk) {
    int64_t lo[2], ext[2];
    p.block_box(g, blk, lo, ext);
    for (int64_t q = 0; q < splits; ++q) {
      int64_t k0 = l.k_starts[q], kn = l.k_starts[q + 1] - k0;
      int64_t rlo[2] = {b ? k0 : lo[0], b ? lo[1] : k0};
      int64_t rext[2] = {b ? kn : ext[0], b ? ext[1] : kn};
      auto br = read_in_block(producer, shape, *c, rlo, rext, 2);
      if (!br) return {};
      LibraryRead r;
      r.block = br->block;
      if (br->block >= 0) {
        auto layout = matrix_layout(rext[0], rext[1], AffineMap{br->base, br->strides});
        if (!layout) return {};
        r.layout = *layout;
      }
      reads.push_back(r);
    }
  }
  return reads;
}

// Decides which arrays are blocked (PlanArray::blocked) and fills every reader's block reads.
void plan_blocked_arrays(Plan& p) {
  std::vector<int> writer(p.arrays.size(), -1), writes(p.arrays.size(), 0);
  for (size_t gi = 0; gi < p.groups.size(); ++gi) {
    const PlanGroup& g = p.groups[gi];
    if (g.library >= 0) continue;  // its result is one buffer (below)
    for (size_t o = 0; o < g.output_arrays.size(); ++o) {
      if (g.lowered.kernel.outputs[o].reduce) continue;
      int a = g.output_arrays[o];
      const OutputBinding& ob = g.lowered.outputs[o];
      bool whole = ob.offset == 0 && g.domain == p.arrays[a].shape;
      ++writes[a];
      writer[a] = whole ? static_cast<int>(gi) : -1;
    }
  }
  for (const PlanReduce& r : p.reduces) ++writes[r.array];
  std::vector<bool> reduced(p.arrays.size(), false), library_out(p.arrays.size(), false),
      library_in(p.arrays.size(), false);
  for (const PlanReduce& r : p.reduces) reduced[r.array] = true;
  for (const PlanLibrary& l : p.libraries) {
    library_out[l.out] = true;
    for (const LibraryOperand* op : {&l.a, &l.b})  // LAPACK reads its operands whole
      if (op->array >= 0 && l.op == Op::Linalg) library_in[op->array] = true;
  }
  for (size_t a = 0; a < p.arrays.size(); ++a) {
    PlanArray& arr = p.arrays[a];
    arr.whole_because = arr.output >= 0                   ? "an output"
                        : reduced[a]                      ? "a reduction's result"
                        : arr.node->op == Op::Concat      ? "written in parts (concatenate)"
                        : library_out[a]                  ? "a library call's result"
                        : library_in[a]                   ? "read in place by a library call"
                        : writes[a] != 1 || writer[a] < 0 ? "written in parts"
                        : num_elements(arr.shape) == 0    ? "empty"
                                                          : "";
    if (!arr.whole_because.empty()) continue;
    const PlanGroup& producer = p.groups[writer[a]];
    // Every read of every reader block must fall within one block.
    std::vector<std::pair<int, int>> reads;  // (group, leaf)
    for (size_t gi = 0; gi < p.groups.size(); ++gi)
      for (size_t l = 0; l < p.groups[gi].leaf_arrays.size(); ++l)
        if (p.groups[gi].leaf_arrays[l] == static_cast<int>(a)) reads.push_back({int(gi), int(l)});
    std::vector<std::vector<std::optional<BlockRead>>> found(reads.size());
    bool ok = true;
    for (size_t q = 0; q < reads.size() && ok; ++q) {
      const PlanGroup& g = p.groups[reads[q].first];
      const LeafBinding& b = g.lowered.leaves[reads[q].second];
      const kir::Leaf& leaf = g.lowered.kernel.leaves[reads[q].second];
      auto c = array_coords(arr.shape, b.offset, b.strides);
      if (!c) {
        arr.whole_because = "read through a reshape that regroups its elements";
        ok = false;
        break;
      }
      int rank = static_cast<int>(g.domain.size());
      for (int64_t blk = 0; blk < g.blocks && ok; ++blk) {
        int64_t lo[32], ext[32];
        p.block_box(g, blk, lo, ext);
        auto br = read_in_block(producer, arr.shape, *c, lo, ext, rank);
        // The kernel was compiled for its leaf's innermost stride when that is 0 or 1.
        ok = br && (br->block < 0 || rank == 0 || leaf.inner_stride < 0 ||
                    br->strides[rank - 1] == leaf.inner_stride);
        if (!ok)
          arr.whole_because = br ? "read with another innermost stride than compiled"
                                 : "read across blocks (a reader's block spans several)";
        found[q].push_back(std::move(br));
      }
    }
    // GEMM calls reading it: each call's region of it within one block.
    std::vector<std::pair<int, int>> calls;  // (library, operand 0 = a / 1 = b)
    for (size_t li = 0; li < p.libraries.size(); ++li)
      for (int o : {0, 1})
        if ((o ? p.libraries[li].b : p.libraries[li].a).array == static_cast<int>(a))
          calls.push_back({static_cast<int>(li), o});
    std::vector<std::vector<LibraryRead>> call_reads;
    for (size_t q = 0; q < calls.size() && ok; ++q) {
      call_reads.push_back(
          library_reads(p, p.libraries[calls[q].first], calls[q].second != 0, producer, arr.shape));
      ok = !call_reads.back().empty();
      if (!ok) arr.whole_because = "read across blocks by a library call";
    }
    if (!ok) continue;
    arr.blocked = true;
    arr.producer = writer[a];
    arr.block_offset = p.blocked_blocks;
    arr.block_readers.assign(producer.blocks, 0);
    p.blocked_blocks += producer.blocks;
    p.streams = true;
    arr.readers = 0;
    for (size_t q = 0; q < reads.size(); ++q) {
      PlanGroup& g = p.groups[reads[q].first];
      size_t width = 2 + g.domain.size();
      if (g.block_reads.empty())
        g.block_reads.assign(static_cast<size_t>(g.blocks) * g.leaf_arrays.size() * width, 0);
      for (int64_t blk = 0; blk < g.blocks; ++blk) {
        const BlockRead& br = *found[q][blk];
        int64_t* at = g.block_reads.data() + g.block_read_at(blk, reads[q].second);
        at[0] = br.block;
        at[1] = br.base;
        std::copy(br.strides.begin(), br.strides.end(), at + 2);
        if (br.block >= 0) ++arr.block_readers[br.block];
      }
    }
    for (size_t q = 0; q < calls.size(); ++q) {
      PlanLibrary& l = p.libraries[calls[q].first];
      for (const LibraryRead& r : call_reads[q])
        if (r.block >= 0) ++arr.block_readers[r.block];
      (calls[q].second ? l.b_reads : l.a_reads) = std::move(call_reads[q]);
    }
  }
}

}  // namespace

Error memory_error(const std::string& what, uint64_t bytes, uint64_t memory) {
  const bool plural = what == "the outputs together";
  return Error("compute: " + what + (plural ? " need " : " needs ") + bytes_str(bytes) +
               ", more than this machine's memory (" + bytes_str(memory) +
               "); compute a reduction or a slice of it instead, or use smaller chunks");
}

std::string storage_summary(const Plan& p) {
  auto placed = [&](const PlanLibrary& l) {
    const Node* out = p.arrays[l.out].node;
    return out == l.call ? std::string()
                         : "  result written in place into " + node_label(*out) + " from element " +
                               std::to_string(l.out_offset) + " (no copy)\n";
  };
  const bool device = backend::backend_for(p.device).memory() != nullptr;
  backend::DeviceBlas* blas = p.device_blas ? backend::backend_for(p.device).blas() : nullptr;
  backend::DeviceLapack* lapack =
      p.device_lapack ? backend::backend_for(p.device).lapack() : nullptr;
  backend::DeviceRandom* random =
      p.device_random ? backend::backend_for(p.device).random() : nullptr;
  std::string s = "storage of materialized arrays:\n";
  for (const PlanArray& a : p.arrays) {
    s += "  " + node_label(*a.node) + ": " +
         (a.blocked ? "per block, each freed at its last reader"
                    : "one buffer (" + a.whole_because + ")");
    if (device && a.blocked)
      s += "; on the device of the block that writes it (copied to a reader on another device)";
    else if (device && !a.host_because.empty())
      s += "; on the host: " + a.host_because + " (kernels read a copy on their device)";
    else if (device)
      s += std::string("; on the device (with several devices: written on each, assembled on ") +
           "the host, or on device 0 for an output kept there; copied to readers)" +
           (a.output >= 0 ? ", copied to the host at the end" : "");
    s += "\n";
  }
  if (device)
    s += "device copies: Buffer leaves copied in once per device (the elements its blocks "
         "read), reduction partials copied in (the identity) and combined on the device (the "
         "result copied out); counted in kiln::stats() and kiln run's report\n";
  for (size_t k = 0; k < p.libraries.size(); ++k) {
    const PlanLibrary& l = p.libraries[k];
    const PlanGroup& g = p.groups[l.group];
    if (l.op == Op::Random) {
      s += "library call " + std::to_string(l.group) + ": " + node_label(*l.call) + " = " +
           std::to_string(l.m) + " " + l.routine + " (seed + stream " + std::to_string(l.stream) +
           " x 0x9E3779B97F4A7C15) in one task, " +
           (random ? "on device 0 (" + random->name() + ")"
                   : std::string("on the host (cuRAND's host generator)")) +
           "\n";
      s += placed(l);
      continue;
    }
    if (l.op == Op::Linalg) {
      s += "library call " + std::to_string(l.group) + ": " + node_label(*l.call) + " = " +
           linalg_name(l.fn) + " of A " + shape_str({l.m, l.n}) +
           (l.b.present() ? " and B " + shape_str({l.b_rows, l.k}) : "") + ", " + l.routine +
           " in one task, " +
           (l.on_device ? "on device 0 (" + lapack->name() + ")" : std::string("on a copy")) +
           (l.exclusive ? "; alone in the plan: with every thread of the run" : "") + "\n";
      for (const LibraryOperand* op : {&l.a, &l.b})
        if (op->present())
          s += std::string("  ") + (op == &l.a ? "A" : "B") + ": " + op->from + "\n";
      s += placed(l);
      continue;
    }
    s += "library call " + std::to_string(l.group) + ": " + node_label(*l.call) + " = A " +
         shape_str({l.m, l.k}) + " @ B " + shape_str({l.k, l.n}) + ", " + l.routine +
         " per block (" + std::to_string(g.blocks) + " blocks x " +
         std::to_string(l.k_starts.size() - 1) + " contraction splits" +
         (l.k_starts.size() <= 2 ? ""
          : l.chained            ? ", each adding to the block in split order"
                                 : ", in parallel into partials added in split order") +
         ")" + (blas ? ", on the devices (" + blas->name() + ")" : "") + "\n";
    for (const LibraryOperand* op : {&l.a, &l.b})
      s += std::string("  ") + (op == &l.a ? "A" : "B") + ": " + op->from + ", read in place" +
           (op->layout.transposed ? " with the transpose flag" : "") + " (ld " +
           std::to_string(op->layout.ld) + ")\n";
    s += placed(l);
  }
  return s;
}

bool Plan::writes(int group, int array) const {
  const PlanGroup& g = groups[group];
  if (g.library >= 0) return libraries[g.library].out == array;
  for (size_t o = 0; o < g.output_arrays.size(); ++o) {
    bool reduce = g.lowered.kernel.outputs[o].reduce;
    if ((reduce ? reduces[g.output_arrays[o]].array : g.output_arrays[o]) == array) return true;
  }
  return false;
}

void Plan::block_box(const PlanGroup& g, int64_t block, int64_t* lo, int64_t* ext) const {
  int r = static_cast<int>(g.domain.size());
  for (int d = r - 1; d >= 0; --d) {
    int64_t n = static_cast<int64_t>(g.chunks[d].size());
    int64_t k = block % n;
    block /= n;
    lo[d] = g.starts[d][k];
    ext[d] = g.chunks[d][k];
  }
}

int64_t Plan::partial_elems(int id) const {
  const auto& [ri, block] = partials[id];
  const PlanReduce& r = reduces[ri];
  const PlanGroup& g = groups[r.group];
  int64_t lo[32], ext[32];
  block_box(g, block, lo, ext);
  uint32_t mask = g.lowered.kernel.outputs[r.output].reduced_mask;
  int64_t n = 1;
  for (size_t d = 0; d < g.domain.size(); ++d)
    if (!((mask >> d) & 1u)) n *= ext[d];
  return n;
}

int64_t Plan::result_region(const PlanReduce& r, int64_t block, std::vector<int64_t>* dims,
                            std::vector<int64_t>* strides) const {
  const PlanGroup& g = groups[r.group];
  int64_t lo[32], ext[32];
  block_box(g, block, lo, ext);
  const uint32_t mask = g.lowered.kernel.outputs[r.output].reduced_mask;
  int64_t base = 0;
  for (size_t d = 0; d < g.domain.size(); ++d) {
    if ((mask >> d) & 1u) continue;
    base += lo[d] * r.out_strides[d];
    dims->push_back(ext[d]);
    strides->push_back(r.out_strides[d]);
  }
  return base;
}

size_t Plan::partial_bytes(int id) const {
  const PlanReduce& r = reduces[partials[id].first];
  int64_t n = partial_elems(id);
  if (r.fn != ReduceFn::ArgMin && r.fn != ReduceFn::ArgMax)
    return static_cast<size_t>(n) * dtype_size(r.acc);
  return index_offset(n, dtype_size(r.acc)) + static_cast<size_t>(n) * sizeof(int64_t);
}

namespace {

// build_plan's steps, in order (each reads what the earlier ones made):
//   arrays -> kernels (lower + compile, per group) -> reductions -> blocked arrays ->
//   tasks (Start, Kernel, End per group, with their edges) -> combine trees -> run order.
class PlanBuilder {
 public:
  PlanBuilder(Plan& p, backend::Backend& be, std::ostream* kernel_dump)
      : p_(p), f_(p.fused), be_(be), dump_(kernel_dump) {}

  void run() {
    make_arrays();
    check_outputs();
    check_blocks();
    check_plan_memory();
    compile_kernels();
    make_reductions();
    plan_blocked_arrays(p_);
    make_tasks();
    mark_exclusive_calls();
    order_tasks();
  }

 private:
  // Arrays that exist in memory: one per materialized node; compute()'s outputs among them.
  void make_arrays() {
    for (const auto& b : f_.boundaries) {
      PlanArray a;
      a.node = b.node;
      a.dtype = b.node->dtype;
      a.shape = b.node->shape;
      auto bytes = checked::bytes(num_elements(a.shape), dtype_size(a.dtype));
      if (!bytes)  // 2^62 elements of 8 bytes: the byte count would wrap (and allocate too little)
        throw Error("compute: " + node_label(*a.node) + " would need " +
                    std::to_string(num_elements(a.shape)) + " x " +
                    std::to_string(dtype_size(a.dtype)) +
                    " bytes, more than a 64-bit size can hold; it cannot be materialized (a "
                    "reduction or a slice of it can be computed without it)");
      a.bytes = *bytes;
      array_of_[b.node] = static_cast<int>(p_.arrays.size());
      p_.arrays.push_back(std::move(a));
    }
    for (size_t k = 0; k < f_.graph.outputs.size(); ++k) {
      int a = array_of_.at(f_.graph.outputs[k].get());
      if (p_.arrays[a].output < 0) p_.arrays[a].output = static_cast<int>(k);
      p_.output_arrays.push_back(a);
    }
  }

  // compute()'s outputs are whole buffers on the host (on plans without device memory): each
  // and all together must fit the machine's memory. Checked before anything is compiled; the run
  // checks every buffer it will allocate again (runtime/execute.cpp: check_host_memory).
  void check_outputs() const {
    if (be_.memory()) return;  // device plans: where outputs live is the run's choice
    const uint64_t memory = static_cast<uint64_t>(usable_memory());
    uint64_t all = 0;
    for (const PlanArray& a : p_.arrays) {
      if (a.output < 0) continue;
      if (a.bytes > memory)
        throw memory_error("the output " + node_label(*a.node), a.bytes, memory);
      all += a.bytes;  // each below 2^63 (make_arrays), so the sum of two cannot wrap
      if (all > memory) throw memory_error("the outputs together", all, memory);
    }
  }

  // Every kernel block is one task: one of more than kMaxBlockElements elements (a chunking that
  // a broadcast or an outer product made: make_chunks refuses such chunks from users) would run
  // for hours, or years. Refused before anything is compiled or allocated.
  void check_blocks() const {
    for (const Group& grp : f_.groups) {
      if (grp.library) continue;  // BLAS/LAPACK calls: bounded by their operands' memory
      Shape largest;
      for (const auto& c : grp.chunks)
        largest.push_back(c.empty() ? 0 : *std::max_element(c.begin(), c.end()));
      auto elements = checked::product(largest);
      if (elements && *elements <= kMaxBlockElements) continue;
      throw Error("compute: " + node_label(*grp.outputs[0].target) + " is computed in blocks of " +
                  shape_str(largest) + " (chunks " + chunks_str(grp.chunks) + "), " +
                  (elements ? count_str(*elements) : std::string("over 2^63")) +
                  " elements each, more than one block may hold (2^34 = " +
                  std::to_string(kMaxBlockElements) +
                  "): each block is one task on one core, which would run for hours (or years); "
                  "rechunk the operands to smaller chunks");
    }
  }

  // Planning memory is bounded: the plan's tasks, partials, edges and the run's state cost about
  // kPlanBytesPerBlock per block of each group, plus kPlanBytesPerPartial per block and reduction
  // output. Measured (peak RSS, /usr/bin/time): `kiln run diamond --chunk 1` (one group, one
  // reduction) grows by 424 bytes a block from --size 1024 to 2048 and by 330 from 2048 to 4096
  // (6.0 GB at 4096: 2^24 blocks); trig-identity (two reductions) by 507; random-sum
  // --resident's persist (a store, no reduction) by 369; diamond --no-fuse (six groups, one
  // reduction) by 1754, 292 a group block. A plan whose estimate passes 1 / kPlanMemoryDivisor of
  // the machine's memory is refused with the figure before anything is built or compiled (2^24
  // blocks of one reduction: 7.0e9 bytes, 6.6 GiB).
  static constexpr int64_t kPlanBytesPerBlock = 330;
  static constexpr int64_t kPlanBytesPerPartial = 90;
  static constexpr int64_t kPlanMemoryDivisor = 2;  // at most half of the machine's memory

  void check_plan_memory() const {
    int64_t blocks = 0, estimate = 0;
    for (const Group& grp : f_.groups) {
      std::vector<int64_t> grid;
      for (const auto& c : grp.chunks) grid.push_back(static_cast<int64_t>(c.size()));
      int64_t n = checked::product(grid).value_or(INT64_MAX / 4);
      int64_t per = kPlanBytesPerBlock;
      if (grp.library && grp.outputs[0].value->op == Op::MatMul)  // a call per contraction split
        per *= std::max<int64_t>(
            1, static_cast<int64_t>(grp.outputs[0].value->in(0)->chunks[1].size()));
      for (const GroupOutput& o : grp.outputs) per += o.reduce ? kPlanBytesPerPartial : 0;
      blocks = checked::add(blocks, n).value_or(INT64_MAX / 4);
      estimate = checked::add(estimate, checked::mul(n, per).value_or(INT64_MAX / 4))
                     .value_or(INT64_MAX / 4);
    }
    const int64_t memory = usable_memory();
    if (estimate <= memory / kPlanMemoryDivisor) return;
    const size_t groups = f_.groups.size();
    throw Error("compute: the plan has " + count_str(blocks) + " blocks (in " +
                std::to_string(groups) + (groups == 1 ? " fused group" : " fused groups") +
                ") and would need about " + bytes_str(static_cast<uint64_t>(estimate)) +
                " to plan and schedule (" + std::to_string(kPlanBytesPerBlock) +
                " bytes or more a block), more than half of this machine's memory, " +
                bytes_str(static_cast<uint64_t>(memory)) + "; use larger chunks (fewer blocks)");
  }

  // A kernel whose every output reduces the innermost dim (all dims, or also keeping outer ones:
  // x.max(axis=1)) and that reads only memory that exists before the run (buffers: persisted
  // arrays, NumPy arrays, files), contiguous along the innermost dim, and indices, runs over
  // whole rows: its blocks' innermost chunks are merged into one and the next dim's chunks split
  // as many times, so it has as many blocks as before, each as large, and every block is one
  // stretch of memory per outer index (a kept dim's results are written by block regions, which
  // need not be the output's chunks). Chunks that cut the rows of one buffer make each block read
  // short stretches (16 KB of a 48 KB row for 6000 x 6000 float64 in 2000 x 2000 chunks), which
  // the hardware prefetchers follow poorly: x.sum() there ran at 0.61 ns an element against 0.26
  // over whole rows (bench/RESULTS.md, "Reductions"); x.max(axis=1) 28.3 ms against 19.0, one
  // thread, Xeon AMX (NumPy: 19.1). Only the results'
  // rounding (float sums and products reassociate by block) depends on it; random leaves, whose
  // values do not depend on blocks either, are left out with stores (blocks of a stored array
  // are its chunks) and device plans (blocks are placed and copied as chunked).
  void coalesce_rows(PlanGroup& g) const {
    const kir::Kernel& k = g.lowered.kernel;
    const int rank = k.rank;
    if (be_.memory() || rank < 2 || g.chunks[rank - 1].size() < 2) return;
    for (const auto& o : k.outputs) {
      if (!o.reduce || o.row || !((o.reduced_mask >> (rank - 1)) & 1u)) return;
      // Kept dims: on the CPU only. The interpreter keeps the chunks' blocks there, as device
      // plans do, so a device's owned kernels still match it bit for bit (tests/codegen).
      if (o.reduced_mask != (1u << rank) - 1 && p_.device != Device::Cpu) return;
    }
    for (size_t l = 0; l < k.leaves.size(); ++l) {
      const kir::Leaf& leaf = k.leaves[l];
      if (leaf.kind == kir::LeafKind::Iota) continue;
      if (leaf.kind != kir::LeafKind::Memory || g.lowered.leaves[l].materialized ||
          leaf.inner_stride != 1)
        return;
    }
    const int64_t merged = static_cast<int64_t>(g.chunks[rank - 1].size());
    int64_t width = 0, largest = 0, rows_largest = 0;
    for (int64_t c : g.chunks[rank - 1]) {
      width += c;
      largest = std::max(largest, c);
    }
    for (int64_t r : g.chunks[rank - 2]) rows_largest = std::max(rows_largest, r);
    // Each row chunk cut into `merged` pieces (fewer if it has fewer rows), each piece ending at
    // a multiple of `quantum` rows from the domain's first row where it can.
    auto split = [&](int64_t quantum) {
      std::vector<int64_t> rows;
      int64_t start = 0;  // the chunk's first row
      for (int64_t r : g.chunks[rank - 2]) {
        const int64_t pieces = std::min(merged, r);
        int64_t at = start;
        for (int64_t q = 1; q <= pieces; ++q) {
          int64_t end = start + (r * q + pieces / 2) / pieces;
          if (q < pieces) end = std::min(start + r, (end + quantum / 2) / quantum * quantum);
          if (end > at) rows.push_back(end - at);
          at = std::max(at, end);
        }
        start += r;
      }
      return rows;
    };
    // A block at most twice as large as the largest before (rows fewer than the merged chunks).
    auto fits = [&](const std::vector<int64_t>& rows) {
      return !rows.empty() &&
             *std::max_element(rows.begin(), rows.end()) * width <= 2 * rows_largest * largest;
    };
    std::vector<int64_t> rows = split(aligned_rows(g, merged));
    if (!fits(rows)) rows = split(1);
    if (!fits(rows)) return;
    g.chunks[rank - 2] = std::move(rows);
    g.chunks[rank - 1] = {width};
  }

  // The row count that coalesce_rows' blocks start at multiples of (from the domain's first row,
  // which is the buffer's unless it is sliced): the fewest rows that are a multiple of 4 KiB in
  // every memory leaf, else of 1 KiB, else 1, where that is at most a block's share of the rows.
  // On the Xeon AMX a 16-vector loop over a block starting off a 1 KiB boundary ran slower (NumPy's
  // 6000 x 6000 float64 in 2000 x 2000 chunks, coalesced into 9 blocks of 667 rows, one thread:
  // x.max() 22.1 ms against 19.6 in 672-row blocks, nanmax 35 against 20). Max/min folds now start
  // their main loop on such a boundary themselves (Printer::aligned_leaf); what is left here is
  // small: blocks of 667 against 672 rows, sum 16.6 / 16.3 ms, nansum 22.5 / 21.3, argmax 20.5 /
  // 20.2, max 19.0 / 18.3.
  int64_t aligned_rows(const PlanGroup& g, int64_t merged) const {
    const kir::Kernel& k = g.lowered.kernel;
    const int rank = k.rank;
    int64_t fewest = INT64_MAX;
    for (int64_t r : g.chunks[rank - 2])
      if (r > 0) fewest = std::min(fewest, r / std::min(merged, r));
    for (int64_t boundary : {int64_t{4096}, int64_t{1024}}) {
      int64_t rows = 1;
      for (size_t l = 0; l < k.leaves.size(); ++l) {
        if (k.leaves[l].kind != kir::LeafKind::Memory) continue;
        const int64_t stride = g.lowered.leaves[l].strides[rank - 2] *
                               static_cast<int64_t>(dtype_size(k.leaves[l].dtype));
        const int64_t need = boundary / std::gcd(boundary, std::abs(stride));
        rows = std::lcm(rows, need);
      }
      if (rows <= fewest) return rows;
    }
    return 1;
  }

  // Whether the kernel's blocks may run as one row where their leaves and stores are contiguous
  // across dims (the executor checks each block's maps: Run::fold_contiguous_dims). A block of
  // whole narrow rows otherwise runs a row at a time, each row its own loop (and, summed, its own
  // strip folded into the partial): x.sum() of 1e6 x 100 float64 in 100000-row chunks took 66 ms
  // on one core against NumPy's 46 (Xeon AMX), and 52 ms over the same memory as one row. Only
  // kernels that store or reduce over every dim, over memory and indices (a row-stage kernel or a
  // partial keeping a dim needs the dims; random leaves are left out as in coalesce_rows), and not
  // on a device. Stores are the same either way; only a float sum's or product's rounding changes
  // (it reassociates across rows).
  bool runs_flat(const kir::Kernel& k) const {
    if (be_.memory() || k.rank < 2) return false;
    for (const auto& o : k.outputs)
      if (o.row || (o.reduce && o.reduced_mask != (1u << k.rank) - 1)) return false;
    for (const auto& leaf : k.leaves)
      if (leaf.kind != kir::LeafKind::Memory && leaf.kind != kir::LeafKind::Iota) return false;
    return true;
  }

  // Each fused group: lowered to kernel IR, compiled by the device's backend, its block grid,
  // and the arrays its leaves read (each read once per block).
  void compile_kernels() {
    auto t0 = std::chrono::steady_clock::now();
    auto since = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    for (size_t gi = 0; gi < f_.groups.size(); ++gi) {
      const Group& grp = f_.groups[gi];
      PlanGroup g;
      g.domain = grp.domain;
      g.chunks = grp.chunks;
      if (grp.library) {
        g.library = static_cast<int>(p_.libraries.size());
        g.chunks = library_chunks(grp);
        p_.libraries.push_back(make_library(grp, static_cast<int>(gi)));
        p_.libraries.back().chained =
            grp.outputs[0].value->op == Op::MatMul && grid_blocks(g.chunks) >= cores();
      }
      if (!grp.library) {
        g.lowered = lower_group(grp, f_);
        coalesce_rows(g);
        g.flat = runs_flat(g.lowered.kernel);
      }
      g.blocks = grid_blocks(g.chunks);
      for (const auto& c : g.chunks) {
        std::vector<int64_t> s{0};
        for (size_t k = 0; k + 1 < c.size(); ++k) s.push_back(s.back() + c[k]);
        g.starts.push_back(std::move(s));
      }
      if (grp.library) {
        p_.groups.push_back(std::move(g));
        continue;
      }
      g.compile_start_s = since();
      if (dump_ || flags().debug >= 3) {
        backend::KernelDumps dumps;
        bool printed = dump_ || flags().debug >= 4;
        g.kernel = be_.compile(g.lowered.kernel, printed ? &dumps : nullptr);
        std::ostream& os = dump_ ? *dump_ : std::cerr;
        os << "kernel " << gi << ":\n" << g.lowered.kernel.str();
        if (printed) os << dumps.printed;
        if (flags().debug >= 5 && !dumps.optimized.empty())
          os << "; optimized\n" << dumps.optimized;
      } else {
        g.kernel = be_.compile(g.lowered.kernel, nullptr);
      }
      g.compile_s = since() - g.compile_start_s;
      for (const auto& lb : g.lowered.leaves) {
        int a = lb.materialized ? array_of_.at(lb.materialized) : -1;
        g.leaf_arrays.push_back(a);
        if (a >= 0) p_.arrays[a].readers += static_cast<int>(g.blocks);
      }
      p_.groups.push_back(std::move(g));
    }
    p_.compile_seconds = since();
  }

  // Where each group output goes: stores to their array; reductions get a PlanReduce (result
  // array, accumulator and result types, element count for mean, result strides).
  void make_reductions() {
    for (size_t gi = 0; gi < f_.groups.size(); ++gi) {
      const Group& grp = f_.groups[gi];
      PlanGroup& g = p_.groups[gi];
      for (size_t o = 0; o < grp.outputs.size(); ++o) {
        const GroupOutput& go = grp.outputs[o];
        int a = array_of_.at(go.target.get());
        if (!go.reduce) {
          g.output_arrays.push_back(a);
          continue;
        }
        PlanReduce r;
        r.group = static_cast<int>(gi);
        r.output = static_cast<int>(o);
        r.array = a;
        r.fn = go.target->reduce_fn();
        r.acc = g.lowered.kernel.outputs[o].type;
        r.out = go.target->dtype;
        // Result strides per domain dim (0 on the reduced dims), and the elements per result.
        r.out_strides = go.target->result_strides();
        uint32_t mask = g.lowered.kernel.outputs[o].reduced_mask;
        Shape folded;  // their product passes 2^62 only in an empty domain (no result)
        for (size_t d = 0; d < grp.domain.size(); ++d)
          if ((mask >> d) & 1u) folded.push_back(grp.domain[d]);
        r.count = checked::product(folded).value_or(INT64_MAX);
        g.output_arrays.push_back(static_cast<int>(p_.reduces.size()));
        p_.reduces.push_back(std::move(r));
      }
    }
  }

  int add_task(PlanTask t) {
    p_.tasks.push_back(std::move(t));
    return static_cast<int>(p_.tasks.size()) - 1;
  }
  void edge(int from, int to) {
    p_.tasks[from].next.push_back(to);
    ++p_.tasks[to].waits;
  }
  bool writes(int gi, int a) const { return p_.writes(gi, a); }

  // Per group: Start -> a Kernel task per block -> combine trees -> End. Start waits for the
  // End of each group it reads whole; a block that reads blocked arrays waits for the blocks it
  // reads instead.
  void make_tasks() {
    end_of_.resize(p_.groups.size());
    kernel_task_of_.resize(p_.groups.size());
    p_.partial_of.resize(p_.groups.size());
    for (size_t gi = 0; gi < p_.groups.size(); ++gi) {
      PlanGroup& g = p_.groups[gi];
      PlanTask st{TaskKind::Start};
      st.group = static_cast<int>(gi);
      int start = add_task(st);
      start_of_.push_back(start);
      if (g.library >= 0) {
        library_tasks(static_cast<int>(gi), start);
        continue;
      }
      for (int d : f_.groups[gi].deps) {
        int blocked = 0, whole = 0;
        for (int a : g.leaf_arrays)
          if (a >= 0 && writes(d, a)) ++(p_.arrays[a].blocked ? blocked : whole);
        if (whole > 0 || blocked == 0) edge(end_of_[d], start);
      }
      std::vector<int> reduce_ids;
      for (size_t o = 0; o < g.output_arrays.size(); ++o)
        if (g.lowered.kernel.outputs[o].reduce) reduce_ids.push_back(g.output_arrays[o]);
      p_.partial_of[gi].resize(g.blocks);
      std::vector<int>& kernel_tasks = kernel_task_of_[gi];
      for (int64_t b = 0; b < g.blocks; ++b) {
        PlanTask kt{TaskKind::Kernel};
        kt.group = static_cast<int>(gi);
        kt.block = b;
        int t = add_task(kt);
        edge(start, t);
        kernel_tasks.push_back(t);
        if (!g.block_reads.empty())
          for (size_t l = 0; l < g.leaf_arrays.size(); ++l) {
            int a = g.leaf_arrays[l];
            if (a >= 0 && p_.arrays[a].blocked && g.block_read(b, l)[0] >= 0)
              edge(kernel_task_of_[p_.arrays[a].producer][g.block_read(b, l)[0]], t);
          }
        for (int r : reduce_ids) {
          p_.partial_of[gi][b].push_back(static_cast<int>(p_.partials.size()));
          p_.partials.push_back({r, b});
        }
      }
      p_.work_tasks += g.blocks;
      PlanTask et{TaskKind::End};
      et.group = static_cast<int>(gi);
      int end = add_task(et);
      for (int t : kernel_tasks) edge(t, end);
      for (size_t k = 0; k < reduce_ids.size(); ++k)
        combine_trees(static_cast<int>(gi), static_cast<int>(k), reduce_ids[k], end);
      end_of_[gi] = end;
    }
  }

  // A library call's group: Start (after the groups it reads) -> per result block, a Library task
  // per contraction split (-> a LibrarySum when there are several) -> End.
  void library_tasks(int gi, int start) {
    PlanGroup& g = p_.groups[gi];
    PlanLibrary& lib = p_.libraries[g.library];
    auto streamed = [&](const LibraryOperand& op) {
      return op.array >= 0 && p_.arrays[op.array].blocked;
    };
    for (int d : f_.groups[gi].deps) {  // whole operands: after their producer's End
      bool whole = false;
      for (const LibraryOperand* op : {&lib.a, &lib.b})
        whole = whole || (op->array >= 0 && !streamed(*op) && writes(d, op->array));
      if (whole || !(streamed(lib.a) || streamed(lib.b))) edge(end_of_[d], start);
    }
    int splits = static_cast<int>(lib.k_starts.size()) - 1;
    for (const LibraryOperand* op : {&lib.a, &lib.b})
      if (op->array >= 0 && !streamed(*op))
        p_.arrays[op->array].readers += static_cast<int>(g.blocks) * splits;
    PlanTask et{TaskKind::End};
    et.group = gi;
    std::vector<int> last;
    for (int64_t b = 0; b < g.blocks; ++b) {
      PlanTask sum{TaskKind::LibrarySum};
      sum.group = gi;
      sum.block = b;
      std::vector<int> calls;
      for (int q = 0; q < splits; ++q) {
        PlanTask lt{TaskKind::Library};
        lt.group = gi;
        lt.block = b;
        lt.split = q;
        if (q > 0 && !lib.chained) {
          lt.partial_out = static_cast<int>(p_.library_partials++);
          sum.partials_in.push_back(lt.partial_out);
        }
        int t = add_task(lt);
        edge(lib.chained && q > 0 ? calls.back() : start, t);
        for (const auto* reads : {&lib.a_reads, &lib.b_reads}) {  // streamed operands' blocks
          if (reads->empty()) continue;
          const LibraryRead& r = (*reads)[static_cast<size_t>(b * splits + q)];
          int producer = p_.arrays[(reads == &lib.a_reads ? lib.a : lib.b).array].producer;
          if (r.block >= 0) edge(kernel_task_of_[producer][r.block], t);
        }
        calls.push_back(t);
      }
      p_.work_tasks += splits;
      if (lib.chained) {
        last.push_back(calls.back());
      } else if (splits > 1) {
        int s = add_task(sum);
        for (int t : calls) edge(t, s);
        last.push_back(s);
        ++p_.work_tasks;
      } else {
        last.insert(last.end(), calls.begin(), calls.end());
      }
    }
    int end = add_task(et);
    for (int t : last) edge(t, end);
    end_of_[gi] = end;
  }

  // The result's block grid. LAPACK calls: one block. Products: the operands' row and column
  // chunks, rows split further into panels when a product has fewer calls than the machine has
  // cores and enough work to share (library calls run single-threaded BLAS; codegen/library.hpp).
  // Splitting rows changes no value. A Gram product keeps its blocks: its contraction is split
  // instead (contraction_splits).
  Chunks library_chunks(const Group& grp) const {
    const Node& mm = *grp.outputs[0].value;
    if (mm.op != Op::MatMul) return single_chunks(mm.shape);  // LAPACK and cuRAND: one call
    Chunks c = mm.chunks;
    int64_t k = mm.in(0)->shape[1];
    int64_t calls = grid_blocks(c) * static_cast<int64_t>(contraction_splits(mm).size() - 1);
    const int64_t cores = this->cores();
    if (calls >= cores || grid_blocks(c) == 0 || gram_product(mm)) return c;
    std::vector<int64_t> rows;
    for (int64_t r : c[0]) {
      double flops =
          2.0 * static_cast<double>(r) * static_cast<double>(mm.shape[1]) * static_cast<double>(k);
      int64_t panels = std::min<int64_t>(
          {(cores + calls - 1) / calls, r, static_cast<int64_t>(flops / kMinPanelFlops)});
      panels = std::max<int64_t>(panels, 1);
      for (int64_t q = 0; q < panels; ++q) rows.push_back(r / panels + (q < r % panels ? 1 : 0));
    }
    c[0] = rows;
    return c;
  }

  static constexpr double kMinPanelFlops = 1 << 24;

  static int64_t cores() {
    return dist::plan_cores();  // (the same on every rank of a distributed program)
  }

  // Whether a product is a Gram matrix, A^T A of one operand (the first operand's base is the
  // second's, under the transposed map). Its result block is computed as an upper triangle and
  // mirrored (codegen/library.cpp: Kiln's Gram kernel or syrk), exactly symmetric as NumPy's; row
  // panels would be separate GEMMs, whose mirror-image entries differ in rounding.
  bool gram_product(const Node& mm) const {
    if (mm.op != Op::MatMul || mm.shape[0] != mm.shape[1]) return false;
    auto materialized = [&](const Node* x) { return f_.producer.count(x) > 0; };
    auto a = resolve_view_base(*mm.in(0), materialized);
    auto b = resolve_view_base(*mm.in(1), materialized);
    if (!a || !b || a->materialized != b->materialized) return false;
    // The same memory: one materialized array, or Buffer leaves of one slot (push_slices may
    // have made the transpose a leaf of its own).
    bool same = a->materialized ? a->base == b->base
                                : a->base->op == Op::Buffer && b->base->op == Op::Buffer &&
                                      a->base->attrs.slot == b->base->attrs.slot;
    return same && a->map.offset == b->map.offset && a->map.strides.size() == 2 &&
           b->map.strides.size() == 2 && a->map.strides[0] == b->map.strides[1] &&
           a->map.strides[1] == b->map.strides[0];
  }

  // Contraction splits: the union of A's column and B's row chunk boundaries (both operands are
  // read in place, so chunks that do not align need no rechunk: the finer grid serves both). A
  // Gram product with fewer calls than cores has its splits divided further, as other products'
  // rows are (library_chunks): its partials run in parallel and are summed in split order.
  std::vector<int64_t> contraction_splits(const Node& mm) const {
    std::vector<int64_t> starts{0};
    for (const auto* c : {&mm.in(0)->chunks[1], &mm.in(1)->chunks[0]}) {
      int64_t at = 0;
      for (int64_t e : *c) starts.push_back(at += e);
    }
    std::sort(starts.begin(), starts.end());
    starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
    if (starts.size() == 1) starts.push_back(0);  // k == 0: one call that zero-fills
    const int64_t calls = grid_blocks(mm.chunks) * static_cast<int64_t>(starts.size() - 1);
    if (calls == 0 || calls >= cores() || !gram_product(mm)) return starts;
    std::vector<int64_t> finer{0};
    for (size_t q = 0; q + 1 < starts.size(); ++q) {
      const int64_t len = starts[q + 1] - starts[q];
      const double flops = 2.0 * static_cast<double>(mm.shape[0]) *
                           static_cast<double>(mm.shape[1]) * static_cast<double>(len);
      int64_t parts = std::min<int64_t>(
          {(cores() + calls - 1) / calls, len, static_cast<int64_t>(flops / kMinPanelFlops)});
      parts = std::max<int64_t>(parts, 1);
      for (int64_t p = 0; p < parts; ++p)
        finer.push_back(finer.back() + len / parts + (p < len % parts ? 1 : 0));
    }
    return finer;
  }

  // The operand `in` of a library call, read in place (fuse made sure its layout allows it; a
  // LAPACK call copies it, so only its map matters there).
  LibraryOperand library_operand(const NodeRef& in, bool gemm) const {
    auto vb = resolve_view_base(*in, [&](const Node* x) { return f_.producer.count(x) > 0; });
    std::optional<MatrixLayout> layout;
    if (vb && gemm) layout = matrix_layout(in->shape[0], in->shape[1], vb->map);
    if (vb && !gemm && vb->map.strides.size() == 2)
      layout = MatrixLayout{vb->map.offset, vb->map.strides[0], vb->map.strides[1], false, 0};
    if (!layout) throw InternalError("plan: a library operand that cannot be read in place");
    LibraryOperand op;
    op.layout = *layout;
    if (vb->materialized) {
      op.array = array_of_.at(vb->base);
      op.from = "array " + node_label(*vb->base);
    } else {
      op.slot = vb->base->attrs.slot;
      op.from = "buffer " + node_label(*vb->base);
    }
    return op;
  }

  PlanLibrary make_library(const Group& grp, int gi) const {
    const Node& mm = *grp.outputs[0].value;
    PlanLibrary l;
    l.group = gi;
    l.op = mm.op;
    l.dtype = mm.dtype;
    l.call = &mm;
    l.out = array_of_.at(grp.outputs[0].target.get());
    l.out_offset = grp.outputs[0].offset;
    if (mm.op == Op::Random) {  // cuRAND fills the whole array (its seed: a run parameter)
      l.m = mm.size();
      l.random = mm.random_kind();
      l.stream = mm.attrs.ints[1];
      l.seed_slot = mm.attrs.slot;
      l.k_starts = {0, 0};
      l.routine = std::string("cuRAND Philox4_32_10 ") + random_name(l.random) + " doubles";
      return l;
    }
    if (mm.op == Op::Linalg) {
      l.fn = LinalgFn(mm.attrs.ints[0]);
      l.m = mm.in(0)->shape[0];
      l.n = mm.in(0)->shape[1];
      l.a = library_operand(mm.in(0), false);
      if (mm.inputs.size() > 1) {
        l.k = mm.in(1)->shape[1];
        l.b_rows = mm.in(1)->shape[0];
        l.b = library_operand(mm.in(1), false);
      }
      l.k_starts = {0, 0};
      l.routine = std::string("LAPACK ") + linalg_routines(l.fn);
      return l;
    }
    l.m = mm.shape[0];
    l.n = mm.shape[1];
    l.k = mm.in(0)->shape[1];
    l.a = library_operand(mm.in(0), true);
    l.b = library_operand(mm.in(1), true);
    l.k_starts = contraction_splits(mm);
    int64_t rows = mm.chunks[0].empty() ? 0 : mm.chunks[0][0];
    int64_t cols = mm.chunks[1].empty() ? 0 : mm.chunks[1][0];
    l.routine = library::routine_name(l.dtype, rows, cols);
    return l;
  }

  // One fixed tree per result block of reduction `red` (the k-th of group gi): the blocks'
  // partials in block order, folded kFanIn at a time, level by level, the last fold writing the
  // result (so the sums are the same for every thread count).
  void combine_trees(int gi, int k, int red, int end) {
    const PlanGroup& g = p_.groups[gi];
    int r = static_cast<int>(g.domain.size());
    uint32_t mask = g.lowered.kernel.outputs[p_.reduces[red].output].reduced_mask;
    std::map<std::vector<int64_t>, std::vector<std::pair<int, int>>> by_key;  // (partial, task)
    std::vector<int64_t> coords(r);
    for (int64_t b = 0; b < g.blocks; ++b) {
      int64_t rem = b;
      for (int d = r - 1; d >= 0; --d) {
        int64_t n = static_cast<int64_t>(g.chunks[d].size());
        coords[d] = ((mask >> d) & 1u) ? 0 : rem % n;
        rem /= n;
      }
      by_key[coords].push_back({p_.partial_of[gi][b][k], kernel_task_of_[gi][b]});
    }
    for (auto& [key, items] : by_key) {
      int64_t rep_block = p_.partials[items.front().first].second;
      while (items.size() > kFanIn) {
        std::vector<std::pair<int, int>> next_level;
        for (size_t s = 0; s < items.size(); s += kFanIn) {
          PlanTask ct{TaskKind::Combine};
          ct.group = gi;
          ct.reduce = red;
          int pid = static_cast<int>(p_.partials.size());
          p_.partials.push_back({red, rep_block});
          ct.partial_out = pid;
          for (size_t q = s; q < std::min(items.size(), s + kFanIn); ++q)
            ct.partials_in.push_back(items[q].first);
          int t = add_task(ct);
          for (size_t q = s; q < std::min(items.size(), s + kFanIn); ++q) edge(items[q].second, t);
          edge(t, end);
          next_level.push_back({pid, t});
          ++p_.work_tasks;
        }
        items = std::move(next_level);
      }
      PlanTask ct{TaskKind::Combine};
      ct.group = gi;
      ct.reduce = red;
      ct.final_block = rep_block;
      for (auto& it : items) ct.partials_in.push_back(it.first);
      int t = add_task(ct);
      for (auto& it : items) edge(it.second, t);
      edge(t, end);
      ++p_.work_tasks;
    }
  }

  // PlanLibrary::exclusive for LAPACK calls (one task each) that every other group precedes or
  // follows; their Start then also waits for every ancestor's End. Quadratic in the groups, so
  // only for plans of at most kMaxGroups.
  void mark_exclusive_calls() {
    constexpr size_t kMaxGroups = 512;  // as fuse's merge_siblings
    const size_t n = p_.groups.size();
    bool lapack = false;
    for (const PlanLibrary& l : p_.libraries) lapack = lapack || l.op == Op::Linalg;
    if (n > kMaxGroups || !lapack) return;
    std::vector<std::vector<bool>> anc(n, std::vector<bool>(n, false));  // anc[g][h]: h before g
    for (size_t g = 0; g < n; ++g)  // groups are in topological order
      for (int d : f_.groups[g].deps) {
        anc[g][d] = true;
        for (size_t h = 0; h < n; ++h)
          if (anc[d][h]) anc[g][h] = true;
      }
    for (PlanLibrary& l : p_.libraries) {
      if (l.op != Op::Linalg) continue;
      auto g = static_cast<size_t>(l.group);
      bool alone = true;
      for (size_t h = 0; h < n && alone; ++h) alone = h == g || anc[g][h] || anc[h][g];
      if (!alone) continue;
      l.exclusive = true;
      for (size_t h = 0; h < n; ++h)
        if (anc[g][h]) edge(end_of_[h], start_of_[g]);
    }
  }

  // Run order among ready tasks (PlanTask::order); tasks were added after their predecessors.
  void order_tasks() {
    const auto groups = static_cast<int64_t>(p_.groups.size());
    std::vector<int64_t> after(p_.tasks.size(), -1);  // the largest order of a predecessor
    for (size_t t = 0; t < p_.tasks.size(); ++t) {
      PlanTask& task = p_.tasks[t];
      switch (task.kind) {
        case TaskKind::Start:
          task.order = -1;
          break;
        case TaskKind::Kernel:
        case TaskKind::Library:
          task.order = task.block * groups + task.group;
          break;
        case TaskKind::LibrarySum:
        case TaskKind::Combine:
        case TaskKind::End:
          task.order = after[t];
          break;
      }
      for (int s : task.next) after[s] = std::max(after[s], task.order);
    }
  }

  Plan& p_;
  const FusedGraph& f_;
  backend::Backend& be_;
  std::ostream* dump_;
  std::unordered_map<const Node*, int> array_of_;
  std::vector<int> start_of_, end_of_;
  std::vector<std::vector<int>> kernel_task_of_;
};

// Device plans: which arrays must live on the host, and why (the executor's "device plans").
// GEMM calls run on the devices when the backend has DeviceBlas, LAPACK calls when it has
// DeviceLapack (Plan::device_blas, device_lapack); otherwise on the host.
void place_on_devices(Plan& p) {
  for (const PlanReduce& r : p.reduces)
    p.arrays[r.array].host_because = "a reduction result: partials are combined on the host";
  for (const PlanLibrary& l : p.libraries) {
    if (l.op == Op::MatMul ? p.device_blas : l.op == Op::Linalg ? l.on_device : p.device_random) {
      p.arrays[l.out].device_stored = true;
      continue;
    }
    p.arrays[l.out].host_because = "the result of a library call, which runs on the host";
    for (const auto& [op, reads] : {std::pair{&l.a, &l.a_reads}, std::pair{&l.b, &l.b_reads}})
      if (op->array >= 0 && reads->empty())
        p.arrays[op->array].host_because = "read by a library call, which runs on the host";
  }
  for (const PlanGroup& g : p.groups) {
    if (g.library >= 0) continue;
    for (size_t o = 0; o < g.lowered.kernel.outputs.size(); ++o)
      if (!g.lowered.kernel.outputs[o].reduce) p.arrays[g.output_arrays[o]].device_stored = true;
  }
}

}  // namespace

std::unique_ptr<Plan> build_plan(FusedGraph fused, Device device, std::ostream* kernel_dump) {
  auto plan = std::make_unique<Plan>();
  plan->device = resolve_device(device);
  plan->fused = std::move(fused);
  backend::Backend& be = backend::backend_for(plan->device);
  PlanBuilder(*plan, be, kernel_dump).run();
  const bool device_library = be.memory() && !flags().no_device_library;
  plan->device_blas = device_library && be.blas();
  plan->device_lapack = device_library && be.lapack();
  plan->device_random = device_library && be.random();
  for (PlanLibrary& l : plan->libraries)
    l.on_device = l.op == Op::Linalg && plan->device_lapack && be.lapack()->runs(l.fn);
  if (device_library)  // a library the device lacks (cuBLAS, cuSOLVER): said, never silent
    for (const PlanLibrary& l : plan->libraries) {
      const bool lapack = l.op == Op::Linalg;
      if ((l.op == Op::MatMul && !plan->device_blas) || (lapack && !plan->device_lapack))
        backend::note_host_fallback(plan->device, lapack ? "LAPACK" : "GEMM",
                                    be.library_missing(lapack));
    }
  if (be.memory()) place_on_devices(*plan);
  return plan;
}

}  // namespace kiln
