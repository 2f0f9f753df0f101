//! The lines of a period's books, read once from the ledger in the order they were booked
//! ([`Ledger::visit_book_lines`]): each paid attempt a `paid` line; the rows of a MISMATCH
//! order one `suspense` line (what its rows were expected to cost, what the service's answer
//! claims), and a COMPLETED row whose order's total could not be confirmed a `suspense` line
//! too; an order the service answered with another's order (held by another of this ledger's
//! orders, known as another ledger's, or naming another idempotency key) is not booked at all:
//! that money is booked where the order is. Each line goes to the journal (when asked) and to
//! the period's totals, which make every table from them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::rc::Rc;

use rust_decimal::Decimal;

use crate::api::models::{Order, OrderStatus};
use crate::batch::order_body::key_in_description;
use crate::batch::record::Unconfirmed;
use crate::ledger::books::{BookLine, month_of};
use crate::ledger::{BatchRecord, Ledger, RowRecord, RowState};
use crate::ops::error::OpError;
use crate::report::journal::{JournalLine, LineKind, utc_date};
use crate::report::journal_format::JournalWriter;
use crate::report::period::{Booked, PeriodTally};
use crate::report::tally::{column_index, payer};

/// What of the period's lines could not be booked as the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Paid rows without a recorded charge (paid before the ledger recorded charges): not in
    /// the journal.
    pub not_booked: usize,
    /// MISMATCH rows whose order's answer does not say what it cost: in suspense, without a
    /// claimed amount.
    pub mismatch_not_booked: usize,
    /// Rows of orders the service answered with another's order: never booked here.
    pub answered_for_another: usize,
}

/// The batches with lines booked from `since` to `until`.
pub fn batches_booked(
    ledger: &Ledger,
    since: &str,
    until: &str,
) -> Result<Vec<BatchRecord>, OpError> {
    let mut batches = Vec::new();
    for id in ledger.batches_booked(since, until)? {
        if let Some(batch) = ledger.batch_by_id(id)? {
            batches.push(batch);
        }
    }
    Ok(batches)
}

/// What the lines of one batch need of it.
struct BatchInfo {
    name: String,
    environment: String,
    headers: Vec<String>,
    /// The journal's group column in this batch.
    group: Option<usize>,
    /// Each `--group-by` column of the period in this batch.
    group_by: Vec<Option<usize>>,
}

/// The rows of the MISMATCH order being read, gathered to book it once.
struct Held {
    first: BookLine,
    info: Rc<BatchInfo>,
    rows: usize,
    references: Vec<String>,
    products: BTreeSet<String>,
    groups: BTreeSet<String>,
    /// Product currency -> face value.
    face_value: BTreeMap<String, Decimal>,
}

/// What a MISMATCH order's answer claims it cost, in which currency; `None` when it does not
/// say.
type Claim = Option<(Decimal, String)>;

/// The journal being written, and where.
type Target<'j> = (&'j mut JournalWriter, &'j Path);

/// The books of a period being read.
pub struct Books<'a> {
    ledger: &'a Ledger,
    group: Option<&'a str>,
    group_by: &'a [String],
    journal: Option<Target<'a>>,
    totals: &'a mut PeriodTally,
    batches: BTreeMap<i64, Rc<BatchInfo>>,
    held: Option<Held>,
    counts: Counts,
}

/// The currency and face value a row asked for, as its recorded content says (`?` and 0
/// without one).
fn asked(row: &RowRecord) -> (String, Decimal) {
    row.spec
        .as_ref()
        .map_or(("?".to_string(), Decimal::ZERO), |s| {
            (s.currency.clone(), s.face_value)
        })
}

/// The products of a row as the page names them (`A|B`).
fn products_of(headers: &[String], row: &RowRecord) -> String {
    match &row.spec {
        Some(spec) => spec.product_codes.join("|"),
        None => headers
            .iter()
            .position(|h| crate::input::reader::canonical_column(h) == Some("product_code"))
            .and_then(|i| row.fields.get(i))
            .cloned()
            .unwrap_or_default(),
    }
}

/// What the answer of a MISMATCH order claims left the paying balance: its total price (in its
/// currency, else the payment currency), else the sum of its items' prices when all are in
/// the payment currency. `Some(None)` when it completed without saying what it cost; `None`
/// when it did not complete (nothing was charged).
fn claimed(answer: &Order, paid_in: &str) -> Option<Option<(Decimal, String)>> {
    if answer.status != OrderStatus::Completed {
        return None;
    }
    if let Some(total) = answer.total_price {
        let currency = answer
            .currency
            .clone()
            .unwrap_or_else(|| paid_in.to_string());
        return Some(Some((total, currency)));
    }
    let in_paid = answer
        .items
        .iter()
        .all(|i| i.currency.as_deref().is_none_or(|c| c == paid_in) && i.price.is_some());
    if answer.items.is_empty() || !in_paid {
        return Some(None);
    }
    let sum = answer.items.iter().filter_map(|i| i.price).sum();
    Some(Some((sum, paid_in.to_string())))
}

/// What a line booked after its month was closed says: when it became final, and where it
/// was booked instead; empty for a line booked in its own month.
fn late_note(line: &BookLine) -> String {
    let day = utc_date(&line.booked_at);
    if day == line.booked_on {
        return String::new();
    }
    format!(
        "final on {day}, in month {} already closed: booked on {}",
        month_of(&day),
        line.booked_on
    )
}

/// Notes joined with `; `, the empty ones left out.
fn joined(notes: &[&str]) -> String {
    notes
        .iter()
        .filter(|n| !n.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("; ")
}

impl<'a> Books<'a> {
    /// Ready to book into `totals`, and into `journal` when given; `group` is the journal's
    /// group column, `group_by` the period's columns.
    pub fn new(
        ledger: &'a Ledger,
        group: Option<&'a str>,
        group_by: &'a [String],
        journal: Option<Target<'a>>,
        totals: &'a mut PeriodTally,
    ) -> Self {
        Books {
            ledger,
            group,
            group_by,
            journal,
            totals,
            batches: BTreeMap::new(),
            held: None,
            counts: Counts::default(),
        }
    }

    /// Books every line booked from `since` to `until`, once each.
    pub fn book(mut self, since: &str, until: &str) -> Result<Counts, OpError> {
        let ledger = self.ledger;
        ledger.visit_book_lines(since, until, |line| self.line(line))?;
        self.book_held()?;
        // The approvals of the batches with lines in the period.
        for (id, info) in &self.batches {
            let approvals = ledger.approvals(*id)?;
            self.totals.approvals_of(&info.name, &approvals);
        }
        Ok(self.counts)
    }

    fn info(&mut self, batch_id: i64) -> Result<Rc<BatchInfo>, OpError> {
        if let Some(info) = self.batches.get(&batch_id) {
            return Ok(Rc::clone(info));
        }
        let batch = self.ledger.batch_by_id(batch_id)?.ok_or_else(|| {
            OpError::Ledger(crate::ledger::LedgerError::Corrupt(format!(
                "batch {batch_id} not found"
            )))
        })?;
        let info = Rc::new(BatchInfo {
            group: self.group.and_then(|g| column_index(&batch.headers, g)),
            group_by: self
                .group_by
                .iter()
                .map(|c| column_index(&batch.headers, c))
                .collect(),
            name: batch.name,
            environment: batch.environment,
            headers: batch.headers,
        });
        self.batches.insert(batch_id, Rc::clone(&info));
        Ok(info)
    }

    /// Books one line read; a MISMATCH row is gathered with the rows of its order.
    fn line(&mut self, line: BookLine) -> Result<(), OpError> {
        if self
            .held
            .as_ref()
            .is_some_and(|h| h.first.order_id != line.order_id)
        {
            self.book_held()?;
        }
        let info = self.info(line.batch_id)?;
        match line.row.state {
            RowState::Mismatch => {
                self.hold(line, info);
                Ok(())
            }
            _ => self.completed(&line, &info),
        }
    }

    /// Writes a line to the journal and counts it in the totals.
    fn write(&mut self, line: &JournalLine<'_>, booked: &Booked<'_>) -> Result<(), OpError> {
        if let Some((journal, path)) = self.journal.as_mut() {
            journal.add(line).map_err(|e| OpError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        }
        self.totals.book(booked);
        Ok(())
    }

    /// Books a COMPLETED attempt: paid, or in suspense when its order's total could not be
    /// confirmed.
    fn completed(&mut self, line: &BookLine, info: &BatchInfo) -> Result<(), OpError> {
        let row = &line.row;
        let unconfirmed = Unconfirmed::of(row.error_type.as_deref());
        let kind = match unconfirmed.total {
            true => LineKind::Suspense,
            false => LineKind::Paid,
        };
        let (Some(amount), Some(currency)) = (&row.debited_amount, &row.debited_currency) else {
            self.counts.not_booked += 1;
            return Ok(());
        };
        let (product_currency, face_value) = asked(row);
        let products = products_of(&info.headers, row);
        let groups: Vec<String> = info
            .group_by
            .iter()
            .map(|i| {
                i.and_then(|i| row.fields.get(i))
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
        let late = late_note(line);
        let suspense = kind == LineKind::Suspense;
        let expected = if suspense {
            face_value.to_string()
        } else {
            String::new()
        };
        let note = joined(&[unconfirmed.note(), &late]);
        let payer = payer(Some(&line.label), currency);
        let amount_text = amount.to_string();
        let journal_line = JournalLine {
            completed_at: &line.booked_on,
            kind,
            environment: &info.environment,
            batch: &info.name,
            status: RowState::Completed.as_str(),
            currency,
            amount: &amount_text,
            expected: &expected,
            expected_currency: if suspense { &product_currency } else { "" },
            service_completed_at: row.completed_at.as_deref().unwrap_or_default(),
            group: info
                .group
                .and_then(|i| row.fields.get(i))
                .map_or("", String::as_str),
            product: &products,
            reference: &row.reference,
            order_id: line.label.service_order_id.as_deref().unwrap_or_default(),
            note: &note,
        };
        let booked = Booked {
            kind,
            environment: &info.environment,
            batch: &info.name,
            booked_at: &line.booked_at,
            payer: &payer,
            rows: 1,
            product: &products,
            product_currency: &product_currency,
            face_value,
            price: row.price.unwrap_or_default(),
            balance_currency: currency,
            charged: Some(*amount),
            groups: &groups,
        };
        self.write(&journal_line, &booked)
    }

    fn hold(&mut self, line: BookLine, info: Rc<BatchInfo>) {
        let (product_currency, face_value) = asked(&line.row);
        let products = products_of(&info.headers, &line.row);
        let group = info
            .group
            .and_then(|i| line.row.fields.get(i))
            .cloned()
            .unwrap_or_default();
        let reference = line.row.reference.clone();
        let held = self.held.get_or_insert_with(|| Held {
            first: line,
            info,
            rows: 0,
            references: Vec::new(),
            products: BTreeSet::new(),
            groups: BTreeSet::new(),
            face_value: BTreeMap::new(),
        });
        held.rows += 1;
        held.references.push(reference);
        held.products.insert(products);
        held.groups.insert(group);
        *held.face_value.entry(product_currency).or_default() += face_value;
    }

    /// Whether the service's `answer` for the ledger's order of `line` is another's order.
    fn another_order(&self, line: &BookLine, answer: &Order) -> Result<bool, OpError> {
        let other_key = answer
            .description
            .as_deref()
            .and_then(key_in_description)
            .is_some_and(|k| k != line.idempotency_key);
        Ok(other_key
            || self
                .ledger
                .answered_for_another(line.order_id, &answer.id)?)
    }

    /// What the answer of the MISMATCH order gathered in `held` claims it cost (`None` inside
    /// when it does not say), with the answer; `None` when it is not booked: another's order,
    /// or an answer that did not complete (nothing was charged).
    fn claim_of(&mut self, held: &Held) -> Result<Option<(Option<Order>, Claim)>, OpError> {
        let line = &held.first;
        let answer = self
            .ledger
            .last_response(line.order_id)?
            .and_then(|r| serde_json::from_str::<Order>(&r).ok());
        let claim = match &answer {
            Some(answer) if self.another_order(line, answer)? => {
                self.counts.answered_for_another += held.rows;
                return Ok(None);
            }
            Some(answer) => match claimed(answer, &line.label.payment_currency) {
                None => return Ok(None),
                Some(claim) => claim,
            },
            None => None,
        };
        if claim.is_none() {
            self.counts.mismatch_not_booked += held.rows;
        }
        Ok(Some((answer, claim)))
    }

    /// Books the MISMATCH order gathered: one suspense line for its rows (references joined
    /// with `|`), with what they were expected to cost and what the answer claims.
    fn book_held(&mut self) -> Result<(), OpError> {
        let Some(held) = self.held.take() else {
            return Ok(());
        };
        let line = &held.first;
        let paid_in = line.label.payment_currency.as_str();
        let Some((answer, claim)) = self.claim_of(&held)? else {
            return Ok(());
        };
        let (amount, currency) = match &claim {
            Some((amount, currency)) => (amount.to_string(), currency.clone()),
            None => (String::new(), paid_in.to_string()),
        };
        // The face value is named only when the rows asked for one currency.
        let (product_currency, face_value) = match held.face_value.len() {
            1 => held
                .face_value
                .iter()
                .next()
                .map_or((String::new(), Decimal::ZERO), |(c, v)| (c.clone(), *v)),
            _ => ("?".to_string(), Decimal::ZERO),
        };
        let products: Vec<&str> = held.products.iter().map(String::as_str).collect();
        let products = products.join("|");
        let group = match held.groups.len() {
            1 => held.groups.iter().next().map_or("", String::as_str),
            _ => "",
        };
        let late = late_note(line);
        let note = joined(&[
            "held for a person: the service's answer differs from the order sent",
            &late,
        ]);
        let expected = match product_currency.as_str() {
            "?" => String::new(),
            _ => face_value.to_string(),
        };
        let payer = payer(Some(&line.label), &currency);
        let completed_at = answer.as_ref().and_then(|a| a.completed_at.clone());
        let journal_line = JournalLine {
            completed_at: &line.booked_on,
            kind: LineKind::Suspense,
            environment: &held.info.environment,
            batch: &held.info.name,
            status: RowState::Mismatch.as_str(),
            currency: &currency,
            amount: &amount,
            expected: &expected,
            expected_currency: &product_currency,
            service_completed_at: completed_at.as_deref().unwrap_or_default(),
            group,
            product: &products,
            reference: &held.references.join("|"),
            order_id: line.label.service_order_id.as_deref().unwrap_or_default(),
            note: &note,
        };
        let booked = Booked {
            kind: LineKind::Suspense,
            environment: &held.info.environment,
            batch: &held.info.name,
            booked_at: &line.booked_at,
            payer: &payer,
            rows: held.rows,
            product: &products,
            product_currency: &product_currency,
            face_value,
            price: Decimal::ZERO,
            balance_currency: &currency,
            charged: claim.map(|(a, _)| a),
            groups: &[],
        };
        self.write(&journal_line, &booked)
    }
}
