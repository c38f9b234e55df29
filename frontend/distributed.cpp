// kiln::distributed (kiln/kiln.hpp): the public face of runtime/distributed.hpp, and the arrays
// that only some ranks hold (load_npy_shards, from_buffer_on).
#include "runtime/distributed.hpp"

#include <cstring>
#include <limits>

#include "frontend/build.hpp"
#include "ir/dtype.hpp"
#include "kiln/kiln.hpp"
#include "runtime/memory.hpp"
#include "support/checked.hpp"
#include "support/hash.hpp"
#include "support/npy.hpp"

namespace kiln::distributed {

using namespace detail;

void init(int& argc, char**& argv) { dist::start(&argc, &argv); }
void init() { dist::start(nullptr, nullptr); }
bool active() { return dist::world() != nullptr; }
int rank() {
  dist::Transport* w = dist::world();
  return w ? w->rank() : 0;
}
int size() {
  dist::Transport* w = dist::world();
  return w ? w->size() : 1;
}
std::string library() {
  dist::Transport* w = dist::world();
  return w ? w->library() : std::string();
}
std::string host() {
  dist::Transport* w = dist::world();
  return w ? w->host() : std::string();
}
void finalize() { dist::stop(); }

namespace {

uint64_t describe(uint64_t h, DType dtype, const Shape& shape, const Shape& chunks) {
  h = hash_mix(h, static_cast<uint64_t>(dtype));
  h = hash_mix(h, shape.size());
  for (int64_t e : shape) h = hash_mix(h, static_cast<uint64_t>(e));
  h = hash_mix(h, chunks.size());
  for (int64_t c : chunks) h = hash_mix(h, static_cast<uint64_t>(c));
  return h;
}

// A collective: every rank got this far without an error (`error`: this rank's, or empty) and
// passed what rank 0 did (`h` describes it); otherwise every rank raises, the one that failed its
// own error, the others one naming it.
void agree(const std::string& op, uint64_t h, const std::string& error = {}) {
  std::vector<int64_t> all =
      dist::allgather(error.empty() ? static_cast<int64_t>(h >> 2) + 1 : int64_t{0});
  const int me = dist::world()->rank();
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] != 0) continue;
    if (static_cast<int>(r) == me) throw Error(error + " [on rank " + std::to_string(me) + "]");
    throw Error(op + ": rank " + std::to_string(r) + " failed (its error is raised there)");
  }
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error(op + ": rank " + std::to_string(r) +
                  " passed another rank, dtype, shape or chunks than rank 0 (a collective: every "
                  "rank passes the same)");
}

// The whole array's memory (bytes), or this rank's error in *error.
std::shared_ptr<void> allocate(size_t bytes, std::string* error) {
  try {
    return host_buffer(bytes);
  } catch (const Error& e) {
    *error = e.what();
    return nullptr;
  }
}

// The Buffer at `data` (of `shape`, every element's memory there; `storage` keeps it), whose
// elements each rank holds as `r` says: registered as such until the array's last use.
Array held(DType dtype, const Shape& shape, Chunks chunks, const void* data,
           std::shared_ptr<const void> storage, std::shared_ptr<dist::Residency> r) {
  r->element_size = dtype_size(dtype);
  dist::set_residency(data, std::move(r));
  Attrs a = contiguous_view(shape);
  a.ptr = data;
  a.owner = std::shared_ptr<const void>(
      data, [storage = std::move(storage)](const void* d) { dist::forget_residency(d); });
  return Array(ctx().make(Op::Buffer, dtype, shape, std::move(chunks), {}, std::move(a)));
}

size_t checked_size(const std::string& op, DType dtype, const Shape& shape) {
  auto elements = checked::product(shape);
  auto bytes = elements ? checked::bytes(*elements, dtype_size(dtype)) : std::nullopt;
  if (!bytes)
    throw Error(op + ": shape " + shape_str(shape) + " of " + dtype_name(dtype) +
                " is more bytes than a 64-bit size can hold");
  return *bytes;
}

}  // namespace

Array load_npy_shards(const std::string& path, const Shape& chunks) {
  dist::Transport* w = dist::world();
  if (!w || w->size() <= 1) return load_npy(path, chunks);
  const std::string op = "load_npy_shards('" + path + "')";
  MappedNpy m{};
  DType dtype = DType::Float64;
  Shape rest;
  std::string error;
  try {
    m = map_npy(path);
    dtype = dtype_from_npy_descr(m.info.descr, op);
    if (m.info.shape.empty()) throw Error(op + ": a 0-d array has no rows to split across ranks");
    rest.assign(m.info.shape.begin() + 1, m.info.shape.end());
  } catch (const Error& e) {  // (a missing file on one rank: raised on every rank)
    error = e.what();
  }
  agree(op, describe(0x5a4d, dtype, rest, chunks), error);
  const std::vector<int64_t> rows = dist::allgather(m.info.shape[0]);
  Shape shape = m.info.shape;
  shape[0] = 0;
  for (int64_t n : rows) {
    if (n > std::numeric_limits<int64_t>::max() - shape[0])
      throw Error(op + ": the ranks' rows add up to more than 2^63");
    shape[0] += n;
  }
  const size_t bytes = checked_size(op, dtype, shape);
  // Each rank's rows chunked on their own: no block spans two ranks.
  Chunks c = make_chunks(op, shape, chunks);
  c[0].clear();
  for (int64_t n : rows) {
    if (n == 0) continue;
    Shape part = shape;
    part[0] = n;
    const Chunks pc = make_chunks(op, part, chunks);
    c[0].insert(c[0].end(), pc[0].begin(), pc[0].end());
  }
  if (bytes == 0 || c[0].empty()) return from_buffer(nullptr, dtype, shape, chunks);
  const int64_t row = num_elements(rest);
  auto r = std::make_shared<dist::Residency>();
  int64_t first = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] > 0)
      r->ranges.push_back({first * row, (first + rows[k]) * row - 1, static_cast<int>(k)});
    first += rows[k];
  }
  // The whole array's memory on every rank; this rank writes its rows (the others' stay
  // untouched unless a compute gathers them).
  std::shared_ptr<void> storage = allocate(bytes, &error);
  agree(op, 0, error);
  int64_t mine = 0;
  for (int k = 0; k < w->rank(); ++k) mine += rows[static_cast<size_t>(k)];
  if (m.nbytes > 0)
    std::memcpy(static_cast<char*>(storage.get()) + mine * row * dtype_size(dtype), m.data,
                m.nbytes);
  void* data = storage.get();
  return held(dtype, shape, std::move(c), data, std::move(storage), std::move(r));
}

Array from_buffer_on(int rank, const void* data, DType dtype, const Shape& shape,
                     const Shape& chunks) {
  dist::Transport* w = dist::world();
  const int ranks = w ? w->size() : 1;
  if (rank < 0 || rank >= ranks)
    throw Error("from_buffer_on: rank " + std::to_string(rank) + " is not one of the " +
                std::to_string(ranks) + " ranks");
  if (ranks == 1) return from_buffer(data, dtype, shape, chunks);
  const std::string op = "from_buffer_on";
  const bool mine = w->rank() == rank;
  std::string error;
  if (mine && !data && num_elements(shape) > 0)
    error = "from_buffer_on: data is null on rank " + std::to_string(rank) +
            ", which holds the array " + shape_str(shape);
  agree(op, describe(static_cast<uint64_t>(rank), dtype, shape, chunks), error);
  const size_t bytes = checked_size(op, dtype, shape);
  Chunks c = make_chunks(op, shape, chunks);
  if (bytes == 0) return from_buffer(nullptr, dtype, shape, chunks);
  auto r = std::make_shared<dist::Residency>();
  r->ranges.push_back({0, num_elements(shape) - 1, rank});
  // Kiln's own memory on every rank (the residency is found by address: the caller's buffer, read
  // whole by another array, must not be taken for this one); elsewhere written only by a gather.
  std::shared_ptr<void> storage = allocate(bytes, &error);
  agree(op, 0, error);
  if (mine) std::memcpy(storage.get(), data, bytes);
  void* at = storage.get();
  return held(dtype, shape, std::move(c), at, std::move(storage), std::move(r));
}

}  // namespace kiln::distributed
