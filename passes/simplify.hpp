// simplify: algebraic identities that remove work without changing any result bit:
// x + 0, 0 + x, x - 0, x * 1, 1 * x, x / 1, x ** 1, -(-x), not(not b), rechunk(rechunk(x)).
// Runs on template graphs: it reads a scalar's value class (zero / one), never its value, so a
// cached plan stays valid for every call whose scalars fall in the same classes.
#pragma once
#include "ir/graph.hpp"

namespace kiln {
Graph simplify(const Graph& g);
}
