//! A row's validated content as the ledger keeps it (`rows.spec`): written once, when the input
//! file is read ([`crate::input::scan::spec_json`]), and read back by the result file, the
//! report, reconciliation, the funds check, the history and the check for repeats.
//!
//! The text is part of the ledger's format: the field names, their order, the face value as a
//! decimal string and the optional fields left out when absent stay as they are, so that every
//! ledger written before reads the same (earlier versions wrote absent fields as `null` and the
//! row's reference too: both read).
//!
//! Its text fields are borrowed where it is written (once per row of a file of a million) and
//! owned where it is read ([`StoredSpec::parse`]).

use std::borrow::Cow;

use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::api::models::DistributionType;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSpec<'a> {
    /// One code, or the codes of a choice the recipient makes.
    pub product_codes: Cow<'a, [String]>,
    /// As written in the file (its scale kept), stored as a decimal string.
    #[serde(serialize_with = "decimal_text", deserialize_with = "exact_decimal")]
    pub face_value: Decimal,
    /// The product's currency.
    pub currency: Cow<'a, str>,
    pub distribution: DistributionType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<Cow<'a, str>>,
    /// The balance currency that pays.
    pub payment_currency: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_id: Option<Cow<'a, str>>,
}

impl StoredSpec<'_> {
    /// Reads a stored spec. The error says what is missing or wrong; whether a spec that
    /// cannot be read is tolerated is the reader's decision.
    pub fn parse(text: &str) -> Result<StoredSpec<'static>, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The text the ledger stores.
    pub fn to_json(&self) -> String {
        // Strings, a list of strings and a decimal string: nothing here can fail to encode.
        serde_json::to_string(self).unwrap_or_default()
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
            let spec = StoredSpec::parse(text).expect("reads");
            assert_eq!(spec.to_json(), text);
        }
        let full = StoredSpec::parse(FULL).expect("reads");
        assert_eq!(full.face_value, Decimal::new(2550, 2));
        assert_eq!(full.face_value.scale(), 2);
        assert_eq!(full.distribution, DistributionType::Email);
        assert_eq!(full.email.as_deref(), Some("jané@example.com"));
        assert_eq!(full.card_id.as_deref(), Some("card_1"));
        let bare = StoredSpec::parse(BARE).expect("reads");
        assert_eq!(bare.distribution, DistributionType::PayoutLink);
        assert_eq!((bare.email, bare.country, bare.card_id), (None, None, None));
    }

    /// Ledgers of earlier versions stored the reference too and absent fields as `null`.
    #[test]
    fn specs_of_earlier_ledgers_read() {
        let old = r#"{"reference":"R-1","product_codes":["AMZ-US"],"face_value":"10.00","currency":"USD","distribution":"EMAIL","email":null,"payment_currency":"USD","country":null,"card_id":null}"#;
        let spec = StoredSpec::parse(old).expect("reads");
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
            StoredSpec::parse(&with(&format!("\"{many}\"")))
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
            let e = StoredSpec::parse(&with(bad)).expect_err(bad);
            assert!(e.is_data(), "{bad}: {e}");
        }
        assert!(StoredSpec::parse("{\"product_codes\":").is_err());
        assert!(StoredSpec::parse(&BARE.replace(r#","currency":"USD""#, "")).is_err());
    }
}
