//! The result file of a batch, written from the ledger: one line per row of the current input
//! file, in input order (the format: [`super::output`]).

use std::path::Path;

use rust_decimal::Decimal;

use crate::file_format::{FileFormat, OutFormat};
use crate::ledger::payouts::PayoutNote;
use crate::ledger::{Ledger, OrderLabel, RowRecord, RowState, Specs};

use super::output::{ResultLine, ResultWriter};
use crate::ops::error::OpError;

/// Lines handed from the ledger's side to the writing thread at a time, at most.
const CHUNK_LINES: usize = 1024;

/// The bytes of lines ([`ResultLine::size`]) a chunk is handed on at, whatever its number of
/// lines: a line of a hundred thousand input cells holds them as as many strings (24 bytes
/// each, empty or not), so a chunk of such lines is a few of them, not a thousand.
const CHUNK_BYTES: usize = 1 << 20;

/// What the writing thread of [`InBackground`] makes a line of the result file of.
pub(crate) trait ToLine: Send + 'static {
    /// About how many bytes it holds ([`ResultLine::size`]).
    fn size(&self) -> usize;
    fn into_line(self) -> ResultLine;
}

impl ToLine for ResultLine {
    fn size(&self) -> usize {
        ResultLine::size(self)
    }

    fn into_line(self) -> ResultLine {
        self
    }
}

/// A row as the ledger has it, with what the result file says of its order and its link
/// ([`result_line`], made on the writing thread: the ledger's side only reads).
pub(crate) struct LedgerLine {
    pub(crate) row: RowRecord,
    pub(crate) order: Option<OrderLabel>,
    pub(crate) note: Option<PayoutNote>,
}

impl ToLine for LedgerLine {
    fn size(&self) -> usize {
        let r = &self.row;
        let cells: usize = r.fields.iter().map(String::capacity).sum();
        let texts = [&r.payout_url, &r.error_message, &r.item_id, &r.completed_at];
        let added: usize = texts
            .iter()
            .map(|t| t.as_ref().map_or(0, String::len))
            .sum();
        r.fields.capacity() * std::mem::size_of::<String>() + cells + added
    }

    fn into_line(self) -> ResultLine {
        result_line(self.row, self.order, self.note)
    }
}

/// A result file written by a thread of its own: lines (or what they are made of, `T`) are
/// handed to it a chunk at a time. Dropped before [`InBackground::end`], the writer is told
/// there is no more and joined, and the unfinished file is removed before the drop returns.
pub(crate) struct InBackground<T: ToLine = ResultLine> {
    chunk: Vec<T>,
    /// The bytes of the lines of `chunk`.
    bytes: usize,
    to_write: Option<std::sync::mpsc::SyncSender<Vec<T>>>,
    writer: Option<std::thread::JoinHandle<std::io::Result<ResultWriter>>>,
}

impl<T: ToLine> InBackground<T> {
    pub(crate) fn start(out: ResultWriter) -> Self {
        let (to_write, chunks) = std::sync::mpsc::sync_channel::<Vec<T>>(4);
        let writer = std::thread::spawn(move || {
            let mut out = out;
            for chunk in chunks {
                for line in chunk {
                    out.write(&line.into_line())?;
                }
            }
            Ok(out)
        });
        InBackground {
            chunk: Vec::with_capacity(CHUNK_LINES),
            bytes: 0,
            to_write: Some(to_write),
            writer: Some(writer),
        }
    }

    /// Adds a line; `false` when the writer has stopped (its error comes with [`Self::end`]).
    pub(crate) fn push(&mut self, line: T) -> bool {
        self.bytes += line.size();
        self.chunk.push(line);
        if self.chunk.len() < CHUNK_LINES && self.bytes < CHUNK_BYTES {
            return true;
        }
        let full = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK_LINES));
        self.bytes = 0;
        self.to_write
            .as_ref()
            .is_some_and(|tx| tx.send(full).is_ok())
    }

    /// Hands over what is left and waits for the writer: the file written to the end, not yet
    /// in place ([`ResultWriter::finish`]), or the writer's error.
    pub(crate) fn end(mut self) -> std::io::Result<ResultWriter> {
        if let Some(tx) = self.to_write.take()
            && !self.chunk.is_empty()
        {
            // A writer that stopped says why below.
            let _ = tx.send(std::mem::take(&mut self.chunk));
        }
        match self.writer.take().map(std::thread::JoinHandle::join) {
            Some(Ok(written)) => written,
            _ => Err(std::io::Error::other("the result file's writer stopped")),
        }
    }
}

impl<T: ToLine> Drop for InBackground<T> {
    fn drop(&mut self) {
        self.to_write.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// Writes the result file from the ledger: one line per row of the current input file, in
/// input order, streamed from the ledger, in layout `format`. The ledger is read on the calling
/// thread while a thread of its own makes, formats and writes the lines (`InBackground`).
pub fn write_result_file(
    ledger: &Ledger,
    batch_id: i64,
    headers: &[String],
    path: &Path,
    format: FileFormat,
) -> Result<(), OpError> {
    let io_error = |e: std::io::Error| OpError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    if crate::failpoint::full("write_result") {
        return Err(io_error(std::io::ErrorKind::StorageFull.into()));
    }
    let mut lines: InBackground<LedgerLine> =
        InBackground::start(ResultWriter::create(path, headers, format).map_err(io_error)?);
    let read = ledger.visit_result_rows(batch_id, Specs::Skip, |row, order, note| {
        if lines.push(LedgerLine { row, order, note }) {
            Ok(())
        } else {
            Err(OpError::Io {
                path: path.to_path_buf(),
                message: "the result file could not be written".into(),
            })
        }
    });
    // The writer's own error says more than "could not be written".
    let out = lines.end().map_err(io_error)?;
    read?;
    // Only a file written to the end takes the place of the last one.
    out.finish().map_err(io_error)
}

/// The result file's line of row `r`, in `order`, with its link's last known life.
pub(crate) fn result_line(
    r: RowRecord,
    order: Option<OrderLabel>,
    note: Option<PayoutNote>,
) -> ResultLine {
    let note = note.unwrap_or_default();
    let charged_all_attempts = charged_all_attempts(&r, &note.earlier_charges);
    let status = match r.state {
        RowState::Planned => "PLANNED".to_string(),
        RowState::Submitted => "PROCESSING".to_string(),
        other => other.to_string(),
    };
    ResultLine {
        fields: r.fields,
        status,
        order_id: order.as_ref().and_then(|o| o.service_order_id.clone()),
        item_id: r.item_id,
        payout_url: r.payout_url,
        price: r.price.map(|p| p.to_string()),
        discount: r.discount.map(|d| d.to_string()),
        error_type: r.error_type,
        error_message: r.error_message,
        completed_at: r.completed_at,
        payment_method: order.map(|o| match &o.card_id {
            Some(card) => format!("CARD:{card}"),
            None => format!("{}:{}", o.payment_method.as_str(), o.payment_currency),
        }),
        debited_amount: r.debited_amount.map(|d| d.to_string()),
        debited_currency: r.debited_currency,
        payout_status: note.status.map(|s| s.as_str().to_string()),
        payout_status_since: note.since,
        payout_expires_at: note.expires_at,
        reissue_of: note.reissue_of.map(|e| match e.service_order_id {
            Some(id) => format!("attempt {}: {id}", e.attempt),
            None => format!("attempt {}", e.attempt),
        }),
        charged_all_attempts,
    }
}

/// What all the attempts of row `r` charged: its own when COMPLETED with a recorded charge,
/// and `earlier` ((currency, amount) of each attempt reissued since). A plain decimal in the
/// currency's decimals when they share one currency; `12.00 USD + 9.00 EUR` when they do not;
/// `None` when nothing was charged.
fn charged_all_attempts(r: &RowRecord, earlier: &[(String, Decimal)]) -> Option<String> {
    let own = match (&r.state, &r.debited_currency, &r.debited_amount) {
        (RowState::Completed, Some(currency), Some(amount)) => Some((currency, *amount)),
        _ => None,
    };
    let mut sums: std::collections::BTreeMap<&str, rust_decimal::Decimal> = Default::default();
    for (currency, amount) in own.into_iter().chain(earlier.iter().map(|(c, a)| (c, *a))) {
        *sums.entry(currency.as_str()).or_default() += amount;
    }
    match sums.len() {
        0 => None,
        1 => sums
            .iter()
            .next()
            .map(|(currency, sum)| crate::money::display_amount(*sum, currency)),
        _ => Some(
            sums.iter()
                .map(|(currency, sum)| {
                    format!(
                        "{} {currency}",
                        crate::money::display_amount(*sum, currency)
                    )
                })
                .collect::<Vec<_>>()
                .join(" + "),
        ),
    }
}

/// The result file of a `--plan-only` run of a batch new to the ledger, written while its one
/// pass reads the file ([`crate::input::scan::OnValidRow`]): every row PLANNED and paid as its
/// order will be (its card, or the balance of its payment currency), which is what the ledger holds
/// once the plan is committed. Written by a thread of its own (`InBackground`); the file
/// takes the place of the last one only through [`PlannedLines::finish`], once the plan is
/// committed. Any failure here only means the file is written from the ledger instead.
pub struct PlannedLines {
    path: std::path::PathBuf,
    card_id: Option<String>,
    /// `--out-format`, resolved against the file's layout once it is known (`None`: the
    /// file's own, as a new batch records it).
    out_format: Option<OutFormat>,
    lines: Option<InBackground>,
    count: usize,
    failed: bool,
}

impl PlannedLines {
    pub fn new(path: &Path, card_id: Option<&str>, out_format: Option<OutFormat>) -> Self {
        PlannedLines {
            path: path.to_path_buf(),
            card_id: card_id.map(str::to_string),
            out_format,
            lines: None,
            count: 0,
            failed: false,
        }
    }

    /// The file, written to the end and not yet in place, when it has `rows` lines; `None`
    /// when something failed (the result file is then written from the ledger).
    pub fn finish(mut self, rows: usize) -> Option<ResultWriter> {
        let written = self.lines.take()?.end().ok()?;
        (!self.failed && self.count == rows).then_some(written)
    }
}

impl crate::input::scan::OnValidRow for PlannedLines {
    fn start(&mut self, headers: &[String], input: FileFormat) {
        let format = self
            .out_format
            .unwrap_or(OutFormat::Same)
            .resolve(Some(input));
        match ResultWriter::create(&self.path, headers, format) {
            Ok(out) => self.lines = Some(InBackground::start(out)),
            Err(e) => {
                tracing::info!("the result file is written at the end ({e})");
                self.failed = true;
            }
        }
    }

    fn row(&mut self, fields: Vec<String>, spec: &crate::input::rules::RowSpec) {
        let Some(lines) = self.lines.as_mut().filter(|_| !self.failed) else {
            return;
        };
        let paid_by = match super::funds::row_card(spec, self.card_id.as_deref()) {
            Some(card) => format!("CARD:{card}"),
            None => format!("ACCOUNT_BALANCE:{}", spec.payment_currency),
        };
        self.count += 1;
        let line = ResultLine {
            fields,
            status: "PLANNED".to_string(),
            order_id: None,
            item_id: None,
            payout_url: None,
            price: None,
            discount: None,
            error_type: None,
            error_message: None,
            completed_at: None,
            payment_method: Some(paid_by),
            debited_amount: None,
            debited_currency: None,
            payout_status: None,
            payout_status_since: None,
            payout_expires_at: None,
            reissue_of: None,
            charged_all_attempts: None,
        };
        self.failed |= !lines.push(line);
    }
}
