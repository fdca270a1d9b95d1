# Sourced by scripts/perf.sh (uses its AGENTS, WORK, COMPARE, row, ratio, le, FAILED).
#
# large_change: a generated repository of 20,000 files (200 directories of 100 files, 40 lines
# each), one project, and two plans under `trusted` (run through Execute, stopped before Apply)
# whose one `run:` step rewrites every other line of 1,000 files (40,000 changed lines) and of
# 10 files (and a second plan of the 1,000-file change, for the second Apply). `agents plan diff` of each, plain and json, is timed against `git diff BASE` of the
# same sandbox (interleaved runs, medians; scripts/perf_compare.py), and the peak memory of the
# 1,000-file diff is compared with 2x the printed diff + 30 MiB; then the TUI is timed to its
# first hunk of the 1,000-file diff (tui_row) and the 1,000-file change is applied, on a fresh
# copy and again (apply_rows).

large_change() {
  local big="$WORK/big" d2="$WORK/data-large" c2="$WORK/config-large.toml"
  local L=("$AGENTS" --data-dir "$d2" --config-path "$c2")
  local compare="$PWD/scripts/perf_compare.py"
  python3 - "$big" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(200):
    os.makedirs(f"{root}/d{d:03}", exist_ok=True)
    for k in range(100):
        i = d * 100 + k
        with open(f"{root}/d{d:03}/f{i:05}.rs", "w") as f:
            f.write("".join(f"    let v{j} = {i * 40 + j};\n" for j in range(40)))
PY
  git -C "$big" init -q -b main
  git -C "$big" add -A
  git -C "$big" -c user.name=p -c user.email=p@p.invalid commit -qm generated
  local base
  base=$(git -C "$big" rev-parse HEAD)
  "${L[@]}" resource add git-checkout local/big --path "$big" >/dev/null
  "${L[@]}" project create --resource local/big big >/dev/null
  local spec name glob plan plan2 files target fmt out o b om bm os bs r v cap gt
  # 1,000 files: f....[02468]0 (every 20th); 10 files: the first of each of d000..d009.
  for spec in 'big:d*/f???[02468]0.rs' 'small:d00?/f???00.rs'; do
    name=${spec%%:*}
    glob=${spec#*:}
    # Each plan is compared with its own base: applying the 1,000-file plan moves the branch.
    base=$(git -C "$big" rev-parse HEAD)
    cat > "$WORK/$name.yaml" <<EOF
name: local/edit-$name
definition-of-done: every other line of the selected files is rewritten
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: edit
    run: "sed -i -E 's/^(    let v[0-9]*[02468]) = /\\\\1 = 1 + /' $glob"
EOF
    "${L[@]}" action create --available --config "$WORK/$name.yaml" >/dev/null
    # Exit 3: the plan waits at the apply gate, as it should.
    "${L[@]}" --format json plan use "local/edit-$name" big --automation-profile trusted \
      > "$WORK/$name.json"
    plan=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"]["plan_id"])' \
      "$WORK/$name.json") ||
      { row "large change ($name)" "-" "-" "-" "FAILED to run plan use"; FAILED=1; return; }
    # A second plan of the same change, applied after the first (apply_rows).
    if [ "$name" = big ]; then
      "${L[@]}" --format json plan use "local/edit-$name" big --automation-profile trusted \
        > "$WORK/$name-2.json"
      plan2=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["data"]["plan_id"])' \
        "$WORK/$name-2.json") ||
        { row "large change ($name, second plan)" "-" "-" "-" "FAILED to run plan use"; FAILED=1; return; }
    fi
    # git's baseline: the same edit in a checkout of its own at the same base (a sandbox that
    # shares its base's checkout has its tree only inside `agents`).
    gt="$WORK/git-$name"
    git -C "$big" worktree add -q --detach "$gt" "$base"
    (cd "$gt" && sed -i -E 's/^(    let v[0-9]*[02468]) = /\1 = 1 + /' $glob)
    local G=(git -C "$gt" -c core.pager=cat diff "$base")
    # git rehashes, on every run, each file written in the same second as the index it reads
    # ("racy" entries), so its time would depend on when the step ran: refresh git's view of
    # the index first, so the baseline is git at its fastest.
    sleep 1
    git -C "$gt" update-index -q --refresh
    files=$("${G[@]}" --name-only | wc -l)
    # The goal for both sizes: at most 1.2x `git diff BASE`.
    target=1.2
    for fmt in plain json; do
      out=$(python3 "$compare" 7 "${L[@]}" --format "$fmt" plan diff "$plan" -- "${G[@]}") ||
        { row "plan diff --format $fmt ($files files)" "-" "-" "-" "FAILED to run"; FAILED=1; continue; }
      read -r o b om bm os bs <<< "$out"
      r=$(python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}')" "$o" "$b")
      le "$r" "$target" && v=PASS || v=MISS
      row "plan diff --format $fmt ($files files)" "$o ms" "git diff BASE $b ms" "${r}x" "$v (<= ${target}x)"
      if [ "$name" = big ]; then
        cap=$(((2 * os + 30 * 1048576) / 1024))
        [ "$om" -le "$cap" ] && v=PASS || v=MISS
        row "  peak memory, $fmt ($((os / 1024)) KiB printed)" "$((om / 1024)) MiB" \
          "git diff $((bm / 1024)) MiB ($((bs / 1024)) KiB)" "$(ratio "$om" "$cap") of cap" \
          "$v (<= 2x printed + 30 MiB = $((cap / 1024)) MiB)"
      fi
    done
    if [ "$name" = big ]; then
      tui_row "$plan" "$files"
      apply_rows "$big" "$base" "$plan" "$plan2" "$gt" "$files"
    fi
  done
}

# tui_row PLAN FILES: `agents tui --plan PLAN` started in a private tmux server (200x60), timed
# from the start of the process to the first hunk header (`@@ -`) on the screen, polled every
# few milliseconds with `capture-pane` (median of 5; the start-up of the TUI is counted, so
# this is stricter than "from selecting the plan").
tui_row() {
  local plan=$1 files=$2 o v
  if ! command -v tmux >/dev/null 2>&1; then
    row "TUI first hunk ($files files)" "-" "-" "-" "SKIP (no tmux)"
    return
  fi
  o=$(python3 - "$AGENTS" "$WORK/data-large" "$WORK/config-large.toml" "$plan" "$WORK/tmux.sock" <<'PY'
import subprocess, sys, time
agents, data, config, plan, sock = sys.argv[1:6]
cmd = f"env TERM=xterm-256color {agents} --data-dir {data} --config-path {config} tui --plan {plan}"
tmux = ["tmux", "-S", sock]
times = []
for _ in range(5):
    t = time.perf_counter()
    subprocess.run(tmux + ["new-session", "-d", "-s", "perf", "-x", "200", "-y", "60", cmd], check=True)
    seen = None
    while time.perf_counter() - t < 30:
        screen = subprocess.run(tmux + ["capture-pane", "-p", "-t", "perf"], capture_output=True, text=True).stdout
        if "@@ -" in screen:
            seen = (time.perf_counter() - t) * 1000
            break
        time.sleep(0.002)
    subprocess.run(tmux + ["kill-server"], check=False)
    time.sleep(0.2)
    if seen is None:
        sys.exit("the first hunk did not appear within 30 s")
    times.append(seen)
times.sort()
print(f"{times[len(times) // 2]:.1f}")
PY
) || { row "TUI first hunk ($files files)" "-" "-" "-" "FAILED to run"; FAILED=1; return; }
  le "$o" 300 && v=PASS || v=MISS
  row "TUI first hunk ($files files, from start)" "$o ms" "-" "-" "$v (<= 300 ms)"
}

# apply_rows REPO BASE PLAN PLAN2 CHECKOUT FILES: `agents plan apply --yes` vs `git apply && git
# commit -a` of the same patch (git's diff of CHECKOUT, where the same edit was made) in the
# same repository, twice:
#   - on a fresh copy: none of the change's objects is in the repository yet, so both must
#     store them all (git: median of 3, each undone with `git reset --hard BASE` and its
#     objects pruned; ours: PLAN, the first Apply of the change);
#   - again: the objects are stored already (git: median of 3 after ours, each undone;
#     ours: PLAN2, the same change in a plan of its own, after `git reset --hard BASE`).
# A plan applies once, so each of ours is one run.
apply_rows() {
  local repo=$1 base=$2 plan=$3 plan2=$4 checkout=$5 files=$6 patch="$WORK/change.patch" b
  git -C "$checkout" -c core.pager=cat diff --binary "$base" > "$patch"
  b=$(git_apply_ms "$repo" "$base" "$patch" prune)
  apply_row "$repo" "$base" "$plan" "$b" "plan apply --yes ($files files, fresh copy)" || return
  git -C "$repo" reset -q --hard "$base"
  b=$(git_apply_ms "$repo" "$base" "$patch" keep)
  apply_row "$repo" "$base" "$plan2" "$b" "plan apply --yes ($files files)"
}

# git_apply_ms REPO BASE PATCH prune|keep: the median of 3 timed `git apply && git commit -a`
# of PATCH in REPO, each undone with `git reset --hard BASE` (and, with `prune`, the objects it
# stored removed again, as if the next run were on a fresh copy).
git_apply_ms() {
  local repo=$1 base=$2 patch=$3 objects=$4 i ts=()
  for i in 1 2 3; do
    ts+=("$(python3 - "$repo" "$patch" <<'PY'
import subprocess, sys, time
repo, patch = sys.argv[1], sys.argv[2]
t = time.perf_counter()
subprocess.run(["git", "-C", repo, "apply", patch], check=True)
subprocess.run(["git", "-C", repo, "-c", "user.name=p", "-c", "user.email=p@p.invalid",
                "commit", "-qam", "apply"], check=True)
print(f"{(time.perf_counter() - t) * 1000:.1f}")
PY
)")
    git -C "$repo" reset -q --hard "$base"
    if [ "$objects" = prune ]; then
      git -C "$repo" reflog expire --expire=now --all
      git -C "$repo" prune --expire=now
    fi
  done
  printf '%s\n' "${ts[@]}" | sort -n | sed -n 2p
}

# apply_row REPO BASE PLAN BASELINE_MS LABEL: one timed `agents plan apply PLAN --yes`, which
# must leave exactly one new commit on REPO's branch, against BASELINE_MS.
apply_row() {
  local repo=$1 base=$2 plan=$3 b=$4 label=$5 o r v
  local L=("$AGENTS" --data-dir "$WORK/data-large" --config-path "$WORK/config-large.toml")
  o=$(median_ms 1 "${L[@]}" plan apply "$plan" --yes)
  if [ "$(git -C "$repo" rev-list --count "$base..HEAD")" != 1 ]; then
    row "$label" "-" "-" "-" "FAILED: no commit on the resource"; FAILED=1
    return 1
  fi
  r=$(python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.2f}')" "$o" "$b")
  le "$r" 2.0 && v=PASS || v=MISS
  row "$label" "$o ms" "git apply && git commit -a $b ms" "${r}x" "$v (<= 2.0x)"
}
