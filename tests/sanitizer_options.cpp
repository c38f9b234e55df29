// Under AddressSanitizer and ThreadSanitizer, let a failing allocation return null (as malloc
// does) instead of aborting, so the tests can check that Kiln reports it as a kiln::Error.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
extern "C" const char* __tsan_default_options() { return "allocator_may_return_null=1"; }
