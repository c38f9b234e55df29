#!/usr/bin/env bash
# Everything the GPU issues need a GPU for, in one call of the device tool (DEVELOPERS.md): build
# and pack here, run there, read one archive and one summary back.
#
#   here:   bash scripts/gpu-session.sh pack
#   there:  run(command="bash scripts/gpu-session.sh run", carry=[".device-pack"], timeout_s=600)
#
# A session has 15 minutes of device time in all, the machine's start included, so `run` is one
# pass of about 8 minutes (KILN_GPU_BUDGET_S, 480 unless set) over steps in the order of their
# value, each with a limit of its own and skipped, saying so, once the budget is spent:
#   env        nvidia-smi, the CUDA libraries found and their versions, CuPy/JAX versions
#   doctor     `kiln doctor --device cuda` (where this kiln has it): one line per check
#   python     scripts/gpu-python-check.py: the Python package's device protocols with CuPy (the
#              pack holds the extension built for the GPU machine's Python 3.12)
#   workloads  the issue's workloads, --json --repeat 5, with and without --resident and --rng
#              curand; then each once more with KILN_CUDA_PROFILE=1 (the kernels' share)
#   peers      bench/peers/gpu_peers.py (copy ceiling, CuPy, JAX on the same work), if present
#   tests      the whole suite with KILN_DEVICE=cuda, one process per test, 8 at once, each with
#              a timeout; each failure rerun once with KILN_CUDA_SYNC=1
# `run STEP...` runs only those. Every log is kept: $OUT/summary.txt (the table to read first) and
# $OUT/logs.tar.xz (everything). KILN_GPU_DEVICE=cuda-emu runs the same steps on the emulator with
# small sizes: the dry run of this script without a GPU
# (`KILN_GPU_DEVICE=cuda-emu KILN_GPU_BUDGET_S=30 OUT=/tmp/out bash scripts/gpu-session.sh run`).
set -uo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
[ $# -gt 0 ] && shift

if [ "$mode" = pack ]; then
  set -e
  cmake --build --preset release
  bash ../shared/tools/device-pack.sh build/release/kiln build/release/kiln_tests
  # The programs xz-compressed too (the pack's limit is 55 MB): unpack.sh decompresses them into
  # dp/, and `run` makes them executable again.
  for p in kiln kiln_tests; do xz -9 -f .device-pack/$p; done
  # The pack's programs are stripped (the 64 MiB carry limit); the unstripped ones stay in
  # build/release, and their build ids say which build a trace from the GPU machine belongs to.
  for p in kiln kiln_tests; do
    printf '%s %s\n' "$p" "$(readelf -n "build/release/$p" | awk '/Build ID/ {print $3}')"
  done >.device-pack/build-ids.txt
  # The Python package for the GPU machine's Python 3.12 (NumPy 2.5, CuPy): the extension built
  # by a 3.12 here (pyenv's, or KILN_PACK_PYTHON) in build/py312, over the pack's libkiln.so.0.
  py312="${KILN_PACK_PYTHON:-$(ls -d /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | tail -1)}"
  if [ -n "$py312" ] && [ -x "$py312" ]; then
    [ -x .venv/py312/bin/python ] || "$py312" -m venv .venv/py312
    .venv/py312/bin/pip install -q "$(grep '^numpy==' tests/requirements.txt)" \
      "$(grep '^nanobind==' tests/requirements.txt)"
    cmake -S . -B build/py312 -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPython_EXECUTABLE="$PWD/.venv/py312/bin/python" >/dev/null
    cmake --build build/py312 --target _kiln
    # One file: the pack's unpack.sh copies plain files into dp/ (a directory would stop it).
    rm -rf build/py312/pack && mkdir -p build/py312/pack
    cp -rL build/py312/python/kiln build/py312/pack/
    cp -L build/py312/libkiln.so.0 build/py312/pack/  # the extension's; the rest are in the pack
    strip --strip-unneeded build/py312/pack/kiln/_kiln*.so build/py312/pack/libkiln.so.0
    # xz-compressed: the pack's unpack.sh decompresses it into dp/kiln-python.tar.
    tar -cf - -C build/py312/pack kiln libkiln.so.0 | xz -9 >.device-pack/kiln-python.tar.xz
    rm -f .device-pack/kiln-python.tar
  else
    echo "no Python 3.12 here: the pack has no Python package (the python step will skip)" >&2
  fi
  du -sh .device-pack
  exit 0
fi
if [ "$mode" != run ]; then
  echo "usage: $0 pack | run [env|doctor|python|workloads|peers|tests ...]" >&2
  exit 2
fi
steps="${*:-env doctor python workloads peers tests}"

out="${OUT:-/tmp/kiln-gpu-out}"
logs="$out/logs"
mkdir -p "$logs"
device="${KILN_GPU_DEVICE:-cuda}"
if [ -d .device-pack ] && [ "$device" = cuda ]; then
  eval "$(bash .device-pack/unpack.sh)"  # prepends ./dp to LD_LIBRARY_PATH, keeps the rest
  chmod +x dp/kiln dp/kiln_tests  # decompressed from .xz without their mode
  bin="$PWD/dp"
else
  bin="$PWD/build/release"  # the dry run here
fi
# The tests find the CLI, the sources and NumPy (the GPU machine's python3; here, the oracle venv)
# through these.
[ "$device" != cuda ] && [ -x .venv/oracle/bin/python ] && : "${KILN_PYTHON:=$PWD/.venv/oracle/bin/python}"
export KILN_BIN="$bin/kiln" KILN_SOURCE_DIR="$PWD" KILN_PYTHON="${KILN_PYTHON:-python3}"
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-cache}" KILN_BENCH_BIN=""
budget="${KILN_GPU_BUDGET_S:-480}"
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
# The seconds a step may take: its own limit ($1) or what is left of the budget, if less; 0 when
# under 10 s are left (the caller skips the step).
limit() {
  local left=$((budget - SECONDS))
  if [ "$left" -lt 10 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
want() { [[ " $steps " == *" $1 "* ]]; }
step_start() { say "== $1 (at ${SECONDS}s of ${budget}s)"; }

# The CUDA libraries where the machine has them: the toolkit's, else NVIDIA's pip wheels
# (nvidia/*/lib), appended after whatever LD_LIBRARY_PATH already holds. KILN_CUDA_LIB_DIR
# names them to kiln too.
if [ "$device" = cuda ]; then
  wheel_dirs="$(python3 - <<'EOS' 2>/dev/null
import glob, os
try:
    import nvidia
    for p in nvidia.__path__:
        print(":".join(sorted(glob.glob(os.path.join(p, "*", "lib")))))
except Exception:
    pass
EOS
)"
  wheel_dirs="${wheel_dirs//$'\n'/:}"
  if [ -n "$wheel_dirs" ]; then
    export KILN_CUDA_LIB_DIR="${KILN_CUDA_LIB_DIR:+$KILN_CUDA_LIB_DIR:}$wheel_dirs"
  fi
fi

if want env; then
  step_start env
  {
    date
    uname -a
    nvidia-smi 2>&1 || echo "no nvidia-smi"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
      --format=csv 2>&1
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo "KILN_CUDA_LIB_DIR=${KILN_CUDA_LIB_DIR:-}"
    ls -d /usr/local/cuda* 2>&1
    cat /usr/local/cuda/version.json 2>/dev/null | head -20
    for l in libcuda.so libnvrtc libnvrtc-builtins libcublas libcublasLt libcusolver libcurand; do
      echo "-- $l"
      ldconfig -p | grep "$l" | head -4
      ls /usr/local/cuda/lib64/$l* 2>/dev/null | head -4
      libdirs="${KILN_CUDA_LIB_DIR:-}"
      for d in ${libdirs//:/ }; do ls "$d"/$l* 2>/dev/null | head -2; done
    done
    python3 -c 'import numpy, sys; print("python", sys.version.split()[0], "numpy", numpy.__version__)'
    python3 -c 'import cupy; print("cupy", cupy.__version__, cupy.cuda.runtime.runtimeGetVersion())' 2>&1 | tail -1
    python3 -c 'import jax; print("jax", jax.__version__, jax.devices())' 2>&1 | tail -1
    nproc
    free -g
    cat .device-pack/build-ids.txt 2>/dev/null
    # Which libraries one small run loads (the dynamic loader's own account).
    LD_DEBUG=files timeout -k 3 60 "$bin/kiln" run diamond --size 200 --chunk 100 --device "$device" \
      --json 2>&1 | grep -E "calling init: .*(cuda|nvrtc|cublas|cusolver|curand|nvJit)|^\{|rror" |
      sed 's/^ *[0-9]*: *//' | sort -u
  } >"$logs/env.log" 2>&1
  grep -E "^\| +[0-9]+ +NVIDIA|Driver Version|^python|^cupy|^jax|calling init|^\{" "$logs/env.log" |
    head -20 | tee -a "$summary"
fi

if want doctor; then
  step_start doctor
  t="$(limit 120)"
  if [ "$t" -eq 0 ]; then
    say "skipped: the budget is spent"
  elif "$bin/kiln" --help 2>&1 | grep -q '^  doctor'; then
    timeout -k 3 "$t" "$bin/kiln" doctor --device "$device" >"$logs/doctor.log" 2>&1
    say "kiln doctor --device $device: exit $?"
    tail -n 40 "$logs/doctor.log" | tee -a "$summary"
  else
    say "this kiln has no doctor"
  fi
fi

if want python; then
  step_start python
  t="$(limit 90)"
  pydir="$PWD/build/release/python"  # the dry run: this build's package and the oracle venv
  py="${KILN_PYTHON:-python3}"
  if [ "$device" = cuda ] && [ -f dp/kiln-python.tar ]; then
    mkdir -p dp/python && tar -xf dp/kiln-python.tar -C dp/python
    pydir="$PWD/dp/python" py=python3
  fi
  if [ "$t" -eq 0 ]; then
    say "skipped: the budget is spent"
  elif [ -d "$pydir/kiln" ]; then
    PYTHONPATH="$pydir" LD_LIBRARY_PATH="$pydir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      timeout -k 3 "$t" "$py" scripts/gpu-python-check.py "$device" >"$logs/python.log" 2>&1
    say "gpu-python-check.py $device: exit $?"
    tail -n 20 "$logs/python.log" | tee -a "$summary"
  else
    say "no Python package in the pack"
  fi
fi

if want workloads; then
  step_start workloads
  # The issue's targets: each workload on the device, --json (times to the nanosecond; the median
  # of 5 repeats), then with --resident (x made once and kept on the device, the expression timed
  # over it), then with cuRAND's generator filling x.
  workloads=("random-sum --size 20000 --chunk 2000" "trig-identity --size 10000 --chunk 2000"
    "diamond --size 10000 --chunk 2000" "svd --rows 10000 --cols 1000 --chunk 5000"
    "svd --rows 1000000 --cols 100 --chunk 100000" "matmul --size 4000 --chunk 1000"
    "logistic-gd --size 1000000 --cols 100 --chunk 100000"
    "glm --solver lbfgs --size 1000000 --cols 100 --chunk 100000"
    "glm --solver newton --size 1000000 --cols 100 --chunk 100000")
  small=("random-sum --size 200 --chunk 100" "trig-identity --size 200 --chunk 100"
    "diamond --size 200 --chunk 100" "svd --rows 400 --cols 20 --chunk 200"
    "matmul --size 200 --chunk 100")
  # First the small sizes (did it run at all), then the targets.
  [ "$device" = cuda ] && workloads=("${small[@]}" "${workloads[@]}")
  if [ "$device" != cuda ]; then  # the dry run: small sizes
    workloads=("random-sum --size 200 --chunk 100" "trig-identity --size 200 --chunk 100"
      "diamond --size 200 --chunk 100" "svd --rows 400 --cols 20 --chunk 200"
      "matmul --size 200 --chunk 100" "logistic-gd --size 4000 --cols 100 --chunk 1000")
  fi
  for w in "${workloads[@]}"; do
    # The last extra is an experiment: the solvers' X @ beta (rows of 100) by a warp per row
    # instead of a thread (KILN_CUDA_ROWS_FROM, docs/KERNEL_IR.md §11).
    for extra in "" "--resident" "--rng curand" "KILN_CUDA_ROWS_FROM=32"; do
      env=()
      case "$extra" in
        "") ;;
        KILN_*)
          case "$w" in logistic* | glm*) ;; *) continue ;; esac
          env=("$extra") ;;
        *)  # svd, matmul and logistic-gd make their data first; 2 TB stays lazy
          case "$w" in svd* | matmul* | logistic* | glm* | *500000*) continue ;; esac ;;
      esac
      args="$extra"
      [ ${#env[@]} -eq 0 ] || args=
      t="$(limit 45)"
      if [ "$t" -eq 0 ]; then
        say "$w $extra: skipped, the budget is spent"
        continue
      fi
      # shellcheck disable=SC2086
      line="$(env ${env[@]+"${env[@]}"} timeout -k 3 "$t" "$bin/kiln" run $w $args --device "$device" \
        --repeat 5 --quiet --json 2>>"$logs/workloads.err" | tail -1)"
      rc=$?
      echo "$w $extra: rc $rc $line" >>"$logs/workloads.log"
      python3 - "$w $extra" "$rc" "$line" <<'EOS' | tee -a "$summary"
import json, sys
name, rc, line = sys.argv[1:]
try:
    j = json.loads(line)
    print(f"{name:62s} {j['seconds']*1e3:10.3f} ms  kernels {j.get('kernels')}  "
          f"compile {j.get('compile_seconds', 0):.2f}s  h2d {j.get('to_device_bytes')}  "
          f"d2h {j.get('to_host_bytes')}  result {j.get('result')}")
except Exception:
    print(f"{name:62s} FAILED rc {rc}: {line[:200]}")
EOS
    done
  done
  # Where the time goes: each target once more with KILN_CUDA_PROFILE=1 (CUDA events around
  # every kernel; the runs above are timed without them): the kernels' share of the wall time
  # and the longest kernel.
  for w in "${workloads[@]:${#small[@]}}"; do
    [ "$device" = cuda ] || break
    t="$(limit 45)"
    [ "$t" -gt 0 ] || { say "$w profiled: skipped, the budget is spent"; continue; }
    # shellcheck disable=SC2086
    line="$(KILN_CUDA_PROFILE=1 timeout -k 3 "$t" "$bin/kiln" run $w --device "$device" \
      --repeat 3 --quiet --json 2>>"$logs/workloads.err" | tail -1)"
    echo "$w profiled: $line" >>"$logs/workloads.log"
    python3 - "$w" "$line" <<'EOS' | tee -a "$summary"
import json, sys
name, line = sys.argv[1:]
try:
    p = json.loads(line)["profile"]
    top = p["kernels"][0] if p["kernels"] else {"kernel": "-", "seconds": 0, "launches": 0}
    print(f"{name:50s} profiled: kernels {p['kernel_seconds']*1e3:9.3f} ms of the run "
          f"({p['busy_fraction']:.0%}, {p.get('gb_per_s', 0):.0f} GB/s), {p['launches']:.0f} "
          f"launches; longest {top['kernel']} {top['seconds']*1e3:.3f} ms in "
          f"{top['launches']:.0f} ({top.get('gb_per_s', 0):.0f} GB/s)")
    for h in p.get("host", [])[:8]:  # the host's side: compute()'s phases, blocking CUDA calls
        print(f"    host {h['phase']:60s} {h['seconds']*1e3:9.3f} ms in {h['calls']:.0f}")
except Exception:
    print(f"{name:50s} profiled: FAILED {line[:200]}")
EOS
  done
  tail -n 20 "$logs/workloads.err" >>"$summary" 2>/dev/null
fi

if want peers; then
  step_start peers
  t="$(limit 150)"
  if [ "$t" -eq 0 ]; then
    say "skipped: the budget is spent"
  elif [ -f bench/peers/gpu_peers.py ]; then
    quick="" peers_py=python3
    if [ "$device" != cuda ]; then  # the dry run: a tenth of the sizes, the oracle's NumPy
      quick="--quick"
      [ -x .venv/oracle/bin/python ] && peers_py=.venv/oracle/bin/python
    fi
    KILN_BIN="$bin/kiln" KILN_DEVICE="$device" timeout -k 3 "$t" "$peers_py" \
      bench/peers/gpu_peers.py $quick >"$logs/peers.log" 2>&1
    say "gpu_peers.py: exit $?"
    tail -n 40 "$logs/peers.log" | tee -a "$summary"
  else
    say "no bench/peers/gpu_peers.py"
  fi
fi

if want tests; then
  step_start tests
  t="$(limit 300)"
  if [ "$t" -eq 0 ]; then
    say "skipped: the budget is spent"
  else
    mkdir -p "$logs/tests"
    # Every test that computes, one process each (a fault in one is that test's alone), 8 at
    # once, each at most 150 s (the first H100 run: OpsTable and the GLM suites passed 60 s,
    # NVRTC compiling each of their kernels) and all within the step's limit. The fuzzers run a few programs
    # each. Left out by default: the host-side hardening suites (sizes near the host's memory,
    # damaged caches, hostile command lines), which no GPU changes.
    "$bin/kiln_tests" --gtest_list_tests \
      --gtest_filter="${KILN_GPU_FILTER:-*-Sizes*:SizesCli*:CacheFaults*:HostileCli*:NpyHostile*}" |
      awk '/^[^ ]/ {suite=$1} /^  [^ ]/ {print suite $1}' >"$logs/tests/list.txt"
    export KILN_DEVICE="$device" KILN_FUZZ_COUNT="${KILN_FUZZ_COUNT:-24}" bin logs
    run_one() {
      timeout -k 3 150 "$bin/kiln_tests" --gtest_filter="$1" >"$logs/tests/$1.log" 2>&1
      echo "$? $1"
    }
    export -f run_one
    timeout -k 3 "$t" xargs -P 8 -I{} bash -c 'run_one "$@"' _ {} <"$logs/tests/list.txt" \
      >"$logs/tests/results.txt"
    n="$(wc -l <"$logs/tests/list.txt")"
    ran="$(wc -l <"$logs/tests/results.txt")"
    passed="$(grep -c '^0 ' "$logs/tests/results.txt")"
    skipped="$(grep -l '\[  SKIPPED \]' "$logs"/tests/*.log 2>/dev/null | wc -l)"
    say "kiln_tests on $device: $n tests, $ran ran, $passed exited 0 ($skipped of them skipped)"
    grep -v '^0 ' "$logs/tests/results.txt" | sort | tee -a "$summary"
    # Each failure once more, synchronizing after every launch and copy (names the kernel).
    grep -v "^0 " "$logs/tests/results.txt" | head -5 | while read -r _ name; do
      t="$(limit 60)"
      [ "$t" -gt 0 ] || break
      KILN_CUDA_SYNC=1 timeout -k 3 "$t" "$bin/kiln_tests" --gtest_filter="$name" \
        >"$logs/tests/$name.sync.log" 2>&1
      say "  rerun with KILN_CUDA_SYNC=1: $name exit $?"
      grep -E "Failure|rror|Expected|Which is|actual" "$logs/tests/$name.log" | head -6 |
        sed 's/^/    /' | tee -a "$summary"
    done
    grep -h "^\[  SKIPPED \]" "$logs"/tests/*.log | sort | uniq -c | sort -rn | head -20 >>"$summary"
  fi
fi

pkill -9 -f "$bin/kiln" 2>/dev/null  # nothing of ours outlives the call
say "== done at ${SECONDS}s"
tar -C "$out" -cJf "$out/logs.tar.xz" logs && rm -rf "$logs"
ls -l "$out"
