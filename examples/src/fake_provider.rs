//! A fake payment provider: it refunds orders under an idempotency key, keeps a durable ledger of
//! every refund it applied, and misbehaves when told to. No HTTP here: the crash and retry tests
//! call it in process, and an HTTP server can wrap the same core.
//!
//! # The ledger
//!
//! One JSON object a line, one line a refund, appended to a file. The ledger must survive a
//! `SIGKILL` of the process that calls the provider, since the crash tests count its lines after
//! the kill. Each refund is one `write(2)` on a file opened with `O_APPEND`: once it returns, the
//! line is in the kernel's page cache, which a killed process cannot take back (a power loss
//! could, which this fake does not model, so it never fsyncs).
//!
//! The file is read once, when the provider opens (a restarted provider continues where the
//! killed one stopped); from then on the ledger lives in memory, with an index by key, and the
//! file is only appended to. A request costs the same with six refunds in the ledger as with six
//! thousand. For that to be right, one provider at a time owns a ledger file: it holds an
//! exclusive advisory lock on it (`File::try_lock`) for as long as it lives, released by the
//! kernel when its process dies, and a second provider on the same file is refused. JSON Lines
//! rather than SQLite: no dependency the tests and examples do not already have, and a failing
//! test's ledger can be read with `cat`.
//!
//! # Faults
//!
//! [`FakeProvider::inject`] scripts the next requests of an operation, first in, first out:
//! see [`Fault`]; [`FakeProvider::inject_for`] the next requests of an operation about one order.
//! Requests with no fault left behave. The script and the request counts live in
//! memory: they are instructions to this process, not provider state.

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use toolgate::ToolError;

mod actions;

pub use actions::Action;

/// Whether the provider applies one idempotency key once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyMode {
    /// A second refund under a key answers the first refund and applies nothing.
    Honours,
    /// Every refund is a new one, whatever its key (the key is kept, so lookups still work).
    Ignores,
}

/// The requests the provider serves; faults are scripted per operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// [`FakeProvider::refund`].
    Refund,
    /// [`FakeProvider::lookup`].
    Lookup,
    /// [`FakeProvider::read_order`]: an order read, which changes nothing (a fault "after
    /// apply" on it is one after the order was read).
    Order,
    /// [`FakeProvider::act`] with `Crm`: an update of the customer's CRM record of an order.
    Crm,
    /// [`FakeProvider::act`] with `Notify`: a notification sent to the customer of an order.
    Notify,
}

/// How many [`Operation`]s there are: the size of the fault script and the request counts.
const OPERATIONS: usize = 5;

/// A fault waiting for a request: of any order, or of the one it names.
#[derive(Debug, Clone)]
struct Scripted {
    order_id: Option<String>,
    fault: Fault,
}

/// How one request misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answers 503 ([`ToolError::unavailable`]); nothing is applied.
    UnavailableBeforeApply,
    /// Applies the request, then never answers: the caller's deadline passes.
    TimeoutAfterApply,
    /// Applies the request, then drops the connection
    /// ([`ToolError::outcome_unknown`]`("connection reset")`).
    ResetAfterApply,
    /// Waits this long, then serves the request as usual. A caller that gives up first (drops
    /// the future) sent a request that was never applied.
    Slow(Duration),
}

/// One refund the provider applied: a line of the ledger, and what a refund request answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refund {
    /// The provider's id, `re_000001` for the first line of the ledger.
    pub refund_id: String,
    /// The idempotency key the refund was requested under.
    pub key: String,
    /// The refunded order.
    pub order_id: String,
    /// The amount, in cents.
    pub amount_cents: i64,
}

/// Called with each new refund once it is in the ledger, before the provider answers.
type AppliedHook = Box<dyn Fn(&Refund) + Send + Sync>;

/// The provider: a ledger, a key mode, a fault script per operation.
pub struct FakeProvider {
    /// Where the ledger is kept.
    path: PathBuf,
    ledger: Mutex<Ledger>,
    mode: KeyMode,
    faults: Mutex<[VecDeque<Scripted>; OPERATIONS]>,
    requests: [AtomicU32; OPERATIONS],
    on_applied: Option<AppliedHook>,
    /// The CRM updates and notifications applied, oldest first: kept in memory only.
    actions: Mutex<Vec<Action>>,
}

/// Every refund applied, in memory, and the file each new one is appended to.
struct Ledger {
    /// Open for appending and locked by this provider while it lives.
    file: File,
    /// Oldest first.
    refunds: Vec<Refund>,
    /// The position in `refunds` of the first refund under each key.
    first_under: HashMap<String, usize>,
}

impl Ledger {
    /// Adds `refund`, appended to the file first: a refund is applied once its line is written.
    fn append(&mut self, refund: Refund) -> io::Result<()> {
        let mut line = serde_json::to_vec(&refund)?;
        line.push(b'\n');
        // One write(2) of one short line, appended: in the page cache when it returns.
        self.file.write_all(&line)?;
        self.first_under
            .entry(refund.key.clone())
            .or_insert(self.refunds.len());
        self.refunds.push(refund);
        Ok(())
    }

    /// The first refund applied under `key`.
    fn first_under(&self, key: &str) -> Option<&Refund> {
        self.first_under.get(key).map(|&at| &self.refunds[at])
    }
}

impl std::fmt::Debug for FakeProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeProvider")
            .field("ledger", &self.path)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl FakeProvider {
    /// A provider whose ledger is the file at `ledger`: created empty if missing, or read as a
    /// restarted provider would, refunds and ids continuing where they stopped. The only time
    /// the file is read. An error if another provider, in this process or another, has it open.
    pub fn open(ledger: impl Into<PathBuf>, mode: KeyMode) -> io::Result<Self> {
        let path = ledger.into();
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)?;
        // Held until the provider is dropped, or its process dies.
        file.try_lock().map_err(|err| match err {
            TryLockError::WouldBlock => io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "the ledger {} belongs to another provider that is still running",
                    path.display()
                ),
            ),
            TryLockError::Error(err) => err,
        })?;
        let refunds = read_ledger(&file, &path)?;
        let mut first_under = HashMap::new();
        for (at, refund) in refunds.iter().enumerate() {
            first_under.entry(refund.key.clone()).or_insert(at);
        }
        Ok(FakeProvider {
            path,
            ledger: Mutex::new(Ledger {
                file,
                refunds,
                first_under,
            }),
            mode,
            faults: Mutex::default(),
            requests: Default::default(),
            on_applied: None,
            actions: Mutex::default(),
        })
    }

    /// Calls `hook` with each new refund once it is in the ledger and before the provider
    /// answers (not for a refund answered again under a honoured key). A crash test stops the
    /// process there: applied, never answered.
    pub fn on_applied(mut self, hook: impl Fn(&Refund) + Send + Sync + 'static) -> Self {
        self.on_applied = Some(Box::new(hook));
        self
    }

    /// The next `times` requests of `operation` (after those already scripted) misbehave as
    /// `fault` says.
    pub fn inject(&self, operation: Operation, fault: Fault, times: u32) {
        self.script(operation, None, fault, times);
    }

    /// The next `times` requests of `operation` about the order `order_id` (after those already
    /// scripted for it) misbehave as `fault` says; requests about other orders pass them by. A
    /// lookup is about a key, not an order: it never takes such a fault.
    pub fn inject_for(&self, operation: Operation, order_id: &str, fault: Fault, times: u32) {
        self.script(operation, Some(order_id), fault, times);
    }

    fn script(&self, operation: Operation, order_id: Option<&str>, fault: Fault, times: u32) {
        let mut faults = self
            .faults
            .lock()
            .expect("the fault script lock is never poisoned");
        faults[operation as usize].extend((0..times).map(|_| Scripted {
            order_id: order_id.map(str::to_owned),
            fault,
        }));
    }

    /// Forgets every scripted fault.
    pub fn clear_faults(&self) {
        let mut faults = self
            .faults
            .lock()
            .expect("the fault script lock is never poisoned");
        faults.iter_mut().for_each(VecDeque::clear);
    }

    /// How many requests of `operation` this provider received, misbehaving ones included.
    pub fn requests(&self, operation: Operation) -> u32 {
        self.requests[operation as usize].load(Ordering::SeqCst)
    }

    /// Every refund applied so far, oldest first: a copy, for tests.
    pub fn ledger(&self) -> Vec<Refund> {
        self.with_ledger(<[Refund]>::to_vec)
    }

    /// `read` of every refund applied so far, oldest first, without a copy.
    pub fn with_ledger<R>(&self, read: impl FnOnce(&[Refund]) -> R) -> R {
        read(&self.lock_ledger().refunds)
    }

    fn lock_ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger
            .lock()
            .expect("the ledger lock is never poisoned")
    }

    /// Refunds `amount_cents` on `order_id` under the idempotency `key`, and answers the refund.
    /// With [`KeyMode::Honours`], a key already in the ledger answers its refund and applies
    /// nothing.
    pub async fn refund(
        &self,
        key: &str,
        order_id: &str,
        amount_cents: i64,
    ) -> Result<Refund, ToolError> {
        self.refund_checked(key, order_id, amount_cents, |_| Ok(()))
            .await
    }

    /// [`FakeProvider::refund`], first asking `check` about the refund given every refund in the
    /// ledger, under the ledger's lock: an error from `check` is the answer, and nothing is
    /// applied. A honoured key answers its refund without asking.
    pub async fn refund_checked(
        &self,
        key: &str,
        order_id: &str,
        amount_cents: i64,
        check: impl FnOnce(&[Refund]) -> Result<(), ToolError>,
    ) -> Result<Refund, ToolError> {
        let fault = self.arrive(Operation::Refund, Some(order_id)).await?;
        let (refund, applied) = self
            .apply(key, order_id, amount_cents, check)
            .map_err(|err| self.ledger_failed(&err))??;
        if let (true, Some(hook)) = (applied, &self.on_applied) {
            hook(&refund);
        }
        answer(fault, refund).await
    }

    /// The first refund applied under `key`, if any: what a reconcile hook asks.
    pub async fn lookup(&self, key: &str) -> Result<Option<Refund>, ToolError> {
        let fault = self.arrive(Operation::Lookup, None).await?;
        let found = self.lock_ledger().first_under(key).cloned();
        answer(fault, found).await
    }

    /// `read` of every refund applied so far, as a read of the order `order_id` that takes the
    /// faults scripted for order reads.
    pub async fn read_order<R>(
        &self,
        order_id: &str,
        read: impl FnOnce(&[Refund]) -> R,
    ) -> Result<R, ToolError> {
        let fault = self.arrive(Operation::Order, Some(order_id)).await?;
        let found = self.with_ledger(read);
        answer(fault, found).await
    }

    /// Counts a request (about the order `order_id`, if any) and plays the part of its fault
    /// that comes before applying it: the first fault scripted for this operation that names no
    /// order or names this one.
    async fn arrive(
        &self,
        operation: Operation,
        order_id: Option<&str>,
    ) -> Result<Option<Fault>, ToolError> {
        self.requests[operation as usize].fetch_add(1, Ordering::SeqCst);
        let fault = {
            let mut faults = self
                .faults
                .lock()
                .expect("the fault script lock is never poisoned");
            let queue = &mut faults[operation as usize];
            queue
                .iter()
                .position(|scripted| {
                    scripted.order_id.is_none() || scripted.order_id.as_deref() == order_id
                })
                .and_then(|at| queue.remove(at))
                .map(|scripted| scripted.fault)
        };
        match fault {
            Some(Fault::UnavailableBeforeApply) => Err(ToolError::unavailable(
                "the payment provider answered 503 Service Unavailable",
            )
            .with_why("the fake provider was told to fail this request before applying it")),
            Some(Fault::Slow(wait)) => {
                tokio::time::sleep(wait).await;
                Ok(fault)
            }
            _ => Ok(fault),
        }
    }

    /// Appends the refund to the ledger, unless the key is honoured and already there, or `check`
    /// refuses it. Answers the refund and whether it is new.
    fn apply(
        &self,
        key: &str,
        order_id: &str,
        amount_cents: i64,
        check: impl FnOnce(&[Refund]) -> Result<(), ToolError>,
    ) -> io::Result<Result<(Refund, bool), ToolError>> {
        let mut ledger = self.lock_ledger();
        if self.mode == KeyMode::Honours
            && let Some(first) = ledger.first_under(key)
        {
            return Ok(Ok((first.clone(), false)));
        }
        if let Err(refused) = check(&ledger.refunds) {
            return Ok(Err(refused));
        }
        let refund = Refund {
            refund_id: format!("re_{:06}", ledger.refunds.len() + 1),
            key: key.to_owned(),
            order_id: order_id.to_owned(),
            amount_cents,
        };
        ledger.append(refund.clone())?;
        Ok(Ok((refund, true)))
    }

    fn ledger_failed(&self, err: &io::Error) -> ToolError {
        ToolError::internal(format!(
            "the fake provider's ledger {} failed",
            self.path.display()
        ))
        .with_why(err.to_string())
    }
}

/// The part of a request's fault that comes after it was applied.
async fn answer<T>(fault: Option<Fault>, value: T) -> Result<T, ToolError> {
    match fault {
        Some(Fault::TimeoutAfterApply) => std::future::pending().await,
        Some(Fault::ResetAfterApply) => Err(ToolError::outcome_unknown("connection reset")
            .with_why("the fake provider applied the request, then dropped the connection")),
        _ => Ok(value),
    }
}

/// Every refund in the ledger `file`, which the caller holds locked. A last line without its
/// newline (a write torn by a power loss or a full disk) is an error, never skipped.
fn read_ledger(mut file: &File, path: &Path) -> io::Result<Vec<Refund>> {
    file.seek(io::SeekFrom::Start(0))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the ledger {} ends in a torn line", path.display()),
        ));
    }
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|err| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("line {} of the ledger {}: {err}", n + 1, path.display()),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(dir: &tempfile::TempDir, mode: KeyMode) -> FakeProvider {
        FakeProvider::open(dir.path().join("ledger.jsonl"), mode).unwrap()
    }

    #[tokio::test]
    async fn a_honoured_key_is_applied_once_and_answered_again() {
        let dir = tempfile::tempdir().unwrap();
        let provider = provider(&dir, KeyMode::Honours);
        let first = provider.refund("k1", "ORD-1", 500).await.unwrap();
        let again = provider.refund("k1", "ORD-1", 500).await.unwrap();
        assert_eq!(again, first);
        assert_eq!(first.refund_id, "re_000001");
        assert_eq!(provider.ledger(), [first]);
        assert_eq!(provider.requests(Operation::Refund), 2);
    }

    #[tokio::test]
    async fn an_ignored_key_is_applied_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let provider = provider(&dir, KeyMode::Ignores);
        let first = provider.refund("k1", "ORD-1", 500).await.unwrap();
        let second = provider.refund("k1", "ORD-1", 500).await.unwrap();
        assert_ne!(first.refund_id, second.refund_id);
        assert_eq!(provider.ledger(), [first.clone(), second]);
        assert_eq!(
            provider.lookup("k1").await.unwrap(),
            Some(first),
            "a lookup answers the first refund under the key"
        );
    }

    #[tokio::test]
    async fn the_ledger_outlives_the_provider() {
        let dir = tempfile::tempdir().unwrap();
        let first = provider(&dir, KeyMode::Honours)
            .refund("k1", "ORD-1", 500)
            .await
            .unwrap();
        let restarted = provider(&dir, KeyMode::Honours);
        assert_eq!(restarted.lookup("k1").await.unwrap(), Some(first.clone()));
        assert_eq!(
            restarted.refund("k1", "ORD-1", 500).await.unwrap(),
            first,
            "the key is still honoured"
        );
        let second = restarted.refund("k2", "ORD-2", 700).await.unwrap();
        assert_eq!(second.refund_id, "re_000002", "ids continue");
        let text = std::fs::read_to_string(dir.path().join("ledger.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    #[tokio::test]
    async fn unavailable_before_apply_applies_nothing_for_the_times_given() {
        let dir = tempfile::tempdir().unwrap();
        let provider = provider(&dir, KeyMode::Honours);
        provider.inject(Operation::Refund, Fault::UnavailableBeforeApply, 2);
        for _ in 0..2 {
            let err = provider.refund("k1", "ORD-1", 500).await.unwrap_err();
            assert_eq!(err.kind(), toolgate::ErrorKind::Unavailable);
        }
        assert!(provider.ledger().is_empty());
        provider.refund("k1", "ORD-1", 500).await.unwrap();
        assert_eq!(provider.ledger().len(), 1);
        assert_eq!(provider.requests(Operation::Refund), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_after_apply_applies_and_never_answers() {
        let dir = tempfile::tempdir().unwrap();
        let provider = provider(&dir, KeyMode::Honours);
        provider.inject(Operation::Refund, Fault::TimeoutAfterApply, 1);
        let answer = tokio::time::timeout(
            Duration::from_secs(3600),
            provider.refund("k1", "ORD-1", 500),
        )
        .await;
        assert!(answer.is_err(), "no answer within the hour: {answer:?}");
        assert_eq!(provider.ledger().len(), 1, "applied");
    }

    #[tokio::test]
    async fn reset_after_apply_applies_then_the_outcome_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let provider = provider(&dir, KeyMode::Ignores);
        provider.inject(Operation::Refund, Fault::ResetAfterApply, 1);
        let err = provider.refund("k1", "ORD-1", 500).await.unwrap_err();
        assert_eq!(err.kind(), toolgate::ErrorKind::OutcomeUnknown);
        assert_eq!(err.what(), "connection reset");
        assert_eq!(provider.ledger().len(), 1, "applied");
    }

    #[tokio::test(start_paused = true)]
    async fn slow_waits_then_serves() {
        let dir = tempfile::tempdir().unwrap();
        let provider = provider(&dir, KeyMode::Honours);
        provider.inject(
            Operation::Refund,
            Fault::Slow(Duration::from_millis(750)),
            1,
        );
        let started = tokio::time::Instant::now();
        provider.refund("k1", "ORD-1", 500).await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(750));
        // A caller that gives up first sent a request that was never applied.
        provider.inject(
            Operation::Refund,
            Fault::Slow(Duration::from_millis(750)),
            1,
        );
        let gave_up = tokio::time::timeout(
            Duration::from_millis(100),
            provider.refund("k2", "ORD-2", 500),
        )
        .await;
        assert!(gave_up.is_err());
        assert_eq!(provider.ledger().len(), 1);
    }

    #[tokio::test]
    async fn a_lookup_finds_a_key_and_has_faults_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let provider = provider(&dir, KeyMode::Honours);
        let refund = provider.refund("k1", "ORD-1", 500).await.unwrap();
        assert_eq!(provider.lookup("k1").await.unwrap(), Some(refund));
        assert_eq!(provider.lookup("k2").await.unwrap(), None);
        provider.inject(Operation::Lookup, Fault::UnavailableBeforeApply, 1);
        assert!(provider.lookup("k1").await.is_err());
        assert_eq!(provider.requests(Operation::Lookup), 3);
        assert_eq!(
            provider.requests(Operation::Refund),
            1,
            "refund faults are scripted apart"
        );
        provider.inject(Operation::Lookup, Fault::ResetAfterApply, 1);
        provider.clear_faults();
        assert!(provider.lookup("k1").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_fault_for_one_order_waits_for_a_request_about_it() {
        let dir = tempfile::tempdir().unwrap();
        let provider = provider(&dir, KeyMode::Honours);
        provider.inject_for(Operation::Order, "ORD-2", Fault::UnavailableBeforeApply, 1);
        let read = |order: &'static str| provider.read_order(order, move |_| order);
        assert_eq!(
            read("ORD-1").await.unwrap(),
            "ORD-1",
            "another order passes it by"
        );
        assert!(read("ORD-2").await.is_err(), "the order it names takes it");
        assert_eq!(read("ORD-2").await.unwrap(), "ORD-2", "once");
        assert_eq!(provider.requests(Operation::Order), 3);
        // A refund of that order takes a refund fault for it; order reads are scripted apart.
        provider.inject_for(Operation::Refund, "ORD-2", Fault::UnavailableBeforeApply, 1);
        provider.inject(Operation::Order, Fault::UnavailableBeforeApply, 1);
        assert!(provider.refund("k1", "ORD-1", 100).await.is_ok());
        assert!(provider.refund("k2", "ORD-2", 100).await.is_err());
        assert!(
            read("ORD-3").await.is_err(),
            "a fault that names no order takes any"
        );
    }

    #[tokio::test]
    async fn the_applied_hook_sees_each_new_refund_once() {
        let dir = tempfile::tempdir().unwrap();
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let provider = provider(&dir, KeyMode::Honours).on_applied({
            let seen = seen.clone();
            move |refund| seen.lock().unwrap().push(refund.refund_id.clone())
        });
        provider.refund("k1", "ORD-1", 500).await.unwrap();
        provider.refund("k1", "ORD-1", 500).await.unwrap();
        provider.refund("k2", "ORD-2", 900).await.unwrap();
        assert_eq!(*seen.lock().unwrap(), ["re_000001", "re_000002"]);
    }

    #[test]
    fn a_torn_last_line_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        std::fs::write(&path, "{\"refund_id\":\"re_000001\",\"key\":\"k1\"").unwrap();
        let err = FakeProvider::open(&path, KeyMode::Honours).unwrap_err();
        assert!(err.to_string().contains("torn line"), "{err}");
    }

    #[tokio::test]
    async fn the_file_is_read_when_the_provider_opens_and_only_appended_to_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let provider = provider(&dir, KeyMode::Honours);
        let first = provider.refund("k1", "ORD-1", 500).await.unwrap();
        // Written behind the provider's back: a provider that read the file per request would
        // choke on it.
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"not a refund\n").unwrap();
        assert_eq!(provider.lookup("k1").await.unwrap(), Some(first.clone()));
        let second = provider.refund("k2", "ORD-2", 700).await.unwrap();
        assert_eq!(second.refund_id, "re_000002");
        assert_eq!(provider.ledger(), [first, second]);
        drop(provider);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.lines().count(),
            3,
            "appended after the stray line: {text}"
        );
        let err = FakeProvider::open(&path, KeyMode::Honours).unwrap_err();
        assert!(err.to_string().contains("line 2 of the ledger"), "{err}");
    }

    #[tokio::test]
    async fn one_provider_at_a_time_owns_a_ledger() {
        let dir = tempfile::tempdir().unwrap();
        let first = provider(&dir, KeyMode::Honours);
        first.refund("k1", "ORD-1", 500).await.unwrap();
        let err =
            FakeProvider::open(dir.path().join("ledger.jsonl"), KeyMode::Honours).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock, "{err}");
        assert!(err.to_string().contains("another provider"), "{err}");
        drop(first);
        let next = provider(&dir, KeyMode::Honours);
        assert_eq!(
            next.ledger().len(),
            1,
            "the lock went with the first provider"
        );
    }
}
