#!/usr/bin/env bash
# Checkpoint benchmark (release build; CI never runs it). On a generated repository of 20,000
# files, in one run (benches/checkpoint.rs):
#   - the checkpoint of a step that changed 1 file / 100 files  vs `git add -A && git commit`
#     after the same change (<= 1.0x), for a step of file tools and for a shell step (its
#     checkpoints and the trees the shell tool takes around the command)
#   - 40 tool calls of a step with a checkpoint after each call that may write  vs the same
#     calls without them (<= 1.2x; the model's time is left out)
#
#   scripts/bench-checkpoint.sh [--rows FILE]
#     --rows FILE: also append each row to FILE as scripts/perf.sh keeps its rows
#                  (measurement, ours, baseline, ratio, verdict; tab-separated)
#
# Prints the rows as scripts/perf.sh prints its table, then the breakdown lines. Exits
# non-zero only when the benchmark could not run.
set -uo pipefail
cd "$(dirname "$0")/.."
ROWS_OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) ROWS_OUT="${2:?--rows needs a file}"; shift ;;
    *) echo "unknown argument: $1 (use --rows FILE)" >&2; exit 2 ;;
  esac
  shift
done
out=$(cargo bench --locked --bench checkpoint 2>/dev/null) || {
  echo "the checkpoint benchmark failed to run (cargo bench --locked --bench checkpoint)" >&2
  exit 1
}
rows=$(echo "$out" | sed -n 's/^ROW\t//p')
[ -n "$ROWS_OUT" ] && printf '%s\n' "$rows" >> "$ROWS_OUT"
echo
echo "Checkpoints ($(uname -sm), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
python3 - <(printf '%s\n' "$rows") <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
head = ["measurement", "ours", "baseline", "ratio", "verdict (target)"]
w = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
fmt = "  ".join("{:<%d}" % x for x in w)
print(fmt.format(*head)); print(fmt.format(*["-" * x for x in w]))
for r in rows: print(fmt.format(*r))
PY
echo "$out" | grep '^breakdown:' || true
