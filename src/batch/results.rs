//! The result file of a batch, written from the ledger: one line per row of the current input
//! file, in input order (the format: [`super::output`]).

use std::path::Path;

use crate::ledger::{Ledger, RowState};

use super::outcome::RunError;
use super::output::{ResultLine, ResultWriter};

/// Writes the result file from the ledger: one line per row of the current input file, in
/// input order, streamed from the ledger.
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
    let mut out = ResultWriter::create(path, headers).map_err(io_error)?;
    ledger.visit_result_rows(batch_id, |r, order| {
        let status = match r.state {
            RowState::Planned => "PLANNED".to_string(),
            RowState::Submitted => "PROCESSING".to_string(),
            other => other.to_string(),
        };
        let line = ResultLine {
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
        };
        out.write(&line).map_err(io_error)
    })?;
    out.finish().map_err(io_error)
}
