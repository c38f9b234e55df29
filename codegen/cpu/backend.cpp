// The CPU backend behind codegen/backend.hpp: kernels compiled by the JIT (jit.cpp).
#include "codegen/cpu/jit.hpp"
#include "codegen/kernel_support.hpp"
#include "support/error.hpp"

namespace kiln::cpu {

namespace {

class CpuKernel final : public backend::Kernel {
 public:
  explicit CpuKernel(KernelFn fn) : fn_(fn) {}
  void launch(const int64_t* I, const double* F, void* const* P, int) const override {
    fn_(I, F, P);
    if (std::string e = kir::take_kernel_error(); !e.empty()) throw Error(e);
  }

 private:
  KernelFn fn_;
};

class CpuBackend final : public backend::Backend {
 public:
  Device device() const override { return Device::Cpu; }
  backend::Capabilities capabilities() const override {
    backend::Capabilities c;
    c.jit = true;
    c.vector_math = !math_mode().precise;
    c.vector_isa = math_mode().isa;
    c.preferred_block_elements = 1 << 20;  // blocks of ~8 MB of float64 stream well on 2-16 cores
    return c;
  }
  std::shared_ptr<const backend::Kernel> compile(const kir::Kernel& k,
                                                 backend::KernelDumps* dumps) override {
    return std::make_shared<CpuKernel>(cpu::compile(k, dumps));
  }
  backend::CompileStats stats() const override { return compile_stats(); }
  std::string target() const override { return target_summary(); }
};

}  // namespace

std::unique_ptr<backend::Backend> make_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace kiln::cpu
