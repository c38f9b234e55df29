#include "codegen/lower.hpp"

#include <cmath>
#include <unordered_map>

#include "codegen/legalize.hpp"
#include "ir/view.hpp"
#include "support/error.hpp"

namespace kiln {

namespace {

class Lowerer {
 public:
  Lowerer(const Group& g, const FusedGraph& f) : g_(g), f_(f) {
    out_.kernel.rank = int(g.domain.size());
  }

  LoweredGroup run() {
    for (const auto& o : g_.outputs) {
      kir::Output ko;
      OutputBinding ob;
      ob.target = o.target.get();
      ob.reduce = o.reduce;
      int v = (o.value == o.target) ? compute(*o.value) : value_of(*o.value);
      if (o.reduce) {
        const Node& r = *o.target;
        ko.reduce = true;
        ko.fn = r.reduce_fn();
        ko.type = r.dtype;
        if (ko.fn == ReduceFn::All || ko.fn == ReduceFn::Any) ko.type = DType::Bool;
        // float32 sums accumulate in float64 (and round once at the end): NumPy's pairwise
        // float32 sum loses ~log2(n) ulps, a float32 accumulator far more.
        if ((ko.fn == ReduceFn::Sum || ko.fn == ReduceFn::Mean) && r.dtype == DType::Float32)
          ko.type = DType::Float64;
        for (int ax : r.reduce_axes()) ko.reduced_mask |= 1u << ax;
        if (ko.fn == ReduceFn::ArgMin || ko.fn == ReduceFn::ArgMax) {
          // Accumulate the input's values plus their index: C order over the reduced dims.
          ko.type = out_.kernel.values[v].type;
          std::vector<int64_t> strides(g_.domain.size(), 0);
          int64_t s = 1;
          for (size_t d = g_.domain.size(); d-- > 0;)
            if ((ko.reduced_mask >> d) & 1u) {
              strides[d] = s;
              s *= g_.domain[d];
            }
          ko.index_value = iota_leaf(AffineMap{0, strides});
        }
        v = cast(v, ko.type);
      } else {
        ko.type = o.target->dtype;
        v = cast(v, ko.type);
        ob.offset = o.offset;
        ob.strides = c_strides(o.target->shape);
      }
      ko.value = v;
      if (o.row) {
        ko.row = true;
        row_outputs_[o.target.get()] = int(out_.kernel.outputs.size());
      }
      out_.kernel.outputs.push_back(ko);
      out_.outputs.push_back(std::move(ob));
    }
    return std::move(out_);
  }

 private:
  int add(kir::Value v) {
    out_.kernel.values.push_back(v);
    return int(out_.kernel.values.size()) - 1;
  }

  int cast(int v, DType t) {
    if (out_.kernel.values[v].type == t) return v;
    kir::Value c{kir::VOp::Cast, t};
    c.a = v;
    return add(c);
  }

  int param(const Node& scalar) {
    auto it = params_.find(&scalar);
    if (it != params_.end()) return it->second;
    int k = int(out_.kernel.params.size());
    out_.kernel.params.push_back(scalar.dtype);
    out_.param_slots.push_back(scalar.attrs.slot);
    kir::Value v{kir::VOp::Param, scalar.dtype};
    v.index = k;
    return params_[&scalar] = add(v);
  }

  int seed_param(const Node& random) {
    int k = int(out_.kernel.params.size());
    out_.kernel.params.push_back(DType::Int64);
    out_.param_slots.push_back(random.attrs.slot);
    return k;
  }

  // Adds leaf l read under map m and returns the value that loads it.
  int add_leaf(kir::Leaf l, LeafBinding b, const AffineMap& m) {
    int r = out_.kernel.rank;
    l.inner_stride = r == 0 ? 0 : m.strides[r - 1] == 0 ? 0 : m.strides[r - 1] == 1 ? 1 : -1;
    b.offset = m.offset;
    b.strides = m.strides;
    out_.kernel.leaves.push_back(l);
    out_.leaves.push_back(std::move(b));
    kir::Value v{kir::VOp::Leaf, l.dtype};
    v.index = int(out_.kernel.leaves.size()) - 1;
    return add(v);
  }

  // A leaf reading `base` under map m: a materialized array when `materialized`, else the
  // Buffer/Random/Iota node itself.
  int leaf(const Node& base, const AffineMap& m, DType dtype, bool materialized) {
    kir::Leaf l;
    LeafBinding b;
    l.dtype = dtype;
    if (materialized || base.op == Op::Buffer) {
      l.kind = kir::LeafKind::Memory;
      l.pointer = out_.kernel.num_pointers++;
      if (materialized)
        b.materialized = &base;
      else
        b.slot = base.attrs.slot;
    } else if (base.op == Op::Random) {
      l.kind = kir::LeafKind::Random;
      l.random = RandomKind(base.attrs.ints[0]);
      l.stream = base.attrs.ints[1];
      l.low = base.attrs.ints[2];
      l.high = base.attrs.ints[3];
      l.seed_param = seed_param(base);
    } else if (base.op == Op::Iota) {
      l.kind = kir::LeafKind::Iota;
    } else {
      throw InternalError(std::string("lower: unexpected leaf ") + op_name(base.op));
    }
    return add_leaf(l, std::move(b), m);
  }

  // The flat index under map m (argmin/argmax positions).
  int iota_leaf(const AffineMap& m) {
    kir::Leaf l;
    l.kind = kir::LeafKind::Iota;
    l.dtype = DType::Int64;
    return add_leaf(l, LeafBinding{}, m);
  }

  // A node read by this group: a materialized array is loaded; anything else is computed. The
  // element-wise operands are lowered first, in an explicit post-order (no recursion: a fused
  // chain can be as long as the fusion size limit allows, and the graph much deeper).
  int value_of(const Node& root) {
    if (auto it = memo_.find(&root); it != memo_.end()) return it->second;
    std::vector<std::pair<const Node*, bool>> stack{{&root, false}};  // (node, operands done)
    while (!stack.empty()) {
      auto [n, ready] = stack.back();
      stack.pop_back();
      if (memo_.count(n)) continue;
      bool materialized = f_.producer.count(n) > 0;
      if (!ready && !materialized && op_category(n->op) == OpCategory::Elementwise) {
        stack.push_back({n, true});
        for (size_t k = n->inputs.size(); k-- > 0;)  // the first operand is lowered first
          if (!memo_.count(n->in(k).get())) stack.push_back({n->in(k).get(), false});
        continue;
      }
      if (row_outputs_.count(n))
        throw InternalError("lower: a row output is read other than along its rows");
      memo_[n] =
          materialized ? leaf(*n, AffineMap{0, c_strides(n->shape)}, n->dtype, true) : compute(*n);
    }
    return memo_.at(&root);
  }

  // Resolves a chain of views down to a leaf or a materialized node, composing index maps.
  int view_chain(const Node& n) {
    std::vector<const Node*> chain{&n};
    const Node* base = n.in(0).get();
    while (is_view(base->op) && !f_.producer.count(base)) {
      chain.push_back(base);
      base = base->in(0).get();
    }
    if (base->op == Op::Scalar) return param(*base);
    if (row_outputs_.count(base)) return row_value(*base);
    AffineMap m;
    bool materialized = f_.producer.count(base) > 0;
    if (materialized)
      m = AffineMap{0, c_strides(base->shape)};
    else if (is_strided_leaf(base->op))
      m = AffineMap{base->attrs.offset, base->attrs.strides};
    else
      throw InternalError(std::string("lower: view over ") + op_name(base->op) +
                          " was not materialized");
    for (size_t k = chain.size(); k-- > 0;) {
      auto next = compose_view(*chain[k], m);
      if (!next) throw InternalError("lower: a view did not compose over its base");
      m = *next;
    }
    return leaf(*base, m, n.dtype, materialized);
  }

  // The per-row result of row output r (fuse checked that it is read only as a broadcast along
  // rows), finished as the runtime finishes a reduction: a mean divided by the row's length,
  // then the result's dtype (a float32 sum accumulates in float64).
  int row_value(const Node& r) {
    int o = row_outputs_.at(&r);
    const kir::Output& ko = out_.kernel.outputs[o];
    kir::Value v{kir::VOp::Row, ko.type};
    v.index = o;
    int x = add(v);
    if (ko.fn == ReduceFn::Mean && is_float(ko.type)) {
      int64_t count = g_.domain.back();
      kir::Value c{kir::VOp::Const, ko.type};
      c.f = count > 0 ? double(count) : std::nan("");
      if (count > 0) {
        kir::Value div{kir::VOp::Binary, ko.type};
        div.a = x;
        div.b = add(c);
        div.fn = uint8_t(BinaryFn::Div);
        x = add(div);
      } else {
        x = add(c);
      }
    }
    return cast(x, r.dtype);
  }

  int compute(const Node& n) {
    switch (n.op) {
      case Op::Scalar:
        return param(n);
      case Op::Buffer:
      case Op::Random:
      case Op::Iota:
        return leaf(n, AffineMap{n.attrs.offset, n.attrs.strides}, n.dtype, false);
      case Op::Slice:
      case Op::Broadcast:
      case Op::Transpose:
      case Op::Reshape:
      case Op::Rechunk:
        return view_chain(n);
      case Op::Unary: {
        kir::Value v{kir::VOp::Unary, n.dtype};
        v.a = value_of(*n.in(0));
        v.fn = uint8_t(n.unary());
        return add(v);
      }
      case Op::Binary: {
        kir::Value v{kir::VOp::Binary, n.dtype};
        v.a = value_of(*n.in(0));
        v.b = value_of(*n.in(1));
        v.fn = uint8_t(n.binary());
        return add(v);
      }
      case Op::Where: {
        kir::Value v{kir::VOp::Select, n.dtype};
        v.a = value_of(*n.in(0));
        v.b = value_of(*n.in(1));
        v.c = value_of(*n.in(2));
        return add(v);
      }
      case Op::Cast:
        return cast(value_of(*n.in(0)), n.dtype);
      case Op::Reduce:
      case Op::Concat:
      case Op::Linalg:
      case Op::MatMul:
        break;  // always materialized: read through value_of, never computed inline
    }
    throw InternalError(std::string("lower: cannot compute ") + op_name(n.op) + " inline");
  }

  const Group& g_;
  const FusedGraph& f_;
  LoweredGroup out_;
  std::unordered_map<const Node*, int> memo_, params_;
  std::unordered_map<const Node*, int> row_outputs_;  // row output node -> kernel output
};

}  // namespace

LoweredGroup lower_group(const Group& g, const FusedGraph& f) {
  LoweredGroup lg = Lowerer(g, f).run();
  lg.kernel = kir::legalize(lg.kernel);
  return lg;
}

}  // namespace kiln
