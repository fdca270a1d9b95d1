#!/usr/bin/env bash
# Idle CPU of a running TUI: starts `agents tui` in a detached tmux window on a temp
# data directory (a registered directory and a project), lets it settle, then measures the process's CPU time (all
# threads, user + system, from /proc) over 10 seconds and prints the percentage with PASS/MISS
# against 1 %. BIN=path/to/agents picks the binary (default: the release build, else debug).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
BIN=${BIN:-}
if [[ -z "$BIN" ]]; then
  if [[ -x "$target/release/agents" ]]; then BIN="$target/release/agents"; else BIN="$target/debug/agents"; fi
fi
[[ -x "$BIN" ]] || { echo "no agents binary at $BIN; run cargo build --release first" >&2; exit 1; }
command -v tmux >/dev/null || { echo "tmux is needed" >&2; exit 1; }
SECONDS_MEASURED=${SECONDS_MEASURED:-10}

dir=$(mktemp -d)
socket="agents-idle-$$"
cleanup() { tmux -L "$socket" kill-server 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

globals=(--data-dir "$dir/data" --config-path "$dir/config.toml")
# A registered directory and a project, so the TUI opens on a real database.
mkdir -p "$dir/work"
echo hello > "$dir/work/README"
"$BIN" "${globals[@]}" --format json resource add fs-directory local/work --path "$dir/work" >/dev/null
"$BIN" "${globals[@]}" --format json project create --resource local/work app >/dev/null

tmux -L "$socket" new-session -d -s s -x 120 -y 40 \
  "exec env TERM=xterm-256color HOME=$dir $BIN ${globals[*]} tui"
sleep 3
pid=$(tmux -L "$socket" list-panes -t s -F '#{pane_pid}')
[[ -r /proc/$pid/stat ]] || { echo "the TUI is not running" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
before=$(ticks "$pid")
sleep "$SECONDS_MEASURED"
after=$(ticks "$pid")
pct=$(awk -v d=$((after - before)) -v hz="$hz" -v s="$SECONDS_MEASURED" 'BEGIN { printf "%.2f", d / hz / s * 100 }')
verdict=$(awk -v p="$pct" 'BEGIN { print (p < 1.0) ? "PASS" : "MISS" }')
echo "binary: $BIN"
echo "idle CPU of the TUI over ${SECONDS_MEASURED} s: ${pct} % (target < 1 %) ${verdict}"
