//! The `mcp_server` example as a binary, so that this package's tests run it as a process with
//! `env!("CARGO_BIN_EXE_mcp_server")`: both call [`toolgate_demo::mcp_server::main`].

fn main() -> std::process::ExitCode {
    toolgate_demo::mcp_server::main()
}
