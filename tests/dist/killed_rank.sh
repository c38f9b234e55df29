#!/usr/bin/env bash
# Distributed.AKilledRankEndsTheJob (SIGNAL KILL): three ranks compute in a loop; a rank other
# than 0 is killed; the job must end within 30 s with a non-zero status (mpirun ends the other
# ranks when one dies).
# Distributed.AHungRankEndsTheJobAfterTheTimeout (SIGNAL STOP, KILN_MPI_TIMEOUT=5): the rank is
# stopped instead, which no launcher notices; the ranks waiting for it must end the job after
# KILN_MPI_TIMEOUT, saying what they waited for.
# Usage: killed_rank.sh MPIRUN KILN_DIST_CHECK SIGNAL
set -uo pipefail
mpirun="$1" check="$2" signal="$3"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
# The mode's argument tags this job's processes (the two tests may run at once).
"$mpirun" --oversubscribe -np 3 "$check" wait "$signal" >"$out" 2>&1 &
job=$!
for _ in $(seq 1 600); do
  grep -q '^ready' "$out" && break
  sleep 0.1
done
grep -q '^ready' "$out" || { echo "the job did not start"; cat "$out"; kill $job; exit 1; }
sleep 1
# The three ranks are the children of mpirun whose command line is the check's.
ranks=($(pgrep -f -- "$check wait $signal\$" | grep -v "^$job\$"))
root="$(grep -m1 '^ready' "$out" | cut -d' ' -f2)"
victim=""
for p in "${ranks[@]}"; do
  [ "$p" != "$root" ] && [ "$(ps -o comm= -p "$p")" != mpirun ] && { victim=$p; break; }
done
[ -n "$victim" ] || { echo "no rank to kill among: ${ranks[*]}"; kill $job; exit 1; }
start=$SECONDS
kill -"$signal" "$victim"
for _ in $(seq 1 300); do
  kill -0 $job 2>/dev/null || break
  sleep 0.1
done
if kill -0 $job 2>/dev/null; then
  echo "the job still runs 30 s after rank pid $victim got SIG$signal"
  pkill -9 -f -- "$check wait $signal\$"
  kill -9 $job
  exit 1
fi
wait $job
status=$?
echo "SIG$signal to rank pid $victim; the job ended $((SECONDS - start)) s later, status $status"
tail -5 "$out"
[ $status -ne 0 ] || { echo "expected a non-zero status"; exit 1; }
if [ "$signal" = STOP ]; then
  grep -q "waited 5 s (KILN_MPI_TIMEOUT) for " "$out" ||
    { echo "expected a rank to say it waited KILN_MPI_TIMEOUT"; cat "$out"; exit 1; }
fi
exit 0
