#!/usr/bin/env python3
"""Load on several server instances sharing one PostgreSQL database (spec section 21).

Run through scripts/server-load.sh, which builds the binary. Starts a throwaway PostgreSQL
cluster, two `agents server start` instances on it (each with a data directory of its own and
`lease-expiry-secs = 5`), registers a repository and one project per plan, opens the SSE
followers (half on each instance; a follower whose instance dies reconnects to the other with
the last seq it saw), then starts every plan at once (an offline action: the checklist
strategist and the script executor), alternating instances. Unless --no-kill, one instance is
killed with SIGKILL at a random moment while plans run; its plans must be taken over by the
other. Prints, in one run:

  plans            started, at their apply gate, errored (goal: all at the gate, 0 errored)
  client errors    calls that failed for another reason than the killed instance (goal 0)
  followers        events lost and duplicated per follower (goal 0 and 0)
  latency          p50 and p95 from an event's commit to its arrival at a follower, over the
                   events committed once the follower was attached (goal p95 < 500 ms)
  takeover         plans of the killed instance that reached their gate (goal 100 %)
"""

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path

ACTION = """name: local/load
definition-of-done: LOAD.md exists
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
script:
  - name: write
    run: printf 'load\\n' > LOAD.md && sleep 1
  - name: more
    run: printf 'more\\n' >> LOAD.md
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin():
    root = Path("/usr/lib/postgresql")
    found = sorted(p / "bin" for p in root.iterdir()) if root.exists() else []
    found = [p for p in found if (p / "initdb").exists()]
    if not found:
        sys.exit("PostgreSQL is not installed (apt-get install postgresql; .ci/run installs it)")
    return found[-1]


class Cluster:
    """A throwaway PostgreSQL cluster in a temp directory, stopped on exit."""

    def __init__(self, work):
        self.bin = pg_bin()
        self.dir = work / "pg"
        self.dir.mkdir()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            subprocess.run(["chown", "-R", "postgres:postgres", str(self.dir)], check=True)
            os.chmod(work, 0o755)
        self.port = free_port()
        self.run([self.bin / "initdb", "-A", "trust", "-U", "agents", "-E", "UTF8",
                  "--locale=C", "--no-sync", "-D", self.dir / "data"])
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c max_connections=400")
        self.run([self.bin / "pg_ctl", "-D", self.dir / "data", "-o", opts, "-l",
                  self.dir / "log", "-w", "-t", "60", "start"])
        subprocess.run([self.bin / "createdb", "-h", "127.0.0.1", "-p", str(self.port),
                        "-U", "agents", "load"], check=True)
        self.url = f"postgres://agents@127.0.0.1:{self.port}/load"

    def run(self, cmd):
        cmd = [str(c) for c in cmd]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    def stop(self):
        try:
            self.run([self.bin / "pg_ctl", "-D", self.dir / "data", "-m", "immediate", "stop"])
        except subprocess.CalledProcessError:
            pass


class Instance:
    """`agents server start` on a data directory of its own, on the shared database."""

    def __init__(self, agents, work, name, database):
        self.home = work / name
        (self.home / "config").mkdir(parents=True)
        self.config = self.home / "config" / "config.toml"
        self.config.write_text("lease-expiry-secs = 5\n")
        self.base = [agents, "--data-dir", str(self.home / "data"), "--config-path",
                     str(self.config)]
        self.env = dict(os.environ, AGENTS_DATABASE_URL=database, HOME=str(self.home))
        for var in ("AGENTS_SERVER", "AGENTS_TOKEN", "AGENTS_DATA_DIR", "AGENTS_CONFIG"):
            self.env.pop(var, None)
        self.log = open(self.home / "server.log", "w")
        self.proc = subprocess.Popen(self.base + ["server", "start", "--listen", "127.0.0.1:0"],
                                     env=self.env, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True)
        line = self.proc.stdout.readline()
        self.url = next((w for w in line.split() if w.startswith("http://")), None)
        if not self.url:
            sys.exit(f"{name} did not start: {line!r} (log: {self.home / 'server.log'})")
        self.alive = True

    def kill(self):
        self.proc.kill()
        self.proc.wait()
        self.alive = False


class Client:
    """The CLI through a server, from a data directory of its own."""

    def __init__(self, agents, work, token):
        self.home = work / "client"
        self.home.mkdir()
        self.base = [agents, "--data-dir", str(self.home / "data"), "--config-path",
                     str(self.home / "config.toml"), "--format", "json"]
        self.env = dict(os.environ, AGENTS_TOKEN=token, HOME=str(self.home))
        for var in ("AGENTS_SERVER", "AGENTS_DATA_DIR", "AGENTS_CONFIG", "AGENTS_DATABASE_URL"):
            self.env.pop(var, None)

    def call(self, url, *args):
        p = subprocess.run(self.base + ["--server", url] + list(args), env=self.env,
                           capture_output=True, text=True)
        try:
            doc = json.loads(p.stdout)
        except json.JSONDecodeError:
            doc = {"error": {"message": p.stderr.strip() or p.stdout.strip()}}
        return p.returncode, doc


class Follower(threading.Thread):
    """An SSE follower of every plan's events; reconnects to the other instance after a
    failure, from the last seq it saw."""

    def __init__(self, urls, token, first):
        super().__init__(daemon=True)
        self.urls, self.token, self.at = urls, token, first
        self.seen, self.arrivals, self.stop = [], [], False
        self.slowest = []
        # When the first stream opened: events committed before it are history, replayed at
        # once, and say nothing of how fast a live event arrives.
        self.attached = None
        self.reconnects = 0

    def run(self):
        while not self.stop:
            url = self.urls[self.at]
            after = self.seen[-1] if self.seen else 0
            req = urllib.request.Request(f"{url}/v1/events?after={after}",
                                         headers={"Authorization": f"Bearer {self.token}"})
            try:
                with urllib.request.urlopen(req, timeout=30) as stream:
                    if self.attached is None:
                        self.attached = time.time()
                    data = None
                    for raw in stream:
                        if self.stop:
                            return
                        line = raw.decode().rstrip("\n")
                        if line.startswith("data:"):
                            data = line[5:].strip()
                        elif line == "" and data:
                            self.record(json.loads(data))
                            data = None
            except Exception:
                pass
            if self.stop:
                return
            # The stream ended or failed: the other instance, from the last seq.
            self.reconnects += 1
            self.at = 1 - self.at
            time.sleep(0.2)

    def record(self, event):
        now = time.time()
        self.seen.append(event["seq"])
        committed = datetime.fromisoformat(event["ts"].replace("Z", "+00:00")[:26] + "+00:00")
        if self.attached is None or committed.timestamp() < self.attached:
            return
        self.arrivals.append(now - committed.timestamp())
        self.slowest.append((now - committed.timestamp(), now, event["type"], event["seq"]))


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("agents")
    ap.add_argument("--plans", type=int, default=100)
    ap.add_argument("--followers", type=int, default=20)
    ap.add_argument("--no-kill", action="store_true")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--timeout", type=int, default=900, help="seconds for every plan to settle")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (the instances' logs and data) and say where")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = Path(tempfile.mkdtemp(prefix="agents-load-"))
    cluster = Cluster(work)
    instances = []
    try:
        return run(a, rng, work, cluster, instances)
    finally:
        for i in instances:
            if i.alive:
                i.proc.terminate()
                try:
                    i.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    i.kill()
        cluster.stop()
        if a.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(a, rng, work, cluster, instances):
    token = subprocess.run(
        [a.agents, "--data-dir", str(work / "tokens"), "--format", "plain", "server", "token",
         "create", "load"], env=dict(os.environ, AGENTS_DATABASE_URL=cluster.url),
        capture_output=True, text=True, check=True).stdout.strip()
    instances += [Instance(a.agents, work, n, cluster.url) for n in ("a", "b")]
    urls = [i.url for i in instances]
    client = Client(a.agents, work, token)
    repo = work / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README.md").write_text("load\n")
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=load", "-c",
                    "user.email=load@localhost", "commit", "-qm", "base"], check=True)
    (work / "load.yaml").write_text(ACTION)
    setup = [["resource", "add", "git-checkout", "local/repo", "--path", str(repo)],
             ["action", "create", "--available", "--config", str(work / "load.yaml")]]
    for n in range(a.plans):
        setup += [["project", "create", f"p{n:03}"],
                  ["project", "link-resource", f"p{n:03}", "local/repo"]]
    for args in setup:
        code, doc = client.call(urls[0], *args)
        if code != 0:
            sys.exit(f"setup failed: {args}: {doc}")

    followers = [Follower(urls, token, n % 2) for n in range(a.followers)]
    for f in followers:
        f.start()
    time.sleep(1)

    outcome = {}
    client_errors = []
    lock = threading.Lock()

    def start(n):
        project = f"p{n:03}"
        url = urls[n % 2]
        code, doc = client.call(url, "plan", "use", "local/load", project,
                                "--automation-profile", "trusted")
        with lock:
            outcome[project] = (n % 2, code, doc)

    killed = None
    threads = [threading.Thread(target=start, args=(n,)) for n in range(a.plans)]
    started_at = time.time()
    for t in threads:
        t.start()
    if not a.no_kill:
        time.sleep(rng.uniform(3.0, 12.0))
        killed = rng.randrange(2)
        instances[killed].kill()
        print(f"killed instance {'ab'[killed]} after {time.time() - started_at:.1f} s", flush=True)
    for t in threads:
        t.join()
    survivor = urls[1 - killed] if killed is not None else urls[0]

    # A plan use that failed before its plan existed is started again on the survivor.
    plans = plans_by_project(client, survivor)
    for project, (at, code, doc) in sorted(outcome.items()):
        if project in plans:
            continue
        if killed is not None and at == killed:
            code, doc = client.call(survivor, "plan", "use", "local/load", project,
                                    "--automation-profile", "trusted")
            outcome[project] = (1 - killed, code, doc)
        if code not in (0, 3):
            client_errors.append((project, doc.get("error", {}).get("message", doc)))
    plans = plans_by_project(client, survivor)
    for project, (at, code, doc) in sorted(outcome.items()):
        if code not in (0, 3) and not (killed is not None and at == killed) \
                and (project, doc.get("error", {}).get("message", doc)) not in client_errors:
            client_errors.append((project, doc.get("error", {}).get("message", doc)))

    deadline = time.time() + a.timeout
    while time.time() < deadline:
        rows = plan_rows(client, survivor)
        if rows and all(settled(r) for r in rows) and len(rows) >= len(plans):
            break
        time.sleep(1)
    rows = plan_rows(client, survivor)
    settled_at = time.time() - started_at
    time.sleep(1)
    for f in followers:
        f.stop = True

    at_gate = [r for r in rows if at_apply_gate(r)]
    errored = [r for r in rows if r.get("state") == "errored"]
    of_killed = [p for p, (at, _, _) in outcome.items() if killed is not None and at == killed]
    of_killed_ids = {plans.get(p) for p in of_killed} - {None}
    killed_at_gate = [r for r in at_gate if r["plan_id"] in of_killed_ids]

    stored = stored_seqs(cluster)
    lost = [len(set(stored) - set(f.seen)) for f in followers]
    duplicated = [len(f.seen) - len(set(f.seen)) for f in followers]
    arrivals = [x for f in followers for x in f.arrivals]
    p50, p95 = percentile(arrivals, 50) * 1000, percentile(arrivals, 95) * 1000
    if a.keep:
        worst = sorted((x for f in followers for x in f.slowest), reverse=True)[:15]
        for late, at, kind, seq in worst:
            print(f"late {late * 1000:.0f} ms: seq {seq} {kind} at {at - started_at:.1f} s",
                  file=sys.stderr)

    ok = True

    def row(name, value, goal, passed):
        nonlocal ok
        ok &= passed
        print(f"| {name} | {value} | {goal} | {'PASS' if passed else 'MISS'} |")

    print(f"\n{a.plans} plans on 2 instances, {a.followers} followers, settled in "
          f"{settled_at:.1f} s; load {os.getloadavg()[0]:.1f}")
    print("| measure | ours | goal | |\n|---|---|---|---|")
    row("plans at their apply gate", f"{len(at_gate)} of {a.plans} ({len(errored)} errored)",
        f"{a.plans}, 0 errored", len(at_gate) == a.plans and not errored)
    row("client errors (other than the killed instance's calls)", len(client_errors), "0",
        not client_errors)
    row("events lost per follower (max)", max(lost, default=0), "0", max(lost, default=0) == 0)
    row("events duplicated per follower (max)", max(duplicated, default=0), "0",
        max(duplicated, default=0) == 0)
    row("commit to follower, p50 / p95", f"{p50:.0f} ms / {p95:.0f} ms", "p95 < 500 ms",
        p95 < 500)
    if killed is not None:
        share = 100.0 * len(killed_at_gate) / max(1, len(of_killed_ids))
        row("plans of the killed instance at their gate",
            f"{len(killed_at_gate)} of {len(of_killed_ids)} ({share:.0f} %)", "100 %",
            len(killed_at_gate) == len(of_killed_ids))
    print(f"events stored: {len(stored)}; follower reconnects: "
          f"{sum(f.reconnects for f in followers)}")
    for project, message in client_errors[:10]:
        print(f"  client error, {project}: {message}")
    return 0 if ok else 1


def plan_rows(client, url):
    code, doc = client.call(url, "plan", "list")
    if code != 0:
        print(f"plan list failed: {doc}", file=sys.stderr)
    return doc.get("data", {}).get("plans", []) if code == 0 else []


def plans_by_project(client, url):
    # Projects are listed by qualified name (`local/p000`).
    return {p.split("/")[-1]: r["plan_id"] for r in plan_rows(client, url)
            for p in r.get("projects", [])}


def settled(row):
    return row.get("state") in ("complete", "errored", "cancelled") or at_apply_gate(row)


def at_apply_gate(row):
    return row.get("phase") in ("execute", "apply") and row.get("state") == "complete" \
        or row.get("phase") == "apply" and row.get("state") == "queued"


def stored_seqs(cluster):
    out = subprocess.run([str(cluster.bin / "psql"), "-h", "127.0.0.1", "-p", str(cluster.port),
                          "-U", "agents", "-At", "-c", "SELECT seq FROM events ORDER BY seq",
                          "load"], capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.split()]


if __name__ == "__main__":
    sys.exit(main())
