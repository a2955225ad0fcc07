//! `toolgate`: the operator's command line of toolgate ([`toolgate_cli::main`]).

fn main() -> std::process::ExitCode {
    toolgate_cli::main()
}
