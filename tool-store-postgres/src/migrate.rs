//! The schema, embedded in the binary, and the migrator that applies it.
//!
//! Migrations are listed here by hand (one `include_str!` each) instead of with `sqlx::migrate!`,
//! which would pull sqlx's proc-macro crates into every build for one file. Their bookkeeping
//! lives in a table of its own, so an application that keeps its own sqlx migrations in the same
//! database is not confused by ours, nor ours by its.

use std::borrow::Cow;
use std::sync::LazyLock;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// Where the migrator records which of our migrations ran.
pub(crate) const MIGRATIONS_TABLE: &str = "_toolgate_store_migrations";

/// Every migration, in order. Never edit one that has shipped: add the next.
static MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| {
    let mut migrator = Migrator::with_migrations(vec![
        Migration::new(
            1,
            Cow::Borrowed("operations"),
            MigrationType::Simple,
            include_str!("../migrations/0001_operations.sql").into_sql_str(),
            false,
        ),
        Migration::new(
            2,
            Cow::Borrowed("errors keep every character"),
            MigrationType::Simple,
            include_str!("../migrations/0002_errors_keep_every_character.sql").into_sql_str(),
            false,
        ),
        Migration::new(
            3,
            Cow::Borrowed("runs"),
            MigrationType::Simple,
            include_str!("../migrations/0003_runs.sql").into_sql_str(),
            false,
        ),
        Migration::new(
            4,
            Cow::Borrowed("approvals and audit"),
            MigrationType::Simple,
            include_str!("../migrations/0004_approvals_and_audit.sql").into_sql_str(),
            false,
        ),
        Migration::new(
            5,
            Cow::Borrowed("outbox and steps"),
            MigrationType::Simple,
            include_str!("../migrations/0005_outbox_and_steps.sql").into_sql_str(),
            false,
        ),
        Migration::new(
            6,
            Cow::Borrowed("outbox deliveries"),
            MigrationType::Simple,
            include_str!("../migrations/0006_outbox_deliveries.sql").into_sql_str(),
            false,
        ),
        Migration::new(
            7,
            Cow::Borrowed("run functions"),
            MigrationType::Simple,
            include_str!("../migrations/0007_run_functions.sql").into_sql_str(),
            false,
        ),
        Migration::new(
            8,
            Cow::Borrowed("turn claims"),
            MigrationType::Simple,
            include_str!("../migrations/0008_turn_claims.sql").into_sql_str(),
            false,
        ),
        Migration::new(
            9,
            Cow::Borrowed("issuer keys"),
            MigrationType::Simple,
            include_str!("../migrations/0009_issuer_keys.sql").into_sql_str(),
            false,
        ),
    ]);
    // Set once, before any database saw the default name, so nothing is lost by it.
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    migrator
});

/// The migrator. Its default locking stays on: it holds a PostgreSQL advisory lock on the
/// database while it runs, so processes that start together apply each migration once.
pub(crate) fn migrator() -> &'static Migrator {
    &MIGRATOR
}
