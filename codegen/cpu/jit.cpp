#include "codegen/cpu/jit.hpp"

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SmallVectorMemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>

#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "codegen/cpu/llvm_printer.hpp"
#include "codegen/kernel_support.hpp"
#include "codegen/math/kiln_math.hpp"
#include "support/cache.hpp"
#include "support/error.hpp"
#include "support/flags.hpp"
#include "support/hash.hpp"

namespace kiln::cpu {

namespace {

// Kiln's math library changes what kiln-math kernels call (which functions are Kiln's, and
// their code): its source's hash is part of the cache key.
std::string math_source_hash() {
  uint64_t h = hash_bytes(0, kmath::source());
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

class Jit {
 public:
  static Jit& instance() {
    static Jit* jit = new Jit();  // lives for the process: kernels may run at exit
    return *jit;
  }

  KernelFn compile(const kir::Kernel& k, backend::KernelDumps* dumps) {
    // The math mode changes the code for the same kernel IR: it is part of both cache keys.
    MathMode mode = math_mode_now();
    std::string text = k.str() + (mode.precise ? "precise-math\n" : mode.kiln ? "kiln-math\n" : "");
    uint64_t key = hash_mix(k.hash(), mode.precise ? 1 : mode.kiln ? 2 : 0);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fns_.find(text);
    if (it != fns_.end() && !dumps) return it->second;
    char name[40];
    std::snprintf(name, sizeof name, "kiln_k_%016llx", static_cast<unsigned long long>(key));
    auto t0 = std::chrono::steady_clock::now();
    // The disk cache's key: everything the object depends on (kernel IR, math mode, target CPU
    // and features, LLVM, printer and Kiln math versions), not only the 64-bit name's hash.
    cache::Key disk_key = cache::key_of("cpu-object\n" + target_id_ + "\n" + text);
    std::string cache_file = dumps ? "" : cache::path_of("k", disk_key, ".o");
    std::unique_ptr<llvm::MemoryBuffer> obj;
    if (auto payload = cache::load(cache_file, cache::Kind::CpuObject, disk_key)) {
      obj = llvm::MemoryBuffer::getMemBufferCopy(*payload, name);
      ++stats_.disk_hits;
    }
    if (!obj) {
      if (flags().no_compile)
        throw Error("compute: kernel " + std::string(name) +
                    " needs compiling but KILN_NO_COMPILE is set");
      obj = build_object(k, name, dumps, mode);
      ++stats_.compiled;
      cache::store(cache_file, cache::Kind::CpuObject, disk_key,
                   {obj->getBufferStart(), obj->getBufferSize()});
    }
    if (it != fns_.end()) return it->second;  // dumps requested for a loaded kernel
    if (auto err = jit_->addObjectFile(std::move(obj)))
      throw Error("compile: linking kernel " + std::string(name) +
                  " failed: " + llvm::toString(std::move(err)));
    auto sym = jit_->lookup(name);
    if (!sym)
      throw Error("compile: kernel symbol " + std::string(name) +
                  " not found: " + llvm::toString(sym.takeError()));
    KernelFn fn = sym->toPtr<KernelFn>();
    stats_.compile_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fns_.emplace(std::move(text), fn);
    return fn;
  }

  backend::CompileStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  const std::string& target_id() const { return target_id_; }
  MathMode math_mode() const { return vector_math_; }
  // The variant of this target, in the mode the flags say now (KILN_PRECISE_MATH, KILN_MATH).
  MathMode math_mode_now() const {
    MathMode m = vector_math_;
    m.precise = flags().precise_math;
    m.kiln = vm::kiln_math_selected();
    return m;
  }
  std::string target_summary() const {
    return std::string(tm_->getTargetCPU()) + ", vector math " + vm::isa_name(vector_math_.isa);
  }

 private:
  Jit() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    // The loop vectorizer's remainder loops are vectorized too from main loops of 4 lanes on
    // (LLVM's default: 16), so that rows shorter than the main loop's lanes x 4 interleaved run
    // in vectors instead of one element at a time. One thread, 4e6 x 25 float64 (Xeon AMX):
    // max(axis=1) 280 -> 76 ms (NumPy 190), max(axis=0) 290 -> 51 (NumPy 119) with 8 lanes on;
    // from 4 on, AVX2 code (KILN_TARGET_CPU=x86-64-v3) sum(axis=1) 72 -> 61 too. An LLVM option
    // of the process, set unless the program set it itself.
    auto& options = llvm::cl::getRegisteredOptions();
    if (auto it = options.find("epilogue-vectorization-minimum-VF");
        it != options.end() && it->second->getNumOccurrences() == 0)
      it->second->addOccurrence(0, it->first(), "4");
    llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1");
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) throw Error("compile: cannot detect the host CPU: " + toString(jtmb.takeError()));
    jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    auto tm = jtmb->createTargetMachine();
    if (!tm) throw Error("compile: no LLVM target machine: " + toString(tm.takeError()));
    tm_ = std::move(*tm);
    if (const std::string& cpu = flags().target_cpu; !cpu.empty()) retarget(*jtmb, cpu);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
    if (!jit) throw Error("compile: cannot create the LLJIT: " + toString(jit.takeError()));
    jit_ = std::move(*jit);
    auto& jd = jit_->getMainJITDylib();
    jd.addGenerator(llvm::cantFail(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        jit_->getDataLayout().getGlobalPrefix())));
    llvm::orc::SymbolMap helpers;
    helpers[jit_->mangleAndIntern("kiln_ipow")] = {llvm::orc::ExecutorAddr::fromPtr(&kiln_ipow),
                                                   llvm::JITSymbolFlags::Exported};
    helpers[jit_->mangleAndIntern("kiln_normal_slow")] = {
        llvm::orc::ExecutorAddr::fromPtr(&kiln_normal_slow), llvm::JITSymbolFlags::Exported};
    for (const auto& [sym, addr] : kmath::vector_symbols())  // Kiln's math, not exported
      helpers[jit_->mangleAndIntern(sym)] = {llvm::orc::ExecutorAddr::fromPtr(addr),
                                             llvm::JITSymbolFlags::Exported};
    llvm::cantFail(jd.define(llvm::orc::absoluteSymbols(std::move(helpers))));
    target_id_ = std::string(tm_->getTargetCPU()) + "|" +
                 std::string(tm_->getTargetFeatureString()) +
                 "|llvm-" LLVM_VERSION_STRING "|printer-" + std::to_string(kPrinterVersion) +
                 "-" KILN_PRINTER_HASH "|kmath-" + math_source_hash();
    // One libmvec variant per target: the widest ISA it has (see MathMode).
    const llvm::MCSubtargetInfo* sti = tm_->getMCSubtargetInfo();
    // LLVM's tuning of Intel's AVX-512 cores (Skylake-X to Granite Rapids) prefers 256-bit
    // vectors; AMD's Zen 4 and 5 keep 512 (print_llvm's stream_hints).
    if (sti->checkFeatures("+avx512f,+prefer-256-bit")) tuning_.stream_vector_bytes = 32;
    if (sti->checkFeatures("+avx512f"))
      vector_math_ = {false, 'e', 8};
    else if (sti->checkFeatures("+avx2,+fma"))
      vector_math_ = {false, 'd', 4};
    else
      vector_math_ = {false, 'b', 2};
    for (const auto& m : vector_mappings(vector_math_)) {
      names_.push_back(m.scalar);
      const char* scalar = names_.back().c_str();
      names_.push_back(m.vector);
      const char* vec = names_.back().c_str();
      names_.push_back(m.abi);
      const char* abi = names_.back().c_str();
      vecdescs_.emplace_back(scalar, vec, llvm::ElementCount::getFixed(m.lanes), false, abi);
    }
  }

  // KILN_TARGET_CPU: code for an LLVM CPU name (x86-64-v3: AVX2 on an AVX-512 host) with that
  // CPU's own features. Refused unless the host has every one of them (the code would fault).
  void retarget(llvm::orc::JITTargetMachineBuilder& jtmb, const std::string& cpu) {
    const llvm::MCSubtargetInfo* host = tm_->getMCSubtargetInfo();
    if (!host->isCPUStringValid(cpu))
      throw Error("compile: KILN_TARGET_CPU '" + cpu + "' is not a CPU LLVM knows for " +
                  tm_->getTargetTriple().str() + " (for example x86-64-v2, x86-64-v3, znver3)");
    jtmb.setCPU(cpu);
    jtmb.getFeatures() = llvm::SubtargetFeatures();
    auto tm = jtmb.createTargetMachine();
    if (!tm)
      throw Error("compile: no LLVM target machine for " + cpu + ": " + toString(tm.takeError()));
    // A 32-bit CPU (i386, pentium4, lakemont, ...) cannot run x86-64 code: LLVM would abort.
    if (!(*tm)->getMCSubtargetInfo()->checkFeatures("+64bit"))
      throw Error("compile: KILN_TARGET_CPU '" + cpu +
                  "' is a 32-bit CPU; kernels are x86-64 code (for example x86-64-v2, "
                  "x86-64-v3, znver3)");
    std::string names;
    for (const auto& f : llvm::sys::getHostCPUFeatures())
      if (!f.getValue() && (*tm)->getMCSubtargetInfo()->checkFeatures("+" + f.getKey().str()))
        names += (names.empty() ? "" : ", ") + f.getKey().str();
    if (!names.empty())
      throw Error("compile: KILN_TARGET_CPU '" + cpu +
                  "' needs features this host lacks: " + names);
    tm_ = std::move(*tm);
  }

  std::unique_ptr<llvm::MemoryBuffer> build_object(const kir::Kernel& k, const char* name,
                                                   backend::KernelDumps* dumps, MathMode mode) {
    bool precise = mode.precise;
    llvm::LLVMContext ctx;
    auto m = std::make_unique<llvm::Module>(name, ctx);
    m->setDataLayout(tm_->createDataLayout());
    m->setTargetTriple(tm_->getTargetTriple().str());
    llvm::Function* fn = print_llvm(k, *m, name, mode, tuning_);
    fn->addFnAttr("target-cpu", tm_->getTargetCPU());
    fn->addFnAttr("target-features", tm_->getTargetFeatureString());
    fn->addFnAttr("prefer-vector-width", "512");
    std::string verify;
    llvm::raw_string_ostream vs(verify);
    if (llvm::verifyModule(*m, &vs))
      throw InternalError("codegen produced invalid LLVM IR for " + std::string(name) + ": " +
                          verify + "\n" + k.str());
    if (dumps) {
      llvm::raw_string_ostream os(dumps->printed);
      m->print(os, nullptr);
    }
    optimize(*m, precise);
    if (!precise) join_sincos(*m);
    if (dumps) {
      llvm::raw_string_ostream os(dumps->optimized);
      m->print(os, nullptr);
    }
    llvm::SmallVector<char, 0> out;
    llvm::raw_svector_ostream os(out);
    llvm::legacy::PassManager pm;
    if (tm_->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
      throw Error("compile: the LLVM target cannot emit object files");
    pm.run(*m);
    return std::make_unique<llvm::SmallVectorMemoryBuffer>(std::move(out), name, false);
  }

  // O3 for the host. Unless `precise`, the kiln_vm_* wrappers vectorize to their libmvec variant
  // (vector_mappings); precise code calls glibc's scalar functions.
  void optimize(llvm::Module& m, bool precise) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(tm_.get(), pto);
    llvm::Triple triple(m.getTargetTriple());
    auto tlii = std::make_unique<llvm::TargetLibraryInfoImpl>(triple);
    if (!precise) tlii->addVectorizableFunctions(vecdescs_);
    fam.registerPass([&] { return llvm::TargetLibraryAnalysis(*tlii); });
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    auto mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(m, mam);
  }

  std::mutex mu_;
  std::unique_ptr<llvm::TargetMachine> tm_;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  std::unordered_map<std::string, KernelFn> fns_;
  MathMode vector_math_;
  Tuning tuning_;
  std::deque<std::string> names_;  // stable storage for the VecDesc strings
  std::vector<llvm::VecDesc> vecdescs_;
  backend::CompileStats stats_;
  std::string target_id_;
};

}  // namespace

KernelFn compile(const kir::Kernel& k, backend::KernelDumps* dumps) {
  return Jit::instance().compile(k, dumps);
}
backend::CompileStats compile_stats() { return Jit::instance().stats(); }
const std::string& target_id() { return Jit::instance().target_id(); }
std::string target_summary() { return Jit::instance().target_summary(); }
MathMode math_mode() { return Jit::instance().math_mode_now(); }

}  // namespace kiln::cpu
