//! Snapshot tests of what users and scripts see, in `plain` and `json` (files under
//! `snapshots/cli/`). Paths, durations, sizes and versions are masked.

use crate::support::Env;

fn check(name: &str, env: &Env, args: &[&str]) {
    check_output(name, env, args, env.run(args));
}

fn check_output(name: &str, env: &Env, args: &[&str], out: std::process::Output) {
    let text = output_text(&out);
    settings(env, args).bind(|| insta::assert_snapshot!(name, text));
}

/// Exit code, stdout and stderr as one text.
pub(crate) fn output_text(out: &std::process::Output) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Snapshot settings: files under `snapshots/cli/`, the temp root, durations, sizes, versions
/// and the platform masked.
pub(crate) fn settings(env: &Env, args: &[&str]) -> insta::Settings {
    let root = env.root().display().to_string();
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../snapshots/cli");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    // Filters apply to the snapshot body only, so the description masks the temp root itself.
    settings.set_description(format!("agents {}", args.join(" ")).replace(&root, "[TMP]"));
    settings.add_filter(&regex::escape(&root), "[TMP]");
    // Through a server (tests/support/through_server.rs) a suggested command repeats the
    // client's data directory and the server: it reads as the command run on the host.
    settings.add_filter(
        r"/client-data --config-path (\S+) --server http://127\.0\.0\.1:\d+",
        "/data --config-path $1",
    );
    if crate::support::through_server::enabled() {
        // Attribution is recorded for a server's users only (D-team-2): through a server,
        // `plan status` adds its People panel, which the command line of one machine has not.
        settings.add_filter(
            r"(?m)^People\n(?:  (?:Created|Driven|Approved|Reviewed) by: .*\n)+\n?",
            "",
        );
        settings.add_filter(
            r#"(?m)^    "attribution": \{\n(?:      .*\n)*?    \},\n"#,
            "",
        );
    }
    settings.add_filter(r#""duration_ms": \d+"#, r#""duration_ms": "[MS]""#);
    settings.add_filter(r"Duration: \d+ ms", "Duration: [MS] ms");
    settings.add_filter(
        r#""database_size_bytes": \d+"#,
        r#""database_size_bytes": "[SIZE]""#,
    );
    settings.add_filter(r"DB Size: [0-9.]+ [KMG]?i?B", "DB Size: [SIZE]");
    settings.add_filter(r"Index Size: [0-9.]+ [KMG]?i?B", "Index Size: [SIZE]");
    settings.add_filter(r#""size_bytes": \d+"#, r#""size_bytes": "[SIZE]""#);
    settings.add_filter(r"Duration: \d+\.\ds", "Duration: [S]s");
    settings.add_filter(&regex::escape(env!("CARGO_PKG_VERSION")), "[VERSION]");
    // Schema versions grow with every migration; the tests in store.rs check them exactly.
    settings.add_filter(
        r#""(latest_)?schema_version": \d+"#,
        r#""${1}schema_version": "[SCHEMA]""#,
    );
    settings.add_filter(r"schema v\d+", "schema v[SCHEMA]");
    settings.add_filter(r"Schema: v\d+( \(latest v\d+\))?", "Schema: v[SCHEMA]$1");
    settings.add_filter(r"\(latest v\d+\)", "(latest v[SCHEMA])");
    settings.add_filter(r"git version [0-9][^\s,\x22]*", "git version [GIT]");
    settings.add_filter(
        r"[0-9.]+ GiB free of [0-9.]+ GiB \(\d+ %\)",
        "[N] GiB free of [N] GiB ([N] %)",
    );
    settings.add_filter(
        r"landlock: enforced \(ABI \d+;",
        "landlock: enforced (ABI [N];",
    );
    settings.add_filter(
        &regex::escape(&format!(
            "{}-{}",
            std::env::consts::OS,
            std::env::consts::ARCH
        )),
        "[PLATFORM]",
    );
    settings
}

#[test]
fn version() {
    let env = Env::new();
    check("version_plain", &env, &["--format", "plain", "version"]);
    check("version_json", &env, &["--format", "json", "version"]);
}

#[test]
fn info_on_a_fresh_data_directory() {
    let env = Env::new();
    check("info_plain", &env, &["--format", "plain", "info"]);
    check("info_json", &env, &["--format", "json", "info"]);
}

#[test]
fn table_format_without_colour() {
    let env = Env::new();
    let args = ["--format", "table", "version"];
    check_output(
        "version_table_no_color",
        &env,
        &args,
        env.command(&args).env("NO_COLOR", "1").output().unwrap(),
    );
}

#[test]
fn config_get_set_list() {
    let env = Env::new();
    check(
        "config_set_plain",
        &env,
        &[
            "--format",
            "plain",
            "config",
            "set",
            "automation-profile",
            "trusted",
        ],
    );
    check(
        "config_get_plain",
        &env,
        &["--format", "plain", "config", "get", "automation-profile"],
    );
    check(
        "config_get_json",
        &env,
        &["--format", "json", "config", "get", "automation-profile"],
    );
    check(
        "config_list_plain",
        &env,
        &["--format", "plain", "config", "list"],
    );
}

#[test]
fn errors() {
    let env = Env::new();
    check(
        "config_get_unknown_plain",
        &env,
        &["--format", "plain", "config", "get", "formt"],
    );
    check(
        "config_get_unknown_json",
        &env,
        &["--format", "json", "config", "get", "formt"],
    );
    check(
        "init_needs_confirmation_plain",
        &env,
        &["--format", "plain", "init"],
    );
    check(
        "init_needs_confirmation_json",
        &env,
        &["--format", "json", "init"],
    );
    check(
        "usage_error_json",
        &env,
        &["--format", "json", "config", "sett"],
    );
}

#[test]
fn diagnostics() {
    let env = Env::new();
    check(
        "diagnostics_plain",
        &env,
        &["--format", "plain", "diagnostics"],
    );
    check(
        "diagnostics_json",
        &env,
        &["--format", "json", "diagnostics"],
    );
}
