//! Decimal amounts on the wire.
//!
//! The service writes amounts in responses as decimal strings of varying scale (`"10"`,
//! `"10.00"`); its examples send `face_value` as a JSON number. paybatch reads both forms exactly
//! (never through `f64`: `serde_json` is built with `arbitrary_precision`, so a number keeps its
//! text) and writes `face_value` as an exact JSON number whose text is the validated decimal.

use std::str::FromStr;

use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer, Serializer, de};

/// Parses the text of a JSON number or string as an exact decimal.
pub fn parse_decimal_text(text: &str) -> Option<Decimal> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.contains(['e', 'E']) {
        return Decimal::from_scientific(text).ok();
    }
    Decimal::from_str(text).ok()
}

fn decimal_from_value<E: de::Error>(value: serde_json::Value) -> Result<Decimal, E> {
    match value {
        serde_json::Value::String(s) => parse_decimal_text(&s)
            .ok_or_else(|| E::custom(format!("`{s}` is not a decimal amount"))),
        serde_json::Value::Number(n) => {
            let text = n.to_string();
            parse_decimal_text(&text)
                .ok_or_else(|| E::custom(format!("`{text}` is not a decimal amount")))
        }
        other => Err(E::custom(format!(
            "expected a decimal amount as string or number, found {other}"
        ))),
    }
}

/// `#[serde(with = "flexible")]`: reads a string or a number, writes a string.
pub mod flexible {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&value.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        decimal_from_value(serde_json::Value::deserialize(d)?)
    }
}

/// `#[serde(with = "flexible_opt")]`: like [`flexible`], for optional fields (null allowed).
pub mod flexible_opt {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<Decimal>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.serialize_str(&v.to_string()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Null => Ok(None),
            other => decimal_from_value(other).map(Some),
        }
    }
}

/// `#[serde(with = "exact_number")]`: writes an exact JSON number (`10.50` stays `10.50`),
/// reads a string or a number.
pub mod exact_number {
    use super::*;
    use serde::Serialize;

    pub fn serialize<S: Serializer>(value: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        let number = serde_json::Number::from_str(&value.to_string())
            .map_err(|e| serde::ser::Error::custom(format!("amount {value}: {e}")))?;
        number.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        decimal_from_value(serde_json::Value::deserialize(d)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Wire {
        #[serde(with = "exact_number")]
        v: Decimal,
    }

    #[test]
    fn exact_number_keeps_the_scale_on_the_wire() {
        let w = Wire {
            v: Decimal::from_str("10.50").unwrap(),
        };
        assert_eq!(serde_json::to_string(&w).unwrap(), r#"{"v":10.50}"#);
        let back: Wire = serde_json::from_str(r#"{"v":0.1}"#).unwrap();
        assert_eq!(back.v.to_string(), "0.1");
        let from_str: Wire = serde_json::from_str(r#"{"v":"25.00"}"#).unwrap();
        assert_eq!(from_str.v.to_string(), "25.00");
    }

    #[test]
    fn rejects_non_numbers() {
        assert!(serde_json::from_str::<Wire>(r#"{"v":"ten"}"#).is_err());
        assert!(serde_json::from_str::<Wire>(r#"{"v":true}"#).is_err());
    }
}
