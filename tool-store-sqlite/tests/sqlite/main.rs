//! The SQLite store's integration tests, one binary: a module an area, each against a real file.

mod store_approvals;
mod store_conformance;
mod store_durability;
mod store_leases;
mod store_open;
mod store_outbox;
mod store_outbox_dispatch;
mod store_runs;
mod store_upgrade;
mod store_upgrade_v4;
