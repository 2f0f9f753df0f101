//! The simulator's payout links live a seeded life: ACTIVE when their order finishes, then
//! claimed or cancelled after a while, or expired when the account has link expiry, as the
//! simulated clock moves; a final status never changes again; the shares are honoured; the
//! same seed gives the same lives; and all of it can be set up on the embedded simulator's
//! state with `paybatch sim account`, `sim clock` and `sim payouts`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::support::raw_api::{Api, bytes, fast, item, num, order};
use crate::support::start_sim as start;
use chrono::DateTime;
use paybatch::sim::{PayoutCensus, PayoutLife, PayoutStatus, SimConfig, SimHandle};
use serde_json::Value;

const DAY: Duration = Duration::from_secs(24 * 3600);
const DAY_MS: i64 = 24 * 3600 * 1000;

fn ms(text: &str) -> i64 {
    DateTime::parse_from_rfc3339(text)
        .unwrap_or_else(|e| panic!("`{text}` is not a date-time: {e}"))
        .timestamp_millis()
}

/// Places `orders` async orders of `items` payout-link items each and waits until they are
/// finished; their ids.
async fn place(api: &Api, orders: usize, items: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for n in 0..orders {
        let body = order("USD", vec![item("AMZ-US", num("10")); items]);
        let r = api
            .post_order(&format!("life-{n}"), None, &bytes(&body))
            .await;
        assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
        let id = r.json()["id"].as_str().expect("order id").to_string();
        assert_eq!(api.wait_done(&id).await["status"], "COMPLETED");
        ids.push(id);
    }
    ids
}

/// One link as a client reads it: status, since when, expiry.
#[derive(Debug, Clone, PartialEq)]
struct Link {
    status: String,
    since: String,
    expiry: Option<String>,
    completed_at: String,
}

/// Every item's link, read with `GET /order/{id}`, by item id.
async fn read_links(api: &Api, ids: &[String]) -> BTreeMap<String, Link> {
    let mut links = BTreeMap::new();
    for id in ids {
        let o = api.get(&format!("/v2/order/{id}")).await.json();
        let completed_at = o["completed_at"]
            .as_str()
            .expect("completed_at")
            .to_string();
        for it in o["items"].as_array().expect("items") {
            let p = &it["payout"];
            let link = Link {
                status: p["status"].as_str().expect("status").to_string(),
                since: p["status_updated_at"].as_str().expect("since").to_string(),
                expiry: p.get("expiry_date").map(|e| {
                    e.as_str()
                        .expect("expiry_date is a string when present")
                        .to_string()
                }),
                completed_at: completed_at.clone(),
            };
            links.insert(it["id"].as_str().expect("item id").to_string(), link);
        }
    }
    links
}

fn counts(links: &BTreeMap<String, Link>) -> BTreeMap<String, u64> {
    let mut counts: BTreeMap<String, u64> = PayoutStatus::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), 0))
        .collect();
    for link in links.values() {
        *counts.entry(link.status.clone()).or_default() += 1;
    }
    counts
}

fn census_counts(census: &PayoutCensus) -> BTreeMap<String, u64> {
    PayoutStatus::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), census.count(*s)))
        .collect()
}

/// What the client reads agrees with the simulator's own count, item by item.
fn assert_agrees(links: &BTreeMap<String, Link>, census: &PayoutCensus) {
    assert_eq!(counts(links), census_counts(census));
    assert_eq!(census.items.len(), links.len());
    for record in &census.items {
        let link = &links[&record.item_id];
        assert_eq!(link.status, record.status.as_str(), "{}", record.item_id);
        assert_eq!(link.since, record.status_updated_at, "{}", record.item_id);
        assert_eq!(link.expiry, record.expiry_date, "{}", record.item_id);
    }
}

async fn advance(sim: &SimHandle, by: Duration) {
    sim.advance_clock(by).expect("the clock moves forward");
}

/// With the default account (links expire 30 days after payment), every link is ACTIVE when
/// its order is read as it finishes; five days on, some are claimed or cancelled, each since a
/// time within those five days; a day past the expiry, none is ACTIVE, the ones expired since
/// exactly their expiry date, and a final status read at five days is read unchanged; a
/// hundred days on, nothing changed again.
#[tokio::test]
async fn links_follow_their_life_as_the_clock_moves() {
    let sim = start(fast()).await;
    let api = Api::new(&sim);
    let ids = place(&api, 3, 100).await;

    let fresh = read_links(&api, &ids).await;
    assert_eq!(fresh.len(), 300);
    for (id, link) in &fresh {
        assert_eq!(link.status, "ACTIVE", "{id}");
        assert_eq!(
            link.since, link.completed_at,
            "{id}: ACTIVE since completion"
        );
        let expiry = link
            .expiry
            .as_deref()
            .expect("the default account's links expire");
        assert_eq!(
            ms(expiry) - ms(&link.completed_at),
            30 * DAY_MS,
            "{id}: the account's link expiry, not the product's"
        );
    }
    assert_agrees(&fresh, &sim.payouts().expect("census"));

    advance(&sim, 5 * DAY).await;
    let day5 = read_links(&api, &ids).await;
    let c5 = counts(&day5);
    assert!(c5["CLAIMED"] > 0 && c5["ACTIVE"] > 0, "{c5:?}");
    assert_eq!(c5["EXPIRED"], 0, "{c5:?}");
    for (id, link) in day5.iter().filter(|(_, l)| l.status != "ACTIVE") {
        let after = ms(&link.since) - ms(&link.completed_at);
        assert!(
            (3600 * 1000..=5 * DAY_MS + 60_000).contains(&after),
            "{id}: {} {after} ms after completion",
            link.status
        );
    }
    assert_agrees(&day5, &sim.payouts().expect("census"));

    advance(&sim, 26 * DAY).await;
    let day31 = read_links(&api, &ids).await;
    let c31 = counts(&day31);
    assert_eq!(c31["ACTIVE"], 0, "{c31:?}");
    assert!(
        c31["EXPIRED"] > 0 && c31["CLAIMED"] > c5["CLAIMED"],
        "{c31:?}"
    );
    for (id, link) in &day31 {
        if link.status == "EXPIRED" {
            assert_eq!(Some(&link.since), link.expiry.as_ref(), "{id}");
        }
        let before = &day5[id];
        if before.status != "ACTIVE" {
            assert_eq!(link, before, "{id}: a final status changed");
        }
    }
    assert_agrees(&day31, &sim.payouts().expect("census"));

    advance(&sim, 100 * DAY).await;
    assert_eq!(
        read_links(&api, &ids).await,
        day31,
        "final statuses never change"
    );
    sim.shutdown().await;
}

/// Over 2,000 links, half claimed and a tenth cancelled within ten days, on an account whose
/// links do not expire: eleven days on the counts are near the shares, nothing expired, the
/// rest still ACTIVE, and no answer carries an `expiry_date`.
#[tokio::test]
async fn shares_are_honoured_and_links_without_expiry_have_no_expiry_date() {
    let life = PayoutLife {
        claim_share: 0.5,
        cancel_share: 0.1,
        claim_within_days: 10,
        link_expiry_days: 0,
    };
    let sim = start(SimConfig {
        payout_life: life,
        ..fast()
    })
    .await;
    let api = Api::new(&sim);
    let ids = place(&api, 10, 200).await;
    advance(&sim, 11 * DAY).await;
    let links = read_links(&api, &ids).await;
    assert_eq!(links.len(), 2000);
    assert!(links.values().all(|l| l.expiry.is_none()));
    let census = sim.payouts().expect("census");
    assert_eq!(census.life, life);
    assert_agrees(&links, &census);
    let c = counts(&links);
    assert!((900..=1100).contains(&c["CLAIMED"]), "{c:?}");
    assert!((150..=250).contains(&c["CANCELLED"]), "{c:?}");
    assert!((700..=900).contains(&c["ACTIVE"]), "{c:?}");
    assert_eq!(c["EXPIRED"], 0, "{c:?}");
    sim.shutdown().await;
}

/// The statuses of a census, in the order of its items.
fn statuses(census: &PayoutCensus) -> Vec<(String, PayoutStatus)> {
    census
        .items
        .iter()
        .map(|r| (r.item_id.clone(), r.status))
        .collect()
}

/// Two simulators with the same seed and the same requests give the same links the same
/// lives; another seed gives other lives.
#[tokio::test]
async fn the_same_seed_gives_the_same_lives() {
    let mut runs = Vec::new();
    for seed in [42, 42, 43] {
        let sim = start(SimConfig { seed, ..fast() }).await;
        let api = Api::new(&sim);
        place(&api, 2, 100).await;
        advance(&sim, 40 * DAY).await;
        runs.push(statuses(&sim.payouts().expect("census")));
        sim.shutdown().await;
    }
    assert_eq!(runs[0].len(), 200);
    assert_eq!(runs[0], runs[1]);
    let only = |run: &[(String, PayoutStatus)]| run.iter().map(|(_, s)| *s).collect::<Vec<_>>();
    assert_ne!(only(&runs[0]), only(&runs[2]));
}

async fn paybatch(dir: &Path, args: &[&str]) -> std::process::Output {
    crate::support::paybatch_in(dir, args, &[]).await
}

fn json_of(out: &std::process::Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::output_of(out)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", crate::support::output_of(out)))
}

/// The embedded simulator's state is set up before a rehearsal (links expire after 14 days),
/// the batch is paid with `paybatch run`, the clock is moved past the expiry, and both the
/// simulator's own count (`sim payouts`) and the orders read again from a simulator serving
/// that state say every link is final; the clock cannot be set back.
#[tokio::test]
async fn the_embedded_state_is_set_up_and_moved_through_the_command() {
    let ws = crate::support::Workspace::new();
    let dir = ws.dir.path();
    ws.copy(crate::support::SAMPLE, "recipients.csv");
    let rows = crate::support::input_rows(&ws.path("recipients.csv")) as u64;

    let none = paybatch(dir, &["sim", "payouts"]).await;
    assert_eq!(
        none.status.code(),
        Some(2),
        "{}",
        crate::support::output_of(&none)
    );
    assert!(
        !ws.path("paybatch.sim.db").exists(),
        "reading created a state"
    );

    let account = json_of(
        &paybatch(
            dir,
            &["sim", "account", "--link-expiry-days", "14", "--json"],
        )
        .await,
    );
    assert_eq!(account["link_expiry_days"], 14);
    let run = paybatch(dir, &["run", "recipients.csv"]).await;
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        crate::support::output_of(&run)
    );

    let fresh = json_of(&paybatch(dir, &["sim", "payouts", "--json"]).await);
    assert_eq!(fresh["payouts"]["ACTIVE"], rows, "{fresh}");
    for record in fresh["items"].as_array().expect("items") {
        let since = ms(record["status_updated_at"].as_str().expect("since"));
        let expiry = ms(record["expiry_date"].as_str().expect("expiry"));
        assert_eq!(expiry - since, 14 * DAY_MS, "{record}");
    }

    let clock = json_of(&paybatch(dir, &["sim", "clock", "--advance", "15d", "--json"]).await);
    assert_eq!(clock["clock_offset_seconds"], 15 * 24 * 3600);
    let later = json_of(&paybatch(dir, &["sim", "payouts", "--json"]).await);
    assert_eq!(later["payouts"]["ACTIVE"], 0, "{later}");
    let finals: u64 = ["CLAIMED", "CANCELLED", "EXPIRED"]
        .iter()
        .map(|s| later["payouts"][s].as_u64().expect("count"))
        .sum();
    assert_eq!(finals, rows);
    assert!(later["payouts"]["EXPIRED"].as_u64() > Some(0), "{later}");

    // A simulator serving the same state answers the same statuses.
    let state = ws.path("paybatch.sim.db");
    let sim = start(SimConfig {
        state: Some(state.clone()),
        ..SimConfig::default()
    })
    .await;
    let api = Api::new(&sim);
    let ids: Vec<String> = later["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|r| r["order_id"].as_str().expect("order id").to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let links = read_links(&api, &ids).await;
    let census: PayoutCensus = serde_json::from_value(later.clone()).expect("a census");
    assert_agrees(&links, &census);
    sim.shutdown().await;

    // The clock never goes back.
    let back = paybatch_sim_start_behind(&state).await;
    assert!(back.contains("never goes back"), "{back}");
}

/// Starting a simulator on `state` with a clock offset behind the state's: the error.
async fn paybatch_sim_start_behind(state: &Path) -> String {
    let config = SimConfig {
        state: Some(state.to_path_buf()),
        clock_offset: Some(DAY),
        ..SimConfig::default()
    };
    match paybatch::sim::start(config, "127.0.0.1:0".parse().expect("addr")).await {
        Ok(sim) => {
            sim.shutdown().await;
            "started".into()
        }
        Err(e) => e.to_string(),
    }
}

/// The answers against themselves that `sim serve --expired-ahead-rate` and
/// `--expired-once-rate` switch on: nothing changes in the first hour (a run reads every link
/// ACTIVE); from then on an "expired ahead" link is answered EXPIRED with its expiry date still
/// ahead at every read, and an "expired once" link EXPIRED (expiring at that moment) at the
/// first read and CLAIMED since that moment at every read after; the simulator's own account
/// keeps the links' true life.
#[tokio::test]
async fn payout_flips_answer_a_live_link_against_itself_after_the_first_hour() {
    let life = PayoutLife {
        claim_share: 0.0,
        cancel_share: 0.0,
        ..PayoutLife::default()
    };
    let with = |ahead: f64, once: f64| SimConfig {
        payout_life: life,
        faults: paybatch::sim::Faults {
            flips: paybatch::sim::Flips {
                expired_ahead_rate: ahead,
                expired_once_rate: once,
            },
            ..paybatch::sim::Faults::default()
        },
        ..fast()
    };

    let ahead = start(with(1.0, 0.0)).await;
    let api = Api::new(&ahead);
    let ids = place(&api, 1, 3).await;
    let fresh = read_links(&api, &ids).await;
    assert!(fresh.values().all(|l| l.status == "ACTIVE"), "{fresh:?}");
    advance(&ahead, Duration::from_secs(2 * 3600)).await;
    let now = ms(&ahead.payouts().expect("census").now);
    for _ in 0..2 {
        for (id, link) in read_links(&api, &ids).await {
            assert_eq!(link.status, "EXPIRED", "{id}");
            let expiry = ms(link.expiry.as_deref().expect("an expiry date"));
            assert!(expiry > now + 20 * DAY_MS, "{id}: expiry ahead of {now}");
        }
    }
    let census = ahead.payouts().expect("census");
    assert_eq!(census.count(PayoutStatus::Active), 3, "the true life");
    ahead.shutdown().await;

    let once = start(with(0.0, 1.0)).await;
    let api = Api::new(&once);
    let ids = place(&api, 1, 3).await;
    let fresh = read_links(&api, &ids).await;
    assert!(fresh.values().all(|l| l.status == "ACTIVE"), "{fresh:?}");
    advance(&once, Duration::from_secs(2 * 3600)).await;
    let first = read_links(&api, &ids).await;
    for (id, link) in &first {
        assert_eq!(link.status, "EXPIRED", "{id}");
        assert_eq!(link.expiry.as_ref(), Some(&link.since), "{id}");
    }
    for _ in 0..2 {
        for (id, link) in read_links(&api, &ids).await {
            assert_eq!(link.status, "CLAIMED", "{id}");
            assert_eq!(link.since, first[&id].since, "{id}: since the first read");
        }
    }
    assert_eq!(
        once.payouts().expect("census").count(PayoutStatus::Active),
        3
    );
    once.shutdown().await;
}
