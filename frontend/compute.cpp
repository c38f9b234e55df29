// compute(): template the graph, find or build its plan, run it, wrap the results.
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "codegen/backend.hpp"
#include "ir/dot.hpp"
#include "kiln/kiln.hpp"
#include "passes/parameterize.hpp"
#include "passes/pipeline.hpp"
#include "runtime/distributed.hpp"
#include "runtime/execute.hpp"
#include "runtime/memory.hpp"
#include "runtime/placement.hpp"
#include "support/files.hpp"
#include "support/flags.hpp"
#include "support/hash.hpp"

namespace kiln {

namespace {

struct PlanKey {
  std::vector<const Node*> outputs;
  Device device;
  bool fuse;
  bool row_fusion;
  bool push_slices;
  bool precise_math;       // selects other kernels
  std::string math;        // KILN_MATH: so does this
  bool no_device_library;  // places library calls elsewhere
  int64_t cores;           // shapes products (dist::plan_cores: the fewest of any rank's)
  bool operator<(const PlanKey& o) const {
    if (cores != o.cores) return cores < o.cores;
    if (device != o.device) return device < o.device;
    if (fuse != o.fuse) return fuse < o.fuse;
    if (row_fusion != o.row_fusion) return row_fusion < o.row_fusion;
    if (push_slices != o.push_slices) return push_slices < o.push_slices;
    if (precise_math != o.precise_math) return precise_math < o.precise_math;
    if (math != o.math) return math < o.math;
    if (no_device_library != o.no_device_library) return no_device_library < o.no_device_library;
    return outputs < o.outputs;
  }
};

struct CacheEntry {
  std::vector<NodeRef> templates;  // keeps the template nodes (the key) interned
  std::shared_ptr<const Plan> plan;
};

std::mutex g_mu;
std::map<PlanKey, CacheEntry> g_plans;
Stats g_totals;
thread_local Stats t_last;

int thread_count(const ComputeOptions& opt) {
  if (opt.threads > 0) return opt.threads;
  if (flags().threads > 0) return flags().threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

std::vector<NDArray> compute_kept(const std::vector<Array>& arrays, const ComputeOptions& opt,
                                  std::vector<std::shared_ptr<const dist::Residency>>* keep);

std::vector<NDArray> compute(const std::vector<Array>& arrays) { return compute(arrays, {}); }

std::vector<NDArray> compute(const std::vector<Array>& arrays, const ComputeOptions& opt) {
  return compute_kept(arrays, opt, nullptr);
}

// compute(), and (keep: persist() of a distributed run) the outputs' blocks kept where they
// were made: per output, its residency in *keep (null when it is whole on every rank).
std::vector<NDArray> compute_kept(const std::vector<Array>& arrays, const ComputeOptions& opt,
                                  std::vector<std::shared_ptr<const dist::Residency>>* keep) {
  auto t0 = std::chrono::steady_clock::now();
  Graph g;
  for (const auto& a : arrays) {
    if (!a.node()) throw Error("compute: an operand is an empty (default-constructed) Array");
    if (a.ndim() > 32)  // creation checks this too, but reshape/stack can still reach it
      throw Error("compute: arrays of rank " + std::to_string(a.ndim()) +
                  " are not supported (at most 32 dimensions)");
    g.outputs.push_back(a.node());
  }
  if (!opt.skip.empty() && opt.skip.size() != arrays.size())
    throw Error("compute: skip has " + std::to_string(opt.skip.size()) +
                " entries; expected none or one per array (" + std::to_string(arrays.size()) + ")");
  std::vector<ParamValue> params;
  Graph tmpl = parameterize(g, &params);
  bool fuse = opt.fuse && !flags().no_fuse;
  bool push = opt.push_slices && !flags().no_push_slices;
  Device device = resolve_device(opt.device);
  backend::Backend& be = backend::backend_for(device);
  bool rows = fuse && opt.row_fusion && !flags().no_row_fusion;
  // KILN_MPI=1: MPI starts before planning (plans are shaped for every rank's cores).
  if (opt.distributed && flags().mpi && !dist::world()) dist::start(nullptr, nullptr);
  PlanKey key{{},
              device,
              fuse,
              rows,
              push,
              flags().precise_math,
              flags().math,
              flags().no_device_library,
              dist::plan_cores()};
  for (const auto& o : tmpl.outputs) key.outputs.push_back(o.get());
  std::shared_ptr<const Plan> plan;
  bool cached = false;
  bool want_dumps = opt.ir || opt.kernels || !opt.dot_file.empty();
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_plans.find(key);
    if (it != g_plans.end() && !want_dumps) {
      plan = it->second.plan;
      cached = true;
      ++g_totals.plan_cache_hits;
    }
  }
  auto before = be.stats();
  std::unique_ptr<Trace> trace;
  if (!opt.trace_file.empty()) trace = std::make_unique<Trace>();
  double plan_start_us = trace ? trace->now_us() : 0;
  bool built_now = false;
  if (!plan) {
    PipelineOptions po;
    po.fuse = fuse;
    po.row_fusion = rows;
    po.gpu = device == Device::Cuda || device == Device::CudaEmu;
    po.push_slices = push;
    po.dump = opt.ir;
    FusedGraph fused = run_pipeline(tmpl, po);
    if (!opt.dot_file.empty()) {
      std::ostringstream dot;
      write_dot(dot, fused);
      files::write(opt.dot_file, dot.str(), "compute: cannot write the DOT file");
    }
    std::shared_ptr<const Plan> built = build_plan(std::move(fused), device, opt.kernels);
    if (opt.ir) {
      *opt.ir << storage_summary(*built);
      if (dist::Transport* w = opt.distributed ? dist::world() : nullptr; w && w->size() > 1)
        *opt.ir << placement_summary(*placement(*built, w->size()));
    }
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_totals.plans_built;
    auto& entry = g_plans[key];
    entry.templates = tmpl.outputs;
    entry.plan = built;
    plan = built;
    built_now = true;
  }
  if (trace && built_now) {
    for (size_t g = 0; g < plan->groups.size(); ++g) {
      TraceEvent e;
      e.name = "compile kernel " + std::to_string(g);
      e.cat = "compile";
      e.start_us = plan_start_us + plan->groups[g].compile_start_s * 1e6;
      e.dur_us = plan->groups[g].compile_s * 1e6;
      trace->add(std::move(e));
    }
  }
  if (opt.plan_only) return std::vector<NDArray>(arrays.size());
  reset_peak_bytes();
  reset_device_peak_bytes();
  int64_t mem_before = bytes_in_use(), device_before = device_bytes_in_use();
  RunOptions ro;
  ro.threads = thread_count(opt);
  ro.trace = trace.get();
  ro.progress = opt.progress;
  ro.keep_on_device = opt.keep_on_device;
  ro.skip = opt.skip.empty() ? nullptr : &opt.skip;
  ro.cancel = opt.cancel;
  ro.tasks_done = opt.tasks_done;
  ro.tasks_total = opt.tasks_total;
  if (opt.distributed) ro.transport = dist::world();
  if (ro.transport && ro.transport->size() > 1) {  // what every rank must agree it computes
    uint64_t h = hash_mix(hash_mix(0x6b696c6e, static_cast<uint64_t>(device)), key.cores);
    for (bool b : {fuse, rows, push, key.precise_math, key.no_device_library, keep != nullptr})
      h = hash_mix(h, b);
    h = hash_bytes(h, key.math);
    for (const Node* o : key.outputs) h = hash_mix(h, o->hash);
    for (const ParamValue& v : params) {  // scalars, random seeds (Buffers: by their presence)
      h = hash_double(hash_mix(h, static_cast<uint64_t>(v.i)), v.f);
      h = hash_mix(h, (v.ptr != nullptr) | (uint64_t{v.place.on_host()} << 1));
    }
    ro.fingerprint = h;
  }
  std::vector<std::shared_ptr<const dist::Residency>> held;  // the Buffers' residencies
  if (dist::residencies() > 0) {
    ro.slot_residency.assign(params.size(), nullptr);
    for (size_t k = 0; k < params.size(); ++k)
      if (params[k].ptr)
        if (auto r = dist::residency(params[k].ptr)) {
          ro.slot_residency[k] = r.get();
          held.push_back(std::move(r));
        }
  }
  // Kept where made: host results only (a gather of a kept array writes it as host memory); a
  // persist() that keeps its result on the devices gets it whole on every rank's device.
  if (keep && !(opt.keep_on_device && backend::backend_for(plan->device).memory()))
    ro.keep.assign(arrays.size(), 1);
  ro.devices = opt.devices != 0 ? opt.devices : flags().devices;
  if (ro.devices < 0)
    throw Error("compute: devices must be at least 1 (0: the default), not " +
                std::to_string(ro.devices));
  if (flags().cuda_profile)
    backend::add_host_time(
        "compute: plan",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::optional<backend::HostTimer> running(std::in_place, "compute: run");
  RunResult res = execute(*plan, params, ro);
  running.reset();
  if (keep) {
    *keep = res.kept;
    keep->resize(arrays.size());
  }
  if (trace) {
    std::ostringstream json;
    trace->write_chrome_json(json);
    // Distributed: rank 0 writes the file named, rank r the same name with ".rank<r>" appended.
    std::string path = opt.trace_file;
    if (res.dist.ranks > 1 && ro.transport->rank() > 0)
      path += ".rank" + std::to_string(ro.transport->rank());
    files::write(path, json.str(), "compute: cannot write the trace file");
  }
  auto after = be.stats();

  std::vector<NDArray> out;
  for (size_t k = 0; k < res.outputs.size(); ++k) {
    const Node& n = *g.outputs[k];
    if (!res.outputs[k])
      out.emplace_back();  // skipped
    else
      out.emplace_back(n.dtype, n.shape, res.outputs[k], res.outputs[k].get(), res.places[k]);
  }
  Stats last;
  last.last_cached = cached;
  last.last_tasks = res.tasks;
  last.last_kernels = static_cast<int64_t>(plan->groups.size());
  last.last_peak_bytes = peak_bytes() - mem_before;
  if (be.memory()) {
    last.last_devices = res.devices;
    last.last_to_device = res.transfers.to_device;
    last.last_to_device_bytes = res.transfers.to_device_bytes;
    last.last_to_host = res.transfers.to_host;
    last.last_to_host_bytes = res.transfers.to_host_bytes;
    last.last_between_devices = res.transfers.between;
    last.last_between_devices_bytes = res.transfers.between_bytes;
    last.last_peak_device_bytes = device_peak_bytes() - device_before;
  }
  if (res.dist.ranks > 1) {
    last.last_ranks = res.dist.ranks;
    last.last_rank_tasks = res.dist.tasks;
    last.last_messages_sent = res.dist.messages_sent;
    last.last_bytes_sent = res.dist.bytes_sent;
    last.last_messages_received = res.dist.messages_received;
    last.last_bytes_received = res.dist.bytes_received;
    last.last_predicted_messages = res.dist.predicted_messages;
    last.last_predicted_bytes = res.dist.predicted_bytes;
  }
  last.last_compile_seconds = after.compile_seconds - before.compile_seconds;
  last.last_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  t_last = last;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++g_totals.computes;
    g_totals.tasks += res.tasks;
    g_totals.messages_sent += res.dist.messages_sent;
    g_totals.bytes_sent += res.dist.bytes_sent;
    g_totals.max_peak_bytes = std::max(g_totals.max_peak_bytes, last.last_peak_bytes);
  }
  return out;
}

std::string compile_target() { return backend::backend_for(Device::Cpu).target(); }

std::string device_target(Device d) { return backend::backend_for(d).target(); }

int device_ordinal(Device device, int index) {
  device = resolve_device(device);
  backend::DeviceMemory* m = backend::backend_for(device).memory();
  if (!m) return -1;
  if (index < 0 || index >= m->max_count())
    throw Error(std::string("device_ordinal: ") + device_name(device) + " has devices 0 to " +
                std::to_string(m->max_count() - 1) + ", not " + std::to_string(index));
  return m->ordinal(index);
}

std::vector<std::string> host_fallbacks() { return backend::host_fallbacks(); }

Stats stats() {
  Stats s = t_last;
  for (Device d : {Device::Cpu, Device::Interp, Device::CudaEmu}) {
    backend::CompileStats c = backend::backend_for(d).stats();
    s.kernels_compiled += c.compiled;
    s.kernels_from_disk += c.disk_hits;
    s.compile_seconds += c.compile_seconds;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  s.plans_built = g_totals.plans_built;
  s.plan_cache_hits = g_totals.plan_cache_hits;
  s.computes = g_totals.computes;
  s.tasks = g_totals.tasks;
  s.messages_sent = g_totals.messages_sent;
  s.bytes_sent = g_totals.bytes_sent;
  s.max_peak_bytes = g_totals.max_peak_bytes;
  return s;
}

void reset_peak_stats() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_totals.max_peak_bytes = 0;
}

void clear_plan_cache() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_plans.clear();
}

NDArray Array::compute() const { return kiln::compute(std::vector<Array>{*this})[0]; }

Array Array::persist() const { return persist(ComputeOptions{}); }

Array Array::persist(const ComputeOptions& options) const {
  return kiln::persist({*this}, options)[0];
}

std::vector<Array> persist(const std::vector<Array>& arrays, const ComputeOptions& options) {
  // Distributed: each rank keeps the blocks it made (where the array's blocks are contiguous rows
  // of it, made on several ranks); later computes read them where they are, or gather them first
  // (runtime/placement).
  std::vector<std::shared_ptr<const dist::Residency>> kept;
  std::vector<NDArray> r = compute_kept(arrays, options, &kept);
  std::vector<Array> out;
  for (size_t k = 0; k < r.size(); ++k) {
    const NDArray& v = r[k];
    Attrs a;
    a.offset = 0;
    a.strides = c_strides(v.shape());
    a.ptr = v.data();
    a.owner = v.storage();
    if (kept[k]) {
      dist::set_residency(v.data(), kept[k]);
      a.owner = std::shared_ptr<const void>(
          v.data(), [storage = v.storage()](const void* data) { dist::forget_residency(data); });
    }
    a.place = v.place();
    out.push_back(Array(Context::global().make(Op::Buffer, arrays[k].dtype(), arrays[k].shape(),
                                               arrays[k].chunks(), {}, std::move(a))));
  }
  return out;
}

}  // namespace kiln
