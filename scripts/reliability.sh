#!/usr/bin/env bash
# Reliability suite — the parts too long for CI. Release build.
#
#   scripts/reliability.sh [--runs N] [--seconds S] [--workers W] [--keep]
#
# 1. crash: N (default 50) plans, each killed with SIGKILL at a random moment of Strategize,
#    Execute or Apply (and sometimes again while recovering); afterwards every plan is
#    recovered to Applied with `plan execute` / `plan apply`, `PRAGMA integrity_check` passes
#    after every kill, and the real repository is either unchanged or exactly the applied
#    result (one commit per plan, the expected files, a clean work tree).
# 2. concurrency: W (default 8) processes issue commands against one data directory for S
#    (default 60) seconds: project creation, listings, config reads, new plans, and
#    `plan execute` on one shared plan. The only error allowed is CONFLICT on the shared plan;
#    afterwards the counts of projects and plans match what the workers recorded.
# 3. limits: a step printing 1 GB, a 200 MB file in the repository (bounded peak memory,
#    clear outcomes), an escape attempt and a leaked-key probe (the key must appear nowhere in
#    the data directory, the sandbox or the output).
# 4. escapes: one `run:` step makes 50+ escape attempts as a hostile step would (reads of the
#    user's keys and /etc/shadow, writes outside, symbolic and hard links, /proc, devices,
#    mounts, namespaces, host UNIX/abstract sockets, TCP/UDP/DNS with network: false, processes
#    that try to outlive the step, limits); each must be refused inside the step or leave no
#    trace on the host. Prints `escapes tried=N held=N` (docs/sandbox.md).
#
# 5. apply-kill: a 3,000-file Apply killed with SIGKILL at 20 points spread over its duration,
#    then `plan apply` (even runs) or `plan cancel` (odd runs); every run must end with the
#    repository exactly at the old tree (byte for byte: files, modes, index, HEAD, refs,
#    packed-refs, the entries of .git) or exactly at the new commit (one commit, clean status,
#    no journal or lock left). Prints `apply-kill runs=N exact=N`.
#
# 6. resume: P (default 20, --resume-plans) plans of two model-executor steps of C (default 5,
#    --resume-calls)
#    `shell_execute` calls each, against the scripted model `scripts/scripted-model.py`. Each
#    plan's `plan execute` is killed with SIGKILL at K (default 10, --resume-kills) random
#    moments (during model streams, tool calls, checkpoints) and resumed, then compared with
#    an uninterrupted plan: the same final files; model calls re-bought beyond the one in
#    flight (a call started again after its answer was recorded in the step's journal, plus
#    any request the model server saw that no journal holds); tool calls repeated (a
#    completed call started again, from the steps' journals).
#    Prints `resume plans=P kills=N same-tree=N/P rebought-beyond-in-flight=N
#    repeated-beyond-in-flight=N` (docs/sandbox.md, "Resuming a step").
#
# Prints a summary and exits non-zero on any failure. CI runs the short versions of 3 in
# `tests/reliability/`.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

RUNS=50 SECONDS_CONC=60 WORKERS=8 KEEP=0 ONLY=all RES_N=20 RES_K=10 RES_CALLS=5
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --seconds) SECONDS_CONC=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --resume-plans) RES_N=$2; shift 2 ;;
    --resume-kills) RES_K=$2; shift 2 ;;
    --resume-calls) RES_CALLS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;   # crash | concurrency | limits | escapes | apply-kill | resume
    *) echo "unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

if [ -z "${AGENTS_BIN:-}" ]; then
  cargo build --release --locked --bin agents >&2 || { echo "release build failed" >&2; exit 1; }
  AGENTS_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/agents"
fi
command -v jq >/dev/null || { echo "jq is required (apt-get install jq)" >&2; exit 1; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/agents-reliability.XXXXXX")
[ "$KEEP" = 1 ] || trap 'rm -rf "$WORK"' EXIT
FAILURES=0
fail() { echo "FAIL: $*" >&2; FAILURES=$((FAILURES + 1)); }

# `a ARGS...`: the binary on this suite's data directory, json output.
DATA=$WORK/data
a() { "$AGENTS_BIN" --data-dir "$DATA" --config-path "$WORK/config.toml" --format json "$@"; }
integrity() {
  local r
  r=$(sqlite3 "$DATA/cleveragents.db" "PRAGMA integrity_check" 2>&1 || python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])" "$DATA/cleveragents.db")
  [ "$r" = ok ] || { fail "integrity_check: $r"; return 1; }
}
git_q() { git -c user.name=t -c user.email=t@t.invalid -c init.defaultBranch=main "$@"; }

# ---------------------------------------------------------------- setup
REPO=$WORK/repo
mkdir -p "$REPO" && git_q -C "$REPO" init -q && echo base > "$REPO/README" \
  && git_q -C "$REPO" add -A && git_q -C "$REPO" commit -qm base
a resource add git-checkout local/repo --path "$REPO" >/dev/null || { echo "setup failed" >&2; exit 1; }
a project create --resource local/repo app >/dev/null
cat > "$WORK/crash.yaml" <<'EOF'
name: local/crash
definition-of-done: out/{{ n }}/ holds a, b, c, d
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
arguments:
  - {name: n, type: integer, required: true}
script:
  - {name: a, run: "mkdir -p out/{{ n }} && sleep 0.2 && echo a{{ n }} > out/{{ n }}/a"}
  - {name: b, run: "sleep 0.2 && echo b{{ n }} > out/{{ n }}/b"}
  - {name: c, run: "sleep 0.2 && echo c{{ n }} > out/{{ n }}/c && echo {{ n }} >> out/log"}
  - {name: d, run: "sleep 0.2 && printf 'd%s\\n' {{ n }} > out/{{ n }}/d"}
EOF
a action create --available --config "$WORK/crash.yaml" >/dev/null || { echo "action create failed" >&2; exit 1; }

# ---------------------------------------------------------------- 1. crash
KILLS=0 RECOVERED=0 APPLIED=0 EARLY=0 INTEGRITY=skipped COMMANDS=0 CONFLICTS=0 UNEXPECTED=0
made_projects=0 have_projects=0 plans_before=0 made_plans=0 have_plans=0 INTEGRITY2=skipped
code=- PEAK=- INTEGRITY3=skipped PEAK_OUT=- PEAK_BIG=-
[ "$ONLY" = all ] || [ "$ONLY" = crash ] || RUNS=0
echo "== crash: $RUNS runs" >&2
kill_after() { # kill_after SECONDS CMD... : runs CMD, SIGKILLs it after SECONDS unless it ended
  local delay=$1; shift
  "$@" > "$WORK/last.json" 2>/dev/null &
  local pid=$!
  sleep "$delay" 2>/dev/null || true
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; KILLS=$((KILLS + 1)); return 0; fi
  wait "$pid" 2>/dev/null; return 1
}
for i in $(seq 1 "$RUNS"); do
  before=$(git -C "$REPO" rev-parse HEAD)
  where=$((RANDOM % 3))   # 0 strategize, 1 execute, 2 apply
  case $where in
    0) delay="0.0$((RANDOM % 10))" ;;
    1) delay="0.$((2 + RANDOM % 8))" ;;
    2) delay="" ;;
  esac
  plan=""
  nplans=$(a plan list --action local/crash | jq '.data.plans | length')
  if [ -n "$delay" ]; then
    # shellcheck disable=SC2046
    kill_after "$delay" "$AGENTS_BIN" --data-dir "$DATA" --config-path "$WORK/config.toml" --format json \
      plan use local/crash app --arg n="$i" --automation-profile trusted
  else
    a plan use local/crash app --arg n="$i" --automation-profile trusted > "$WORK/last.json"
  fi
  integrity || true
  if [ "$(a plan list --action local/crash | jq '.data.plans | length')" = "$nplans" ]; then
    # Killed before the plan was stored: nothing to recover; the plan is made again.
    EARLY=$((EARLY + 1))
    a plan use local/crash app --arg n="$i" --automation-profile trusted > "$WORK/last.json"
  fi
  plan=$(a plan list --action local/crash | jq -r '[.data.plans[]] | sort_by(.plan_id) | last | .plan_id')
  [ -n "$plan" ] && [ "$plan" != null ] || { fail "run $i: no plan recorded"; continue; }
  # The real repository has not changed before Apply.
  [ "$(git -C "$REPO" rev-parse HEAD)" = "$before" ] && [ -z "$(git -C "$REPO" status --porcelain)" ] \
    || fail "run $i: the repository changed before Apply"
  # Recover: drive to the apply gate (a kill can leave it queued, processing or errored).
  ok=0
  for _ in 1 2 3 4 5 6; do
    st=$(a plan status "$plan" | jq -r '.data.phase + "/" + .data.state')
    case $st in
      execute/complete|apply/*) ok=1; break ;;
    esac
    a plan execute "$plan" > "$WORK/exec.json" 2>/dev/null
    code=$?
    [ $code = 0 ] || [ $code = 3 ] || [ $code = 1 ] || fail "run $i: plan execute exit $code"
  done
  [ $ok = 1 ] || { fail "run $i: plan $plan not recoverable (at $st)"; continue; }
  RECOVERED=$((RECOVERED + 1))
  # Apply, killed at a random moment in half of the runs, then completed.
  APPLY_KILLED=no
  if [ $((RANDOM % 2)) = 0 ]; then
    APPLY_KILLED="after 0.$((RANDOM % 4))s"
    kill_after "$(echo "$APPLY_KILLED" | sed 's/after //; s/s$//')" "$AGENTS_BIN" --data-dir "$DATA" --config-path "$WORK/config.toml" --format json plan apply --yes "$plan" || true
    integrity || true
  fi
  for _ in 1 2 3; do
    st=$(a plan status "$plan" | jq -r '.data.phase + "/" + .data.state')
    [ "$st" = applied/complete ] && break
    a plan apply --yes "$plan" > "$WORK/apply.json" 2>/dev/null
  done
  [ "$st" = applied/complete ] || { fail "run $i: plan $plan not applied after recovery (at $st): $(jq -c .error "$WORK/apply.json" 2>/dev/null)"; continue; }
  APPLIED=$((APPLIED + 1))
  # Exactly the applied result: one commit on top of $before, with the four files.
  count=$(git -C "$REPO" rev-list --count "$before..HEAD")
  [ "$count" = 1 ] || fail "run $i: $count commits instead of 1"
  for f in a b c d; do
    [ "$(cat "$REPO/out/$i/$f" 2>/dev/null)" = "$f$i" ] || fail "run $i: out/$i/$f wrong"
  done
  dirty=$(git -C "$REPO" status --porcelain | head -5 | tr '\n' ' ')
  [ -z "$dirty" ] || fail "run $i: work tree not clean after apply (apply killed: ${APPLY_KILLED:-no}): $dirty"
  [ "$(git -C "$REPO" diff --name-only "$before" HEAD | grep -vc "^out/")" = 0 ] || fail "run $i: files outside out/ changed"
done
integrity && INTEGRITY=ok || INTEGRITY=FAILED
echo "crash: runs=$RUNS kills=$KILLS killed-before-creation=$EARLY recovered=$RECOVERED applied=$APPLIED integrity=$INTEGRITY" >&2

# ---------------------------------------------------------------- 2. concurrency
if [ "$ONLY" = all ] || [ "$ONLY" = concurrency ]; then
echo "== concurrency: $WORKERS workers x ${SECONDS_CONC}s" >&2
cat > "$WORK/quick.yaml" <<'EOF'
name: local/quick
definition-of-done: a file
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - {name: one, run: "echo one > one.txt"}
  - {name: slow, run: "sleep 1 && echo two > two.txt"}
EOF
a action create --available --config "$WORK/quick.yaml" >/dev/null
shared=$(a plan use local/quick app --automation-profile manual | jq -r .data.plan_id)
plans_before=$(a plan list | jq '.data.plans | length')
worker() {
  local k=$1 end=$(( $(date +%s) + SECONDS_CONC )) j=0 out code err
  local log=$WORK/worker-$k.log
  : > "$log"
  while [ "$(date +%s)" -lt "$end" ]; do
    j=$((j + 1))
    case $((j % 6)) in
      0) out=$(a project create "local/w$k-$j"); code=$?; [ $code = 0 ] && echo "project local/w$k-$j" >> "$log" ;;
      1) out=$(a plan list); code=$? ;;
      2) out=$(a config get format); code=$? ;;
      3) out=$(a plan execute "$shared"); code=$?
         err=$(echo "$out" | jq -r '.error.code // empty' 2>/dev/null)
         if [ $code = 1 ] && [ "$err" = CONFLICT ]; then echo "conflict" >> "$log"; code=0; fi
         [ $code = 3 ] && code=0 ;;
      4) if [ $((j % 24)) = 4 ]; then
           out=$(a plan use local/quick app --automation-profile trusted); code=$?
           [ $code = 3 ] && { echo "plan $(echo "$out" | jq -r .data.plan_id)" >> "$log"; code=0; }
         else out=$(a project list); code=$?; fi ;;
      5) out=$(a plan approvals); code=$? ;;
    esac
    if [ $code != 0 ]; then
      echo "unexpected exit $code: $(echo "$out" | jq -c '{command, error}' 2>/dev/null || echo "$out" | head -c 300)" >> "$log"
    fi
    echo "cmd" >> "$log"
  done
}
pids=()
for k in $(seq 1 "$WORKERS"); do worker "$k" & pids+=($!); done
for p in "${pids[@]}"; do wait "$p"; done
COMMANDS=$(cat "$WORK"/worker-*.log | grep -c '^cmd$')
CONFLICTS=$(cat "$WORK"/worker-*.log | grep -c '^conflict$')
UNEXPECTED=$(cat "$WORK"/worker-*.log | grep -c '^unexpected' || true)
if [ "$UNEXPECTED" != 0 ]; then
  fail "concurrency: $UNEXPECTED unexpected errors"; grep -h '^unexpected' "$WORK"/worker-*.log | sort | uniq -c | head -10 >&2
fi
made_projects=$(cat "$WORK"/worker-*.log | grep -c '^project ')
made_plans=$(cat "$WORK"/worker-*.log | grep -c '^plan ')
have_projects=$(a project list | jq '[.data.projects[] | select(.name | startswith("local/w"))] | length')
have_plans=$(a plan list | jq '.data.plans | length')
[ "$made_projects" = "$have_projects" ] || fail "concurrency: workers created $made_projects projects, the database has $have_projects"
[ $((plans_before + made_plans)) = "$have_plans" ] || fail "concurrency: expected $((plans_before + made_plans)) plans, found $have_plans"
integrity && INTEGRITY2=ok || INTEGRITY2=FAILED
fi
echo "concurrency: commands=$COMMANDS conflicts=$CONFLICTS unexpected=$UNEXPECTED projects=$made_projects/$have_projects plans=$((plans_before + made_plans))/$have_plans integrity=$INTEGRITY2" >&2

# ---------------------------------------------------------------- 3. limits, escapes, keys
if [ "$ONLY" = all ] || [ "$ONLY" = limits ]; then
echo "== limits" >&2
peak_kib() { /usr/bin/time -f "%M" -o "$WORK/time.txt" "$@" > "$WORK/limit.json" 2>/dev/null; local c=$?; PEAK=$(tail -1 "$WORK/time.txt"); return $c; }
cat > "$WORK/limits.yaml" <<'EOF'
name: local/limits
definition-of-done: limits
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - {name: gigabyte, run: "head -c 1073741824 /dev/zero | tr '\\0' x; echo done > gb.txt"}
  - {name: escape, run: "touch ../outside-escape 2>/dev/null; echo x > /tmp/agents-escape-probe 2>/dev/null; echo x > $REPO_PATH/escaped 2>/dev/null; env > env.txt; true"}
EOF
sed -i "s|\$REPO_PATH|$REPO|" "$WORK/limits.yaml"
cat > "$WORK/small.yaml" <<'EOF'
name: local/small
definition-of-done: a note
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - {name: note, run: "echo note > NOTE.md && wc -c < big.bin > size.txt"}
EOF
a action create --available --config "$WORK/limits.yaml" >/dev/null
a action create --available --config "$WORK/small.yaml" >/dev/null
KEY="sk-reliability-probe-$(date +%s)-$RANDOM"
head_before=$(git -C "$REPO" rev-parse HEAD)
start=$(date +%s)
OPENAI_API_KEY=$KEY ANTHROPIC_API_KEY=$KEY peak_kib "$AGENTS_BIN" --data-dir "$DATA" --config-path "$WORK/config.toml" --format json plan use local/limits app --automation-profile trusted
code=$?; took=$(( $(date +%s) - start )); PEAK_OUT=$PEAK
lplan=$(jq -r .data.plan_id "$WORK/limit.json")
[ $code = 3 ] || fail "limits: plan use exit $code: $(jq -c .error "$WORK/limit.json")"
[ "${PEAK_OUT:-999999999}" -lt 102400 ] || fail "limits: peak RSS ${PEAK_OUT} KiB while a step printed 1 GB"
echo "limits: 1 GB of output: exit $code, ${took}s, peak ${PEAK_OUT} KiB" >&2
[ ! -e "$WORK/outside-escape" ] && [ ! -e /tmp/agents-escape-probe ] && [ ! -e "$REPO/escaped" ] || fail "escape: a file was written outside the sandbox"
rm -f /tmp/agents-escape-probe
if grep -rqF "$KEY" "$DATA" "$WORK/limit.json" 2>/dev/null; then fail "leaked key: found in $(grep -rlF "$KEY" "$DATA" | head -3)"; fi
[ "$(git -C "$REPO" rev-parse HEAD)" = "$head_before" ] && [ -z "$(git -C "$REPO" status --porcelain)" ] || fail "limits: the repository changed outside Apply"
a plan diff "$lplan" > "$WORK/ldiff.json" || fail "limits: plan diff failed"
jq -e '.data.stats.files_changed == 2' "$WORK/ldiff.json" >/dev/null || fail "limits: expected gb.txt and env.txt in the diff: $(jq -c .data.stats "$WORK/ldiff.json")"
a plan cancel "$lplan" >/dev/null
# A 200 MB file in the repository: sandbox, checkpoint, diff and apply.
head -c 209715200 /dev/urandom > "$REPO/big.bin" && git_q -C "$REPO" add big.bin && git_q -C "$REPO" commit -qm big
start=$(date +%s)
peak_kib "$AGENTS_BIN" --data-dir "$DATA" --config-path "$WORK/config.toml" --format json plan use local/small app --automation-profile trusted
code2=$?; took=$(( $(date +%s) - start )); PEAK_BIG=$PEAK
splan=$(jq -r .data.plan_id "$WORK/limit.json")
[ $code2 = 3 ] || fail "limits: plan use with a 200 MB file exit $code2: $(jq -c .error "$WORK/limit.json")"
peak_kib "$AGENTS_BIN" --data-dir "$DATA" --config-path "$WORK/config.toml" --format json plan apply --yes "$splan" \
  || fail "limits: apply with a 200 MB file: $(jq -c .error "$WORK/limit.json")"
PEAK_BIG_APPLY=$PEAK
[ "$(cat "$REPO/size.txt" 2>/dev/null)" = 209715200 ] || fail "limits: size.txt wrong after apply"
# Bounded: the large file may be held once or twice (hashing, blob comparison), never more.
[ "${PEAK_BIG:-999999999}" -lt 512000 ] && [ "${PEAK_BIG_APPLY:-999999999}" -lt 512000 ] \
  || fail "limits: peak RSS ${PEAK_BIG}/${PEAK_BIG_APPLY} KiB with a 200 MB file"
echo "limits: 200 MB file: exit $code2, ${took}s, peak ${PEAK_BIG} KiB (use), ${PEAK_BIG_APPLY} KiB (apply)" >&2
integrity && INTEGRITY3=ok || INTEGRITY3=FAILED
fi

# ---------------------------------------------------------------- 4. escapes
ESC_TRIED=0 ESC_HELD=0
if [ "$ONLY" = all ] || [ "$ONLY" = escapes ]; then
echo "== escapes" >&2
EH=$WORK/esc-home EREPO=$WORK/esc-repo
mkdir -p "$EH/.ssh" "$EH/.aws" "$EH/.config/gh" "$EH/.gnupg" "$EH/.kube" "$EH/.docker" "$EREPO"
for f in .ssh/id_rsa .aws/credentials .config/gh/hosts.yml .netrc .git-credentials .npmrc .kube/config .docker/config.json .gnupg/secring.gpg; do
  echo "SECRET-$f" > "$EH/$f"
done
echo outside > "$WORK/esc-outside.txt"
# Host-side listeners and a process the step must not touch.
python3 - "$WORK" > "$WORK/esc-ports" 2> "$WORK/esc-listener.log" <<'PY' &
import socket, sys, threading, os, time
work = sys.argv[1]
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen()
tcp6 = socket.socket(socket.AF_INET6); tcp6.bind(("::1", 0)); tcp6.listen()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", 0))
unix = socket.socket(socket.AF_UNIX); unix.bind(work + "/esc-host.sock"); unix.listen()
abstract = socket.socket(socket.AF_UNIX); abstract.bind("\0agents-escape-probe"); abstract.listen()
print(tcp.getsockname()[1], tcp6.getsockname()[1], udp.getsockname()[1], flush=True)
def count(name, sock, dgram=False):
    while True:
        if dgram: sock.recvfrom(100)
        else: sock.accept()
        with open(work + "/esc-received", "a") as f: f.write(name + "\n")
for n, s_, d in [("tcp", tcp, False), ("tcp6", tcp6, False), ("udp", udp, True), ("unix", unix, False), ("abstract", abstract, False)]:
    threading.Thread(target=count, args=(n, s_, d), daemon=True).start()
time.sleep(3600)
PY
LISTENER=$!
OPENAI_API_KEY=sk-escape-probe-key sleep 3600 &
VICTIM=$!
for _ in $(seq 50); do [ -s "$WORK/esc-ports" ] && break; sleep 0.1; done
read -r TCP_PORT TCP6_PORT UDP_PORT < "$WORK/esc-ports"
echo host > /dev/shm/agents-escape-host-marker
cat > "$EREPO/escape.env" <<EOF
H=$EH
UREPO=$REPO
WORK=$WORK
DATA=$DATA
VICTIM=$VICTIM
TCP_PORT=$TCP_PORT
TCP6_PORT=$TCP6_PORT
UDP_PORT=$UDP_PORT
EOF
cat > "$EREPO/escape.sh" <<'EOF'
# Each attempt must fail (exit non-zero) to count as held; `trace:` ones are judged on the host.
. ./escape.env
try() { name=$1; shift; if (timeout 20 sh -c "$*") >/dev/null 2>&1; then echo "ESCAPED $name"; else echo "HELD $name"; fi; }
trace() { name=$1; shift; (timeout 20 sh -c "$*") >/dev/null 2>&1; echo "TRACE $name"; }
try read-ssh-key "cat $H/.ssh/id_rsa"
try list-ssh-dir "ls $H/.ssh"
try read-aws "cat $H/.aws/credentials"
try read-gh "cat $H/.config/gh/hosts.yml"
try read-netrc "cat $H/.netrc"
try read-gnupg "cat $H/.gnupg/secring.gpg"
try read-git-credentials "cat $H/.git-credentials"
try read-npmrc "cat $H/.npmrc"
try read-kube "cat $H/.kube/config"
try read-docker-config "cat $H/.docker/config.json"
try read-shadow "cat /etc/shadow"
try read-gshadow "cat /etc/gshadow"
try read-user-git-config "cat $UREPO/.git/config"
try read-user-work-tree "cat $UREPO/README"
try read-data-dir "cat $DATA/cleveragents.db"
try read-outside-file "cat $WORK/esc-outside.txt"
try read-root-home "ls /root"
try read-symlink-to-key "ln -s $H/.ssh/id_rsa l1 && cat l1"
try read-symlink-to-dir "ln -s $H d1 && cat d1/.netrc"
try read-hardlink-to-key "ln $H/.ssh/id_rsa l2 && cat l2"
try read-via-proc-root "cat /proc/self/root$H/.ssh/id_rsa"
try read-victim-environ "cat /proc/$VICTIM/environ"
try read-victim-cwd "ls /proc/$VICTIM/cwd/"
try read-victim-mem "head -c 1 /proc/$VICTIM/mem"
try read-any-environ-key "for e in /proc/[0-9]*/environ; do tr '\0' '\n' < \$e; done 2>/dev/null | grep -q sk-escape-probe-key"
try read-kcore "head -c 1 /proc/kcore"
try read-raw-disk "for d in /dev/sd? /dev/vd? /dev/nvme?n? /dev/xvd?; do [ -e \$d ] && head -c 1 \$d && exit 0; done; exit 1"
try see-host-shm "cat /dev/shm/agents-escape-host-marker"
try write-outside "echo x > $WORK/esc-escaped"
try write-tmp "echo x > /tmp/agents-esc-probe-\$\$ && ls /tmp/agents-esc-probe-\$\$"
try write-user-repo "echo x > $UREPO/esc-escaped"
try write-home-ssh "echo x >> $H/.ssh/authorized_keys"
try write-etc "echo x >> /etc/hosts"
try write-git-dir "echo x >> \$GIT_DIR/HEAD"
try git-commit "git commit -qam sneaky"
try git-update-ref "git update-ref refs/heads/sneaky HEAD"
try write-symlink-out "ln -s $WORK/esc-escaped2 l3 && echo x > l3"
try write-via-proc-root "echo x > /proc/self/root$WORK/esc-escaped3"
try rename-out "echo x > mv1 && mv mv1 $WORK/esc-moved"
try write-proc-sys "echo 1 > /proc/sys/vm/drop_caches"
try mknod-block "mknod blk b 8 0"
try mount-tmpfs "mount -t tmpfs none /mnt"
try umount-hidden-socket "umount $WORK/esc-host.sock"
try userns-umount "unshare -Urm umount $WORK/esc-host.sock"
try chroot "chroot / true"
try setns-host-net "nsenter -t 1 -n true"
try cgroup-escape "echo \$\$ > /sys/fs/cgroup/pids/tasks"
try raise-nofile "ulimit -n 1048576"
try kill-host-process "kill -9 $VICTIM"
try ptrace-host "/usr/bin/python3 -c 'import ctypes,sys; sys.exit(0 if ctypes.CDLL(None).ptrace(16, $VICTIM, 0, 0) == 0 else 1)'"
try tcp-host-loopback "/usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", $TCP_PORT), timeout=3)'"
try tcp6-host-loopback "/usr/bin/python3 -c 'import socket; socket.create_connection((\"::1\", $TCP6_PORT), timeout=3)'"
trace udp-host-loopback "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"x\", (\"127.0.0.1\", $UDP_PORT))'"
try dns "/usr/bin/python3 -c 'import socket; socket.getaddrinfo(\"example.com\", 80)'"
try tcp-internet "/usr/bin/python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=3)'"
try unix-host-socket "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"$WORK/esc-host.sock\")'"
try abstract-host-socket "/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"\\0agents-escape-probe\")'"
try fork-bomb "/usr/bin/python3 -c 'import os,time
n=0
for _ in range(3000):
  try:
    if os.fork()==0: time.sleep(60); os._exit(0)
    n+=1
  except OSError: break
raise SystemExit(0 if n >= 2000 else 1)'"
try allocate-3gib "/usr/bin/python3 -c 'b=bytearray(3*1024**3); b[::4096]=b\"x\"*len(b[::4096])'"
try file-over-4gib "dd if=/dev/zero of=sparse bs=1M seek=4200 count=1 && rm -f sparse"
try open-5000-files "/usr/bin/python3 -c 'fs=[open(\"/dev/null\") for _ in range(5000)]'"
trace setsid-survivor "setsid sleep 3601 &"
trace nohup-survivor "nohup sleep 3602 > /dev/null 2>&1 &"
trace double-fork-survivor "(sleep 3603 &) &"
trace python-daemon "/usr/bin/python3 -c 'import os,time
if os.fork()==0:
  os.setsid()
  if os.fork()==0: time.sleep(3604)'"
EOF
git_q -C "$EREPO" init -q && git_q -C "$EREPO" add -A && git_q -C "$EREPO" commit -qm escape
cat > "$WORK/escape.yaml" <<'EOF'
name: local/escape
definition-of-done: escape attempts made
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - {name: escape, run: "sh escape.sh > results.txt 2>&1; true"}
EOF
a resource add git-checkout local/esc-repo --path "$EREPO" >/dev/null
a project create --resource local/esc-repo esc >/dev/null
a action create --available --config "$WORK/escape.yaml" >/dev/null
HOME=$EH a plan use local/escape esc --automation-profile trusted > "$WORK/esc.json"
eplan=$(jq -r .data.plan_id "$WORK/esc.json")
sleep 1
RESULTS=$(find "$DATA/sandboxes/$eplan" -name results.txt -path '*/work/*' | head -1)
[ -n "$RESULTS" ] || fail "escapes: no results (plan use: $(jq -c '.error // .data.state' "$WORK/esc.json"))"
while read -r verdict name; do
  case "$verdict" in
    HELD) ESC_TRIED=$((ESC_TRIED + 1)); ESC_HELD=$((ESC_HELD + 1)) ;;
    ESCAPED) ESC_TRIED=$((ESC_TRIED + 1)); fail "escape: $name" ;;
    TRACE)
      ESC_TRIED=$((ESC_TRIED + 1)); held=1
      case "$name" in
        udp-host-loopback) grep -qx udp "$WORK/esc-received" 2>/dev/null && held=0 ;;
        setsid-survivor) pgrep -f 'sleep 3601' >/dev/null && held=0 ;;
        nohup-survivor) pgrep -f 'sleep 3602' >/dev/null && held=0 ;;
        double-fork-survivor) pgrep -f 'sleep 3603' >/dev/null && held=0 ;;
        python-daemon) pgrep -f 'time.sleep\(3604\)' >/dev/null && held=0 ;;
      esac
      [ $held = 1 ] && ESC_HELD=$((ESC_HELD + 1)) || fail "escape: $name left a trace on the host" ;;
  esac
done < "${RESULTS:-/dev/null}"
# What no attempt may leave behind, whatever the step reported.
for f in "$WORK/esc-escaped" "$WORK/esc-escaped2" "$WORK/esc-escaped3" "$WORK/esc-moved" "$REPO/esc-escaped"; do
  [ ! -e "$f" ] || fail "escape: $f was written"
done
grep -qvx udp "$WORK/esc-received" 2>/dev/null && fail "escape: host listeners received: $(sort -u "$WORK/esc-received" | tr '\n' ' ')"
kill -0 "$VICTIM" 2>/dev/null || fail "escape: the host process was killed"
[ "$(cat /dev/shm/agents-escape-host-marker)" = host ] || fail "escape: /dev/shm changed"
rm -f /dev/shm/agents-escape-host-marker /tmp/agents-esc-probe-*
kill "$LISTENER" "$VICTIM" 2>/dev/null
[ "$ESC_TRIED" -ge 50 ] || fail "escapes: only $ESC_TRIED attempts ran"
echo "escapes tried=$ESC_TRIED held=$ESC_HELD" >&2
a plan cancel "$eplan" >/dev/null
fi

# ---------------------------------------------------------------- 5. apply-kill
KILL_RUNS=0 KILL_EXACT=0
if [ "$ONLY" = all ] || [ "$ONLY" = apply-kill ]; then
KILL_POINTS=${KILL_POINTS:-20} KILL_FILES=${KILL_FILES:-3000}
echo "== apply-kill: $KILL_POINTS kills spread over a $KILL_FILES-file apply" >&2
KREPO=$WORK/kill-repo
mkdir -p "$KREPO" && git_q -C "$KREPO" init -q && echo base > "$KREPO/README" \
  && git_q -C "$KREPO" add -A && git_q -C "$KREPO" commit -qm base
a resource add git-checkout local/kill --path "$KREPO" >/dev/null
a project create --resource local/kill killapp >/dev/null
{
  echo "name: local/many"
  echo "definition-of-done: $KILL_FILES files and a changed README"
  echo "strategy-actor: builtin/checklist-strategist"
  echo "execution-actor: builtin/script-executor"
  echo "script:"
  echo "  - {name: many, run: \"mkdir -p f && for i in \$(seq 1 $KILL_FILES); do echo \$i > f/\$i.txt; done && echo changed > README\"}"
} > "$WORK/many.yaml"
a action create --available --config "$WORK/many.yaml" >/dev/null || fail "apply-kill: action create"
# Everything a user could see of the repository, as one hash.
repo_state() {
  (cd "$KREPO" && find . -path ./.git -prune -o -printf '%p %m %y %l\n' | LC_ALL=C sort \
    && find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum \
    && sha256sum .git/index .git/HEAD && { cat .git/packed-refs 2>/dev/null; true; } \
    && git for-each-ref && ls -a .git) | sha256sum
}
# Back to the base commit between runs (only ever in the suite's own repository).
kill_reset() { git -C "$KREPO" reset -q --hard "$1" && git -C "$KREPO" clean -qfdx; }
gate_plan() { a plan use local/many killapp --automation-profile trusted | jq -r .data.plan_id; }
# How long one uninterrupted apply takes (ms), to spread the kills over it.
p=$(gate_plan); base=$(git -C "$KREPO" rev-parse HEAD)
t0=$(date +%s%N); a plan apply --yes "$p" >/dev/null || fail "apply-kill: the timing apply failed"
T=$(( ($(date +%s%N) - t0) / 1000000 ))
kill_reset "$base"
echo "apply-kill: one apply takes ${T} ms" >&2
for k in $(seq 1 "$KILL_POINTS"); do
  p=$(gate_plan)
  [ -n "$p" ] && [ "$p" != null ] || { fail "apply-kill run $k: no plan"; continue; }
  before=$(repo_state); base=$(git -C "$KREPO" rev-parse HEAD)
  delay_ms=$(( T * k / (KILL_POINTS + 1) ))
  "$AGENTS_BIN" --data-dir "$DATA" --config-path "$WORK/config.toml" --format json plan apply --yes "$p" >/dev/null 2>&1 &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  if [ $((k % 2)) = 1 ]; then
    a plan cancel "$p" > "$WORK/kill.json" 2>/dev/null || jq -e '.error.message | test("final")' "$WORK/kill.json" >/dev/null \
      || fail "apply-kill run $k: plan cancel: $(jq -c .error "$WORK/kill.json")"
  else
    a plan apply --yes "$p" > "$WORK/kill.json" 2>/dev/null || jq -e '.error.code == "CONFLICT"' "$WORK/kill.json" >/dev/null \
      || fail "apply-kill run $k: plan apply: $(jq -c .error "$WORK/kill.json")"
  fi
  KILL_RUNS=$((KILL_RUNS + 1))
  if [ "$(git -C "$KREPO" rev-parse HEAD)" = "$base" ]; then
    if [ "$(repo_state)" = "$before" ]; then KILL_EXACT=$((KILL_EXACT + 1)); else
      fail "apply-kill run $k (killed after ${delay_ms} ms): not the old tree byte for byte: $(git -C "$KREPO" status --porcelain | head -3 | tr '\n' ' ')"
    fi
  else
    if [ "$(git -C "$KREPO" rev-parse HEAD~1)" = "$base" ] && [ -z "$(git -C "$KREPO" status --porcelain)" ] \
       && [ ! -e "$KREPO/.git/cleveragents-apply" ] && [ ! -e "$KREPO/.git/index.lock" ] \
       && [ "$(cat "$KREPO/f/$KILL_FILES.txt")" = "$KILL_FILES" ]; then
      KILL_EXACT=$((KILL_EXACT + 1))
    else
      fail "apply-kill run $k (killed after ${delay_ms} ms): not exactly the new commit"
    fi
    kill_reset "$base"
  fi
done
integrity || true
echo "apply-kill runs=$KILL_RUNS exact=$KILL_EXACT" >&2
fi

# ---------------------------------------------------------------- 6. resume
RES_PLANS=0 RES_KILLS=0 RES_SAME=0 RES_REBOUGHT=0 RES_REPEATED=0 RES_REMADE=0 RES_RERUN=0 RES_U=- RES_RETRIES=0 RES_WIRE=0
if [ "$ONLY" = all ] || [ "$ONLY" = resume ]; then
echo "== resume: $RES_N plans, up to $RES_K kills each" >&2
RDATA=$WORK/resume-data RCONF=$WORK/resume.toml RLOG=$WORK/model.log
: > "$RLOG"
python3 "$ROOT/scripts/scripted-model.py" "$WORK/model.port" "$RLOG" "$RES_CALLS" &
MODEL_PID=$!
for _ in $(seq 1 100); do [ -s "$WORK/model.port" ] && break; sleep 0.05; done
printf '[providers.scripted]\nkind = "openai"\nbase_url = "http://127.0.0.1:%s/v1"\napi_key_env = "SCRIPTED_API_KEY"\n' \
  "$(cat "$WORK/model.port")" > "$RCONF"
export SCRIPTED_API_KEY=sk-reliability
r() { "$AGENTS_BIN" --data-dir "$RDATA" --config-path "$RCONF" --format json "$@"; }
RREPO=$WORK/resume-repo
mkdir -p "$RREPO" && git_q -C "$RREPO" init -q && echo base > "$RREPO/README" \
  && git_q -C "$RREPO" add -A && git_q -C "$RREPO" commit -qm base
r resource add git-checkout local/rrepo --path "$RREPO" >/dev/null || fail "resume: resource add"
r project create --resource local/rrepo rapp >/dev/null || fail "resume: project create"
printf 'name: local/ab\ndefinition-of-done: a.log and b.log hold %s lines each\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n' \
  "$RES_CALLS" > "$WORK/ab.yaml"
r action create --available --config "$WORK/ab.yaml" >/dev/null || fail "resume: action create"
# A plan at its execute gate (its Strategize runs in `plan use`, before the kills;
# `cli::durable_execute` kills Strategize and the invariant actor).
new_plan() { r plan use --strategy-actor scripted/m --execution-actor scripted/m --automation-profile supervised local/ab rapp | jq -r .data.plan_id; }
requests() { wc -l < "$RLOG"; }
# Model requests in the log after line $1: made (all), re-bought (the same conversation was
# answered before) and remade (the same conversation's call was in flight).
calls_since() { tail -n +"$(($1 + 1))" "$RLOG" | awk '
  $1 == "start" { k = $2 " " $3 " " $4; made++; if (k in ended) rebought++; else if (k in started) remade++; started[k] = 1 }
  $1 == "end" { ended[$2 " " $3 " " $4] = 1 }
  END { print made + 0, rebought + 0, remade + 0 }'; }
# The plan's model calls in its steps' journals: started, started again after their answer
# was recorded, and made again because they were in flight when the driver died.
model_journal() {
  sqlite3 -separator ' ' "$RDATA/cleveragents.db" "SELECT
    (SELECT COUNT(*) FROM step_journal WHERE plan_id = '$1' AND kind = 'model_started'),
    (SELECT COUNT(*) FROM step_journal s WHERE s.plan_id = '$1' AND s.kind = 'model_started' AND EXISTS (SELECT 1 FROM step_journal t WHERE t.plan_id = s.plan_id AND t.decision_id = s.decision_id AND t.kind = 'model' AND t.seq < s.seq AND json_extract(t.entry, '$.reply') IS NOT NULL AND json_extract(t.entry, '$.turn') = json_extract(s.entry, '$.turn'))),
    (SELECT COUNT(*) FROM step_journal WHERE plan_id = '$1' AND kind = 'resumed' AND json_extract(entry, '$.model_in_flight') = 1)"
}
# Completed tool calls of the plan started again (the journal of its steps).
tool_repeats() {
  sqlite3 "$RDATA/cleveragents.db" "SELECT COUNT(*) FROM step_journal s WHERE s.plan_id = '$1' AND s.kind = 'tool_started' AND EXISTS (SELECT 1 FROM step_journal t WHERE t.plan_id = s.plan_id AND t.decision_id = s.decision_id AND t.kind = 'tool' AND t.seq < s.seq AND json_extract(t.entry, '$.record.call_id') = json_extract(s.entry, '$.call_id'))"
}
# The files the plan's steps wrote in its sandbox, as one hash.
tree_of() { for f in a.log b.log; do echo "== $f"; find "$RDATA/sandboxes/$1" -path "*/work/$f" -exec cat {} +; done | sha256sum | cut -d' ' -f1; }
# Tool calls started for the plan: logged calls (discarded ones included), or journaled starts.
tool_runs() {
  sqlite3 "$RDATA/cleveragents.db" "SELECT MAX((SELECT COUNT(*) FROM tool_calls WHERE plan_id = '$1' AND tool = 'shell_execute'), (SELECT COUNT(*) FROM step_journal WHERE plan_id = '$1' AND kind = 'tool_started'))"
}
# Execute is done (the plan waits at its apply gate, or for `plan apply`).
at_gate() { case $(r plan status "$1" | jq -r '.data.phase + "/" + .data.state') in execute/complete|apply/*) true ;; *) false ;; esac; }
# The uninterrupted reference.
ref=$(new_plan)
r0=$(requests)
r plan execute "$ref" >/dev/null 2>&1
read -r RES_U _ _ <<< "$(calls_since "$r0")"
REF_TREE=$(tree_of "$ref")
REF_TOOLS=$(tool_runs "$ref")
[ "$REF_TOOLS" = $((2 * RES_CALLS)) ] || fail "resume: the uninterrupted plan ran $REF_TOOLS tool calls, not $((2 * RES_CALLS))"
at_gate "$ref" || fail "resume: the uninterrupted plan did not reach the apply gate"
for i in $(seq 1 "$RES_N"); do
  p=$(new_plan)
  [ -n "$p" ] && [ "$p" != null ] || { fail "resume plan $i: no plan"; continue; }
  r0=$(requests) kills=0
  for _ in $(seq 1 "$RES_K"); do
    "$AGENTS_BIN" --data-dir "$RDATA" --config-path "$RCONF" --format json plan execute "$p" >/dev/null 2>&1 &
    pid=$!
    sleep "0.$(printf '%03d' $((50 + RANDOM % 550)))"
    if kill -0 "$pid" 2>/dev/null; then
      kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; kills=$((kills + 1))
      integrity || true
    else
      wait "$pid" 2>/dev/null
      at_gate "$p" && break
    fi
  done
  for _ in 1 2 3; do at_gate "$p" && break; r plan execute "$p" >/dev/null 2>&1; done
  at_gate "$p" || { fail "resume plan $i: not at the apply gate after $kills kills: $(r plan status "$p" | jq -c '[.data.phase, .data.state, .data.errors]')"; continue; }
  read -r made wire _ <<< "$(calls_since "$r0")"
  tools=$(tool_runs "$p")
  read -r journaled answered_again retried <<< "$(model_journal "$p")"
  RES_PLANS=$((RES_PLANS + 1)) RES_KILLS=$((RES_KILLS + kills))
  RES_REMADE=$((RES_REMADE + made - RES_U)) RES_RERUN=$((RES_RERUN + tools - REF_TOOLS))
  RES_WIRE=$((RES_WIRE + wire)) RES_RETRIES=$((RES_RETRIES + retried))
  [ "$retried" -le "$kills" ] || fail "resume plan $i: $retried calls remade as in flight after $kills kills"
  # Re-bought: a journaled call made again after its answer was recorded, and any request the
  # journals do not hold (a step run again from its start).
  unjournaled=$((made - journaled)); [ "$unjournaled" -gt 0 ] || unjournaled=0
  RES_REBOUGHT=$((RES_REBOUGHT + answered_again + unjournaled)) RES_REPEATED=$((RES_REPEATED + $(tool_repeats "$p")))
  if [ "$(tree_of "$p")" = "$REF_TREE" ]; then RES_SAME=$((RES_SAME + 1)); else
    fail "resume plan $i ($p, $kills kills): the final files differ from the uninterrupted run's"
  fi
done
kill "$MODEL_PID" 2>/dev/null; wait "$MODEL_PID" 2>/dev/null
[ "$RES_REBOUGHT" = 0 ] || fail "resume: $RES_REBOUGHT model calls bought again beyond the one in flight"
[ "$RES_REPEATED" = 0 ] || fail "resume: $RES_REPEATED tool calls run again beyond the one in flight"
echo "resume plans=$RES_PLANS kills=$RES_KILLS same-tree=$RES_SAME/$RES_N rebought-beyond-in-flight=$RES_REBOUGHT repeated-beyond-in-flight=$RES_REPEATED" >&2
fi

echo
echo "Reliability summary"
echo "  crash        runs=$RUNS kills=$KILLS killed-before-creation=$EARLY recovered=$RECOVERED applied=$APPLIED integrity=$INTEGRITY"
echo "  concurrency  workers=$WORKERS seconds=$SECONDS_CONC commands=$COMMANDS conflicts=$CONFLICTS unexpected=$UNEXPECTED projects=$made_projects/$have_projects plans=$((plans_before + made_plans))/$have_plans integrity=$INTEGRITY2"
echo "  limits       1GB-output peak=${PEAK_OUT}KiB  200MB-file peak=${PEAK_BIG}KiB(use)/${PEAK_BIG_APPLY:-}KiB(apply)  integrity=$INTEGRITY3"
echo "  escapes      escapes tried=$ESC_TRIED held=$ESC_HELD"
echo "  apply-kill   runs=$KILL_RUNS exact=$KILL_EXACT"
echo "  resume       plans=$RES_PLANS kills=$RES_KILLS same-tree=$RES_SAME/$RES_N rebought-beyond-in-flight=$RES_REBOUGHT repeated-beyond-in-flight=$RES_REPEATED (uninterrupted execute: $RES_U model calls; in all: $RES_REMADE model calls made again, $RES_RETRIES resumes with a model call in flight, $RES_WIRE calls made again whose reply the model server had finished sending; $RES_RERUN tool calls started again)"
echo "  failures     $FAILURES"
[ "$FAILURES" = 0 ]
