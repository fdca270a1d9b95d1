//! Who signs in to a server (spec sections 21 and 22): tokens that belong to users and may
//! expire, the users and organizations a server host (or a server administrator through
//! `--server`) manages, and JWTs of configured OIDC issuers. Real server processes.

use serde_json::Value;

use crate::support::Env;
use crate::support::server::{SERVER_ADMIN, Server, TestIssuer};

const HELLO: &str = r#"{"call":"hello"}"#;

/// The status and the error message of a hello call carrying `bearer`.
fn hello(server: &Server, bearer: &str) -> (u16, String) {
    let (status, body) = server.http("POST", "/v1/call", Some(bearer), HELLO);
    let message = serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_default();
    (status, message)
}

fn ok(env: &Env, args: &[&str]) -> Value {
    let (doc, code) = env.json(args);
    assert_eq!(code, 0, "{args:?}: {doc:#}");
    doc
}

#[test]
fn a_revoked_token_gets_401_at_its_next_request_saying_it_is_not_valid() {
    let server = Server::start(Env::new());
    assert_eq!(hello(&server, &server.token).0, 200);
    ok(&server.env, &["server", "token", "revoke", "tests"]);
    let (status, message) = hello(&server, &server.token);
    assert_eq!(status, 401);
    assert!(message.contains("revoked"), "{message}");
    assert!(!message.contains(SERVER_ADMIN), "names the user: {message}");
}

#[test]
fn an_expired_token_gets_401_saying_it_expired() {
    let server = Server::start(Env::new());
    let doc = ok(
        &server.env,
        &[
            "server",
            "token",
            "create",
            "--user",
            SERVER_ADMIN,
            "--expires",
            "3s",
            "brief",
        ],
    );
    let token = doc["data"]["token"].as_str().unwrap().to_string();
    assert!(doc["data"]["expires_at"].is_string(), "{doc:#}");
    assert_eq!(hello(&server, &token).0, 200, "works before it expires");
    std::thread::sleep(std::time::Duration::from_millis(3_500));
    let (status, message) = hello(&server, &token);
    assert_eq!(status, 401, "{message}");
    assert!(message.contains("expired"), "{message}");
    // The list says until when it worked.
    let doc = ok(&server.env, &["server", "token", "list"]);
    let brief = doc["data"]["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "brief")
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(brief["user"], SERVER_ADMIN, "{doc:#}");
    assert!(brief["expires_at"].is_string(), "{doc:#}");
}

#[test]
fn the_first_token_makes_a_server_administrator_and_later_ones_need_an_existing_user() {
    let env = Env::new();
    let doc = ok(
        &env,
        &["server", "token", "create", "--user", "ann", "laptop"],
    );
    assert_eq!(doc["data"]["user_created"], true, "{doc:#}");
    assert_eq!(doc["data"]["user"], "ann");
    assert_eq!(doc["data"]["name"], "laptop");
    let users = ok(&env, &["server", "user", "list"]);
    assert_eq!(users["data"]["users"][0]["name"], "ann", "{users:#}");
    assert_eq!(users["data"]["users"][0]["server_admin"], true, "{users:#}");

    let (doc, code) = env.json(&["server", "token", "create", "--user", "bob"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
    assert!(
        doc.to_string().contains("agents server user add bob"),
        "{doc:#}"
    );
    ok(&env, &["server", "user", "add", "bob"]);
    // Without --user, the name given is the user's.
    let doc = ok(&env, &["server", "token", "create", "bob"]);
    assert_eq!(doc["data"]["user"], "bob", "{doc:#}");
    assert_eq!(doc["data"]["user_created"], false, "{doc:#}");
    let plain = env.run(&["--format", "plain", "server", "token", "list"]);
    let text = String::from_utf8_lossy(&plain.stdout);
    assert!(text.contains("bob") && text.contains("ann"), "{text}");
}

#[test]
fn organizations_and_members_are_managed_on_the_server_host() {
    let env = Env::new();
    ok(&env, &["server", "user", "add", "ann", "--admin"]);
    ok(&env, &["server", "user", "add", "bob"]);
    let doc = ok(&env, &["server", "org", "add", "acme", "--owner", "ann"]);
    assert_eq!(doc["data"]["org"]["members"][0]["role"], "owner", "{doc:#}");
    let doc = ok(
        &env,
        &[
            "server", "org", "member", "add", "acme", "bob", "--role", "viewer",
        ],
    );
    let members = doc["data"]["org"]["members"].to_string();
    assert!(members.contains("\"viewer\""), "{members}");
    let doc = ok(&env, &["server", "org", "show", "acme"]);
    assert_eq!(doc["data"]["org"]["members"].as_array().unwrap().len(), 2);
    let doc = ok(&env, &["server", "org", "list"]);
    assert_eq!(doc["data"]["orgs"][0]["name"], "acme", "{doc:#}");
    // The last owner stays.
    let (doc, code) = env.json(&["server", "org", "member", "remove", "acme", "ann"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CONFLICT", "{doc:#}");
    ok(&env, &["server", "org", "member", "remove", "acme", "bob"]);
    let doc = ok(&env, &["server", "org", "show", "acme"]);
    assert_eq!(doc["data"]["org"]["members"].as_array().unwrap().len(), 1);
    let (doc, code) = env.json(&["server", "org", "add", "bob", "--owner", "ann"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "CONFLICT", "a user's name: {doc:#}");
}

#[test]
fn users_organizations_and_tokens_are_managed_through_the_server() {
    let server = Server::start(Env::new());
    let client = Env::new();
    let (doc, code) = server.client_json(&client, &["server", "user", "add", "dana"]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = server.client_json(
        &client,
        &["server", "org", "add", "acme", "--owner", "dana"],
    );
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = server.client_json(
        &client,
        &[
            "server",
            "token",
            "create",
            "--user",
            "dana",
            "--expires",
            "30d",
        ],
    );
    assert_eq!(code, 0, "{doc:#}");
    let token = doc["data"]["token"].as_str().unwrap().to_string();
    assert_eq!(hello(&server, &token).0, 200);
    // The server's own records hold them; the client's data directory is not touched.
    let doc = ok(&server.env, &["server", "org", "show", "acme"]);
    assert_eq!(doc["data"]["org"]["members"][0]["user"], "dana", "{doc:#}");
    assert!(!crate::support::db_file(&client).exists());
    let (doc, code) = server.client_json(&client, &["server", "token", "list"]);
    assert_eq!(code, 0, "{doc:#}");
    let listed = doc["data"]["tokens"].to_string();
    assert!(listed.contains("\"dana\""), "{listed}");
    assert!(!listed.contains(&token), "a secret is listed: {listed}");
    let (doc, code) = server.client_json(&client, &["server", "token", "revoke", "dana"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(hello(&server, &token).0, 401);
    let (doc, code) = server.client_json(
        &client,
        &[
            "server",
            "user",
            "list",
            "--database",
            "postgres://x@127.0.0.1/y",
        ],
    );
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
}

/// A server trusting `issuer`'s JWTs (its config written before it starts).
fn server_trusting(issuer: &TestIssuer) -> Server {
    let env = Env::new();
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(&env.config_path, issuer.config()).unwrap();
    Server::start(env)
}

#[test]
fn a_jwt_of_a_configured_issuer_signs_in_as_its_mapped_user() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = TestIssuer::new(dir.path(), "https://ci.example", "agents-test", "k1");
    let server = server_trusting(&issuer);
    let jwt = issuer.jwt(SERVER_ADMIN, 600, serde_json::json!({}));
    assert_eq!(hello(&server, &jwt), (200, String::new()));
    // Through the command line, as a CI job would: `server status` and a plan list answer.
    let client = Env::new();
    for args in [&["server", "status"][..], &["plan", "list"][..]] {
        let out = server
            .client(&client, &[&["--format", "json"][..], args].concat())
            .env("AGENTS_TOKEN", &jwt)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // A user the server does not have is refused, naming why.
    let (status, message) = hello(&server, &issuer.jwt("ghost", 600, serde_json::json!({})));
    assert_eq!(status, 401);
    assert!(
        message.contains("ghost") && message.contains("no account"),
        "{message}"
    );
}

#[test]
fn expired_wrong_audience_unsigned_and_forged_jwts_get_401_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = TestIssuer::new(dir.path(), "https://ci.example", "agents-test", "k1");
    let server = server_trusting(&issuer);
    let forger = TestIssuer::new(
        &dir.path().join("other"),
        "https://ci.example",
        "agents-test",
        "k1",
    );
    let stranger = TestIssuer::new(
        &dir.path().join("else"),
        "https://else.example",
        "agents-test",
        "k1",
    );
    let cases = [
        (
            issuer.jwt(SERVER_ADMIN, -600, serde_json::json!({})),
            "expired",
        ),
        (
            issuer.jwt(
                SERVER_ADMIN,
                600,
                serde_json::json!({"aud": "someone-else"}),
            ),
            "audience",
        ),
        (issuer.unsigned_jwt(SERVER_ADMIN), "unsigned"),
        (
            forger.jwt(SERVER_ADMIN, 600, serde_json::json!({})),
            "signature",
        ),
        (
            stranger.jwt(SERVER_ADMIN, 600, serde_json::json!({})),
            "not configured",
        ),
        (
            issuer.jwt(
                SERVER_ADMIN,
                600,
                serde_json::json!({"nbf": jiff::Timestamp::now().as_second() + 3600}),
            ),
            "not valid yet",
        ),
    ];
    for (jwt, why) in cases {
        let (status, message) = hello(&server, &jwt);
        assert_eq!(status, 401, "{why}: {message}");
        assert!(message.contains(why), "expected `{why}` in: {message}");
    }
    // And the valid one still works.
    let jwt = issuer.jwt(SERVER_ADMIN, 600, serde_json::json!({}));
    assert_eq!(hello(&server, &jwt).0, 200);
}

#[test]
fn a_server_trusting_no_issuer_refuses_a_jwt_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = TestIssuer::new(dir.path(), "https://ci.example", "agents-test", "k1");
    let server = Server::start(Env::new());
    let (status, message) = hello(
        &server,
        &issuer.jwt(SERVER_ADMIN, 600, serde_json::json!({})),
    );
    assert_eq!(status, 401);
    assert!(message.contains("trusts no OIDC issuer"), "{message}");
}

/// Serves `body` as JSON to every request on a loopback port: the URL and how many requests
/// were answered.
fn serve_json(body: String) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, count)
}

#[test]
fn an_issuers_keys_are_fetched_from_its_jwks_url_once_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = TestIssuer::new(dir.path(), "https://sso.example", "agents-test", "k9");
    let (url, fetched) = serve_json(std::fs::read_to_string(&issuer.jwks).unwrap());
    let env = Env::new();
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        format!(
            "[[server.oidc]]\nissuer = \"{}\"\naudience = \"{}\"\njwks-url = \"{url}\"\nuser-claim = \"preferred_username\"\n",
            issuer.issuer, issuer.audience
        ),
    )
    .unwrap();
    let server = Server::start(env);
    let claims = serde_json::json!({"sub": "0042", "preferred_username": SERVER_ADMIN});
    for _ in 0..2 {
        let jwt = issuer.jwt("0042", 600, claims.clone());
        assert_eq!(hello(&server, &jwt), (200, String::new()));
    }
    assert_eq!(fetched.load(std::sync::atomic::Ordering::SeqCst), 1);
}
