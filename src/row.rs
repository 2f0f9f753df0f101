//! One row of a batch file, typed once: what the input stage yields ([`IncomingRow`], whose
//! payable content is a [`RowContent`]) and what the ledger stores and reads back
//! (`rows.spec`), shared by both without either importing the other.
//!
//! [`RowContent`] is also the column's type: it is written and read as its JSON text
//! ([`ToSql`], [`FromSql`]). The text is part of the ledger's format: the field names, their
//! order, the face value as a decimal string and the optional fields left out when absent stay
//! as they are, so that every ledger written before reads the same (earlier versions wrote
//! absent fields as `null` and the row's reference too: both read).

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::api::models::DistributionType;

/// What one valid row pays: its products, amount, currencies and delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowContent {
    /// One code, or the codes of a choice the recipient makes.
    pub product_codes: Vec<String>,
    /// As written in the file (its scale kept): the text the service receives, stored as a
    /// decimal string.
    #[serde(serialize_with = "decimal_text", deserialize_with = "exact_decimal")]
    pub face_value: Decimal,
    /// The product's currency.
    pub currency: String,
    pub distribution: DistributionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The balance currency that pays.
    pub payment_currency: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_id: Option<String>,
}

impl RowContent {
    /// Reads a stored row. The error says what is missing or wrong.
    pub fn parse(text: &str) -> Result<RowContent, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The text the ledger stores.
    pub fn to_json(&self) -> String {
        // Strings, a list of strings and a decimal string: nothing here can fail to encode.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A row paying one product of 10 USD to an address, for the tests that need a valid row.
    #[cfg(test)]
    pub(crate) fn sample() -> RowContent {
        RowContent {
            product_codes: vec!["AMZ-US".into()],
            face_value: Decimal::new(10, 0),
            currency: "USD".into(),
            distribution: DistributionType::Email,
            email: Some("a@example.com".into()),
            payment_currency: "USD".into(),
            country: None,
            card_id: None,
        }
    }

    /// About how many bytes its text holds.
    pub fn size(&self) -> usize {
        self.product_codes.iter().map(String::len).sum::<usize>()
            + self.currency.len()
            + self.payment_currency.len()
            + [&self.email, &self.country, &self.card_id]
                .iter()
                .map(|o| o.as_ref().map_or(0, String::len))
                .sum::<usize>()
            + 32
    }
}

/// The text a stored row's column holds that is not a row: why it cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UnreadableRow(pub String);

impl FromSql for RowContent {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let unreadable = |why: String| FromSqlError::Other(Box::new(UnreadableRow(why)));
        let ValueRef::Text(text) = value else {
            return Err(unreadable(format!(
                "stored as {}, not as text",
                value.data_type()
            )));
        };
        let text = std::str::from_utf8(text).map_err(|e| unreadable(e.to_string()))?;
        let row = RowContent::parse(text).map_err(|e| unreadable(e.to_string()))?;
        match row.impossible() {
            Some(why) => Err(unreadable(why.to_string())),
            None => Ok(row),
        }
    }
}

impl RowContent {
    /// What no validated row holds, when this one does: it was not stored by paybatch as read.
    fn impossible(&self) -> Option<&'static str> {
        if self.face_value <= Decimal::ZERO {
            Some("a face value that is not positive")
        } else if self.product_codes.is_empty() || self.product_codes.iter().any(String::is_empty) {
            Some("no product code, or an empty one")
        } else if self.distribution == DistributionType::Other {
            Some("a distribution method paybatch does not send")
        } else {
            None
        }
    }
}

impl ToSql for RowContent {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.to_json()))
    }
}

/// The face value as its decimal text (`Display`: the scale kept, no exponent).
fn decimal_text<S: Serializer>(value: &Decimal, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

/// A decimal string read exactly: no rounding, no exponent, no number in its place.
fn exact_decimal<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
    let text = String::deserialize(d)?;
    Decimal::from_str_exact(&text)
        .map_err(|e| serde::de::Error::custom(format!("face_value `{text}` is not a decimal: {e}")))
}

/// A valid row's content as the column `rows.spec` holds it: the JSON text of a [`RowContent`],
/// made where the row is read (on the threads that read the file, not on the one that writes the
/// ledger) and written as it is. It is made from a `RowContent` only, so what is stored reads
/// back as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentText(String);

impl ContentText {
    pub fn of(content: &RowContent) -> ContentText {
        ContentText(content.to_json())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl ToSql for ContentText {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.0.as_str()))
    }
}

/// A row as the current input file has it, to be merged into the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomingRow {
    pub reference: String,
    pub position: i64,
    pub line: i64,
    /// JSON array of the input cells, for the result file.
    pub fields: String,
    /// What the valid row pays, as stored, `None` for an invalid row.
    pub spec: Option<ContentText>,
    pub content_hash: String,
    /// How the row is delivered (`EMAIL`, `PAYOUT_LINK`), `None` for an invalid row.
    pub delivery: Option<&'static str>,
    pub valid: bool,
    pub error_message: Option<String>,
    /// A valid row left out because another batch has it (`--skip-repeats`): recorded
    /// SKIPPED, with why in `error_message`.
    pub skipped: bool,
}

impl IncomingRow {
    /// About how many bytes the row holds (its text): what a batch keeps in memory per row it
    /// holds, whatever the number of its columns.
    pub fn size(&self) -> usize {
        self.reference.len()
            + self.fields.len()
            + self.spec.as_ref().map_or(0, |t| t.as_str().len())
            + self.content_hash.len()
            + self.error_message.as_ref().map_or(0, String::len)
    }

    /// What `rows.error_type` says of a row that is not to be paid: `invalid`, or `repeat`
    /// for a row left out by `--skip-repeats`.
    pub fn error_type(&self) -> Option<&'static str> {
        if self.skipped {
            Some("repeat")
        } else {
            (!self.valid).then_some("invalid")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the ledger stored before this type existed, for a row with every field and for one
    /// without the optional ones.
    const FULL: &str = r#"{"product_codes":["AMZ-US","ITUNES-US"],"face_value":"25.50","currency":"USD","distribution":"EMAIL","email":"jané@example.com","payment_currency":"EUR","country":"US","card_id":"card_1"}"#;
    const BARE: &str = r#"{"product_codes":["AMZ-US"],"face_value":"10","currency":"USD","distribution":"PAYOUT_LINK","payment_currency":"USD"}"#;

    #[test]
    fn stored_text_reads_and_writes_back_byte_for_byte() {
        for text in [FULL, BARE] {
            let spec = RowContent::parse(text).expect("reads");
            assert_eq!(spec.to_json(), text);
        }
        let full = RowContent::parse(FULL).expect("reads");
        assert_eq!(full.face_value, Decimal::new(2550, 2));
        assert_eq!(full.face_value.scale(), 2);
        assert_eq!(full.distribution, DistributionType::Email);
        assert_eq!(full.email.as_deref(), Some("jané@example.com"));
        assert_eq!(full.card_id.as_deref(), Some("card_1"));
        let bare = RowContent::parse(BARE).expect("reads");
        assert_eq!(bare.distribution, DistributionType::PayoutLink);
        assert_eq!((bare.email, bare.country, bare.card_id), (None, None, None));
    }

    /// The column holds the same text as [`RowContent::to_json`], and reads back the same row;
    /// text that is not a row is an [`UnreadableRow`].
    #[test]
    fn the_column_stores_the_text_and_reads_it_back() {
        let conn = rusqlite::Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (v TEXT)")
            .expect("table");
        let full = RowContent::parse(FULL).expect("reads");
        conn.execute("INSERT INTO t (v) VALUES (?1)", [&full])
            .expect("insert");
        let (back, text): (RowContent, String) = conn
            .query_row("SELECT v, v FROM t", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("read");
        assert_eq!((back, text.as_str()), (full, FULL));
        conn.execute("UPDATE t SET v = '{\"product_codes\":'", [])
            .expect("damage");
        let e = conn
            .query_row("SELECT v FROM t", [], |r| r.get::<_, RowContent>(0))
            .expect_err("damaged");
        let rusqlite::Error::FromSqlConversionFailure(_, _, e) = e else {
            panic!("{e}");
        };
        assert!(e.downcast_ref::<UnreadableRow>().is_some(), "{e}");
    }

    /// Ledgers of earlier versions stored the reference too and absent fields as `null`.
    #[test]
    fn rows_of_earlier_ledgers_read() {
        let old = r#"{"reference":"R-1","product_codes":["AMZ-US"],"face_value":"10.00","currency":"USD","distribution":"EMAIL","email":null,"payment_currency":"USD","country":null,"card_id":null}"#;
        let spec = RowContent::parse(old).expect("reads");
        assert_eq!(spec.face_value.to_string(), "10.00");
        assert_eq!(spec.email, None);
        assert_eq!(
            spec.to_json(),
            r#"{"product_codes":["AMZ-US"],"face_value":"10.00","currency":"USD","distribution":"EMAIL","payment_currency":"USD"}"#
        );
    }

    #[test]
    fn a_face_value_is_read_exactly_or_refused() {
        let with = |face: &str| BARE.replace(r#""10""#, face);
        let many = "1.2345678901234567890123456789";
        assert_eq!(
            RowContent::parse(&with(&format!("\"{many}\"")))
                .expect("28 places")
                .face_value
                .to_string(),
            many
        );
        for bad in [
            "\"1.23456789012345678901234567891\"",
            "\"ten\"",
            "\"1e3\"",
            "10",
        ] {
            let e = RowContent::parse(&with(bad)).expect_err(bad);
            assert!(e.is_data(), "{bad}: {e}");
        }
        assert!(RowContent::parse("{\"product_codes\":").is_err());
        assert!(RowContent::parse(&BARE.replace(r#","currency":"USD""#, "")).is_err());
    }
}
