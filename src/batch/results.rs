//! The result file of a batch, written from the ledger: one line per row of the current input
//! file, in input order (the format: [`super::output`]).

use std::path::Path;

use crate::ledger::{Ledger, OrderLabel, RowRecord, RowState};

use super::outcome::RunError;
use super::output::{ResultLine, ResultWriter};

/// Lines handed from the ledger's side to the writing thread at a time.
const CHUNK_LINES: usize = 1024;

/// Writes the result file from the ledger: one line per row of the current input file, in
/// input order, streamed from the ledger. The ledger is read on the calling thread while a
/// thread of its own formats and writes the lines, a chunk at a time.
pub fn write_result_file(
    ledger: &Ledger,
    batch_id: i64,
    headers: &[String],
    path: &Path,
) -> Result<(), RunError> {
    let io_error = |e: std::io::Error| RunError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let out = ResultWriter::create(path, headers).map_err(io_error)?;
    std::thread::scope(|threads| {
        let (to_write, chunks) = std::sync::mpsc::sync_channel::<Vec<ResultLine>>(4);
        let writer = threads.spawn(move || {
            let mut out = out;
            for chunk in chunks {
                for line in &chunk {
                    out.write(line)?;
                }
            }
            Ok::<_, std::io::Error>(out)
        });
        let mut chunk = Vec::with_capacity(CHUNK_LINES);
        let mut read = ledger.visit_result_rows(batch_id, false, |r, order| {
            chunk.push(result_line(r, order));
            if chunk.len() == CHUNK_LINES {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_LINES));
                // The writer stopped on an error of its own: said once it is joined.
                if to_write.send(full).is_err() {
                    return Err(RunError::Io {
                        path: path.to_path_buf(),
                        message: "the result file could not be written".into(),
                    });
                }
            }
            Ok(())
        });
        if read.is_ok() && !chunk.is_empty() && to_write.send(chunk).is_err() {
            read = Err(RunError::Io {
                path: path.to_path_buf(),
                message: "the result file could not be written".into(),
            });
        }
        drop(to_write);
        let written = match writer.join() {
            Ok(written) => written,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        // The writer's own error says more than "could not be written".
        let out = written.map_err(io_error)?;
        read?;
        // Only a file written to the end takes the place of the last one.
        out.finish().map_err(io_error)
    })
}

/// The result file's line of row `r`, in `order`.
fn result_line(r: RowRecord, order: Option<OrderLabel>) -> ResultLine {
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
        price: r.price,
        discount: r.discount,
        error_type: r.error_type,
        error_message: r.error_message,
        completed_at: r.completed_at,
        payment_method: order.map(|o| match &o.card_id {
            Some(card) => format!("CARD:{card}"),
            None => format!("{}:{}", o.payment_method, o.payment_currency),
        }),
        debited_amount: r.debited_amount,
        debited_currency: r.debited_currency,
    }
}

/// The result file of a `--plan-only` run of a batch new to the ledger, written while its one
/// pass reads the file ([`crate::input::scan::Cells`]): every row PLANNED and paid as its order
/// will be (its card, or the balance of its payment currency), which is what the ledger holds
/// once the plan is committed. A thread of its own formats and writes the lines; the file takes
/// the place of the last one only through [`PlannedLines::finish`], once the plan is committed.
/// Any failure here only means the file is written from the ledger instead.
pub struct PlannedLines {
    path: std::path::PathBuf,
    card_id: Option<String>,
    chunk: Vec<ResultLine>,
    to_write: Option<std::sync::mpsc::SyncSender<Vec<ResultLine>>>,
    writer: Option<std::thread::JoinHandle<std::io::Result<ResultWriter>>>,
    lines: usize,
    failed: bool,
}

impl PlannedLines {
    pub fn new(path: &Path, card_id: Option<&str>) -> Self {
        PlannedLines {
            path: path.to_path_buf(),
            card_id: card_id.map(str::to_string),
            chunk: Vec::with_capacity(CHUNK_LINES),
            to_write: None,
            writer: None,
            lines: 0,
            failed: false,
        }
    }

    fn send(&mut self) {
        let full = std::mem::replace(&mut self.chunk, Vec::with_capacity(CHUNK_LINES));
        let sent = self
            .to_write
            .as_ref()
            .is_some_and(|tx| tx.send(full).is_ok());
        self.failed |= !sent;
    }

    /// The file, written to the end and not yet in place, when it has `rows` lines; `None`
    /// when something failed (the result file is then written from the ledger).
    pub fn finish(mut self, rows: usize) -> Option<ResultWriter> {
        if !self.failed && !self.chunk.is_empty() {
            self.send();
        }
        self.to_write.take();
        let written = self.writer.take()?.join().ok()?.ok()?;
        (!self.failed && self.lines == rows).then_some(written)
    }
}

impl crate::input::scan::Cells for PlannedLines {
    fn start(&mut self, headers: &[String]) {
        let out = match ResultWriter::create(&self.path, headers) {
            Ok(out) => out,
            Err(e) => {
                tracing::info!("the result file is written at the end ({e})");
                self.failed = true;
                return;
            }
        };
        let (tx, chunks) = std::sync::mpsc::sync_channel::<Vec<ResultLine>>(4);
        self.to_write = Some(tx);
        self.writer = Some(std::thread::spawn(move || {
            let mut out = out;
            for chunk in chunks {
                for line in &chunk {
                    out.write(line)?;
                }
            }
            Ok(out)
        }));
    }

    fn row(&mut self, fields: Vec<String>, spec: &crate::input::rules::RowSpec) {
        if self.failed {
            return;
        }
        let paid_by = match super::funds::row_card(spec, self.card_id.as_deref()) {
            Some(card) => format!("CARD:{card}"),
            None => format!("ACCOUNT_BALANCE:{}", spec.payment_currency),
        };
        self.lines += 1;
        self.chunk.push(ResultLine {
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
        });
        if self.chunk.len() == CHUNK_LINES {
            self.send();
        }
    }
}

impl Drop for PlannedLines {
    /// A file not finished (the plan was not committed) is removed before this returns: the
    /// writer is told there is no more and joined, and drops its temporary file.
    fn drop(&mut self) {
        self.to_write.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}
