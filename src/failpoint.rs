//! Fail points for the crash tests: `PAYBATCH_FAILPOINT=name` (optionally `name:N` to fire on
//! the N-th hit) aborts the process at that point, as a SIGKILL would; at a write of
//! [`FULL_DISK`] it makes the write fail as on a full disk instead, and the process goes on.
//! Unset, they cost one environment lookup cached for the process.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The points, in the order a row meets them. One more is met only when a file that no longer
/// has a row of an intent never sent is merged: `before_cancel_commit`, after the intent is
/// cancelled and its other rows planned again, before the merge is committed. Two more are met
/// only when the service refuses an order naming some of its items: `before_replan`, after the
/// refusal, before it and the new order of the other rows are committed, and `after_replan`,
/// once they are, before the new order is sent.
pub const POINTS: [&str; 7] = [
    "after_service_check",
    "before_intent",
    "after_intent",
    "after_mark_sending",
    "after_send",
    "after_record",
    "while_polling",
];

fn configured() -> &'static Option<(String, u64)> {
    static CONFIG: OnceLock<Option<(String, u64)>> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let raw = std::env::var("PAYBATCH_FAILPOINT").ok()?;
        let (name, nth) = match raw.split_once(':') {
            Some((n, k)) => (n.to_string(), k.parse().unwrap_or(1)),
            None => (raw, 1),
        };
        Some((name, nth.max(1)))
    })
}

/// Aborts the process when `name` is the configured point (on its N-th hit).
pub fn hit(name: &str) {
    static HITS: AtomicU64 = AtomicU64::new(0);
    if let Some((point, nth)) = configured()
        && point == name
    {
        let n = HITS.fetch_add(1, Ordering::SeqCst) + 1;
        if n >= *nth {
            eprintln!("paybatch: fail point {name} reached (hit {n}): aborting");
            std::process::abort();
        }
    }
}

/// The writes that can be made to fail as on a full disk, the process going on: the ledger's
/// record of the service's answer to a send (`record_answer`), the ledger's record of an order
/// found at the service that a reconciliation adopts (`adopt_order`), and the result file
/// (`write_result`).
pub const FULL_DISK: [&str; 3] = ["record_answer", "adopt_order", "write_result"];

/// Whether the write at `name` fails as on a full disk: `name` is the configured point, and
/// this is its N-th hit or a later one (a full disk stays full).
pub fn full(name: &str) -> bool {
    static HITS: AtomicU64 = AtomicU64::new(0);
    match configured() {
        Some((point, nth)) if point == name => HITS.fetch_add(1, Ordering::SeqCst) + 1 >= *nth,
        _ => false,
    }
}
