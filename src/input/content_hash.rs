//! The content hash of a row: what the ledger keeps of a row's payable content, to tell a row
//! edited after it was submitted from the row it was.

use sha2::{Digest, Sha256};

use super::row::RowSpec;
use crate::row::RowContent;

/// SHA-256 (hex) of the row's payable content: reference, product codes, face value as written,
/// currency, distribution, email, payment currency, country and card. Carried-through columns do
/// not count. A row edited after it was submitted has a different hash.
pub fn content_hash(row: &RowSpec) -> String {
    content_hash_of(&row.reference, &row.content)
}

/// [`content_hash`] of a row by its reference and its content (as the ledger stores them).
pub fn content_hash_of(reference: &str, row: &RowContent) -> String {
    // The hashed text is written whole, then hashed at once: one pass of SHA-256 over a short
    // buffer, where many small updates cost more than the hashing.
    let mut text = Vec::with_capacity(256);
    text.extend_from_slice(b"paybatch-row-v1\n");
    let face_value = row.face_value.to_string();
    put_one(&mut text, "reference", reference);
    put(
        &mut text,
        "product_codes",
        row.product_codes.iter().map(String::as_str),
    );
    put_one(&mut text, "face_value", &face_value);
    put_one(&mut text, "currency", &row.currency);
    put_one(&mut text, "distribution", row.distribution.as_str());
    put_one(&mut text, "email", row.email.as_deref().unwrap_or(""));
    put_one(&mut text, "payment_currency", &row.payment_currency);
    put_one(&mut text, "country", row.country.as_deref().unwrap_or(""));
    put_one(&mut text, "card_id", row.card_id.as_deref().unwrap_or(""));
    hex_of(&Sha256::digest(&text))
}

/// A field of one value ([`put`]).
fn put_one(text: &mut Vec<u8>, name: &str, value: &str) {
    put(text, name, std::iter::once(value));
}

/// One field of the hashed text, length-prefixed so that no value can imitate a field
/// boundary: `name=LEN:value\n`, the value being the parts joined by `|`.
fn put<'a>(text: &mut Vec<u8>, name: &str, parts: impl Iterator<Item = &'a str> + Clone) {
    let (count, bytes) = parts
        .clone()
        .fold((0usize, 0usize), |(n, b), p| (n + 1, b + p.len()));
    let len = bytes + count.saturating_sub(1);
    text.extend_from_slice(name.as_bytes());
    text.push(b'=');
    text.extend_from_slice(decimal_digits(len, &mut [0; 20]));
    text.push(b':');
    for (i, part) in parts.enumerate() {
        if i > 0 {
            text.push(b'|');
        }
        text.extend_from_slice(part.as_bytes());
    }
    text.push(b'\n');
}

/// `bytes` in lower-case hexadecimal.
fn hex_of(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// `n` in decimal digits, written at the end of `buf` (no allocation: nine a row).
fn decimal_digits(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[start..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::fixtures::*;

    /// The content hash as first defined (v1): ledgers written since compare against it, so
    /// the faster encoding must give the same bytes.
    fn content_hash_v1(row: &RowSpec) -> String {
        let mut h = Sha256::new();
        h.update(b"paybatch-row-v1\n");
        let mut put = |name: &str, value: &str| {
            h.update(format!("{name}={}:", value.len()).as_bytes());
            h.update(value.as_bytes());
            h.update(b"\n");
        };
        put("reference", &row.reference);
        put("product_codes", &row.product_codes.join("|"));
        put("face_value", &row.face_value.to_string());
        put("currency", &row.currency);
        put("distribution", row.distribution.as_str());
        put("email", row.email.as_deref().unwrap_or(""));
        put("payment_currency", &row.payment_currency);
        put("country", row.country.as_deref().unwrap_or(""));
        put("card_id", row.card_id.as_deref().unwrap_or(""));
        hex::encode(h.finalize())
    }

    #[test]
    fn content_hash_is_the_v1_definition() {
        let rows = [
            row(
                2,
                [
                    "R1",
                    "AMZ-US",
                    "10.50",
                    "USD",
                    "EMAIL",
                    "a@example.com",
                    "USD",
                    "US",
                ],
            ),
            row(3, ["R-2", "AMZ-US|STEAM-US", "5", "USD", "", "", "", ""]),
            row(
                4,
                [
                    "r:3/#",
                    "AMZ-DE",
                    "15.00",
                    "EUR",
                    "PAYOUT_LINK",
                    "",
                    "EUR",
                    "DE",
                ],
            ),
        ];
        for r in &rows {
            assert_eq!(content_hash(r), content_hash_v1(r), "{r:?}");
        }
        let mut empty = rows[1].clone();
        empty.product_codes.clear();
        empty.card_id = Some("card_1".into());
        assert_eq!(content_hash(&empty), content_hash_v1(&empty));
    }

    #[test]
    fn content_hash_follows_the_payable_content_only() {
        let a = row(
            2,
            [
                "R1",
                "AMZ-US",
                "10.50",
                "USD",
                "",
                "a@example.com",
                "",
                "US",
            ],
        );
        let mut moved = a.clone();
        moved.line = 40;
        moved.fields.push("carried".into());
        assert_eq!(content_hash(&a), content_hash(&moved));
        assert_eq!(content_hash(&a).len(), 64);
        for edited in [
            row(
                2,
                ["R1", "AMZ-US", "10.5", "USD", "", "a@example.com", "", "US"],
            ),
            row(
                2,
                [
                    "R1",
                    "AMZ-US",
                    "10.50",
                    "USD",
                    "",
                    "b@example.com",
                    "",
                    "US",
                ],
            ),
            row(
                2,
                [
                    "R1",
                    "AMZ-US",
                    "10.50",
                    "USD",
                    "",
                    "a@example.com",
                    "EUR",
                    "US",
                ],
            ),
            row(
                2,
                [
                    "R1",
                    "AMZ-US",
                    "10.50",
                    "USD",
                    "link",
                    "a@example.com",
                    "",
                    "US",
                ],
            ),
            row(
                2,
                [
                    "R2",
                    "AMZ-US",
                    "10.50",
                    "USD",
                    "",
                    "a@example.com",
                    "",
                    "US",
                ],
            ),
            row(
                2,
                [
                    "R1",
                    "AMZ-US|STEAM-US",
                    "10.50",
                    "USD",
                    "",
                    "a@example.com",
                    "",
                    "US",
                ],
            ),
        ] {
            assert_ne!(content_hash(&a), content_hash(&edited), "{edited:?}");
        }
    }
}
