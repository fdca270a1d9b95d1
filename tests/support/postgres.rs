//! A throwaway PostgreSQL cluster for the tests of a server that keeps its records there (spec
//! section 21), started once per test process from Debian's packages: `initdb` into a temp
//! directory (as the `postgres` user when the tests run as root), `pg_ctl start` on a free
//! loopback port, and a fresh database per caller. A watchdog stops the cluster and removes
//! its directory when the test process exits.
//!
//! `AGENTS_TEST_POSTGRES_URL=postgres://USER@HOST:PORT/DB` uses a running server instead (its
//! user must be allowed to create databases). Without either the tests fail saying how to get
//! one: they never skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The cluster's superuser.
const USER: &str = "agents";

struct Cluster {
    host: String,
    port: u16,
    user: String,
    bin: PathBuf,
}

/// The URL of a new, empty database on the test cluster.
pub fn fresh_database() -> String {
    let cluster = cluster();
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "t_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let out = Command::new(cluster.bin.join("createdb"))
        .args(["-h", &cluster.host, "-p", &cluster.port.to_string()])
        .args(["-U", &cluster.user, &name])
        .output()
        .expect("createdb runs");
    assert!(
        out.status.success(),
        "createdb {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    format!(
        "postgres://{}@{}:{}/{name}",
        cluster.user, cluster.host, cluster.port
    )
}

/// Every row of `url`'s database but the server tokens, as `pg_dump` writes them.
pub fn rows(url: &str) -> Vec<u8> {
    let out = Command::new(cluster().bin.join("pg_dump"))
        .args(["--data-only", "--no-owner", "--exclude-table=server_tokens"])
        .arg(url)
        .output()
        .expect("pg_dump runs");
    assert!(
        out.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `\restrict KEY` lines carry a random key per dump.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("\\restrict") && !l.starts_with("\\unrestrict"))
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes()
}

fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match std::env::var("AGENTS_TEST_POSTGRES_URL") {
        Ok(url) => existing(&url),
        Err(_) => start(),
    })
}

/// The cluster `url` names (only its host, port and user are used).
fn existing(url: &str) -> Cluster {
    let rest = url
        .split_once("://")
        .map_or(url, |(_, r)| r)
        .split('/')
        .next()
        .unwrap_or_default();
    let (user, host_port) = rest.rsplit_once('@').unwrap_or((USER, rest));
    let user = user.split(':').next().unwrap_or(USER);
    let (host, port) = host_port.rsplit_once(':').unwrap_or((host_port, "5432"));
    Cluster {
        host: host.to_string(),
        port: port
            .parse()
            .expect("AGENTS_TEST_POSTGRES_URL has a numeric port"),
        user: user.to_string(),
        bin: binaries(),
    }
}

/// Where `initdb`, `pg_ctl`, `createdb` and `pg_dump` are.
fn binaries() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.into_iter()
        .rev()
        .find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
        .unwrap_or_else(|| {
            panic!(
                "PostgreSQL is not installed: the tests of a server on PostgreSQL start a \
                 throwaway cluster with initdb and pg_ctl from Debian's packages \
                 (apt-get install postgresql; .ci/run installs it), or use a running server \
                 named by AGENTS_TEST_POSTGRES_URL=postgres://USER@HOST:PORT/postgres"
            )
        })
}

fn start() -> Cluster {
    let bin = binaries();
    let dir = tempfile::Builder::new()
        .prefix("agents-pg-")
        .tempdir()
        .unwrap()
        .keep();
    let as_root = running_as_root();
    if as_root {
        run(Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir));
    }
    let data = dir.join("data");
    run(as_postgres(as_root, &bin.join("initdb"))
        .args([
            "-A",
            "trust",
            "-U",
            USER,
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "-D",
        ])
        .arg(&data));
    let port = free_port();
    let options = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
         -c full_page_writes=off -c max_connections=300",
        dir.display()
    );
    run(as_postgres(as_root, &bin.join("pg_ctl"))
        .args(["-D"])
        .arg(&data)
        .args(["-o", &options, "-l"])
        .arg(dir.join("log"))
        .args(["-w", "-t", "60", "start"]));
    watchdog(as_root, &bin, &dir);
    Cluster {
        host: "127.0.0.1".into(),
        port,
        user: USER.into(),
        bin,
    }
}

/// Stops the cluster and removes its directory once this test process is gone.
// The watchdog outlives this process by design, so nothing here waits for it.
#[allow(clippy::zombie_processes)]
fn watchdog(as_root: bool, bin: &Path, dir: &Path) {
    let script = format!(
        "while [ -d /proc/{pid} ]; do sleep 1; done; \
         {pg_ctl} -D {dir}/data -m immediate stop >/dev/null 2>&1; rm -rf {dir}",
        pid = std::process::id(),
        pg_ctl = bin.join("pg_ctl").display(),
        dir = dir.display()
    );
    let mut cmd = if as_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "setsid", "sh", "-c", &script]);
        c
    } else {
        let mut c = Command::new("setsid");
        c.args(["sh", "-c", &script]);
        c
    };
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the cluster's watchdog starts");
}

fn as_postgres(as_root: bool, program: &Path) -> Command {
    if as_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether the tests run as root (initdb refuses to, so the cluster runs as `postgres`).
fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs one SQL statement on `url`'s database with `psql`; its output.
pub fn sql(url: &str, statement: &str) -> String {
    let out = Command::new(cluster().bin.join("psql"))
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", statement])
        .arg(url)
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql {statement}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
