#!/usr/bin/env bash
# Code index benchmark: builds in release and prints, for a generated repository of 20,000
# files, the full index time, the incremental update (change to searchable), the median
# `search_code` query against `grep -rn` of the same term, and the index size against the
# source size, each with PASS or MISS against its target. Set BENCH_REAL_REPO to a git
# checkout (not committed here; e.g. a clone of a public project) to measure it too,
# BENCH_REAL_TERMS (comma-separated) and BENCH_REAL_FILE (a file to touch) to tune it.
# Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --locked --bench index -- "$@"
