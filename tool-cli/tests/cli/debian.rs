//! Debian packages the tests need and install themselves when the machine lacks them (CI runs
//! the tests as root on a fresh machine): one apt-get at a time in this process, waiting for
//! another process's to finish, with the package lists read first when an install cannot find
//! a package.

use std::process::Command;
use std::sync::Mutex;

/// How long apt-get waits for the lock another apt-get holds, in seconds.
const LOCK_WAIT_S: &str = "300";

/// Installs `packages` unless `present()` says they are there; answers why not when they still
/// are not after apt-get.
pub(crate) fn ensure(packages: &[&str], present: impl Fn() -> bool) -> Result<(), String> {
    static APT: Mutex<()> = Mutex::new(());
    let _one_at_a_time = APT.lock().unwrap_or_else(|e| e.into_inner());
    if present() {
        return Ok(());
    }
    let install = [&["install", "-y", "-q"][..], packages].concat();
    apt_get(&install).or_else(|_| apt_get(&["update", "-q"]).and_then(|()| apt_get(&install)))?;
    if present() {
        Ok(())
    } else {
        Err(format!(
            "apt-get installed {} and what they provide is still missing",
            packages.join(" ")
        ))
    }
}

/// Runs `apt-get ARGS`, answering what it said when it failed.
fn apt_get(args: &[&str]) -> Result<(), String> {
    let output = Command::new("apt-get")
        .args(["-o", &format!("DPkg::Lock::Timeout={LOCK_WAIT_S}")])
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .map_err(|err| format!("apt-get {} did not run: {err}", args.join(" ")))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "apt-get {} failed ({}): {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    ))
}
