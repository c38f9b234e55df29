#include "passes/fuse.hpp"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_set>

#include "ir/linalg.hpp"
#include "ir/view.hpp"
#include "support/error.hpp"

namespace kiln {

namespace {

bool is_scalar_like(const Node& n) {
  return n.op == Op::Scalar || (n.op == Op::Broadcast && n.in(0)->op == Op::Scalar);
}

// Why `n` must exist in memory, or "" when it can be computed inside its consumers' kernels.
std::string materialize_reason(const Node& n, bool enabled, bool is_output) {
  std::string out = is_output ? ", output needed" : "";
  if (n.op == Op::Reduce) return "reduction across blocks" + out;
  if (n.op == Op::Concat) return "concatenate writes its pieces in place" + out;
  if (n.op == Op::MatMul) return "library call (GEMM)" + out;
  if (n.op == Op::Linalg)
    return std::string("library call (LAPACK ") + linalg_routines(LinalgFn(n.attrs.ints[0])) + ")" +
           out;
  if (n.curand_leaf()) return "library call (cuRAND)" + out;
  if (is_output) return "output needed";
  if (!enabled && !is_scalar_like(n) && op_category(n.op) != OpCategory::Leaf)
    return "fusion disabled (--no-fuse)";
  return "";
}

// Compile time grows faster than linearly with a kernel's size (LLVM's passes over one long
// basic block: 1000 sin/+ ops took 0.3 s, 4000 took 3.5 s), so a group stops growing past this
// many cost units and the node that crosses it is materialized. One unit per element-wise op,
// kTranscendentalCost per call into the vector math library (several times the code of an add).
// Measured with bench/jit_bench.cpp (BM_CompileKernel); see bench/RESULTS.md.
constexpr int64_t kMaxKernelCost = 512;
constexpr int64_t kTranscendentalCost = 4;

int64_t op_cost(const Node& n) {
  if (n.op == Op::Binary) return n.binary() == BinaryFn::Pow ? kTranscendentalCost : 1;
  return n.op == Op::Unary && is_transcendental(n.unary()) ? kTranscendentalCost : 1;
}

// Estimated cost of computing `n` inline: its own op plus its operands' inline costs (a shared
// operand of a diamond counts once per distinct operand of each node, so deep diamonds are
// over-estimated: they split earlier, never later). Saturates well above the limit.
int64_t inline_cost(const Node& n, const std::unordered_map<const Node*, int64_t>& cost) {
  int64_t c = op_cost(n);
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    bool repeated = false;
    for (size_t j = 0; j < k; ++j) repeated = repeated || n.inputs[j] == n.inputs[k];
    auto it = cost.find(n.in(k).get());
    if (!repeated && it != cost.end()) c = std::min(c + it->second, 4 * kMaxKernelCost);
  }
  return c;
}

// Fills f->producer and every group's deps: the groups that fill a materialized node it reads.
void compute_deps(FusedGraph* f) {
  f->producer.clear();
  for (size_t k = 0; k < f->groups.size(); ++k)
    for (const auto& o : f->groups[k].outputs)
      f->producer[o.target.get()].push_back(static_cast<int>(k));
  for (auto& gr : f->groups) {
    std::vector<int> deps;
    std::vector<const Node*> stack;
    std::unordered_set<const Node*> seen;
    for (const auto& o : gr.outputs) {
      // A stored node reads its inputs; a reduction or concatenation piece reads its value.
      if (o.value == o.target)
        for (const auto& in : o.value->inputs) stack.push_back(in.get());
      else
        stack.push_back(o.value.get());
    }
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      auto p = f->producer.find(n);
      if (p != f->producer.end()) {
        // A group reads its own row outputs as row values, never from memory.
        for (int k : p->second)
          if (&f->groups[k] != &gr) deps.push_back(k);
        continue;
      }
      for (const auto& in : n->inputs) stack.push_back(in.get());
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    gr.deps = std::move(deps);
  }
}

// A library call reads its operands in place, through their views: a Buffer leaf or a
// materialized array. GEMM needs a row- or column-major map (X.T @ r reads X with the transpose
// flag); LAPACK copies its operand into a workspace (it overwrites it), so any map serves. Any
// other operand (computed; for GEMM also broadcast or strided both ways) is materialized.
void mark_library_operands(const Node& call, std::unordered_map<const Node*, std::string>* reason) {
  for (const auto& in : call.inputs) {
    auto vb = resolve_view_base(*in, [&](const Node* x) { return reason->count(x) > 0; });
    bool in_place = vb && (vb->materialized || vb->base->op == Op::Buffer) &&
                    (call.op == Op::Linalg || matrix_layout(in->shape[0], in->shape[1], vb->map));
    bool stored = vb && (vb->materialized || vb->base->op == Op::Buffer);
    if (!in_place && !reason->count(in.get()))
      (*reason)[in.get()] = std::string("operand of a library call (") + op_name(call.op) +
                            (stored ? ") in a layout BLAS cannot read" : "), computed first");
  }
}

// fuse's steps, in order: find_boundaries (which nodes must exist in memory, and why),
// make_groups (one group per boundary), merge_siblings (independent groups over one domain share
// a kernel), merge_rows (a reduction along rows joins the kernel that reads it row by row),
// sort_groups (topological order again). compute_deps follows each that moves groups.

// Why each node must be materialized (outputs, reductions, concatenations, --no-fuse, the kernel
// size limit, views that cannot fold into a leaf's index map); absent: computed inline.
std::unordered_map<const Node*, std::string> find_boundaries(const Graph& g,
                                                             const std::vector<const Node*>& order,
                                                             bool enabled) {
  std::unordered_map<const Node*, std::string> reason;
  for (const auto& o : g.outputs) reason[o.get()] = materialize_reason(*o, enabled, true);
  std::unordered_map<const Node*, int64_t> cost;  // inline cost of computed element-wise nodes
  for (const Node* n : order) {
    if (!reason.count(n)) {
      std::string r = materialize_reason(*n, enabled, false);
      if (!r.empty()) reason[n] = r;
    }
    if (op_category(n->op) == OpCategory::Elementwise && !is_scalar_like(*n)) {
      int64_t c = inline_cost(*n, cost);
      if (c > kMaxKernelCost && !reason.count(n))
        reason[n] = "kernel size limit (" + std::to_string(c) + " cost units fused, limit " +
                    std::to_string(kMaxKernelCost) + ": compile time grows faster than the kernel)";
      if (!reason.count(n)) cost[n] = c;
    }
    // A view is folded into the index map of the chain's base (a leaf or a materialized array).
    // If its input is computed, or the chain does not compose (a reshape of a non-contiguous
    // view), its input is materialized first; a reshape of a contiguous array always composes.
    if (is_view(n->op) && !is_scalar_like(*n)) {
      const Node* in = n->in(0).get();
      std::vector<const Node*> chain{n};
      const Node* base = in;
      while (is_view(base->op) && !reason.count(base)) {
        chain.push_back(base);
        base = base->in(0).get();
      }
      bool materialized = reason.count(base) > 0;
      if (!materialized && base->op == Op::Scalar) continue;  // a broadcast scalar
      if (!materialized && op_category(base->op) != OpCategory::Leaf) {
        reason[in] = std::string(op_name(n->op)) + " of a computed array";
        continue;
      }
      AffineMap m = materialized ? AffineMap{0, c_strides(base->shape)}
                                 : AffineMap{base->attrs.offset, base->attrs.strides};
      bool composes = true;
      for (size_t k = chain.size(); k-- > 0 && composes;) {
        auto next = compose_view(*chain[k], m);
        if (next)
          m = *next;
        else
          composes = false;
      }
      if (!composes) reason[in] = "reshape of a non-contiguous view needs a copy";
    }
    if (n->op == Op::MatMul || n->op == Op::Linalg) mark_library_operands(*n, &reason);
  }
  return reason;
}

// Library results that a concatenation takes whole, in C order, as one contiguous run of its
// elements (its leading dims before the axis are 1), in its dtype, and that nothing else reads:
// the call writes straight into the concatenation instead of into an array of its own that a
// kernel then copies. TSQR's Q and U blocks are such results. Returns piece -> call.
std::unordered_map<const Node*, const Node*> placed_library_results(
    const Graph& g, const std::vector<const Node*>& order,
    const std::unordered_map<const Node*, std::string>& reason) {
  std::unordered_map<const Node*, int> uses;
  for (const Node* n : order)
    for (const auto& in : n->inputs) ++uses[in.get()];
  for (const auto& o : g.outputs) ++uses[o.get()];
  std::unordered_map<const Node*, const Node*> placed;
  for (const Node* n : order) {
    if (n->op != Op::Concat) continue;
    auto axis = static_cast<size_t>(n->attrs.ints[0]);
    bool contiguous = true;
    for (size_t d = 0; d < axis; ++d) contiguous = contiguous && n->shape[d] == 1;
    if (!contiguous) continue;
    for (const auto& in : n->inputs) {
      auto vb = resolve_view_base(*in, [&](const Node* x) { return reason.count(x) > 0; });
      if (!vb || !vb->materialized) continue;
      const Node* base = vb->base;
      if ((base->op != Op::MatMul && base->op != Op::Linalg) || base->dtype != n->dtype ||
          num_elements(base->shape) != num_elements(in->shape) || vb->map.offset != 0 ||
          vb->map.strides != c_strides(in->shape))
        continue;
      bool once = true;  // the piece, each view down to the call, and the call: one reader each
      for (const Node* x = in.get(); once; x = x->in(0).get()) {
        once = uses[x] == 1;
        if (x == base) break;
      }
      if (once) placed[in.get()] = base;
    }
  }
  return placed;
}

// One group per materialized node (per piece for concatenations), in topological order; a
// library call placed in a concatenation is that piece's group.
void make_groups(const Graph& g, const std::vector<const Node*>& order,
                 const std::unordered_map<const Node*, std::string>& reason, FusedGraph* f) {
  std::unordered_map<const Node*, NodeRef> refs;
  for (const auto& o : g.outputs) refs.emplace(o.get(), o);
  for (const Node* n : order)
    for (const auto& in : n->inputs) refs.emplace(in.get(), in);
  const auto placed_piece = placed_library_results(g, order, reason);
  std::unordered_set<const Node*> placed;  // calls written into a concatenation
  for (const auto& [piece, call] : placed_piece) placed.insert(call);
  for (const Node* n : order) {
    auto it = reason.find(n);
    if (it == reason.end() || placed.count(n)) continue;
    f->boundaries.push_back({n, it->second});
    NodeRef self = refs.at(n);
    if (n->op == Op::Reduce) {
      Group gr;
      gr.outputs.push_back({n->in(0), self, true, 0});
      gr.domain = n->in(0)->shape;
      gr.chunks = n->in(0)->chunks;
      f->groups.push_back(std::move(gr));
    } else if (n->op == Op::Concat) {
      int axis = static_cast<int>(n->attrs.ints[0]);
      Shape st = c_strides(n->shape);
      int64_t pos = 0;
      for (const auto& in : n->inputs) {
        Group gr;
        auto call = placed_piece.find(in.get());
        if (call != placed_piece.end()) {
          const NodeRef& c = refs.at(call->second);
          gr.outputs.push_back({c, self, false, pos * st[axis]});
          gr.domain = c->shape;
          gr.chunks = c->chunks;
          gr.library = true;
          pos += in->shape[axis];
          f->groups.push_back(std::move(gr));
          continue;
        }
        gr.outputs.push_back({in, self, false, pos * st[axis]});
        gr.domain = in->shape;
        gr.chunks = in->chunks;
        pos += in->shape[axis];
        f->groups.push_back(std::move(gr));
      }
    } else {
      Group gr;
      gr.outputs.push_back({self, self, false, 0});
      gr.domain = n->shape;
      gr.chunks = n->chunks;
      gr.library = n->op == Op::MatMul || n->op == Op::Linalg || n->curand_leaf();
      f->groups.push_back(std::move(gr));
    }
  }
  compute_deps(f);
}

bool writes_concat(const Group& g) {
  for (const auto& o : g.outputs)
    if (o.target->op == Op::Concat) return true;
  return false;
}

// What a group's kernel reads in bulk: leaves and materialized arrays with at least half as many
// distinct elements as its domain (not scalars, not a broadcast vector), each a node (interned:
// the same view of the same data is the same node).
std::set<const Node*> reads_of(const FusedGraph& f, const Group& g) {
  std::set<const Node*> reads, seen;
  int64_t domain = 1;
  for (int64_t d : g.domain) domain *= d;
  auto record = [&](const Node* n) {
    bool leaf = op_category(n->op) == OpCategory::Leaf;
    if (n->op == Op::Scalar || (!leaf && !f.producer.count(n))) return;
    int64_t distinct = 1;
    for (size_t d = 0; d < n->shape.size(); ++d)
      if (!leaf || n->attrs.strides.empty() || n->attrs.strides[d] != 0) distinct *= n->shape[d];
    if (2 * distinct >= domain) reads.insert(n);
  };
  std::function<void(const Node*)> visit = [&](const Node* n) {
    if (!seen.insert(n).second) return;
    for (const auto& in : n->inputs) {
      if (f.producer.count(in.get()) || op_category(in->op) == OpCategory::Leaf)
        record(in.get());
      else
        visit(in.get());
    }
  };
  for (const auto& o : g.outputs) {
    if (op_category(o.value->op) == OpCategory::Leaf)
      record(o.value.get());
    else
      visit(o.value.get());
  }
  return reads;
}

bool intersect(const std::set<const Node*>& a, const std::set<const Node*>& b) {
  for (const Node* n : a)
    if (b.count(n)) return true;
  return false;
}

// Merges independent groups over the same domain and chunks that read something in common into
// multi-output kernels (each group into the first earlier one it can join): one pass over the
// shared data. Groups that share nothing stay apart, as merging them saves no reads and only
// serializes their blocks (ten one-block slices of X, one per ADMM chunk, would run as one
// task). Cubic in the number of groups.
// How the CUDA printer splits a group's kernel over the threads of a block
// (codegen/cuda/cuda_printer.hpp): the dims every reduction keeps, whether it has a row stage,
// whether every reduction is over the whole domain. A kernel that splits over nothing runs each
// block on one GPU thread (KernelShape::Mode::Serial), thousands of times slower than its parts.
struct ThreadSplit {
  uint64_t keep = ~0ull;
  bool rows = false, full = true;
  bool splits() const { return (!rows && full) || keep != 0; }
};

ThreadSplit thread_split(const Group& g) {
  const size_t rank = g.domain.size();
  const uint64_t all = rank >= 64 ? ~0ull : (1ull << rank) - 1;
  ThreadSplit t;
  t.keep = all;
  for (const auto& o : g.outputs) {
    if (!o.reduce) continue;
    uint64_t reduced = 0;
    for (int ax : o.target->reduce_axes()) reduced |= 1ull << ax;
    t.keep &= all & ~reduced;
    t.full = t.full && (all & ~reduced) == 0;
    t.rows = t.rows || o.row;
  }
  return t;
}

ThreadSplit joined(ThreadSplit a, const ThreadSplit& b) {
  a.keep &= b.keep;
  a.rows = a.rows || b.rows;
  a.full = a.full && b.full;
  return a;
}

// With `gpu` (kernels printed for cuda and cuda-emu), independent groups over one domain whose
// merged kernel would run on one thread a block stay apart (x.sum(axis=0) and x.sum(axis=1)).
void merge_siblings(FusedGraph* f, bool gpu) {
  size_t n = f->groups.size();
  std::vector<std::set<const Node*>> reads(n);
  for (size_t a = 0; a < n; ++a) reads[a] = reads_of(*f, f->groups[a]);
  std::vector<std::vector<bool>> reach(n, std::vector<bool>(n, false));  // reach[a][b]: a needs b
  for (size_t a = 0; a < n; ++a)
    for (int d : f->groups[a].deps) {
      reach[a][d] = true;
      for (size_t b = 0; b < n; ++b)
        if (reach[d][b]) reach[a][b] = true;
    }
  std::vector<int> merged_into(n, -1);
  std::vector<ThreadSplit> split(n);  // of everything merged into each group so far
  for (size_t a = 0; a < n; ++a) split[a] = thread_split(f->groups[a]);
  for (size_t b = 0; b < n; ++b) {
    for (size_t a = 0; a < b; ++a) {
      if (merged_into[a] >= 0) continue;
      const Group& ga = f->groups[a];
      const Group& gb = f->groups[b];
      if (ga.domain != gb.domain || ga.chunks != gb.chunks) continue;
      if (ga.library || gb.library) continue;  // a library call is not a kernel
      // Pieces of one concatenation read different arrays: merged, they would only lose the
      // parallelism of their blocks (ten one-block pieces would run as one task).
      if (writes_concat(ga) && writes_concat(gb)) continue;
      if (!intersect(reads[a], reads[b])) continue;
      // Independent both ways. reach[.][a] and reach[a][.] stand for everything merged into a
      // (kept up to date below), so merging can never close a cycle between kernels.
      if (reach[b][a] || reach[a][b]) continue;
      ThreadSplit both = joined(split[a], split[b]);
      if (gpu && !both.splits() && split[a].splits() && split[b].splits()) continue;
      split[a] = both;
      merged_into[b] = static_cast<int>(a);
      reads[a].insert(reads[b].begin(), reads[b].end());
      // a now also needs what b needs, and whatever needed b needs a (and all a needs).
      for (size_t y = 0; y < n; ++y)
        if (reach[b][y]) reach[a][y] = true;
      for (size_t x = 0; x < n; ++x)
        if (reach[x][b] || reach[x][a]) {
          reach[x][a] = true;
          for (size_t y = 0; y < n; ++y)
            if (reach[a][y]) reach[x][y] = true;
        }
      break;
    }
  }
  std::vector<Group> out;
  std::vector<int> new_index(n, -1);
  for (size_t a = 0; a < n; ++a)
    if (merged_into[a] < 0) {
      new_index[a] = static_cast<int>(out.size());
      out.push_back(f->groups[a]);
    }
  for (size_t b = 0; b < n; ++b)
    if (merged_into[b] >= 0) {
      Group& dst = out[new_index[merged_into[b]]];
      new_index[b] = new_index[merged_into[b]];
      for (auto& o : f->groups[b].outputs) dst.outputs.push_back(o);
    }
  f->groups = std::move(out);
  compute_deps(f);
}

// What a group's kernel reads of `targets` (materialized nodes): whether every read is a row
// read (the view map make_reductions gives the result, 0 along the innermost dim), which targets
// it reads, and whether it generates random values (a kernel with a row stage cannot: random
// leaves run in tiles, see the CPU printer).
struct RowScan {
  bool random = false, other_read = false;
  std::set<const Node*> read;
};

RowScan scan_rows(const FusedGraph& f, const Group& g, const std::set<const Node*>& targets) {
  RowScan sc;
  auto materialized = [&](const Node* x) { return f.producer.count(x) > 0; };
  std::set<const Node*> seen;
  std::vector<const Node*> stack;
  for (const auto& o : g.outputs) {
    if (o.value != o.target || is_view(o.value->op)) {  // computed, or a view chain to resolve
      stack.push_back(o.value.get());
    } else {
      for (const auto& in : o.value->inputs) stack.push_back(in.get());
      if (o.value->op == Op::Random) sc.random = true;
    }
  }
  size_t rank = g.domain.size();
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (materialized(n)) {
      if (targets.count(n)) sc.other_read = true;  // read whole, not through a row view
      continue;
    }
    if (n->op == Op::Random) sc.random = true;
    if (is_view(n->op) && !is_scalar_like(*n)) {
      auto vb = resolve_view_base(*n, materialized);
      if (!vb) continue;
      if (!vb->materialized) {
        if (vb->base->op == Op::Random) sc.random = true;
        continue;
      }
      if (!targets.count(vb->base)) continue;
      const Node& r = *vb->base;
      bool row =
          r.op == Op::Reduce && rank > 0 && vb->map.offset == 0 && vb->map.strides.size() == rank;
      if (row) {
        std::vector<int64_t> want = r.result_strides();
        for (size_t d = 0; d + 1 < rank; ++d) row = row && vb->map.strides[d] == want[d];
        row = row && (vb->map.strides[rank - 1] == 0 || g.domain[rank - 1] == 1);
      }
      if (row)
        sc.read.insert(vb->base);
      else
        sc.other_read = true;
      continue;
    }
    for (const auto& in : n->inputs) stack.push_back(in.get());
  }
  return sc;
}

// A reduction the row stage computes: along the innermost dim of its domain only, with a per-row
// result the kernel can finish itself (not argmin/argmax, whose result is an index).
bool row_reduction(const GroupOutput& o, size_t rank) {
  if (!o.reduce || o.target->op != Op::Reduce || rank == 0) return false;
  ReduceFn fn = o.target->reduce_fn();
  if (fn == ReduceFn::ArgMin || fn == ReduceFn::ArgMax) return false;
  auto axes = o.target->reduce_axes();
  return axes.size() == 1 && axes[0] == static_cast<int>(rank) - 1;
}

bool has_row_outputs(const Group& g) {
  for (const auto& o : g.outputs)
    if (o.row) return true;
  return false;
}

// Whether group `from` needs group `to`, directly or through others.
bool needs(const FusedGraph& f, int from, int to) {
  std::vector<int> stack{from};
  std::vector<bool> seen(f.groups.size(), false);
  while (!stack.empty()) {
    int k = stack.back();
    stack.pop_back();
    for (int d : f.groups[k].deps) {
      if (d == to) return true;
      if (!seen[d]) {
        seen[d] = true;
        stack.push_back(d);
      }
    }
  }
  return false;
}

// Row fusion: a group C that reads a reduction along rows (R = x.sum(axis=-1), X @ b) only as a
// broadcast along those rows, over the same domain and chunks with whole rows in each block,
// absorbs the group P that computes R. R becomes a row output of C: its kernel reduces each row
// first and then runs the rest over the same row, so `X.T @ f(X @ b)` and `x - x.mean(axis=-1,
// keepdims=True)` read their data once. P must have no row outputs itself (one level), neither
// may generate random values, and no other group may stand between them (a cycle). With `gpu`,
// not where the merged kernel would run on one thread a block (X.T @ f(X @ b): its reduction
// over rows keeps the columns, the row stage the rows): a GPU reads X twice instead.
void merge_rows(FusedGraph* f, bool gpu) {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t c = 0; c < f->groups.size() && !changed; ++c) {
      const Group& gc = f->groups[c];
      size_t rank = gc.domain.size();
      if (gc.library || writes_concat(gc) || rank == 0 || gc.chunks[rank - 1].size() != 1) continue;
      for (int p : gc.deps) {
        const Group& gp = f->groups[p];
        if (gp.library || writes_concat(gp) || has_row_outputs(gp) || gp.domain != gc.domain ||
            gp.chunks != gc.chunks)
          continue;
        std::set<const Node*> targets;
        for (const auto& o : gp.outputs) targets.insert(o.target.get());
        RowScan sc = scan_rows(*f, gc, targets);
        if (sc.random || sc.other_read || sc.read.empty()) continue;
        bool ok = true;
        for (const auto& o : gp.outputs)
          if (sc.read.count(o.target.get()) && !row_reduction(o, rank)) ok = false;
        if (!ok || scan_rows(*f, gp, {}).random) continue;
        for (int x : gc.deps)
          if (x != p && needs(*f, x, p)) ok = false;
        if (!ok) continue;
        // C's row outputs, P's new ones, then the rest of C's and P's outputs.
        Group merged = gc;
        merged.outputs.clear();
        for (const auto& o : gc.outputs)
          if (o.row) merged.outputs.push_back(o);
        for (auto o : gp.outputs)
          if (sc.read.count(o.target.get())) {
            o.row = true;
            merged.outputs.push_back(o);
          }
        for (const auto& o : gc.outputs)
          if (!o.row) merged.outputs.push_back(o);
        for (const auto& o : gp.outputs)
          if (!sc.read.count(o.target.get())) merged.outputs.push_back(o);
        if (gpu && !thread_split(merged).splits() && thread_split(gc).splits() &&
            thread_split(gp).splits())
          continue;
        f->groups[c] = std::move(merged);
        f->groups.erase(f->groups.begin() + p);
        compute_deps(f);
        changed = true;
        break;
      }
    }
  }
}

// Puts the groups in a topological order of their dependencies again (after merging).
void sort_groups(FusedGraph* f) {
  std::vector<std::vector<int>> deps;
  for (const auto& gr : f->groups) deps.push_back(gr.deps);
  std::vector<int> order_idx, state(f->groups.size(), 0);
  std::function<void(int)> visit = [&](int k) {
    if (state[k] == 2) return;
    KILN_CHECK(state[k] == 0, "cycle between fused groups");
    state[k] = 1;
    for (int d : deps[k]) visit(d);
    state[k] = 2;
    order_idx.push_back(k);
  };
  for (size_t k = 0; k < f->groups.size(); ++k) visit(static_cast<int>(k));
  std::vector<Group> sorted;
  for (int k : order_idx) sorted.push_back(std::move(f->groups[k]));
  f->groups = std::move(sorted);
  compute_deps(f);
}

}  // namespace

FusedGraph fuse(const Graph& g, bool enabled, bool row_fusion, bool gpu) {
  FusedGraph f;
  f.graph = g;
  std::vector<const Node*> order = topo_order(g.outputs);
  f.node_count = order.size();
  make_groups(g, order, find_boundaries(g, order, enabled), &f);
  // Merging is cubic in the number of groups; fused graphs have few, so cap it.
  if (enabled && f.groups.size() <= 512) {
    merge_siblings(&f, gpu);
    if (row_fusion) merge_rows(&f, gpu);
    sort_groups(&f);
  }
  return f;
}

std::string fusion_summary(const FusedGraph& f, size_t nodes_before) {
  std::ostringstream os;
  int64_t tasks = 0;
  for (const auto& g : f.groups) {
    int64_t blocks = 1;
    for (const auto& c : g.chunks) blocks *= static_cast<int64_t>(c.size());
    tasks += blocks;
  }
  os << "fused graph: " << nodes_before << " nodes before passes, " << f.node_count << " after; "
     << f.groups.size() << " kernels, " << tasks << " block tasks"
     << " (plus reduction-tree tasks)\n";
  for (size_t k = 0; k < f.groups.size(); ++k) {
    const Group& g = f.groups[k];
    int64_t blocks = 1;
    for (const auto& c : g.chunks) blocks *= static_cast<int64_t>(c.size());
    os << (g.library ? "  library call " : "  kernel ") << k << ": domain " << shape_str(g.domain)
       << " in " << blocks << " blocks, outputs:";
    for (const auto& o : g.outputs)
      os << " " << (o.row ? "row->" : o.reduce ? "reduce->" : "store->") << node_label(*o.target);
    if (!g.deps.empty()) {
      os << "; reads kernels";
      for (int d : g.deps) os << " " << d;
    }
    os << "\n";
  }
  os << "  fusion boundaries:\n";
  for (const auto& b : f.boundaries)
    os << "    " << node_label(*b.node) << ": " << b.reason << "\n";
  return os.str();
}

}  // namespace kiln
