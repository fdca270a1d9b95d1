#!/usr/bin/env bash
# The CLI suite through a server (spec section 21): runs the chosen integration tests in
# process and again through `agents server start` (AGENTS_TEST_THROUGH_SERVER=1, see
# tests/support/through_server.rs), records the masked `data` of every JSON answer of both
# runs, and compares them test by test. Exits non-zero when a test fails in either run or
# one answer differs.
#
# With --postgres the server keeps its records in a throwaway PostgreSQL database
# (AGENTS_TEST_SERVER_DATABASE=postgres, tests/support/postgres.rs), and its answers are compared
# with the in-process ones on SQLite.
#
# usage: scripts/test-through-server.sh [--postgres] [FILTER ...]   (default: the served suites below)
set -euo pipefail
cd "$(dirname "$0")/.."

database=sqlite
if [ "${1:-}" = "--postgres" ]; then
    database=postgres
    shift
fi
filters=("$@")
if [ ${#filters[@]} -eq 0 ]; then
    filters=(
        cli::action_scripts
        cli::review
        cli::correction
        cli::registries
        cli::sessions
        cli::children
    )
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo build --quiet --tests

run() {
    local label=$1; shift
    echo "== $label"
    local status=0
    for f in "${filters[@]}"; do
        env "$@" AGENTS_TEST_RECORD="$out/$label" cargo test --quiet --test all -- "$f" \
            >"$out/$label-$(echo "$f" | tr ':' '_').log" 2>&1 || {
            status=1
            echo "   FAILED: $f (log below)"
            grep -E "^(test .* FAILED|failures:|    [a-z_:]+$)|panicked" \
                "$out/$label-$(echo "$f" | tr ':' '_').log" | head -40 | sed 's/^/   /'
        }
    done
    return $status
}

failed=0
run in-process AGENTS_TEST_THROUGH_SERVER=0 || failed=1
run through-server AGENTS_TEST_THROUGH_SERVER=1 AGENTS_TEST_SERVER_DATABASE=$database || failed=1
python3 scripts/compare-records.py "$out/in-process" "$out/through-server" || failed=1
exit $failed
