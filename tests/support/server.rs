//! A real `agents server start` on a free loopback port, with its own data directory and a
//! token, killed on drop; and a few raw HTTP requests to it (std only, so a test sees exactly
//! what went over the wire).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::Env;

/// A running server.
pub struct Server {
    /// The server host's environment (its data directory holds the database).
    pub env: Env,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// A token the server accepts.
    pub token: String,
    child: Child,
}

/// The user every test server's tokens sign in as: the first token of a server makes it
/// the server's administrator.
pub const SERVER_ADMIN: &str = "tests";

/// Creates a token named `token_name` for [`SERVER_ADMIN`] on `env`'s data directory and starts `agents server
/// start START_ARGS` there: the URL of its first line, the token and the process.
pub fn spawn(env: &Env, token_name: &str, start_args: &[&str]) -> (String, String, Child) {
    spawn_on(env, server_database(env), token_name, start_args)
}

/// [`spawn`] with the server's records in `database` (a PostgreSQL URL) when given.
pub fn spawn_on(
    env: &Env,
    database: Option<String>,
    token_name: &str,
    start_args: &[&str],
) -> (String, String, Child) {
    let with_database = |mut cmd: Command| {
        if let Some(url) = &database {
            cmd.env("AGENTS_DATABASE_URL", url);
        }
        cmd
    };
    let out = with_database(env.local_command(&[
        "--format",
        "plain",
        "server",
        "token",
        "create",
        "--user",
        SERVER_ADMIN,
        token_name,
    ]))
    .output()
    .expect("the binary runs");
    assert!(out.status.success(), "token create: {out:?}");
    let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
    // The scripted test provider's key, which every test gives the commands that call it
    // (`sk-test`): through a server those run there, where the client's environment is not.
    let mut child = with_database(env.local_command(&[&["server", "start"], start_args].concat()))
        // The server makes the model calls with its own keys: the scripted provider's.
        .env("SCRIPTED_API_KEY", "sk-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://") || w.starts_with("https://"))
        .unwrap_or_else(|| panic!("no URL in the server's first line: {line:?}"))
        .to_string();
    (url, token, child)
}

/// The PostgreSQL databases of the environments whose servers keep their records there.
static DATABASES: std::sync::Mutex<Vec<(std::path::PathBuf, String)>> =
    std::sync::Mutex::new(Vec::new());

/// The database `env`'s server keeps its records in, if it was given one.
pub fn known_database(env: &Env) -> Option<String> {
    database_in(&DATABASES.lock().unwrap(), env)
}

fn database_in(known: &[(std::path::PathBuf, String)], env: &Env) -> Option<String> {
    known
        .iter()
        .find(|(root, _)| root == env.root())
        .map(|(_, url)| url.clone())
}

/// Whether servers keep their records in PostgreSQL (`AGENTS_TEST_SERVER_DATABASE=postgres`)
/// rather than in their data directory's SQLite file.
pub fn on_postgres() -> bool {
    std::env::var("AGENTS_TEST_SERVER_DATABASE").is_ok_and(|v| v == "postgres")
}

/// The PostgreSQL database of `env`'s server when [`on_postgres`]: a fresh one per
/// environment, the same across the server's restarts.
pub fn server_database(env: &Env) -> Option<String> {
    if !on_postgres() {
        return None;
    }
    let mut known = DATABASES.lock().unwrap();
    if let Some(url) = database_in(&known, env) {
        return Some(url);
    }
    let url = super::postgres::fresh_database();
    known.push((env.root().to_path_buf(), url.clone()));
    Some(url)
}

impl Server {
    /// Starts a server on `env`'s data directory after creating a token named `tests`.
    pub fn start(env: Env) -> Self {
        Self::start_with(env, &["--listen", "127.0.0.1:0"])
    }

    /// A server on `env`'s data directory keeping its records in the PostgreSQL `database`.
    /// Each instance takes a token of its own name: instances may share the database.
    pub fn start_on_postgres(env: Env, database: &str) -> Self {
        DATABASES
            .lock()
            .unwrap()
            .push((env.root().to_path_buf(), database.to_string()));
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (url, token, child) = spawn_on(
            &env,
            Some(database.to_string()),
            &format!("instance-{n}"),
            &["--listen", "127.0.0.1:0"],
        );
        Self {
            env,
            url,
            token,
            child,
        }
    }

    /// [`Server::start`] with these `server start` arguments.
    pub fn start_with(env: Env, start_args: &[&str]) -> Self {
        let (url, token, child) = spawn(&env, "tests", start_args);
        Self {
            env,
            url,
            token,
            child,
        }
    }

    /// The binary as a client of this server: `client`'s data directory and config,
    /// `--server URL`, and the token in `AGENTS_TOKEN`.
    pub fn client(&self, client: &Env, args: &[&str]) -> Command {
        let mut all = vec!["--server", self.url.as_str()];
        all.extend_from_slice(args);
        let mut cmd = client.local_command(&all);
        cmd.env("AGENTS_TOKEN", &self.token);
        cmd
    }

    /// Runs a client command with `--format json`; the parsed stdout and the exit code.
    pub fn client_json(&self, client: &Env, args: &[&str]) -> (serde_json::Value, i32) {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        let out = self.client(client, &all).output().expect("the client runs");
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (doc, out.status.code().expect("exit code"))
    }

    /// The organization `org` with `members` (role, user), the first owner founding it, made
    /// by the server's administrator from `admin`: a token of each member, in order.
    pub fn organization(&self, admin: &Env, org: &str, members: &[(&str, &str)]) -> Vec<String> {
        let ok = |args: &[&str]| {
            let (doc, code) = self.client_json(admin, args);
            assert_eq!(code, 0, "{args:?}: {doc:#}");
            doc
        };
        for (_, user) in members {
            ok(&["server", "user", "add", user]);
        }
        let founder = members.iter().find(|(r, _)| *r == "owner").unwrap().1;
        ok(&["server", "org", "add", org, "--owner", founder]);
        for (role, user) in members.iter().filter(|(_, u)| *u != founder) {
            ok(&["server", "org", "member", "add", org, user, "--role", role]);
        }
        members
            .iter()
            .map(|(_, user)| {
                ok(&["server", "token", "create", "--user", user])["data"]["token"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    /// Opens `GET /v1/events{query}` and reads up to its status line and headers; the open
    /// stream, which the server keeps serving until it is dropped.
    pub fn open_event_stream(&self, query: &str) -> BufReader<TcpStream> {
        let host = self.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(host).expect("the server accepts connections");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "GET /v1/events{query} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.token
        )
        .unwrap();
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(
            status.contains(" 200 "),
            "the event stream opens: {status:?}"
        );
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
            line.clear();
        }
        reader
    }

    /// One HTTP/1.1 request: the status code and the body.
    pub fn http(&self, method: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String) {
        let host = self.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(host).expect("the server accepts connections");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let status = answer
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {answer:?}"));
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }
}

impl Server {
    /// Sends SIGTERM and waits up to `within` for the server to exit; its exit status, or
    /// `None` when it is still running then.
    pub fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Server {
    /// Kills the server with SIGKILL (no chance to answer anyone) and waits for it.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same data directory (and database) after it stopped or
    /// was killed; it listens on a new port.
    pub fn start_again(&mut self) {
        let database = known_database(&self.env);
        let (url, token, child) =
            spawn_on(&self.env, database, "again", &["--listen", "127.0.0.1:0"]);
        (self.url, self.token, self.child) = (url, token, child);
    }

    /// Sends a raw HTTP/1.1 request `head` (request line and headers, without the blank line
    /// that ends them) and `body`, even when the server answers before it has read it all:
    /// the status code and the body of the answer.
    pub fn raw(&self, head: &str, body: &[u8]) -> (u16, String) {
        let host = self.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(host).expect("the server accepts connections");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut request =
            format!("{head}\r\nHost: {host}\r\nConnection: close\r\n\r\n").into_bytes();
        request.extend_from_slice(body);
        // The server may answer and close before it read the whole body.
        let _ = stream.write_all(&request);
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer).into_owned();
        let status = answer
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {answer:?}"));
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server whose data directory holds one quickstart plan waiting at its apply gate; the
/// plan's id.
pub fn server_with_a_plan() -> (Server, String) {
    let env = Env::new();
    let (doc, code) = env.json(&["quickstart", "--headless"]);
    assert_eq!(code, 3, "{doc:#}");
    let plan = doc["data"]["plan_id"]
        .as_str()
        .or_else(|| doc["data"]["plan"]["plan_id"].as_str())
        .unwrap_or_else(|| panic!("no plan id: {doc:#}"))
        .to_string();
    (Server::start(env), plan)
}

/// `data` with what differs between two environments masked: suggested commands repeat
/// their own global options.
pub fn masked(mut data: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::String(s) if s.starts_with("agents ") => {
                if let Some(i) = s.find(" plan ") {
                    *s = format!("agents{}", &s[i..]);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            Value::Object(o) => o.values_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut data);
    data
}

/// `text` without the global options a suggested command repeats (`--server X`, `--data-dir
/// X`, `--config-path X`), wherever the command is quoted in it.
pub fn without_globals(text: &str) -> String {
    let mut s = text.to_string();
    for option in [" --server ", " --data-dir ", " --config-path "] {
        while let Some(i) = s.find(option) {
            let rest = &s[i + option.len()..];
            let after = rest.split_once(' ').map_or("", |(_, r)| r);
            s = format!("{} {after}", &s[..i]);
        }
    }
    s
}

/// An OIDC issuer for tests: an ES256 key made for the test, its JWKS written to a file, and
/// the JWTs it signs.
pub struct TestIssuer {
    /// The issuer (`iss`).
    pub issuer: String,
    /// The audience the server is configured with.
    pub audience: String,
    /// The JWKS file.
    pub jwks: std::path::PathBuf,
    kid: String,
    pkcs8: Vec<u8>,
}

fn base64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl TestIssuer {
    /// A new key for `issuer` and `audience`, its JWKS written under `dir` (key id `kid`).
    pub fn new(dir: &std::path::Path, issuer: &str, audience: &str, kid: &str) -> Self {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap()
            .as_ref()
            .to_vec();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8).unwrap();
        // An uncompressed point: 0x04, then x and y (32 bytes each).
        let point = pair.public_key().as_ref();
        assert_eq!(point.len(), 65);
        let jwks = serde_json::json!({"keys": [{
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
            "x": base64url(&point[1..33]), "y": base64url(&point[33..]),
        }]});
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("jwks-{kid}-{}.json", std::process::id()));
        std::fs::write(&path, jwks.to_string()).unwrap();
        Self {
            issuer: issuer.to_string(),
            audience: audience.to_string(),
            jwks: path,
            kid: kid.to_string(),
            pkcs8,
        }
    }

    /// The `[[server.oidc]]` table that trusts this issuer.
    pub fn config(&self) -> String {
        format!(
            "[[server.oidc]]\nissuer = \"{}\"\naudience = \"{}\"\njwks-file = \"{}\"\n",
            self.issuer,
            self.audience,
            self.jwks.display()
        )
    }

    /// A JWT signed by this issuer's key: `iss`, `aud` = the configured audience, `sub` =
    /// `user`, valid from a minute ago for `lifetime_secs` (negative: expired that long ago),
    /// with `extra` claims laid over them.
    pub fn jwt(&self, user: &str, lifetime_secs: i64, extra: serde_json::Value) -> String {
        let now = jiff::Timestamp::now().as_second();
        let mut claims = serde_json::json!({
            "iss": self.issuer, "aud": self.audience, "sub": user,
            "iat": now - 60, "nbf": now - 60, "exp": now + lifetime_secs,
        });
        for (k, v) in extra.as_object().into_iter().flatten() {
            claims[k] = v.clone();
        }
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_ec_der(&self.pkcs8),
        )
        .unwrap()
    }

    /// The same claims as [`TestIssuer::jwt`] with no signature at all (`alg: none`).
    pub fn unsigned_jwt(&self, user: &str) -> String {
        let signed = self.jwt(user, 600, serde_json::json!({}));
        let claims = signed.split('.').nth(1).unwrap().to_string();
        let header = base64url(br#"{"alg":"none","typ":"JWT"}"#);
        format!("{header}.{claims}.")
    }
}
