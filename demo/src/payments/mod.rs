//! The fake payment provider over HTTP: the server the refund desk starts (or `fake_payments` runs
//! as its own process) and the client the demo tools call it with.
//!
//! The provider itself, its durable ledger and its faults, is [`crate::fake_provider`], the one
//! the crash tests drive in process; this module puts it on loopback HTTP:
//!
//! | request | answer |
//! |---|---|
//! | `GET /orders/{id}` | `200` an order (`order_id`, `paid_cents`, `refunded_cents`), `404` |
//! | `POST /refunds` with `Idempotency-Key` and `{"order_id", "amount_cents"}` | `200` the refund (`refund_id`, `order_id`, `amount_cents`); `422` over the refundable balance; `404`; `503` when told to |
//! | `GET /refunds/{key}` | `200` the refund under that key, `404` |
//! | `POST /faults` with a script's `fault` object | `204`; `400` when it is not one |
//! | `GET /ledger` | `200` the ledger and request counts, as the refund desk prints them |
//!
//! An `{id}` or `{key}` is one percent-encoded path segment (`ORD-1001%2F..` is the order
//! `ORD-1001/..`, which does not exist). Errors are `{"error": "…"}`. Only `/refunds` counts as
//! provider requests (`refund` and `lookup`); orders are read from the shop's table and the
//! ledger. Refunds, lookups and order reads (operation `order`) take faults, and a fault on a
//! refund or an order read may name the `order_id` whose requests take it.

pub mod client;
pub mod server;
