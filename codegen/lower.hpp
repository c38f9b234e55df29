// lower_group: turns one fused group into kernel IR plus the bindings the runtime needs to fill
// the kernel's arguments for each block (which buffer or parameter slot feeds which leaf, and
// every leaf's and output's index map over the group's domain).
#pragma once
#include "codegen/kernel_ir.hpp"
#include "ir/fused.hpp"

namespace kiln {

struct LeafBinding {
  const Node* materialized = nullptr;  // read a buffer Kiln computed (else a parameter slot)
  int slot = -1;                       // Buffer leaves: the template slot holding the pointer
  int64_t offset = 0;                  // index map over the group's domain
  std::vector<int64_t> strides;
};

struct OutputBinding {
  const Node* target = nullptr;
  bool reduce = false;
  int64_t offset = 0;  // stores: map into the target's buffer over the domain
  std::vector<int64_t> strides;
};

struct LoweredGroup {
  kir::Kernel kernel;
  std::vector<LeafBinding> leaves;
  std::vector<OutputBinding> outputs;
  std::vector<int> param_slots;  // kernel parameter k <- template slot param_slots[k]
};

LoweredGroup lower_group(const Group& g, const FusedGraph& f);

}  // namespace kiln
