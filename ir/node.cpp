#include "ir/node.hpp"

#include <cmath>

#include <algorithm>
#include <unordered_set>

#include "support/checked.hpp"
#include "support/error.hpp"
#include "support/hash.hpp"

namespace kiln {

const char* op_name(Op op) {
  switch (op) {
#define KILN_OP(name, cat) \
  case Op::name:           \
    return #name;
#include "ir/ops.def"
#undef KILN_OP
  }
  return "?";
}

OpCategory op_category(Op op) {
  switch (op) {
#define KILN_OP(name, cat) \
  case Op::name:           \
    return OpCategory::cat;
#include "ir/ops.def"
#undef KILN_OP
  }
  return OpCategory::Other;
}

const char* unary_name(UnaryFn f) {
  switch (f) {
#define KILN_UNARY(name, np, result) \
  case UnaryFn::name:                \
    return #np;
#include "ir/ufuncs.def"
#undef KILN_UNARY
  }
  return "?";
}

UnaryResult unary_result(UnaryFn f) {
  switch (f) {
#define KILN_UNARY(name, np, result) \
  case UnaryFn::name:                \
    return UnaryResult::result;
#include "ir/ufuncs.def"
#undef KILN_UNARY
  }
  return UnaryResult::Same;
}

const char* binary_name(BinaryFn f) {
  switch (f) {
#define KILN_BINARY(name, np, result) \
  case BinaryFn::name:                \
    return #np;
#include "ir/ufuncs.def"
#undef KILN_BINARY
  }
  return "?";
}

BinaryResult binary_result(BinaryFn f) {
  switch (f) {
#define KILN_BINARY(name, np, result) \
  case BinaryFn::name:                \
    return BinaryResult::result;
#include "ir/ufuncs.def"
#undef KILN_BINARY
  }
  return BinaryResult::Promoted;
}

const char* reduce_name(ReduceFn f) {
  switch (f) {
#define KILN_REDUCE(name, np) \
  case ReduceFn::name:        \
    return #np;
#include "ir/reduce.def"
#undef KILN_REDUCE
  }
  return "?";
}

const char* random_name(RandomKind k) {
  switch (k) {
#define KILN_RANDOM(name, np) \
  case RandomKind::name:      \
    return #np;
#include "ir/random.def"
#undef KILN_RANDOM
  }
  return "?";
}

int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape c_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t k = s.size(); k-- > 0;) {
    st[k] = acc;
    acc *= std::max<int64_t>(s[k], 1);
  }
  return st;
}

bool Attrs::operator==(const Attrs& o) const {
  return ints == o.ints && offset == o.offset && strides == o.strides &&
         (f == o.f || (f != f && o.f != o.f)) && i == o.i && ptr == o.ptr && owner == o.owner &&
         place == o.place && slot == o.slot && cls == o.cls;
}

std::vector<int> Node::reduce_axes() const {
  return std::vector<int>(attrs.ints.begin() + 2, attrs.ints.end());
}

std::vector<int64_t> Node::result_strides() const {
  Shape st = c_strides(shape);
  std::vector<bool> reduced(in(0)->shape.size(), false);
  for (int ax : reduce_axes()) reduced[ax] = true;
  std::vector<int64_t> out;
  size_t j = 0;
  for (bool r : reduced) {
    if (r) {
      out.push_back(0);
      if (keepdims()) ++j;
    } else {
      out.push_back(st[j++]);
    }
  }
  return out;
}

namespace {

uint64_t node_hash(const NodeKey& n) {
  uint64_t h = hash_mix(static_cast<uint64_t>(n.op), static_cast<uint64_t>(n.dtype));
  for (int64_t d : n.shape) h = hash_mix(h, static_cast<uint64_t>(d));
  for (const auto& c : n.chunks) {
    h = hash_mix(h, c.size());
    for (int64_t b : c) h = hash_mix(h, static_cast<uint64_t>(b));
  }
  for (size_t k = 0; k < n.num_inputs; ++k) h = hash_mix(h, n.inputs[k]->hash);
  const Attrs& a = n.attrs;
  for (int64_t v : a.ints) h = hash_mix(h, static_cast<uint64_t>(v));
  h = hash_mix(h, static_cast<uint64_t>(a.offset));
  for (int64_t v : a.strides) h = hash_mix(h, static_cast<uint64_t>(v));
  h = hash_double(h, a.f);
  h = hash_mix(h, static_cast<uint64_t>(a.i));
  h = hash_mix(h, reinterpret_cast<uintptr_t>(a.ptr));
  if (!a.place.on_host()) h = hash_mix(h, static_cast<uint64_t>(a.place.index) + 1);
  h = hash_mix(h, static_cast<uint64_t>(a.slot));
  h = hash_mix(h, a.cls);
  return h;
}

bool same_node(const Node& a, const NodeKey& b) {
  if (a.op != b.op || a.dtype != b.dtype || a.shape != b.shape || a.chunks != b.chunks)
    return false;
  if (a.inputs.size() != b.num_inputs) return false;
  for (size_t k = 0; k < b.num_inputs; ++k)
    if (a.inputs[k].get() != b.inputs[k].get()) return false;
  return a.attrs == b.attrs;
}

// Destroying the last handle of a 100000-node chain must not recurse 100000 deep: a node's inputs
// are handed to the outermost destructor on this thread, which releases them one at a time.
thread_local std::vector<NodeRef>* g_release_queue = nullptr;

}  // namespace

Node::~Node() {
  if (ctx) ctx->forget(this);
  if (g_release_queue) {
    for (auto& in : inputs) g_release_queue->push_back(std::move(in));
    return;
  }
  std::vector<NodeRef> queue(std::make_move_iterator(inputs.begin()),
                             std::make_move_iterator(inputs.end()));
  g_release_queue = &queue;
  while (!queue.empty()) {
    NodeRef n = std::move(queue.back());
    queue.pop_back();
    n.reset();  // may append n's inputs to queue
  }
  g_release_queue = nullptr;
}

Context& Context::global() {
  static Context* ctx = new Context();  // never destroyed: nodes may outlive static destructors
  return *ctx;
}

namespace {
// Every node's sizes are representable, whatever built it (a broadcast of two vectors, an outer
// product, a concatenation): at most 2^62 elements, each dimension too, and at most 2^24 blocks
// (a plan holds a task per block). Checked arithmetic: the products must not wrap.
void check_sizes(const NodeKey& n) {
  auto elements = checked::product(n.shape);
  bool dims_ok = true;
  for (int64_t d : n.shape) dims_ok = dims_ok && d <= kMaxElements;
  if (!elements || *elements > kMaxElements || !dims_ok)
    throw Error(std::string(op_name(n.op)) + ": shape " + shape_str(n.shape) + " of " +
                dtype_name(n.dtype) + " has more elements than Kiln can index (at most 2^62)");
  std::optional<int64_t> blocks = 1;  // checked::product of the grid, without a vector
  for (const auto& c : n.chunks)
    if (blocks && *blocks != 0) blocks = checked::mul<int64_t>(*blocks, c.size());
  if (!blocks || *blocks > kMaxBlocks)
    throw Error(std::string(op_name(n.op)) + ": an array of shape " + shape_str(n.shape) +
                " in chunks " + chunks_str(n.chunks) + " has " +
                (blocks ? count_str(*blocks) : std::string("more than 2^63")) +
                " blocks, more than a plan may hold (" + std::to_string(kMaxBlocks) +
                "); rechunk an operand to larger chunks");
}
}  // namespace

NodeRef Context::make(Op op, DType dtype, Shape shape, Chunks chunks, std::vector<NodeRef> inputs,
                      Attrs attrs) {
  const NodeKey key{op, dtype, shape, chunks, inputs.data(), inputs.size(), attrs};
  check_sizes(key);
  const uint64_t hash = node_hash(key);
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (NodeRef found = find_locked(key, hash)) return found;
  Node n;
  n.op = op;
  n.dtype = dtype;
  n.shape = std::move(shape);
  n.chunks = std::move(chunks);
  n.inputs = std::move(inputs);
  n.attrs = std::move(attrs);
  n.hash = hash;
  return add_locked(std::move(n));
}

NodeRef Context::intern(const NodeKey& key) {
  check_sizes(key);
  const uint64_t hash = node_hash(key);
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (NodeRef found = find_locked(key, hash)) return found;
  Node n;
  n.op = key.op;
  n.dtype = key.dtype;
  n.shape = key.shape;
  n.chunks = key.chunks;
  n.inputs.assign(key.inputs, key.inputs + key.num_inputs);
  n.attrs = key.attrs;
  n.hash = hash;
  return add_locked(std::move(n));
}

NodeRef Context::find_locked(const NodeKey& key, uint64_t hash) {
  if (slots_.empty()) return nullptr;
  for (size_t i = home(hash);; i = (i + 1) & (slots_.size() - 1)) {
    const Slot& s = slots_[i];
    if (!s.node) return nullptr;
    if (s.hash != hash) continue;
    probes_.fetch_add(1, std::memory_order_relaxed);
    // A node whose last reference has gone waits in ~Node (forget) for this lock, its fields
    // intact: compared as it is, and taken only if it is still alive.
    if (!same_node(*s.node, key)) continue;
    if (NodeRef found = s.ref.lock()) return found;
  }
}

NodeRef Context::add_locked(Node n) {
  auto node = std::make_shared<Node>(std::move(n));
  node->ctx = this;
  insert(Slot{node->hash, node.get(), node});
  return node;
}

void Context::insert(Slot slot) {
  if (2 * (used_ + 1) > slots_.size()) {
    std::vector<Slot> old(std::max<size_t>(64, 2 * slots_.size()));
    old.swap(slots_);
    used_ = 0;
    for (Slot& s : old)
      if (s.node) insert(std::move(s));
  }
  size_t i = home(slot.hash);
  while (slots_[i].node) i = (i + 1) & (slots_.size() - 1);
  slots_[i] = std::move(slot);
  ++used_;
}

void Context::forget(const Node* n) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (slots_.empty()) return;
  const size_t mask = slots_.size() - 1;
  size_t i = home(n->hash);
  while (slots_[i].node && slots_[i].node != n) i = (i + 1) & mask;
  if (!slots_[i].node) return;
  // Backward-shift deletion: later slots of the same probe run move into the hole, unless their
  // home lies cyclically in (hole, slot], so every remaining entry stays reachable from its home.
  for (size_t j = i;;) {
    j = (j + 1) & mask;
    if (!slots_[j].node) break;
    size_t h = home(slots_[j].hash);
    bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
    if (stays) continue;
    slots_[i] = std::move(slots_[j]);
    i = j;
  }
  slots_[i] = Slot{};
  --used_;
}

size_t Context::live_nodes() const {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return used_;
}

double scalar_as_double(const Node& n) {
  return is_float(n.dtype) ? n.attrs.f : static_cast<double>(n.attrs.i);
}

ScalarBits convert_scalar(bool from_float, double f, int64_t i, DType to) {
  ScalarBits r;
  // Saturating float -> integer conversion (LLVM's fptosi.sat): NaN is 0.
  auto saturate = [](double v, double lo, double hi_excl, int64_t min, int64_t max) -> int64_t {
    if (std::isnan(v)) return 0;
    if (v >= hi_excl) return max;
    if (v <= lo) return min;
    return static_cast<int64_t>(v);
  };
  switch (to) {
    case DType::Bool:
      r.i = from_float ? f != 0 : i != 0;
      break;
    case DType::Int32:
      r.i = from_float ? saturate(f, -2147483648.0, 2147483648.0, INT32_MIN, INT32_MAX)
                       : static_cast<int32_t>(static_cast<uint32_t>(i));
      break;
    case DType::Int64:
      r.i = from_float
                ? saturate(f, -9223372036854775808.0, 9223372036854775808.0, INT64_MIN, INT64_MAX)
                : i;
      break;
    case DType::Float32:
      r.f = from_float ? static_cast<float>(f) : static_cast<float>(i);
      break;
    case DType::Float64:
      r.f = from_float ? f : static_cast<double>(i);
      break;
  }
  return r;
}

ScalarClass scalar_class_of(const Node& scalar) {
  double x = scalar_as_double(scalar);
  if (x == 0) return std::signbit(x) ? ScalarClass::NegZero : ScalarClass::Zero;
  return x == 1 ? ScalarClass::One : x == 2 ? ScalarClass::Two : ScalarClass::Other;
}

std::vector<const Node*> topo_order(const std::vector<NodeRef>& roots) {
  std::vector<const Node*> order;
  std::unordered_set<const Node*> seen;
  std::vector<std::pair<const Node*, size_t>> stack;
  for (const auto& r : roots) {
    if (!r || !seen.insert(r.get()).second) continue;
    stack.push_back({r.get(), 0});
    while (!stack.empty()) {
      auto& [n, k] = stack.back();
      if (k < n->inputs.size()) {
        const Node* child = n->inputs[k++].get();
        if (seen.insert(child).second) stack.push_back({child, 0});
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  return order;
}

Chunks regular_chunks(const Shape& shape, const Shape& block) {
  Chunks c(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t b = (d < block.size() && block[d] > 0) ? block[d] : shape[d];
    if (shape[d] == 0) {
      c[d] = {0};
      continue;
    }
    b = std::min(b, shape[d]);  // so s + b cannot pass 2^63
    for (int64_t s = 0; s < shape[d]; s += b) c[d].push_back(std::min(b, shape[d] - s));
  }
  return c;
}

Chunks single_chunks(const Shape& shape) { return regular_chunks(shape, {}); }

std::string chunks_str(const Chunks& c) {
  std::string s = "(";
  for (size_t d = 0; d < c.size(); ++d) {
    if (d) s += ", ";
    bool regular = true;
    for (size_t k = 0; k + 1 < c[d].size(); ++k) regular &= c[d][k] == c[d][0];
    if (regular && c[d].size() > 3) {
      bool tail = c[d].back() != c[d][0];
      s += std::to_string(c[d][0]) + "x" + std::to_string(c[d].size() - (tail ? 1 : 0));
      if (tail) s += "+" + std::to_string(c[d].back());
    } else {
      s += "(";
      for (size_t k = 0; k < c[d].size(); ++k) s += (k ? "," : "") + std::to_string(c[d][k]);
      s += ")";
    }
  }
  return s + ")";
}

}  // namespace kiln
