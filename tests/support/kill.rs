//! Killing the process that drives a plan at a chosen moment (SIGKILL), as a crash, an OOM
//! kill or a closed laptop would, so that a test can resume the plan and compare it with an
//! uninterrupted run (docs/sandbox.md, "Resuming a step").

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::Env;
use super::provider_server::ProviderServer;

/// Spawns `agents --format json ARGS` with the scripted provider's key and kills it
/// (SIGKILL) once `ready` holds, leaving it unreaped: it stays defunct (a zombie, its pid
/// still listed) until the caller waits for it. Fails the test when the driver ends before
/// the moment comes, or the moment never comes within two minutes.
pub fn kill_unreaped_when(env: &Env, args: &[&str], ready: &dyn Fn() -> bool) -> Child {
    let mut full = vec!["--format", "json"];
    full.extend_from_slice(args);
    let mut driver = env
        .command(&full)
        .env("SCRIPTED_API_KEY", "sk-test")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ready() {
        assert!(Instant::now() < deadline, "the moment to kill never came");
        assert!(
            driver.try_wait().unwrap().is_none(),
            "the driver ended early"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    driver.kill().unwrap();
    driver
}

/// As [`kill_unreaped_when`], reaping the killed driver.
pub fn kill_when(env: &Env, args: &[&str], ready: &dyn Fn() -> bool) {
    let mut driver = kill_unreaped_when(env, args, ready);
    driver.wait().unwrap();
}

/// The chat completion requests the scripted model server received (each one a model call
/// the plan paid for).
pub fn chat_requests(server: &ProviderServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .count()
}
