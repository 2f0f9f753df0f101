//! The payouts of one recipient or one reference across every batch of the ledger: what
//! `paybatch history` lists to answer "did we pay this person already?".
//!
//! A reference is found, in any spelling that folds to it (`EMP-1`, `emp-1`, `ＥＭＰ-１`:
//! [`crate::reference`]), by a read of the index of each batch's references; an email address by a
//! scan of the rows' validated content (`rows.spec`), compared without regard to case. The
//! payout link of a row is never read.

use rusqlite::OptionalExtension;
use rust_decimal::Decimal;

use super::columns::{amount, stored_row, stored_row_in};
use super::{Ledger, Result, RowState, sqlerr};

/// Whose payouts to find: an email address, a reference, or both (rows matching both). At least
/// one is given, and neither is empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutQuery {
    email: Option<String>,
    reference: Option<String>,
}

impl PayoutQuery {
    /// A query by `email` and/or `reference` (trimmed, as the cells of a batch file are); `None`
    /// when neither is given or what is given is blank.
    pub fn new(email: Option<&str>, reference: Option<&str>) -> Option<Self> {
        let given = |s: Option<&str>| -> Option<Option<String>> {
            match s.map(str::trim) {
                None => Some(None),
                Some("") => None,
                Some(s) => Some(Some(s.to_string())),
            }
        };
        let (email, reference) = (given(email)?, given(reference)?);
        if email.is_none() && reference.is_none() {
            return None;
        }
        Some(PayoutQuery { email, reference })
    }

    pub fn email(&self) -> Option<&str> {
        self.email.as_deref()
    }

    pub fn reference(&self) -> Option<&str> {
        self.reference.as_deref()
    }

    /// Whether a row with this address and reference is one the query asks for.
    fn matches(&self, email: Option<&str>, reference: &str) -> bool {
        let email_ok = match (&self.email, email) {
            (None, _) => true,
            (Some(wanted), Some(e)) => same_address(wanted, e),
            (Some(_), None) => false,
        };
        email_ok
            && self.reference.as_deref().is_none_or(|r| {
                r == reference
                    || crate::reference::fold_reference(r)
                        == crate::reference::fold_reference(reference)
            })
    }
}

/// Whether two email addresses are the same recipient: equal but for case (Unicode lower case,
/// the domain and the part before the `@` alike), surrounding spaces ignored.
pub fn same_address(a: &str, b: &str) -> bool {
    let (a, b) = (a.trim(), b.trim());
    if a.is_ascii() && b.is_ascii() {
        return a.eq_ignore_ascii_case(b);
    }
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

/// One row of a batch as the history shows it: what it paid (or was to pay), to whom, and what
/// became of it. Never its payout link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayoutRecord {
    pub batch: String,
    /// The environment the batch was run in (`sim`, `playground`, `production`, `custom`).
    pub environment: String,
    pub batch_created_at: String,
    pub reference: String,
    /// The recipient's address as the file gave it; `None` for a row without one (a payout link)
    /// or a row that failed validation (whose content was not recorded).
    pub email: Option<String>,
    /// The product codes (several: a choice the recipient makes); empty for an INVALID row.
    pub product_codes: Vec<String>,
    /// Face value as written in the file, and its currency; `None` for an INVALID row.
    pub face_value: Option<String>,
    pub currency: Option<String>,
    pub state: RowState,
    pub attempt: i64,
    /// What the payout cost, in `currency` (face value less discount), once COMPLETED.
    pub price: Option<Decimal>,
    /// What left the paying balance (or card) for it, once COMPLETED, where recorded.
    pub debited_amount: Option<Decimal>,
    pub debited_currency: Option<String>,
    /// When the service completed it.
    pub completed_at: Option<String>,
    /// The service's order id, once the service answered.
    pub order_id: Option<String>,
    /// Why it failed or was refused, as the service or the checks named it.
    pub error_type: Option<String>,
}

impl PayoutRecord {
    /// When it completed, else when its batch was created.
    pub fn date(&self) -> &str {
        self.completed_at
            .as_deref()
            .unwrap_or(&self.batch_created_at)
    }
}

/// A payout by its row id (`?1`). Selects no payout link.
const PAYOUT_BY_ROW: &str = "SELECT b.name, b.environment, b.created_at, r.reference, r.spec,
        r.state, r.attempt, r.price, r.debited_amount, r.debited_currency, r.completed_at,
        o.service_order_id, r.error_type, r.batch_id, r.position, r.line
 FROM rows r JOIN batches b ON b.id = r.batch_id LEFT JOIN orders o ON o.id = r.order_id
 WHERE r.id = ?1";

impl Ledger {
    /// Every row of every batch that `query` names, oldest batch first and in input order
    /// within a batch, whatever its state. By reference: one look-up in each batch's index of
    /// references. By email alone: one scan of the rows' content (rows that failed validation
    /// have none recorded and are found by reference only).
    ///
    /// Measured on a ledger of 1,000,000 rows (one batch from `gen_batch 1000000`, planned with
    /// `--plan-only`, 640 MB), release build, on 2 cores shared with other builds (load average
    /// 7 to 8): `paybatch history --email` 1.0 to 1.7 s, 32 MB peak, most of it SQLite reading
    /// each row's JSON; `--reference` 0.1 to 0.3 s.
    pub fn payouts(&self, query: &PayoutQuery) -> Result<Vec<PayoutRecord>> {
        let ids = match (query.reference(), query.email()) {
            (Some(reference), _) => self.rows_with_reference(reference)?,
            (None, Some(email)) => self.rows_with_email(email)?,
            (None, None) => Vec::new(),
        };
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some((p, place)) = self.payout(id)?
                && query.matches(p.email.as_deref(), &p.reference)
            {
                found.push((place, p));
            }
        }
        found.sort_by_key(|(place, _)| *place);
        Ok(found.into_iter().map(|(_, p)| p).collect())
    }

    /// The rows with this reference, in any spelling that folds to it
    /// ([`crate::reference::same_reference`]): one read of every batch's index of references,
    /// each compared without a copy.
    fn rows_with_reference(&self, reference: &str) -> Result<Vec<i64>> {
        let err = sqlerr(&self.path);
        let mut stmt = self
            .conn
            .prepare("SELECT batch_id, reference FROM rows")
            .map_err(&err)?;
        let (batch_at, reference_at) = (
            stmt.column_index("batch_id").map_err(&err)?,
            stmt.column_index("reference").map_err(&err)?,
        );
        let mut cursor = stmt.query([]).map_err(&err)?;
        let mut found: Vec<(i64, String)> = Vec::new();
        while let Some(r) = cursor.next().map_err(&err)? {
            if let Ok(spelt) = r.get_ref(reference_at).map_err(&err)?.as_str()
                && crate::reference::same_reference(reference, spelt)
            {
                found.push((r.get(batch_at).map_err(&err)?, spelt.to_string()));
            }
        }
        let mut ids = Vec::with_capacity(found.len());
        for (batch, spelt) in found {
            ids.extend(self.select_all(
                "SELECT id FROM rows WHERE batch_id = ?1 AND reference = ?2",
                rusqlite::params![batch, spelt],
                |r| r.get::<_, i64>("id"),
            )?);
        }
        Ok(ids)
    }

    /// The rows whose recorded address is `email` but for case: a scan of every row in the
    /// order it is stored (no sort), one in memory at a time, each stored row read through the
    /// one conversion (one that cannot be read is a damaged ledger, never passed over).
    fn rows_with_email(&self, email: &str) -> Result<Vec<i64>> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, batch_id, line, spec FROM rows WHERE spec IS NOT NULL")
            .map_err(sqlerr(&self.path))?;
        let mut cursor = stmt.query([]).map_err(sqlerr(&self.path))?;
        let mut ids = Vec::new();
        while let Some(r) = cursor.next().map_err(sqlerr(&self.path))? {
            let found = stored_row(r, "spec")
                .map_err(self.read_error())?
                .and_then(|s| s.email);
            if found.is_some_and(|e| same_address(email, &e)) {
                ids.push(r.get("id").map_err(sqlerr(&self.path))?);
            }
        }
        Ok(ids)
    }

    /// The payout of a row, with its place in the ledger: (batch, position in its file).
    fn payout(&self, row_id: i64) -> Result<Option<(PayoutRecord, (i64, i64))>> {
        let found = self
            .conn
            .prepare_cached(PAYOUT_BY_ROW)
            .and_then(|mut st| {
                st.query_row([row_id], |r| {
                    Ok((
                        PayoutRecord {
                            batch: r.get("name")?,
                            environment: r.get("environment")?,
                            batch_created_at: r.get("created_at")?,
                            reference: r.get("reference")?,
                            email: None,
                            product_codes: Vec::new(),
                            face_value: None,
                            currency: None,
                            state: r.get("state")?,
                            attempt: r.get("attempt")?,
                            price: amount(r, "price")?,
                            debited_amount: amount(r, "debited_amount")?,
                            debited_currency: r.get("debited_currency")?,
                            completed_at: r.get("completed_at")?,
                            order_id: r.get("service_order_id")?,
                            error_type: r.get("error_type")?,
                        },
                        stored_row_in(r, "spec", r.get("state")?)?,
                        (r.get("batch_id")?, r.get("position")?),
                    ))
                })
                .optional()
            })
            .map_err(self.read_error())?;
        let Some((mut p, spec, place)) = found else {
            return Ok(None);
        };
        if p.state != RowState::Completed {
            // An order that did not complete can carry a price nobody paid.
            (p.price, p.debited_amount, p.debited_currency) = (None, None, None);
        }
        if let Some(seen) = spec {
            p.email = seen.email;
            p.product_codes = seen.product_codes;
            p.face_value = Some(seen.face_value.to_string());
            p.currency = Some(seen.currency);
        }
        Ok(Some((p, place)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_compare_without_regard_to_case() {
        assert!(same_address("Jane.Doe@Example.COM", "jane.doe@example.com"));
        assert!(same_address(" jane@example.com", "JANE@EXAMPLE.COM "));
        assert!(same_address("ÄNNE@例え.jp", "änne@例え.jp"));
        assert!(!same_address("jane@example.com", "jane@example.org"));
        assert!(!same_address("jane@example.com", "jane1@example.com"));
        assert!(!same_address("änne@example.com", "anne@example.com"));
    }

    #[test]
    fn a_query_names_someone() {
        assert_eq!(PayoutQuery::new(None, None), None);
        assert_eq!(PayoutQuery::new(Some("  "), None), None);
        assert_eq!(PayoutQuery::new(Some("a@b.co"), Some("")), None);
        let q = PayoutQuery::new(Some(" a@b.co "), None).expect("an email");
        assert_eq!((q.email(), q.reference()), (Some("a@b.co"), None));
        let both = PayoutQuery::new(Some("a@b.co"), Some("R-1")).expect("both");
        assert!(both.matches(Some("A@B.CO"), "R-1"));
        assert!(
            both.matches(Some("a@b.co"), "r-1"),
            "a reference in another spelling"
        );
        assert!(
            both.matches(Some("a@b.co"), "\u{ff32}-\u{ff11}"),
            "full-width"
        );
        assert!(
            !both.matches(Some("a@b.co"), "R_1"),
            "a likely repeat is not the reference"
        );
        assert!(!both.matches(Some("a@b.co"), "R-2"));
        assert!(!both.matches(None, "R-1"));
    }

    /// A ledger with two batches that pay `Jane@Example.com` (R-1 in nov, R-7 in dec), one other
    /// recipient, and a row that failed validation.
    fn ledger() -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().expect("temp dir");
        let ledger = Ledger::open(&dir.path().join("ledger.db")).expect("ledger");
        let spec = |email: &str, value: &str| {
            format!(
                r#"{{"product_codes":["AMZ-US"],"face_value":"{value}","currency":"USD","distribution":"EMAIL","email":"{email}","payment_currency":"USD"}}"#
            )
        };
        ledger
            .conn
            .execute_batch(&format!(
                "INSERT INTO batches (id, name, input_path, input_hash, headers, environment,
                                      base_url, key_fingerprint, created_at, updated_at)
                 VALUES (1, 'nov', 'nov.csv', '', '[]', 'sim', 'embedded-simulator', '',
                         '2026-11-01T08:00:00.000Z', ''),
                        (2, 'dec', 'dec.csv', '', '[]', 'production', 'x', '',
                         '2026-12-01T08:00:00.000Z', '');
                 INSERT INTO orders (id, batch_id, idempotency_key, body, mode, payment_currency,
                                     state, service_order_id, created_at)
                 VALUES (1, 1, 'k1', x'', 'async', 'USD', 'COMPLETED', 'ORD-1', '');
                 INSERT INTO rows (batch_id, reference, position, line, fields, spec,
                                   content_hash, state, order_id, payout_url, price,
                                   completed_at)
                 VALUES (1, 'R-2', 1, 3, '[]', '{other}', '', 'COMPLETED', 1,
                         'https://pay.example/secret-2', '5.00', '2026-11-01T09:00:00Z'),
                        (1, 'R-1', 0, 2, '[]', '{nov}', '', 'COMPLETED', 1,
                         'https://pay.example/secret-1', '9.80', '2026-11-01T09:00:00Z'),
                        (2, 'R-7', 0, 2, '[]', '{dec}', '', 'PLANNED', NULL, NULL, NULL, NULL),
                        (2, 'R-1', 1, 3, '[]', NULL, '', 'INVALID', NULL, NULL, NULL, NULL);",
                other = spec("john@example.com", "5.00"),
                nov = spec("Jane@Example.com", "10.00"),
                dec = spec("jane@example.COM", "25"),
            ))
            .expect("rows");
        (dir, ledger)
    }

    #[test]
    fn finds_a_recipient_in_every_batch_in_any_case() {
        let (_dir, ledger) = ledger();
        let q = PayoutQuery::new(Some("JANE@example.com"), None).expect("query");
        let found = ledger.payouts(&q).expect("payouts");
        let seen: Vec<(&str, &str, RowState)> = found
            .iter()
            .map(|p| (p.batch.as_str(), p.reference.as_str(), p.state))
            .collect();
        assert_eq!(
            seen,
            [
                ("nov", "R-1", RowState::Completed),
                ("dec", "R-7", RowState::Planned)
            ]
        );
        let nov = &found[0];
        assert_eq!(nov.order_id.as_deref(), Some("ORD-1"));
        assert_eq!(nov.price.map(|p| p.to_string()).as_deref(), Some("9.80"));
        assert_eq!(
            (nov.face_value.as_deref(), nov.currency.as_deref()),
            (Some("10.00"), Some("USD"))
        );
        assert_eq!(nov.date(), "2026-11-01T09:00:00Z");
        assert_eq!(found[1].date(), "2026-12-01T08:00:00.000Z");
        assert_eq!(found[1].order_id, None);
    }

    #[test]
    fn finds_a_reference_in_every_batch_invalid_rows_included() {
        let (_dir, ledger) = ledger();
        let q = PayoutQuery::new(None, Some("R-1")).expect("query");
        let found = ledger.payouts(&q).expect("payouts");
        let seen: Vec<(&str, RowState)> =
            found.iter().map(|p| (p.batch.as_str(), p.state)).collect();
        assert_eq!(
            seen,
            [("nov", RowState::Completed), ("dec", RowState::Invalid)]
        );
        assert_eq!(found[1].email, None);
        // Both: only the rows that match both.
        let q = PayoutQuery::new(Some("jane@EXAMPLE.com"), Some("R-1")).expect("query");
        let found = ledger.payouts(&q).expect("payouts");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].batch, "nov");
        // Nobody.
        let q = PayoutQuery::new(Some("nobody@example.com"), None).expect("query");
        assert!(ledger.payouts(&q).expect("payouts").is_empty());
        // A reference in any spelling that folds to it, not one that differs but for `-`, `_`
        // or spaces.
        let q = PayoutQuery::new(None, Some("r-1")).expect("query");
        assert_eq!(ledger.payouts(&q).expect("payouts").len(), 2);
        let q = PayoutQuery::new(None, Some("R_1")).expect("query");
        assert!(ledger.payouts(&q).expect("payouts").is_empty());
    }

    /// A search by address reads every stored row through the one conversion: a row that
    /// cannot be read (here one of another recipient) is a damaged ledger naming its batch and
    /// line, never passed over.
    #[test]
    fn a_search_by_address_calls_an_unreadable_stored_row_damage() {
        let (_dir, ledger) = ledger();
        let q = PayoutQuery::new(Some("jane@example.com"), None).expect("query");
        for damage in ["{\"product_codes\":", r#"{"product_codes":[]}"#] {
            ledger
                .conn
                .execute(
                    "UPDATE rows SET spec = ?1 WHERE reference = 'R-2'",
                    [damage],
                )
                .expect("damaged");
            match ledger.payouts(&q) {
                Err(super::super::LedgerError::Corrupt(m)) => {
                    assert!(m.contains("line 3 of batch `nov`"), "{m}")
                }
                other => panic!("not a damaged ledger: {other:?}"),
            }
        }
    }
}
