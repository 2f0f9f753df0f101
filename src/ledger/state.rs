//! Row and order states and the one table of allowed transitions (mirrored in docs/ledger.md).

use std::fmt;
use std::str::FromStr;

/// Where a row of the input stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowState {
    /// Validated, not yet part of an order.
    Pending,
    /// Part of an order whose intent (key and exact body) is committed; the service may or may
    /// not have it yet.
    Planned,
    /// The service accepted its order (order id known); not terminal yet.
    Submitted,
    /// Paid: its order completed.
    Completed,
    /// Its order failed at the service. Retried only by `paybatch retry`.
    Failed,
    /// The service refused its order (a final 4xx). Retried only by `paybatch retry`.
    Rejected,
    /// Did not pass validation (`--skip-invalid`); never submitted.
    Invalid,
    /// Left out of a later version of the input file before it was sent: never in an order, or
    /// in an intent never sent, which was cancelled.
    Removed,
    /// Its order was answered finished, but not as it was sent (other items, amounts,
    /// currencies, delivery or payment method, or the id of another order): a person must
    /// look. Never COMPLETED, never sent again by itself, not touched by `paybatch retry`.
    Mismatch,
    /// A repeat of a row another batch of the ledger has (paid, in flight, in doubt or
    /// planned), left out by `--skip-repeats`; never sent.
    Skipped,
}

/// Where an order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrderState {
    /// Key and exact body committed. With `sends = 0` never sent; with `sends > 0` in doubt
    /// (sent, no answer recorded): re-sent with the same key and body.
    Intent,
    /// The service answered with an order id; waiting for a terminal status.
    Accepted,
    Completed,
    Failed,
    /// A final 4xx answer: the service did not create it.
    Rejected,
    /// Answered finished, but not as it was sent (see [`RowState::Mismatch`]).
    Mismatch,
    /// An intent never sent (`sends = 0`) holding a row that a later version of the input file
    /// no longer has: never to be sent. Its rows left it: the row taken out is REMOVED, the
    /// others PENDING, to be planned again under new keys. Also an intent whose rows orders of
    /// another ledger pay, which the service never created (reconciliation): its rows PENDING,
    /// to take those orders.
    Cancelled,
}

impl RowState {
    pub const ALL: [RowState; 10] = [
        RowState::Pending,
        RowState::Planned,
        RowState::Submitted,
        RowState::Completed,
        RowState::Failed,
        RowState::Rejected,
        RowState::Invalid,
        RowState::Removed,
        RowState::Mismatch,
        RowState::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RowState::Pending => "PENDING",
            RowState::Planned => "PLANNED",
            RowState::Submitted => "SUBMITTED",
            RowState::Completed => "COMPLETED",
            RowState::Failed => "FAILED",
            RowState::Rejected => "REJECTED",
            RowState::Invalid => "INVALID",
            RowState::Removed => "REMOVED",
            RowState::Mismatch => "MISMATCH",
            RowState::Skipped => "SKIPPED",
        }
    }

    /// A row that needs no more work from this run.
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            RowState::Completed
                | RowState::Failed
                | RowState::Rejected
                | RowState::Invalid
                | RowState::Removed
                | RowState::Mismatch
                | RowState::Skipped
        )
    }

    /// The allowed transitions of a row.
    pub fn can_become(self, to: RowState) -> bool {
        use RowState::*;
        matches!(
            (self, to),
            (Pending, Planned)
                | (Pending, Invalid)
                | (Pending, Removed)
                // Only with its intent, never sent, cancelled: the row taken out of the file
                // is REMOVED, the others are planned again.
                | (Planned, Removed)
                | (Planned, Pending)
                | (Invalid, Pending)
                | (Invalid, Removed)
                | (Removed, Pending)
                | (Removed, Invalid)
                | (Planned, Submitted)
                | (Planned, Completed)
                | (Planned, Failed)
                | (Planned, Rejected)
                | (Submitted, Completed)
                | (Submitted, Failed)
                // A finished order that is not what was sent: a person looks.
                | (Planned, Mismatch)
                | (Submitted, Mismatch)
                // `paybatch retry`: a person decided; the next attempt gets a new key.
                | (Failed, Pending)
                | (Rejected, Pending)
                // `--skip-repeats`: a row another batch has is left out, until a later merge
                // finds it no repeat (or is told to pay it) or the row leaves the file.
                | (Pending, Skipped)
                | (Invalid, Skipped)
                | (Removed, Skipped)
                | (Skipped, Pending)
                | (Skipped, Invalid)
                | (Skipped, Removed)
        )
    }
}

impl OrderState {
    pub const ALL: [OrderState; 7] = [
        OrderState::Intent,
        OrderState::Accepted,
        OrderState::Completed,
        OrderState::Failed,
        OrderState::Rejected,
        OrderState::Mismatch,
        OrderState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OrderState::Intent => "INTENT",
            OrderState::Accepted => "ACCEPTED",
            OrderState::Completed => "COMPLETED",
            OrderState::Failed => "FAILED",
            OrderState::Rejected => "REJECTED",
            OrderState::Mismatch => "MISMATCH",
            OrderState::Cancelled => "CANCELLED",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            OrderState::Completed
                | OrderState::Failed
                | OrderState::Rejected
                | OrderState::Mismatch
                | OrderState::Cancelled
        )
    }

    /// The allowed transitions of an order.
    pub fn can_become(self, to: OrderState) -> bool {
        use OrderState::*;
        matches!(
            (self, to),
            (Intent, Accepted)
                | (Intent, Completed)
                | (Intent, Failed)
                | (Intent, Rejected)
                | (Accepted, Completed)
                | (Accepted, Failed)
                | (Intent, Mismatch)
                | (Accepted, Mismatch)
                // Never sent (`sends = 0`, checked by the ledger), and a row of it is no
                // longer in the input file; or never created by the service, its rows paid by
                // another ledger's orders (reconciliation).
                | (Intent, Cancelled)
        )
    }
}

/// The row state an order's state implies for its rows.
pub fn row_state_for(order: OrderState) -> RowState {
    match order {
        OrderState::Intent => RowState::Planned,
        OrderState::Accepted => RowState::Submitted,
        OrderState::Completed => RowState::Completed,
        OrderState::Failed => RowState::Failed,
        OrderState::Rejected => RowState::Rejected,
        OrderState::Mismatch => RowState::Mismatch,
        // The rows leave a cancelled intent: REMOVED (taken out of the file) or PENDING.
        OrderState::Cancelled => RowState::Removed,
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown state `{0}` in the ledger")]
pub struct UnknownState(pub String);

impl FromStr for RowState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RowState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

impl FromStr for OrderState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        OrderState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

impl fmt::Display for RowState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for OrderState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paid_rows_never_go_back() {
        for to in RowState::ALL {
            assert!(!RowState::Completed.can_become(to), "COMPLETED -> {to}");
        }
        for to in [RowState::Pending, RowState::Removed, RowState::Invalid] {
            assert!(!RowState::Submitted.can_become(to), "SUBMITTED -> {to}");
        }
    }

    /// Only an intent can be cancelled, and a cancelled intent never becomes anything else; its
    /// rows leave it, REMOVED or PENDING, and only a PLANNED row can leave an order that way.
    #[test]
    fn only_an_intent_is_cancelled_and_its_rows_are_removed_or_planned_again() {
        for from in OrderState::ALL {
            assert_eq!(
                from.can_become(OrderState::Cancelled),
                from == OrderState::Intent,
                "{from} -> CANCELLED"
            );
            assert!(
                !OrderState::Cancelled.can_become(from),
                "CANCELLED -> {from}"
            );
        }
        assert!(OrderState::Cancelled.is_terminal());
        assert!(RowState::Planned.can_become(RowState::Removed));
        assert!(RowState::Planned.can_become(RowState::Pending));
        // A row sent, or answered, stays with its order.
        for from in [
            RowState::Submitted,
            RowState::Completed,
            RowState::Failed,
            RowState::Rejected,
            RowState::Mismatch,
        ] {
            assert!(!from.can_become(RowState::Removed), "{from} -> REMOVED");
        }
        assert_eq!(row_state_for(OrderState::Cancelled), RowState::Removed);
    }

    #[test]
    fn every_order_state_maps_to_a_row_state_the_row_may_reach() {
        for o in [
            OrderState::Accepted,
            OrderState::Completed,
            OrderState::Failed,
            OrderState::Rejected,
            OrderState::Mismatch,
        ] {
            assert!(OrderState::Intent.can_become(o) || OrderState::Accepted.can_become(o));
            assert!(RowState::Planned.can_become(row_state_for(o)));
        }
    }

    #[test]
    fn states_round_trip_through_text() {
        for s in RowState::ALL {
            assert_eq!(s.as_str().parse::<RowState>().unwrap(), s);
        }
        for s in OrderState::ALL {
            assert_eq!(s.as_str().parse::<OrderState>().unwrap(), s);
        }
        assert_eq!(
            "CANCELLED".parse::<OrderState>().unwrap(),
            OrderState::Cancelled
        );
        assert!("BOGUS".parse::<OrderState>().is_err());
    }
}
