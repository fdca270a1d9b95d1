#!/usr/bin/env bash
# Sandbox benchmark: builds in release and prints, for a generated repository of
# 20,000 files, the ratios of sandbox creation / `git worktree add`, checkpoint after a
# 100-file change / `git add -A && git commit`, and `agents plan diff` / `git diff`, each with
# PASS (at most 1.0x) or MISS. Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --locked --bench sandbox -- "$@"
