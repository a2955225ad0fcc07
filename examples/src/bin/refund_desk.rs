//! The `refund_desk` example as a binary, so that this package's tests run it as a process with
//! `env!("CARGO_BIN_EXE_refund_desk")`: both call [`toolgate_demo::refund_desk::main`].

fn main() -> std::process::ExitCode {
    toolgate_demo::refund_desk::main()
}
