//! What a reconciliation found and did ([`ReconcileReport`]).

/// Serialised as `reconcile --json` has it, in this order.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReconcileReport {
    /// Orders of this batch at the service.
    pub found: usize,
    /// Service orders the ledger did not know, now attached to their rows: (reference, order id).
    pub adopted: Vec<(String, String)>,
    /// In-doubt intents the service never turned into an order: cleared to be sent again.
    pub absent: Vec<String>,
    /// In-doubt intents with no order at the service that names them while an order of the
    /// account still processing cannot be attributed ([`Self::unattributed`]): it may be theirs
    /// (an answer lost while it processes), so they stay in doubt (keys).
    pub kept_in_doubt: Vec<String>,
    /// In-doubt intents the service never turned into an order and whose key only gets a server
    /// error back ([`key_is_spent`](super::key_is_spent)): marked REJECTED, their rows left to
    /// `paybatch retry` (keys).
    pub retired: Vec<String>,
    /// Orders of this batch at the service whose rows could not be read (an order of several
    /// rows still PROCESSING, whose list entry and partial body do not name them): while there
    /// are any, no key is given up (service order ids).
    pub unattributed: Vec<String>,
    /// Orders whose status the ledger had behind the service's: (order id, from, to).
    pub updated: Vec<(String, String, String)>,
    /// Service orders for rows the ledger does not have: (reference, order id).
    pub unknown_rows: Vec<(String, String)>,
    /// Rows with more than one live service order: (reference, order ids). Needs a person.
    pub duplicates: Vec<(String, Vec<String>)>,
    /// Service orders of a row whose payout link was read EXPIRED and that `retry --expired`
    /// reissued since: (reference, order id). Not a second live order, and nothing to repair.
    pub reissued: Vec<(String, String)>,
    /// Intents of an earlier attempt than one the service has an order for, never answered:
    /// marked REJECTED, never to be sent (keys).
    pub superseded: Vec<String>,
    /// Intents never sent whose rows the service has in another ledger's orders (another
    /// grouping, another machine): cancelled, their rows left to those orders (keys).
    pub released: Vec<String>,
    /// Service orders of a row's latest attempt that its ledger row cannot take (the row is
    /// INVALID or REMOVED, or has another order): (reference, order id). Needs a person.
    pub unattached: Vec<(String, String)>,
}

impl ReconcileReport {
    pub fn is_clean(&self) -> bool {
        self.adopted.is_empty()
            && self.absent.is_empty()
            && self.kept_in_doubt.is_empty()
            && self.retired.is_empty()
            && self.unattributed.is_empty()
            && self.updated.is_empty()
            && self.unknown_rows.is_empty()
            && self.duplicates.is_empty()
            && self.superseded.is_empty()
            && self.released.is_empty()
            && self.unattached.is_empty()
    }

    /// Findings only a person can settle: duplicate payments, orders for rows the ledger does
    /// not have or cannot take.
    pub fn needs_a_person(&self) -> bool {
        !self.duplicates.is_empty() || !self.unknown_rows.is_empty() || !self.unattached.is_empty()
    }
}
