//! `history`: every payout of the ledger to one recipient or one reference, across all its
//! batches, and how many of them paid: "did we pay this person already?". Reads the ledger
//! only; never a payout link.

use std::collections::BTreeMap;
use std::str::FromStr;

use rust_decimal::Decimal;

use crate::ledger::history::{PayoutQuery, PayoutRecord};
use crate::ledger::{Ledger, LedgerError, RowState};

/// The payouts a query found.
#[derive(Debug, Clone)]
pub struct History {
    pub query: PayoutQuery,
    /// The batches of the ledger, all searched.
    pub batches: usize,
    /// Oldest batch first, in input order within a batch, whatever their state.
    pub payouts: Vec<PayoutRecord>,
}

impl History {
    /// The payouts that paid: COMPLETED.
    pub fn paid(&self) -> impl Iterator<Item = &PayoutRecord> {
        self.payouts
            .iter()
            .filter(|p| p.state == RowState::Completed)
    }

    /// The face value of the payouts that paid, per currency (currencies are never added).
    pub fn paid_face_value(&self) -> BTreeMap<String, Decimal> {
        let mut totals: BTreeMap<String, Decimal> = BTreeMap::new();
        for p in self.paid() {
            if let (Some(value), Some(currency)) = (&p.face_value, &p.currency)
                && let Ok(value) = Decimal::from_str(value)
            {
                *totals.entry(currency.clone()).or_default() += value;
            }
        }
        totals
    }

    /// The payout that paid last (the latest completion).
    pub fn last_paid(&self) -> Option<&PayoutRecord> {
        self.paid().max_by(|a, b| a.date().cmp(b.date()))
    }

    /// How many payouts are in each state.
    pub fn counts(&self) -> BTreeMap<RowState, usize> {
        let mut counts = BTreeMap::new();
        for p in &self.payouts {
            *counts.entry(p.state).or_default() += 1;
        }
        counts
    }
}

/// Every payout of `ledger` that `query` names, across all batches.
pub fn history(ledger: &Ledger, query: &PayoutQuery) -> Result<History, LedgerError> {
    let batches = ledger.batches()?.len();
    let payouts = ledger.payouts(query)?;
    Ok(History {
        query: query.clone(),
        batches,
        payouts,
    })
}
