#!/usr/bin/env bash
# Retrieval benchmark: how well the strategist's hot context and `search_code` (at its
# default limit) put the files a change touched in front of a model, beside BM25 over the
# same files in the same run. Tasks come from the history of public repositories in three
# languages: the query is a commit's subject, the right answer the source files it changed,
# the index read at its parent commit. Prints recall@5, recall@10, MRR@20, distinct files
# shown and hot-context tokens per repository and overall, then the goals with PASS/MISS
# and the hot context's time per task.
#
# The repositories are cloned (not committed here) into $BENCH_RETRIEVAL_DIR
# (default /tmp/bench-retrieval) and checked out at a pinned commit, so two runs measure
# the same tasks. BENCH_RETRIEVAL_SOURCES replaces the list: space-separated
# `SOURCE[@COMMIT]` entries where SOURCE is a git URL or a local repository (a work tree
# or a bare git directory); the clone is named after SOURCE's last path part (a trailing
# `/repo` or `.git` dropped, and anything up to a `+`, so `owner+name/repo` gives `name`).
# Without network, BENCH_RETRIEVAL_MIRRORS=DIR reads the default repositories at their pins
# from local mirrors laid out as DIR/OWNER+NAME/repo (bare or not), e.g.
# `BENCH_RETRIEVAL_MIRRORS=/work/.mirror scripts/bench-retrieval.sh`.
# BENCH_RETRIEVAL_TASKS sets the tasks per repository
# (default 40); extra arguments go to the benchmark (`--verbose` lists every task).
# Builds one example of the engine crate in release. Not run by CI.
set -euo pipefail
cd "$(dirname "$0")/.."

DEFAULT_SOURCES="
https://github.com/BurntSushi/ripgrep@3fce3b5bb0236da2df6d99672afb8a719642eca7
https://github.com/pallets/click@2c8cd3ac958a7eb316d67f2d316c27086c4c0369
https://github.com/spf13/cobra@adbc8813901bba65827259daa8e22ff94ec1f30e
"
SOURCES="${BENCH_RETRIEVAL_SOURCES:-$DEFAULT_SOURCES}"
if [ -z "${BENCH_RETRIEVAL_SOURCES:-}" ] && [ -n "${BENCH_RETRIEVAL_MIRRORS:-}" ]; then
	SOURCES=""
	for entry in $DEFAULT_SOURCES; do
		url="${entry%@*}"
		owner_name="${url#https://github.com/}"
		SOURCES+=" ${BENCH_RETRIEVAL_MIRRORS%/}/${owner_name/\//+}/repo@${entry##*@}"
	done
fi
WORK="${BENCH_RETRIEVAL_DIR:-/tmp/bench-retrieval}"
TASKS="${BENCH_RETRIEVAL_TASKS:-40}"
mkdir -p "$WORK"

checkouts=()
for entry in $SOURCES; do
	source="$entry"
	commit=""
	# A trailing @<hex> pins a commit (an @ elsewhere, as in git@host:, is left alone).
	if [[ "$entry" =~ ^(.*)@([0-9a-fA-F]{7,40})$ ]]; then
		source="${BASH_REMATCH[1]}"
		commit="${BASH_REMATCH[2]}"
	fi
	name="${source%/}"
	name="${name%/repo}"
	name="${name%.git}"
	name="${name##*/}"
	name="${name##*+}"
	dest="$WORK/$name"
	if [ ! -d "$dest/.git" ]; then
		echo "cloning $source into $dest" >&2
		git clone --quiet "$source" "$dest"
	fi
	if [ -n "$commit" ]; then
		if ! git -C "$dest" cat-file -e "$commit^{commit}" 2>/dev/null; then
			git -C "$dest" fetch --quiet origin
		fi
		git -C "$dest" -c advice.detachedHead=false checkout --quiet --detach "$commit"
	fi
	checkouts+=("$dest")
done

cargo build --locked --quiet -p cleveragents-engine --release --features internals --example bench_retrieval
exec target/release/examples/bench_retrieval --tasks "$TASKS" "$@" "${checkouts[@]}"
