//! Unclaimed value as a liability: what the paying balances were charged for payout links
//! not claimed yet (ACTIVE), expired or cancelled, per currency of the balance that paid
//! (never the products' face value, which may be in another currency), and its ageing: how
//! many days passed since the payment (when the row's order became final), in the buckets
//! 0-30, 31-60, 61-90 and over 90. `payouts` sums it per batch, the period's page and `--json`
//! over the batches of the period. A row paid before the ledger recorded charges has no charge
//! to count and is left out.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::ledger::PayoutStatus;
use crate::ledger::payouts::PayoutRow;
use crate::money::{display_amount, in_currency};

/// The ageing buckets, in days since payment.
pub const AGES: [&str; 4] = ["0-30", "31-60", "61-90", "over_90"];

/// The link statuses counted, as `--json` names them.
pub const KINDS: [&str; 3] = ["outstanding", "expired", "cancelled"];

/// Rows of one currency and what their paying balance was charged for them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Charged {
    pub rows: i64,
    #[serde(with = "rust_decimal::serde::str")]
    pub charged: Decimal,
}

/// Paying currency -> rows and charge.
pub type PerCurrency = BTreeMap<String, Charged>;

/// What links not claimed cost the paying balances, per status and per paying currency, and
/// per age since payment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unclaimed {
    /// ACTIVE links: value still owed to recipients.
    pub outstanding_charged: PerCurrency,
    /// EXPIRED links not reissued yet.
    pub expired_charged: PerCurrency,
    /// CANCELLED links.
    pub cancelled_charged: PerCurrency,
    /// Per status (`outstanding`, `expired`, `cancelled`), per age bucket ([`AGES`]), per
    /// paying currency. Every status and bucket is present, empty when nothing falls in it.
    pub ageing: BTreeMap<&'static str, BTreeMap<&'static str, PerCurrency>>,
}

impl Default for Unclaimed {
    fn default() -> Self {
        let buckets: BTreeMap<&'static str, PerCurrency> =
            AGES.iter().map(|a| (*a, PerCurrency::new())).collect();
        Unclaimed {
            outstanding_charged: PerCurrency::new(),
            expired_charged: PerCurrency::new(),
            cancelled_charged: PerCurrency::new(),
            ageing: KINDS.iter().map(|k| (*k, buckets.clone())).collect(),
        }
    }
}

/// The bucket of a payment made at `paid` (RFC 3339), seen at `now`; `None` when the time
/// cannot be read. A payment dated after `now` is 0 days old.
pub fn age_of(paid: &str, now: DateTime<Utc>) -> Option<&'static str> {
    let paid = DateTime::parse_from_rfc3339(paid).ok()?;
    let days = (now - paid.with_timezone(&Utc)).num_days().max(0);
    Some(match days {
        0..=30 => AGES[0],
        31..=60 => AGES[1],
        61..=90 => AGES[2],
        _ => AGES[3],
    })
}

fn add_to(map: &mut PerCurrency, currency: &str, rows: i64, charged: Decimal) {
    let c = map.entry(currency.to_string()).or_default();
    c.rows += rows;
    c.charged += charged;
}

impl Unclaimed {
    /// Counts one COMPLETED row at `now`: by its link's status, what its paying balance was
    /// charged. A row claimed, never read, or without a recorded charge adds nothing.
    pub fn add(&mut self, row: &PayoutRow, now: DateTime<Utc>) {
        self.add_charge(
            &crate::ledger::payouts::Unclaimed {
                status: row.status.clone(),
                currency: row.debited_currency.clone(),
                amount: row.debited_amount,
                completed_at: row.completed_at.clone(),
            },
            now,
        );
    }

    /// Counts one COMPLETED row's charge at `now` ([`Unclaimed::add`]), as
    /// [`crate::ledger::Ledger::visit_unclaimed`] reads it.
    pub fn add_charge(&mut self, row: &crate::ledger::payouts::Unclaimed, now: DateTime<Utc>) {
        let kind = match row.status {
            Some(PayoutStatus::Active) => 0,
            Some(PayoutStatus::Expired) => 1,
            Some(PayoutStatus::Cancelled) => 2,
            _ => return,
        };
        let (Some(currency), Some(charged)) = (&row.currency, row.amount) else {
            return;
        };
        let total = match kind {
            0 => &mut self.outstanding_charged,
            1 => &mut self.expired_charged,
            _ => &mut self.cancelled_charged,
        };
        add_to(total, currency, 1, charged);
        let age = row
            .completed_at
            .as_deref()
            .and_then(|at| age_of(at, now))
            .unwrap_or("unknown");
        if let Some(buckets) = self.ageing.get_mut(KINDS[kind]) {
            add_to(buckets.entry(age).or_default(), currency, 1, charged);
        }
    }

    /// Adds another batch's.
    pub fn absorb(&mut self, other: &Unclaimed) {
        let pairs = [
            (&mut self.outstanding_charged, &other.outstanding_charged),
            (&mut self.expired_charged, &other.expired_charged),
            (&mut self.cancelled_charged, &other.cancelled_charged),
        ];
        for (mine, theirs) in pairs {
            for (currency, c) in theirs {
                add_to(mine, currency, c.rows, c.charged);
            }
        }
        for (kind, buckets) in &other.ageing {
            let mine = self.ageing.entry(kind).or_default();
            for (age, per) in buckets {
                let bucket = mine.entry(age).or_default();
                for (currency, c) in per {
                    add_to(bucket, currency, c.rows, c.charged);
                }
            }
        }
    }

    /// Every amount in its currency's decimals.
    pub fn rounded(mut self) -> Self {
        let all = [
            &mut self.outstanding_charged,
            &mut self.expired_charged,
            &mut self.cancelled_charged,
        ];
        for map in all {
            for (currency, c) in map.iter_mut() {
                c.charged = in_currency(c.charged, currency);
            }
        }
        for buckets in self.ageing.values_mut() {
            for per in buckets.values_mut() {
                for (currency, c) in per.iter_mut() {
                    c.charged = in_currency(c.charged, currency);
                }
            }
        }
        self
    }

    /// Whether no link counted (nothing outstanding, expired or cancelled).
    pub fn is_empty(&self) -> bool {
        self.outstanding_charged.is_empty()
            && self.expired_charged.is_empty()
            && self.cancelled_charged.is_empty()
    }

    /// The lines of the period page's table: per status and paying currency, the rows, the
    /// charge and the charge per age bucket.
    pub fn page_lines(&self) -> Vec<UnclaimedLine> {
        let totals = [
            &self.outstanding_charged,
            &self.expired_charged,
            &self.cancelled_charged,
        ];
        let mut lines = Vec::new();
        for (kind, total) in KINDS.iter().zip(totals) {
            for (currency, c) in total {
                let aged = |age: &str| {
                    self.ageing
                        .get(kind)
                        .and_then(|b| b.get(age))
                        .and_then(|per| per.get(currency))
                        .map_or(Decimal::ZERO, |c| c.charged)
                };
                lines.push(UnclaimedLine {
                    status: kind.to_string(),
                    currency: currency.clone(),
                    rows: c.rows,
                    charged: display_amount(c.charged, currency),
                    ages: AGES
                        .iter()
                        .map(|a| display_amount(aged(a), currency))
                        .collect(),
                });
            }
        }
        lines
    }
}

/// One line of the period page's table of unclaimed value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnclaimedLine {
    pub status: String,
    pub currency: String,
    pub rows: i64,
    pub charged: String,
    /// The charge per bucket of [`AGES`], in that order.
    pub ages: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: PayoutStatus, currency: &str, amount: &str, paid: &str) -> PayoutRow {
        PayoutRow {
            row_id: 1,
            reference: "R".into(),
            attempt: 1,
            fields: Vec::new(),
            spec: None,
            price: None,
            payout_url: None,
            service_order_id: None,
            status: Some(status),
            since: None,
            expires_at: None,
            debited_amount: Some(amount.parse().expect("a decimal")),
            debited_currency: Some(currency.into()),
            completed_at: Some(paid.into()),
        }
    }

    #[test]
    fn value_is_counted_in_the_paying_currency_by_status_and_age() {
        let now = DateTime::parse_from_rfc3339("2026-12-31T12:00:00Z")
            .expect("a time")
            .with_timezone(&Utc);
        let mut u = Unclaimed::default();
        u.add(
            &row(PayoutStatus::Active, "USD", "20.20", "2026-12-01T12:00:00Z"),
            now,
        );
        u.add(
            &row(PayoutStatus::Active, "USD", "1.01", "2026-11-30T11:00:00Z"),
            now,
        );
        u.add(
            &row(PayoutStatus::Expired, "USD", "5", "2026-09-01T00:00:00Z"),
            now,
        );
        u.add(
            &row(
                PayoutStatus::Cancelled,
                "EUR",
                "7.50",
                "2026-10-15T00:00:00Z",
            ),
            now,
        );
        u.add(
            &row(PayoutStatus::Claimed, "USD", "100", "2026-12-30T00:00:00Z"),
            now,
        );
        let mut other = Unclaimed::default();
        other.add(
            &row(PayoutStatus::Active, "USD", "0.80", "2026-12-31T00:00:00Z"),
            now,
        );
        u.absorb(&other);
        let u = u.rounded();
        assert_eq!(u.outstanding_charged["USD"].rows, 3);
        assert_eq!(u.outstanding_charged["USD"].charged, Decimal::new(2201, 2));
        assert_eq!(u.expired_charged["USD"].charged, Decimal::new(5, 0));
        assert_eq!(u.cancelled_charged["EUR"].charged, Decimal::new(750, 2));
        let out = &u.ageing["outstanding"];
        assert_eq!(out["0-30"]["USD"].rows, 2, "30 days and less");
        assert_eq!(out["31-60"]["USD"].rows, 1, "31 days");
        assert_eq!(u.ageing["expired"]["over_90"]["USD"].rows, 1);
        assert_eq!(u.ageing["cancelled"]["61-90"]["EUR"].rows, 1);
        assert!(
            u.ageing
                .values()
                .all(|b| AGES.iter().all(|a| b.contains_key(a)))
        );
        let lines = u.page_lines();
        assert_eq!(lines[0].status, "outstanding");
        assert_eq!(lines[0].ages, ["21.00", "1.01", "0.00", "0.00"]);
        assert_eq!(age_of("not a time", now), None);
    }
}
