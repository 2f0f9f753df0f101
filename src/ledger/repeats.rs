//! What the other batches of the ledger already did with a reference, a file or a recipient:
//! what a batch is checked against before anything of it is sent (`batch::repeats`).
//!
//! Read without a row's content where it can be: references from the index every batch has on
//! `(batch_id, reference)`, paid recipients from `rows_paid_likeness` (migration 008), which
//! holds only COMPLETED rows and so costs nothing while a file is planned.

use rusqlite::{OptionalExtension, Transaction, params};
use rust_decimal::Decimal;

use super::columns::stored_row;
use super::{BatchRecord, Ledger, Result, RowState, sqlerr};
use crate::row::RowContent;

/// The 64-bit FNV-1a hash of what makes two payouts alike: the recipient's address in lower
/// case, the products in any order, the face value at any scale and the currency. Stored with
/// each paid row (`rows.likeness`); two payouts that share it are compared by their content
/// before anything is said, so a collision can only cost a comparison.
pub fn likeness(email: &str, codes: &[&str], face_value: Decimal, currency: &str) -> i64 {
    // Without an allocation: a file's every row with an address is hashed while it is read.
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    let mut utf8 = [0u8; 4];
    for c in email.chars().flat_map(char::to_lowercase) {
        h.put(c.encode_utf8(&mut utf8).as_bytes());
    }
    h.end();
    if codes.len() == 1 {
        h.put(codes[0].as_bytes());
        h.end();
    } else {
        let mut sorted = codes.to_vec();
        sorted.sort_unstable();
        for code in sorted {
            h.put(code.as_bytes());
            h.end();
        }
    }
    let value = face_value.normalize();
    h.put(&value.mantissa().to_le_bytes());
    h.put(&value.scale().to_le_bytes());
    h.end();
    h.put(currency.as_bytes());
    h.end();
    h.0 as i64
}

/// 64-bit FNV-1a.
struct Fnv(u64);

impl Fnv {
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn put(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// The end of a part: a byte no text holds.
    fn end(&mut self) {
        self.put(&[0xff]);
    }
}

/// What a stored row's content (`rows.spec`) says of its likeness; `None` for a row without an
/// email address (a payout link has no recipient to compare).
pub fn likeness_of(spec: &RowContent) -> Option<i64> {
    let alike = Alike::of(spec)?;
    Some(alike.likeness())
}

/// The parts of a row that make two payouts alike, as stored in `rows.spec`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alike {
    pub email: String,
    pub product_codes: Vec<String>,
    pub face_value: Decimal,
    pub currency: String,
}

impl Alike {
    /// Read from a stored row's content; `None` without an email address.
    pub fn of(spec: &RowContent) -> Option<Self> {
        Some(Alike {
            email: spec.email.clone()?,
            product_codes: spec.product_codes.clone(),
            face_value: spec.face_value,
            currency: spec.currency.clone(),
        })
    }

    pub fn likeness(&self) -> i64 {
        let codes: Vec<&str> = self.product_codes.iter().map(String::as_str).collect();
        likeness(&self.email, &codes, self.face_value, &self.currency)
    }

    /// Whether `other` pays the same recipient the same thing (address in any case, products
    /// in any order, face value at any scale).
    pub fn same_as(&self, other: &Alike) -> bool {
        let sorted = |codes: &[String]| {
            let mut c = codes.to_vec();
            c.sort_unstable();
            c
        };
        self.email.to_lowercase() == other.email.to_lowercase()
            && sorted(&self.product_codes) == sorted(&other.product_codes)
            && self.face_value.normalize() == other.face_value.normalize()
            && self.currency == other.currency
    }
}

/// Fills `rows.likeness` for the rows of an older ledger that have an address (migration 008):
/// every row, paid or not, so that a row completed later is compared too.
pub fn fill_likeness(tx: &Transaction<'_>) -> rusqlite_migration::HookResult {
    let mut read = tx.prepare("SELECT id, spec FROM rows WHERE spec IS NOT NULL")?;
    let mut write = tx.prepare("UPDATE rows SET likeness = ?2 WHERE id = ?1")?;
    let mut rows = read.query([])?;
    while let Some(r) = rows.next()? {
        let id: i64 = r.get("id")?;
        let spec: RowContent = r.get("spec")?;
        if let Some(l) = likeness_of(&spec) {
            write.execute(params![id, l])?;
        }
    }
    Ok(())
}

/// A service's address as one spelling: scheme and host in lower case, the default port left
/// out, no trailing `/` (the embedded simulator's recorded name stays as it is).
pub fn service_address(base_url: &str) -> String {
    let trimmed = base_url.trim().trim_end_matches('/');
    match url::Url::parse(trimmed) {
        Ok(u) => u.as_str().trim_end_matches('/').to_string(),
        Err(_) => trimmed.to_string(),
    }
}

/// A row of another batch with the same reference, as that batch has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlierRow {
    pub state: RowState,
    /// Sends of its order (`None` without an order): a PLANNED row whose order was sent is in
    /// doubt.
    pub sends: Option<i64>,
    pub completed_at: Option<String>,
}

/// The row of a batch (`?1`) with a reference (`?2`), with the sends of its order: read once a
/// row of a file merged or checked.
pub(super) const EARLIER_ROW: super::columns::Named = super::columns::Named {
    sql: "SELECT r.state AS state, o.sends AS sends, r.completed_at AS completed_at FROM rows r
          LEFT JOIN orders o ON o.id = r.order_id
          WHERE r.batch_id = ?1 AND r.reference = ?2",
    columns: &["state", "sends", "completed_at"],
};

/// The row of `batch_id` with `reference`, with the sends of its order, read through `conn`
/// (the ledger's connection, or a merge's transaction).
pub fn earlier_row_in(
    conn: &rusqlite::Connection,
    path: &std::path::Path,
    batch_id: i64,
    reference: &str,
) -> Result<Option<EarlierRow>> {
    macro_rules! at {
        ($name:literal) => {
            const { super::columns::position(EARLIER_ROW.columns, $name) }
        };
    }
    let found: Option<(RowState, Option<i64>, Option<String>)> = conn
        .prepare_cached(EARLIER_ROW.sql)
        .and_then(|mut st| {
            st.query_row(params![batch_id, reference], |r| {
                Ok((
                    r.get(at!("state"))?,
                    r.get(at!("sends"))?,
                    r.get(at!("completed_at"))?,
                ))
            })
            .optional()
        })
        .map_err(sqlerr(path))?;
    found
        .map(|(state, sends, completed_at)| {
            Ok(EarlierRow {
                state,
                sends,
                completed_at,
            })
        })
        .transpose()
}

/// Every reference of a batch ([`Ledger::visit_references`]), read through `conn` (the
/// ledger's connection, or a merge's transaction).
pub fn visit_references_in(
    conn: &rusqlite::Connection,
    path: &std::path::Path,
    batch_id: i64,
    mut visit: impl FnMut(&str),
) -> Result<()> {
    let err = sqlerr(path);
    let mut st = conn
        .prepare_cached("SELECT reference FROM rows WHERE batch_id = ?1")
        .map_err(&err)?;
    let at = st.column_index("reference").map_err(&err)?;
    let mut rows = st.query(params![batch_id]).map_err(&err)?;
    while let Some(r) = rows.next().map_err(&err)? {
        let reference = r.get_ref(at).map_err(&err)?;
        if let Ok(text) = reference.as_str() {
            visit(text);
        }
    }
    Ok(())
}

/// A paid row of another batch that pays the same recipient the same thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaidAlike {
    pub batch_id: i64,
    pub reference: String,
    pub completed_at: String,
    pub spec: RowContent,
}

impl Ledger {
    /// The other batches of this service (`base_url`, however spelt: `--env playground` and
    /// its address given with `--base-url` are one service), oldest first: a payout in a
    /// rehearsal is no payout in production.
    pub fn sibling_batches(&self, base_url: &str, this: Option<i64>) -> Result<Vec<BatchRecord>> {
        let here = service_address(base_url);
        Ok(self
            .batches()?
            .into_iter()
            .filter(|b| service_address(&b.base_url) == here && Some(b.id) != this)
            .collect())
    }

    /// Every reference of a batch, in no particular order, from the batch's index of its
    /// references (no row is read).
    pub fn visit_references(&self, batch_id: i64, visit: impl FnMut(&str)) -> Result<()> {
        visit_references_in(&self.conn, &self.path, batch_id, visit)
    }

    /// The likeness of every row paid (COMPLETED) at `since` or later, with its batch, from
    /// the index of paid rows (no row is read).
    pub fn visit_paid_likeness(&self, since: &str, mut visit: impl FnMut(i64, i64)) -> Result<()> {
        let err = sqlerr(&self.path);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT likeness, batch_id FROM rows INDEXED BY rows_paid_likeness
                 WHERE state = 'COMPLETED' AND likeness IS NOT NULL AND completed_at >= ?1",
            )
            .map_err(&err)?;
        let (likeness, batch) = (
            st.column_index("likeness").map_err(&err)?,
            st.column_index("batch_id").map_err(&err)?,
        );
        let mut rows = st.query(params![since]).map_err(&err)?;
        while let Some(r) = rows.next().map_err(&err)? {
            visit(r.get(likeness).map_err(&err)?, r.get(batch).map_err(&err)?);
        }
        Ok(())
    }

    /// The references of the rows of a batch that are SKIPPED.
    pub fn skipped_references(&self, batch_id: i64) -> Result<Vec<String>> {
        let err = sqlerr(&self.path);
        let mut st = self
            .conn
            .prepare_cached("SELECT reference FROM rows WHERE batch_id = ?1 AND state = 'SKIPPED'")
            .map_err(&err)?;
        st.query_map(params![batch_id], |r| r.get("reference"))
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<String>>>())
            .map_err(err)
    }

    /// How many rows [`Ledger::visit_paid_likeness`] visits.
    pub fn count_paid_likeness(&self, since: &str) -> Result<i64> {
        self.conn
            .prepare_cached(
                "SELECT count(*) AS paid FROM rows INDEXED BY rows_paid_likeness
                 WHERE state = 'COMPLETED' AND likeness IS NOT NULL AND completed_at >= ?1",
            )
            .and_then(|mut st| st.query_row(params![since], |r| r.get("paid")))
            .map_err(sqlerr(&self.path))
    }

    /// The row of `batch_id` with `reference`, with the sends of its order.
    pub fn earlier_row(&self, batch_id: i64, reference: &str) -> Result<Option<EarlierRow>> {
        earlier_row_in(&self.conn, &self.path, batch_id, reference)
    }

    /// The rows paid at `since` or later whose likeness is `likeness`, outside `batch_id`.
    pub fn paid_alike(
        &self,
        likeness: i64,
        since: &str,
        this: Option<i64>,
    ) -> Result<Vec<PaidAlike>> {
        let err = sqlerr(&self.path);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT batch_id, line, reference, completed_at, spec FROM rows
                 INDEXED BY rows_paid_likeness
                 WHERE likeness = ?1 AND state = 'COMPLETED' AND completed_at >= ?2
                   AND spec IS NOT NULL",
            )
            .map_err(&err)?;
        let found = st
            .query_map(params![likeness, since], |r| {
                let spec = stored_row(r, "spec")?;
                Ok(PaidAlike {
                    batch_id: r.get("batch_id")?,
                    reference: r.get("reference")?,
                    completed_at: r.get("completed_at")?,
                    spec: spec.ok_or(rusqlite::Error::InvalidColumnType(
                        4,
                        "spec".into(),
                        rusqlite::types::Type::Null,
                    ))?,
                })
            })
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
            .map_err(self.read_error())?;
        Ok(found
            .into_iter()
            .filter(|p| Some(p.batch_id) != this)
            .collect())
    }

    /// Whether anything of the batch may have reached the service: an order sent (or once
    /// sent), or one the service named.
    pub fn has_sent(&self, batch_id: i64) -> Result<bool> {
        self.conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM orders WHERE batch_id = ?1
                   AND (sends > 0 OR last_sent_at IS NOT NULL OR service_order_id IS NOT NULL))
                 AS sent",
            )
            .and_then(|mut st| st.query_row(params![batch_id], |r| r.get("sent")))
            .map_err(sqlerr(&self.path))
    }

    /// Whether the ledger holds an order of this idempotency key or service order id.
    pub fn knows_order(&self, key: Option<&str>, service_order_id: &str) -> Result<bool> {
        let err = sqlerr(&self.path);
        let by_id: Option<i64> = self
            .conn
            .prepare_cached("SELECT id FROM orders WHERE service_order_id = ?1")
            .and_then(|mut st| {
                st.query_row(params![service_order_id], |r| r.get("id"))
                    .optional()
            })
            .map_err(&err)?;
        if by_id.is_some() {
            return Ok(true);
        }
        let Some(key) = key else {
            return Ok(false);
        };
        let by_key: Option<i64> = self
            .conn
            .prepare_cached("SELECT id FROM orders WHERE idempotency_key = ?1")
            .and_then(|mut st| st.query_row(params![key], |r| r.get("id")).optional())
            .map_err(&err)?;
        Ok(by_key.is_some())
    }

    /// Records on a batch, before its rows are planned, that a person allowed what other
    /// batches already paid (`cause` names them): one event, shown by `paybatch status`.
    pub fn record_batch_note(&mut self, batch_id: i64, cause: &str) -> Result<()> {
        let path = self.path.clone();
        let tx = super::begin(&mut self.conn, &path)?;
        super::event(&tx, batch_id, "batch", batch_id, None, None, cause).map_err(sqlerr(&path))?;
        super::commit(tx, &path)
    }

    /// The notes recorded on a batch whose cause starts with `prefix`, oldest first.
    pub fn batch_notes(&self, batch_id: i64, prefix: &str) -> Result<Vec<(String, String)>> {
        let err = sqlerr(&self.path);
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT at, cause FROM events
                 WHERE batch_id = ?1 AND subject = 'batch' AND substr(cause, 1, length(?2)) = ?2
                 ORDER BY id",
            )
            .map_err(&err)?;
        st.query_map(params![batch_id, prefix], |r| {
            Ok((r.get("at")?, r.get("cause")?))
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
        .map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().expect("decimal")
    }

    #[test]
    fn likeness_ignores_case_order_and_scale_but_not_the_currency() {
        let a = likeness("Ann@Example.com", &["B", "A"], d("10"), "USD");
        assert_eq!(
            a,
            likeness("ann@example.com", &["A", "B"], d("10.00"), "USD")
        );
        assert_ne!(
            a,
            likeness("ann@example.com", &["A", "B"], d("10.00"), "EUR")
        );
        assert_ne!(
            a,
            likeness("ann@example.com", &["A", "B"], d("10.01"), "USD")
        );
        assert_ne!(a, likeness("bob@example.com", &["A", "B"], d("10"), "USD"));
        // The separator keeps the parts apart.
        assert_ne!(
            likeness("a", &["bc"], d("1"), "USD"),
            likeness("ab", &["c"], d("1"), "USD")
        );
    }

    #[test]
    fn one_service_spelt_two_ways_is_one_address() {
        assert_eq!(
            service_address("HTTP://127.0.0.1:8080/v2/"),
            service_address("http://127.0.0.1:8080/v2")
        );
        assert_eq!(
            service_address("https://Playground.runa.io:443/v2"),
            service_address("https://playground.runa.io/v2")
        );
        assert_ne!(
            service_address("http://127.0.0.1:8080/v2"),
            service_address("http://127.0.0.1:8081/v2")
        );
        assert_eq!(service_address("embedded-simulator"), "embedded-simulator");
    }

    #[test]
    fn likeness_is_read_from_a_stored_row() {
        let spec = r#"{"product_codes":["AMZ-US"],"face_value":"25.00","currency":"USD","distribution":"EMAIL","email":"x@y.example","payment_currency":"USD"}"#;
        assert_eq!(
            likeness_of(&RowContent::parse(spec).expect("row")),
            Some(likeness("X@y.example", &["AMZ-US"], d("25"), "USD"))
        );
        let link = r#"{"product_codes":["AMZ-US"],"face_value":"25.00","currency":"USD","distribution":"PAYOUT_LINK","payment_currency":"USD"}"#;
        assert_eq!(likeness_of(&RowContent::parse(link).expect("row")), None);
    }
}
