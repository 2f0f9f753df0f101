//! Attacks on two simulators sharing one state file (the state's transactions that read then
//! write take its write lock when they begin): many orders from both at once, sync and async, and the same
//! idempotency key sent to both at the same moment. No 500, no identifier drawn twice, no order
//! lost or made twice, the balance debited once per order.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use paybatch::sim::SimConfig;

use crate::support::raw_api::{Api, amz, dec, fast};
use crate::support::{start_sim, until_orders_finish};

/// Orders each simulator is sent at once.
const EACH: usize = 100;
/// Keys sent to both simulators at the same moment.
const SHARED: usize = 8;

/// Two simulators without a rate limit serving one state file in `dir`.
async fn two_simulators_on_one_state(
    dir: &tempfile::TempDir,
) -> (paybatch::sim::SimHandle, paybatch::sim::SimHandle) {
    let config = SimConfig {
        state: Some(dir.path().join("sim-state.db")),
        rate_limit_per_minute: 0,
        ..fast()
    };
    (start_sim(config.clone()).await, start_sim(config).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_simulators_on_one_state_under_load_answer_every_order_once() {
    let dir = tempfile::tempdir().expect("dir");
    let (a, b) = two_simulators_on_one_state(&dir).await;
    let before = a.balance("USD");

    let mut sends = tokio::task::JoinSet::new();
    for (tag, sim) in [("a", &a), ("b", &b)] {
        for i in 0..EACH {
            let api = Api::new(sim);
            let key = format!("{tag}-{i}");
            let mode = if i % 2 == 0 { "sync" } else { "async" };
            sends.spawn(async move {
                (
                    key.clone(),
                    api.post_order(&key, Some(mode), &amz("10")).await,
                )
            });
        }
    }
    let mut answered: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let all = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(sent) = sends.join_next().await {
            let (key, reply) = sent.expect("send task");
            assert!(
                (200..300).contains(&reply.status),
                "{key}: {} {}",
                reply.status,
                String::from_utf8_lossy(&reply.body)
            );
            let id = reply.json()["id"].as_str().expect("order id").to_string();
            answered.entry(key).or_default().insert(id);
        }
    })
    .await;
    assert!(all.is_ok(), "every order answered within 60 s");
    until_orders_finish(&a, Duration::from_secs(30)).await;

    assert_eq!(answered.len(), 2 * EACH);
    for (key, ids) in &answered {
        assert_eq!(ids.len(), 1, "{key}: one order: {ids:?}");
    }
    let orders = a.orders();
    assert_eq!(orders.len(), 2 * EACH, "no order lost nor made twice");
    assert_eq!(b.orders().len(), orders.len(), "both read the same state");
    let mut ids = BTreeSet::new();
    let mut spent = dec("0");
    for o in &orders {
        assert!(ids.insert(o.id.clone()), "order id {} twice", o.id);
        spent += o.total_price;
        for it in &o.items {
            assert!(ids.insert(it.id.clone()), "item id {} twice", it.id);
            let url = it.payout_url.clone().expect("completed");
            assert!(ids.insert(url.clone()), "payout link {url} twice");
        }
    }
    let by_key: BTreeSet<&str> = orders.iter().map(|o| o.idempotency_key.as_str()).collect();
    assert_eq!(by_key.len(), orders.len(), "one order per key");
    assert_eq!(a.balance("USD"), before - spent, "each order debited once");
    assert_eq!(b.balance("USD"), a.balance("USD"));
    a.shutdown().await;
    b.shutdown().await;
}

/// The same request under the same idempotency key sent to both simulators at the same moment
/// (a client retrying through the other one): the service makes one order and answers it to
/// both. Each simulator reserves a key in its own memory only: unless the transaction that
/// stores the order looks for the other simulator's answer under the key first, two orders and
/// two debits are made for one key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_key_sent_to_two_simulators_sharing_a_state_at_once_makes_one_order() {
    let dir = tempfile::tempdir().expect("dir");
    let (a, b) = two_simulators_on_one_state(&dir).await;
    let mut sends = tokio::task::JoinSet::new();
    for i in 0..SHARED {
        for sim in [&a, &b] {
            let api = Api::new(sim);
            let key = format!("shared-{i}");
            sends.spawn(async move {
                let reply = api.post_order(&key, Some("sync"), &amz("10")).await;
                (key, reply)
            });
        }
    }
    let mut answered: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let all = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(sent) = sends.join_next().await {
            let (key, reply) = sent.expect("send task");
            // A 409 (still in progress) would be a fair answer too; a 5xx is not.
            assert!(reply.status < 500, "{key}: {}", reply.status);
            if reply.status == 200 {
                let id = reply.json()["id"].as_str().expect("order id").to_string();
                answered.entry(key).or_default().insert(id);
            }
        }
    })
    .await;
    assert!(all.is_ok(), "every order answered within 60 s");
    for (key, ids) in &answered {
        assert_eq!(
            ids.len(),
            1,
            "{key}: one order, whichever simulator answered: {ids:?}"
        );
    }
    let per_key = a
        .orders()
        .iter()
        .fold(BTreeMap::<String, usize>::new(), |mut m, o| {
            *m.entry(o.idempotency_key.clone()).or_default() += 1;
            m
        });
    assert!(
        per_key.values().all(|n| *n == 1),
        "one order per key in the shared state: {per_key:?}"
    );
    a.shutdown().await;
    b.shutdown().await;
}
