//! The life of a payout link: what becomes of each completed item's link after the order is
//! finished. The service answers it on every finished order (`GET /order/{id}`, each item's
//! `payout`: `status` ACTIVE, CLAIMED, CANCELLED or EXPIRED, `status_updated_at`, and
//! `expiry_date` when the account's links expire).
//!
//! Nothing about a link's life is stored: it is a pure function of the life's seed, the item's
//! id, when its order was finished, the account's [`PayoutLife`] settings and the simulated
//! now ([`PayoutClock`]). Reading an order writes nothing, the same seed gives the same lives,
//! and a final status (CLAIMED, CANCELLED, EXPIRED) never changes again as the clock moves on,
//! because the clock of a state only moves forward.
//!
//! One life, for an item finished at `done`:
//! - with probability `claim_share` the recipient claims it, at a time drawn uniformly between
//!   [`FIRST_CLAIM`] and `claim_within_days` days after `done`;
//! - else with probability `cancel_share` it is cancelled, at a time drawn the same way;
//! - else it stays ACTIVE;
//! - when the account has link expiry (`link_expiry_days` > 0), the link expires at `done` plus
//!   that many days: a claim or cancellation drawn at or after that time never happens, the
//!   link is EXPIRED from then on. Without link expiry nothing expires and the answer has no
//!   `expiry_date`.
//!
//! Before its change, a link is ACTIVE since `done`; from it, it is in its final status since
//! the time of the change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::faults::fixed_draw;

/// A day in milliseconds.
pub(crate) const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The earliest a link is claimed or cancelled after its order finished: one hour, so that an
/// order read as it finishes (the run's poll, a sync answer and the same order read again at
/// once) shows every link ACTIVE.
pub const FIRST_CLAIM: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// The longest a setting in days may be (ten years).
pub const MAX_DAYS: u32 = 3650;

/// The account's payout-link settings and how its simulated recipients behave. Stored in the
/// simulator's state when the state is new (like the balances); `paybatch sim account` changes
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PayoutLife {
    /// Share of links claimed (0 to 1).
    pub claim_share: f64,
    /// Share of links cancelled (0 to 1; with `claim_share` at most 1).
    pub cancel_share: f64,
    /// Claims and cancellations happen within this many days of the order finishing (at
    /// least 1).
    pub claim_within_days: u32,
    /// Links expire this many days after the order finished; 0: the account's links do not
    /// expire (`expiry_date` left out).
    pub link_expiry_days: u32,
}

/// Default share of links claimed.
pub const DEFAULT_CLAIM_SHARE: f64 = 0.70;
/// Default share of links cancelled.
pub const DEFAULT_CANCEL_SHARE: f64 = 0.02;
/// Default window of claims and cancellations, in days.
pub const DEFAULT_CLAIM_WITHIN_DAYS: u32 = 10;
/// Default link expiry of the simulated account, in days.
pub const DEFAULT_LINK_EXPIRY_DAYS: u32 = 30;

impl Default for PayoutLife {
    fn default() -> Self {
        PayoutLife {
            claim_share: DEFAULT_CLAIM_SHARE,
            cancel_share: DEFAULT_CANCEL_SHARE,
            claim_within_days: DEFAULT_CLAIM_WITHIN_DAYS,
            link_expiry_days: DEFAULT_LINK_EXPIRY_DAYS,
        }
    }
}

impl PayoutLife {
    /// What is wrong with these settings, if anything.
    pub fn problem(&self) -> Option<String> {
        for (name, share) in [
            ("claim share", self.claim_share),
            ("cancel share", self.cancel_share),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return Some(format!("the {name} must be between 0 and 1, found {share}"));
            }
        }
        if self.claim_share + self.cancel_share > 1.0 {
            return Some(format!(
                "the claim share ({}) and the cancel share ({}) add up to more than 1",
                self.claim_share, self.cancel_share
            ));
        }
        if !(1..=MAX_DAYS).contains(&self.claim_within_days) {
            return Some(format!(
                "claims happen within 1 to {MAX_DAYS} days, found {}",
                self.claim_within_days
            ));
        }
        if self.link_expiry_days > MAX_DAYS {
            return Some(format!(
                "links expire within {MAX_DAYS} days at most, found {}",
                self.link_expiry_days
            ));
        }
        None
    }
}

/// The status of a payout link, as published (`PayoutStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum PayoutStatus {
    Active,
    Claimed,
    Cancelled,
    Expired,
}

impl PayoutStatus {
    pub const ALL: [PayoutStatus; 4] = [
        PayoutStatus::Active,
        PayoutStatus::Claimed,
        PayoutStatus::Cancelled,
        PayoutStatus::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PayoutStatus::Active => "ACTIVE",
            PayoutStatus::Claimed => "CLAIMED",
            PayoutStatus::Cancelled => "CANCELLED",
            PayoutStatus::Expired => "EXPIRED",
        }
    }

    /// CLAIMED, CANCELLED and EXPIRED never change again.
    pub fn is_final(self) -> bool {
        self != PayoutStatus::Active
    }
}

/// A link as read at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkState {
    pub status: PayoutStatus,
    /// Since when (ms since the epoch): the order's finishing while ACTIVE, else the change.
    pub since_ms: i64,
    /// When the link expires; none when the account's links do not expire.
    pub expires_ms: Option<i64>,
}

/// Salts of the two draws of a life (see [`fixed_draw`]).
const FATE: u64 = 0x11fe_0001;
const WHEN: u64 = 0x11fe_0002;

/// Everything a link's status depends on but the link: the life's seed, the settings, and
/// the simulated now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PayoutClock {
    pub seed: u64,
    pub life: PayoutLife,
    pub now_ms: i64,
}

impl PayoutClock {
    /// The link of item `item_id`, whose order finished at `done_ms`, as it stands now.
    pub fn link(&self, item_id: &str, done_ms: i64) -> LinkState {
        let life = &self.life;
        let expires_ms = (life.link_expiry_days > 0)
            .then(|| done_ms.saturating_add(i64::from(life.link_expiry_days) * DAY_MS));
        let fate = fixed_draw(self.seed, item_id, FATE);
        let change = if fate < life.claim_share {
            Some(PayoutStatus::Claimed)
        } else if fate < life.claim_share + life.cancel_share {
            Some(PayoutStatus::Cancelled)
        } else {
            None
        };
        let first = FIRST_CLAIM.as_millis() as i64;
        let window = (i64::from(life.claim_within_days) * DAY_MS - first).max(0);
        let delay = first + (fixed_draw(self.seed, item_id, WHEN) * window as f64) as i64;
        let mut event = change.map(|status| (status, done_ms.saturating_add(delay)));
        if let Some(expiry) = expires_ms
            && event.is_none_or(|(_, at)| at >= expiry)
        {
            event = Some((PayoutStatus::Expired, expiry));
        }
        match event {
            Some((status, at)) if self.now_ms >= at => LinkState {
                status,
                since_ms: at,
                expires_ms,
            },
            _ => LinkState {
                status: PayoutStatus::Active,
                since_ms: done_ms,
                expires_ms,
            },
        }
    }
}

/// One completed item's link in a [`PayoutCensus`] (without its URL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayoutRecord {
    pub order_id: String,
    pub item_id: String,
    pub status: PayoutStatus,
    pub status_updated_at: String,
    /// None when the account's links do not expire.
    pub expiry_date: Option<String>,
}

/// The simulator's own account of every payout link at its simulated now: what a client that
/// reads every finished order now would find.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PayoutCensus {
    /// The simulated now (ISO 8601 UTC).
    pub now: String,
    /// How far the simulated clock is ahead of the wall clock, in seconds.
    pub clock_offset_seconds: i64,
    pub life: PayoutLife,
    /// Completed items per payout status, every status named (0 when none).
    pub payouts: BTreeMap<PayoutStatus, u64>,
    /// Every completed item, oldest order first.
    pub items: Vec<PayoutRecord>,
}

impl PayoutCensus {
    /// Completed items in `status`.
    pub fn count(&self, status: PayoutStatus) -> u64 {
        self.payouts.get(&status).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(life: PayoutLife, now_ms: i64) -> PayoutClock {
        PayoutClock {
            seed: 5,
            life,
            now_ms,
        }
    }

    #[test]
    fn settings_out_of_range_are_named() {
        assert_eq!(PayoutLife::default().problem(), None);
        let bad = [
            PayoutLife {
                claim_share: 1.5,
                ..PayoutLife::default()
            },
            PayoutLife {
                claim_share: 0.9,
                cancel_share: 0.2,
                ..PayoutLife::default()
            },
            PayoutLife {
                claim_within_days: 0,
                ..PayoutLife::default()
            },
            PayoutLife {
                link_expiry_days: MAX_DAYS + 1,
                ..PayoutLife::default()
            },
        ];
        for life in bad {
            assert!(life.problem().is_some(), "{life:?}");
        }
    }

    /// Every link is ACTIVE in the first hour; a final status, once reached, stays with the
    /// same time as the clock moves on; nothing outlives the link's expiry.
    #[test]
    fn a_life_moves_forward_only() {
        let life = PayoutLife::default();
        let done = 1_700_000_000_000;
        let first = FIRST_CLAIM.as_millis() as i64;
        for i in 0..500 {
            let id = format!("E-{i:09}");
            let at = |now| clock(life, now).link(&id, done);
            assert_eq!(at(done + first - 1).status, PayoutStatus::Active);
            assert_eq!(
                at(done).expires_ms,
                Some(done + 30 * DAY_MS),
                "expiry from the account's setting"
            );
            let end = at(done + 31 * DAY_MS);
            assert!(end.status.is_final(), "{id} still active after its expiry");
            let mut seen = PayoutStatus::Active;
            for day in 0..=40 {
                let now = at(done + day * DAY_MS);
                if seen.is_final() {
                    assert_eq!(now, end, "{id} changed after a final status");
                }
                seen = now.status;
            }
        }
    }

    #[test]
    fn without_link_expiry_nothing_expires() {
        let life = PayoutLife {
            link_expiry_days: 0,
            claim_share: 0.0,
            cancel_share: 0.0,
            ..PayoutLife::default()
        };
        let state = clock(life, i64::MAX).link("E-1", 0);
        assert_eq!(state.status, PayoutStatus::Active);
        assert_eq!(state.expires_ms, None);
    }
}
