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
//! | `POST /crm` with `Idempotency-Key` and `{"order_id"}` | `200` the CRM update (`action_id`, `operation`, `key`, `order_id`); `404`; `503` when told to |
//! | `POST /notifications` with `Idempotency-Key` and `{"order_id"}` | `200` the notification, as a CRM update; `404`; `503` when told to |
//! | `POST /faults` with a script's `fault` object | `204`; `400` when it is not one |
//! | `GET /ledger` | `200` the ledger and request counts, as the refund desk prints them |
//!
//! An `{id}` or `{key}` is one percent-encoded path segment (`ORD-1001%2F..` is the order
//! `ORD-1001/..`, which does not exist). Errors are `{"error": "…"}`. `/refunds` counts as provider
//! requests (`refund` and `lookup`); orders are read from the shop's table and the ledger, and
//! are not counted. `/crm` and `/notifications` count as `crm` and `notify` requests; a key the provider has
//! seen for the same operation answers its first action. Refunds, lookups, order reads (operation
//! `order`), CRM updates and notifications take faults, and a fault on any but a lookup may name
//! the `order_id` whose requests take it.

pub mod client;
pub mod server;
