//! The `toolgate` binary, run as an operator runs it, against stores prepared through the store
//! API: a SQLite file, and a PostgreSQL database.

mod approvals;
mod browser;
mod console;
mod debian;
mod hashes;
mod operators;
mod outbox;
mod postgres;
mod pyjwt;
mod reads;
mod settle;
mod sign_in;
mod support;
mod usage;
mod web;
mod webdriver;
