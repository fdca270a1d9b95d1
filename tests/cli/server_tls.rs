//! `agents server start --tls-cert --tls-key` (spec section 21): the protocol over TLS
//! (rustls), tried with a throwaway certificate authority made by the openssl command.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::Env;
use crate::support::server::Server;

/// A certificate authority and a certificate it signed for `127.0.0.1`, in `dir`: the
/// authority's PEM, the server's chain and its key.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("the openssl command is installed (.ci/run installs it)");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"],
        &ec[..],
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "1",
            "-subj",
            "/CN=test authority",
        ],
    ]
    .concat());
    run(&[
        &["req"],
        &ec[..],
        &[
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    ]
    .concat());
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "1",
        "-extfile",
        "san.ext",
    ]);
    (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    )
}

fn tls_server(certs: &(PathBuf, PathBuf, PathBuf), listen: &str) -> Server {
    let (_, cert, key) = certs;
    Server::start_with(
        Env::new(),
        &[
            "--listen",
            listen,
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    )
}

#[test]
fn a_tls_server_answers_a_client_that_trusts_its_authority_and_only_such_a_client() {
    let keys = tempfile::tempdir().unwrap();
    let certs = certificates(keys.path());
    let server = tls_server(&certs, "127.0.0.1:0");
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    let client = Env::new();

    let trusting = |args: &[&str]| {
        let mut cmd = server.client(&client, &[&["--format", "json"], args].concat());
        cmd.env("AGENTS_CA_CERT", &certs.0);
        let out = cmd.output().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (doc, out.status.code().unwrap())
    };
    let (doc, code) = trusting(&["server", "status"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["server"]["protocol"], "v1", "{doc:#}");
    let (doc, code) = trusting(&["plan", "list"]);
    assert_eq!(code, 0, "{doc:#}");

    // Without the authority the certificate is not trusted: an I/O error naming the URL.
    let (doc, code) = server.client_json(&client, &["plan", "list"]);
    assert_ne!(code, 0, "{doc:#}");
    assert_eq!(doc["error"]["code"], "IO_ERROR", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&server.url),
        "{doc:#}"
    );
    assert!(!client.data_dir.join("cleveragents.db").exists());
}

#[test]
fn tls_makes_a_non_loopback_address_acceptable() {
    let keys = tempfile::tempdir().unwrap();
    let certs = certificates(keys.path());
    let server = tls_server(&certs, "0.0.0.0:0");
    assert!(server.url.starts_with("https://0.0.0.0:"), "{}", server.url);
}

#[test]
fn unreadable_tls_files_are_refused_naming_both() {
    let env = Env::new();
    let missing = env.root().join("missing.pem");
    let missing = missing.to_str().unwrap();
    let (doc, code) = env.json(&[
        "server",
        "start",
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        missing,
        "--tls-key",
        missing,
    ]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--tls-cert"),
        "{doc:#}"
    );
}

/// A self-signed certificate for `127.0.0.1` made the usual way (OpenSSL 3 marks it
/// `CA:TRUE`), in `dir`: the certificate and its key.
fn self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ])
        .output()
        .expect("the openssl command is installed (.ci/run installs it)");
    assert!(out.status.success(), "openssl: {out:?}");
    (cert, key)
}

#[test]
fn a_self_signed_certificate_given_to_the_client_is_trusted_as_the_servers_own() {
    let keys = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed(keys.path(), "server");
    let (other, _) = self_signed(keys.path(), "other");
    let server = Server::start_with(
        Env::new(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let client = Env::new();
    let with_cert = |pem: &Path, args: &[&str]| {
        let mut cmd = server.client(&client, &[&["--format", "json"], args].concat());
        cmd.env("AGENTS_CA_CERT", pem);
        let out = cmd.output().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (doc, out.status.code().unwrap())
    };
    let (doc, code) = with_cert(&cert, &["server", "status"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = with_cert(&cert, &["plan", "list"]);
    assert_eq!(code, 0, "{doc:#}");

    // `server login --ca-cert` keeps it, and the name works afterwards.
    let mut login = client
        .command(&[
            "server",
            "login",
            "tls",
            &server.url,
            "--token-stdin",
            "--ca-cert",
            cert.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        writeln!(login.stdin.take().unwrap(), "{}", server.token).unwrap();
    }
    let out = login.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let (doc, code) = client.json(&["--server", "tls", "server", "status"]);
    assert_eq!(code, 0, "{doc:#}");

    // Another self-signed certificate is no authority for this one: refused, with a hint
    // about the certificate.
    let (doc, code) = with_cert(&other, &["plan", "list"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "IO_ERROR", "{doc:#}");
    let hints = doc["error"]["suggestions"].to_string();
    assert!(hints.contains("AGENTS_CA_CERT"), "{doc:#}");
    assert!(!hints.contains("server start"), "{doc:#}");
}

#[test]
fn over_tls_the_web_pages_session_cookie_is_secure() {
    let keys = tempfile::tempdir().unwrap();
    let certs = certificates(keys.path());
    let server = tls_server(&certs, "127.0.0.1:0");
    let host = server.url.trim_start_matches("https://").to_string();
    let body = format!("token={}", server.token);
    let request = format!(
        "POST /login HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut child = Command::new("openssl")
        .args([
            "s_client", "-quiet", "-ign_eof", "-connect", &host, "-CAfile",
        ])
        .arg(&certs.0)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the openssl command is installed (.ci/run installs it)");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), request.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let answer = String::from_utf8_lossy(&out.stdout);
    let cookie = answer
        .lines()
        .find(|l| {
            l.to_ascii_lowercase()
                .starts_with("set-cookie: agents_session=")
        })
        .unwrap_or_else(|| panic!("no session cookie: {answer}"));
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Secure"] {
        assert!(cookie.contains(attribute), "{attribute}: {cookie}");
    }
}
