//! Orders whose references are written against each other (`paybatch_refs`), answered by a
//! service that garbles their metadata: pieces left out, or a `paybatch_rows` beside the
//! `paybatch_refs`. A row is never paid twice, and a garbled answer never makes paybatch take
//! an order for one of rows it does not hold.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::Method;
use paybatch::batch::order_body::references_in_metadata;
use serde_json::Value;

use crate::support::rewriting::{self, Rewrite};
use crate::support::*;

const PREFIX: &str = "EMP-PAYROLL-2026-11-ENGINEERING";

/// The number of `paybatch_refs` pieces of `m` (`paybatch_refs`, `paybatch_refs_2`, ...).
fn refs_pieces(m: &BTreeMap<String, String>) -> usize {
    (1..=18)
        .take_while(|n| {
            let key = match n {
                1 => "paybatch_refs".to_string(),
                n => format!("paybatch_refs_{n}"),
            };
            m.contains_key(&key)
        })
        .count()
}

fn piece_key(n: usize) -> String {
    match n {
        1 => "paybatch_refs".to_string(),
        n => format!("paybatch_refs_{n}"),
    }
}

/// A proxy in front of `sim` whose answers to `GET /order/{id}` have their metadata changed by
/// `garble`.
async fn garbling(
    sim: &paybatch::sim::SimHandle,
    garble: impl Fn(&mut serde_json::Map<String, Value>) + Send + Sync + 'static,
) -> String {
    let rewrite: Rewrite = Arc::new(move |method, path, status, json| {
        if *method != Method::GET || !path.starts_with("/order/") || status != 200 {
            return;
        }
        if let Some(m) = json.get_mut("metadata").and_then(Value::as_object_mut) {
            garble(m);
        }
    });
    rewriting::start(sim, rewrite).await
}

/// A lost ledger rebuilt from the service through `via` (`reconcile --rebuild`), then the same
/// run straight at `sim`: the one order of [`one_compact_order`] stays the only one, and no row
/// is paid twice.
async fn rebuilt_through_pays_nothing_again(sim: &paybatch::sim::SimHandle, via: &str) {
    let c = Workspace::new();
    rows_file(&c, "nov.csv", PREFIX, 1..=200);
    let rebuilt = rebuild_at(&c, via, "nov", "nov.csv").await;
    let out = run_file(&c, sim, "nov.csv", &["--items-per-order", "200"], &[]).await;
    let twice = paid_twice(sim);
    assert!(
        twice.is_empty() && order_posts(sim) == 1,
        "{} rows paid twice ({} orders sent); rebuild exited {:?}: {}\nrun exited {:?}: {}",
        twice.len(),
        order_posts(sim),
        rebuilt.status.code(),
        output_of(&rebuilt),
        out.status.code(),
        output_of(&out)
    );
}

/// One order of the 200 rows `PREFIX-1` .. `PREFIX-200` paid by ledger `a`, in compact form;
/// returns its metadata.
async fn one_compact_order(
    sim: &paybatch::sim::SimHandle,
    a: &Workspace,
) -> BTreeMap<String, String> {
    rows_file(a, "nov.csv", PREFIX, 1..=200);
    let out = run_file(a, sim, "nov.csv", &["--items-per-order", "200"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_eq!(order_posts(sim), 1, "one order of the 200 rows");
    let meta = sim.orders()[0].metadata.clone();
    assert!(refs_pieces(&meta) >= 3, "{meta:?}");
    meta
}

/// The service leaves out the last piece of a compact order's references (an answer cut short).
/// Another ledger whose rows are among those of that piece must still not pay them: the order
/// holds 200 items, and what its metadata names is fewer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_answered_without_its_last_piece_of_references_is_not_taken_as_whole() {
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    let meta = one_compact_order(&sim, &a).await;
    let last = refs_pieces(&meta);
    let mut cut = meta.clone();
    cut.remove(&piece_key(last));
    let seen = references_in_metadata(&cut);
    let all = references_in_metadata(&meta);
    assert_eq!(all.len(), 200);
    // The rows the cut answer does not name whole: the last of those it names may be cut too.
    let first_lost = seen.iter().zip(&all).take_while(|(s, a)| s == a).count() + 1;
    assert!(first_lost <= 200, "the last piece names rows");

    let via = garbling(&sim, move |m| {
        m.remove(&piece_key(last));
    })
    .await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", PREFIX, first_lost..=200);
    let args = run_args(&b, &via, "bonus.csv", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = paybatch_in(b.dir.path(), &args, &[]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows {first_lost}..=200 paid twice: {twice:?}; B exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    // Whose the rows it does not name are cannot be told: nothing is sent, and B is told why.
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    assert!(
        output_of(&out).contains("--allow-untold-orders"),
        "{}",
        output_of(&out)
    );
}

/// A lost ledger rebuilt from a compact order answered without its last piece of references:
/// the rows of that piece are not taken as unpaid, so the next run pays nothing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_rebuilt_from_a_cut_compact_order_pays_none_of_its_rows_again() {
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    let meta = one_compact_order(&sim, &a).await;
    let last = refs_pieces(&meta);
    let via = garbling(&sim, move |m| {
        m.remove(&piece_key(last));
    })
    .await;
    rebuilt_through_pays_nothing_again(&sim, &via).await;
}

/// The service answers a compact order with a `paybatch_rows` beside its `paybatch_refs`,
/// naming its first row only. paybatch sent no `paybatch_rows`: a rebuilt ledger must not take
/// the order for one of that row alone and pay the 199 others again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_order_answered_with_rows_beside_its_refs_is_not_taken_for_its_first_row() {
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    one_compact_order(&sim, &a).await;
    let via = garbling(&sim, |m| {
        if m.contains_key("paybatch_refs") {
            m.insert("paybatch_rows".into(), Value::String(format!("{PREFIX}-1")));
        }
    })
    .await;
    rebuilt_through_pays_nothing_again(&sim, &via).await;
}

/// As [`an_order_answered_without_its_last_piece_of_references_is_not_taken_as_whole`], for an
/// order whose references fit `|`-joined (`paybatch_rows`): the same answer cut short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_order_answered_without_its_last_piece_of_rows_is_not_taken_as_whole() {
    let sim = start_sim(fast_config(None)).await;
    let a = Workspace::new();
    rows_file(&a, "nov.csv", "EMP", 1..=200);
    let out = run_file(&a, &sim, "nov.csv", &["--items-per-order", "200"], &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let meta = sim.orders()[0].metadata.clone();
    let key = |n: usize| match n {
        1 => "paybatch_rows".to_string(),
        n => format!("paybatch_rows_{n}"),
    };
    let last = (1..=18).take_while(|n| meta.contains_key(&key(*n))).count();
    assert!(last >= 3, "{meta:?}");
    let mut cut = meta.clone();
    cut.remove(&key(last));
    let seen = references_in_metadata(&cut);
    let first_lost = seen
        .iter()
        .zip(&references_in_metadata(&meta))
        .take_while(|(s, a)| s == a)
        .count()
        + 1;
    let via = garbling(&sim, move |m| {
        m.remove(&key(last));
    })
    .await;
    let b = Workspace::new();
    rows_file(&b, "bonus.csv", "EMP", first_lost..=200);
    let args = run_args(&b, &via, "bonus.csv", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = paybatch_in(b.dir.path(), &args, &[]).await;
    let twice = paid_twice(&sim);
    assert!(
        twice.is_empty(),
        "rows {first_lost}..=200 paid twice: {twice:?}; B exited {:?}: {}",
        out.status.code(),
        output_of(&out)
    );
    // Whose the rows it does not name are cannot be told: nothing is sent, and B is told why.
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    assert!(
        output_of(&out).contains("--allow-untold-orders"),
        "{}",
        output_of(&out)
    );
}
