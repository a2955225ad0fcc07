//! The `toolgate` binary, run as an operator runs it, against stores prepared through the store
//! API: a SQLite file, and a PostgreSQL database.

mod approvals;
mod browser;
mod console;
mod hashes;
mod outbox;
mod postgres;
mod reads;
mod settle;
mod support;
mod usage;
mod web;
mod webdriver;
