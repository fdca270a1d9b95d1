//! `docs/cli.md` is generated from the clap definition and must match it.

use std::path::Path;

#[test]
fn docs_cli_md_matches_the_command_line_definition() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    let generated = cleveragents::cli::reference::markdown();
    if std::env::var_os("UPDATE_CLI_DOCS").is_some() {
        std::fs::write(&file, &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        on_disk == generated,
        "docs/cli.md is out of date with the command line; regenerate it with\n  \
         UPDATE_CLI_DOCS=1 cargo test --test all cli::reference\nand commit the result"
    );
    // Every top-level command has a section.
    for name in [
        "quickstart",
        "plan use",
        "plan apply",
        "action create",
        "tui",
    ] {
        assert!(generated.contains(&format!("## agents {name}\n")), "{name}");
    }
}
