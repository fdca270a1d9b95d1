#!/usr/bin/env bash
# Performance suite. Release build; CI never runs it.
#
#   scripts/perf.sh [--quick] [--only large|idle|checkpoint|tree]
#     --quick: skip the 20,000-file sandbox benchmark
#     --only large: only the large-change rows (plan diff of 1,000 and of 10 files)
#     --only idle: only the idle-TUI rows
#     --only checkpoint: only the checkpoint rows (benches/checkpoint.rs)
#     --only tree: only the `plan tree` rows of the 100,000-decision family
#
# Prints one table: each measurement, its baseline measured in the same run, the ratio, and
# PASS/MISS against its target (targets and why: docs/decisions.md, "Quickstart and suites").
#   - the TUI left idle on a data dir with a 20,000-file and a 27,000-file resource: CPU and
#     writes over 30 s, then an edit searchable within 1 s (scripts/perf-idle.sh)
#   - `agents version` start-up              vs `git --version`
#   - `agents plan list` with 10,000 plans    vs `sqlite3 -json` selecting the same rows (<= 2x)
#   - the checkpoint of a step that changed 1 file / 100 files of a 20,000-file repository,
#     through the file tools and through a shell command, vs `git add -A && git commit` after
#     the same change, and per-call checkpoints (benches/checkpoint.rs)
#   - sandbox creation / checkpoint / diff    vs `git worktree add` / `git commit` / `git diff`
#     (benches/sandbox.rs, 20,000 files): the first plan at a base, another plan at the same
#     base, and the disk one more plan takes against the checkout
#   - `agents plan diff` (plain, json) of a plan whose one `run:` step edits 1,000 (then 10)
#     files of a 20,000-file repository vs `git diff BASE` of the same edit in a checkout of
#     its own, and the peak memory of the 1,000-file diff vs 2x the printed diff + 30 MiB
#     (scripts/perf-large.sh)
#   - the TUI's first hunk of that 1,000-file diff (tmux), and `plan apply` of it vs
#     `git apply && git commit -a`, on a fresh copy (neither has the change's objects) and again
#   - `agents plan tree` of a 100,000-decision family (benches/corrections.rs) vs `sqlite3 -json`
#   - TUI frame time while the 50,000-line diff is scrolled (ui/benches/render.rs)
#   - engine overhead per tool call           vs the direct system call
#   - `search_files`                          vs `grep -rn` (benches/engine.rs, 20,000 files)
# Needs sqlite3 for the plan-list baseline: installed with apt-get when missing and possible,
# otherwise that row says SKIP. Exits non-zero only when a measurement could not run.
set -uo pipefail
cd "$(dirname "$0")/.."
QUICK=0
ONLY=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --only) ONLY="${2:-}"; shift ;;
    *) echo "unknown argument: $1 (use --quick, --only large|idle|checkpoint|tree)" >&2; exit 2 ;;
  esac
  shift
done
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"

cargo build --release --locked --bin agents >&2 || { echo "release build failed" >&2; exit 1; }
AGENTS="$TARGET/release/agents"
if ! command -v sqlite3 >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq sqlite3) >/dev/null 2>&1 || echo "sqlite3 not installed and apt-get unavailable: the plan-list baseline is skipped" >&2
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/agents-perf.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
ROWS="$WORK/rows.txt"
: > "$ROWS"
row() { printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >> "$ROWS"; }

# median_ms N CMD... : median wall time of N runs, in ms (python for a precise clock).
median_ms() {
  python3 - "$@" <<'PY'
import subprocess, sys, time
n = int(sys.argv[1]); cmd = sys.argv[2:]
ts = []
for _ in range(n):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    ts.append((time.perf_counter() - t) * 1000)
ts.sort(); print(f"{ts[len(ts)//2]:.1f}")
PY
}
ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print(f'{a/b:.2f}x')" "$1" "$2"; }
le() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= float(sys.argv[2]) else 1)" "$1" "$2"; }

DATA="$WORK/data"
A=("$AGENTS" --data-dir "$DATA" --config-path "$WORK/config.toml")
"${A[@]}" version >/dev/null

print_table() {
echo
echo "Performance ($(uname -sm), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
python3 - "$ROWS" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
head = ["measurement", "ours", "baseline", "ratio", "verdict (target)"]
w = [max(len(r[i]) for r in rows + [head]) for i in range(5)]
fmt = "  ".join("{:<%d}" % x for x in w)
print(fmt.format(*head)); print(fmt.format(*["-" * x for x in w]))
for r in rows: print(fmt.format(*r))
PY
}

# 0a. the idle TUI (scripts/perf-idle.sh).
# shellcheck source=scripts/perf-idle.sh
. scripts/perf-idle.sh
if [ -z "$ONLY" ] || [ "$ONLY" = idle ]; then idle_row; fi
if [ "$ONLY" = idle ]; then print_table; [ "${FAILED:-0}" = 0 ]; exit; fi

# 0b. checkpoints of a step (benches/checkpoint.rs), each against `git add -A && git commit`
# of the same change in a worktree of the same repository, measured in the same run.
checkpoint_rows() {
  local out
  if out=$(cargo bench --locked --bench checkpoint 2>/dev/null); then
    echo "$out" | sed -n 's/^ROW\t//p' >> "$ROWS"
    echo "$out" | grep '^breakdown:' >&2
  else
    row "checkpoint benchmark" "-" "-" "-" "FAILED to run"; FAILED=1
  fi
}
if [ -z "$ONLY" ] || [ "$ONLY" = checkpoint ]; then checkpoint_rows; fi
if [ "$ONLY" = checkpoint ]; then print_table; [ "${FAILED:-0}" = 0 ]; exit; fi

# 0. large change: plan diff of 1,000 and of 10 files vs git diff (scripts/perf-large.sh).
# shellcheck source=scripts/perf-large.sh
. scripts/perf-large.sh
[ "$ONLY" = tree ] || large_change
if [ "$ONLY" = large ]; then print_table; [ "${FAILED:-0}" = 0 ]; exit; fi

# 1. start-up
[ "$ONLY" = tree ] || {
ours=$(median_ms 21 "${A[@]}" version); base=$(median_ms 21 git --version)
le "$ours" 50 && v=PASS || v=MISS
row "agents version (start-up)" "$ours ms" "git --version $base ms" "$(ratio "$ours" "$base")" "$v (<= 50 ms)"

# 2. plan list with 10,000 plans: one real plan, copied 9,999 times with new ids.
repo="$WORK/repo"; mkdir -p "$repo"; git -C "$repo" init -q; echo x > "$repo/f"
git -C "$repo" add f; git -C "$repo" -c user.name=p -c user.email=p@p.invalid commit -qm x
"${A[@]}" resource add git-checkout local/repo --path "$repo" >/dev/null
"${A[@]}" project create --resource local/repo app >/dev/null
cat > "$WORK/a.yaml" <<'EOF'
name: local/perf
definition-of-done: nothing
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
EOF
"${A[@]}" action create --available --config "$WORK/a.yaml" >/dev/null
"${A[@]}" plan use local/perf app --automation-profile manual >/dev/null
if command -v sqlite3 >/dev/null 2>&1; then
  db="$DATA/cleveragents.db"
  cols=$(sqlite3 "$db" "SELECT group_concat(name, ', ') FROM pragma_table_info('plans') WHERE name != 'plan_id'")
  sqlite3 "$db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 9999)
    INSERT INTO plans (plan_id, $cols) SELECT printf('01ZZZZ%020d', i), $cols FROM plans, n;"
  count=$(sqlite3 "$db" "SELECT count(*) FROM plans")
  # Target: at most 2x `sqlite3 -json` of the same rows (and 500 ms).
  base=$(median_ms 7 sqlite3 -json "$db" "SELECT plan_id, $cols FROM plans ORDER BY plan_id DESC")
  for fmt in json plain; do
    ours=$(median_ms 7 "${A[@]}" --format "$fmt" plan list)
    r=$(python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}')" "$ours" "$base")
    le "$r" 2.0 && le "$ours" 500 && v=PASS || v=MISS
    row "agents plan list --format $fmt ($count plans)" "$ours ms" "sqlite3 -json same rows $base ms" "${r}x" "$v (<= 2.0x, <= 500 ms)"
  done
else
  row "agents plan list (10,000 plans)" "-" "-" "-" "SKIP (no sqlite3)"
fi
}

# 2b. plan tree of a 100,000-decision family (benches/corrections.rs builds and keeps it) vs
# `sqlite3 -json` of the same decision rows.
tree_dir="$WORK/tree"
if out=$(BENCH_TREE_DATA_DIR="$tree_dir" cargo bench --locked --bench corrections 2>/dev/null) &&
  tplan=$(echo "$out" | sed -n 's/^plan: //p') && [ -n "$tplan" ]; then
  n=$(echo "$out" | sed -n 's/^synthetic tree: \([0-9]*\) decisions.*/\1/p')
  T=("$AGENTS" --data-dir "$tree_dir" --config-path "$WORK/config-tree.toml")
  base=-
  command -v sqlite3 >/dev/null 2>&1 &&
    base=$(median_ms 7 sqlite3 -json "$tree_dir/cleveragents.db" "SELECT * FROM decisions")
  for fmt in json plain; do
    ours=$(median_ms 7 "${T[@]}" --format "$fmt" plan tree "$tplan")
    le "$ours" 200 && v=PASS || v=MISS
    r=-
    [ "$base" != - ] && r=$(ratio "$ours" "$base")
    row "agents plan tree --format $fmt ($n decisions)" "$ours ms" "sqlite3 -json all rows $base ms" "$r" "$v (<= 200 ms)"
  done
else
  row "agents plan tree (100,000 decisions)" "-" "-" "-" "FAILED to run"; FAILED=1
fi
if [ "$ONLY" = tree ]; then print_table; [ "${FAILED:-0}" = 0 ]; exit; fi

# 3. engine: tool-call overhead and search_files (benches/engine.rs).
if out=$(cargo bench --locked --bench engine 2>/dev/null); then
  while IFS='|' read -r name o b r v; do
    [ -n "$v" ] && row "$(echo "$name" | xargs)" "$(echo "$o" | xargs)" "$(echo "$b" | xargs)" "$(echo "$r" | xargs)" "$(echo "$v" | xargs)"
  done <<< "$(echo "$out" | grep ' | ')"
else
  row "engine benchmark" "-" "-" "-" "FAILED to run"; FAILED=1
fi

# 4. sandbox (benches/sandbox.rs, 20,000 files): creation, checkpoint, diff; once with a full
# checkout per sandbox (CLEVERAGENTS_SANDBOX_OVERLAY=0) and once with shared checkouts (the
# default where the kernel allows them; docs/sandbox.md, "Shared checkouts").
for overlay in 0 1; do
  [ $QUICK = 0 ] || break
  mode="full checkouts"; [ $overlay = 1 ] && mode="shared checkouts"
  if out=$(CLEVERAGENTS_SANDBOX_OVERLAY=$overlay cargo bench --locked --bench sandbox 2>/dev/null); then
    while read -r l; do
      name="$(echo "$l" | sed -E 's/ +ours .*//') ($mode)"
      o=$(echo "$l" | sed -E 's/.* ours +([0-9.]+) (ms|KiB).*/\1 \2/')
      b=$(echo "$l" | sed -E 's/.* (ms|KiB)   (.+[^ ]) +([0-9.]+) (ms|KiB)   ratio.*/\2 \3 \4/')
      r=$(echo "$l" | sed -E 's/.*ratio +([0-9.]+x).*/\1/')
      v=$(echo "$l" | sed -E 's/.*x  ((PASS|MISS).*)$/\1/')
      row "$name" "$o" "$b" "$r" "$v"
    done <<< "$(echo "$out" | grep ' ratio ')"
  else
    row "sandbox benchmark ($mode)" "-" "-" "-" "FAILED to run"; FAILED=1
  fi
done
# 5. TUI frame time (ui/benches/render.rs: a 10,000-decision tree and a 50,000-line diff,
# scrolled into the diff): every frame under 8 ms, so the verdict is on the 95th percentile.
if out=$(cargo bench --locked -p cleveragents-ui --bench render 2>/dev/null); then
  while read -r l; do
    name=$(echo "$l" | sed -E 's/ +median .*//')
    med=$(echo "$l" | sed -E 's/.*median +([0-9.]+) ms.*/\1/')
    p95=$(echo "$l" | sed -E 's/.*p95 +([0-9.]+) ms.*/\1/')
    le "$p95" 8 && v=PASS || v=MISS
    row "TUI frame, $name" "p95 $p95 ms" "median $med ms" "-" "$v (p95 <= 8 ms)"
  done <<< "$(echo "$out" | grep ' median .* p95 ')"
else
  row "TUI frame time" "-" "-" "-" "FAILED to run"; FAILED=1
fi

print_table
[ "${FAILED:-0}" = 0 ]
