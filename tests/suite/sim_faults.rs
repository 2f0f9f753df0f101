//! Idempotency, the rate limit and the injected faults of the simulator: what a client that
//! retries must be able to rely on.

use std::time::{Duration, Instant};

use crate::support::raw_api::*;
use crate::support::start_sim;
use paybatch::api::models::OrderStatus;
use paybatch::sim::{self, Faults, SimConfig};

#[tokio::test]
async fn a_repeated_key_and_body_replays_the_original_answer() {
    let s = start_sim(fast()).await;
    let api = Api::new(&s);
    let body = amz("10");
    let first = api.post_order("idem-202", None, &body).await;
    assert_eq!(first.status, 202);
    let id = first.json()["id"].as_str().unwrap().to_string();
    api.wait_done(&id).await;
    // Replayed as originally sent: still 202 {id, status: PROCESSING}, byte for byte.
    let again = api.post_order("idem-202", None, &body).await;
    assert_eq!((again.status, &again.body), (202, &first.body));
    assert_eq!(s.orders().len(), 1);

    // An error answer is replayed too.
    let bad = amz("5000");
    let e1 = api.post_order("idem-422", None, &bad).await;
    e1.assert_error(422, "validation_error");
    let e2 = api.post_order("idem-422", None, &bad).await;
    assert_eq!((e2.status, &e2.body), (422, &e1.body));

    // Same key, another body (even a valid one, even only other white space): refused.
    api.post_order("idem-422", None, &amz("10"))
        .await
        .assert_error(400, "idempotency_validation_error");
    let spaced = String::from_utf8(body.clone()).unwrap().replace(',', ", ");
    api.post_order("idem-202", None, spaced.as_bytes())
        .await
        .assert_error(400, "idempotency_validation_error");
    // The key is per API key: another key may use the same idempotency key.
    assert_eq!(s.orders().len(), 1);
    assert_eq!(s.stats().replayed, 2);
    s.shutdown().await;
}

#[tokio::test]
async fn a_key_still_being_handled_gets_the_in_progress_answer() {
    let s = start_sim(SimConfig {
        faults: Faults {
            in_progress_delay: Duration::from_millis(600),
            ..Faults::default()
        },
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let body = amz("12");
    let (first, second) = tokio::join!(api.post_order("race", None, &body), async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        api.post_order("race", None, &body).await
    });
    assert_eq!(first.status, 202);
    second.assert_error(400, "idempotency_in_progress");
    assert_eq!(second.header("retry-after").as_deref(), Some("1"));
    // Once the first is answered, the same request is a replay.
    let third = api.post_order("race", None, &body).await;
    assert_eq!((third.status, &third.body), (202, &first.body));
    assert_eq!(s.orders().len(), 1);
    assert_eq!(s.stats().in_progress, 1);
    s.shutdown().await;
}

/// A client that goes away while its order is being created (killed, timed out) does not cancel
/// the order: like a real service, the simulator finishes the work and keeps the answer under the
/// key, so the client's next request with that key meets the in-progress answer, then the replay.
#[tokio::test]
async fn an_order_whose_client_went_away_is_still_created_and_replayed() {
    let s = start_sim(SimConfig {
        faults: Faults {
            in_progress_delay: Duration::from_millis(800),
            ..Faults::default()
        },
        ..fast()
    })
    .await;
    let mut impatient = Api::new(&s);
    impatient.http = reqwest::Client::builder()
        .timeout(Duration::from_millis(200))
        .build()
        .expect("http client");
    let body = amz("12");
    let gone = impatient.try_post_order(Some("gone"), None, &body).await;
    assert!(gone.is_err(), "the client gave up before the answer");
    let api = Api::new(&s);
    // Still being handled: in progress.
    api.post_order("gone", None, &body)
        .await
        .assert_error(400, "idempotency_in_progress");
    assert_eq!(s.stats().in_progress, 1);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(s.orders().len(), 1, "the order was created all the same");
    let replay = api.post_order("gone", None, &body).await;
    assert_eq!(replay.status, 202);
    assert_eq!(
        replay.json()["id"].as_str(),
        Some(s.orders()[0].id.as_str())
    );
    assert_eq!(s.orders().len(), 1);
    s.shutdown().await;
}

#[tokio::test]
async fn order_creation_is_rate_limited_per_key() {
    let s = start_sim(SimConfig {
        rate_limit_per_minute: 5,
        keys: vec![paybatch::sim::DEFAULT_KEY.into(), "xx_other".into()],
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    // Failed requests count too.
    api.post_order("rl-0", None, b"{oops")
        .await
        .assert_error(400, "bad_request");
    api.post_order("rl-1", None, &amz("0"))
        .await
        .assert_error(422, "validation_error");
    for i in 2..5 {
        assert_eq!(
            api.post_order(&format!("rl-{i}"), None, &amz("10"))
                .await
                .status,
            202
        );
    }
    api.post_order("rl-5", None, &amz("10"))
        .await
        .assert_rate_exceeded();
    // Not stored: the key is still free (and still limited).
    api.post_order("rl-5", None, &amz("10"))
        .await
        .assert_rate_exceeded();
    // Other endpoints and other keys are not limited.
    assert_eq!(api.get("/v2/ping").await.status, 200);
    let other = Api::new(&s).key(Some("xx_other"));
    assert_eq!(other.post_order("rl-5", None, &amz("10")).await.status, 202);
    assert_eq!(s.stats().answered_429, 2);
    assert_eq!(s.orders().len(), 4);
    s.shutdown().await;
}

#[tokio::test]
async fn a_dropped_connection_still_created_the_order_and_the_retry_finds_it() {
    let s = start_sim(SimConfig {
        seed: 3,
        faults: Faults {
            drop_rate: 1.0,
            ..Faults::default()
        },
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let body = amz("30");
    let e = api
        .try_post_order(Some("drop-1"), None, &body)
        .await
        .expect_err("no answer: the connection is dropped");
    assert!(!e.is_status() && !e.is_timeout(), "{e:?}");
    let created = s.orders();
    assert_eq!(created.len(), 1, "created before the drop");
    assert_eq!(created[0].idempotency_key, "drop-1");
    // The same key and body: the stored answer, the same order.
    let retry = api.post_order("drop-1", None, &body).await;
    assert_eq!(retry.status, 202);
    assert_eq!(retry.json()["id"], created[0].id.as_str());
    assert_eq!(s.orders().len(), 1);
    assert_eq!(s.stats().dropped, 1);
    // The server keeps serving after a drop.
    assert_eq!(api.get("/v2/ping").await.status, 200);
    s.shutdown().await;
}

#[tokio::test]
async fn a_kept_server_error_is_replayed_for_its_key_and_never_becomes_an_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("sim.db");
    let failing = SimConfig {
        state: Some(state.clone()),
        faults: Faults {
            stored_error_rate: 1.0,
            ..Faults::default()
        },
        ..fast()
    };
    let s = start_sim(failing).await;
    let api = Api::new(&s);
    let body = amz("10");
    let first = api.post_order("kept-500", None, &body).await;
    first.assert_error(500, "internal_server_error");
    for _ in 0..3 {
        let again = api.post_order("kept-500", None, &body).await;
        assert_eq!((again.status, &again.body), (500, &first.body), "replayed");
    }
    assert!(s.orders().is_empty());
    assert_eq!((s.stats().stored_errors, s.stats().replayed), (1, 3));
    let addr = s.addr();
    s.shutdown().await;

    // The answer outlives a restart without the fault; only a new key creates the order.
    let s = sim::start(
        SimConfig {
            state: Some(state),
            ..fast()
        },
        addr,
    )
    .await
    .expect("restarts");
    let api = Api::new(&s);
    let again = api.post_order("kept-500", None, &body).await;
    assert_eq!((again.status, &again.body), (500, &first.body));
    assert!(s.orders().is_empty());
    let fresh = api.post_order("kept-500-new", None, &body).await;
    assert_eq!(fresh.status, 202);
    assert_eq!(s.orders().len(), 1);
    assert_eq!(s.stats().stored_errors, 0);
    s.shutdown().await;
}

#[tokio::test]
async fn injected_server_errors_store_nothing_and_the_retry_goes_through() {
    let s = start_sim(SimConfig {
        faults: Faults {
            error_rate: 1.0,
            ..Faults::default()
        },
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    for i in 0..4 {
        let r = api.post_order("e5-1", None, &amz("10")).await;
        assert!(
            r.status == 500 || r.status == 503,
            "attempt {i}: {}",
            r.status
        );
        let kind = r.error_type();
        assert!(
            kind == "internal_server_error" || kind == "service_unavailable",
            "{kind}"
        );
    }
    assert!(s.orders().is_empty());
    assert_eq!(s.stats().injected_5xx, 4);
    s.shutdown().await;

    // With a seeded rate, retries with the same key succeed exactly once.
    let s = start_sim(SimConfig {
        seed: 5,
        faults: Faults {
            error_rate: 0.5,
            ..Faults::default()
        },
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let body = amz("10");
    let mut answers = Vec::new();
    for _ in 0..20 {
        let r = api.post_order("e5-2", None, &body).await;
        answers.push(r.status);
        if r.status == 202 {
            break;
        }
    }
    assert_eq!(answers.last(), Some(&202), "{answers:?}");
    assert!(answers.len() > 1, "seed 5 injects a 5xx first: {answers:?}");
    assert_eq!(s.orders().len(), 1);
    // GET /order/{id} gets injected errors too.
    let id = s.orders()[0].id.clone();
    let mut statuses = Vec::new();
    for _ in 0..20 {
        statuses.push(api.get(&format!("/v2/order/{id}")).await.status);
    }
    assert!(
        statuses.contains(&200) && statuses.iter().any(|s| *s >= 500),
        "{statuses:?}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn bursts_of_429_have_their_length_and_store_nothing() {
    let s = start_sim(SimConfig {
        faults: Faults {
            burst_429_rate: 1.0,
            burst_429_len: 3,
            ..Faults::default()
        },
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    for _ in 0..3 {
        api.post_order("burst", None, &amz("10"))
            .await
            .assert_rate_exceeded();
    }
    assert!(s.orders().is_empty());
    assert_eq!(s.stats().answered_429, 3);
    s.shutdown().await;

    let s = start_sim(SimConfig {
        seed: 9,
        faults: Faults {
            burst_429_rate: 0.3,
            burst_429_len: 2,
            ..Faults::default()
        },
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let mut statuses = Vec::new();
    for i in 0..30 {
        statuses.push(
            api.post_order(&format!("b-{i}"), None, &amz("1"))
                .await
                .status,
        );
    }
    // Every run of 429s is a whole number of bursts of 2 (the last may be cut short).
    let mut run = 0;
    for (i, st) in statuses.iter().enumerate() {
        if *st == 429 {
            run += 1;
        } else {
            assert!(run % 2 == 0, "a burst cut short before {i}: {statuses:?}");
            run = 0;
        }
    }
    assert!(
        statuses.contains(&429) && statuses.contains(&202),
        "{statuses:?}"
    );
    let created = statuses.iter().filter(|s| **s == 202).count();
    assert_eq!(s.orders().len(), created);
    s.shutdown().await;
}

#[test]
fn the_default_rate_limit_is_the_published_one() {
    assert_eq!(SimConfig::default().rate_limit_per_minute, 300);
}

/// A 504 when asked for: the service went on, so the order exists and the same request again
/// gets its real answer.
#[tokio::test]
async fn a_timeout_hides_an_order_that_the_retry_finds() {
    let s = start_sim(SimConfig {
        faults: Faults {
            timeout_rate: 1.0,
            ..Faults::default()
        },
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let body = amz("10");
    api.post_order("slow", None, &body)
        .await
        .assert_error(504, "timeout");
    assert_eq!(s.orders().len(), 1, "created behind the timeout");
    assert_eq!(s.stats().timeouts, 1);
    // Every answer is a 504 at rate 1, the replay too; a simulator without the fault on the
    // same state replays the real answer.
    s.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let config = SimConfig {
        state: Some(dir.path().join("sim.db")),
        faults: Faults {
            timeout_rate: 1.0,
            ..Faults::default()
        },
        ..fast()
    };
    let s = start_sim(config.clone()).await;
    Api::new(&s)
        .post_order("slow", None, &body)
        .await
        .assert_error(504, "timeout");
    let id = s.orders()[0].id.clone();
    s.shutdown().await;
    let s = start_sim(SimConfig {
        faults: Faults::default(),
        ..config
    })
    .await;
    let replay = Api::new(&s).post_order("slow", None, &body).await;
    assert_eq!(replay.status, 202);
    assert_eq!(replay.json()["id"], id.as_str());
    assert_eq!(s.orders().len(), 1);
    s.shutdown().await;
}

/// A spending limit reached: every order creation is refused with 403, and the refusal is kept
/// under its key like any answer.
#[tokio::test]
async fn ordering_restricted_refuses_every_order() {
    let s = start_sim(SimConfig {
        ordering_restricted: true,
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let first = api.post_order("limit", None, &amz("10")).await;
    first.assert_error(403, "ordering_restricted");
    let again = api.post_order("limit", None, &amz("10")).await;
    assert_eq!((again.status, &again.body), (403, &first.body));
    assert!(s.orders().is_empty());
    // Reading is not restricted.
    assert_eq!(api.get("/v2/order").await.status, 200);
    s.shutdown().await;
}

#[tokio::test]
async fn latency_is_added_to_every_request() {
    let s = start_sim(SimConfig {
        faults: Faults {
            latency: Duration::from_millis(150),
            latency_jitter: Duration::from_millis(50),
            ..Faults::default()
        },
        ..fast()
    })
    .await;
    let api = Api::new(&s);
    let t = Instant::now();
    assert_eq!(api.get("/v2/ping").await.status, 200);
    let elapsed = t.elapsed();
    assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    s.shutdown().await;
}

#[tokio::test]
async fn a_seed_reproduces_a_run() {
    async fn run(seed: u64) -> Vec<(String, OrderStatus, Option<String>)> {
        let s = start_sim(SimConfig {
            seed,
            failure_rate: 0.5,
            ..fast()
        })
        .await;
        let api = Api::new(&s);
        for i in 0..6 {
            assert_eq!(
                api.post_order(&format!("seed-{i}"), Some("sync"), &amz("10"))
                    .await
                    .status,
                200
            );
        }
        let out = s
            .orders()
            .into_iter()
            .map(|o| {
                (
                    o.items[0].id.clone(),
                    o.status,
                    o.items[0].payout_url.clone(),
                )
            })
            .collect();
        s.shutdown().await;
        out
    }
    let a = run(1234).await;
    assert_eq!(a, run(1234).await);
    assert_ne!(a, run(4321).await);
    let statuses: Vec<&str> = a.iter().map(|r| r.1.as_str()).collect();
    assert!(
        statuses.contains(&"FAILED") && statuses.contains(&"COMPLETED"),
        "{statuses:?}"
    );
}

fn hostile(h: paybatch::sim::Hostile, failure_rate: f64) -> SimConfig {
    SimConfig {
        failure_rate,
        faults: Faults {
            hostile: h,
            ..Faults::default()
        },
        ..fast()
    }
}

/// The hostile answers say what did not happen, each in the published shape: a COMPLETED order
/// without payout links, a total 1000 times over, a FAILED order whose items carry links and a
/// message with escape sequences; every answer about one order is disguised the same way, and
/// the order itself (what was charged, what the balance lost) is not changed.
#[tokio::test]
async fn hostile_answers_disguise_finished_orders_the_same_way_every_time() {
    let completed = start_sim(hostile(
        paybatch::sim::Hostile {
            unlinked_rate: 1.0,
            inflated_total_rate: 1.0,
            ..Default::default()
        },
        0.0,
    ))
    .await;
    let api = Api::new(&completed);
    let before = dec(&api.balance("USD").await);
    let first = api.post_order("hostile-1", None, &amz("10")).await;
    let id = first.json()["id"].as_str().unwrap().to_string();
    let done = api.wait_done(&id).await;
    assert_eq!(done["status"], "COMPLETED");
    let truth = completed.orders()[0].clone();
    assert_eq!(
        dec(done["total_price"].as_str().unwrap()),
        truth.total_price * dec("1000")
    );
    assert!(done["items"][0].get("payout").is_none(), "{done}");
    assert_eq!(dec(&api.balance("USD").await), before - truth.total_price);
    let again = api.get(&format!("/v2/order/{id}")).await.json();
    assert_eq!(again, done, "the same disguise on every answer");
    assert!(completed.stats().disguised >= 2);
    completed.shutdown().await;

    let failed = start_sim(hostile(
        paybatch::sim::Hostile {
            linked_failure_rate: 1.0,
            escape_rate: 1.0,
            ..Default::default()
        },
        1.0,
    ))
    .await;
    let api = Api::new(&failed);
    let first = api.post_order("hostile-2", None, &amz("10")).await;
    let id = first.json()["id"].as_str().unwrap().to_string();
    let done = api.wait_done(&id).await;
    assert_eq!(done["status"], "FAILED");
    assert!(
        done["items"][0]["payout"]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://")),
        "{done}"
    );
    assert!(done["message"].as_str().unwrap().contains("\u{1b}]8;;"));
    assert!(done["message"].as_str().unwrap().contains('\u{202e}'));
    failed.shutdown().await;
}

/// A swapping service answers a new key with an earlier order of the account (the one of the
/// same items), creates nothing, and answers the key the same way again.
#[tokio::test]
async fn a_swapping_service_answers_a_new_key_with_an_earlier_order() {
    // Two orders on a state file, then the same state swapping every new key.
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("sim.db");
    let with = |swap_rate: f64| SimConfig {
        state: Some(path.clone()),
        faults: Faults {
            hostile: paybatch::sim::Hostile {
                swap_rate,
                ..Default::default()
            },
            ..Faults::default()
        },
        ..fast()
    };
    let s = start_sim(with(0.0)).await;
    let api = Api::new(&s);
    let first = api.post_order("earlier-10", None, &amz("10")).await;
    let earlier = first.json()["id"].as_str().unwrap().to_string();
    api.wait_done(&earlier).await;
    let other = api.post_order("earlier-12", None, &amz("12")).await;
    api.wait_done(other.json()["id"].as_str().unwrap()).await;
    s.shutdown().await;

    let s = start_sim(with(1.0)).await;
    let api = Api::new(&s);
    let answer = api.post_order("new-key", None, &amz("10")).await;
    assert_eq!(answer.status, 202);
    assert_eq!(answer.json()["id"].as_str(), Some(earlier.as_str()));
    let replay = api.post_order("new-key", None, &amz("10")).await;
    assert_eq!(replay.json()["id"].as_str(), Some(earlier.as_str()));
    assert_eq!(s.orders().len(), 2, "nothing created");
    assert_eq!(s.stats().swapped, 1);
    s.shutdown().await;
}
