//! The operator's command line, `toolgate` of `toolgate-cli`, as a binary of this package, so
//! that its tests run it as a process with `env!("CARGO_BIN_EXE_operator")`.

fn main() -> std::process::ExitCode {
    toolgate_cli::main()
}
