//! The `agents` binary: parse, run, exit with the command's exit code.

fn main() -> std::process::ExitCode {
    cleveragents::cli::main()
}
