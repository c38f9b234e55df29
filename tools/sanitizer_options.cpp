// The sanitizers' defaults in every Kiln program (kiln, kiln_tests, kiln_bench); ASAN_OPTIONS and
// TSAN_OPTIONS still override them. Outside a sanitized build nothing calls these.
//
// allocator_may_return_null=1: a failing allocation returns null (as malloc does) instead of
// aborting, so the tests can check that Kiln reports it as a kiln::Error.
//
// intercept_tls_get_addr=0: GCC 12's runtimes (as up to GCC 13 and LLVM 16) take a dynamic TLS
// block whose address is 16 past a page boundary for one with glibc 2.19's header, and read the
// two words before it as that block's bounds. Since glibc 2.25 there is no such header, so when a
// block lands there by chance, AddressSanitizer's LeakSanitizer scans the made-up range and its
// tracer faults at exit after every assertion passed ("Tracer caught signal 11 ... LeakSanitizer
// has encountered a fatal error"; seen once in CI, on a test that loads cuSOLVER, whose libraries
// hold thread-local data; the cause as Mudlet/Mudlet#9930 found it), and ThreadSanitizer resets
// its shadow over that range. Without the interceptor both still see those blocks: glibc
// allocates them with malloc, which the sanitizers intercept, and LeakSanitizer reaches them
// through each thread's TLS.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:intercept_tls_get_addr=0";
}
extern "C" const char* __tsan_default_options() {
  return "allocator_may_return_null=1:intercept_tls_get_addr=0";
}
// NVRTC is not instrumented: cuda-emu's NVRTC checks compile for sm_80 and sm_90 on two threads
// at once, and a mutex NVRTC makes lazily in one and locks in the other looks like a race to
// ThreadSanitizer (pthread_mutex_lock inside libnvrtc.so.13 on a block it had just allocated in
// the other thread, without the happens-before its own uninstrumented atomics give; seen once in
// Cuda.NvrtcCompilesTheGpuBuildForSm80AndSm90). Reports whose stack passes through NVRTC are
// suppressed; Kiln's own code on those threads stays checked.
extern "C" const char* __tsan_default_suppressions() { return "race:libnvrtc.so\n"; }
