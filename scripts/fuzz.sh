#!/usr/bin/env bash
# Fuzzes the readers of untrusted input with libFuzzer under AddressSanitizer + UBSan: the .npy
# reader (tests/fuzzers/npy_fuzzer.cpp), kiln report's trace reader
# (tests/fuzzers/trace_fuzzer.cpp) and the kiln command's argument parser
# (tests/fuzzers/cli_fuzzer.cpp). Each harness is compiled directly with clang (no CMake build
# needed) into build/fuzzers/, then run for KILN_FUZZ_SECONDS (default 60) seconds of one core
# from its seed corpus (tests/fuzzers/corpus/<harness>/, never written to; new inputs go to
# build/fuzzers/<harness>-corpus/). Any crash, sanitizer report, leak, uncaught exception, broken
# invariant or input slower than 10 s fails the script; the input is saved as
# build/fuzzers/<harness>-crash-* (or -leak-, -timeout-, -oom-) and reruns with
#   build/fuzzers/<harness> FILE
#
#   scripts/fuzz.sh [npy] [trace] [cli]      # default: all three
# Environment: KILN_FUZZ_SECONDS (per harness), KILN_FUZZ_CXX (default clang++-19, with
# libclang-rt-19-dev for the fuzzer and sanitizer runtimes).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
seconds="${KILN_FUZZ_SECONDS:-60}"
cxx="${KILN_FUZZ_CXX:-clang++-19}"
out="$root/build/fuzzers"
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(npy trace cli)

sources() {
  case "$1" in
    npy) echo "tests/fuzzers/npy_fuzzer.cpp support/npy.cpp support/error.cpp" ;;
    trace) echo "tests/fuzzers/trace_fuzzer.cpp tools/report.cpp support/files.cpp support/error.cpp" ;;
    cli) echo "tests/fuzzers/cli_fuzzer.cpp tools/cli.cpp support/flags.cpp support/device.cpp support/error.cpp" ;;
    *) echo "fuzz.sh: unknown harness '$1' (npy, trace, cli)" >&2; return 2 ;;
  esac
}

command -v "$cxx" >/dev/null || { echo "fuzz.sh: $cxx not found (scripts/install-deps.sh)" >&2; exit 2; }
mkdir -p "$out"
flags=(-std=c++17 -g -O1 -fno-omit-frame-pointer -I"$root"
       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)

# Build every harness (in parallel), then run each in turn.
pids=()
for h in "${harnesses[@]}"; do
  src=$(sources "$h")
  # shellcheck disable=SC2086
  "$cxx" "${flags[@]}" $src -o "$out/$h" 2>"$out/$h.build.log" &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    h=${harnesses[$i]}
    cat "$out/$h.build.log" >&2
    if grep -q "libclang_rt" "$out/$h.build.log"; then
      echo "fuzz.sh: the fuzzer/sanitizer runtime is missing: install libclang-rt-19-dev" >&2
    fi
    echo "fuzz.sh: building $h failed" >&2
    exit 2
  fi
done

# Every harness runs at once, each for as long as gives it the CPU time of running alone for
# KILN_FUZZ_SECONDS on a free core: with 3 harnesses on 2 cores, 90 s of wall time each instead of
# three 60 s runs one after the other (the same executions, half the wall time).
cores=$(nproc 2>/dev/null || echo 1)
slots=$(( cores < ${#harnesses[@]} ? cores : ${#harnesses[@]} ))
wall=$(( (seconds * ${#harnesses[@]} + slots - 1) / slots ))
pids=()
for h in "${harnesses[@]}"; do
  mkdir -p "$out/$h-corpus"
  echo "fuzz.sh: $h for ${wall} s of wall time, ${#harnesses[@]} harnesses on $cores cores (log $out/$h.log)"
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
    "$out/$h" -max_total_time="$wall" -close_fd_mask=1 -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -dict="tests/fuzzers/$h.dict" -artifact_prefix="$out/$h-" -print_final_stats=1 \
    "$out/$h-corpus" "tests/fuzzers/corpus/$h" >"$out/$h.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!pids[@]}"; do
  h=${harnesses[$i]}
  log="$out/$h.log"
  rc=0
  wait "${pids[$i]}" || rc=$?
  grep -E "^(stat::number_of_executed_units|stat::peak_rss_mb)" "$log" | sed "s/^/  $h /" || true
  if [ $rc -ne 0 ]; then
    echo "fuzz.sh: $h FAILED (exit $rc); the end of its log:" >&2
    tail -n 60 "$log" >&2
    status=1
  fi
done
[ $status -eq 0 ] && echo "fuzz.sh: no crashes"
exit $status
