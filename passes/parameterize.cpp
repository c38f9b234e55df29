#include "passes/parameterize.hpp"

namespace kiln {

Graph parameterize(const Graph& g, std::vector<ParamValue>* params) {
  params->clear();
  return rewrite(g, [&](const NodeRef& n, std::vector<NodeRef> ins) -> NodeRef {
    if (n->op != Op::Scalar && n->op != Op::Buffer && n->op != Op::Random)
      return ins == n->inputs ? n : with_inputs(*n, std::move(ins));
    Attrs a = n->attrs;
    ParamValue v;
    v.f = a.f;
    v.i = a.i;
    v.ptr = a.ptr;
    v.owner = a.owner;
    v.place = a.place;
    a.slot = static_cast<int32_t>(params->size());
    params->push_back(std::move(v));
    if (n->op == Op::Scalar) a.cls = static_cast<uint8_t>(scalar_class_of(*n));
    a.f = 0;
    a.i = 0;
    a.ptr = nullptr;
    a.owner.reset();
    a.place = MemoryPlace{};
    return n->ctx->make(n->op, n->dtype, n->shape, n->chunks, {}, std::move(a));
  });
}

}  // namespace kiln
