// The array graph: immutable, interned nodes. Equal subexpressions are one node, so equality is a
// pointer compare and `y = x + 1` adds exactly one node that shares all of x.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/dtype.hpp"
#include "ir/functions.hpp"
#include "support/device.hpp"

namespace kiln {

enum class Op : uint8_t {
#define KILN_OP(name, cat) name,
#include "ir/ops.def"
#undef KILN_OP
};
enum class OpCategory : uint8_t { Leaf, Elementwise, View, Reduce, Other };

const char* op_name(Op op);
OpCategory op_category(Op op);

Shape c_strides(const Shape& s);  // in elements

// Op-specific attributes. Which fields an op uses is documented in ops.def.
struct Attrs {
  std::vector<int64_t> ints;
  // Leaves (Buffer, Random, Iota): element (index) offset and per-dim strides of the view.
  int64_t offset = 0;
  std::vector<int64_t> strides;
  // Scalar value (f for floats, i for ints/bools); Random: i is the seed.
  double f = 0;
  int64_t i = 0;
  // Buffer: the data and what keeps it alive (null owner: the user guarantees lifetime).
  const void* ptr = nullptr;
  std::shared_ptr<const void> owner;
  MemoryPlace place;  // Buffer: where ptr points (host, or a device's memory)
  // Template graphs (values stripped for plan caching): the parameter slot, and for scalars the
  // value class that simplification may depend on (a ScalarClass).
  int32_t slot = -1;
  uint8_t cls = 0;

  bool operator==(const Attrs& o) const;
};

class Context;
struct Node;
using NodeRef = std::shared_ptr<const Node>;

struct Node {
  Op op;
  DType dtype;
  Shape shape;
  Chunks chunks;
  std::vector<NodeRef> inputs;
  Attrs attrs;
  uint64_t hash = 0;  // structural; computed once
  Context* ctx = nullptr;

  Node() = default;
  Node(Node&&) = default;  // Context fills a new node on the stack, then moves it into place

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t size() const { return num_elements(shape); }
  const NodeRef& in(size_t k) const { return inputs[k]; }
  UnaryFn unary() const { return static_cast<UnaryFn>(attrs.ints[0]); }
  BinaryFn binary() const { return static_cast<BinaryFn>(attrs.ints[0]); }
  ReduceFn reduce_fn() const { return static_cast<ReduceFn>(attrs.ints[0]); }
  bool keepdims() const { return attrs.ints[1] != 0; }
  std::vector<int> reduce_axes() const;
  // Reduce: per dim of its input (the reduction's domain), the stride of the result element that
  // the input element folds into: the result's C-order strides, 0 on the reduced dims.
  std::vector<int64_t> result_strides() const;
  // Random: ints = {RandomKind, stream, low, high, RandomEngine}.
  RandomKind random_kind() const { return static_cast<RandomKind>(attrs.ints[0]); }
  // A Random leaf that cuRAND fills by a library call (never computed inside a kernel).
  bool curand_leaf() const {
    return op == Op::Random && attrs.ints.size() > 4 &&
           static_cast<RandomEngine>(attrs.ints[4]) == RandomEngine::Curand;
  }
  ~Node();
};

// A node's parts, by reference: what Context::intern looks up before it copies anything.
struct NodeKey {
  Op op;
  DType dtype;
  const Shape& shape;
  const Chunks& chunks;
  const NodeRef* inputs;
  size_t num_inputs;
  const Attrs& attrs;
};

// Interns nodes. Entries are weak: a node leaves the table when its last reference goes.
class Context {
 public:
  static Context& global();
  // The node with these parts: the interned one if it exists, else a new one made of them.
  NodeRef make(Op op, DType dtype, Shape shape, Chunks chunks, std::vector<NodeRef> inputs,
               Attrs attrs = {});
  // The same for parts the caller keeps: they are copied only when the node is new (a scalar's
  // broadcast in `y + 1` is found, not built, from the second time on).
  NodeRef intern(const NodeKey& key);
  size_t live_nodes() const;
  // Candidates compared while interning, since the start: with a good hash about one per make(),
  // so building n nodes does O(n) work (tests check it instead of timing).
  uint64_t probes() const { return probes_.load(std::memory_order_relaxed); }
  void forget(const Node* n);  // called by ~Node

 private:
  // The table: open addressing with linear probing and backward-shift deletion, a power-of-two
  // number of slots at most half full; a slot with node == nullptr is free. One probe touches one
  // 32-byte slot, where a node-based multimap walked a list into other buckets (14% of building
  // `y = y + 1` from Python went to its equal_range).
  struct Slot {
    uint64_t hash = 0;
    const Node* node = nullptr;
    std::weak_ptr<const Node> ref;
  };
  size_t home(uint64_t hash) const { return (hash ^ (hash >> 32)) & (slots_.size() - 1); }
  void insert(Slot slot);  // grows first when the table would pass half full
  NodeRef find_locked(const NodeKey& key, uint64_t hash);
  NodeRef add_locked(Node node);

  mutable std::recursive_mutex mu_;
  std::atomic<uint64_t> probes_{0};
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

// Scalar value of a Scalar node as a double, whatever its dtype.
double scalar_as_double(const Node& n);

// A scalar value (a float `f` if from_float, else the integer `i`) converted to dtype `to` exactly
// as a kernel's Cast converts an element (docs/KERNEL_IR.md): floats to integers truncate and
// saturate (NaN -> 0), integers to int32 wrap, integers to floats round once, anything non-zero
// (NaN too) to bool is 1. The result in a Scalar node's representation: `f` for float dtypes,
// `i` for the others (the other field 0).
struct ScalarBits {
  double f = 0;
  int64_t i = 0;
};
ScalarBits convert_scalar(bool from_float, double f, int64_t i, DType to);

// The value classes of a scalar that simplification rules may depend on; a parameterized scalar
// keeps its class, so plans are shared only between scalars of one class. +0.0 and -0.0 are
// different classes (x + 0.0 is not x when x is -0.0).
enum class ScalarClass : uint8_t { Other = 0, Zero = 1, One = 2, Two = 3, NegZero = 4 };
ScalarClass scalar_class_of(const Node& scalar);

// Nodes reachable from roots, inputs before users (iterative; safe for very deep graphs).
std::vector<const Node*> topo_order(const std::vector<NodeRef>& roots);

// Chunk helpers.
Chunks regular_chunks(const Shape& shape, const Shape& block);  // block <= 0 in a dim: whole dim
Chunks single_chunks(const Shape& shape);
std::string chunks_str(const Chunks& c);

}  // namespace kiln
