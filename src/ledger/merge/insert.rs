//! Inserting the rows a merge records, new planned rows many to a statement.

use rusqlite::params;

use super::{IncomingRow, Merge, Result, RowState, exec};

/// New rows inserted by one statement at most: a whole order of the most rows an order takes.
pub(super) const ROWS_A_STATEMENT: usize = 200;

/// The statements of up to [`ROWS_A_STATEMENT`] rows insert a multiple of this many.
const ROWS_A_STEP: usize = 8;

/// Values of one row in [`multi_insert_sql`].
pub(super) const VALUES_A_ROW: usize = 9;

/// How many rows the next statement inserts when `left` remain: [`ROWS_A_STATEMENT`], else as
/// many multiples of [`ROWS_A_STEP`] as remain, then the rest. An order's rows take at most two
/// statements (SQLite keeps a journal of each, copying the pages it changes), in at most 32
/// shapes.
pub(super) fn rows_next(left: usize) -> usize {
    if left >= ROWS_A_STATEMENT {
        ROWS_A_STATEMENT
    } else if left >= ROWS_A_STEP {
        left - left % ROWS_A_STEP
    } else {
        left.max(1)
    }
}

/// The statement inserting `rows` planned rows (1 to [`ROWS_A_STATEMENT`]), made the first time
/// that size is used.
fn multi_insert_sql(rows: usize) -> &'static str {
    static SQL: [std::sync::OnceLock<String>; ROWS_A_STATEMENT + 1] =
        [const { std::sync::OnceLock::new() }; ROWS_A_STATEMENT + 1];
    let rows = rows.min(ROWS_A_STATEMENT);
    SQL[rows].get_or_init(|| insert_sql(rows))
}

/// The statement inserting `rows` planned rows: [`VALUES_A_ROW`] values a row, then the batch,
/// the order and the merge stamp they share.
pub(super) fn insert_sql(rows: usize) -> String {
    let shared = rows * VALUES_A_ROW;
    let (batch, order, stamp) = (shared + 1, shared + 2, shared + 3);
    let tuples: Vec<String> = (0..rows)
        .map(|k| {
            let p: Vec<String> = (1..=VALUES_A_ROW)
                .map(|n| format!("?{}", k * VALUES_A_ROW + n))
                .collect();
            format!(
                "(?{batch}, {}, 'PLANNED', NULL, {}, ?{order}, {}, ?{stamp})",
                p[..7].join(", "),
                p[7],
                p[8]
            )
        })
        .collect();
    format!(
        "INSERT INTO rows (batch_id, reference, position, line, fields, spec, content_hash,
                           delivery, state, error_type, error_message, order_id, item_index,
                           merged)
         VALUES {}",
        tuples.join(", ")
    )
}

impl Merge<'_> {
    /// Inserts new rows as PLANNED items of an order, up to [`ROWS_A_STATEMENT`] to a statement
    /// (one statement a row costs a fifth of a million-row merge, and each statement's journal
    /// copies the pages it changes).
    pub(super) fn insert_planned(&self, rows: &[(&IncomingRow, i64)], order_id: i64) -> Result<()> {
        let mut left = rows;
        while !left.is_empty() {
            let (chunk, rest) = left.split_at(rows_next(left.len()));
            left = rest;
            let mut values: Vec<&dyn rusqlite::ToSql> =
                Vec::with_capacity(chunk.len() * VALUES_A_ROW + 3);
            for (row, index) in chunk {
                values.extend_from_slice(&[
                    &row.reference as &dyn rusqlite::ToSql,
                    &row.position,
                    &row.line,
                    &row.fields,
                    &row.spec,
                    &row.content_hash,
                    &row.delivery,
                    &row.error_message,
                    index,
                ]);
            }
            values.push(&self.batch_id);
            values.push(&order_id);
            values.push(&self.stamp);
            exec(
                &self.tx,
                self.path,
                multi_insert_sql(chunk.len()),
                rusqlite::params_from_iter(values),
            )?;
        }
        Ok(())
    }

    pub(super) fn insert(
        &self,
        row: &IncomingRow,
        state: RowState,
        order: Option<(i64, i64)>,
    ) -> Result<i64> {
        exec(
            &self.tx,
            self.path,
            "INSERT INTO rows (batch_id, reference, position, line, fields, spec, content_hash,
                               delivery, state, error_type, error_message, order_id,
                               item_index, merged)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                self.batch_id,
                row.reference,
                row.position,
                row.line,
                row.fields,
                row.spec,
                row.content_hash,
                row.delivery,
                state.as_str(),
                row.error_type(),
                row.error_message,
                order.map(|o| o.0),
                order.map(|o| o.1),
                self.stamp
            ],
        )?;
        Ok(self.tx.last_insert_rowid())
    }
}
