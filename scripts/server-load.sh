#!/usr/bin/env bash
# Several server instances on one PostgreSQL database under load (release build; CI never runs
# it). See scripts/server-load.py for what it measures and the goals.
#
#   scripts/server-load.sh [--plans N] [--followers N] [--no-kill] [--seed N] [--keep] [--debug]
set -uo pipefail
cd "$(dirname "$0")/.."
PROFILE=release
ARGS=()
for a in "$@"; do
  if [ "$a" = --debug ]; then PROFILE=debug; else ARGS+=("$a"); fi
done
if [ "$PROFILE" = release ]; then
  cargo build --release --locked --bin agents >&2 || { echo "release build failed" >&2; exit 1; }
else
  cargo build --locked --bin agents >&2 || { echo "build failed" >&2; exit 1; }
fi
exec python3 scripts/server-load.py "${CARGO_TARGET_DIR:-$PWD/target}/$PROFILE/agents" "${ARGS[@]}"
