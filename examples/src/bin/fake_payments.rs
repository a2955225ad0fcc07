//! The `fake_payments` example as a binary, so that this package's tests run it as a process with
//! `env!("CARGO_BIN_EXE_fake_payments")`: both call [`toolgate_demo::fake_payments::main`].

fn main() -> std::process::ExitCode {
    toolgate_demo::fake_payments::main()
}
