//! Bad usage (exit 2, and the message names the fix), help for every command, and stores that
//! are missing or cannot be reached (exit 3).

use std::net::TcpListener;

use crate::support::{toolgate, toolgate_env};

#[test]
fn bad_usage_exits_2_and_names_the_fix() {
    let ran = toolgate("sqlite:/nowhere/ops.db", &["approvals", "approve", "apr_1"]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("--reason <TEXT>"), "{}", ran.stderr);

    let ran = toolgate(
        "sqlite:/nowhere/ops.db",
        &["ops", "list", "--status", "done"],
    );
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("awaiting_approval"), "{}", ran.stderr);

    // No command: the help, on stderr, with 2.
    let ran = toolgate_env(&[], &[]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("Usage: toolgate"), "{}", ran.stderr);

    // No store anywhere.
    let ran = toolgate_env(&["approvals", "list"], &[]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("no store given"), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("or set TOOLGATE_STORE"),
        "{}",
        ran.stderr
    );

    let ran = toolgate("mysql://localhost/ops", &["approvals", "list"]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("--store sqlite:PATH"), "{}", ran.stderr);

    let args = [
        "approvals",
        "approve",
        "apr_1",
        "--reason",
        " ",
        "--token",
        "not.checked.yet",
    ];
    let ran = toolgate("sqlite:/nowhere/ops.db", &args);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("the reason is empty"), "{}", ran.stderr);
}

#[test]
fn every_command_has_help() {
    for command in [
        &[][..],
        &["approvals"],
        &["approvals", "list"],
        &["approvals", "show"],
        &["approvals", "approve"],
        &["approvals", "reject"],
        &["ops"],
        &["ops", "list"],
        &["ops", "show"],
        &["ops", "settle"],
        &["outbox"],
        &["outbox", "list"],
        &["outbox", "show"],
        &["outbox", "resume"],
        &["operators"],
        &["operators", "init"],
        &["operators", "issue"],
        &["operators", "list"],
        &["audit"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let ran = toolgate_env(&args, &[]);
        assert_eq!(ran.code, 0, "{args:?}: {ran:?}");
        assert!(
            ran.stdout.contains("Usage: toolgate"),
            "{args:?}: {}",
            ran.stdout
        );
    }
    for command in [
        &["approvals", "approve"][..],
        &["approvals", "reject"],
        &["ops", "settle"],
        &["outbox", "resume"],
    ] {
        let mut args = command.to_vec();
        args.push("--help");
        let ran = toolgate_env(&args, &[]);
        for says in [
            "--token <TOKEN>",
            "[env: TOOLGATE_TOKEN]",
            "toolgate operators issue",
        ] {
            assert!(ran.stdout.contains(says), "{says:?} in {}", ran.stdout);
        }
        for gone in ["--as", "--identity", "TOOLGATE_IDENTITY", "--permission"] {
            assert!(!ran.stdout.contains(gone), "{gone:?} in {}", ran.stdout);
        }
    }
}

#[test]
fn a_missing_sqlite_file_is_a_store_error_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("operations.db");
    let ran = toolgate(
        &format!("sqlite:{}", path.display()),
        &["approvals", "list"],
    );
    assert_eq!(ran.code, 3, "{ran:?}");
    assert!(ran.stderr.contains("no store at"), "{}", ran.stderr);
    assert!(ran.stderr.contains("never creates one"), "{}", ran.stderr);
    assert!(!path.exists(), "no empty store was made");
}

#[test]
fn an_unreachable_database_is_a_store_error_without_its_password() {
    // A port nothing listens on: bound, then released.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://toolgate:hunter2@127.0.0.1:{port}/toolgate");
    let ran = toolgate_env(&["approvals", "list"], &[("TOOLGATE_STORE", url.as_str())]);
    assert_eq!(ran.code, 3, "{ran:?}");
    assert!(
        ran.stderr.contains("could not open the PostgreSQL store"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("toolgate:***@127.0.0.1"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("hunter2"), "{}", ran.stderr);
}

#[test]
fn a_file_that_is_not_a_store_is_a_store_error_and_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "not a database, just notes\n".repeat(200)).unwrap();
    let ran = toolgate(&format!("sqlite:{}", path.display()), &["ops", "list"]);
    assert_eq!(ran.code, 3, "{ran:?}");
    assert!(
        ran.stderr.contains("could not open the SQLite store"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("next: "), "{}", ran.stderr);
    let kept = std::fs::read_to_string(&path).unwrap();
    assert_eq!(kept, "not a database, just notes\n".repeat(200));
}

#[test]
fn the_help_names_the_environment_and_the_flags_win_over_it() {
    // Every command's help names both variables, never their values: a URL holds a password, and
    // a token is the operator's credential.
    let secret = [
        ("TOOLGATE_STORE", "postgres://toolgate:hunter2@db/toolgate"),
        ("TOOLGATE_TOKEN", "eyJhbGciOiJFZERTQSJ9.c2VjcmV0.c2lnbmVk"),
    ];
    let ran = toolgate_env(&["approvals", "approve", "--help"], &secret);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(
        ran.stdout.contains("[env: TOOLGATE_STORE]"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains("[env: TOOLGATE_TOKEN]"),
        "{}",
        ran.stdout
    );
    assert!(!ran.stdout.contains("hunter2"), "{}", ran.stdout);
    assert!(!ran.stdout.contains("c2VjcmV0"), "{}", ran.stdout);

    // --store wins over TOOLGATE_STORE.
    let dir = tempfile::tempdir().unwrap();
    let missing = format!("sqlite:{}", dir.path().join("operations.db").display());
    let ran = toolgate_env(
        &["--store", &missing, "ops", "list"],
        &[("TOOLGATE_STORE", "mysql://localhost/ops")],
    );
    assert_eq!(ran.code, 3, "{ran:?}");
    assert!(ran.stderr.contains("no store at"), "{}", ran.stderr);

    // An empty TOOLGATE_STORE names no store.
    let ran = toolgate_env(&["ops", "list"], &[("TOOLGATE_STORE", "")]);
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(ran.stderr.contains("no store given"), "{}", ran.stderr);

    // With TOOLGATE_STORE set, a command group without its command still shows its help.
    let store = [("TOOLGATE_STORE", "sqlite:/nowhere/ops.db")];
    for group in [&[][..], &["approvals"]] {
        let ran = toolgate_env(group, &store);
        assert_eq!(ran.code, 2, "{group:?}: {ran:?}");
        assert!(ran.stderr.contains("Usage: toolgate"), "{}", ran.stderr);
        assert!(ran.stderr.contains("Print help"), "{}", ran.stderr);
    }
}

#[test]
fn an_acting_command_without_a_token_is_a_usage_error_that_says_how_to_get_one() {
    // Refused before the store is opened: this one does not exist.
    let commands: [(&[&str], &str); 4] = [
        (
            &["approvals", "approve", "apr_1", "--reason", "ok"],
            "approver",
        ),
        (
            &["approvals", "reject", "apr_1", "--reason", "no"],
            "approver",
        ),
        (&["outbox", "resume", "k1"], "operator"),
        (
            &["ops", "settle", "k1", "--applied", "--evidence", "seen"],
            "operator",
        ),
    ];
    for (command, noun) in commands {
        let ran = toolgate("sqlite:/nowhere/ops.db", command);
        assert_eq!(ran.code, 2, "{command:?}: {ran:?}");
        for says in [
            &format!("no {noun} token"),
            "--token TOKEN",
            "TOOLGATE_TOKEN",
            "toolgate operators issue",
        ] {
            assert!(ran.stderr.contains(says), "{says:?} in {}", ran.stderr);
        }
    }
    // The typed identity is gone.
    let ran = toolgate(
        "sqlite:/nowhere/ops.db",
        &[
            "approvals",
            "approve",
            "apr_1",
            "--reason",
            "ok",
            "--as",
            "manager",
        ],
    );
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(
        ran.stderr.contains("unexpected argument '--as'"),
        "{}",
        ran.stderr
    );
}
