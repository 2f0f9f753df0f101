//! Payout answers that contradict themselves or change a final status: a service whose answer
//! about a link cannot be believed. Each is off by default and switched on by its share of
//! links (`sim serve --expired-ahead-rate`, `--expired-once-rate`):
//!
//! - **expired ahead**: a link still ACTIVE is answered EXPIRED since now, with its
//!   `expiry_date` still ahead (the link's own, or a year from now when the account's links do
//!   not expire): the answer contradicts itself.
//! - **expired once**: a link still ACTIVE is answered EXPIRED, since now and with an
//!   `expiry_date` of now, at the first read that finds it so, and CLAIMED (since that first
//!   read) at every read after it: a final status that changes to another.
//!
//! Both leave a link alone in the first hour after its order finished ([`FIRST_CLAIM`], when
//! every link is ACTIVE: the run that pays it reads it as it is), and once its life reached a
//! final status. Which links is decided from the seed and the item's id. The first wrong
//! answer of an "expired once" link is remembered in memory, from the simulator's start; the
//! simulator's own account of the links (`sim payouts`) is their true life, as without these.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use super::faults::fixed_draw;
use super::life::{DAY_MS, FIRST_CLAIM, PayoutClock, PayoutStatus};
use super::store::{OrderRow, iso_from_ms};
use paybatch_api::models::OrderStatus;

/// Salts of the two draws (see [`fixed_draw`]).
const AHEAD: u64 = 0xf11b_0001;
const ONCE: u64 = 0xf11b_0002;

/// The shares of links answered against themselves (each from 0 to 1, both 0 by default).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Flips {
    /// Share of ACTIVE links answered EXPIRED with an expiry date ahead.
    pub expired_ahead_rate: f64,
    /// Share of ACTIVE links answered EXPIRED once, then CLAIMED.
    pub expired_once_rate: f64,
}

/// When each "expired once" link was first answered EXPIRED (ms), by item id.
#[derive(Debug, Default)]
pub(crate) struct FirstExpired(Mutex<HashMap<String, i64>>);

impl FirstExpired {
    /// When the link `item_id` was first answered EXPIRED, recording `now_ms` if never, and
    /// whether this is that first answer.
    fn first(&self, item_id: &str, now_ms: i64) -> (i64, bool) {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match seen.get(item_id) {
            Some(at) => (*at, false),
            None => {
                seen.insert(item_id.to_string(), now_ms);
                (now_ms, true)
            }
        }
    }
}

fn chosen(seed: u64, item_id: &str, salt: u64, rate: f64) -> bool {
    rate > 0.0 && fixed_draw(seed, item_id, salt) < rate
}

/// Answers the payouts of the COMPLETED order `o` (`answer`, its full shape) as `flips`
/// chooses. Returns whether it changed anything.
pub(crate) fn payout_answers(
    flips: &Flips,
    seed: u64,
    first: &FirstExpired,
    clock: &PayoutClock,
    o: &OrderRow,
    answer: &mut Value,
) -> bool {
    if o.status != OrderStatus::Completed
        || (flips.expired_ahead_rate <= 0.0 && flips.expired_once_rate <= 0.0)
    {
        return false;
    }
    let done = super::done_ms(o);
    let now = clock.now_ms;
    if now < done.saturating_add(FIRST_CLAIM.as_millis() as i64) {
        return false;
    }
    let Some(items) = answer.get_mut("items").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    for item in items.iter_mut() {
        let Some(id) = item.get("id").and_then(Value::as_str).map(str::to_string) else {
            continue;
        };
        let Some(payout) = item.get_mut("payout").and_then(Value::as_object_mut) else {
            continue;
        };
        let link = clock.link(&id, done);
        if link.status != PayoutStatus::Active {
            continue;
        }
        let (status, since, expiry) = if chosen(seed, &id, AHEAD, flips.expired_ahead_rate) {
            let ahead = link
                .expires_ms
                .unwrap_or_else(|| now.saturating_add(365 * DAY_MS));
            (PayoutStatus::Expired, now, Some(ahead))
        } else if chosen(seed, &id, ONCE, flips.expired_once_rate) {
            match first.first(&id, now) {
                (at, true) => (PayoutStatus::Expired, at, Some(at)),
                (at, false) => (PayoutStatus::Claimed, at, link.expires_ms),
            }
        } else {
            continue;
        };
        payout.insert("status".into(), Value::String(status.as_str().into()));
        payout.insert(
            "status_updated_at".into(),
            Value::String(iso_from_ms(since)),
        );
        match expiry {
            Some(at) => payout.insert("expiry_date".into(), Value::String(iso_from_ms(at))),
            None => payout.remove("expiry_date"),
        };
        changed = true;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_once_link_is_expired_at_its_first_read_only() {
        let first = FirstExpired::default();
        assert_eq!(first.first("E-1", 10), (10, true));
        assert_eq!(first.first("E-1", 20), (10, false));
        assert_eq!(first.first("E-2", 30), (30, true));
    }

    #[test]
    fn a_share_of_zero_chooses_no_link_and_one_every_link() {
        for id in ["E-1", "E-2", "E-ABC"] {
            assert!(!chosen(7, id, AHEAD, 0.0));
            assert!(chosen(7, id, ONCE, 1.0));
        }
    }
}
