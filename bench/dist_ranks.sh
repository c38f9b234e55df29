#!/usr/bin/env bash
# Distributed runs (docs/DISTRIBUTED.md) on 1 to 4 ranks of mpirun, oversubscribed on small hosts:
# per workload and rank count, the median seconds, the tasks, messages and bytes each rank sent
# (kiln run --json's rank_* fields), as one Markdown table for bench/RESULTS.md.
# Usage: bench/dist_ranks.sh [KILN] [RANKS...]   (default: build/release/kiln, 1 2 3 4)
set -euo pipefail
kiln="${1:-build/release/kiln}"
shift || true
if [ $# -gt 0 ]; then ranks=("$@"); else ranks=(1 2 3 4); fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
workloads=(
  "random-sum --size 8000 --chunk 1000 --repeat 5"
  "random-sum --size 16384 --chunk 128 --repeat 5"
  "svd --rows 1000000 --cols 100 --chunk 100000 --repeat 3"
  "logistic-gd --rows 1000000 --cols 100 --chunk 100000 --repeat 3"
  "glm --rows 1000000 --cols 100 --chunk 100000 --solver lbfgs --repeat 3"
)
echo "| workload | ranks | seconds | result | tasks per rank | messages sent per rank | bytes sent per rank |"
echo "| --- | ---: | ---: | ---: | --- | --- | --- |"
for w in "${workloads[@]}"; do
  for n in "${ranks[@]}"; do
    # shellcheck disable=SC2086
    j="$(mpirun --oversubscribe -np "$n" "$kiln" run $w --json 2>/dev/null | tail -1)"
    python3 - "$w" "$n" "$j" <<'EOF'
import json, sys
w, n, j = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
def row(k):
    return " ".join(str(v) for v in j.get(k, [j["tasks"]] if k == "rank_tasks" else [0]))
print(f"| `{w.split(' --repeat')[0]}` | {n} | {j['seconds']:.4f} | {j['result']:.10g} | "
      f"{row('rank_tasks')} | {row('rank_messages_sent')} | {row('rank_bytes_sent')} |")
EOF
  done
done
