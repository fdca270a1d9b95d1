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
#   - `plan diff` of a 1,000-file change     goal: <= 1.5x (NOT SERVED yet: printed as such)
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
export AGENTS_TOKEN
AGENTS_TOKEN=$("${S[@]}" --format plain server token create bench)
"${S[@]}" server start --listen 127.0.0.1:0 > "$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
for _ in $(seq 50); do grep -q http "$WORK/server.out" 2>/dev/null && break; sleep 0.1; done
URL=$(grep -o 'http://[0-9.:]*' "$WORK/server.out") || { echo "the server did not start" >&2; cat "$WORK/server.err" >&2; exit 1; }

python3 - "$RUNS" "$PLAN" "$URL" "${S[*]}" "${C[*]}" <<'PY'
import statistics, subprocess, sys, time
runs, plan, url = int(sys.argv[1]), sys.argv[2], sys.argv[3]
server_cmd, client_cmd = sys.argv[4].split(" "), sys.argv[5].split(" ")

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
print("| plan diff, 1,000 files | not served by the server yet | - | - | NOT BUILT (<= 1.5x) |")
PY
