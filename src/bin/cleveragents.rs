//! The `cleveragents` binary: the same program as `agents` under its long name.

fn main() -> std::process::ExitCode {
    cleveragents::cli::main()
}
