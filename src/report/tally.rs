//! The tally of a batch's report: what the page says of a batch's rows, gathered one row at a
//! time (a batch can hold a million) as plain data: counts and totals per currency, state,
//! product and any column of the file, what left each paying balance, the rows that need
//! attention, and the plan digest rebuilt from what the ledger recorded. No markup here: the
//! page ([`super::page`]) is made from this data by a template.

use std::collections::{BTreeMap, BTreeSet};

use rust_decimal::Decimal;

use crate::api::decimal::parse_decimal_text;
use crate::ledger::payouts::EarlierCharge;

use super::costs::{CostKey, Costs};
use crate::input::reader::{canonical_column, normalize_header};
use crate::input::rules::content_hash_of;
use crate::input::scan::{OrdersOutside, PlanDigest};
use crate::ledger::approvals::Approval;
use crate::ledger::payouts::PayoutNote;
use crate::ledger::{BatchRecord, OrderLabel, PayoutStatus, RowRecord, RowState};

/// The rows a list of the page (rows that need attention, paid rows not confirmed, rows
/// reissued) holds at most: a tally keeps totals, not rows, and the page says how many more
/// there are (the result file has every one).
pub const LISTED_ROWS: usize = 1000;

/// A list of rows kept up to [`LISTED_ROWS`], and how many more there were.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Listed<T> {
    pub(super) rows: Vec<T>,
    pub(super) more: usize,
}

impl<T> Default for Listed<T> {
    fn default() -> Self {
        Listed {
            rows: Vec::new(),
            more: 0,
        }
    }
}

impl<T> Listed<T> {
    fn push(&mut self, row: T) {
        if self.rows.len() < LISTED_ROWS {
            self.rows.push(row);
        } else {
            self.more += 1;
        }
    }
}

/// The row states the report shows, in the order of the chart and the tables (REMOVED rows are
/// not part of the batch any more, as in the result file).
pub(super) const SHOWN: [RowState; 8] = [
    RowState::Completed,
    RowState::Submitted,
    RowState::Planned,
    RowState::Pending,
    RowState::Mismatch,
    RowState::Failed,
    RowState::Rejected,
    RowState::Invalid,
];

pub(super) fn color(state: RowState) -> &'static str {
    match state {
        RowState::Completed => "#2e7d32",
        RowState::Submitted => "#1565c0",
        RowState::Planned => "#42a5f5",
        RowState::Pending => "#90caf9",
        RowState::Failed => "#c62828",
        RowState::Rejected => "#ef6c00",
        RowState::Invalid => "#757575",
        RowState::Removed => "#bdbdbd",
        RowState::Mismatch => "#6a1b9a",
        RowState::Skipped => "#a1887f",
    }
}

/// One row as the report shows it: what was asked and what happened, never the payout link.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ReportRow {
    pub(super) line: i64,
    pub(super) reference: String,
    pub(super) products: String,
    pub(super) face_value: Option<Decimal>,
    pub(super) face_text: String,
    pub(super) currency: String,
    pub(super) state: RowState,
    /// What the payout cost: known, and counted, only once the row COMPLETED (the items of a
    /// failed order can carry a price that nobody paid).
    pub(super) price: Option<Decimal>,
    /// The row's own error, as the ledger recorded it for this row.
    pub(super) reason: String,
}

fn row_view(headers: &[String], row: &RowRecord) -> ReportRow {
    let spec = row.spec.as_ref();
    let cell = |canonical: &str| -> String {
        headers
            .iter()
            .position(|h| canonical_column(h) == Some(canonical))
            .and_then(|i| row.fields.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let products = spec
        .as_ref()
        .map(|s| s.product_codes.join("|"))
        .unwrap_or_else(|| cell("product_code"));
    let face_text = spec
        .as_ref()
        .map(|s| s.face_value.to_string())
        .unwrap_or_else(|| cell("face_value"));
    let reason = match (&row.error_type, &row.error_message) {
        (Some(t), Some(m)) => format!("{t}: {m}"),
        (Some(t), None) => t.clone(),
        (None, Some(m)) => m.clone(),
        (None, None) => String::new(),
    };
    let price = (row.state == RowState::Completed)
        .then_some(row.price)
        .flatten();
    ReportRow {
        line: row.line,
        reference: row.reference.clone(),
        products,
        face_value: parse_decimal_text(&face_text),
        face_text,
        currency: spec.map_or_else(|| cell("currency"), |s| s.currency.clone()),
        state: row.state,
        price,
        reason,
    }
}

/// Rows and amounts of one line of a breakdown, all in one currency.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Total {
    pub(super) rows: usize,
    pub(super) face_value: Decimal,
    pub(super) completed: usize,
    /// What the completed rows cost.
    pub(super) price: Decimal,
}

impl Total {
    fn add(&mut self, v: &ReportRow) {
        self.rows += 1;
        self.face_value += v.face_value.unwrap_or_default();
        if v.state == RowState::Completed {
            self.completed += 1;
            self.price += v.price.unwrap_or_default();
        }
    }
}

/// What one paying balance (or card) was charged for the completed rows of one product
/// currency.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Charge {
    pub(super) rows: usize,
    /// In the product's currency.
    pub(super) face_value: Decimal,
    /// In the paying balance's currency.
    pub(super) charged: Decimal,
}

impl Charge {
    pub(super) fn merge(&mut self, other: &Charge) {
        self.rows += other.rows;
        self.face_value += other.face_value;
        self.charged += other.charged;
    }
}

/// A breakdown of the rows by the value of one column, per currency.
pub(super) struct Breakdown {
    /// The column as the file names it (`None`: the products).
    pub(super) column: Option<(String, usize)>,
    /// (currency, value) -> total.
    pub(super) lines: BTreeMap<(String, String), Total>,
}

/// The life of the payout links of one line of a claims breakdown, all in one currency: rows
/// per last known status, and the face value not claimed yet (ACTIVE) and expired.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Claims {
    pub(super) paid: usize,
    pub(super) claimed: usize,
    pub(super) active: usize,
    pub(super) cancelled: usize,
    pub(super) expired: usize,
    /// Paid rows whose link was never read, or has a status paybatch does not know.
    pub(super) unknown: usize,
    pub(super) outstanding: Decimal,
    pub(super) expired_value: Decimal,
}

impl Claims {
    fn add(&mut self, v: &ReportRow, status: Option<&PayoutStatus>) {
        self.paid += 1;
        let face = v.face_value.unwrap_or_default();
        match status {
            Some(PayoutStatus::Claimed) => self.claimed += 1,
            Some(PayoutStatus::Active) => {
                self.active += 1;
                self.outstanding += face;
            }
            Some(PayoutStatus::Cancelled) => self.cancelled += 1,
            Some(PayoutStatus::Expired) => {
                self.expired += 1;
                self.expired_value += face;
            }
            Some(PayoutStatus::Other(_)) | None => self.unknown += 1,
        }
    }
}

/// The plan digest, rebuilt row by row, or why it cannot be.
pub(super) enum Digest {
    Building(PlanDigest),
    Unknown(String),
}

/// What the page says of a batch's rows, gathered one row at a time (a batch can hold a
/// million): counts and totals, and only the rows that need attention.
pub struct Tally {
    pub(super) headers: Vec<String>,
    pub(super) rows: usize,
    /// (payer, charged currency) -> product currency -> charge, for the completed rows.
    pub(super) charged: BTreeMap<(String, String), BTreeMap<String, Charge>>,
    pub(super) by_state: BTreeMap<String, BTreeMap<RowState, Total>>,
    pub(super) breakdowns: Vec<Breakdown>,
    pub(super) counts: BTreeMap<RowState, usize>,
    pub(super) attention: Listed<ReportRow>,
    /// Completed rows whose order could not be confirmed as the one sent, or whose order's
    /// total could not be checked.
    pub(super) unconfirmed: Listed<ReportRow>,
    /// Per breakdown (products first, then each `--group-by` column): what the paid rows
    /// cost, each attempt charged ([`Tally::add_earlier_charge`]) included.
    pub(super) costs: Vec<Costs>,
    /// Whether the plan digest is rebuilt (a batch's page); a period's tally has no digest.
    pub(super) plan: bool,
    pub(super) digest: Digest,
    /// The batch's latest merge ([`Tally::latest_merge`]): rows of an earlier one are no longer
    /// in the file.
    pub(super) latest_merge: Option<i64>,
    /// The orders of the rows no longer in the file, part of the plan digest.
    pub(super) outside: BTreeSet<i64>,
    pub(super) outside_digest: OrdersOutside,
    /// The rows of the latest file at a later attempt than their first (reference, attempt),
    /// part of the plan digest ([`crate::input::scan::fold_attempts`]).
    pub(super) attempts: Vec<(String, i64)>,
    /// Per breakdown (products first, then each `--group-by` column): (currency, value) ->
    /// the life of the paid rows' links ([`Tally::add_payout`]).
    pub(super) claims: Vec<BTreeMap<(String, String), Claims>>,
    /// Rows whose expired link was reissued, with the attempt it replaced.
    pub(super) reissued: Listed<Reissued>,
    /// The runs held to an approved plan, oldest first ([`Tally::approvals`]).
    pub(super) approvals: Vec<Approval>,
}

/// A row paid again because the link of an earlier attempt expired (`retry --expired`).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Reissued {
    pub(super) line: i64,
    pub(super) reference: String,
    pub(super) earlier_attempt: i64,
    pub(super) earlier_order: String,
    pub(super) expired_at: String,
    pub(super) attempt: i64,
    /// The service's order of the current attempt (empty until it is sent).
    pub(super) order: String,
    pub(super) state: RowState,
}

/// How the page names what paid: a card, or the balance of a currency.
pub fn payer(order: Option<&OrderLabel>, currency: &str) -> String {
    match order.and_then(|o| o.card_id.as_deref()) {
        Some(card) => format!("card {card}"),
        None => format!("balance {currency}"),
    }
}

/// The index of `wanted` among `headers`: the same name, else the same once normalised.
pub fn column_index(headers: &[String], wanted: &str) -> Option<usize> {
    headers.iter().position(|h| h == wanted).or_else(|| {
        let n = normalize_header(wanted);
        headers.iter().position(|h| normalize_header(h) == n)
    })
}

impl Tally {
    /// An empty tally of `batch`, broken down per product.
    pub fn new(batch: &BatchRecord) -> Self {
        Tally {
            headers: batch.headers.clone(),
            rows: 0,
            charged: BTreeMap::new(),
            by_state: BTreeMap::new(),
            breakdowns: vec![Breakdown {
                column: None,
                lines: BTreeMap::new(),
            }],
            counts: BTreeMap::new(),
            attention: Listed::default(),
            unconfirmed: Listed::default(),
            costs: vec![Costs::default()],
            plan: true,
            digest: Digest::Building(PlanDigest::new(&batch.name, &batch.environment)),
            latest_merge: None,
            outside: BTreeSet::new(),
            outside_digest: OrdersOutside::default(),
            attempts: Vec::new(),
            claims: vec![BTreeMap::new()],
            reissued: Listed::default(),
            approvals: Vec::new(),
        }
    }

    /// The runs of the batch held to an approved plan (shown beside the plan digest).
    pub fn approvals(&mut self, approvals: Vec<Approval>) {
        self.approvals = approvals;
    }

    /// An empty tally of `batch` as part of a period: totals only, no plan digest.
    pub fn for_period(batch: &BatchRecord) -> Self {
        Tally {
            plan: false,
            digest: Digest::Unknown("a period has no plan digest".to_string()),
            ..Tally::new(batch)
        }
    }

    /// What the paid attempts cost per product (`None`) and per `--group-by` column (its
    /// name as the file has it), in the order asked.
    pub fn costs(&self) -> impl Iterator<Item = (Option<&str>, &Costs)> {
        self.breakdowns
            .iter()
            .zip(&self.costs)
            .map(|(b, c)| (b.column.as_ref().map(|(name, _)| name.as_str()), c))
    }

    /// The rows counted (REMOVED rows aside).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The rows counted in `state`.
    pub fn rows_in(&self, state: RowState) -> usize {
        self.counts.get(&state).copied().unwrap_or_default()
    }

    /// Counts what an earlier attempt of a row charged, kept when its expired link was
    /// reissued (`retry --expired`): what left the balance, and the costs, count every
    /// attempt paid.
    /// Returns the row's products as the page names them.
    pub fn add_earlier_charge(&mut self, earlier: &EarlierCharge) -> String {
        let mut row = earlier.row.clone();
        row.state = RowState::Completed;
        let v = row_view(&self.headers, &row);
        self.add_charge(&row, &v, earlier.order.as_ref());
        self.add_cost(&row, &v);
        v.products
    }

    /// Counts the payout link of a COMPLETED row as last read (`status`, `None` before a first
    /// read), per product and per `--group-by` column.
    pub fn add_payout(&mut self, row: &RowRecord, note: &PayoutNote, order_id: Option<&str>) {
        if let Some(earlier) = &note.reissue_of {
            self.reissued.push(Reissued {
                line: row.line,
                reference: row.reference.clone(),
                earlier_attempt: earlier.attempt,
                earlier_order: earlier.service_order_id.clone().unwrap_or_default(),
                expired_at: earlier.expires_at.clone().unwrap_or_default(),
                attempt: row.attempt,
                order: order_id.unwrap_or_default().to_string(),
                state: row.state,
            });
        }
        if row.state != RowState::Completed {
            return;
        }
        let status = note.status.as_ref();
        let v = row_view(&self.headers, row);
        let currency = if v.currency.is_empty() {
            "?".to_string()
        } else {
            v.currency.clone()
        };
        for (b, claims) in self.breakdowns.iter().zip(self.claims.iter_mut()) {
            let value = match &b.column {
                None => v.products.clone(),
                Some((_, i)) => row.fields.get(*i).cloned().unwrap_or_default(),
            };
            claims
                .entry((currency.clone(), value))
                .or_default()
                .add(&v, status);
        }
    }

    /// A person decided about rows other batches have (`note`: allowed or skipped, with
    /// which): the plan digest `validate` showed also covers them, and the rows alone cannot
    /// give it back; the page says so (and shows the decision) instead of another digest.
    pub fn repeats_decided(&mut self, note: &str) {
        self.digest = Digest::Unknown(format!(
            "this plan had rows other batches have ({note}); its digest covers that decision: paybatch validate shows it"
        ));
    }

    /// The number of the batch's latest merge ([`crate::ledger::Ledger::merges`]): the plan
    /// digest is then the one `validate` shows for the latest file, made of the rows it had and
    /// of the orders followed for the rows it no longer had ([`crate::input::scan::plan_digest`]). Without it
    /// every row counts as in the file.
    pub fn latest_merge(&mut self, merges: i64) {
        self.latest_merge = Some(merges);
    }

    /// The orders holding rows counted so far that the latest file no longer had, in id order.
    pub fn orders_outside(&self) -> impl Iterator<Item = i64> + '_ {
        self.outside.iter().copied()
    }

    /// One of [`Tally::orders_outside`], by its key and exact body, for the plan digest.
    pub fn add_order_outside(&mut self, key: &str, body: &[u8]) {
        self.outside_digest.add(key, body);
    }

    /// Adds a breakdown per value of the input column `column`; refuses a column the file does
    /// not have, naming those it has.
    pub fn group_by(&mut self, column: &str) -> Result<(), String> {
        let Some(index) = column_index(&self.headers, column) else {
            return Err(format!(
                "the input file has no column `{column}`; its columns: {}",
                self.headers.join(", ")
            ));
        };
        self.breakdowns.push(Breakdown {
            column: Some((self.headers[index].clone(), index)),
            lines: BTreeMap::new(),
        });
        self.claims.push(BTreeMap::new());
        self.costs.push(Costs::default());
        Ok(())
    }

    /// Adds a breakdown per value of the input column `column`, whose values are all empty
    /// when the file does not have it (a period's batches need not all have it).
    pub fn group_by_or_blank(&mut self, column: &str) {
        if self.group_by(column).is_err() {
            self.breakdowns.push(Breakdown {
                column: Some((column.to_string(), usize::MAX)),
                lines: BTreeMap::new(),
            });
            self.claims.push(BTreeMap::new());
            self.costs.push(Costs::default());
        }
    }

    /// Counts one row of the batch, with the order that holds it (REMOVED rows are not part
    /// of the batch any more). Returns the row's products as the page names them (`A|B`).
    pub fn add(&mut self, row: &RowRecord, order: Option<&OrderLabel>) -> String {
        if row.state == RowState::Removed {
            return String::new();
        }
        let v = row_view(&self.headers, row);
        let products = v.products.clone();
        self.rows += 1;
        self.add_charge(row, &v, order);
        self.add_cost(row, &v);
        if self.plan {
            if self.latest_merge.is_none_or(|m| row.merged == m) {
                self.add_to_digest(row);
                if row.attempt > 1 {
                    self.attempts.push((row.reference.clone(), row.attempt));
                }
            } else if let Some(order) = row.order_id {
                self.outside.insert(order);
            }
        }
        *self.counts.entry(v.state).or_default() += 1;
        let currency = if v.currency.is_empty() {
            "?".to_string()
        } else {
            v.currency.clone()
        };
        let by_state = self.by_state.entry(currency.clone()).or_default();
        by_state.entry(v.state).or_default().add(&v);
        for b in &mut self.breakdowns {
            let value = match &b.column {
                None => v.products.clone(),
                Some((_, i)) => row.fields.get(*i).cloned().unwrap_or_default(),
            };
            let key = (currency.clone(), value);
            b.lines.entry(key).or_default().add(&v);
        }
        if matches!(
            v.state,
            RowState::Failed | RowState::Rejected | RowState::Invalid | RowState::Mismatch
        ) {
            self.attention.push(v);
        } else if v.state == RowState::Completed
            && crate::batch::record::Unconfirmed::of(row.error_type.as_deref())
                .error_type()
                .is_some()
        {
            self.unconfirmed.push(v);
        }
        products
    }

    /// Counts the cost of a COMPLETED row (an attempt paid) per product and per column.
    fn add_cost(&mut self, row: &RowRecord, v: &ReportRow) {
        if row.state != RowState::Completed {
            return;
        }
        let charged = row.debited_amount;
        let product_currency = if v.currency.is_empty() {
            "?".to_string()
        } else {
            v.currency.clone()
        };
        let charged_currency = row
            .debited_currency
            .clone()
            .filter(|_| charged.is_some())
            .unwrap_or_else(|| "?".to_string());
        for (b, costs) in self.breakdowns.iter().zip(self.costs.iter_mut()) {
            let value = match &b.column {
                None => v.products.clone(),
                Some((_, i)) => row.fields.get(*i).cloned().unwrap_or_default(),
            };
            costs.add(
                CostKey {
                    value,
                    product_currency: product_currency.clone(),
                    charged_currency: charged_currency.clone(),
                },
                v.face_value.unwrap_or_default(),
                v.price.unwrap_or_default(),
                charged.unwrap_or_default(),
            );
        }
    }

    fn add_charge(&mut self, row: &RowRecord, v: &ReportRow, order: Option<&OrderLabel>) {
        let debited = row.debited_amount;
        let (RowState::Completed, Some(amount), Some(currency)) =
            (row.state, debited, &row.debited_currency)
        else {
            return;
        };
        let c = self
            .charged
            .entry((payer(order, currency), currency.clone()))
            .or_default()
            .entry(v.currency.clone())
            .or_default();
        c.rows += 1;
        c.face_value += v.face_value.unwrap_or_default();
        c.charged += amount;
    }

    fn add_to_digest(&mut self, row: &RowRecord) {
        let Digest::Building(digest) = &mut self.digest else {
            return;
        };
        match &row.spec {
            None => {}
            Some(spec) if content_hash_of(&row.reference, spec) == row.content_hash => {
                digest.recorded_row(&row.content_hash)
            }
            Some(_) => {
                self.digest = Digest::Unknown(format!(
                    "the record of row {} does not give its recorded hash",
                    row.line
                ))
            }
        }
    }
}
