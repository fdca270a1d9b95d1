# Sourced by scripts/perf.sh (uses its AGENTS, WORK, row, FAILED).
#
# idle_row: a data directory with two generated resources, a 20,000-file repository (200
# directories of 100 files) and a 27,000-file one shaped like a large JavaScript monorepo
# (13,000 directories, a .gitignore'd build directory), both indexed. `agents tui` runs in a
# private tmux server; 2 s after it starts, 1,000 files of the large repository are
# rewritten and committed (what an Apply does), then the TUI is left alone. Measured:
#   - CPU over 30 s starting 20 s after the start, from the process's utime+stime ticks in
#     /proc/PID/stat: under 1 % of a core;
#   - no write to either repository during the window (every file's size and mtime, `.git`
#     included, compared before and after);
#   - after one file is edited, the time until a search of the index (read as it is, no
#     update before the read: benches/idle.rs) finds the new word: at most 1 s.
# PERF_BENCH (default `cargo bench`) builds and runs benches/idle.rs; `cargo test` runs it
# unoptimized, for a quick look with a debug AGENTS.

idle_row() {
  local d="$WORK/data-idle" c="$WORK/config-idle.toml" out
  local I=("$AGENTS" --data-dir "$d" --config-path "$c")
  if ! command -v tmux >/dev/null 2>&1; then
    row "TUI idle CPU (20,000 + 27,000 files)" "-" "-" "-" "SKIP (no tmux)"
    return
  fi
  python3 - "$WORK/idle-flat" "$WORK/idle-mono" <<'PY'
import os, subprocess, sys
flat, mono = sys.argv[1], sys.argv[2]
for d in range(200):
    os.makedirs(f"{flat}/d{d:03}", exist_ok=True)
    for k in range(100):
        i = d * 100 + k
        with open(f"{flat}/d{d:03}/f{i:05}.rs", "w") as f:
            f.write("".join(f"    let v{j} = {i * 40 + j};\n" for j in range(40)))
n = 0
for leaf in range(13000):
    p = f"{mono}/packages/p{leaf // 100:03}/src/m{leaf % 100:02}"
    os.makedirs(p, exist_ok=True)
    for k in range(3 if leaf < 1000 else 2):
        with open(f"{p}/f{k}.js", "w") as f:
            f.write("".join(f"export const v{j} = {n * 20 + j};\n" for j in range(20)))
        n += 1
with open(f"{mono}/.gitignore", "w") as f:
    f.write("build/\n*.log\n")
os.makedirs(f"{mono}/build/out", exist_ok=True)
for k in range(500):
    with open(f"{mono}/build/out/b{k}.js", "w") as f:
        f.write("built\n")
for repo in (flat, mono):
    g = ["git", "-C", repo, "-c", "user.name=p", "-c", "user.email=p@p.invalid"]
    subprocess.run(g + ["init", "-q", "-b", "main"], check=True)
    subprocess.run(g + ["add", "-A"], check=True)
    subprocess.run(g + ["commit", "-qm", "generated"], check=True)
PY
  "${I[@]}" resource add git-checkout local/flat --path "$WORK/idle-flat" >/dev/null &&
    "${I[@]}" resource add git-checkout local/mono --path "$WORK/idle-mono" >/dev/null ||
    { row "TUI idle CPU" "-" "-" "-" "FAILED to register the resources"; FAILED=1; return; }
  local bench
  read -r -a bench <<< "${PERF_BENCH:-cargo bench}"
  "${bench[@]}" --locked --bench idle --no-run >/dev/null 2>&1 ||
    { row "TUI idle CPU" "-" "-" "-" "FAILED to build benches/idle.rs"; FAILED=1; return; }
  out=$(python3 - "$AGENTS" "$d" "$c" "$WORK/tmux-idle.sock" "$WORK/idle-flat" "$WORK/idle-mono" "${bench[@]}" <<'PY'
import os, subprocess, sys, time
agents, data, config, sock, flat, mono = sys.argv[1:7]
bench = sys.argv[7:]
tmux = ["tmux", "-S", sock]
hz = os.sysconf("SC_CLK_TCK")

def ticks(pid):
    # utime and stime: fields 14 and 15, counted after the parenthesised command name.
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])

def agents_pid(pid):
    # The pane runs `env ... agents ...`; env execs, but look one level down to be sure.
    for _ in range(50):
        if open(f"/proc/{pid}/comm").read().strip() == "agents":
            return pid
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
        if kids:
            pid = int(kids[0])
        time.sleep(0.05)
    sys.exit("the agents process was not found under the tmux pane")

def snapshot():
    seen = {}
    for repo in (flat, mono):
        for top, _, files in os.walk(repo):
            for f in files:
                p = os.path.join(top, f)
                try:
                    st = os.lstat(p)
                except FileNotFoundError:
                    continue
                seen[p] = (st.st_size, st.st_mtime_ns)
    return seen

cmd = f"env TERM=xterm-256color {agents} --data-dir {data} --config-path {config} tui"
start = time.monotonic()
subprocess.run(tmux + ["new-session", "-d", "-s", "idle", "-x", "200", "-y", "60", cmd], check=True)
try:
    pane = int(subprocess.run(tmux + ["display", "-p", "-t", "idle", "#{pane_pid}"],
                              capture_output=True, text=True, check=True).stdout)
    pid = agents_pid(pane)
    time.sleep(max(0, start + 2 - time.monotonic()))
    # What an Apply does: 1,000 files rewritten and committed.
    for leaf in range(1000):
        p = f"{mono}/packages/p{leaf // 100:03}/src/m{leaf % 100:02}/f0.js"
        with open(p, "a") as f:
            f.write("export const applied = 1;\n")
    g = ["git", "-C", mono, "-c", "user.name=p", "-c", "user.email=p@p.invalid"]
    subprocess.run(g + ["commit", "-qam", "applied"], check=True)
    time.sleep(max(0, start + 15 - time.monotonic()))
    before = snapshot()
    time.sleep(max(0, start + 20 - time.monotonic()))
    t0, c0 = time.monotonic(), ticks(pid)
    time.sleep(30)
    t1, c1 = time.monotonic(), ticks(pid)
    after = snapshot()
    writes = sum(1 for p in set(before) | set(after) if before.get(p) != after.get(p))
    pct = (c1 - c0) / hz / (t1 - t0) * 100
    env = dict(os.environ, BENCH_IDLE_INDEX=f"{data}/indexes/local+flat",
               BENCH_IDLE_FILE=f"{flat}/d123/f12345.rs", BENCH_IDLE_WORD="zanzibarquokka")
    r = subprocess.run(bench + ["--locked", "--bench", "idle"], env=env,
                       capture_output=True, text=True)
    ms = "-"
    for line in r.stdout.splitlines():
        if "searchable after" in line:
            ms = line.split()[-2] if not line.startswith("not") else "timeout"
    print(f"{pct:.2f} {c1 - c0} {writes} {ms}")
finally:
    subprocess.run(tmux + ["kill-server"], check=False)
PY
) || { row "TUI idle CPU" "-" "-" "-" "FAILED to run"; FAILED=1; return; }
  local pct t writes ms v
  read -r pct t writes ms <<< "$out"
  le "$pct" 1 && [ "$writes" = 0 ] && v=PASS || v=MISS
  row "TUI idle CPU, 30 s from 20 s after start (20,000 + 27,000 files)" "$pct % ($t ticks)" \
    "$writes files written in the window" "-" "$v (< 1 % of a core, no write)"
  [ "$ms" != timeout ] && [ "$ms" != - ] && le "$ms" 1000 && v=PASS || v=MISS
  row "  edit searchable while the TUI runs" "$ms ms" "-" "-" "$v (<= 1000 ms)"
}
