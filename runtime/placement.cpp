#include "runtime/placement.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <sstream>

#include "support/error.hpp"

namespace kiln {

namespace {

// Ranks as a sorted list, built from a flag per rank.
class RankSet {
 public:
  explicit RankSet(int ranks) : in_(static_cast<size_t>(ranks), 0) {}
  void add(int r) { in_[static_cast<size_t>(r)] = 1; }
  void add_all() { std::fill(in_.begin(), in_.end(), 1); }
  void add(const RankSet& o) {
    for (size_t r = 0; r < in_.size(); ++r) in_[r] |= o.in_[r];
  }
  std::vector<int> without(int owner) const {
    std::vector<int> v;
    for (size_t r = 0; r < in_.size(); ++r)
      if (in_[r] && static_cast<int>(r) != owner) v.push_back(static_cast<int>(r));
    return v;
  }

 private:
  std::vector<uint8_t> in_;
};

class Placer {
 public:
  Placer(const Plan& p, int ranks, const PlacementInputs* in) : p_(p), ranks_(ranks), in_(in) {}

  Placement place() {
    pl_.ranks = ranks_;
    const size_t n = p_.tasks.size();
    pl_.owner.assign(n, -1);
    pl_.pieces.resize(n);
    pl_.sends_to.resize(n);
    pl_.tasks.assign(static_cast<size_t>(ranks_), 0);
    pl_.messages.assign(static_cast<size_t>(ranks_), 0);
    pl_.bytes.assign(static_cast<size_t>(ranks_), 0);
    consumer_.assign(p_.partials.size(), -1);
    partial_owner_.assign(p_.partials.size(), 0);
    library_consumer_.assign(static_cast<size_t>(p_.library_partials), -1);
    for (size_t t = 0; t < p_.tasks.size(); ++t)
      for (int pid : p_.tasks[t].partials_in) {
        if (p_.tasks[t].kind == TaskKind::Combine) consumer_[pid] = static_cast<int>(t);
        if (p_.tasks[t].kind == TaskKind::LibrarySum)
          library_consumer_[static_cast<size_t>(pid)] = static_cast<int>(t);
      }
    made_.resize(p_.arrays.size());
    for (size_t t = 0; t < n; ++t) {  // index order is topological (plan.cpp)
      own(static_cast<int>(t));
      pieces(static_cast<int>(t));
    }
    keep_outputs();
    gathers();
    readers();
    for (size_t t = 0; t < n; ++t) destinations(static_cast<int>(t));
    return std::move(pl_);
  }

 private:
  // Where task t runs; its predecessors have owners (and their products ranges) already.
  void own(int t) {
    const PlanTask& task = p_.tasks[t];
    int o = -1;
    switch (task.kind) {
      case TaskKind::Start:
      case TaskKind::End:
        break;
      case TaskKind::Kernel:  // a group of one block (a TSQR block's slice) spreads by group
        o = holder_of_reads(
            t, static_cast<int>((p_.groups[task.group].blocks == 1 ? task.group : task.block) %
                                ranks_));
        for (int pid : p_.partial_of[task.group][task.block]) partial_owner_[pid] = o;
        break;
      case TaskKind::Library: {
        const PlanLibrary& l = p_.libraries[p_.groups[task.group].library];
        if (l.op == Op::MatMul) {
          // A result block's rank: its first split's, its chained splits' and its LibrarySum's;
          // a split making a partial product may run elsewhere (its partial sent to the sum).
          auto& owners = block_owner_[task.group];
          if (owners.empty()) owners.assign(static_cast<size_t>(p_.groups[task.group].blocks), -1);
          int& b = owners[static_cast<size_t>(task.block)];
          if (b < 0) b = holder_of_reads(t, static_cast<int>(task.block % ranks_));
          o = task.partial_out >= 0 ? holder_of_reads(t, b) : b;
        } else if (l.op == Op::Linalg)
          o = maker_of(l.a, l.group);
        else
          o = 0;
        break;
      }
      case TaskKind::LibrarySum:
        o = block_owner_.at(task.group).at(static_cast<size_t>(task.block));
        break;
      case TaskKind::Combine:
        o = partial_owner_[task.partials_in[0]];
        if (task.partial_out >= 0) partial_owner_[task.partial_out] = o;
        break;
    }
    pl_.owner[t] = o;
    if (o >= 0) ++pl_.tasks[static_cast<size_t>(o)];
  }

  // Where task t runs when it reads Buffers held by some ranks only (persisted arrays, load_npy
  // shards, Buffers given on one rank: runtime/distributed.hpp's Residency): the rank holding the
  // most bytes of what it reads of them (`fallback` where it is among those, else the lowest).
  // `fallback` when it reads none.
  int holder_of_reads(int t, int fallback) const {
    if (!in_ || in_->slots.empty()) return fallback;
    std::vector<int64_t> held(static_cast<size_t>(ranks_), 0);
    bool any = false;
    slot_reads(t, [&](int slot, int64_t first, int64_t last) {
      if (const dist::Residency* r = kept_slot(slot)) {
        r->add_bytes(first, last, &held);
        any = true;
      }
    });
    if (!any) return fallback;
    const int64_t most = *std::max_element(held.begin(), held.end());
    if (held[static_cast<size_t>(fallback)] == most) return fallback;
    return static_cast<int>(std::find(held.begin(), held.end(), most) - held.begin());
  }

  // A LAPACK call runs where its operand's first element was made (TSQR's block QRs on their
  // blocks' ranks, the QR of the stacked R factors where the first of them is); an operand every
  // rank holds (a Buffer) spreads the calls by group.
  int maker_of(const LibraryOperand& a, int group) const {
    if (a.array >= 0)
      for (const Made& m : made_[a.array])
        if (a.layout.offset >= m.lo && a.layout.offset <= m.hi) return m.owner;
    if (const dist::Residency* r = kept_slot(a.slot)) {
      const int h = r->holder(a.layout.offset, a.layout.offset);
      if (h >= 0) return h;
    }
    return group % ranks_;
  }

  const dist::Residency* kept_slot(int slot) const {
    if (!in_ || slot < 0 || static_cast<size_t>(slot) >= in_->slots.size()) return nullptr;
    return in_->slots[slot];
  }

  // The outputs asked to be kept where made, whose boxes are contiguous, disjoint ranges of them
  // (row blocks of a C-order array) made on more than one rank: their residency; the others go
  // to every rank (one rank's: a reduction's result, a one-block array, small or not spread).
  void keep_outputs() {
    pl_.kept.assign(p_.output_arrays.size(), nullptr);
    keep_array_.assign(p_.arrays.size(), 0);
    if (!in_ || in_->keep.empty()) return;
    for (size_t k = 0; k < p_.output_arrays.size(); ++k) {
      const int a = p_.output_arrays[k];
      if (!in_->keep[k] || p_.arrays[a].blocked) continue;
      auto r = std::make_shared<dist::Residency>();
      r->element_size = dtype_size(p_.arrays[a].dtype);
      bool ok = true;
      for (const Made& m : made_[a]) {
        ok = ok && m.contiguous;
        r->ranges.push_back({m.lo, m.hi, m.owner});
      }
      std::sort(r->ranges.begin(), r->ranges.end(),
                [](const auto& x, const auto& y) { return x.first < y.first; });
      int64_t next = 0;  // disjoint, and covering the array
      for (const auto& g : r->ranges) {
        ok = ok && g.first == next;
        next = g.last + 1;
      }
      ok = ok && next == num_elements(p_.arrays[a].shape);
      bool spread = false;
      for (const auto& g : r->ranges) spread = spread || g.rank != r->ranges[0].rank;
      if (!ok || !spread) continue;
      pl_.kept[k] = r;
      keep_array_[a] = 1;
    }
  }

  // Calls f(slot, array, first, last) for each span of elements task t reads of a template
  // slot's Buffer (array -1) or of a whole, not blocked array (slot -1): every element it reads
  // lies in [first, last] (a strided read spans more).
  template <class F>
  void reads(int t, F f) const {
    const PlanTask& task = p_.tasks[t];
    const PlanGroup& g = p_.groups[task.group];
    int64_t lo[32], ext[32];
    auto span = [&](int slot, int a, int64_t first, const int64_t* n, const int64_t* strides,
                    int r) {
      int64_t x = first, y = first;
      for (int d = 0; d < r; ++d) {
        if (n[d] <= 0) return;
        (strides[d] < 0 ? x : y) += (n[d] - 1) * strides[d];
      }
      f(slot, a, x, y);
    };
    if (task.kind == TaskKind::Kernel) {
      const kir::Kernel& k = g.lowered.kernel;
      p_.block_box(g, task.block, lo, ext);
      for (size_t l = 0; l < k.leaves.size(); ++l) {
        const int a = g.leaf_arrays[l];
        if (k.leaves[l].kind != kir::LeafKind::Memory || (a >= 0 && p_.arrays[a].blocked)) continue;
        const LeafBinding& b = g.lowered.leaves[l];
        int64_t first = b.offset;
        for (int d = 0; d < k.rank; ++d) first += lo[d] * b.strides[d];
        span(a >= 0 ? -1 : b.slot, a, first, ext, b.strides.data(), k.rank);
      }
      return;
    }
    if (task.kind != TaskKind::Library) return;
    const PlanLibrary& l = p_.libraries[g.library];
    auto region = [&](const LibraryOperand& op, bool streamed, int64_t row, int64_t col,
                      int64_t rows, int64_t cols) {
      if (streamed || (op.array < 0 && op.slot < 0)) return;  // (streamed: blocks, read whole)
      const MatrixLayout& m = op.layout;
      const int64_t n[2] = {rows, cols}, strides[2] = {m.row_stride, m.col_stride};
      span(op.array >= 0 ? -1 : op.slot, op.array,
           m.offset + row * m.row_stride + col * m.col_stride, n, strides, 2);
    };
    if (l.op == Op::Linalg) {
      region(l.a, false, 0, 0, l.m, l.n);
      if (l.b.present()) region(l.b, false, 0, 0, l.b_rows, l.k);
    } else if (l.op == Op::MatMul) {
      p_.block_box(g, task.block, lo, ext);
      const int64_t k0 = l.k_starts[task.split], kn = l.k_starts[task.split + 1] - k0;
      region(l.a, !l.a_reads.empty(), lo[0], k0, ext[0], kn);
      region(l.b, !l.b_reads.empty(), k0, lo[1], kn, ext[1]);
    }
  }
  // The spans of Buffers (f(slot, first, last)) and of whole arrays (f(array, first, last)).
  template <class F>
  void slot_reads(int t, F f) const {
    reads(t, [&](int slot, int, int64_t first, int64_t last) {
      if (slot >= 0) f(slot, first, last);
    });
  }
  template <class F>
  void array_reads(int t, F f) const {
    reads(t, [&](int, int a, int64_t first, int64_t last) {
      if (a >= 0) f(a, first, last);
    });
  }

  // Kept Buffers read beyond their holders by some task: gathered before the run.
  void gathers() {
    if (!in_ || in_->slots.empty()) return;
    std::vector<uint8_t> gather(in_->slots.size(), 0);
    for (size_t t = 0; t < p_.tasks.size(); ++t) {
      const int owner = pl_.owner[t];
      if (owner < 0) continue;
      slot_reads(static_cast<int>(t), [&](int slot, int64_t first, int64_t last) {
        const dist::Residency* r = kept_slot(slot);
        if (r && r->holder(first, last) != owner) gather[slot] = 1;
      });
    }
    for (size_t s = 0; s < gather.size(); ++s) {
      if (!gather[s]) continue;
      pl_.gather_slots.push_back(static_cast<int>(s));
      for (const auto& g : in_->slots[s]->ranges) {
        const auto bytes = static_cast<int64_t>((g.last - g.first + 1) *
                                                static_cast<int64_t>(in_->slots[s]->element_size));
        pl_.bytes[static_cast<size_t>(g.rank)] += bytes * (ranks_ - 1);
        pl_.messages[static_cast<size_t>(g.rank)] += ranks_ - 1;
      }
    }
  }

  // Per array: the ranks whose tasks read it, and every rank for compute()'s outputs; and, for
  // arrays with not too many of them, the spans each rank reads (a box goes only to the ranks
  // whose spans it meets).
  void readers() {
    spans_.assign(p_.arrays.size(), {});
    for (size_t t = 0; t < p_.tasks.size(); ++t) {
      const int owner = pl_.owner[t];
      if (owner < 0) continue;
      array_reads(static_cast<int>(t), [&](int a, int64_t first, int64_t last) {
        auto& s = spans_[static_cast<size_t>(a)];
        if (s.size() < kMaxSpans) s.push_back({first, last, owner});
      });
    }
    std::vector<RankSet> group_ranks(p_.groups.size(), RankSet(ranks_));
    for (size_t t = 0; t < p_.tasks.size(); ++t)
      if (pl_.owner[t] >= 0) group_ranks[p_.tasks[t].group].add(pl_.owner[t]);
    readers_.assign(p_.arrays.size(), RankSet(ranks_));
    for (size_t g = 0; g < p_.groups.size(); ++g) {
      const PlanGroup& grp = p_.groups[g];
      if (grp.library < 0) {
        for (int a : grp.leaf_arrays)
          if (a >= 0) readers_[a].add(group_ranks[g]);
      } else {
        const PlanLibrary& l = p_.libraries[grp.library];
        for (const LibraryOperand* op : {&l.a, &l.b})
          if (op->array >= 0) readers_[op->array].add(group_ranks[g]);
      }
    }
    for (size_t a = 0; a < p_.arrays.size(); ++a)
      if (p_.arrays[a].output >= 0 && !keep_array_[a]) readers_[a].add_all();
  }

  Piece box(int array, int64_t base, size_t es, std::vector<int64_t> ext,
            std::vector<int64_t> strides) const {
    Piece pc;
    pc.kind = Piece::Kind::Box;
    pc.id = array;
    pc.base = base;
    pc.es = es;
    pc.bytes = es;
    for (int64_t e : ext) pc.bytes *= static_cast<size_t>(std::max<int64_t>(e, 0));
    pc.ext = std::move(ext);
    pc.strides = std::move(strides);
    return pc;
  }

  Piece partial(int id) const {
    Piece pc;
    pc.kind = Piece::Kind::Partial;
    pc.id = id;
    pc.bytes = p_.partial_bytes(id);
    return pc;
  }

  void pieces(int t) {
    const PlanTask& task = p_.tasks[t];
    const int owner = pl_.owner[t];
    if (owner < 0) return;
    std::vector<Piece>& out = pl_.pieces[t];
    const PlanGroup& g = p_.groups[task.group];
    int64_t lo[32], ext[32];
    switch (task.kind) {
      case TaskKind::Start:
      case TaskKind::End:
        return;
      case TaskKind::Kernel: {
        const kir::Kernel& k = g.lowered.kernel;
        const int r = k.rank;
        p_.block_box(g, task.block, lo, ext);
        int reduce = 0;
        for (size_t o = 0; o < k.outputs.size(); ++o) {
          if (k.outputs[o].reduce) {
            out.push_back(partial(p_.partial_of[task.group][task.block][reduce++]));
            continue;
          }
          const int a = g.output_arrays[o];
          const PlanArray& arr = p_.arrays[a];
          if (arr.blocked) {
            if (arr.block_readers[task.block] == 0) continue;  // sliced away: nobody reads it
            Piece pc;
            pc.kind = Piece::Kind::Block;
            pc.id = a;
            pc.block = task.block;
            pc.bytes = dtype_size(arr.dtype);
            for (int d = 0; d < r; ++d) pc.bytes *= static_cast<size_t>(ext[d]);
            out.push_back(std::move(pc));
            continue;
          }
          const OutputBinding& ob = g.lowered.outputs[o];
          int64_t base = ob.offset;
          for (int d = 0; d < r; ++d) base += lo[d] * ob.strides[d];
          out.push_back(
              box(a, base, dtype_size(arr.dtype), std::vector<int64_t>(ext, ext + r), ob.strides));
        }
        break;
      }
      case TaskKind::Combine: {
        if (task.partial_out >= 0) {
          out.push_back(partial(task.partial_out));
          break;
        }
        // The final fold writes the result's region of this block (Run::write_result).
        const PlanReduce& red = p_.reduces[task.reduce];
        std::vector<int64_t> dims, strides;
        const int64_t base = p_.result_region(red, task.final_block, &dims, &strides);
        out.push_back(
            box(red.array, base, dtype_size(red.out), std::move(dims), std::move(strides)));
        break;
      }
      case TaskKind::Library:
      case TaskKind::LibrarySum: {
        const PlanLibrary& l = p_.libraries[g.library];
        const size_t es = dtype_size(l.dtype);
        if (l.op != Op::MatMul) {  // LAPACK or cuRAND: the whole packed result
          const int64_t count = l.op == Op::Random ? l.m : num_elements(l.call->shape);
          out.push_back(box(l.out, l.out_offset, es, {count}, {1}));
          break;
        }
        const int64_t splits = static_cast<int64_t>(l.k_starts.size()) - 1;
        const bool final =
            task.kind == TaskKind::LibrarySum ||
            (task.partial_out < 0 && (splits == 1 || (l.chained && task.split == splits - 1)));
        p_.block_box(g, task.block, lo, ext);
        if (task.kind == TaskKind::Library && task.partial_out >= 0) {  // for the LibrarySum
          Piece pc;
          pc.kind = Piece::Kind::LibraryPartial;
          pc.id = task.partial_out;
          pc.bytes = static_cast<size_t>(ext[0] * ext[1]) * es;
          out.push_back(std::move(pc));
          break;
        }
        if (!final) break;  // an unfinished block: its next split sends
        out.push_back(
            box(l.out, l.out_offset + lo[0] * l.n + lo[1], es, {ext[0], ext[1]}, {l.n, 1}));
        break;
      }
    }
    for (const Piece& pc : out) {  // the elements each box spans, for maker_of
      if (pc.kind != Piece::Kind::Box || pc.bytes == 0) continue;
      int64_t hi = pc.base;
      bool neg = false;
      for (size_t d = 0; d < pc.ext.size(); ++d) {
        hi += (pc.ext[d] - 1) * pc.strides[d];
        neg = neg || pc.strides[d] < 0;
      }
      const bool contiguous = !neg && static_cast<size_t>(hi - pc.base + 1) * pc.es == pc.bytes;
      made_[pc.id].push_back({pc.base, hi, owner, contiguous});
    }
  }

  // Who receives each piece of task t: a partial the rank of the combine that folds it; a block
  // the ranks of the tasks that read it (the task's successors); a box of a whole array the
  // ranks that read that array, and every rank for compute()'s outputs.
  void destinations(int t) {
    const PlanTask& task = p_.tasks[t];
    const int owner = pl_.owner[t];
    if (owner < 0) return;
    for (Piece& pc : pl_.pieces[t]) {
      switch (pc.kind) {
        case Piece::Kind::Partial: {
          const int c = consumer_[pc.id];
          if (c >= 0 && pl_.owner[c] != owner) pc.to = {pl_.owner[c]};
          break;
        }
        case Piece::Kind::LibraryPartial: {
          const int c = library_consumer_[static_cast<size_t>(pc.id)];
          if (c >= 0 && pl_.owner[c] != owner) pc.to = {pl_.owner[c]};
          break;
        }
        case Piece::Kind::Block: {
          RankSet to(ranks_);
          for (int s : task.next) {
            const int so = pl_.owner[s];
            const TaskKind sk = p_.tasks[s].kind;
            if (so >= 0 && (sk == TaskKind::Kernel || sk == TaskKind::Library)) to.add(so);
          }
          pc.to = to.without(owner);
          break;
        }
        case Piece::Kind::Box: {
          const auto& spans = spans_[static_cast<size_t>(pc.id)];
          if (spans.size() >= kMaxSpans || (p_.arrays[pc.id].output >= 0 && !keep_array_[pc.id])) {
            pc.to = readers_[pc.id].without(owner);
            break;
          }
          int64_t first = pc.base, last = pc.base;
          for (size_t d = 0; d < pc.ext.size(); ++d)
            (pc.strides[d] < 0 ? first : last) += (pc.ext[d] - 1) * pc.strides[d];
          RankSet to(ranks_);
          for (const Span& sp : spans)
            if (sp.first <= last && sp.last >= first) to.add(sp.rank);
          pc.to = to.without(owner);
          break;
        }
      }
    }
    RankSet dests(ranks_);
    for (const Piece& pc : pl_.pieces[t])
      for (int r : pc.to) {
        dests.add(r);
        pl_.bytes[static_cast<size_t>(owner)] += static_cast<int64_t>(pc.bytes);
      }
    pl_.sends_to[t] = dests.without(owner);
    pl_.messages[static_cast<size_t>(owner)] += static_cast<int64_t>(pl_.sends_to[t].size());
  }

  struct Span {  // elements [first, last] of an array that a task of `rank` reads (some of)
    int64_t first, last;
    int rank;
  };
  // Arrays read in more spans than this send each box to every rank that reads them.
  static constexpr size_t kMaxSpans = 4096;

  struct Made {  // a range of an array's elements a task writes, and its rank
    int64_t lo, hi;
    int owner;
    bool contiguous;  // it writes every element of [lo, hi]
  };

  const Plan& p_;
  const int ranks_;
  const PlacementInputs* in_;
  std::vector<uint8_t> keep_array_;  // per array: an output kept where made
  Placement pl_;
  std::vector<int> consumer_;                    // per partial: the combine task that folds it
  std::vector<int> library_consumer_;            // per GEMM partial product: its LibrarySum task
  std::vector<int> partial_owner_;               // per partial: the rank that makes it
  std::vector<std::vector<Made>> made_;          // per array
  std::map<int, std::vector<int>> block_owner_;  // per GEMM group: each result block's rank
  std::vector<RankSet> readers_;                 // per array
  std::vector<std::vector<Span>> spans_;         // per array: what each rank's tasks read of it
};

}  // namespace

bool PlacementInputs::empty() const {
  for (uint8_t k : keep)
    if (k) return false;
  for (const dist::Residency* r : slots)
    if (r) return false;
  return true;
}

std::shared_ptr<const Placement> placement(const Plan& p, int ranks, const PlacementInputs* in) {
  KILN_CHECK(ranks >= 1, "a placement over no ranks");
  if (in && !in->empty()) return std::make_shared<const Placement>(Placer(p, ranks, in).place());
  std::shared_ptr<const Placement> kept = std::atomic_load(&p.placement);
  if (kept && kept->ranks == ranks) return kept;
  auto made = std::make_shared<const Placement>(Placer(p, ranks, nullptr).place());
  std::atomic_store(&p.placement, made);
  return made;
}

std::string placement_summary(const Placement& pl) {
  std::ostringstream s;
  s << "distributed over " << pl.ranks << " ranks (block-cyclic): per rank, tasks / messages / "
    << "bytes sent\n";
  for (int r = 0; r < pl.ranks; ++r)
    s << "  rank " << r << ": " << pl.tasks[r] << " / " << pl.messages[r] << " / " << pl.bytes[r]
      << "\n";
  return s.str();
}

}  // namespace kiln
