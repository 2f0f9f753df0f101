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
