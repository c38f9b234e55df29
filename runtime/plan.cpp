#include "runtime/plan.hpp"

#include <chrono>
#include <iostream>
#include <map>
#include <ostream>
#include <unordered_map>

#include "support/error.hpp"
#include "support/flags.hpp"

namespace kiln {

namespace {
constexpr size_t kFanIn = 8;  // partials folded per combine task

int64_t grid_blocks(const Chunks& c) {
  int64_t n = 1;
  for (const auto& d : c) n *= static_cast<int64_t>(d.size());
  return n;
}
}  // namespace

void Plan::block_box(const PlanGroup& g, int64_t block, int64_t* lo, int64_t* ext) const {
  int r = static_cast<int>(g.domain.size());
  for (int d = r - 1; d >= 0; --d) {
    int64_t n = static_cast<int64_t>(g.chunks[d].size());
    int64_t k = block % n;
    block /= n;
    lo[d] = g.starts[d][k];
    ext[d] = g.chunks[d][k];
  }
}

std::unique_ptr<Plan> build_plan(FusedGraph fused, std::ostream* kernel_dump) {
  auto plan = std::make_unique<Plan>();
  Plan& p = *plan;
  p.fused = std::move(fused);
  const FusedGraph& f = p.fused;
  // Arrays that exist in memory: one per materialized node.
  std::unordered_map<const Node*, int> array_of;
  for (const auto& b : f.boundaries) {
    PlanArray a;
    a.node = b.node;
    a.dtype = b.node->dtype;
    a.shape = b.node->shape;
    a.bytes = static_cast<size_t>(num_elements(a.shape)) * dtype_size(a.dtype);
    array_of[b.node] = static_cast<int>(p.arrays.size());
    p.arrays.push_back(std::move(a));
  }
  for (size_t k = 0; k < f.graph.outputs.size(); ++k) {
    int a = array_of.at(f.graph.outputs[k].get());
    if (p.arrays[a].output < 0) p.arrays[a].output = static_cast<int>(k);
    p.output_arrays.push_back(a);
  }
  // Groups: lower to kernel IR and compile.
  auto t0 = std::chrono::steady_clock::now();
  for (size_t gi = 0; gi < f.groups.size(); ++gi) {
    const Group& grp = f.groups[gi];
    PlanGroup g;
    g.lowered = lower_group(grp, f);
    g.domain = grp.domain;
    g.chunks = grp.chunks;
    g.blocks = grid_blocks(grp.chunks);
    for (const auto& c : grp.chunks) {
      std::vector<int64_t> s{0};
      for (size_t k = 0; k + 1 < c.size(); ++k) s.push_back(s.back() + c[k]);
      g.starts.push_back(std::move(s));
    }
    double c0 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (kernel_dump || flags().debug >= 3) {
      cpu::Dumps dumps;
      g.fn = cpu::compile(g.lowered.kernel, flags().debug >= 4 ? &dumps : nullptr);
      std::ostream& os = kernel_dump ? *kernel_dump : std::cerr;
      os << "kernel " << gi << ":\n" << g.lowered.kernel.str();
      if (flags().debug >= 4) os << dumps.llvm_ir;
      if (flags().debug >= 5) os << "; optimized\n" << dumps.optimized_ir;
    } else {
      g.fn = cpu::compile(g.lowered.kernel);
    }
    g.compile_start_s = c0;
    g.compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - c0;
    for (const auto& lb : g.lowered.leaves) {
      int a = lb.materialized ? array_of.at(lb.materialized) : -1;
      g.leaf_arrays.push_back(a);
      if (a >= 0) p.arrays[a].readers += static_cast<int>(g.blocks);
    }
    for (size_t o = 0; o < grp.outputs.size(); ++o) {
      const GroupOutput& go = grp.outputs[o];
      int a = array_of.at(go.target.get());
      if (!go.reduce) {
        g.output_arrays.push_back(a);
        continue;
      }
      PlanReduce r;
      r.group = static_cast<int>(gi);
      r.output = static_cast<int>(o);
      r.array = a;
      r.fn = go.target->reduce_fn();
      r.acc = g.lowered.kernel.outputs[o].type;
      // Result strides per domain dim: reduced dims vanish (or are 1 with keepdims).
      Shape st = c_strides(go.target->shape);
      uint32_t mask = g.lowered.kernel.outputs[o].reduced_mask;
      size_t j = 0;
      for (size_t d = 0; d < grp.domain.size(); ++d) {
        bool reduced = (mask >> d) & 1u;
        if (reduced) {
          r.count *= grp.domain[d];
          r.out_strides.push_back(0);
          if (go.target->keepdims()) ++j;
        } else {
          r.out_strides.push_back(st[j++]);
        }
      }
      g.output_arrays.push_back(static_cast<int>(p.reduces.size()));
      p.reduces.push_back(std::move(r));
    }
    p.groups.push_back(std::move(g));
  }
  p.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Tasks: Start_g -> Kernel tasks -> combine trees -> End_g; Start_g waits for End of deps.
  auto add_task = [&](PlanTask t) {
    p.tasks.push_back(std::move(t));
    return static_cast<int>(p.tasks.size()) - 1;
  };
  auto edge = [&](int from, int to) {
    p.tasks[from].next.push_back(to);
    ++p.tasks[to].waits;
  };
  std::vector<int> end_of(p.groups.size());
  p.partial_of.resize(p.groups.size());
  for (size_t gi = 0; gi < p.groups.size(); ++gi) {
    PlanGroup& g = p.groups[gi];
    PlanTask st{TaskKind::Start};
    st.group = static_cast<int>(gi);
    int start = add_task(st);
    for (int d : f.groups[gi].deps) edge(end_of[d], start);
    PlanTask et{TaskKind::End};
    et.group = static_cast<int>(gi);
    std::vector<int> kernel_tasks;
    std::vector<int> reduce_ids;
    for (size_t o = 0; o < g.output_arrays.size(); ++o)
      if (g.lowered.kernel.outputs[o].reduce) reduce_ids.push_back(g.output_arrays[o]);
    p.partial_of[gi].resize(g.blocks);
    for (int64_t b = 0; b < g.blocks; ++b) {
      PlanTask kt{TaskKind::Kernel};
      kt.group = static_cast<int>(gi);
      kt.block = b;
      int t = add_task(kt);
      edge(start, t);
      kernel_tasks.push_back(t);
      for (int r : reduce_ids) {
        p.partial_of[gi][b].push_back(static_cast<int>(p.partials.size()));
        p.partials.push_back({r, b});
      }
    }
    p.work_tasks += g.blocks;
    int end = add_task(et);
    for (int t : kernel_tasks) edge(t, end);
    // Combine trees, one per result block of each reduction.
    int r = g.domain.empty() ? 0 : static_cast<int>(g.domain.size());
    for (size_t k = 0; k < reduce_ids.size(); ++k) {
      const PlanReduce& red = p.reduces[reduce_ids[k]];
      uint32_t mask = g.lowered.kernel.outputs[red.output].reduced_mask;
      std::map<std::vector<int64_t>, std::vector<std::pair<int, int>>> by_key;  // (partial, task)
      std::vector<int64_t> first_block;
      std::vector<int64_t> coords(r);
      for (int64_t b = 0; b < g.blocks; ++b) {
        int64_t rem = b;
        for (int d = r - 1; d >= 0; --d) {
          int64_t n = static_cast<int64_t>(g.chunks[d].size());
          coords[d] = ((mask >> d) & 1u) ? 0 : rem % n;
          rem /= n;
        }
        by_key[coords].push_back({p.partial_of[gi][b][k], kernel_tasks[b]});
      }
      for (auto& [key, items] : by_key) {
        int64_t rep_block = p.partials[items.front().first].second;
        while (items.size() > kFanIn) {
          std::vector<std::pair<int, int>> next_level;
          for (size_t s = 0; s < items.size(); s += kFanIn) {
            PlanTask ct{TaskKind::Combine};
            ct.group = static_cast<int>(gi);
            ct.reduce = reduce_ids[k];
            int pid = static_cast<int>(p.partials.size());
            p.partials.push_back({reduce_ids[k], rep_block});
            ct.partial_out = pid;
            for (size_t q = s; q < std::min(items.size(), s + kFanIn); ++q)
              ct.partials_in.push_back(items[q].first);
            int t = add_task(ct);
            for (size_t q = s; q < std::min(items.size(), s + kFanIn); ++q)
              edge(items[q].second, t);
            edge(t, end);
            next_level.push_back({pid, t});
            ++p.work_tasks;
          }
          items = std::move(next_level);
        }
        PlanTask ct{TaskKind::Combine};
        ct.group = static_cast<int>(gi);
        ct.reduce = reduce_ids[k];
        ct.final_block = rep_block;
        for (auto& it : items) ct.partials_in.push_back(it.first);
        int t = add_task(ct);
        for (auto& it : items) edge(it.second, t);
        edge(t, end);
        ++p.work_tasks;
      }
    }
    end_of[gi] = end;
  }
  return plan;
}

}  // namespace kiln
