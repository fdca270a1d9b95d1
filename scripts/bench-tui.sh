#!/usr/bin/env bash
# TUI render benchmark: one frame with a 10,000-decision tree and a 50,000-line diff
# loaded, release build, PASS/MISS against 8 ms. Criterion's report comes first, the summary
# with PASS/MISS last.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p cleveragents-ui --bench render -- "$@"
