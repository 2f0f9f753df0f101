//! `report --since DATE --until DATE`: every batch of the ledger completed in a period, read
//! once each, one row at a time, into any of: one result CSV of all of them (a `batch` column
//! first), the period's totals (its HTML page and `--json`), and an accounting journal.
//!
//! A batch completed when the last of its orders was answered final (COMPLETED, FAILED,
//! REJECTED or MISMATCH), once none of its rows is left to finish (PENDING, PLANNED or
//! SUBMITTED): the UTC date of that time ([`crate::ledger::Completion`]) places it in a
//! period, with its rows in the result CSV and its line on the page. A batch with rows left to
//! finish is in no period.
//!
//! Money follows the attempts, not the batches: the journal and what left each balance book
//! every paid attempt whose order became final in the period (the UTC date of the ledger's
//! time of that order becoming final), whichever batch it belongs to and whenever the batch's
//! other attempts completed, so that reissuing expired links in a later month leaves the
//! earlier charges in their month. A row the service completed otherwise than sent
//! (MISMATCH) is booked too, with what its order's answer says it cost, marked `MISMATCH`.
//! Totals are per environment: a rehearsal's money is never added to another environment's.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::collections::{BTreeMap, BTreeSet};

use chrono::{Days, NaiveDate};
use rust_decimal::Decimal;

use crate::api::decimal::parse_decimal_text;
use crate::api::models::{Order, OrderStatus};
use crate::batch::outcome::OpError;
use crate::batch::output::{ResultLine, ResultWriter};
use crate::batch::results::{InBackground, payout_note_of, result_line};
use crate::file_format::{FileFormat, OutFormat};
use crate::ledger::{BatchRecord, Ledger, OrderLabel, RowRecord, RowState, Specs, StoredSpec};
use crate::report::journal::{Journal, JournalLine, utc_date};
use crate::report::period::{Paid, PeriodTally};
use crate::report::tally::{column_index, payer};
use crate::report::{Tally, write_private};

/// The default group column of the journal, when the batches have it.
pub const DEFAULT_GROUP: &str = "cost_center";

/// A batch of the period and when it completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completed {
    pub batch: BatchRecord,
    /// When its last order became final (RFC 3339, UTC).
    pub at: String,
}

/// The batches of a period ([`select`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Completed in the period, in order of completion.
    pub batches: Vec<Completed>,
    /// Not finished (rows left to finish), created on or before the period's last day: left out.
    pub unfinished: Vec<(BatchRecord, i64)>,
}

/// The batches of the ledger completed from `since` to `until` (UTC dates, both included).
pub fn select(ledger: &Ledger, since: NaiveDate, until: NaiveDate) -> Result<Selection, OpError> {
    let mut selection = Selection::default();
    for batch in ledger.batches()? {
        let completion = ledger.batch_completion(batch.id)?;
        match completion.completed_at() {
            Some(at) => {
                let day = NaiveDate::parse_from_str(&utc_date(at), "%Y-%m-%d").ok();
                if day.is_some_and(|d| since <= d && d <= until) {
                    selection.batches.push(Completed {
                        at: at.to_string(),
                        batch,
                    });
                }
            }
            None if completion.rows_not_final > 0 => {
                let created = NaiveDate::parse_from_str(&utc_date(&batch.created_at), "%Y-%m-%d");
                if created.is_ok_and(|d| d <= until) {
                    selection
                        .unfinished
                        .push((batch, completion.rows_not_final));
                }
            }
            None => {} // no order was ever answered: it paid nothing, in no period
        }
    }
    selection
        .batches
        .sort_by(|a, b| (&a.at, &a.batch.name).cmp(&(&b.at, &b.batch.name)));
    Ok(selection)
}

/// Where a period's outputs go; `None` leaves one out.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// The result CSV of the period; `-` for a writer given to [`write_period`].
    pub out: Option<PathBuf>,
    /// The `--out-format` asked for the result CSV, if any ([`period_format`]).
    pub out_format: Option<OutFormat>,
    pub html: Option<PathBuf>,
    pub journal: Option<PathBuf>,
}

/// What was made of a period: its totals (for `--json`), and the paid rows that could not be
/// booked in the journal: COMPLETED rows without a recorded charge, and MISMATCH rows whose
/// order's answer says it completed without saying what it cost.
pub struct Written {
    pub totals: PeriodTally,
    pub not_booked: usize,
    pub mismatch_not_booked: usize,
}

/// The name of the period's own batch column in its result CSV: `batch`, or `paybatch_batch`
/// when an input column is already named `batch` in any case or spacing (then
/// `paybatch_batch_2`, ... should that be taken too).
pub fn batch_column(headers: &[String]) -> String {
    let taken = |name: &str| headers.iter().any(|h| h.trim().eq_ignore_ascii_case(name));
    if !taken("batch") {
        return "batch".to_string();
    }
    let mut name = "paybatch_batch".to_string();
    let mut n = 1;
    while taken(&name) {
        n += 1;
        name = format!("paybatch_batch_{n}");
    }
    name
}

/// A `--group-by` column that no batch of the period has (when it has batches), with the
/// columns its batches have: the period refuses it as `report --batch` does.
pub fn missing_group(group_by: &[String], batches: &[Completed]) -> Option<String> {
    if batches.is_empty() {
        return None;
    }
    let column = group_by.iter().find(|column| {
        batches
            .iter()
            .all(|c| column_index(&c.batch.headers, column).is_none())
    })?;
    Some(format!(
        "no batch of the period has a column `{column}`; their columns: {}",
        union_headers(batches).join(", ")
    ))
}

/// The layout of a period's result CSV: `asked` for the input layout of the period's first
/// batch; without `--out-format`, the layout every batch of the period wrote its result file
/// in when they all agree (an Excel `;` team's months stay `;`), else plain CSV.
pub fn period_format(batches: &[Completed], asked: Option<OutFormat>) -> FileFormat {
    if let Some(asked) = asked {
        return asked.resolve(batches.first().and_then(|c| c.batch.input_format));
    }
    let mut layouts = batches
        .iter()
        .map(|c| c.batch.result_format_or_earlier().format);
    match layouts.next() {
        Some(first) if layouts.all(|l| l == first) => first,
        _ => FileFormat::CSV,
    }
}

/// The journal's group column: the first `--group-by` column, else [`DEFAULT_GROUP`] when a
/// batch of the period has it; `None` without either.
pub fn journal_group(group_by: &[String], batches: &[Completed]) -> Option<String> {
    if let Some(first) = group_by.first() {
        return Some(first.clone());
    }
    batches
        .iter()
        .any(|c| column_index(&c.batch.headers, DEFAULT_GROUP).is_some())
        .then(|| DEFAULT_GROUP.to_string())
}

/// The input columns of the period's result CSV: every batch's header, in the order first
/// seen.
pub fn union_headers(batches: &[Completed]) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for c in batches {
        for h in &c.batch.headers {
            if !all.contains(h) {
                all.push(h.clone());
            }
        }
    }
    all
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> OpError + '_ {
    move |e| OpError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Reads every batch of `selection` once and writes what `outputs` asks for; `stdout` takes
/// the result CSV when `outputs.out` is `-` (built in a private temporary file first). The
/// period's totals are returned for `--json`.
pub fn write_period(
    ledger: &Ledger,
    selection: &Selection,
    since: &str,
    until: &str,
    group_by: &[String],
    outputs: &Outputs,
    stdout: &mut dyn Write,
) -> Result<Written, OpError> {
    let mut totals = PeriodTally::new(since, until, group_by);
    for (b, _) in &selection.unfinished {
        totals.unfinished(&b.name);
    }
    let headers = union_headers(&selection.batches);
    // The CSV on stdout is built as the file is, in a private temporary directory.
    let temporary = match &outputs.out {
        Some(p) if p.as_os_str() == "-" => {
            Some(tempfile::tempdir().map_err(io_at(Path::new("(temporary directory)")))?)
        }
        _ => None,
    };
    let csv_path = match (&temporary, &outputs.out) {
        (Some(dir), _) => Some(dir.path().join("period.csv")),
        (None, out) => out.clone(),
    };
    let mut lines = match &csv_path {
        Some(path) => Some(start_csv(path, &headers, selection, outputs)?),
        None => None,
    };
    let group = journal_group(group_by, &selection.batches);
    let mut journal = match &outputs.journal {
        Some(path) => Some(Journal::create(path, group.as_deref()).map_err(io_at(path))?),
        None => None,
    };
    let mut booking = Booking {
        since,
        until,
        journal: journal.as_mut(),
        journal_path: outputs.journal.as_deref(),
        totals: &mut totals,
        not_booked: 0,
        mismatch_not_booked: 0,
    };
    for completed in &selection.batches {
        let mut reading = BatchReading::new(ledger, completed, &headers, group.as_deref());
        for column in group_by {
            reading.tally.group_by_or_blank(column);
        }
        reading.read(lines.as_mut(), &mut booking, csv_path.as_deref())?;
        booking
            .totals
            .absorb(&completed.batch.name, &completed.at, &reading.tally);
    }
    book_charged_elsewhere(ledger, selection, &headers, group.as_deref(), &mut booking)?;
    let (not_booked, mismatch_not_booked) = (booking.not_booked, booking.mismatch_not_booked);
    if let (Some(lines), Some(path)) = (lines, &csv_path) {
        lines
            .end()
            .and_then(ResultWriter::finish)
            .map_err(io_at(path))?;
    }
    if let (Some(journal), Some(path)) = (journal, &outputs.journal) {
        journal.finish().map_err(io_at(path))?;
    }
    if let (Some(_), Some(path)) = (&temporary, &csv_path) {
        copy_out(path, stdout)?;
    }
    if let Some(path) = &outputs.html {
        write_page(ledger, selection, &totals, path)?;
    }
    Ok(Written {
        totals,
        not_booked,
        mismatch_not_booked,
    })
}

/// Starts the period's result CSV at `path`: the batch column, then `headers`, in the layout
/// [`period_format`] gives.
fn start_csv(
    path: &Path,
    headers: &[String],
    selection: &Selection,
    outputs: &Outputs,
) -> Result<InBackground, OpError> {
    let mut csv_headers = vec![batch_column(headers)];
    csv_headers.extend(headers.iter().cloned());
    let format = period_format(&selection.batches, outputs.out_format);
    let writer = ResultWriter::create(path, &csv_headers, format).map_err(io_at(path))?;
    Ok(InBackground::start(writer))
}

/// The paid attempts of the period in batches that completed in another period (or have not
/// finished): their money is booked where it left the balance, in this period.
fn book_charged_elsewhere(
    ledger: &Ledger,
    selection: &Selection,
    headers: &[String],
    group: Option<&str>,
    booking: &mut Booking<'_, '_>,
) -> Result<(), OpError> {
    let selected: BTreeSet<i64> = selection.batches.iter().map(|c| c.batch.id).collect();
    for batch in charged_around(ledger, booking.since, booking.until)? {
        if selected.contains(&batch.id) {
            continue;
        }
        let completed = Completed {
            at: String::new(),
            batch,
        };
        let mut reading = BatchReading::new(ledger, &completed, headers, group);
        reading.book_only(booking)?;
    }
    Ok(())
}

/// Copies the finished file at `path` to `out` (the CSV asked on stdout).
fn copy_out(path: &Path, out: &mut dyn Write) -> Result<(), OpError> {
    let mut file = std::fs::File::open(path).map_err(io_at(path))?;
    match std::io::copy(&mut file, out).and_then(|_| out.flush()) {
        // A reader that went away (`| head`) took what it wanted: not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(io_at(Path::new("(output)"))(e))
        }
        _ => Ok(()),
    }
}

/// The batches with an order that became final around the period (a day more on each side:
/// the ledger's times may carry an offset); each attempt's own date decides.
fn charged_around(ledger: &Ledger, since: &str, until: &str) -> Result<Vec<BatchRecord>, OpError> {
    let day = |d: &str| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok();
    let (Some(since), Some(until)) = (day(since), day(until)) else {
        return Ok(Vec::new());
    };
    let from = since.checked_sub_days(Days::new(1)).unwrap_or(since);
    let to = until.checked_add_days(Days::new(2)).unwrap_or(until);
    let mut batches = Vec::new();
    for id in ledger.batches_charged_between(&from.to_string(), &to.to_string())? {
        if let Some(batch) = ledger.batch_by_id(id)? {
            batches.push(batch);
        }
    }
    Ok(batches)
}

/// Where the paid attempts of the period are booked: the journal (when asked) and the
/// period's balances, for those whose order became final from `since` to `until`.
struct Booking<'j, 't> {
    since: &'j str,
    until: &'j str,
    journal: Option<&'j mut Journal>,
    journal_path: Option<&'j Path>,
    totals: &'t mut PeriodTally,
    not_booked: usize,
    mismatch_not_booked: usize,
}

impl Booking<'_, '_> {
    /// Whether an order that became final at `at` (RFC 3339) did so in the period.
    fn in_period(&self, at: &str) -> bool {
        let day = utc_date(at);
        self.since <= day.as_str() && day.as_str() <= self.until
    }

    /// Books one charge: a line of the journal, and what left the payer.
    fn book(
        &mut self,
        line: &JournalLine<'_>,
        payer: &str,
        paid: &Paid<'_>,
    ) -> Result<(), OpError> {
        if let Some(journal) = self.journal.as_deref_mut() {
            journal.add(line).map_err(|e| OpError::Io {
                path: self
                    .journal_path
                    .unwrap_or(Path::new("(journal)"))
                    .to_path_buf(),
                message: e.to_string(),
            })?;
        }
        self.totals.book(line.environment, payer, paid);
        Ok(())
    }
}

/// The MISMATCH rows of one order of a batch, gathered to book what the order cost.
#[derive(Default)]
struct MismatchOrder {
    label: Option<OrderLabel>,
    rows: usize,
    references: Vec<String>,
    products: BTreeSet<String>,
    groups: BTreeSet<String>,
    /// Product currency -> face value.
    face_value: BTreeMap<String, Decimal>,
}

/// What the answer of a MISMATCH order says left the paying balance: its total price (in its
/// currency, else the payment currency), else the sum of its items' prices when all are in
/// the payment currency. `Some(None)` when it completed without saying what it cost; `None`
/// when it did not complete (nothing was charged).
fn mismatch_charge(answer: &Order, paid_in: &str) -> Option<Option<(Decimal, String)>> {
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

/// Writes the period's HTML page at `path` (mode 0600).
fn write_page(
    ledger: &Ledger,
    selection: &Selection,
    totals: &PeriodTally,
    path: &Path,
) -> Result<(), OpError> {
    let mut environments: Vec<&str> = selection
        .batches
        .iter()
        .map(|c| c.batch.environment.as_str())
        .collect();
    environments.sort_unstable();
    environments.dedup();
    let page = totals
        .render(
            &environments.join(", "),
            &ledger.path().display().to_string(),
            &crate::ledger::now(),
            env!("CARGO_PKG_VERSION"),
        )
        .map_err(|e| OpError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    write_private(path, page.as_bytes()).map_err(io_at(path))
}

/// One batch of the period being read: its rows once, into the tally, the period's result CSV
/// and the booking of its paid attempts.
struct BatchReading<'a> {
    ledger: &'a Ledger,
    completed: &'a Completed,
    /// Per column of the batch, its position among the period's input columns.
    positions: Vec<usize>,
    /// How many input columns the period has.
    width: usize,
    /// The journal's group column in this batch.
    group: Option<usize>,
    tally: Tally,
    /// The MISMATCH rows read so far, per order of the ledger.
    mismatches: BTreeMap<i64, MismatchOrder>,
}

impl<'a> BatchReading<'a> {
    /// Ready to read `completed`, whose cells go to their places among the period's input
    /// columns `headers`; `group` is the journal's group column.
    fn new(
        ledger: &'a Ledger,
        completed: &'a Completed,
        headers: &[String],
        group: Option<&str>,
    ) -> Self {
        let batch_headers = &completed.batch.headers;
        BatchReading {
            ledger,
            completed,
            positions: batch_headers
                .iter()
                .map(|h| headers.iter().position(|u| u == h).unwrap_or(usize::MAX))
                .collect(),
            width: headers.len(),
            group: group.and_then(|g| column_index(batch_headers, g)),
            tally: Tally::for_period(&completed.batch),
            mismatches: BTreeMap::new(),
        }
    }

    /// Reads the batch once: every row into the tally and the result CSV, every paid attempt
    /// of the period into `booking`.
    fn read(
        &mut self,
        mut lines: Option<&mut InBackground>,
        booking: &mut Booking<'_, '_>,
        csv_path: Option<&Path>,
    ) -> Result<(), OpError> {
        let ledger = self.ledger;
        let batch = &self.completed.batch;
        // Who ran the batch held to an approved plan, and who approved it.
        self.tally.approvals(ledger.approvals(batch.id)?);
        ledger.visit_result_rows(batch.id, Specs::Read, |row, order| {
            let products = self.tally.add(&row, order.as_ref());
            self.book_row(booking, &row, order.as_ref(), &products)?;
            if let (Some(lines), Some(path)) = (lines.as_deref_mut(), csv_path) {
                let note = payout_note_of(ledger, &row)?;
                let mut line: ResultLine = result_line(row, order, note);
                line.fields = self.period_cells(std::mem::take(&mut line.fields));
                if !lines.push(line) {
                    return Err(OpError::Io {
                        path: path.to_path_buf(),
                        message: "the result file could not be written".into(),
                    });
                }
            }
            Ok::<(), OpError>(())
        })?;
        self.book_earlier_and_mismatches(booking, true)
    }

    /// Books the batch's paid attempts of the period, nothing else (a batch that completed
    /// in another period).
    fn book_only(&mut self, booking: &mut Booking<'_, '_>) -> Result<(), OpError> {
        let batch = &self.completed.batch;
        self.ledger
            .visit_result_rows(batch.id, Specs::Read, |row, order| {
                if matches!(row.state, RowState::Completed | RowState::Mismatch) {
                    let products = products_of(&batch.headers, &row);
                    self.book_row(booking, &row, order.as_ref(), &products)?;
                }
                Ok::<(), OpError>(())
            })?;
        self.book_earlier_and_mismatches(booking, false)
    }

    /// The attempts reissued since they were paid, then the MISMATCH orders gathered; `tally`:
    /// whether the earlier attempts count in the batch's tally too.
    fn book_earlier_and_mismatches(
        &mut self,
        booking: &mut Booking<'_, '_>,
        tally: bool,
    ) -> Result<(), OpError> {
        let batch = &self.completed.batch;
        self.ledger.visit_earlier_charges(batch.id, |earlier| {
            let products = if tally {
                self.tally.add_earlier_charge(&earlier)
            } else {
                products_of(&batch.headers, &earlier.row)
            };
            self.book_row(booking, &earlier.row, earlier.order.as_ref(), &products)
        })?;
        for (order_id, gathered) in std::mem::take(&mut self.mismatches) {
            self.book_mismatch(booking, order_id, &gathered)?;
        }
        Ok(())
    }

    /// The row's cells in the period's columns, after the batch's name.
    fn period_cells(&self, fields: Vec<String>) -> Vec<String> {
        let mut cells = vec![String::new(); self.width + 1];
        cells[0] = self.completed.batch.name.clone();
        for (i, cell) in fields.into_iter().enumerate() {
            if let Some(at) = self.positions.get(i).and_then(|p| cells.get_mut(p + 1)) {
                *at = cell;
            }
        }
        cells
    }

    fn group_of<'r>(&self, row: &'r RowRecord) -> &'r str {
        self.group
            .and_then(|i| row.fields.get(i))
            .map_or("", String::as_str)
    }

    /// Books one paid attempt of a COMPLETED row whose order became final in the period; one
    /// without a recorded charge is counted in `not_booked` instead. A MISMATCH row is
    /// gathered with its order's, booked once the batch is read.
    fn book_row(
        &mut self,
        booking: &mut Booking<'_, '_>,
        row: &RowRecord,
        order: Option<&OrderLabel>,
        products: &str,
    ) -> Result<(), OpError> {
        match row.state {
            RowState::Completed => {}
            RowState::Mismatch => {
                self.gather_mismatch(row, order, products);
                return Ok(());
            }
            _ => return Ok(()),
        }
        let at = row.completed_at.as_deref().unwrap_or(&self.completed.at);
        if !booking.in_period(at) {
            return Ok(());
        }
        let (Some(amount), Some(currency)) = (&row.debited_amount, &row.debited_currency) else {
            if booking.journal.is_some() {
                booking.not_booked += 1;
            }
            return Ok(());
        };
        let (product_currency, face_value) = asked(row);
        let paid = Paid {
            rows: 1,
            product_currency: &product_currency,
            face_value,
            balance_currency: currency,
            charged: parse_decimal_text(amount).unwrap_or_default(),
        };
        let order_id = order.and_then(|o| o.service_order_id.as_deref());
        let line = JournalLine {
            completed_at: at,
            environment: &self.completed.batch.environment,
            batch: &self.completed.batch.name,
            status: RowState::Completed.as_str(),
            currency,
            amount,
            group: self.group_of(row),
            product: products,
            reference: &row.reference,
            order_id: order_id.unwrap_or_default(),
            note: crate::batch::record::Unconfirmed::of(row.error_type.as_deref()).note(),
        };
        booking.book(&line, &payer(order, currency), &paid)
    }

    fn gather_mismatch(&mut self, row: &RowRecord, order: Option<&OrderLabel>, products: &str) {
        let Some(order_id) = row.order_id else {
            return;
        };
        let group = self.group_of(row).to_string();
        let (product_currency, face_value) = asked(row);
        let gathered = self.mismatches.entry(order_id).or_default();
        if gathered.label.is_none() {
            gathered.label = order.cloned();
        }
        gathered.rows += 1;
        gathered.references.push(row.reference.clone());
        gathered.products.insert(products.to_string());
        gathered.groups.insert(group);
        *gathered.face_value.entry(product_currency).or_default() += face_value;
    }

    /// Books what the answer of the MISMATCH order `order_id` says left the balance, when it
    /// became final in the period: one line for its rows (references joined with `|`).
    fn book_mismatch(
        &mut self,
        booking: &mut Booking<'_, '_>,
        order_id: i64,
        gathered: &MismatchOrder,
    ) -> Result<(), OpError> {
        let Some((Some(at), response)) = self.ledger.mismatch_answer(order_id)? else {
            return Ok(());
        };
        if !booking.in_period(&at) {
            return Ok(());
        }
        let label = gathered.label.as_ref();
        let paid_in = label.map_or("", |l| l.payment_currency.as_str());
        let answer = response.and_then(|r| serde_json::from_str::<Order>(&r).ok());
        let charge = match &answer {
            Some(answer) => match mismatch_charge(answer, paid_in) {
                None => return Ok(()),
                Some(charge) => charge,
            },
            None => None,
        };
        let Some((amount, currency)) = charge else {
            if booking.journal.is_some() {
                booking.mismatch_not_booked += gathered.rows;
            }
            return Ok(());
        };
        let amount_text = amount.to_string();
        let products: Vec<&str> = gathered.products.iter().map(String::as_str).collect();
        let group = match gathered.groups.len() {
            1 => gathered.groups.iter().next().map_or("", String::as_str),
            _ => "",
        };
        // The face value is named only when the rows asked for one currency.
        let (product_currency, face_value) = match gathered.face_value.len() {
            1 => gathered
                .face_value
                .iter()
                .next()
                .map_or((String::new(), Decimal::ZERO), |(c, v)| (c.clone(), *v)),
            _ => ("?".to_string(), Decimal::ZERO),
        };
        let paid = Paid {
            rows: gathered.rows,
            product_currency: &product_currency,
            face_value,
            balance_currency: &currency,
            charged: amount,
        };
        let line = JournalLine {
            completed_at: &at,
            environment: &self.completed.batch.environment,
            batch: &self.completed.batch.name,
            status: RowState::Mismatch.as_str(),
            currency: &currency,
            amount: &amount_text,
            group,
            product: &products.join("|"),
            reference: &gathered.references.join("|"),
            order_id: label
                .and_then(|l| l.service_order_id.as_deref())
                .unwrap_or_default(),
            note: "",
        };
        booking.book(&line, &payer(label, &currency), &paid)
    }
}

/// The currency and face value a row asked for, as its recorded content says (`?` and 0
/// without one).
fn asked(row: &RowRecord) -> (String, Decimal) {
    row.spec
        .as_deref()
        .and_then(|s| StoredSpec::parse(s).ok())
        .map_or(("?".to_string(), Decimal::ZERO), |s| {
            (s.currency.into_owned(), s.face_value)
        })
}

/// The products of a row as the page names them (`A|B`).
fn products_of(headers: &[String], row: &RowRecord) -> String {
    match row.spec.as_deref().and_then(|s| StoredSpec::parse(s).ok()) {
        Some(spec) => spec.product_codes.join("|"),
        None => headers
            .iter()
            .position(|h| crate::input::reader::canonical_column(h) == Some("product_code"))
            .and_then(|i| row.fields.get(i))
            .cloned()
            .unwrap_or_default(),
    }
}
