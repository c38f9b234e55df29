// Graphviz output of a fused graph: one vertex per node, coloured by the kernel that computes
// it; materialized nodes (fusion boundaries) drawn as boxes with their reason.
#pragma once
#include <ostream>

#include "ir/fused.hpp"

namespace kiln {
void write_dot(std::ostream& os, const FusedGraph& f);
}
