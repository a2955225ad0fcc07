//! The PostgreSQL store's integration tests, one binary: a module an area, each against a real
//! PostgreSQL server (a database of its own, or a cluster of its own where a test stops it).

mod postgres_approvals;
mod postgres_concurrency;
mod postgres_conformance;
mod postgres_connect;
mod postgres_migrations;
mod postgres_outbox;
mod postgres_outbox_dispatch;
mod postgres_runs;
mod postgres_unreachable;
mod postgres_upgrade;
