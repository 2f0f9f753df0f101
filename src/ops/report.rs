//! `report`: a batch's result file again, from the ledger (to a file, or to any writer such as
//! stdout), and its one-page HTML report. Reads the ledger only.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::batch::{options, results};
use crate::environment::Environment;
use crate::file_format::{OutFormat, ResultFormat};
use crate::ledger::{BatchRecord, Ledger, LedgerError, Specs};
use crate::ops::error::OpError;
use crate::report::{self, Tally};

/// Where the result file of a batch goes by default: where `run` writes it, beside the input
/// file as the run recorded its path.
pub fn default_result_path(batch: &BatchRecord) -> PathBuf {
    let environment = Environment::from_recorded(&batch.environment, &batch.base_url)
        .unwrap_or(Environment::Custom(batch.base_url.clone()));
    options::default_result_path(Path::new(&batch.input_path), &environment)
}

/// The layout the result file of `batch` is written in: `asked` (`--out-format`, resolved
/// against the input file's layout as the batch recorded it), else the one the batch recorded,
/// so the file is the one `run` wrote (plain CSV for a batch of an earlier version).
pub fn result_format(batch: &BatchRecord, asked: Option<OutFormat>) -> ResultFormat {
    match asked {
        Some(chosen) => ResultFormat::of(chosen, batch.input_format),
        None => batch.result_format_or_earlier(),
    }
}

/// Writes the result file of `batch` at `path` (atomically, mode 0600), in the layout the batch
/// recorded: the file `run` wrote.
pub fn write_result_file(ledger: &Ledger, batch: &BatchRecord, path: &Path) -> Result<(), OpError> {
    write_result_file_as(ledger, batch, path, result_format(batch, None))
}

/// Writes the result file of `batch` at `path` in `format` (atomically, mode 0600).
pub fn write_result_file_as(
    ledger: &Ledger,
    batch: &BatchRecord,
    path: &Path,
    format: ResultFormat,
) -> Result<(), OpError> {
    results::write_result_file(ledger, batch.id, &batch.headers, path, format.format)
}

/// Writes the result file of `batch` to `out`, in the layout the batch recorded (see
/// [`copy_result_file_as`]).
pub fn copy_result_file(
    ledger: &Ledger,
    batch: &BatchRecord,
    out: &mut dyn Write,
) -> Result<(), OpError> {
    copy_result_file_as(ledger, batch, result_format(batch, None), out)
}

/// Writes the result file of `batch` to `out` in `format`: built as the file is (a private
/// file, mode 0600, in a private temporary directory that is removed afterwards), then copied.
pub fn copy_result_file_as(
    ledger: &Ledger,
    batch: &BatchRecord,
    format: ResultFormat,
    out: &mut dyn Write,
) -> Result<(), OpError> {
    let io = |path: &Path, e: std::io::Error| OpError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let dir = tempfile::tempdir().map_err(|e| io(Path::new("(temporary directory)"), e))?;
    let path = dir.path().join("result.csv");
    results::write_result_file(ledger, batch.id, &batch.headers, &path, format.format)?;
    let mut file = std::fs::File::open(&path).map_err(|e| io(&path, e))?;
    match std::io::copy(&mut file, out).and_then(|_| out.flush()) {
        // A reader that went away (`| head`) took what it wanted: not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(io(Path::new("(output)"), e)),
        _ => Ok(()),
    }
}

/// Counts in `tally` what the earlier attempts of the batch's reissued rows charged.
fn add_earlier_charges(
    ledger: &Ledger,
    batch: &BatchRecord,
    tally: &mut Tally,
) -> Result<(), LedgerError> {
    ledger.visit_earlier_charges(batch.id, |earlier| {
        tally.add_earlier_charge(&earlier);
        Ok::<(), LedgerError>(())
    })
}

/// What `batch` cost, where finance books it (`report --batch NAME --json`): what left each
/// balance, the costs per product and per each column `tally` was asked for
/// ([`Tally::group_by`]).
pub fn batch_costs(
    ledger: &Ledger,
    batch: &BatchRecord,
    mut tally: Tally,
) -> Result<report::period::BatchCostsJson, OpError> {
    ledger.visit_result_rows(batch.id, Specs::Read, |row, order, _| {
        tally.add(&row, order.as_ref());
        Ok::<(), LedgerError>(())
    })?;
    add_earlier_charges(ledger, batch, &mut tally)?;
    Ok(report::period::batch_json(batch, &tally))
}

/// Writes the HTML report of `batch` at `path` (mode 0600), with the breakdowns `tally` was
/// asked for ([`Tally::group_by`]).
pub fn write_html(
    ledger: &Ledger,
    batch: &BatchRecord,
    path: &Path,
    mut tally: Tally,
) -> Result<(), OpError> {
    tally.latest_merge(ledger.merges(batch.id)?);
    tally.approvals(ledger.approvals(batch.id)?);
    if let Some((_, note)) = ledger.batch_notes(batch.id, "repeats ")?.last() {
        tally.repeats_decided(note);
    }
    ledger.visit_result_rows(batch.id, Specs::Read, |row, order, note| {
        tally.add(&row, order.as_ref());
        if let Some(note) = note {
            let now_paid_by = order.as_ref().and_then(|o| o.service_order_id.as_deref());
            tally.add_payout(&row, &note, now_paid_by);
        }
        Ok::<(), LedgerError>(())
    })?;
    add_earlier_charges(ledger, batch, &mut tally)?;
    // The orders followed for rows the latest file no longer had are part of the plan digest,
    // as `validate` made it.
    let outside: Vec<i64> = tally.orders_outside().collect();
    for id in outside {
        if let Some((key, body)) = ledger.order_key_and_body(id)? {
            tally.add_order_outside(&key, &body);
        }
    }
    let io = |message: String| OpError::Io {
        path: path.to_path_buf(),
        message,
    };
    let page = report::render_tally(
        batch,
        tally,
        &ledger.path().display().to_string(),
        &crate::ledger::now(),
        env!("CARGO_PKG_VERSION"),
    )
    .map_err(|e| io(e.to_string()))?;
    report::write_private(path, page.as_bytes()).map_err(|e| io(e.to_string()))
}
