#!/usr/bin/env bash
# Server round trips against the same commands in process (release build; CI never runs it).
#
#   scripts/bench-server.sh [--runs N] [--debug]
#
# One data directory holds a quickstart plan at its apply gate; `agents server start` serves it
# on a free loopback port. Each row runs the same command N times (default 40) in process and
# through the server (`--server URL`, a fresh client data directory), alternating, and prints
# the medians, the ratio and PASS/MISS against the goal:
#   - `plan status PLAN --format json`       goal: through the server <= 2x in process
#   - `plan events PLAN --format json`       goal: <= 2x
#   - `plan list --format json`              goal: <= 2x
#   - `plan diff PLAN --format json` of a plan whose one step adds 1,000 files (a second plan,
#     on a git checkout of its own)        goal: <= 1.5x
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=40
PROFILE=release
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS="${2:?--runs N}"; shift ;;
    --debug) PROFILE=debug ;;
    *) echo "unknown argument: $1 (use --runs N, --debug)" >&2; exit 2 ;;
  esac
  shift
done
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
if [ "$PROFILE" = release ]; then
  cargo build --release --locked --bin agents >&2 || { echo "release build failed" >&2; exit 1; }
else
  cargo build --locked --bin agents >&2 || { echo "build failed" >&2; exit 1; }
fi
AGENTS="$TARGET/$PROFILE/agents"
WORK="$(mktemp -d)"
SERVER_PID=
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
unset AGENTS_SERVER AGENTS_TOKEN AGENTS_DATA_DIR AGENTS_CONFIG AGENTS_FORMAT
S=("$AGENTS" --data-dir "$WORK/server" --config-path "$WORK/server.toml")
C=("$AGENTS" --data-dir "$WORK/client" --config-path "$WORK/client.toml")
"${S[@]}" --format json quickstart --headless > "$WORK/qs.json" 2>/dev/null
PLAN=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["data"]; print(d["plan_id"])' "$WORK/qs.json") \
  || { echo "quickstart did not make a plan" >&2; exit 1; }
# A plan at its apply gate whose one step adds 1,000 files to a git checkout.
git init -q "$WORK/repo" && git -C "$WORK/repo" -c user.name=bench -c user.email=bench@localhost \
  commit -q --allow-empty -m base || { echo "git init failed" >&2; exit 1; }
cat > "$WORK/bulk.yaml" <<'YAML'
name: local/bulk
definition-of-done: gen/ holds 1,000 files
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: write
    run: mkdir -p gen && for i in $(seq 1 1000); do printf 'file %s\nsecond line\n' "$i" > "gen/f$i.txt"; done
YAML
{ "${S[@]}" resource add git-checkout local/bulk --path "$WORK/repo" \
  && "${S[@]}" action create --available --config "$WORK/bulk.yaml" \
  && "${S[@]}" project create bulk && "${S[@]}" project link-resource bulk local/bulk; } >/dev/null \
  || { echo "setting up the 1,000-file plan failed" >&2; exit 1; }
"${S[@]}" --format json plan use local/bulk bulk --automation-profile trusted > "$WORK/bulk.json" 2>/dev/null
BULK=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"]["plan_id"])' "$WORK/bulk.json") \
  || { echo "the 1,000-file plan was not made" >&2; cat "$WORK/bulk.json" >&2; exit 1; }
export AGENTS_TOKEN
AGENTS_TOKEN=$("${S[@]}" --format plain server token create bench)
"${S[@]}" server start --listen 127.0.0.1:0 > "$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 50); do grep -q http "$WORK/server.out" 2>/dev/null && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$WORK/server.out") || { echo "the server did not start" >&2; cat "$WORK/server.err" >&2; exit 1; }

python3 - "$RUNS" "$PLAN" "$URL" "${S[*]}" "${C[*]}" "$BULK" <<'PY'
import statistics, subprocess, sys, time
runs, plan, url = int(sys.argv[1]), sys.argv[2], sys.argv[3]
server_cmd, client_cmd = sys.argv[4].split(" "), sys.argv[5].split(" ")
bulk = sys.argv[6]

def timed(cmd):
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")
    return (time.perf_counter() - t) * 1000

rows = [
    ("plan status, json", ["--format", "json", "plan", "status", plan], 2.0),
    ("plan events, json", ["--format", "json", "plan", "events", plan], 2.0),
    ("plan list, json", ["--format", "json", "plan", "list"], 2.0),
    ("plan diff of 1,000 added files, json", ["--format", "json", "plan", "diff", bulk], 1.5),
]
print(f"| measurement | through the server | in process (same run) | ratio | verdict (goal) |")
print(f"|---|---|---|---|---|")
for name, args, goal in rows:
    local, remote = [], []
    for _ in range(runs):
        local.append(timed(server_cmd + args))
        remote.append(timed(client_cmd + ["--server", url] + args))
    a, b = statistics.median(remote), statistics.median(local)
    verdict = "PASS" if a <= goal * b else "MISS"
    print(f"| {name} (median of {runs}) | {a:.1f} ms | {b:.1f} ms | {a/b:.2f}x | {verdict} (<= {goal}x) |")
PY
