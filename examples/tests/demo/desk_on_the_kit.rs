//! The desk's scenarios played by the chaos kit: each script as a kit story
//! (`refund_desk::kit_story`), on the shop's tools and a SQLite file, the fake payment provider
//! behind the kit's fault proxy (which plays the scripts' faults in the provider's place), and
//! checked against the provider's ledger: every call answered once, every refund applied at most
//! once and accounted for, nothing left unknown, no refund for a refused call.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::play;
use serde_json::{Value, json};
use toolgate::dispatch::SystemClock;
use toolgate::prelude::*;
use toolgate::store::{OperationStore, SqliteStore};
use toolgate::tool::Delivery;
use toolgate_demo::fake_provider::Refund;
use toolgate_demo::payments::client::HttpPayments;
use toolgate_demo::payments::server::PaymentsServer;
use toolgate_demo::refund_desk::kit_story::{DELIVERY_ACT, PROVIDER_REFUND_ACT, kit_story};
use toolgate_demo::refund_desk::{StoreSpec, create_tables, worker};
use toolgate_demo::shop::{self, Payments, Provider};
use toolgate_test::chaos::{Applied, FaultProxy, Played, Stage, Story, Upstream};

/// The shop on the kit: the provider in process with its ledger in `dir`, the fault proxy in
/// front of it, and the stage the stories play on.
struct KitShop {
    proxy: FaultProxy,
    payments: HttpPayments,
    stage: Stage,
    ledger: PathBuf,
    /// The keys of the refunds made at the provider by hand: no operation's.
    by_hand: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl KitShop {
    async fn start() -> KitShop {
        let dir = tempfile::tempdir().unwrap();
        let ledger = dir.path().join("ledger.jsonl");
        let provider = PaymentsServer::open(&ledger, None)
            .unwrap()
            .spawn()
            .await
            .unwrap();
        let proxy = FaultProxy::start(provider).await.unwrap();
        // The desk's default: the tools wait 2 s for the provider.
        let payments = HttpPayments::new(&proxy.url(), Duration::from_secs(2)).unwrap();
        let path = dir.path().join("operations.db");
        create_tables(&StoreSpec::Sqlite(path.clone()))
            .await
            .unwrap();
        let delivery = Arc::new(Mutex::new(Delivery::Direct));
        let by_hand = Arc::new(Mutex::new(Vec::new()));
        let stage = Stage::new(
            {
                let path = path.clone();
                move || {
                    let path = path.clone();
                    async move {
                        let store = SqliteStore::open(&path).await?;
                        Ok(Arc::new(store) as Arc<dyn OperationStore>)
                    }
                }
            },
            {
                let (payments, delivery) = (payments.clone(), Arc::clone(&delivery));
                move |store| {
                    let registry = match *delivery.lock().unwrap() {
                        Delivery::Outbox => shop::outbox_registry(),
                        _ => shop::registry(),
                    };
                    Dispatcher::builder(registry)
                        .store(store)
                        .state(Provider::new(payments.clone()))
                        .jitter_seed(0x7e57)
                        .build()
                }
            },
        )
        .with_plan(proxy.plan().clone())
        .with_worker({
            let payments = payments.clone();
            move |store| worker(store, payments.clone(), Arc::new(SystemClock)).unwrap()
        })
        .with_act(DELIVERY_ACT, move |args: Value| {
            let mode = match args["mode"].as_str() {
                Some("outbox") => Delivery::Outbox,
                _ => Delivery::Direct,
            };
            *delivery.lock().unwrap() = mode;
            async move { Ok(Value::Null) }
        })
        .with_act(PROVIDER_REFUND_ACT, {
            let by_hand = Arc::clone(&by_hand);
            move |args: Value| {
                let payments = payments.clone();
                let by_hand = Arc::clone(&by_hand);
                async move {
                    let key = args["key"].as_str().unwrap_or_default().to_owned();
                    let order = args["order_id"].as_str().unwrap_or_default().to_owned();
                    let cents = args["amount_cents"].as_u64().unwrap_or_default();
                    by_hand.lock().unwrap().push(key.clone());
                    Payments::refund(&payments, &key, &order, cents)
                        .await
                        .map(|receipt| serde_json::to_value(receipt).unwrap())
                        .map_err(|err| err.to_string())
                }
            }
        });
        KitShop {
            proxy,
            payments: HttpPayments::new(&format!("http://{provider}"), Duration::from_secs(2))
                .unwrap(),
            stage,
            ledger,
            by_hand,
            _dir: dir,
        }
    }

    /// Plays `story`, and waits for the provider to answer every request the proxy sent it, so
    /// that its ledger is final.
    async fn play(&self, story: &Story) -> Played {
        let played = toolgate_test::chaos::play(&self.stage, story)
            .await
            .unwrap();
        let settled = self.proxy.plan().wait_for(|records| {
            records
                .iter()
                .all(|record| record.upstream != Upstream::Sent)
        });
        tokio::time::timeout(Duration::from_secs(60), settled)
            .await
            .expect("the provider answers what it was sent");
        played
    }

    /// The refunds of the provider's ledger, by order and key, but those made by hand.
    fn applied(&self) -> Vec<Applied> {
        let by_hand = self.by_hand.lock().unwrap().clone();
        let text = std::fs::read_to_string(&self.ledger).unwrap_or_default();
        text.lines()
            .map(|line| serde_json::from_str::<Refund>(line).unwrap())
            .filter(|refund| !by_hand.contains(&refund.key))
            .map(|refund| Applied::new(format!("refund {}", refund.order_id), Some(refund.key)))
            .collect()
    }
}

/// The desk's scenarios, by file name.
fn scenarios() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut scenarios: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jsonl"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    scenarios.sort();
    scenarios
}

/// What the provider holds at the end: refunds, CRM updates and notifications by order, as the
/// desk prints it last (its request counts aside: the kit's final reconcile pass asks too).
fn holdings(ledger: &Value) -> Value {
    json!({"ledger": ledger["ledger"], "crm": ledger["crm"], "notify": ledger["notify"]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_of_the_desk_keeps_toolgate_s_promises_on_the_kit() {
    let scenarios = scenarios();
    assert_eq!(scenarios.len(), 15, "every scenario of examples/scenarios");
    for (name, script) in scenarios {
        let text = kit_story(&script).unwrap_or_else(|why| panic!("{name}: {why}"));
        let story = Story::from_jsonl(&text).unwrap_or_else(|err| panic!("{name}: {err}"));
        let shop = KitShop::start().await;
        let played = shop.play(&story).await;
        if let Err(violations) = played.check(|| shop.applied()) {
            panic!("{name}:\n{violations}\nthe story:\n{text}");
        }
        // The desk, given the same script, leaves the provider holding the same.
        let desk =
            tokio::task::spawn_blocking(move || play(&String::from_utf8_lossy(&script), &[]))
                .await
                .unwrap();
        let desk_ledger = desk.last().expect("the desk prints the ledger last");
        let kit_ledger = shop.payments.ledger().await.unwrap();
        assert!(kit_ledger["ledger"]["ORD-1001"].is_object(), "{kit_ledger}");
        assert_eq!(
            holdings(&kit_ledger),
            holdings(desk_ledger),
            "{name}: the kit's story and the desk's script end alike"
        );
    }
}
