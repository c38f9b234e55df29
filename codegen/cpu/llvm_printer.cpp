// Prints kernel IR as an LLVM IR function (see kernel_ir.hpp for the ABI).
#include "codegen/cpu/llvm_printer.hpp"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>

#include <array>
#include <limits>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>

#include "support/error.hpp"
#include "support/philox.hpp"

namespace kiln::cpu {

namespace {

using llvm::IRBuilder;
using llvm::Value;

constexpr int64_t kTile = 256;      // elements per tile of a loop over random leaves
constexpr int64_t kScanGroup = 16;  // values per step of the scan for rejected normals
// The vectorization of a tile's generating loops (tiled_inner_loop): 8 lanes, 2 interleaved, the
// fastest of widths 4-16 and interleave counts 1-4 measured on AVX2 with a block per element
// (random-sum, bench/RESULTS.md); LLVM's own choice (4 x 1) left Philox latency-bound.
std::vector<std::pair<const char*, int>> gen_hints() {
  return {{"llvm.loop.vectorize.width", 8}, {"llvm.loop.interleave.count", 2}};
}
bool unit_stride(llvm::Value* stride) {
  auto* c = llvm::dyn_cast<llvm::ConstantInt>(stride);
  return c && c->isOne();
}
// Elements per strip of an innermost loop that sums floats (see strip_loop).
constexpr int64_t kStrip = 1024;
// How far ahead short_arg_rows prefetches. On the Xeon AMX (one thread, 1e8 float64 from memory,
// ns an element, rows of 25 / 100 / 200 / 400 / 1000): no prefetch 1.67 / 1.03 / 1.05 / 0.94 /
// 0.91 (strips: 6.06 / 1.27 / 1.20 / 1.02 / 0.78; NumPy 2.79 / 0.96 / 0.85 / 0.82 / 0.82); 4 KiB
// ahead 0.86 / 0.64 / 0.56 / 0.57 / 0.49; with two sets of lanes in turn, 1 KiB ahead 1.21 / 0.73
// / 0.70 / 0.61 / 0.63, 8 KiB 1.01 / 0.66 / 0.59 / 0.57 / 0.54. Two or four sets (the compare
// and select chain is serial) did no better than one, with or without prefetching.
constexpr int64_t kArgPrefetchBytes = 4096;
// The boundary a max/min fold's main loop starts on (body_loop, aligned_leaf).
constexpr int64_t kFoldAlignBytes = 1024;
// Rows per tile of a kernel with a row stage (row_tiled_loop): at most kRowTile, and at most
// kRowTileElements elements (16 KiB of float64 per leaf, so a tile stays in L1 between reads).
constexpr int64_t kRowTile = 16;
constexpr int64_t kRowTileElements = 2048;
// Software prefetch in row_tiled_loop: the rows this many bytes ahead (rounded up to whole rows),
// of rows up to kPrefetchRowBytes long (longer rows stream through the hardware prefetcher).
constexpr int64_t kPrefetchAheadBytes = 3072;
constexpr int64_t kPrefetchRowBytes = 4096;
// Rows of a tile's rest whose bodies share one innermost loop (row_tiled_loop, jam_rest).
constexpr int64_t kRowJam = 4;

class Printer {
 public:
  Printer(const kir::Kernel& k, llvm::Module& m, const std::string& name, const MathMode& mode,
          const Tuning& tuning)
      : k_(k), m_(m), ctx_(m.getContext()), b_(ctx_), name_(name), mode_(mode), tuning_(tuning) {}

  llvm::Function* run() {
    auto* i64 = b_.getInt64Ty();
    auto* ptr = b_.getPtrTy();
    auto* fty = llvm::FunctionType::get(b_.getVoidTy(), {ptr, ptr, ptr}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, name_, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    for (int a = 0; a < 3; ++a) {
      fn_->addParamAttr(a, llvm::Attribute::NoAlias);
      fn_->addParamAttr(a, llvm::Attribute::ReadOnly);
    }
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    I_ = fn_->getArg(0);
    F_ = fn_->getArg(1);
    P_ = fn_->getArg(2);
    int r = k_.rank;
    for (int d = 0; d < r; ++d) ext_.push_back(load_i(d));
    // Leaf and output maps, with compile-time innermost strides where known.
    for (size_t l = 0; l < k_.leaves.size(); ++l)
      maps_.push_back(load_map(k_.leaf_base(int(l)), k_.leaves[l].inner_stride));
    for (size_t o = 0; o < k_.outputs.size(); ++o)
      out_maps_.push_back(load_map(k_.output_base(int(o)), inner_reduced(o) ? 0 : 1,
                                   k_.outputs[o].reduce ? k_.outputs[o].reduced_mask : 0u));
    for (size_t l = 0; l < k_.leaves.size(); ++l)
      ptrs_.push_back(k_.leaves[l].kind == kir::LeafKind::Memory
                          ? b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, P_, k_.leaves[l].pointer))
                          : nullptr);
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      auto slot = [&](int k) { return b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, P_, k)); };
      out_ptrs_.push_back(slot(k_.output_pointer(int(o))));
      idx_ptrs_.push_back(is_arg(o) ? slot(k_.index_pointer(int(o))) : nullptr);
    }
    for (size_t p = 0; p < k_.params.size(); ++p) params_.push_back(load_param(int(p)));
    (void)i64;
    idx_.assign(r, nullptr);
    vals_.assign(k_.values.size(), nullptr);
    plan_stages();
    row_vals_.assign(k_.outputs.size(), nullptr);
    if (tile_rows_) {
      // Stack buffers of row_tiled_loop: per row output, and per hoisted value the rest reads.
      auto buffer = [&](DType t, const std::string& name) {
        return b_.CreateAlloca(llvm::ArrayType::get(mem_type(t), kRowTile), nullptr, name);
      };
      for (size_t o = 0; o < k_.outputs.size(); ++o)
        if (k_.outputs[o].row) row_bufs_[o] = buffer(k_.outputs[o].type, "row" + std::to_string(o));
      for (int v : row_frontier())
        hoist_bufs_.emplace_back(v, buffer(k_.values[v].type, "hoisted" + std::to_string(v)));
    }
    // Random leaves are generated a tile at a time (see tiled_inner_loop): one stack buffer of
    // kTile values per random leaf, plus 2 for a tile whose pairs of elements start and end at
    // odd flat indices and kScanGroup of padding for the scan for rejected normals.
    if (r > 0)
      for (size_t l = 0; l < k_.leaves.size(); ++l)
        if (k_.leaves[l].kind == kir::LeafKind::Random)
          tile_bufs_[l] = b_.CreateAlloca(
              llvm::ArrayType::get(random_type(k_.leaves[l]), kTile + 2 + kScanGroup), nullptr,
              "tile" + std::to_string(l));
    if (r > 0 && tile_bufs_.empty())
      for (size_t o = 0; o < k_.outputs.size(); ++o)
        if (is_arg(o) && inner_reduced(o)) {
          auto* vt = llvm::ArrayType::get(mem_type(k_.outputs[o].type), kStrip);
          auto* it = llvm::ArrayType::get(b_.getInt64Ty(), kStrip);
          scan_bufs_[o] = {b_.CreateAlloca(vt, nullptr, "scanv" + std::to_string(o)),
                           b_.CreateAlloca(it, nullptr, "scani" + std::to_string(o))};
        }
    if (r == 0) {
      body();
      finish_inner_reductions();
    } else {
      loop(0);
    }
    b_.CreateRetVoid();
    return fn_;
  }

 private:
  struct Map {
    Value* base;
    std::vector<Value*> strides;
  };

  // need_row_, need_main_ and hoist_ (see their declaration). A value is the same for every
  // element of a row when it reads nothing that moves along it: parameters, constants, row
  // results, memory and iota leaves of inner stride 0. Integer powers are not hoisted (their
  // helper may record an error, which an empty row must not raise).
  void plan_stages() {
    need_row_ = k_.needed_by_stage(true);
    need_main_ = k_.needed_by_stage(false);
    hoist_.assign(k_.values.size(), false);
    // Kernels with random leaves keep their tiled loop as it is (and have no row stage).
    for (const auto& l : k_.leaves)
      if (l.kind == kir::LeafKind::Random) return;
    if (k_.rank == 0) return;
    std::vector<bool> same(k_.values.size(), false);
    bool hoists_math = false;
    for (size_t v = 0; v < k_.values.size(); ++v) {
      const kir::Value& x = k_.values[v];
      switch (x.op) {
        case kir::VOp::Param:
        case kir::VOp::Const:
        case kir::VOp::Row:
          same[v] = true;
          break;
        case kir::VOp::Leaf:
          same[v] = k_.leaves[x.index].kind != kir::LeafKind::Random &&
                    k_.leaves[x.index].inner_stride == 0;
          break;
        default:
          same[v] =
              !(x.op == kir::VOp::Binary && BinaryFn(x.fn) == BinaryFn::Pow && !is_float(x.type));
          for (int u : {x.a, x.b, x.c})
            if (u >= 0) same[v] = same[v] && same[u];
      }
      hoist_[v] = same[v] && need_main_[v];
      if (hoist_[v] && is_math(x)) hoists_math = true;
    }
    bool folds_rows = false;
    if (k_.rank >= 2)
      for (size_t o = 0; o < k_.outputs.size(); ++o) {
        const kir::Output& out = k_.outputs[o];
        folds_rows = folds_rows || (out.reduce && !out.row && !inner_reduced(o) &&
                                    ((out.reduced_mask >> (k_.rank - 2)) & 1u));
      }
    jam_only_ = folds_rows && !k_.has_row_stage() && !hoists_math;
    tile_rows_ = k_.rank >= 2 && (k_.has_row_stage() || hoists_math || jam_only_);
  }

  // A call into the vector math library (see math()).
  static bool is_math(const kir::Value& v) {
    if (v.op == kir::VOp::Unary) return is_transcendental(UnaryFn(v.fn));
    return v.op == kir::VOp::Binary && BinaryFn(v.fn) == BinaryFn::Pow && is_float(v.type);
  }

  // The hoisted values the rest of a row reads: operands of its other values and its outputs'.
  std::vector<int> row_frontier() const {
    std::vector<bool> used(k_.values.size(), false);
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (need_main_[v] && !hoist_[v])
        for (int u : {k_.values[v].a, k_.values[v].b, k_.values[v].c})
          if (u >= 0) used[u] = true;
    for (const auto& o : k_.outputs)
      if (!o.row) {
        used[o.value] = true;
        if (o.index_value >= 0) used[o.index_value] = true;
      }
    std::vector<int> out;
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (used[v] && hoist_[v]) out.push_back(static_cast<int>(v));
    return out;
  }

  Value* load_i(int k) {
    return b_.CreateLoad(b_.getInt64Ty(), b_.CreateConstGEP1_64(b_.getInt64Ty(), I_, k));
  }

  // A map's base and strides from I[at...]; the innermost stride is `inner` where that is >= 0,
  // and the dims in `zero` have stride 0 (a partial's reduced dims: the runtime's layout, which
  // lets LLVM see that the rows of a column sum fold into one place).
  Map load_map(int at, int inner, uint32_t zero = 0) {
    Map m;
    m.base = load_i(at);
    for (int d = 0; d < k_.rank; ++d) {
      if ((zero >> d) & 1u)
        m.strides.push_back(b_.getInt64(0));
      else if (d == k_.rank - 1 && inner >= 0)
        m.strides.push_back(b_.getInt64(inner));
      else
        m.strides.push_back(load_i(at + 1 + d));
    }
    return m;
  }

  llvm::Type* reg_type(DType t) {
    switch (t) {
      case DType::Bool:
        return b_.getInt1Ty();
      case DType::Int32:
        return b_.getInt32Ty();
      case DType::Int64:
        return b_.getInt64Ty();
      case DType::Float32:
        return b_.getFloatTy();
      case DType::Float64:
        return b_.getDoubleTy();
    }
    return nullptr;
  }
  llvm::Type* mem_type(DType t) { return t == DType::Bool ? b_.getInt8Ty() : reg_type(t); }

  Value* load_param(int p) {
    DType t = k_.params[p];
    if (is_float(t)) {
      Value* v = b_.CreateLoad(b_.getDoubleTy(), b_.CreateConstGEP1_64(b_.getDoubleTy(), F_, p));
      return t == DType::Float32 ? b_.CreateFPTrunc(v, b_.getFloatTy()) : v;
    }
    Value* v = load_i(k_.param_base() + p);
    if (t == DType::Bool) return b_.CreateICmpNE(v, b_.getInt64(0));
    if (t == DType::Int32) return b_.CreateTrunc(v, b_.getInt32Ty());
    return v;
  }

  // Emits the loop over dim d; the innermost loop carries scalar accumulators for outputs that
  // reduce along the innermost dim.
  void loop(int d) {
    if (d == k_.rank - 2 && tile_rows_) return row_tiled_loop(d);
    if (d < k_.rank - 1) {
      simple_loop("d" + std::to_string(d), ext_[d], {}, [&](Value* i) {
        idx_[d] = i;
        // Rows of up to kPrefetchRowBytes, one after another, are prefetched ahead here too (not
        // where random leaves or short_arg_rows run their own loops): each row's horizontal fold
        // and loop exit stop the loads, and the hardware prefetcher alone fell behind. One
        // thread, 1e6 x 100 float64 in chunks of 1e5 rows (Xeon AMX): max(axis=1) 95 -> 59 ms
        // (NumPy 114), sum(axis=1) 57 -> 53 (NumPy 68), X @ b 68 -> 58; rows of 25 max(axis=1)
        // 442 -> 280 (NumPy 190), but sum(axis=1) 59 -> 64 (NumPy 94).
        if (d == k_.rank - 2 && tile_bufs_.empty() && short_arg_output() < 0) prefetch_ahead(d);
        loop(d + 1);
      });
      return;
    }
    if (!tile_bufs_.empty()) {
      if (k_.has_row_stage())
        throw InternalError("llvm printer: a kernel with random leaves has a row stage");
      return tiled_inner_loop(d);
    }
    if (k_.has_row_stage()) {
      row_stage_ = true;
      inner_loop(d);
      row_stage_ = false;
      for (size_t o = 0; o < k_.outputs.size(); ++o)
        if (k_.outputs[o].row) row_vals_[o] = row_result(o);
    }
    idx_[d] = b_.getInt64(0);
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (hoist_[v]) vals_[v] = emit(k_.values[v]);
    inner_loop(d);
  }

  // The rows of a kernel with a row stage (rank >= 2), in tiles of up to kRowTile rows: each
  // row's row stage (its results into row_bufs_), then the values hoisted out of the rest's
  // innermost loop for all the tile's rows in one loop, which vectorizes across rows (one row at
  // a time, a vector-math call per row made 30% of a logistic gradient's time: libmvec's exp
  // costs a gather per call, whatever the lanes), then the rest of each row. A tile's rows are
  // read twice; kRowTileElements bounds a tile, so the second read comes from cache.
  void row_tiled_loop(int d) {
    const int in = d + 1;
    Value* rows_per_tile =
        jam_only_ ? b_.getInt64(kRowJam)
                  : b_.CreateBinaryIntrinsic(
                        llvm::Intrinsic::smax, b_.getInt64(1),
                        b_.CreateBinaryIntrinsic(
                            llvm::Intrinsic::smin, b_.getInt64(kRowTile),
                            b_.CreateSDiv(b_.getInt64(kRowTileElements),
                                          b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax,
                                                                   b_.getInt64(1), ext_[in]))));
    Value* tiles = b_.CreateUDiv(b_.CreateAdd(ext_[d], b_.CreateSub(rows_per_tile, b_.getInt64(1))),
                                 rows_per_tile);
    simple_loop("rowtile", tiles, {}, [&](Value* t) {
      Value* i0 = b_.CreateMul(t, rows_per_tile);
      Value* m =
          b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, rows_per_tile, b_.CreateSub(ext_[d], i0));
      if (k_.has_row_stage())
        simple_loop("rowstage", m, {}, [&](Value* i) {
          idx_[d] = b_.CreateAdd(i0, i);
          prefetch_ahead(d);
          row_stage_ = true;
          inner_loop(in);
          row_stage_ = false;
          for (size_t o = 0; o < k_.outputs.size(); ++o)
            if (k_.outputs[o].row) {
              DType t = k_.outputs[o].type;
              b_.CreateStore(to_mem(row_result(o), t), b_.CreateGEP(mem_type(t), row_bufs_[o], i));
            }
        });
      simple_loop("rowvals", m, {},
                  [&](Value* i) {
                    idx_[d] = b_.CreateAdd(i0, i);
                    idx_[in] = b_.getInt64(0);
                    for (size_t o = 0; o < k_.outputs.size(); ++o)
                      if (k_.outputs[o].row) {
                        DType t = k_.outputs[o].type;
                        row_vals_[o] = from_mem(
                            b_.CreateLoad(mem_type(t), b_.CreateGEP(mem_type(t), row_bufs_[o], i)),
                            t);
                      }
                    for (size_t v = 0; v < k_.values.size(); ++v)
                      if (hoist_[v]) vals_[v] = emit(k_.values[v]);
                    for (auto& [v, buf] : hoist_bufs_) {
                      DType t = k_.values[v].type;
                      b_.CreateStore(to_mem(vals_[v], t), b_.CreateGEP(mem_type(t), buf, i));
                    }
                  },
                  {{"llvm.loop.interleave.count", 1}});  // a tile is a few vectors
      Value* jammed = b_.getInt64(0);                    // the tile's rows the jammed loop runs
      if (jam_rest()) {
        Value* groups = b_.CreateUDiv(m, b_.getInt64(kRowJam));
        jammed = b_.CreateMul(groups, b_.getInt64(kRowJam));
        simple_loop("rowjam", groups, {}, [&](Value* g) {
          jam_dim_ = d;
          Value* first = b_.CreateMul(g, b_.getInt64(kRowJam));
          for (int64_t u = 0; u < kRowJam; ++u) {
            Value* i = b_.CreateAdd(first, b_.getInt64(u));
            idx_[d] = b_.CreateAdd(i0, i);
            if (!k_.has_row_stage()) prefetch_ahead(d);
            jam_.push_back({idx_[d], hoisted_of_row(i)});
          }
          inner_loop(in);
          jam_.clear();
        });
      }
      simple_loop("rowrest", b_.CreateSub(m, jammed), {}, [&](Value* r) {
        Value* i = b_.CreateAdd(jammed, r);
        idx_[d] = b_.CreateAdd(i0, i);
        if (!k_.has_row_stage()) prefetch_ahead(d);
        std::vector<Value*> hoisted = hoisted_of_row(i);
        for (size_t k = 0; k < hoist_bufs_.size(); ++k) vals_[hoist_bufs_[k].first] = hoisted[k];
        inner_loop(in);
      });
    });
  }

  // The hoisted values the rest reads, of the tile's row i (from hoist_bufs_, in their order).
  std::vector<Value*> hoisted_of_row(Value* i) {
    std::vector<Value*> out;
    for (auto& [v, buf] : hoist_bufs_) {
      DType t = k_.values[v].type;
      out.push_back(from_mem(b_.CreateLoad(mem_type(t), b_.CreateGEP(mem_type(t), buf, i)), t));
    }
    return out;
  }

  // Whether a tile's rest runs kRowJam rows in one innermost loop (unroll and jam): each
  // element's body once per row, in row order, so every partial still folds its rows in order
  // and a value is the same bits; what changes is that a partial the rows share (a column sum,
  // X^T r: its row stride is 0, see load_map) is loaded and stored once per kRowJam rows instead
  // of once per row. Logistic gradient_descent's pass (X g, and two such sums of 100 columns):
  // 85 -> 79 ms per thread (Xeon AMX), with each output in an alias scope of its own; jammed
  // with one scope for all outputs, LLVM kept every row's loads and stores (87 ms).
  // Not where the rest folds along the row itself (its accumulators run in the row's order).
  bool jam_rest() const {
    for (size_t o = 0; o < k_.outputs.size(); ++o)
      if (!k_.outputs[o].row && inner_reduced(o)) return false;
    return true;
  }

  // At the start of row idx_[d] of a tile's first loop over the rows, or of a plain loop over
  // rows (loop): prefetches of row idx_[d] + ahead of each memory leaf whose rows are contiguous
  // and move with d. Between the tile's two reads of its rows (and the row values' math) no loads
  // reach memory, so the hardware prefetcher alone leaves each tile's first row waiting on it:
  // logistic gradient_descent's pass over 1e6 x 100 float64 took 92 ms per thread without, 78
  // with (Xeon AMX, a 2-vCPU VM; 4 rows ahead measured best, 16 worse). A prefetch is a hint
  // that never faults, so rows past the block's end cost nothing but the instruction.
  void prefetch_ahead(int d) {
    const int in = d + 1;
    for (size_t l = 0; l < k_.leaves.size(); ++l) {
      const kir::Leaf& lf = k_.leaves[l];
      if (lf.kind != kir::LeafKind::Memory || lf.inner_stride != 1) continue;
      const int64_t size = static_cast<int64_t>(dtype_size(lf.dtype));
      Value* row_bytes = b_.CreateMul(ext_[in], b_.getInt64(size));
      Value* wanted =
          b_.CreateAnd(b_.CreateICmpNE(maps_[l].strides[d], b_.getInt64(0)),
                       b_.CreateAnd(b_.CreateICmpSGT(row_bytes, b_.getInt64(0)),
                                    b_.CreateICmpSLE(row_bytes, b_.getInt64(kPrefetchRowBytes))));
      auto* yes = llvm::BasicBlock::Create(ctx_, "prefetch", fn_);
      auto* done = llvm::BasicBlock::Create(ctx_, "prefetch.done", fn_);
      b_.CreateCondBr(wanted, yes, done);
      b_.SetInsertPoint(yes);
      Value* ahead =
          b_.CreateSDiv(b_.CreateAdd(row_bytes, b_.getInt64(kPrefetchAheadBytes - 1)), row_bytes);
      Value* saved_row = idx_[d];
      Value* saved_col = idx_[in];
      idx_[d] = b_.CreateAdd(saved_row, ahead);
      idx_[in] = b_.getInt64(0);
      // Not inbounds: the row ahead may lie past the buffer (never dereferenced).
      Value* start = b_.CreateGEP(mem_type(lf.dtype), ptrs_[l], address(maps_[l]));
      idx_[d] = saved_row;
      idx_[in] = saved_col;
      Value* lines = b_.CreateUDiv(b_.CreateAdd(row_bytes, b_.getInt64(63)), b_.getInt64(64));
      simple_loop("prefetch.line", lines, {}, [&](Value* j) {
        prefetch(b_.CreateGEP(b_.getInt8Ty(), start, b_.CreateMul(j, b_.getInt64(64))));
      });
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    }
  }

  // llvm.prefetch(at, read, locality 3 (keep in all levels), data). A hint: an address past the
  // buffer never faults.
  void prefetch(Value* at) {
    b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {at->getType()},
                       {at, b_.getInt32(0), b_.getInt32(3), b_.getInt32(1)});
  }

  // Row output o's result for VOp::Row after its row stage: the value its partial holds, the
  // row's accumulator folded into the identity.
  Value* row_result(size_t o) {
    const kir::Output& out = k_.outputs[o];
    return combine(out, identity(out), acc_[o]);
  }

  // The innermost loop over the active stage's outputs (all of them without a row stage).
  void inner_loop(int d) {
    if (int o = short_arg_output(); o >= 0) return short_arg_rows(d, static_cast<size_t>(o));
    if (any_compensated() || any_scanned()) return strip_loop(d);
    set_accumulators(
        body_loop("inner", ext_[d], accumulator_identities(), [&](Value* i) { idx_[d] = i; }));
    finish_inner_reductions();
  }

  // Float sums along the innermost dim: one vectorized loop over the whole row would add
  // n / lanes elements in sequence per lane (the mean of 10^7 float32 0.1s came out 0.09985).
  // Instead the row runs in strips of kStrip elements, each summed from zero by the vectorized
  // loop (kStrip / lanes additions per lane, then a tree), and the strips' sums are added with
  // Neumaier's compensation (strip_state / fold_strip): as accurate as NumPy's pairwise sum.
  bool compensated(size_t o) const {
    const auto& out = k_.outputs[o];
    return folds_inner(o) && is_float(out.type) &&
           (out.fn == ReduceFn::Sum || out.fn == ReduceFn::Mean);
  }
  bool any_compensated() const {
    for (size_t o = 0; o < k_.outputs.size(); ++o)
      if (compensated(o)) return true;
    return false;
  }

  void strip_loop(int d) {
    Value* strips =
        b_.CreateUDiv(b_.CreateAdd(ext_[d], b_.getInt64(kStrip - 1)), b_.getInt64(kStrip));
    auto strip = [&](Value* t, std::vector<Value*> state) {
      Value* i0 = b_.CreateMul(t, b_.getInt64(kStrip));
      Value* m = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.getInt64(kStrip),
                                          b_.CreateSub(ext_[d], i0));
      std::vector<Value*> sums = body_loop("inner", m, accumulator_identities(), [&](Value* j) {
        idx_[d] = b_.CreateAdd(i0, j);
        strip_j_ = j;
      });
      scan_strip(d, i0, m, state, sums);
      return fold_strip(state, sums);
    };
    set_strip_state(simple_loop("strip", strips, strip_state(), strip));
    finish_inner_reductions();
  }

  // argmin/argmax along the innermost dim, a strip at a time (an index-carrying select chain does
  // not vectorize: 5.5 ns an element, against NumPy's 0.25): the strip's loop folds the values
  // by a vectorizable min/max (NaN-propagating for floats), keeping each value and index in the
  // strip's buffers unless they can be had again (a memory leaf's value is read again, an iota
  // index recomputed: scan_step); then, only if that extreme beats the state, the first element
  // of the strip equal to it (a NaN when it is NaN) is found by a second vectorized loop, a
  // min-reduction of the matching positions (scan_strip). The strip's (extreme, index) is what
  // the element-by-element arg_step would have kept: the first of the elements that compare
  // equal to the extreme (-0 and +0 compare equal), or the first NaN; strips are then folded in
  // order by arg_step (fold_strip).
  bool scanned(size_t o) const { return folds_inner(o) && scan_bufs_.count(o); }
  bool any_scanned() const {
    for (size_t o = 0; o < k_.outputs.size(); ++o)
      if (scanned(o)) return true;
    return false;
  }

  // The one output of a kernel that is argmin/argmax along rows of a float or integer array in
  // memory (x.argmax(axis=-1)), outside row stages, tiles and jams; else -1. Such rows of lanes to
  // kStrip elements run short_arg_rows' single vector pass instead of strip_loop's two: rows of
  // 100 float64 (the 1e6 x 100 array's argmax(axis=1)) took 1.27 ns an element in strips (a
  // vectorized max and its horizontal reduction, then a vectorized search and its own), NumPy 0.9.
  int short_arg_output() const {
    if (row_stage_ || tile_rows_ || !jam_.empty() || !tile_bufs_.empty() || k_.outputs.size() != 1)
      return -1;
    const kir::Output& out = k_.outputs[0];
    if (!scanned(0) || !is_arg(0) || out.type == DType::Bool || iota_index(0) < 0) return -1;
    const int l = memory_value(0);
    return l >= 0 && k_.leaves[l].inner_stride == 1 ? 0 : -1;
  }

  // argmin/argmax of a row of lanes..kStrip elements in one pass of whole vectors: each lane keeps
  // its best value and that value's index, replaced only by a strictly better one (for floats
  // also a NaN over a number), so each lane holds the first of its best elements; the last
  // vector, n - lanes.., overlaps the others where lanes does not divide n (an element seen
  // twice keeps its index). Then across lanes: the best value (a NaN if a lane holds one), and
  // the smallest index of a lane holding it (-0 and +0 equal): the first occurrence in the row,
  // as the element-by-element arg_step would have kept. Other rows go to strip_loop.
  void short_arg_rows(int d, size_t o) {
    const kir::Output& out = k_.outputs[o];
    const int l = memory_value(o);
    const bool fp = is_float(out.type), is_max = out.fn == ReduceFn::ArgMax;
    const unsigned lanes = mode_.lanes * (dtype_size(out.type) == 4 ? 2 : 1);
    llvm::Type* et = reg_type(out.type);
    auto* vt = llvm::FixedVectorType::get(et, lanes);
    Value* n = ext_[d];
    auto* vec = llvm::BasicBlock::Create(ctx_, "argrow", fn_);
    auto* strips = llvm::BasicBlock::Create(ctx_, "argrow.strips", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "argrow.done", fn_);
    b_.CreateCondBr(b_.CreateAnd(b_.CreateICmpSGE(n, b_.getInt64(lanes)),
                                 b_.CreateICmpSLE(n, b_.getInt64(kStrip))),
                    vec, strips);
    b_.SetInsertPoint(strips);
    strip_loop(d);
    b_.CreateBr(done);

    b_.SetInsertPoint(vec);
    Value* saved = idx_[d];
    idx_[d] = b_.getInt64(0);
    Value* first = b_.CreateGEP(et, ptrs_[l], address(maps_[l]));  // the row's element 0
    std::vector<llvm::Constant*> steps;
    for (unsigned k = 0; k < lanes; ++k) steps.push_back(b_.getInt64(k));
    Value* iota = llvm::ConstantVector::get(steps);
    auto load = [&](Value* j) {
      return not_in_outputs(
          b_.CreateAlignedLoad(vt, b_.CreateGEP(et, first, j), llvm::Align(dtype_size(out.type))));
    };
    Value* ahead = b_.getInt64(kArgPrefetchBytes / static_cast<int64_t>(dtype_size(out.type)));
    auto step = [&](Value* j, const std::vector<Value*>& acc) {
      prefetch(b_.CreateGEP(et, first, b_.CreateAdd(j, ahead)));
      Value* v = load(j);
      Value* better = strictly_better(out, acc[0], v);
      Value* at = b_.CreateAdd(b_.CreateVectorSplat(lanes, j), iota);
      return std::vector<Value*>{b_.CreateSelect(better, v, acc[0]),
                                 b_.CreateSelect(better, at, acc[1])};
    };
    Value* whole = b_.CreateUDiv(n, b_.getInt64(lanes));  // vectors after the first
    std::vector<Value*> acc = simple_loop(
        "argrow", b_.CreateSub(whole, b_.getInt64(1)), {load(b_.getInt64(0)), iota},
        [&](Value* i, std::vector<Value*> a) {
          return step(b_.CreateMul(b_.CreateAdd(i, b_.getInt64(1)), b_.getInt64(lanes)), a);
        },
        {{"llvm.loop.vectorize.width", 1}, {"llvm.loop.interleave.count", 1}});
    acc = step(b_.CreateSub(n, b_.getInt64(lanes)), acc);
    Value *target, *value;
    if (fp) {
      Value* nan_lanes = b_.CreateFCmpUNO(acc[0], acc[0]);
      Value* any_nan = b_.CreateOrReduce(nan_lanes);
      Value* extreme = is_max ? b_.CreateFPMaxReduce(acc[0]) : b_.CreateFPMinReduce(acc[0]);
      target = b_.CreateSelect(any_nan, nan_lanes,
                               b_.CreateFCmpOEQ(acc[0], b_.CreateVectorSplat(lanes, extreme)));
      value = b_.CreateSelect(any_nan, llvm::ConstantFP::getNaN(et), extreme);
    } else {
      value = is_max ? b_.CreateIntMaxReduce(acc[0], true) : b_.CreateIntMinReduce(acc[0], true);
      target = b_.CreateICmpEQ(acc[0], b_.CreateVectorSplat(lanes, value));
    }
    idx_[d] = b_.CreateIntMinReduce(
        b_.CreateSelect(target, acc[1], b_.CreateVectorSplat(lanes, b_.getInt64(INT64_MAX))), true);
    acc_.assign(k_.outputs.size(), nullptr);
    acc_idx_.assign(k_.outputs.size(), nullptr);
    acc_[o] = value;
    acc_idx_[o] = leaf(iota_index(o));
    idx_[d] = saved;
    finish_inner_reductions();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // The iota leaf that is output o's index, or -1 when its index is another value (then each
  // element's index is kept in the strip's index buffer).
  int iota_index(size_t o) const {
    const kir::Value& v = k_.values[k_.outputs[o].index_value];
    return v.op == kir::VOp::Leaf && k_.leaves[v.index].kind == kir::LeafKind::Iota ? v.index : -1;
  }

  // The memory leaf that is output o's value (x.argmax() of an array in memory), or -1: its
  // values are then kept in the strip's value buffer for the search.
  int memory_value(size_t o) const {
    const kir::Value& v = k_.values[k_.outputs[o].value];
    return v.op == kir::VOp::Leaf && k_.leaves[v.index].kind == kir::LeafKind::Memory ? v.index
                                                                                      : -1;
  }

  // One element of a scanned output: stored in the strip's buffers, folded into the extreme.
  std::pair<Value*, Value*> scan_step(size_t o, Value* acc, Value* acc_idx, Value* v, Value* idx) {
    const kir::Output& out = k_.outputs[o];
    auto [vbuf, ibuf] = scan_bufs_.at(o);
    llvm::Type* mt = mem_type(out.type);
    if (memory_value(o) < 0)
      b_.CreateStore(to_mem(v, out.type), b_.CreateGEP(llvm::ArrayType::get(mt, kStrip), vbuf,
                                                       {b_.getInt64(0), strip_j_}));
    if (iota_index(o) < 0)
      b_.CreateStore(idx, b_.CreateGEP(llvm::ArrayType::get(b_.getInt64Ty(), kStrip), ibuf,
                                       {b_.getInt64(0), strip_j_}));
    const bool is_max = out.fn == ReduceFn::ArgMax;
    Value* next;
    if (is_float(out.type))
      next = b_.CreateBinaryIntrinsic(is_max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum,
                                      acc, v);
    else if (out.type == DType::Bool)
      next = is_max ? b_.CreateOr(acc, v) : b_.CreateAnd(acc, v);
    else
      next =
          b_.CreateBinaryIntrinsic(is_max ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, acc, v);
    return {next, acc_idx};
  }

  // After a strip's loop over n elements: each scanned output's index in `sums` becomes its first
  // element equal to the extreme (see scan_step), -1 if none (an empty strip).
  void scan_strip(int d, Value* i0, Value* n, const std::vector<Value*>& state,
                  std::vector<Value*>& sums) {
    size_t at = 0;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o)) continue;
      if (!scanned(o)) {
        at += is_arg(o) ? 2 : 1;
        continue;
      }
      const kir::Output& out = k_.outputs[o];
      auto [vbuf, ibuf] = scan_bufs_.at(o);
      llvm::Type* mt = mem_type(out.type);
      Value* extreme = sums[at];
      // Only a strip whose extreme beats the earlier strips' is searched (on data in random
      // order, a few strips of a row): the others' candidates would lose to the state anyway.
      auto* before = b_.GetInsertBlock();
      auto* search = llvm::BasicBlock::Create(ctx_, "scan.search", fn_);
      auto* done = llvm::BasicBlock::Create(ctx_, "scan.done", fn_);
      b_.CreateCondBr(arg_better(out, state[at], state[at + 1], extreme), search, done);
      b_.SetInsertPoint(search);
      Value* want_nan = is_float(out.type) ? b_.CreateFCmpUNO(extreme, extreme) : nullptr;
      Value* first = simple_loop(
          "scan", n, {b_.getInt64(kStrip)},
          [&](Value* j, std::vector<Value*> acc) {
            Value* v;
            if (int l = memory_value(o); l >= 0) {  // read again (from cache) where it is
              Value* saved = idx_[d];
              idx_[d] = b_.CreateAdd(i0, j);
              v = leaf(l);
              idx_[d] = saved;
            } else {
              v = from_mem(b_.CreateLoad(mt, b_.CreateGEP(llvm::ArrayType::get(mt, kStrip), vbuf,
                                                          {b_.getInt64(0), j})),
                           out.type);
            }
            Value* match = is_float(out.type) ? b_.CreateSelect(want_nan, b_.CreateFCmpUNO(v, v),
                                                                b_.CreateFCmpOEQ(v, extreme))
                                              : b_.CreateICmpEQ(v, extreme);
            Value* pos = b_.CreateSelect(match, j, b_.getInt64(kStrip));
            return std::vector<Value*>{
                b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, acc[0], pos)};
          },
          body_hints())[0];
      Value* found = b_.CreateICmpSLT(first, n);
      Value* place = b_.CreateSelect(found, first, b_.getInt64(0));
      Value* idx;
      if (int l = iota_index(o); l >= 0) {  // the index leaf at that element, recomputed
        Value* saved = idx_[d];
        idx_[d] = b_.CreateAdd(i0, place);
        idx = leaf(l);
        idx_[d] = saved;
      } else {
        idx = b_.CreateLoad(b_.getInt64Ty(),
                            b_.CreateGEP(llvm::ArrayType::get(b_.getInt64Ty(), kStrip), ibuf,
                                         {b_.getInt64(0), place}));
      }
      idx = b_.CreateSelect(found, idx, b_.getInt64(-1));
      auto* searched = b_.GetInsertBlock();
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
      auto* phi = b_.CreatePHI(b_.getInt64Ty(), 2);
      phi->addIncoming(idx, searched);
      phi->addIncoming(b_.getInt64(-1), before);  // loses to the state in fold_strip
      sums[at + 1] = phi;
      at += 2;
    }
  }

  // The state carried across strips (or tiles): the accumulators (accumulator_identities'
  // layout), then one compensation term per compensated output.
  std::vector<Value*> strip_state() {
    std::vector<Value*> v = accumulator_identities();
    // A scanned output starts from its partial, so that a row's strips are searched only where
    // they beat the earlier rows too (finish_inner_reductions folds the same element back).
    size_t at = 0;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o)) continue;
      if (scanned(o)) {
        const kir::Output& out = k_.outputs[o];
        Value* a = address(out_maps_[o], true);
        llvm::Type* mt = mem_type(out.type);
        v[at] =
            from_mem(in_outputs(b_.CreateLoad(mt, b_.CreateGEP(mt, out_ptrs_[o], a)), o), out.type);
        v[at + 1] = in_outputs(
            b_.CreateLoad(b_.getInt64Ty(), b_.CreateGEP(b_.getInt64Ty(), idx_ptrs_[o], a)), o,
            true);
      }
      at += is_arg(o) ? 2 : 1;
    }
    for (size_t o = 0; o < k_.outputs.size(); ++o)
      if (compensated(o)) v.push_back(fconst(k_.outputs[o].type, 0));
    return v;
  }

  // Folds one strip's accumulators into the carried state. Sums: Neumaier's step (no fast-math
  // flags, so LLVM keeps it exact); argmin/argmax: the earlier strip wins ties; others: combine.
  std::vector<Value*> fold_strip(const std::vector<Value*>& state,
                                 const std::vector<Value*>& sums) {
    std::vector<Value*> next, comps;
    size_t at = 0, comp_at = accumulator_identities().size();
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o)) continue;
      const auto& out = k_.outputs[o];
      if (is_arg(o)) {
        auto [v, i] = arg_step(out, state[at], state[at + 1], sums[at], sums[at + 1]);
        next.push_back(v);
        next.push_back(i);
        at += 2;
        continue;
      }
      if (!compensated(o)) {
        next.push_back(combine(out, state[at], sums[at]));
        ++at;
        continue;
      }
      Value *s = state[at], *x = sums[at], *c = state[comp_at++];
      Value* t = b_.CreateFAdd(s, x);
      Value* big_s = b_.CreateFCmpOGE(call_intrinsic(llvm::Intrinsic::fabs, s),
                                      call_intrinsic(llvm::Intrinsic::fabs, x));
      Value* lost = b_.CreateSelect(big_s, b_.CreateFAdd(b_.CreateFSub(s, t), x),
                                    b_.CreateFAdd(b_.CreateFSub(x, t), s));
      next.push_back(t);
      comps.push_back(b_.CreateFAdd(c, lost));
      ++at;
    }
    next.insert(next.end(), comps.begin(), comps.end());
    return next;
  }

  // Sets the accumulators from the final carried state: a compensated sum is s + c (s alone
  // when c is not finite: an infinity or NaN in the data makes the compensation NaN).
  void set_strip_state(std::vector<Value*> state) {
    size_t at = 0, comp_at = accumulator_identities().size();
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o)) continue;
      if (compensated(o)) {
        Value *s = state[at], *c = state[comp_at++];
        Value* finite = b_.CreateFCmpOLT(call_intrinsic(llvm::Intrinsic::fabs, c),
                                         fconst(k_.outputs[o].type, INFINITY));
        state[at] = b_.CreateSelect(finite, b_.CreateFAdd(s, c), s);
      }
      at += is_arg(o) ? 2 : 1;
    }
    state.resize(accumulator_identities().size());
    set_accumulators(state);
  }

  // The innermost loop's accumulators (outputs reduced along it), flat: value, then index for
  // argmin/argmax. Their starting values; setting them from such a list; one body evaluation
  // that folds the current element in and returns the next values.
  std::vector<Value*> accumulator_identities() {
    std::vector<Value*> v;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o)) continue;
      v.push_back(identity(k_.outputs[o]));
      if (is_arg(o)) v.push_back(b_.getInt64(-1));
    }
    return v;
  }
  void set_accumulators(const std::vector<Value*>& v) {
    acc_.assign(k_.outputs.size(), nullptr);
    acc_idx_.assign(k_.outputs.size(), nullptr);
    size_t at = 0;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o)) continue;
      acc_[o] = v[at++];
      if (is_arg(o)) acc_idx_[o] = v[at++];
    }
  }
  std::vector<Value*> body_step(const std::vector<Value*>& acc) {
    set_accumulators(acc);
    if (!jam_.empty()) {  // a jammed rest (row_tiled_loop): no accumulators, each row in order
      for (const JamRow& row : jam_) {
        idx_[jam_dim_] = row.index;
        for (size_t k = 0; k < hoist_bufs_.size(); ++k)
          vals_[hoist_bufs_[k].first] = row.hoisted[k];
        body();
      }
      return {};
    }
    body();
    std::vector<Value*> next;
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o)) continue;
      next.push_back(acc_next_[o]);
      if (is_arg(o)) next.push_back(acc_idx_next_[o]);
    }
    return next;
  }

  // The innermost loop of a kernel with random leaves, in tiles of kTile elements: a first loop
  // generates every random leaf's values for the tile into stack buffers (Philox and the
  // ziggurat's fast path, rejected normals marked NaN), a short scan fills in the rejected
  // normals through kiln_normal_slow, and a second loop evaluates the body, reading the values
  // back. Two simpler loops vectorize with far fewer register spills than one that interleaves
  // Philox's rounds with the rest of the body, and the rare path stays out of the vector loop
  // (bench/RESULTS.md, "Generator"). Values are the same either way.
  void tiled_inner_loop(int d) {
    Value* tiles = b_.CreateUDiv(b_.CreateAdd(ext_[d], b_.getInt64(kTile - 1)), b_.getInt64(kTile));
    auto tile = [&](Value* t, std::vector<Value*> acc) {
      Value* i0 = b_.CreateMul(t, b_.getInt64(kTile));
      Value* m = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.getInt64(kTile),
                                          b_.CreateSub(ext_[d], i0));
      // Loop A: the random values of the tile, a loop per leaf. A leaf read one element after
      // the next (inner stride 1) generates two elements per Philox block, as
      // philox::element_words pairs them: block j gives elements 2j and 2j + 1, so the blocks
      // from flat0 >> 1 on are written from the buffer's start and the tile's values begin at
      // flat0 & 1. Other leaves (strided views of a generator) make a block per element.
      idx_[d] = i0;
      tile_ptrs_.clear();
      for (auto& [l, buf] : tile_bufs_) {
        Value* f0 = address(maps_[l]);
        if (unit_stride(maps_[l].strides[d])) {
          Value* odd = b_.CreateAnd(f0, b_.getInt64(1));
          generate_pairs(l, buf, f0,
                         b_.CreateLShr(b_.CreateAdd(m, b_.CreateAdd(odd, b_.getInt64(1))), 1));
          tile_ptrs_[l] = b_.CreateGEP(random_type(k_.leaves[l]), buf, odd);
        } else {
          generate_elements(l, buf, f0, m, maps_[l].strides[d]);
          tile_ptrs_[l] = buf;
        }
      }
      for (auto& [l, buf] : tile_bufs_)
        if (k_.leaves[l].random == RandomKind::Normal) fill_rejected(d, l, tile_ptrs_[l], i0, m);
      // Loop B: the body, with the inner reductions' accumulators for this tile, folded into
      // the carried state like strip_loop's strips.
      std::vector<Value*> sums = body_loop("eval", m, accumulator_identities(), [&](Value* j) {
        idx_[d] = b_.CreateAdd(i0, j);
        tile_j_ = j;
      });
      tile_j_ = nullptr;
      return fold_strip(acc, sums);
    };
    set_strip_state(simple_loop("tile", tiles, strip_state(), tile));
    finish_inner_reductions();
  }

  // Loop A of a leaf of inner stride 1: `blocks` Philox blocks from flat0 >> 1 on, each giving
  // two elements (its words 0, 1 and 2, 3), written to buf from its start. The block index is
  // carried as an induction variable, which vectorizes to one add instead of a 64-bit multiply
  // per lane.
  void generate_pairs(int l, Value* buf, Value* flat0, Value* blocks) {
    const kir::Leaf& lf = k_.leaves[l];
    simple_loop(
        "gen", blocks, {b_.CreateLShr(flat0, 1)},
        [&](Value* q, std::vector<Value*> j) {
          auto w = philox(j[0], params_[lf.seed_param], lf.stream);
          Value* at = b_.CreateShl(q, 1, "", true, true);
          b_.CreateStore(value_of_words(lf, w[0], w[1]), b_.CreateGEP(random_type(lf), buf, at));
          b_.CreateStore(value_of_words(lf, w[2], w[3]),
                         b_.CreateGEP(random_type(lf), buf, b_.CreateOr(at, 1)));
          return std::vector<Value*>{b_.CreateAdd(j[0], b_.getInt64(1))};
        },
        gen_hints());
  }

  // Loop A of a strided leaf: a block per element. Where the stride and flat0 are even (random-
  // sum's x[::2, ::2]), every element of the tile is the first of its block, so the loop reads
  // words 0 and 1 only (LLVM then drops the last round's products that words 2 and 3 need) and
  // carries the block index; otherwise each element picks its words by its parity. (A loop for
  // odd elements under even strides too doubled the compile time of random-sum's kernel, 0.11
  // -> 0.22 s, for slices such as x[:, 1::2] only.)
  void generate_elements(int l, Value* buf, Value* flat0, Value* m, Value* stride) {
    const kir::Leaf& lf = k_.leaves[l];
    auto loop = [&](bool even) {
      Value* start = even ? b_.CreateLShr(flat0, 1) : flat0;
      Value* step = even ? b_.CreateAShr(stride, 1) : stride;
      simple_loop(
          "gen", m, {start},
          [&](Value* j, std::vector<Value*> at) {
            Value *hi, *lo;
            if (even) {
              auto w = philox(at[0], params_[lf.seed_param], lf.stream);
              hi = w[0];
              lo = w[1];
            } else {
              std::tie(hi, lo) = element_words(lf, at[0]);
            }
            b_.CreateStore(value_of_words(lf, hi, lo), b_.CreateGEP(random_type(lf), buf, j));
            return std::vector<Value*>{b_.CreateAdd(at[0], step)};
          },
          gen_hints());
    };
    auto* even = llvm::BasicBlock::Create(ctx_, "gen.even", fn_);
    auto* other = llvm::BasicBlock::Create(ctx_, "gen.other", fn_);
    auto* done = llvm::BasicBlock::Create(ctx_, "gen.done", fn_);
    Value* odd = b_.CreateTrunc(b_.CreateOr(flat0, stride), b_.getInt1Ty());
    b_.CreateCondBr(odd, other, even);
    b_.SetInsertPoint(even);
    loop(true);
    b_.CreateBr(done);
    b_.SetInsertPoint(other);
    loop(false);
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  // for (j = 0; j < n; ++j) carried = step(j, carried); returns the carried values at the exit.
  // `hints`: loop metadata strings with an i32 value, e.g. {"llvm.loop.interleave.count", 2}.
  template <class Step>
  std::vector<Value*> simple_loop(const std::string& name, Value* n, std::vector<Value*> init,
                                  Step step, std::vector<std::pair<const char*, int>> hints = {}) {
    auto* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(ctx_, name + ".head", fn_);
    auto* bodyb = llvm::BasicBlock::Create(ctx_, name + ".body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, name + ".exit", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    auto* j = b_.CreatePHI(b_.getInt64Ty(), 2, name + ".j");
    j->addIncoming(b_.getInt64(0), pre);
    std::vector<Value*> cur;
    for (Value* v : init) {
      auto* phi = b_.CreatePHI(v->getType(), 2);
      phi->addIncoming(v, pre);
      cur.push_back(phi);
    }
    b_.CreateCondBr(b_.CreateICmpSLT(j, n), bodyb, exit);
    b_.SetInsertPoint(bodyb);
    std::vector<Value*> next;
    if constexpr (std::is_invocable_v<Step, Value*>)
      step(j);
    else
      next = step(j, cur);
    auto* latch = b_.GetInsertBlock();
    j->addIncoming(b_.CreateAdd(j, b_.getInt64(1), "", true, true), latch);
    for (size_t k = 0; k < cur.size(); ++k)
      llvm::cast<llvm::PHINode>(cur[k])->addIncoming(next[k], latch);
    set_loop_hints(b_.CreateBr(head), hints);
    b_.SetInsertPoint(exit);
    return cur;
  }

  // Attaches loop metadata (name -> i32 value) to a loop's back edge.
  void set_loop_hints(llvm::Instruction* latch_br,
                      const std::vector<std::pair<const char*, int>>& hints) {
    if (hints.empty()) return;
    std::vector<llvm::Metadata*> ops{nullptr};
    for (auto& [key, value] : hints)
      ops.push_back(llvm::MDNode::get(
          ctx_, {llvm::MDString::get(ctx_, key),
                 llvm::ConstantAsMetadata::get(b_.getInt32(static_cast<uint32_t>(value)))}));
    auto* md = llvm::MDNode::getDistinct(ctx_, ops);
    md->replaceOperandWith(0, md);
    latch_br->setMetadata(llvm::LLVMContext::MD_loop, md);
  }

  // The loop over n elements of a row running the body (body_step), the accumulators carried
  // from `init`; `at(j)` points the body at element j. In kernels that call vector math the
  // loop is split in two: the elements up to the last multiple of the vectorized loop's step
  // (lanes x 4 interleaved), then the rest in a loop of its own, which LLVM vectorizes too. In
  // one loop, up to step - 1 elements per row went to the scalar remainder, where every math
  // call is a whole vector call on a splat: trig-identity (N = 10000, C = 2000: 16 of every
  // 2000 elements) took 0.056 s instead of 0.040 (bench/RESULTS.md, session 18). A float max/min
  // fold's loop is split the same way, its main part 16 vectors at a time (min_max_step).
  template <class At>
  std::vector<Value*> body_loop(const std::string& name, Value* n, std::vector<Value*> init,
                                At at) {
    auto step = [&](Value* j, std::vector<Value*> acc) {
      at(j);
      return body_step(acc);
    };
    int64_t group = vector_math_step();
    std::vector<std::pair<const char*, int>> main_hints = body_hints(),
                                             rest_hints = {{"llvm.loop.interleave.count", 1}};
    const bool min_max = group == 0 && (group = min_max_step()) != 0;
    if (min_max) {
      main_hints = {{"llvm.loop.interleave.count", 16}};
      rest_hints = body_hints();
    }
    if (group == 0) return simple_loop(name, n, std::move(init), step, stream_hints());
    Value* head = b_.getInt64(0);
    if (int l = aligned_leaf(); l >= 0 && min_max) {
      // A max/min fold's main loop starts at the first element of leaf l on a 1 KiB boundary: the
      // elements before it run in a loop of their own first (only which lanes fold which elements
      // changes, which IEEE maximum/minimum, integer min/max, all and any do not see).
      at(b_.getInt64(0));
      const int64_t size = static_cast<int64_t>(dtype_size(k_.leaves[l].dtype));
      Value* p = b_.CreatePtrToInt(
          b_.CreateGEP(mem_type(k_.leaves[l].dtype), ptrs_[l], address(maps_[l])), b_.getInt64Ty());
      Value* to_boundary = b_.CreateUDiv(
          b_.CreateAnd(b_.CreateNeg(p), b_.getInt64(kFoldAlignBytes - 1)), b_.getInt64(size));
      // (rows shorter than 8 main steps, a row-stage max of softmax's say, are left as they were)
      head =
          b_.CreateSelect(b_.CreateICmpSGE(n, b_.getInt64(8 * group)), to_boundary, b_.getInt64(0));
      init = simple_loop(name + ".head", head, std::move(init), step, rest_hints);
    }
    Value* main = b_.CreateAdd(head, b_.CreateAnd(b_.CreateSub(n, head), b_.getInt64(-group)));
    std::vector<Value*> acc = simple_loop(
        name, b_.CreateSub(main, head), std::move(init),
        [&](Value* j, std::vector<Value*> a) { return step(b_.CreateAdd(head, j), a); },
        main_hints);
    return simple_loop(
        name + ".rest", b_.CreateSub(n, main), acc,
        [&](Value* j, std::vector<Value*> a) { return step(b_.CreateAdd(main, j), a); },
        rest_hints);
  }

  // The memory leaf, contiguous along rows, whose address body_loop aligns a max/min fold's main
  // loop to, in kernels whose results do not depend on which lane folds an element (no float sum,
  // mean or product: those reassociate) and without arg outputs (whose strips of 1024 would each
  // start with a loop of their own: x.argmax() of the array below went 61 -> 80 ms); else -1. On
  // the Xeon AMX the 16-vector loops of a max ran 1.1-1.25x and of a nanmax (which also folds
  // all(isnan)) 1.4-1.7x slower over blocks starting off a 1 KiB boundary (one thread: 1e6 x 100
  // float64 in chunks of 1000 rows, each block 800000 bytes after the last, max 62-65 ms and
  // nanmax 98-101 against 58-61 and 63-66 in chunks of 1024 rows; NumPy 56 and 56; aligned, 59-61
  // and 62 in chunks of 1000 rows).
  int aligned_leaf() const {
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      const kir::Output& out = k_.outputs[o];
      if (out.reduce && is_float(out.type) &&
          (out.fn == ReduceFn::Sum || out.fn == ReduceFn::Mean || out.fn == ReduceFn::Prod))
        return -1;
      if (is_arg(o)) return -1;
    }
    for (size_t l = 0; l < k_.leaves.size(); ++l)
      if (k_.leaves[l].kind == kir::LeafKind::Memory && k_.leaves[l].inner_stride == 1)
        return static_cast<int>(l);
    return -1;
  }

  // The vectorized body loop's step in elements where the body calls vector math per element
  // (4 vectors of the narrowest float type it calls them on), else 0. Values hoisted out of the
  // row (computed once per row, as logistic regression's exp of X @ b) do not count: a split
  // would only add code there.
  int64_t vector_math_step() const {
    if (mode_.precise) return 0;
    int64_t step = 0;
    for (size_t i = 0; i < k_.values.size(); ++i) {
      const kir::Value& v = k_.values[i];
      bool per_element = row_stage_ ? need_row_[i] : need_main_[i] && !hoist_[i];
      if (per_element && is_math(v))
        step =
            std::max<int64_t>(step, int64_t(mode_.lanes) * 4 * (v.type == DType::Float32 ? 2 : 1));
    }
    return step;
  }

  // Innermost loops over the body: 4 interleaved vectors. Each element's chain of operations
  // is serial (a chain of libmvec calls especially); without interleaving, LLVM picks one
  // vector for loops that only store, and they run latency-bound at half the speed of the same
  // body in a reduction loop (Dask's 200-ufunc chain: 1.84 s -> 1.04 s on one thread).
  static std::vector<std::pair<const char*, int>> body_hints() {
    return {{"llvm.loop.interleave.count", 4}};
  }

  // The hints of a body loop without vector math or a max/min fold: body_hints(), except where
  // the target's tuning asks for narrower vectors in loops that stream memory (tuning_): there,
  // outside row-tiled kernels (whose loops read a tile again from cache) and kernels with random
  // leaves (bound by generation), a body of at most 12 operations per element runs vectors of
  // stream_vector_bytes, 16 interleaved. Measured on an Intel Xeon with AVX-512 (2-vCPU VM; LLVM
  // target rocketlake, whose tuning prefers 256-bit vectors), one thread, 1e6 x 100 float64 from
  // memory, 512-bit x 4 against 256-bit x 16: x.sum() 53 -> 44 ms (NumPy 49), int64 sum 53 -> 44,
  // (x * x).sum() 59 -> 53-57, the sum of a Horner polynomial of 2, 8, 12
  // operations 66 -> 48, 89 -> 73, 95 -> 78, but of 20 operations 122 -> 137 (hence the limit);
  // 256-bit x 4 or x 8 lost much of the gain. C loops of 512-bit loads summed memory at 0.53 ns
  // per element at every unroll (2-16 vectors), of 256-bit loads at 0.45-0.48.
  std::vector<std::pair<const char*, int>> stream_hints() const {
    const int bytes = tuning_.stream_vector_bytes;
    if (bytes == 0 || row_stage_ || tile_rows_) return body_hints();
    for (const kir::Leaf& l : k_.leaves)
      if (l.kind == kir::LeafKind::Random) return body_hints();
    size_t widest = 1;
    int ops = 0;
    for (size_t i = 0; i < k_.values.size(); ++i) {
      const kir::Value& v = k_.values[i];
      widest = std::max(widest, dtype_size(v.type));
      if (need_main_[i] && !hoist_[i] && v.op != kir::VOp::Leaf && v.op != kir::VOp::Const &&
          v.op != kir::VOp::Param)
        ++ops;
    }
    if (ops > 12) return body_hints();
    return {{"llvm.loop.vectorize.width", std::max<int>(1, bytes / static_cast<int>(widest))},
            {"llvm.loop.interleave.count", 16}};
  }

  // The step of a float max/min fold's (or arg fold's) main loop, in elements: 16 vectors of
  // its narrowest float, where the body calls no vector math; else 0. LLVM's maximum and minimum
  // are several dependent instructions per vector (a blend on the sign, the max, a NaN fix-up),
  // and with 4 accumulators a loop streaming memory keeps too few loads in flight: on an Intel
  // Xeon with AVX-512 (2 vCPU VM), one thread's max of a resident 6000 x 6000 float64 array took
  // 0.83 ns per element against sum's 0.55 and NumPy's max 0.54; with 8 accumulators 0.79, with
  // 16 0.60 (AVX2: 1.09, 0.66, 0.59). The rest of a row (and a row shorter than the step) runs
  // 4 vectors at a time as before: 16 for all of a row of 100 took 5.2 ns per element, not 1.0.
  int64_t min_max_step() const {
    if (vector_math_step() != 0) return 0;
    int64_t step = 0;
    for (const kir::Output& o : k_.outputs)
      if (o.reduce && is_float(o.type) &&
          (o.fn == ReduceFn::Min || o.fn == ReduceFn::Max || o.fn == ReduceFn::ArgMin ||
           o.fn == ReduceFn::ArgMax))
        step =
            std::max<int64_t>(step, int64_t(mode_.lanes) * 16 * (o.type == DType::Float32 ? 2 : 1));
    return step;
  }

  // The scan of a tile's normals after loop A: kScanGroup values at a time, and for a group with
  // a NaN (a rejected fast path) each NaN is replaced by kiln_normal_slow's value. The
  // kScanGroup values past the tile's end are zeroed first, so the last group reads only
  // defined values. (Groups of 16 rather than 4: the scan took 8% of a normal sum's time, one
  // thread, Xeon 207.)
  void fill_rejected(int d, int l, Value* buf, Value* i0, Value* m) {
    auto* f64 = b_.getDoubleTy();
    auto* vt = llvm::FixedVectorType::get(f64, kScanGroup);
    b_.CreateAlignedStore(llvm::Constant::getNullValue(vt), b_.CreateGEP(f64, buf, m),
                          llvm::Align(8));
    Value* groups =
        b_.CreateUDiv(b_.CreateAdd(m, b_.getInt64(kScanGroup - 1)), b_.getInt64(kScanGroup));
    simple_loop("scan", groups, {}, [&](Value* g) {
      Value* j = b_.CreateMul(g, b_.getInt64(kScanGroup));
      Value* v = b_.CreateAlignedLoad(vt, b_.CreateGEP(f64, buf, j), llvm::Align(8));
      Value* any = b_.CreateOrReduce(b_.CreateFCmpUNO(v, v));
      auto* fix = llvm::BasicBlock::Create(ctx_, "scan.fix", fn_);
      auto* done = llvm::BasicBlock::Create(ctx_, "scan.done", fn_);
      b_.CreateCondBr(any, fix, done);
      b_.SetInsertPoint(fix);
      // The group's values one by one (to the tile's end: a run-time count, which LLVM keeps as
      // one loop rather than 16 copies of the call).
      Value* count = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.getInt64(kScanGroup),
                                              b_.CreateSub(m, j));
      simple_loop("scan.one", count, {}, [&](Value* q) {
        Value* jq = b_.CreateAdd(j, q);
        Value* at = b_.CreateGEP(f64, buf, jq);
        Value* x = b_.CreateLoad(f64, at);
        auto* call = llvm::BasicBlock::Create(ctx_, "scan.call", fn_);
        auto* next = llvm::BasicBlock::Create(ctx_, "scan.next", fn_);
        b_.CreateCondBr(b_.CreateFCmpUNO(x, x), call, next);
        b_.SetInsertPoint(call);
        idx_[d] = b_.CreateAdd(i0, jq);
        b_.CreateStore(normal_slow(k_.leaves[l], address(maps_[l])), at);
        b_.CreateBr(next);
        b_.SetInsertPoint(next);
      });
      b_.CreateBr(done);
      b_.SetInsertPoint(done);
    });
  }

  // Outputs of the stage being printed: the row stage's (row outputs) or the rest.
  bool active(size_t o) const { return k_.outputs[o].row == row_stage_; }
  // Outputs the current innermost loop folds into scalar accumulators.
  bool folds_inner(size_t o) const { return active(o) && inner_reduced(o); }

  bool inner_reduced(size_t o) const {
    const auto& out = k_.outputs[o];
    return out.reduce && k_.rank > 0 && (out.reduced_mask >> (k_.rank - 1)) & 1u;
  }

  // Address (or flat index) of the current element under a map; the innermost index is
  // excluded when `skip_inner` (for partials that accumulate along it).
  Value* address(const Map& m, bool skip_inner = false) {
    Value* a = m.base;
    for (int d = 0; d < k_.rank; ++d) {
      if (skip_inner && d == k_.rank - 1) continue;
      a = b_.CreateAdd(a, b_.CreateMul(idx_[d], m.strides[d]));
    }
    return a;
  }

  Value* identity(const kir::Output& o) {
    llvm::Type* t = reg_type(o.type);
    if (is_float(o.type)) return llvm::ConstantFP::get(t, kir::reduce_identity_f(o.fn));
    return llvm::ConstantInt::get(t, kir::reduce_identity_i(o.fn, o.type), true);
  }

  void body() {
    const std::vector<bool>& need = row_stage_ ? need_row_ : need_main_;
    for (size_t v = 0; v < k_.values.size(); ++v)
      if (need[v] && (row_stage_ || !hoist_[v])) vals_[v] = emit(k_.values[v]);
    acc_next_.assign(k_.outputs.size(), nullptr);
    acc_idx_next_.assign(k_.outputs.size(), nullptr);
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!active(o)) continue;
      const auto& out = k_.outputs[o];
      Value* v = vals_[out.value];
      Value* idx = is_arg(o) ? vals_[out.index_value] : nullptr;
      if (folds_inner(o)) {
        if (idx && scanned(o))
          std::tie(acc_next_[o], acc_idx_next_[o]) = scan_step(o, acc_[o], acc_idx_[o], v, idx);
        else if (idx)
          std::tie(acc_next_[o], acc_idx_next_[o]) = arg_step(out, acc_[o], acc_idx_[o], v, idx);
        else
          acc_next_[o] = combine(out, acc_[o], v);
        continue;
      }
      fold_into_memory(o, address(out_maps_[o]), v, idx);
    }
  }

  // partial[at] (op)= v, or a plain store for store outputs.
  void fold_into_memory(size_t o, Value* at, Value* v, Value* idx) {
    const auto& out = k_.outputs[o];
    llvm::Type* mt = mem_type(out.type);
    Value* addr = b_.CreateGEP(mt, out_ptrs_[o], at);
    if (idx) {
      Value* iaddr = b_.CreateGEP(b_.getInt64Ty(), idx_ptrs_[o], at);
      Value* mem_v = from_mem(in_outputs(b_.CreateLoad(mt, addr), o), out.type);
      Value* mem_i = in_outputs(b_.CreateLoad(b_.getInt64Ty(), iaddr), o, true);
      auto [nv, ni] = arg_step(out, mem_v, mem_i, v, idx);
      in_outputs(b_.CreateStore(to_mem(nv, out.type), addr), o);
      in_outputs(b_.CreateStore(ni, iaddr), o, true);
      return;
    }
    if (out.reduce) v = combine(out, from_mem(in_outputs(b_.CreateLoad(mt, addr), o), out.type), v);
    in_outputs(b_.CreateStore(to_mem(v, out.type), addr), o);
  }

  // Outputs (stores, partials) never share memory with the leaves a kernel reads, nor with each
  // other: each output is memory Kiln allocated for it (an arg output's indices a region of
  // their own). Saying so lets LLVM keep a leaf's value in a register across the inner loop when
  // its index does not move there (a broadcast along the inner dim), instead of reloading it,
  // and everything computed from it, after every store; and lets a jammed rest's rows fold into
  // each of several column sums through registers (row_tiled_loop).
  // Per output o, slot 2o for its values and 2o + 1 for its indices: the scope its accesses are
  // in and the list of every other output scope, which they are noalias with; all_outputs_ lists
  // them all (a leaf's loads are noalias with every one).
  void make_output_scopes() {
    llvm::MDBuilder mdb(ctx_);
    auto* domain = mdb.createAnonymousAliasScopeDomain("kiln.kernel");
    std::vector<llvm::Metadata*> scopes;
    for (size_t k = 0; k < 2 * k_.outputs.size(); ++k)
      scopes.push_back(mdb.createAnonymousAliasScope(
          domain, "output" + std::to_string(k / 2) + (k % 2 ? ".index" : "")));
    for (size_t k = 0; k < scopes.size(); ++k) {
      std::vector<llvm::Metadata*> others = scopes;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(k));
      own_scope_.push_back(llvm::MDNode::get(ctx_, {scopes[k]}));
      other_scopes_.push_back(llvm::MDNode::get(ctx_, others));
    }
    all_outputs_ = llvm::MDNode::get(ctx_, scopes);
  }
  template <class I>
  I* in_outputs(I* inst, size_t o, bool index = false) {
    if (!all_outputs_) make_output_scopes();
    const size_t k = 2 * o + (index ? 1 : 0);
    inst->setMetadata(llvm::LLVMContext::MD_alias_scope, own_scope_[k]);
    inst->setMetadata(llvm::LLVMContext::MD_noalias, other_scopes_[k]);
    return inst;
  }
  llvm::LoadInst* not_in_outputs(llvm::LoadInst* load) {
    if (!all_outputs_) make_output_scopes();
    load->setMetadata(llvm::LLVMContext::MD_noalias, all_outputs_);
    return load;
  }

  bool is_arg(size_t o) const { return k_.outputs[o].index_value >= 0; }

  // One argmin/argmax step: (acc, acc_idx) holds earlier elements (index -1: none yet); the
  // candidate (v, idx) wins only if strictly better, so ties keep the first occurrence, and a NaN
  // wins over numbers (NumPy returns the first NaN).
  std::pair<Value*, Value*> arg_step(const kir::Output& o, Value* acc, Value* acc_idx, Value* v,
                                     Value* idx) {
    Value* take =
        b_.CreateAnd(b_.CreateICmpSGE(idx, b_.getInt64(0)), arg_better(o, acc, acc_idx, v));
    return {b_.CreateSelect(take, v, acc), b_.CreateSelect(take, idx, acc_idx)};
  }
  // Whether a candidate of value v would replace (acc, acc_idx): none yet, or strictly better.
  Value* arg_better(const kir::Output& o, Value* acc, Value* acc_idx, Value* v) {
    return b_.CreateOr(b_.CreateICmpSLT(acc_idx, b_.getInt64(0)), strictly_better(o, acc, v));
  }
  // v beats acc for argmin/argmax o: smaller or larger, for floats also a NaN over a number
  // (scalars, or vectors lane by lane).
  Value* strictly_better(const kir::Output& o, Value* acc, Value* v) {
    bool is_max = o.fn == ReduceFn::ArgMax;
    if (is_float(o.type)) {
      Value* cmp = is_max ? b_.CreateFCmpOGT(v, acc) : b_.CreateFCmpOLT(v, acc);
      Value* nan_wins = b_.CreateAnd(b_.CreateFCmpUNO(v, v), b_.CreateFCmpORD(acc, acc));
      return b_.CreateOr(cmp, nan_wins);
    }
    if (o.type == DType::Bool) return is_max ? b_.CreateICmpUGT(v, acc) : b_.CreateICmpULT(v, acc);
    return is_max ? b_.CreateICmpSGT(v, acc) : b_.CreateICmpSLT(v, acc);
  }

  void finish_inner_reductions() {
    for (size_t o = 0; o < k_.outputs.size(); ++o) {
      if (!folds_inner(o)) continue;
      fold_into_memory(o, address(out_maps_[o], true), acc_[o], acc_idx_[o]);
    }
  }

  Value* from_mem(Value* v, DType t) {
    return t == DType::Bool ? b_.CreateICmpNE(v, b_.getInt8(0)) : v;
  }
  Value* to_mem(Value* v, DType t) {
    return t == DType::Bool ? b_.CreateZExt(v, b_.getInt8Ty()) : v;
  }

  // acc (op) v for a reduction; floating-point sums may be reassociated (vectorized).
  Value* combine(const kir::Output& o, Value* acc, Value* v) {
    bool fp = is_float(o.type);
    switch (o.fn) {
      case ReduceFn::Sum:
      case ReduceFn::Mean:
        if (fp) {
          auto* r = b_.CreateFAdd(acc, v);
          llvm::cast<llvm::Instruction>(r)->setHasAllowReassoc(true);
          return r;
        }
        return b_.CreateAdd(acc, v);
      case ReduceFn::Prod:
        if (fp) {
          auto* r = b_.CreateFMul(acc, v);
          llvm::cast<llvm::Instruction>(r)->setHasAllowReassoc(true);
          return r;
        }
        return b_.CreateMul(acc, v);
      case ReduceFn::Min:
      case ReduceFn::Max:
        // Floats: IEEE 754-2019 minimum/maximum (a NaN operand gives NaN; -0 < +0), which LLVM
        // vectorizes as a reduction, unlike min_max's order-dependent select (5x slower).
        if (fp)
          return b_.CreateBinaryIntrinsic(
              o.fn == ReduceFn::Max ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, acc, v);
        return min_max(acc, v, o.type, o.fn == ReduceFn::Max);
      case ReduceFn::All:
        return b_.CreateAnd(acc, v);
      case ReduceFn::Any:
        return b_.CreateOr(acc, v);
      case ReduceFn::ArgMin:  // arg_step
      case ReduceFn::ArgMax:
        break;
    }
    throw InternalError("codegen: combine of an arg reduction (arg_step folds those)");
  }

  // NaN-propagating maximum/minimum (NumPy's maximum/minimum and max/min reductions).
  Value* min_max(Value* a, Value* b, DType t, bool is_max) {
    if (t == DType::Bool) return is_max ? b_.CreateOr(a, b) : b_.CreateAnd(a, b);
    if (!is_float(t))
      return b_.CreateBinaryIntrinsic(is_max ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, a, b);
    Value* better = is_max ? b_.CreateFCmpOGT(a, b) : b_.CreateFCmpOLT(a, b);
    Value* a_nan = b_.CreateFCmpUNO(a, a);
    return b_.CreateSelect(b_.CreateOr(better, a_nan), a, b);
  }

  Value* fconst(DType t, double v) { return llvm::ConstantFP::get(reg_type(t), v); }
  Value* dconst(double v) { return llvm::ConstantFP::get(b_.getDoubleTy(), v); }

  Value* call_intrinsic(llvm::Intrinsic::ID id, Value* x) { return b_.CreateUnaryIntrinsic(id, x); }

  // A transcendental function of one or two arguments (see MathMode).
  Value* math(const std::string& name, std::vector<Value*> args) {
    llvm::Type* t = args[0]->getType();
    bool f32 = t->isFloatTy();
    std::string libm = name + (f32 ? "f" : "");
    std::vector<llvm::Type*> types(args.size(), t);
    auto* fty = llvm::FunctionType::get(t, types, false);
    llvm::FunctionCallee callee;
    if (mode_.precise) {
      callee = m_.getOrInsertFunction(libm, fty);
    } else {
      callee = vm_wrapper(libm, fty, f32);
    }
    auto* call = b_.CreateCall(callee, args);
    call->setDoesNotThrow();
    call->setDoesNotAccessMemory();
    return call;
  }

  // kiln_vm_<fn>: evaluates the one libmvec variant on a splat of the arguments and returns lane
  // 0. The vectorizer replaces calls to it by direct calls of the variant (vector_mappings).
  llvm::FunctionCallee vm_wrapper(const std::string& libm, llvm::FunctionType* fty, bool f32) {
    std::string wname = "kiln_vm_" + libm;
    if (llvm::Function* f = m_.getFunction(wname)) return f;
    unsigned lanes = mode_.lanes * (f32 ? 2 : 1);
    llvm::Type* t = fty->getReturnType();
    auto* vt = llvm::FixedVectorType::get(t, lanes);
    std::vector<llvm::Type*> vtypes(fty->getNumParams(), vt);
    std::string vname = std::string("_ZGV") + mode_.isa + "N" + std::to_string(lanes) +
                        std::string(fty->getNumParams(), 'v') + "_" + libm;
    auto vcallee = m_.getOrInsertFunction(vname, llvm::FunctionType::get(vt, vtypes, false));
    auto* w = llvm::Function::Create(fty, llvm::Function::InternalLinkage, wname, m_);
    w->addFnAttr(llvm::Attribute::NoInline);
    w->addFnAttr(llvm::Attribute::NoUnwind);
    w->setDoesNotAccessMemory();
    llvm::IRBuilder<> wb(llvm::BasicBlock::Create(ctx_, "entry", w));
    std::vector<Value*> splats;
    for (auto& a : w->args()) splats.push_back(wb.CreateVectorSplat(lanes, &a));
    auto* vcall = wb.CreateCall(vcallee, splats);
    vcall->setDoesNotThrow();
    vcall->setDoesNotAccessMemory();
    wb.CreateRet(wb.CreateExtractElement(vcall, uint64_t{0}));
    return w;
  }

  Value* emit(const kir::Value& v) {
    switch (v.op) {
      case kir::VOp::Param:
        return params_[v.index];
      case kir::VOp::Leaf:
        return leaf(v.index);
      case kir::VOp::Const:
        if (is_float(v.type)) return fconst(v.type, v.f);
        if (v.type == DType::Bool) return b_.getInt1(v.i != 0);
        return llvm::ConstantInt::get(reg_type(v.type), static_cast<uint64_t>(v.i), true);
      case kir::VOp::Unary:
        return unary(UnaryFn(v.fn), vals_[v.a], k_.values[v.a].type, v.type);
      case kir::VOp::Binary:
        return binary(BinaryFn(v.fn), vals_[v.a], vals_[v.b], k_.values[v.a].type);
      case kir::VOp::Select:
        return b_.CreateSelect(vals_[v.a], vals_[v.b], vals_[v.c]);
      case kir::VOp::Cast:
        return cast(vals_[v.a], k_.values[v.a].type, v.type);
      case kir::VOp::Row:
        return row_vals_[v.index];
    }
    return nullptr;
  }

  Value* leaf(int l) {
    const kir::Leaf& lf = k_.leaves[l];
    Value* flat = address(maps_[l]);
    switch (lf.kind) {
      case kir::LeafKind::Memory: {
        llvm::Type* mt = mem_type(lf.dtype);
        return from_mem(not_in_outputs(b_.CreateLoad(mt, b_.CreateGEP(mt, ptrs_[l], flat))),
                        lf.dtype);
      }
      case kir::LeafKind::Iota:
        return flat;
      case kir::LeafKind::Random:
        if (tile_j_)
          return b_.CreateLoad(random_type(lf),
                               b_.CreateGEP(random_type(lf), tile_ptrs_.at(l), tile_j_));
        return random_value(lf, flat);
    }
    return nullptr;
  }

  // Philox4x32-10 of counter (lo(j), hi(j), stream, 0) under key (lo(seed), hi(seed)): block j,
  // which holds the words of elements 2j and 2j + 1; the same definition as support/philox.hpp,
  // which the tests compare against.
  std::array<Value*, 4> philox(Value* j, Value* seed, int64_t stream) {
    auto* i32 = b_.getInt32Ty();
    auto* i64 = b_.getInt64Ty();
    Value* c0 = b_.CreateTrunc(j, i32);
    Value* c1 = b_.CreateTrunc(b_.CreateLShr(j, 32), i32);
    Value* c2 = b_.getInt32(static_cast<uint32_t>(stream));
    Value* c3 = b_.getInt32(0);
    Value* k0 = b_.CreateTrunc(seed, i32);
    Value* k1 = b_.CreateTrunc(b_.CreateLShr(seed, 32), i32);
    for (int r = 0; r < 10; ++r) {
      if (r > 0) {
        k0 = b_.CreateAdd(k0, b_.getInt32(0x9E3779B9u));
        k1 = b_.CreateAdd(k1, b_.getInt32(0xBB67AE85u));
      }
      Value* p0 = b_.CreateMul(b_.CreateZExt(c0, i64), b_.getInt64(0xD2511F53u));
      Value* p1 = b_.CreateMul(b_.CreateZExt(c2, i64), b_.getInt64(0xCD9E8D57u));
      Value* hi0 = b_.CreateTrunc(b_.CreateLShr(p0, 32), i32);
      Value* lo0 = b_.CreateTrunc(p0, i32);
      Value* hi1 = b_.CreateTrunc(b_.CreateLShr(p1, 32), i32);
      Value* lo1 = b_.CreateTrunc(p1, i32);
      Value* n0 = b_.CreateXor(b_.CreateXor(hi1, c1), k0);
      Value* n2 = b_.CreateXor(b_.CreateXor(hi0, c3), k1);
      c0 = n0;
      c1 = lo1;
      c2 = n2;
      c3 = lo0;
    }
    return {c0, c1, c2, c3};
  }

  // Element `flat`'s two words (hi, lo): its half of block flat >> 1 (philox::element_words).
  std::pair<Value*, Value*> element_words(const kir::Leaf& lf, Value* flat) {
    auto w = philox(b_.CreateLShr(flat, 1), params_[lf.seed_param], lf.stream);
    Value* odd = b_.CreateTrunc(flat, b_.getInt1Ty());
    return {b_.CreateSelect(odd, w[2], w[0]), b_.CreateSelect(odd, w[3], w[1])};
  }

  Value* bits64(Value* hi, Value* lo) {
    auto* i64 = b_.getInt64Ty();
    return b_.CreateOr(b_.CreateShl(b_.CreateZExt(hi, i64), 32), b_.CreateZExt(lo, i64));
  }

  // 53 random bits ((hi << 32 | lo) >> 11) as a double in [0, 1): computed as
  // double(hi) * 2^21 + double(lo >> 11), two exact 32-bit conversions whose sum is exact, so the
  // value is the reference's while every step vectorizes (no 64-bit integer -> double on AVX2).
  Value* uniform(Value* hi, Value* lo) {
    auto* f64 = b_.getDoubleTy();
    Value* h = b_.CreateUIToFP(hi, f64);
    Value* l = b_.CreateUIToFP(b_.CreateLShr(lo, 11), f64);
    Value* bits = b_.CreateFAdd(b_.CreateFMul(h, dconst(0x1.0p21)), l);
    return b_.CreateFMul(bits, dconst(0x1.0p-53));
  }

  // The register type of a random leaf's values.
  llvm::Type* random_type(const kir::Leaf& lf) {
    return lf.random == RandomKind::Integers ? b_.getInt64Ty() : b_.getDoubleTy();
  }

  // kZigX as a constant array in the module.
  Value* zig_table() {
    if (!zig_x_) {
      auto* data = llvm::ConstantDataArray::get(ctx_, llvm::ArrayRef<double>(philox::kZigX));
      auto* g = new llvm::GlobalVariable(m_, data->getType(), true,
                                         llvm::GlobalValue::PrivateLinkage, data, "kiln_zig_x");
      g->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
      zig_x_ = g;
    }
    return zig_x_;
  }

  // standard_normal in full: support/philox.hpp's function, linked into the process.
  Value* normal_slow(const kir::Leaf& lf, Value* flat) {
    auto* i64 = b_.getInt64Ty();
    auto callee = m_.getOrInsertFunction(
        "kiln_normal_slow", llvm::FunctionType::get(b_.getDoubleTy(), {i64, i64, i64}, false));
    auto* call =
        b_.CreateCall(callee, {params_[lf.seed_param], b_.getInt64(uint64_t(lf.stream)), flat});
    call->setDoesNotThrow();
    return call;
  }

  // A random leaf's value at a flat index, outside tiled loops (0-d kernels): a normal is the
  // full function (kiln_normal_slow).
  Value* random_value(const kir::Leaf& lf, Value* flat) {
    if (lf.random == RandomKind::Normal) return normal_slow(lf, flat);
    auto [hi, lo] = element_words(lf, flat);
    return value_of_words(lf, hi, lo);
  }

  // A random leaf's value from an element's pair of words; a normal's is its fast path (NaN
  // where it rejects).
  Value* value_of_words(const kir::Leaf& lf, Value* hi, Value* lo) {
    switch (lf.random) {
      case RandomKind::Uniform:
        return uniform(hi, lo);
      case RandomKind::Normal: {
        auto* f64 = b_.getDoubleTy();
        auto* i64 = b_.getInt64Ty();
        Value* u = uniform(hi, lo);
        Value* layer = b_.CreateZExt(b_.CreateAnd(lo, b_.getInt32(philox::kZigLayers - 1)), i64);
        Value* negative =
            b_.CreateICmpNE(b_.CreateAnd(lo, b_.getInt32(philox::kZigLayers)), b_.getInt32(0));
        auto* tt = llvm::ArrayType::get(f64, philox::kZigLayers + 1);
        Value* width =
            b_.CreateLoad(f64, b_.CreateInBoundsGEP(tt, zig_table(), {b_.getInt64(0), layer}));
        Value* inner = b_.CreateLoad(
            f64, b_.CreateInBoundsGEP(tt, zig_table(),
                                      {b_.getInt64(0), b_.CreateAdd(layer, b_.getInt64(1))}));
        Value* x = b_.CreateFMul(u, width);
        Value* sx = b_.CreateSelect(negative, b_.CreateFNeg(x), x);
        return b_.CreateSelect(b_.CreateFCmpOLT(x, inner), sx,
                               dconst(std::numeric_limits<double>::quiet_NaN()));
      }
      case RandomKind::Integers: {
        auto* i128 = b_.getInt128Ty();
        uint64_t range = uint64_t(lf.high) - uint64_t(lf.low);
        Value* x = b_.CreateZExt(bits64(hi, lo), i128);
        Value* prod = b_.CreateMul(x, llvm::ConstantInt::get(i128, range));
        Value* top = b_.CreateTrunc(b_.CreateLShr(prod, 64), b_.getInt64Ty());
        return b_.CreateAdd(top, b_.getInt64(uint64_t(lf.low)));
      }
    }
    return nullptr;
  }

  Value* unary(UnaryFn f, Value* x, DType in, DType out) {
    namespace I = llvm::Intrinsic;
    bool fp = is_float(in);
    switch (f) {
      case UnaryFn::Neg:
        return fp ? b_.CreateFNeg(x) : b_.CreateNeg(x);
      case UnaryFn::Abs:
        if (fp) return call_intrinsic(I::fabs, x);
        if (in == DType::Bool) return x;
        return b_.CreateBinaryIntrinsic(I::abs, x, b_.getFalse());
      case UnaryFn::Sqrt:
        return call_intrinsic(I::sqrt, x);
      case UnaryFn::Exp:
      case UnaryFn::Log:
      case UnaryFn::Sin:
      case UnaryFn::Cos:
      case UnaryFn::Tan:
      case UnaryFn::Expm1:
      case UnaryFn::Log1p:
      case UnaryFn::Tanh:
      case UnaryFn::Arcsin:
      case UnaryFn::Arccos:
      case UnaryFn::Arctan:
        return math(vm::call_name(vm::math_fn(f), mode_), {x});
      case UnaryFn::Floor:  // integers and bools: themselves (NumPy 2 keeps their dtype)
        return fp ? call_intrinsic(I::floor, x) : x;
      case UnaryFn::Ceil:
        return fp ? call_intrinsic(I::ceil, x) : x;
      case UnaryFn::Round:
        return fp ? call_intrinsic(I::roundeven, x) : x;
      case UnaryFn::IsNan:
        return fp ? b_.CreateFCmpUNO(x, x) : b_.getFalse();
      case UnaryFn::Sign:  // rewritten into primitives by codegen/legalize.cpp
      case UnaryFn::IsFinite:
      case UnaryFn::Sigmoid:
      case UnaryFn::Not:
        break;
      case UnaryFn::Invert:  // integers or bool (i1): flips every bit
        return b_.CreateNot(x);
    }
    (void)out;
    throw InternalError(std::string("codegen: ") + unary_name(f) +
                        " reached the printer; codegen/legalize.cpp rewrites it into primitives");
  }

  Value* binary(BinaryFn f, Value* a, Value* b, DType t) {
    bool fp = is_float(t);
    bool boolean = t == DType::Bool;
    switch (f) {
      case BinaryFn::Add:
        return fp ? b_.CreateFAdd(a, b) : boolean ? b_.CreateOr(a, b) : b_.CreateAdd(a, b);
      case BinaryFn::Sub:
        return fp ? b_.CreateFSub(a, b) : b_.CreateSub(a, b);
      case BinaryFn::Mul:
        return fp ? b_.CreateFMul(a, b) : boolean ? b_.CreateAnd(a, b) : b_.CreateMul(a, b);
      case BinaryFn::Div:
        return b_.CreateFDiv(a, b);
      case BinaryFn::Mod:  // rewritten into primitives by codegen/legalize.cpp
        break;
      case BinaryFn::FMod:
        return fp ? b_.CreateFRem(a, b) : ifmod(a, b);
      case BinaryFn::CopySign:
        return b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, a, b);
      case BinaryFn::Pow:
        if (fp) return math(vm::call_name(vm::MathFn::Pow, mode_), {a, b});
        return ipow(a, b);
      case BinaryFn::Lt:
      case BinaryFn::Le:
      case BinaryFn::Gt:
      case BinaryFn::Ge:
      case BinaryFn::Eq:
      case BinaryFn::Ne:
        return compare(f, a, b, t);
      case BinaryFn::And:
        return b_.CreateAnd(a, b);
      case BinaryFn::Or:
        return b_.CreateOr(a, b);
      case BinaryFn::Max:
        return min_max(a, b, t, true);
      case BinaryFn::Min:
        return min_max(a, b, t, false);
      case BinaryFn::BitAnd:
        return b_.CreateAnd(a, b);
      case BinaryFn::BitOr:
        return b_.CreateOr(a, b);
      case BinaryFn::BitXor:
        return b_.CreateXor(a, b);
      case BinaryFn::LeftShift:
      case BinaryFn::RightShift:
        return shift(f == BinaryFn::LeftShift, a, b);
      case BinaryFn::FloorDiv:  // floats: rewritten into primitives by codegen/legalize.cpp
        if (!fp) return floordiv_int(a, b);
        break;
    }
    throw InternalError(std::string("codegen: ") + binary_name(f) +
                        " reached the printer; codegen/legalize.cpp rewrites it into primitives");
  }

  // NumPy's shifts: an amount outside [0, bits) gives 0 (left, and right of a non-negative
  // value) or -1 (right of a negative value) instead of LLVM's poison.
  Value* shift(bool left, Value* a, Value* b) {
    auto* t = a->getType();
    unsigned bits = t->getIntegerBitWidth();
    Value* in_range = b_.CreateICmpULT(b, llvm::ConstantInt::get(t, bits));
    Value* amount = b_.CreateAnd(b, llvm::ConstantInt::get(t, bits - 1));
    Value* zero = llvm::ConstantInt::get(t, 0);
    if (left) return b_.CreateSelect(in_range, b_.CreateShl(a, amount), zero);
    Value* fill =
        b_.CreateSelect(b_.CreateICmpSLT(a, zero), llvm::ConstantInt::get(t, -1, true), zero);
    return b_.CreateSelect(in_range, b_.CreateAShr(a, amount), fill);
  }

  // Integer floor division: x // 0 is 0 (NumPy warns), MIN // -1 wraps to MIN, otherwise the
  // truncated quotient less one where the signs differ and the division is not exact.
  Value* floordiv_int(Value* a, Value* b) {
    auto* t = a->getType();
    Value* zero = llvm::ConstantInt::get(t, 0);
    Value* minus_one = llvm::ConstantInt::get(t, -1, true);
    Value* special = b_.CreateOr(b_.CreateICmpEQ(b, zero), b_.CreateICmpEQ(b, minus_one));
    Value* safe_b = b_.CreateSelect(special, llvm::ConstantInt::get(t, 1), b);
    Value* q = b_.CreateSDiv(a, safe_b);
    Value* inexact = b_.CreateICmpNE(b_.CreateMul(q, safe_b), a);
    Value* signs_differ = b_.CreateICmpSLT(b_.CreateXor(a, safe_b), zero);
    q = b_.CreateSelect(b_.CreateAnd(inexact, signs_differ),
                        b_.CreateSub(q, b_.getIntN(t->getIntegerBitWidth(), 1)), q);
    Value* by_minus_one = b_.CreateSub(zero, a);  // wraps for MIN, as NumPy's result
    return b_.CreateSelect(b_.CreateICmpEQ(b, zero), zero,
                           b_.CreateSelect(b_.CreateICmpEQ(b, minus_one), by_minus_one, q));
  }

  // Comparisons as data: ordered float predicates (NaN compares false) except !=, which is true
  // for NaN as in NumPy; bools compare unsigned (false < true), integers signed.
  Value* compare(BinaryFn f, Value* a, Value* b, DType t) {
    using P = llvm::CmpInst::Predicate;
    struct Row {
      BinaryFn fn;
      P fp, boolean, integer;
    };
    static const Row rows[] = {
        {BinaryFn::Lt, P::FCMP_OLT, P::ICMP_ULT, P::ICMP_SLT},
        {BinaryFn::Le, P::FCMP_OLE, P::ICMP_ULE, P::ICMP_SLE},
        {BinaryFn::Gt, P::FCMP_OGT, P::ICMP_UGT, P::ICMP_SGT},
        {BinaryFn::Ge, P::FCMP_OGE, P::ICMP_UGE, P::ICMP_SGE},
        {BinaryFn::Eq, P::FCMP_OEQ, P::ICMP_EQ, P::ICMP_EQ},
        {BinaryFn::Ne, P::FCMP_UNE, P::ICMP_NE, P::ICMP_NE},
    };
    for (const Row& r : rows)
      if (r.fn == f)
        return b_.CreateCmp(is_float(t) ? r.fp : t == DType::Bool ? r.boolean : r.integer, a, b);
    throw InternalError("codegen: not a comparison");
  }

  // fmod of integers: C's truncated remainder, and 0 for the divisors 0 and -1 (srem is undefined
  // there; replacing them with 1 keeps it defined).
  Value* ifmod(Value* a, Value* b) {
    auto* t = a->getType();
    Value* zero = llvm::ConstantInt::get(t, 0);
    Value* bad = b_.CreateOr(b_.CreateICmpEQ(b, zero),
                             b_.CreateICmpEQ(b, llvm::ConstantInt::get(t, -1, true)));
    Value* r = b_.CreateSRem(a, b_.CreateSelect(bad, llvm::ConstantInt::get(t, 1), b));
    return b_.CreateSelect(bad, zero, r);
  }

  // Integer power by squaring through a helper; a negative exponent is an error the helper
  // records for the runtime (so the call touches memory the kernel cannot see).
  Value* ipow(Value* a, Value* b) {
    auto* t = a->getType();
    auto* i64 = b_.getInt64Ty();
    auto callee =
        m_.getOrInsertFunction("kiln_ipow", llvm::FunctionType::get(i64, {i64, i64}, false));
    auto* call = b_.CreateCall(callee, {b_.CreateSExt(a, i64), b_.CreateSExt(b, i64)});
    call->setDoesNotThrow();
    call->setOnlyAccessesInaccessibleMemory();
    return b_.CreateTrunc(call, t);
  }

  Value* cast(Value* x, DType from, DType to) {
    if (from == to) return x;
    llvm::Type* t = reg_type(to);
    if (to == DType::Bool) {
      return is_float(from) ? b_.CreateFCmpUNE(x, fconst(from, 0))
                            : b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
    }
    if (from == DType::Bool) return is_float(to) ? b_.CreateUIToFP(x, t) : b_.CreateZExt(x, t);
    if (is_float(from) && is_float(to)) return b_.CreateFPCast(x, t);
    if (is_float(from))  // saturating: NaN -> 0, out of range -> the nearest limit (no UB)
      return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {t, x->getType()}, {x});
    if (is_float(to)) return b_.CreateSIToFP(x, t);
    return b_.CreateSExtOrTrunc(x, t);
  }

  const kir::Kernel& k_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  IRBuilder<> b_;
  std::string name_;
  MathMode mode_;
  Tuning tuning_;
  llvm::Function* fn_ = nullptr;
  Value *I_ = nullptr, *F_ = nullptr, *P_ = nullptr;
  std::vector<Value*> ext_, ptrs_, out_ptrs_, idx_ptrs_, params_, idx_, vals_;
  std::vector<Value*> acc_, acc_next_, acc_idx_, acc_idx_next_;
  // The row stage: whether it is being printed, each row output's per-row result, and per value
  // whether the row stage or the rest needs it and whether it is hoisted out of the rest's
  // innermost loop (the same for every element of a row).
  bool row_stage_ = false;
  std::vector<Value*> row_vals_;
  std::vector<bool> need_row_, need_main_, hoist_;
  bool tile_rows_ = false;  // rows run in tiles (row_tiled_loop)
  // Tiles only to jam kRowJam rows: a partial keeping the innermost dim folds the outer rows
  // (x.sum(axis=0)) and nothing else needs tiles. Its partial row is loaded and stored once per
  // kRowJam rows instead of once per row; each element still folds its rows in order (the same
  // bits). 6000 x 6000 float64 in 2000 x 2000 chunks, one thread (Xeon AMX): sum(axis=0) 26.8 ->
  // 19.8-20.5 ms (NumPy 18.8-20.4), max(axis=0) 31 -> 25 (26.3-26.9), argmax(axis=0) 43 -> 30.
  bool jam_only_ = false;
  std::map<size_t, Value*> row_bufs_;               // row output -> its tile's results
  std::vector<std::pair<int, Value*>> hoist_bufs_;  // hoisted value -> its tile's values
  std::vector<Map> maps_, out_maps_;
  std::map<int, Value*> tile_bufs_;  // random leaf -> its tile of values (kernels of rank > 0)
  // argmin/argmax outputs folded along the innermost dim (kernels without random leaves) -> a
  // strip's values and their indices (see scan_strip); the current element's place in its strip.
  std::map<size_t, std::pair<Value*, Value*>> scan_bufs_;
  Value* strip_j_ = nullptr;
  Value* tile_j_ = nullptr;          // set while emitting the body of a tiled loop
  std::map<int, Value*> tile_ptrs_;  // random leaf -> its values of the current tile
  // The rows of a jammed rest while its innermost loop is emitted (row_tiled_loop): each row's
  // index along jam_dim_ and its hoisted values (hoist_bufs_' order).
  struct JamRow {
    Value* index;
    std::vector<Value*> hoisted;
  };
  std::vector<JamRow> jam_;
  int jam_dim_ = 0;
  Value* zig_x_ = nullptr;
  std::vector<llvm::MDNode*> own_scope_, other_scopes_;  // make_output_scopes
  llvm::MDNode* all_outputs_ = nullptr;
};

}  // namespace

llvm::Function* print_llvm(const kir::Kernel& k, llvm::Module& m, const std::string& name,
                           const MathMode& mode, const Tuning& tuning) {
  return Printer(k, m, name, mode, tuning).run();
}

std::vector<VectorMapping> vector_mappings(const MathMode& mode) {
  std::vector<VectorMapping> v;
  if (mode.precise) return v;
  // libm's names and, for the functions Kiln has, Kiln's (kiln_exp): both sets are mapped, the
  // printer calls one of them (vm::call_name).
  for (int m = 0; m < 2 * vm::kNumMathFns; ++m) {
    auto f = static_cast<vm::MathFn>(m % vm::kNumMathFns);
    bool kiln = m >= vm::kNumMathFns;
    if (kiln && !vm::kiln_has(f)) continue;
    std::string fn = (kiln ? "kiln_" : "") + std::string(vm::libm_name(f));
    std::string params(static_cast<size_t>(vm::arity(f)), 'v');
    for (bool f32 : {false, true}) {
      std::string libm = std::string(fn) + (f32 ? "f" : "");
      unsigned lanes = static_cast<unsigned>(mode.lanes) * (f32 ? 2 : 1);
      std::string n = std::to_string(lanes);
      v.push_back({"kiln_vm_" + libm,
                   std::string("_ZGV") + mode.isa + "N" + n + params + "_" + libm,
                   "_ZGV_LLVM_N" + n + params, lanes});
    }
  }
  return v;
}

int join_sincos(llvm::Module& m) {
  // "_ZGVeN8v_kiln_sin" -> ("_ZGVeN8v_", "") and "..._kiln_cosf" -> (..., "f"): the variant's
  // prefix (ISA and lanes) and element suffix, which the joint variant shares.
  auto split = [](llvm::StringRef name, llvm::StringRef fn, std::string& key) {
    if (!name.starts_with("_ZGV")) return false;
    size_t at = name.find("v_kiln_");
    if (at == llvm::StringRef::npos) return false;
    llvm::StringRef rest = name.substr(at + 7);
    if (rest != fn && rest != (fn + "f").str()) return false;
    key = name.substr(0, at + 2).str() + (rest.size() > fn.size() ? "f" : "");
    return true;
  };
  int joined = 0;
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    std::vector<std::pair<llvm::CallInst*, llvm::CallInst*>> pairs;  // (sin, cos)
    for (llvm::BasicBlock& bb : f) {
      std::map<std::pair<Value*, std::string>, llvm::CallInst*> sins;
      std::vector<std::pair<std::pair<Value*, std::string>, llvm::CallInst*>> coses;
      for (llvm::Instruction& in : bb) {
        auto* call = llvm::dyn_cast<llvm::CallInst>(&in);
        llvm::Function* callee = call ? call->getCalledFunction() : nullptr;
        if (!callee || call->arg_size() != 1) continue;
        std::string key;
        if (split(callee->getName(), "sin", key))
          sins.emplace(std::make_pair(call->getArgOperand(0), key), call);
        else if (split(callee->getName(), "cos", key))
          coses.push_back({{call->getArgOperand(0), key}, call});
      }
      for (auto& [k, cos] : coses) {
        auto it = sins.find(k);
        if (it == sins.end() || !it->second) continue;
        pairs.push_back({it->second, cos});
        it->second = nullptr;  // each sin serves one cos
      }
    }
    if (pairs.empty()) continue;
    llvm::IRBuilder<> entry(&f.getEntryBlock(), f.getEntryBlock().getFirstInsertionPt());
    for (auto [sin, cos] : pairs) {
      llvm::Type* vt = sin->getType();
      std::string name = sin->getCalledFunction()->getName().str();
      name = name.substr(0, name.find("v_kiln_") + 2) + "kiln_sincos" +
             (name.back() == 'f' ? "f" : "");
      llvm::Type* ptr = llvm::PointerType::getUnqual(m.getContext());
      auto callee = m.getOrInsertFunction(
          name,
          llvm::FunctionType::get(llvm::Type::getVoidTy(m.getContext()), {vt, ptr, ptr}, false));
      llvm::Align align(m.getDataLayout().getPrefTypeAlign(vt));
      llvm::AllocaInst* s_slot = entry.CreateAlloca(vt);
      llvm::AllocaInst* c_slot = entry.CreateAlloca(vt);
      s_slot->setAlignment(align);
      c_slot->setAlignment(align);
      llvm::IRBuilder<> b(sin->comesBefore(cos) ? sin : cos);
      auto* joint = b.CreateCall(callee, {sin->getArgOperand(0), s_slot, c_slot});
      joint->setDoesNotThrow();
      joint->setOnlyAccessesArgMemory();
      sin->replaceAllUsesWith(b.CreateAlignedLoad(vt, s_slot, align));
      cos->replaceAllUsesWith(b.CreateAlignedLoad(vt, c_slot, align));
      sin->eraseFromParent();
      cos->eraseFromParent();
      ++joined;
    }
  }
  return joined;
}

}  // namespace kiln::cpu
