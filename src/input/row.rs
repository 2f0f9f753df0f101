//! Validating a batch: each record's syntax ([`parse_record`]), then each row against the catalog
//! and the rows before it ([`Validator::check`]).
//!
//! Every problem names the line, the column, the value, what was expected and what to do, so a
//! whole file can be corrected in one pass: both steps report all the problems of a row, not
//! only the first.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};

use rust_decimal::Decimal;
use sha2::{Digest, Sha256};

pub use super::problem::{KEPT, KEPT_PER_KIND, Problem, Problems, show};
use super::reader::{ColumnMap, RawRecord};
use crate::api::{
    DecimalString, Denominations, DistributionType, PayoutType, Product, SubscriptionPlan,
};
use crate::money::{
    BALANCE_CURRENCIES, is_balance_currency, is_currency_code, minor_units, parse_amount,
};

/// The longest reference accepted, in characters.
pub const MAX_REFERENCE_CHARS: usize = 100;
/// Characters a reference may hold besides letters and digits.
pub const REFERENCE_PUNCTUATION: &str = "-_.:/# ";
/// The longest email address accepted, in bytes.
pub const MAX_EMAIL_BYTES: usize = 254;

fn quoted(value: &str) -> String {
    format!("`{}`", show(value))
}

// ---------------------------------------------------------------------------------------------
// Rows

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Accept rows with the same recipient, products and face value as an earlier row.
    pub allow_duplicates: bool,
    /// The balance currency that pays for rows whose product currency is not a balance currency
    /// and whose `payment_currency` is empty.
    pub default_payment_currency: Option<String>,
}

/// A row whose syntax is valid: what one payout asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct RowSpec {
    pub line: u64,
    pub reference: String,
    /// The codes of the `product_code` cell, split on `|` and trimmed: one code, or a choice
    /// the recipient makes.
    pub product_codes: Vec<String>,
    /// As written (its scale kept): the text the service receives.
    pub face_value: Decimal,
    pub currency: String,
    pub distribution: DistributionType,
    pub email: Option<String>,
    /// The balance currency that pays: as given, or resolved (see [`parse_record`]).
    pub payment_currency: String,
    pub country: Option<String>,
    pub card_id: Option<String>,
    /// Every input cell, in header order, to quote a cell in a problem; empty in the specs
    /// the reading hands on with their rows (the row holds the cells already).
    pub fields: Vec<String>,
    /// Where the known columns are, so later checks can name the column of a problem.
    pub columns: ColumnMap,
}

/// Names the known columns of one record, for problems.
struct Cells<'a> {
    columns: &'a ColumnMap,
    rec: &'a RawRecord,
    problems: Vec<Problem>,
}

impl Cells<'_> {
    fn get(&self, index: usize) -> &str {
        self.rec.fields.get(index).map_or("", String::as_str)
    }

    fn opt(&self, index: Option<usize>) -> &str {
        index.map_or("", |i| self.get(i))
    }

    fn report(&mut self, index: usize, name: &str, message: String, help: impl Into<String>) {
        let p = Problem::at(self.rec.line, index, name, message)
            .with_value(self.get(index))
            .with_help(help);
        self.problems.push(p);
    }
}

/// Checks the syntax of one record and builds its [`RowSpec`]; reports all the problems of the
/// row.
///
/// `payment_currency`, when empty, resolves to the row's currency when that is a balance
/// currency, else to `default_payment_currency`; when neither applies it is a problem.
/// `distribution`, when absent or empty, is `EMAIL` if an email is given, else `PAYOUT_LINK`.
pub fn parse_record(
    columns: &ColumnMap,
    headers: &[String],
    rec: &RawRecord,
    opts: &ValidateOptions,
) -> Result<RowSpec, Vec<Problem>> {
    let mut c = Cells {
        columns,
        rec,
        problems: Vec::new(),
    };
    if rec.fields.len() != headers.len() {
        // The reader refuses such records; a record built elsewhere is checked all the same.
        c.problems.push(Problem::file(
            rec.line,
            format!(
                "this row has {} fields but the header has {}",
                rec.fields.len(),
                headers.len()
            ),
        ));
    }
    let reference = parse_reference(&mut c);
    let product_codes = parse_codes(&mut c);
    let currency = parse_currency(&mut c);
    let face_value = parse_face_value(&mut c, currency.as_deref());
    let email = parse_email(&mut c);
    let distribution = parse_distribution(&mut c, email.is_some());
    let payment_currency = parse_payment_currency(&mut c, currency.as_deref(), opts);
    let country = parse_country(&mut c);
    let card_id = parse_card_id(&mut c);

    match (
        reference,
        product_codes,
        currency,
        face_value,
        distribution,
        payment_currency,
    ) {
        (
            Some(reference),
            Some(product_codes),
            Some(currency),
            Some(face_value),
            Some(distribution),
            Some(payment_currency),
        ) if c.problems.is_empty() => Ok(RowSpec {
            line: rec.line,
            reference,
            product_codes,
            face_value,
            currency,
            distribution,
            email,
            payment_currency,
            country,
            card_id,
            fields: rec.fields.clone(),
            columns: columns.clone(),
        }),
        _ => {
            let mut problems = c.problems;
            problems.sort_by_key(|p| p.column);
            Err(problems)
        }
    }
}

fn parse_reference(c: &mut Cells) -> Option<String> {
    let i = c.columns.reference;
    let v = c.get(i).to_string();
    let example = "e.g. `EMP-1042-2026-11`";
    if v.is_empty() {
        c.report(
            i,
            "reference",
            "the reference is empty".into(),
            format!("give every row its own reference, {example}: it is what makes the payout happen once"),
        );
        return None;
    }
    let chars = v.chars().count();
    if chars > MAX_REFERENCE_CHARS {
        c.report(
            i,
            "reference",
            format!(
                "{} is {chars} characters long; the limit is {MAX_REFERENCE_CHARS}",
                quoted(&v)
            ),
            format!("use a shorter reference, {example}"),
        );
        return None;
    }
    let allowed = |ch: char| ch.is_alphanumeric() || REFERENCE_PUNCTUATION.contains(ch);
    if let Some(bad) = v.chars().find(|ch| !allowed(*ch)) {
        c.report(
            i,
            "reference",
            format!(
                "{} contains `{}`; a reference holds letters, digits, spaces and `- _ . : / #`",
                quoted(&v),
                bad.escape_default()
            ),
            format!("use a plain identifier, {example}"),
        );
        return None;
    }
    if !v.starts_with(char::is_alphanumeric) {
        c.report(
            i,
            "reference",
            format!("{} does not start with a letter or digit", quoted(&v)),
            format!("use a plain identifier, {example}"),
        );
        return None;
    }
    Some(v)
}

fn parse_codes(c: &mut Cells) -> Option<Vec<String>> {
    let i = c.columns.product_code;
    let v = c.get(i).to_string();
    if v.is_empty() {
        c.report(
            i,
            "product_code",
            "the product code is empty".into(),
            "write the code of a catalog product, e.g. `AMZ-US`, or several separated by `|` to \
             let the recipient choose",
        );
        return None;
    }
    let codes: Vec<String> = v.split('|').map(|s| s.trim().to_string()).collect();
    if codes.iter().any(String::is_empty) {
        c.report(
            i,
            "product_code",
            format!("{} has an empty product code in its `|` list", quoted(&v)),
            "separate the codes with single `|`, e.g. `AMZ-US|STEAM-US`",
        );
        return None;
    }
    for (n, code) in codes.iter().enumerate() {
        if codes[..n].contains(code) {
            c.report(
                i,
                "product_code",
                format!("{} names `{}` twice", quoted(&v), show(code)),
                "list each product of a choice once",
            );
            return None;
        }
    }
    Some(codes)
}

fn parse_currency(c: &mut Cells) -> Option<String> {
    let i = c.columns.currency;
    let v = c.get(i).to_string();
    if v.is_empty() {
        c.report(
            i,
            "currency",
            "the currency is empty".into(),
            "write the ISO 4217 code of the product's currency, e.g. `USD`",
        );
        return None;
    }
    if is_currency_code(&v) {
        return Some(v);
    }
    let upper = v.to_uppercase();
    let help = if is_currency_code(&upper) {
        format!("write it in capitals: `{upper}`")
    } else {
        "write a three-letter ISO 4217 code in capitals, e.g. `USD`, `EUR`, `GBP`".to_string()
    };
    c.report(
        i,
        "currency",
        format!("{} is not an ISO 4217 currency code", quoted(&v)),
        help,
    );
    None
}

fn parse_face_value(c: &mut Cells, currency: Option<&str>) -> Option<Decimal> {
    let i = c.columns.face_value;
    let v = c.get(i).to_string();
    let amount = match parse_amount(&v) {
        Ok(a) => a,
        Err(e) => {
            let help = e.help().unwrap_or_default();
            let message = match e {
                crate::money::AmountError::Empty => "the face value is empty".to_string(),
                other => other.to_string(),
            };
            c.report(i, "face_value", message, help);
            return None;
        }
    };
    if amount.is_zero() {
        c.report(
            i,
            "face_value",
            format!("{} is zero; a payout needs a positive amount", quoted(&v)),
            "write the amount of the payout, or remove the row",
        );
        return None;
    }
    if let Some(cur) = currency {
        let places = minor_units(cur);
        if amount.scale() > places {
            let normal = amount.normalize();
            let help = if normal.scale() <= places {
                let mut fixed = normal;
                fixed.rescale(places);
                format!("write `{fixed}`")
            } else if places == 0 {
                format!("{cur} has no decimal places: write a whole amount")
            } else {
                format!("round it to {places} decimal places")
            };
            c.report(
                i,
                "face_value",
                format!(
                    "{} has more decimal places than {cur} allows ({places})",
                    quoted(&v)
                ),
                help,
            );
            return None;
        }
    }
    Some(amount)
}

/// Why `s` is not a plausible email address, if it is not.
pub fn email_problem(s: &str) -> Option<String> {
    if s.len() > MAX_EMAIL_BYTES {
        return Some(format!("is longer than {MAX_EMAIL_BYTES} characters"));
    }
    if s.chars().any(|c| c.is_whitespace()) {
        return Some("contains a space".into());
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Some(format!(
            "contains the control character `{}`",
            c.escape_default()
        ));
    }
    let (local, domain) = match s.split_once('@') {
        None => return Some("has no `@`".into()),
        Some((_, d)) if d.contains('@') => return Some("has more than one `@`".into()),
        Some(parts) => parts,
    };
    if local.is_empty() {
        return Some("has nothing before the `@`".into());
    }
    if local.chars().count() > 64 {
        return Some("has more than 64 characters before the `@`".into());
    }
    const LOCAL_PUNCT: &str = "!#$%&'*+-/=?^_`{|}~.";
    if let Some(c) = local
        .chars()
        .find(|c| !(c.is_alphanumeric() || LOCAL_PUNCT.contains(*c)))
    {
        return Some(format!("contains `{c}` before the `@`"));
    }
    if local.starts_with('.') || local.ends_with('.') || local.contains("..") {
        return Some("has a misplaced `.` before the `@`".into());
    }
    if domain.is_empty() {
        return Some("has no domain after the `@`".into());
    }
    if !domain.contains('.') {
        return Some(format!("has no dot in its domain `{domain}`"));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Some(format!("has an empty part in its domain `{domain}`"));
        }
        if let Some(c) = label.chars().find(|c| !(c.is_alphanumeric() || *c == '-')) {
            return Some(format!("contains `{c}` in its domain"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(format!("has a misplaced `-` in its domain `{domain}`"));
        }
    }
    let tld = labels.last().copied().unwrap_or("");
    if tld.chars().count() < 2 || tld.chars().all(|c| c.is_ascii_digit()) {
        return Some(format!("has no valid top-level domain in `{domain}`"));
    }
    None
}

fn parse_email(c: &mut Cells) -> Option<String> {
    let i = c.columns.email?;
    let v = c.get(i).to_string();
    if v.is_empty() {
        return None;
    }
    if let Some(why) = email_problem(&v) {
        let help = if v.contains('<') || v.contains(' ') {
            "write only the address, e.g. `jane.doe@example.com`"
        } else {
            "check the address: one `@`, a name before it and a domain such as `example.com` after it"
        };
        c.report(
            i,
            "email",
            format!("{} is not a valid email address: it {why}", quoted(&v)),
            help,
        );
    }
    Some(v)
}

fn parse_distribution(c: &mut Cells, has_email: bool) -> Option<DistributionType> {
    let written = c.opt(c.columns.distribution).to_string();
    let kind = if written.is_empty() {
        if has_email {
            DistributionType::Email
        } else {
            DistributionType::PayoutLink
        }
    } else {
        let norm: String = written
            .to_lowercase()
            .chars()
            .map(|ch| if ch == ' ' || ch == '-' { '_' } else { ch })
            .collect();
        match norm.as_str() {
            "email" | "e_mail" => DistributionType::Email,
            "payout_link" | "link" => DistributionType::PayoutLink,
            _ => {
                let i = c.columns.distribution.unwrap_or(0);
                c.report(
                    i,
                    "distribution",
                    format!(
                        "{} is not a distribution method; expected `EMAIL` or `PAYOUT_LINK`",
                        quoted(&written)
                    ),
                    "write `EMAIL` to send the payout to the email address, `PAYOUT_LINK` to get \
                     a link to hand over yourself, or leave it empty (EMAIL when an email is given)",
                );
                return None;
            }
        }
    };
    if kind == DistributionType::Email && !has_email {
        let (i, name, help) = match (c.columns.email, c.columns.distribution) {
            (Some(i), _) => (
                i,
                "email",
                "fill in the recipient's email address, or set distribution to `PAYOUT_LINK`",
            ),
            (None, Some(i)) => (
                i,
                "distribution",
                "add an `email` column with the recipient's address, or use `PAYOUT_LINK`",
            ),
            (None, None) => (c.columns.reference, "reference", "add an `email` column"),
        };
        // An invalid email was already reported; only an absent one is reported here.
        let absent = c.opt(c.columns.email).is_empty();
        if absent {
            c.report(
                i,
                name,
                "distribution EMAIL needs an email address, and none is given".into(),
                help,
            );
        }
        return None;
    }
    Some(kind)
}

fn parse_payment_currency(
    c: &mut Cells,
    currency: Option<&str>,
    opts: &ValidateOptions,
) -> Option<String> {
    let balance_list = BALANCE_CURRENCIES.join(", ");
    let written = c.opt(c.columns.payment_currency).to_string();
    if let (false, Some(i)) = (written.is_empty(), c.columns.payment_currency) {
        if is_balance_currency(&written) {
            return Some(written);
        }
        let upper = written.to_uppercase();
        let help = if is_balance_currency(&upper) {
            format!("write it in capitals: `{upper}`")
        } else {
            format!(
                "orders are paid from an account balance in {balance_list}: write one of them, \
                 or leave it empty to pay in the product's currency"
            )
        };
        c.report(
            i,
            "payment_currency",
            format!(
                "{} is not a payment currency; expected one of {balance_list}",
                quoted(&written)
            ),
            help,
        );
        return None;
    }
    let cur = currency?;
    if is_balance_currency(cur) {
        return Some(cur.to_string());
    }
    if let Some(default) = &opts.default_payment_currency
        && is_balance_currency(default)
    {
        return Some(default.clone());
    }
    let (i, name) = match c.columns.payment_currency {
        Some(i) => (i, "payment_currency"),
        None => (c.columns.currency, "currency"),
    };
    let message = if c.columns.payment_currency.is_some() {
        format!(
            "payment_currency is empty, and {cur} cannot pay for an order (balance currencies: \
             {balance_list})"
        )
    } else {
        format!(
            "a {cur} product needs a payment_currency column: {cur} cannot pay for an order \
             (balance currencies: {balance_list})"
        )
    };
    c.problems.push(
        Problem::at(c.rec.line, i, name, message)
            .with_value(c.get(i))
            .with_help(format!(
                "say which balance pays for this row in a `payment_currency` column ({balance_list}), \
                 or set a default payment currency"
            )),
    );
    None
}

fn parse_country(c: &mut Cells) -> Option<String> {
    let i = c.columns.country?;
    let v = c.get(i).to_string();
    if v.is_empty() {
        return None;
    }
    if v.len() == 2 && v.bytes().all(|b| b.is_ascii_uppercase()) {
        return Some(v);
    }
    let upper = v.to_uppercase();
    let help = if upper.len() == 2 && upper.bytes().all(|b| b.is_ascii_uppercase()) {
        format!("write it in capitals: `{upper}`")
    } else {
        "write the ISO 3166 alpha-2 code, e.g. `US`, `DE`, `GB`, or leave it empty".to_string()
    };
    c.report(
        i,
        "country",
        format!("{} is not an ISO 3166 alpha-2 country code", quoted(&v)),
        help,
    );
    None
}

fn parse_card_id(c: &mut Cells) -> Option<String> {
    let i = c.columns.card_id?;
    let v = c.get(i).to_string();
    if v.is_empty() {
        return None;
    }
    if v.chars().any(|ch| ch.is_control() || ch.is_whitespace()) || v.chars().count() > 200 {
        c.report(
            i,
            "card_id",
            format!("{} is not a card identifier", quoted(&v)),
            "write the identifier of the card as the account shows it, or leave it empty to pay \
             from the balance",
        );
        return None;
    }
    Some(v)
}

/// SHA-256 (hex) of the row's payable content: reference, product codes, face value as written,
/// currency, distribution, email, payment currency, country and card. Carried-through columns do
/// not count. A row edited after it was submitted has a different hash.
pub fn content_hash(row: &RowSpec) -> String {
    let mut h = Sha256::new();
    h.update(b"paybatch-row-v1\n");
    let mut put = |name: &str, parts: &[&str]| {
        // Length-prefixed, so no value can imitate a field boundary: `name=LEN:value\n`, the
        // value being the parts joined by `|`.
        let len = parts.iter().map(|p| p.len()).sum::<usize>() + parts.len().saturating_sub(1);
        h.update(name.as_bytes());
        h.update(b"=");
        h.update(decimal_digits(len, &mut [0; 20]));
        h.update(b":");
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                h.update(b"|");
            }
            h.update(part.as_bytes());
        }
        h.update(b"\n");
    };
    let codes: Vec<&str> = row.product_codes.iter().map(String::as_str).collect();
    let face_value = row.face_value.to_string();
    put("reference", &[&row.reference]);
    put("product_codes", &codes);
    put("face_value", &[&face_value]);
    put("currency", &[&row.currency]);
    put("distribution", &[row.distribution.as_str()]);
    put("email", &[row.email.as_deref().unwrap_or("")]);
    put("payment_currency", &[&row.payment_currency]);
    put("country", &[row.country.as_deref().unwrap_or("")]);
    put("card_id", &[row.card_id.as_deref().unwrap_or("")]);
    let digest = h.finalize();
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 15)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

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

// ---------------------------------------------------------------------------------------------
// Catalog checks

/// The catalog, by product code.
#[derive(Debug, Clone, Default)]
pub struct CatalogIndex {
    by_code: HashMap<String, Product>,
}

impl CatalogIndex {
    /// Indexes products by code (the first of two with the same code wins).
    pub fn new(products: Vec<Product>) -> Self {
        let mut by_code = HashMap::with_capacity(products.len());
        for p in products {
            by_code.entry(p.code.clone()).or_insert(p);
        }
        CatalogIndex { by_code }
    }

    pub fn get(&self, code: &str) -> Option<&Product> {
        self.by_code.get(code)
    }

    pub fn len(&self) -> usize {
        self.by_code.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_code.is_empty()
    }

    /// A catalog code close to `code` (same letters in another case, or a small typo).
    pub fn suggest(&self, code: &str) -> Option<&str> {
        let upper = code.to_uppercase();
        let mut best: Option<(usize, &str)> = None;
        for known in self.by_code.keys() {
            let d = if known.to_uppercase() == upper {
                0
            } else {
                crate::text::distance_within(&upper, &known.to_uppercase(), 2).unwrap_or(usize::MAX)
            };
            let better = match best {
                None => true,
                Some((bd, bk)) => d < bd || (d == bd && known.as_str() < bk),
            };
            if d <= 2 && better {
                best = Some((d, known));
            }
        }
        best.map(|(_, k)| k)
    }
}

/// The first line of each value seen, remembered by a 96-bit keyed hash instead of the value:
/// 16 bytes a row (and the table's own byte) whatever the value's length, so a million-row
/// file costs tens of megabytes. Two values share a hash with a probability of about
/// n² / 2⁹⁷ (10⁻¹⁷ for a million rows); two rows that did would only be refused as repeated,
/// never paid twice.
#[derive(Debug, Default)]
pub struct Seen {
    keys: (RandomState, RandomState),
    lines: HashMap<Fingerprint, u32, BuildHasherDefault<FingerprintHasher>>,
}

/// A 96-bit hash of a value; its own first 64 bits are its hash in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint([u32; 3]);

impl Hash for Fingerprint {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from(self.0[0]) << 32 | u64::from(self.0[1]));
    }
}

/// Passes a [`Fingerprint`]'s bits through: they are a keyed hash already.
#[derive(Debug, Default)]
struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl Seen {
    pub fn new() -> Self {
        Seen::default()
    }

    fn fingerprint(&self, value: &impl Hash) -> Fingerprint {
        let a = self.keys.0.hash_one(value);
        let b = self.keys.1.hash_one(value);
        Fingerprint([(a >> 32) as u32, a as u32, (b >> 32) as u32])
    }

    /// The line `value` was first seen on, or `None` after remembering `line` for it.
    pub fn first_or_insert(&mut self, value: &impl Hash, line: u64) -> Option<u64> {
        let key = self.fingerprint(value);
        match self.lines.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => Some(u64::from(*e.get())),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(u32::try_from(line).unwrap_or(u32::MAX));
                None
            }
        }
    }

    /// The line `value` was first seen on.
    pub fn get(&self, value: &impl Hash) -> Option<u64> {
        self.lines
            .get(&self.fingerprint(value))
            .map(|l| u64::from(*l))
    }
}

/// Unknown product codes for which a close catalog code is looked for: the look-up goes
/// through the whole catalog, and only the first problems of a kind are shown.
const SUGGESTIONS: usize = 200;

/// Checks rows against the catalog and against the rows checked before them.
#[derive(Debug)]
pub struct Validator<'a> {
    catalog: &'a CatalogIndex,
    opts: ValidateOptions,
    references: Seen,
    contents: Seen,
    suggestions_left: usize,
}

impl<'a> Validator<'a> {
    pub fn new(catalog: &'a CatalogIndex, opts: ValidateOptions) -> Self {
        Validator {
            catalog,
            opts,
            references: Seen::default(),
            contents: Seen::default(),
            suggestions_left: SUGGESTIONS,
        }
    }

    /// The line of the first checked row with this reference.
    pub fn reference_line(&self, reference: &str) -> Option<u64> {
        self.references.get(&reference)
    }

    /// The references of the rows checked, by the line each was first seen on.
    pub fn into_references(self) -> Seen {
        self.references
    }

    /// All the problems of `row`; empty when it can be paid. Rows are expected in file order:
    /// a repeated reference or a likely duplicate is reported on the later row.
    pub fn check(&mut self, row: &RowSpec) -> Vec<Problem> {
        let mut problems = Vec::new();
        let repeated_reference = self.check_reference(row, &mut problems);
        let products = self.check_products(row, &mut problems);
        check_currency(row, &products, &mut problems);
        check_face_value(row, &products, &mut problems);
        check_country(row, &products, &mut problems);
        if !repeated_reference {
            self.check_duplicate(row, &mut problems);
        }
        problems.sort_by_key(|p| p.column);
        problems
    }

    /// Reference: unique in the batch. True when an earlier row has it.
    fn check_reference(&mut self, row: &RowSpec, problems: &mut Vec<Problem>) -> bool {
        let Some(first) = self.references.first_or_insert(&row.reference, row.line) else {
            return false;
        };
        problems.push(problem_at(
            row,
            row.columns.reference,
            "reference",
            format!(
                "reference {} is already used on line {first}",
                quoted(&row.reference)
            ),
            "every row needs its own reference (it is what makes a payout happen once); \
             if this is a second payout, give it a new reference, e.g. with `-2` added"
                .into(),
        ));
        true
    }

    /// Products: known, orderable, live. Returns the products found in the catalog.
    fn check_products(&mut self, row: &RowSpec, problems: &mut Vec<Problem>) -> Vec<&'a Product> {
        let mut products: Vec<&'a Product> = Vec::new();
        for code in &row.product_codes {
            let Some(p) = self.catalog.get(code) else {
                problems.push(self.unknown_product(row, code));
                continue;
            };
            if let Some((message, help)) = product_problem(p) {
                problems.push(
                    problem_at(row, row.columns.product_code, "product_code", message, help)
                        .with_value(code.clone()),
                );
            }
            products.push(p);
        }
        products
    }

    /// A product code the catalog does not have, with a close code while suggestions are left.
    fn unknown_product(&mut self, row: &RowSpec, code: &str) -> Problem {
        let suggestion = if self.suggestions_left > 0 {
            self.suggestions_left -= 1;
            self.catalog.suggest(code)
        } else {
            None
        };
        let help = match suggestion {
            Some(s) => format!("did you mean `{s}`? Codes are case-sensitive"),
            None => "check the code against the catalog (codes are case-sensitive)".into(),
        };
        problem_at(
            row,
            row.columns.product_code,
            "product_code",
            format!("product {} is not in the catalog", quoted(code)),
            help,
        )
        .with_value(code.to_string())
    }

    /// Likely duplicate: same recipient, products and amount as an earlier row.
    fn check_duplicate(&mut self, row: &RowSpec, problems: &mut Vec<Problem>) {
        let Some(email) = &row.email else {
            return;
        };
        let first = self
            .contents
            .first_or_insert(&ContentKey::of(email, row), row.line);
        let Some(first) = first.filter(|_| !self.opts.allow_duplicates) else {
            return;
        };
        let cols = &row.columns;
        problems.push(problem_at(
            row,
            cols.email.unwrap_or(cols.reference),
            if cols.email.is_some() {
                "email"
            } else {
                "reference"
            },
            format!(
                "same recipient, products and face value as line {first}: a likely \
                 duplicate of that row"
            ),
            "remove one of the two rows; if both payouts are intended, allow \
             duplicates (`--allow-duplicates`)"
                .into(),
        ));
    }
}

/// What makes two rows likely duplicates: the recipient's address in any case, the products in
/// any order and the face value at any scale. Hashed as it is borrowed from the row: no copy of
/// the address or the codes a row.
struct ContentKey<'r> {
    email: &'r str,
    codes: Vec<&'r str>,
    face_value: Decimal,
}

impl<'r> ContentKey<'r> {
    fn of(email: &'r str, row: &'r RowSpec) -> Self {
        let mut codes: Vec<&str> = row.product_codes.iter().map(String::as_str).collect();
        codes.sort_unstable();
        ContentKey {
            email,
            codes,
            face_value: row.face_value.normalize(),
        }
    }
}

impl Hash for ContentKey<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for c in self.email.chars().flat_map(char::to_lowercase) {
            state.write_u32(u32::from(c));
        }
        // Not a character: the address ends here.
        state.write_u32(u32::MAX);
        self.codes.hash(state);
        self.face_value.hash(state);
    }
}

/// A problem of `row` in the column at 0-based `index`, with the cell's value and `help`.
fn problem_at(row: &RowSpec, index: usize, name: &str, message: String, help: String) -> Problem {
    let cell = row.fields.get(index).cloned().unwrap_or_default();
    Problem::at(row.line, index, name, message)
        .with_value(cell)
        .with_help(help)
}

/// Why a product found in the catalog cannot be paid (not orderable, not live, of an unknown
/// payout type, or with an impossible catalog entry), and what to do.
fn product_problem(p: &Product) -> Option<(String, String)> {
    if !p.is_orderable {
        Some((
            format!("product `{}` cannot be ordered at the moment", p.code),
            "choose another product, or remove the row and pay it when the product \
             can be ordered again"
                .into(),
        ))
    } else if !matches!(p.state.as_str(), "LIVE" | "TEMPORARILY_DEGRADED") {
        // LIVE and TEMPORARILY_DEGRADED products are payable while `is_orderable`;
        // TEMPORARILY_DISABLED and any state this version does not know are not.
        Some((
            format!(
                "product `{}` is not live (its state is `{}`)",
                p.code,
                show(&p.state)
            ),
            "choose another product, or remove the row and pay it when the product \
             is live again"
                .into(),
        ))
    } else if p.payout_type == PayoutType::Other {
        Some((
            format!(
                "product `{}` is of a payout type this version of paybatch does not know",
                p.code
            ),
            "choose a gift card, subscription or payment product, or update paybatch".into(),
        ))
    } else {
        catalog_insanity(p).map(|why| {
            (
                format!(
                    "product `{}` cannot be paid: the catalog gives it {why}",
                    show(&p.code)
                ),
                "the service's catalog is wrong for this product: choose another \
                 product, or ask the service to correct it, then `paybatch catalog sync`"
                    .into(),
            )
        })
    }
}

/// Currency: one for the whole choice, and the row's.
fn check_currency(row: &RowSpec, products: &[&Product], problems: &mut Vec<Problem>) {
    let cols = &row.columns;
    let first_currency = products.first().map(|p| p.currency.as_str());
    let mixed = products
        .iter()
        .any(|p| Some(p.currency.as_str()) != first_currency);
    if mixed {
        let list = products
            .iter()
            .map(|p| format!("{} ({})", p.code, p.currency))
            .collect::<Vec<_>>()
            .join(", ");
        problems.push(problem_at(
            row,
            cols.product_code,
            "product_code",
            format!("the products of this choice are in different currencies: {list}"),
            "a choice (`A|B`) must list products of one currency; split it into rows".into(),
        ));
    } else if let Some(pc) = first_currency
        && pc != row.currency
    {
        let names = products
            .iter()
            .map(|p| p.code.as_str())
            .collect::<Vec<_>>()
            .join("|");
        problems.push(problem_at(
            row,
            cols.currency,
            "currency",
            format!(
                "{} is not the currency of {names} ({pc})",
                quoted(&row.currency)
            ),
            format!(
                "write `{pc}` and a face value in {pc}, or choose a product in {}",
                row.currency
            ),
        ));
    }
}

/// Face value: a denomination, or a plan price, of every product of the choice; a choice
/// (MULTIPLE) needs a whole face value at or above every product's minimum (the service's
/// published rule; a code named twice in a choice is refused when read).
fn check_face_value(row: &RowSpec, products: &[&Product], problems: &mut Vec<Problem>) {
    let column = row.columns.face_value;
    if row.product_codes.len() > 1 && !row.face_value.fract().is_zero() {
        problems.push(problem_at(
            row,
            column,
            "face_value",
            format!(
                "{} is not a whole amount; a choice of products (`A|B`) takes whole amounts only",
                row.face_value
            ),
            format!(
                "write `{}` or `{}`",
                row.face_value.floor(),
                row.face_value.ceil()
            ),
        ));
    }
    for p in products.iter().filter(|p| p.currency == row.currency) {
        if let Some((message, help)) = denomination_problem(p, row.face_value) {
            problems.push(problem_at(row, column, "face_value", message, help));
        }
    }
}

/// Country: where every product of the choice can be redeemed.
fn check_country(row: &RowSpec, products: &[&Product], problems: &mut Vec<Problem>) {
    let (Some(country), Some(ci)) = (&row.country, row.columns.country) else {
        return;
    };
    for p in products {
        let list = &p.countries_redeemable_in;
        if !list.is_empty() && !list.iter().any(|c| c == country) {
            problems.push(problem_at(
                row,
                ci,
                "country",
                format!(
                    "`{country}` is not a country where `{}` can be redeemed ({})",
                    p.code,
                    list.join(", ")
                ),
                "check the recipient's country, or choose a product redeemable there".into(),
            ));
        }
    }
}

/// What is impossible in a product's catalog entry, if anything: a discount multiplier outside
/// 0 (no discount) to below 1 (a price of zero or less, or above the face value), a minimum
/// above the maximum, or an amount (minimum, maximum, listed value, plan price) that is not
/// positive. A row naming such a product is not payable: its price, and the balance check,
/// would be wrong.
pub fn catalog_insanity(p: &Product) -> Option<String> {
    if let Some(m) = p.discount_multiplier
        && !(Decimal::ZERO..Decimal::ONE).contains(&m)
    {
        return Some(format!(
            "the discount multiplier {m} (it must be from 0 to below 1)"
        ));
    }
    let positive = |what: &str, v: Decimal| {
        (v <= Decimal::ZERO).then(|| format!("{what} {v} (amounts must be positive)"))
    };
    if let Some(d) = p.denominations() {
        if let Some(min) = d.minimum_value
            && let Some(why) = positive("the minimum value", min)
        {
            return Some(why);
        }
        if let Some(max) = d.maximum_value
            && let Some(why) = positive("the maximum value", max)
        {
            return Some(why);
        }
        if let (Some(min), Some(max)) = (d.minimum_value, d.maximum_value)
            && min > max
        {
            return Some(format!(
                "a minimum value {min} above its maximum value {max}"
            ));
        }
        for v in d.available_list.iter().flatten() {
            if let Some(why) = positive("the listed value", v.0) {
                return Some(why);
            }
        }
    }
    for plan in p.subscription_plans() {
        if let Some(why) = positive("the plan price", plan.price) {
            return Some(why);
        }
    }
    None
}

/// Why `value` is not a face value `p` can be ordered with, and what to do.
fn denomination_problem(p: &Product, value: Decimal) -> Option<(String, String)> {
    if p.payout_type == PayoutType::Subscription {
        return plan_problem(p, value);
    }
    let d = p.denominations()?;
    match d.available_list.as_ref().filter(|l| !l.is_empty()) {
        Some(list) => listed_value_problem(p, list, value),
        None => range_problem(p, d, value),
    }
}

/// Why `value` is not the price of one of subscription `p`'s plans.
fn plan_problem(p: &Product, value: Decimal) -> Option<(String, String)> {
    let plans = p.subscription_plans();
    if plans.is_empty() {
        return Some((
            format!("the catalog lists no subscription plans for `{}`", p.code),
            "choose another product".into(),
        ));
    }
    if plans.iter().any(|plan| plan.price == value) {
        return None;
    }
    let list = plans.iter().map(plan_label).collect::<Vec<_>>();
    Some((
        format!(
            "{} is not the price of a `{}` plan; plans: {} {}",
            quoted(&value.to_string()),
            p.code,
            list.join(", "),
            p.currency
        ),
        "a subscription's face value is the price of one of its plans: write one of them \
         exactly"
            .into(),
    ))
}

/// A plan as listed in a problem: its price, then its name or length, e.g. `9.99 (3 months)`.
fn plan_label(plan: &SubscriptionPlan) -> String {
    let label = plan.name.clone().or_else(|| {
        plan.length.map(|n| {
            let mut unit = plan.length_unit.as_deref().unwrap_or("").to_lowercase();
            if n != 1 && !unit.is_empty() && !unit.ends_with('s') {
                unit.push('s');
            }
            format!("{n} {unit}").trim().to_string()
        })
    });
    match label {
        Some(l) => format!("{} ({})", plan.price, l),
        None => plan.price.to_string(),
    }
}

/// Why `value` is not one of the fixed values `list` of `p`.
fn listed_value_problem(
    p: &Product,
    list: &[DecimalString],
    value: Decimal,
) -> Option<(String, String)> {
    if list.iter().any(|a| a.0 == value) {
        return None;
    }
    const SHOWN: usize = 20;
    let mut values: Vec<String> = list.iter().take(SHOWN).map(|a| a.0.to_string()).collect();
    if list.len() > SHOWN {
        values.push(format!("and {} more", list.len() - SHOWN));
    }
    Some((
        format!(
            "{} is not a denomination of `{}`; available: {} {}",
            quoted(&value.to_string()),
            p.code,
            values.join(", "),
            p.currency
        ),
        "this product comes in fixed values only: write one of them".into(),
    ))
}

/// Why `value` is outside the open range of `p`'s denominations `d`.
fn range_problem(p: &Product, d: &Denominations, value: Decimal) -> Option<(String, String)> {
    let below = d.minimum_value.is_some_and(|min| value < min);
    let above = d.maximum_value.is_some_and(|max| value > max);
    if !(below || above) {
        return None;
    }
    let range = match (d.minimum_value, d.maximum_value) {
        (Some(min), Some(max)) => format!("{min} to {max} {}", p.currency),
        (Some(min), None) => format!("at least {min} {}", p.currency),
        (None, Some(max)) => format!("at most {max} {}", p.currency),
        (None, None) => String::new(),
    };
    Some((
        format!(
            "{} is outside the range of `{}`: {range}",
            quoted(&value.to_string()),
            p.code
        ),
        if above {
            "split a larger amount over several rows, or choose another product".into()
        } else {
            "write an amount within the range, or choose another product".into()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        DecimalString, Denominations, GiftCard, Payment, Subscription, SubscriptionPlan,
    };
    use std::str::FromStr;

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    fn base(code: &str, currency: &str, kind: PayoutType, countries: &[&str]) -> Product {
        Product {
            name: code.to_string(),
            code: code.to_string(),
            currency: currency.to_string(),
            state: "LIVE".into(),
            is_orderable: true,
            payout_type: kind,
            categories: None,
            countries_redeemable_in: countries.iter().map(|c| c.to_string()).collect(),
            customer_service: None,
            discount_multiplier: None,
            availability: None,
            gift_card: None,
            subscription: None,
            payment: None,
            approval_state: None,
        }
    }

    fn open(code: &str, cur: &str, min: &str, max: &str, countries: &[&str]) -> Product {
        let mut p = base(code, cur, PayoutType::GiftCard, countries);
        p.gift_card = Some(GiftCard {
            denominations: Some(Denominations {
                kind: Some("open".into()),
                minimum_value: Some(d(min)),
                maximum_value: Some(d(max)),
                available_list: None,
            }),
            ..Default::default()
        });
        p
    }

    fn fixed(code: &str, cur: &str, values: &[&str], countries: &[&str]) -> Product {
        let mut p = base(code, cur, PayoutType::GiftCard, countries);
        p.gift_card = Some(GiftCard {
            denominations: Some(Denominations {
                kind: Some("fixed".into()),
                minimum_value: None,
                maximum_value: None,
                available_list: Some(values.iter().map(|v| DecimalString(d(v))).collect()),
            }),
            ..Default::default()
        });
        p
    }

    fn catalog() -> CatalogIndex {
        let mut spotify = base("SPOTIFY-US", "USD", PayoutType::Subscription, &["US"]);
        spotify.subscription = Some(Subscription {
            subscription_plans: ["10.99", "32.97"]
                .iter()
                .enumerate()
                .map(|(n, price)| SubscriptionPlan {
                    length_unit: Some("MONTH".into()),
                    length: Some(if n == 0 { 1 } else { 3 }),
                    name: None,
                    price: d(price),
                    subscription_plan_code: None,
                })
                .collect(),
            ..Default::default()
        });
        let mut visa = base("VISA-US", "USD", PayoutType::Payment, &["US"]);
        visa.payment = Some(Payment {
            denominations: Some(Denominations {
                kind: None,
                minimum_value: Some(d("10")),
                maximum_value: Some(d("1000")),
                available_list: None,
            }),
            ..Default::default()
        });
        let mut retired = open("RETIRED-US", "USD", "1", "100", &["US"]);
        retired.is_orderable = false;
        let mut paused = open("PAUSED-US", "USD", "1", "100", &["US"]);
        paused.state = "SUSPENDED".into();
        CatalogIndex::new(vec![
            open("AMZ-US", "USD", "1", "2000", &["US"]),
            open("AMZ-DE", "EUR", "5", "500", &["DE", "AT"]),
            fixed(
                "STEAM-US",
                "USD",
                &["5", "10", "20", "50", "100"],
                &["US", "CA"],
            ),
            fixed("UBER-JP", "JPY", &["1000", "3000", "5000"], &["JP"]),
            spotify,
            visa,
            retired,
            paused,
        ])
    }

    const HEADERS: [&str; 8] = [
        "reference",
        "product_code",
        "face_value",
        "currency",
        "distribution",
        "email",
        "payment_currency",
        "country",
    ];

    fn columns() -> ColumnMap {
        ColumnMap {
            reference: 0,
            product_code: 1,
            face_value: 2,
            currency: 3,
            distribution: Some(4),
            email: Some(5),
            payment_currency: Some(6),
            country: Some(7),
            card_id: None,
        }
    }

    fn headers() -> Vec<String> {
        HEADERS.iter().map(|h| h.to_string()).collect()
    }

    fn rec(line: u64, cells: [&str; 8]) -> RawRecord {
        RawRecord {
            line,
            fields: cells.iter().map(|c| c.to_string()).collect(),
        }
    }

    fn parse(cells: [&str; 8]) -> Result<RowSpec, Vec<Problem>> {
        parse_record(
            &columns(),
            &headers(),
            &rec(7, cells),
            &ValidateOptions::default(),
        )
    }

    fn problems(cells: [&str; 8]) -> Vec<Problem> {
        parse(cells).expect_err("expected problems")
    }

    fn row(line: u64, cells: [&str; 8]) -> RowSpec {
        parse_record(
            &columns(),
            &headers(),
            &rec(line, cells),
            &ValidateOptions::default(),
        )
        .unwrap_or_else(|p| panic!("{p:?}"))
    }

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
    fn a_good_row_parses_with_defaults_resolved() {
        let r = row(
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
        assert_eq!(r.reference, "R1");
        assert_eq!(r.product_codes, ["AMZ-US"]);
        assert_eq!(r.face_value.to_string(), "10.50");
        assert_eq!(r.distribution, DistributionType::Email);
        assert_eq!(r.payment_currency, "USD");
        assert_eq!(r.country.as_deref(), Some("US"));
        assert_eq!(r.fields.len(), 8);

        let r = row(
            2,
            [
                "R2",
                " AMZ-US | STEAM-US ",
                "20",
                "USD",
                "link",
                "",
                "EUR",
                "",
            ],
        );
        assert_eq!(r.product_codes, ["AMZ-US", "STEAM-US"]);
        assert_eq!(r.distribution, DistributionType::PayoutLink);
        assert_eq!(r.payment_currency, "EUR");
        assert_eq!(r.country, None);
        assert_eq!(r.email, None);

        let r = row(2, ["R3", "AMZ-US", "5", "USD", "", "", "", ""]);
        assert_eq!(r.distribution, DistributionType::PayoutLink);
        for (w, k) in [
            ("EMAIL", DistributionType::Email),
            ("e-mail", DistributionType::Email),
            ("Payout_Link", DistributionType::PayoutLink),
            ("payout link", DistributionType::PayoutLink),
        ] {
            let r = row(2, ["R", "A", "5", "USD", w, "a@example.com", "", ""]);
            assert_eq!(r.distribution, k, "{w}");
        }
    }

    #[test]
    fn all_problems_of_a_row_are_reported_with_their_columns() {
        let ps = problems(["", "", "1,000", "usd", "fax", "not-an-email", "JPY", "usa"]);
        let cols: Vec<Option<usize>> = ps.iter().map(|p| p.column).collect();
        assert_eq!(
            cols,
            [
                Some(1),
                Some(2),
                Some(3),
                Some(4),
                Some(5),
                Some(6),
                Some(7),
                Some(8)
            ],
            "{ps:#?}"
        );
        for p in &ps {
            assert_eq!(p.line, 7);
            assert!(p.help.is_some(), "{p}");
            assert!(p.column_name.is_some());
        }
        assert!(ps[3].help.as_deref().unwrap().contains("`USD`"));
        assert_eq!(ps[2].value.as_deref(), Some("1,000"));
    }

    #[test]
    fn problem_display_is_cargo_style() {
        let ps = problems(["R", "AMZ-US", "10.001", "USD", "", "", "", ""]);
        assert_eq!(
            ps[0].to_string(),
            "line 7, column 3 (face_value): `10.001` has more decimal places than USD allows (2)\n  help: round it to 2 decimal places"
        );
        let ps = problems(["R", "UBER-JP", "1000.00", "JPY", "", "", "USD", ""]);
        assert_eq!(ps[0].help.as_deref(), Some("write `1000`"));
        let ps = problems(["R", "A", "10,50", "EUR", "", "", "", ""]);
        assert!(
            ps[0].to_string().contains("help: write `10.50`"),
            "{}",
            ps[0]
        );
        assert_eq!(Problem::file(0, "whole file").to_string(), "whole file");
        assert_eq!(
            Problem::file(3, "x").with_help("y").to_string(),
            "line 3: x\n  help: y"
        );
    }

    #[test]
    fn references_are_plain_identifiers() {
        assert!(parse(["EMP-1042-2026-11", "A", "1", "USD", "", "", "", ""]).is_ok());
        assert!(parse(["Müller 2026/11#3", "A", "1", "USD", "", "", "", ""]).is_ok());
        for bad in ["=SUM(A1:A3)", "-5", "+1", "@x", "a\tb", "x;y", "'quoted'"] {
            let ps = problems([bad, "A", "1", "USD", "", "", "", ""]);
            assert_eq!(ps[0].column, Some(1), "{bad}");
        }
        let long = "R".repeat(MAX_REFERENCE_CHARS + 1);
        assert!(parse([&long, "A", "1", "USD", "", "", "", ""]).is_err());
    }

    #[test]
    fn product_code_lists() {
        for bad in ["A||B", "A|", "A|A"] {
            let ps = problems(["R", bad, "1", "USD", "", "", "", ""]);
            assert_eq!(ps[0].column, Some(2), "{bad}");
        }
    }

    #[test]
    fn emails() {
        for good in [
            "a@example.com",
            "first.last+tag@sub.example.org",
            "o'brien@example.co.uk",
            "jürgen@exämple.de",
        ] {
            assert_eq!(email_problem(good), None, "{good}");
        }
        for bad in [
            "plainaddress",
            "@example.com",
            "a@b@example.com",
            "a@example",
            "a@.example.com",
            "a@example..com",
            "a @example.com",
            "Jane <jane@example.com>",
            "mailto:a@example.com",
            "a@-example.com",
            "a@example.c",
            "a@1.2.3.4",
            ".a@example.com",
            "a..b@example.com",
            "=HYPERLINK(\"x@example.com\")",
        ] {
            assert!(email_problem(bad).is_some(), "{bad}");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert!(email_problem(&long).is_some());
        let ps = problems(["R", "A", "1", "USD", "EMAIL", "", "", ""]);
        assert_eq!(ps[0].column, Some(6));
        assert!(ps[0].message.contains("needs an email"), "{}", ps[0]);
        // An invalid address is reported once, not also as missing.
        let ps = problems(["R", "A", "1", "USD", "EMAIL", "nope", "", ""]);
        assert_eq!(ps.len(), 1, "{ps:?}");
    }

    #[test]
    fn payment_currency_resolution() {
        let ps = problems(["R", "UBER-JP", "1000", "JPY", "", "", "", ""]);
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].column, Some(7));
        assert!(ps[0].message.contains("JPY"), "{}", ps[0]);
        let opts = ValidateOptions {
            allow_duplicates: false,
            default_payment_currency: Some("EUR".into()),
        };
        let r = parse_record(
            &columns(),
            &headers(),
            &rec(2, ["R", "UBER-JP", "1000", "JPY", "", "", "", ""]),
            &opts,
        )
        .unwrap();
        assert_eq!(r.payment_currency, "EUR");
        let ps = problems(["R", "A", "1", "USD", "", "", "JPY", ""]);
        assert_eq!(ps[0].column, Some(7));
        let ps = problems(["R", "A", "1", "USD", "", "", "cad", ""]);
        assert!(ps[0].help.as_deref().unwrap().contains("`CAD`"));

        // Without the column, the problem points at the currency.
        let cols = ColumnMap {
            payment_currency: None,
            ..columns()
        };
        let ps = parse_record(
            &cols,
            &headers(),
            &rec(2, ["R", "UBER-JP", "1000", "JPY", "", "", "", ""]),
            &ValidateOptions::default(),
        )
        .unwrap_err();
        assert_eq!(ps[0].column, Some(4));
        assert!(
            ps[0].message.contains("payment_currency column"),
            "{}",
            ps[0]
        );
    }

    fn check(v: &mut Validator, line: u64, cells: [&str; 8]) -> Vec<Problem> {
        v.check(&row(line, cells))
    }

    #[test]
    fn catalog_rules() {
        let cat = catalog();
        let mut v = Validator::new(&cat, ValidateOptions::default());
        let ok = |v: &mut Validator, l, c| {
            let ps = check(v, l, c);
            assert!(ps.is_empty(), "{ps:#?}");
        };
        ok(&mut v, 2, ["R1", "AMZ-US", "2000", "USD", "", "", "", "US"]);
        ok(
            &mut v,
            3,
            ["R2", "STEAM-US", "20.00", "USD", "", "", "", "CA"],
        );
        ok(
            &mut v,
            4,
            ["R3", "SPOTIFY-US", "32.97", "USD", "", "", "", ""],
        );
        ok(
            &mut v,
            5,
            ["R4", "AMZ-US|STEAM-US", "50", "USD", "", "", "", "US"],
        );
        ok(
            &mut v,
            6,
            ["R5", "UBER-JP", "3000", "JPY", "", "", "USD", "JP"],
        );
        ok(&mut v, 7, ["R6", "VISA-US", "10", "USD", "", "", "", ""]);

        let one = |v: &mut Validator, cells: [&str; 8], col: usize, needle: &str| {
            let ps = check(v, 9, cells);
            assert_eq!(ps.len(), 1, "{ps:#?}");
            assert_eq!(ps[0].column, Some(col), "{}", ps[0]);
            assert!(ps[0].message.contains(needle), "{}", ps[0]);
            assert!(ps[0].help.is_some());
            ps.into_iter().next().unwrap()
        };
        let p = one(
            &mut v,
            ["U1", "AMZ-UK", "10", "USD", "", "", "", ""],
            2,
            "not in the catalog",
        );
        assert!(p.help.unwrap().contains("`AMZ-US`"));
        let p = one(
            &mut v,
            ["U2", "amz-us", "10", "USD", "", "", "", ""],
            2,
            "not in the catalog",
        );
        assert!(p.help.unwrap().contains("`AMZ-US`"));
        one(
            &mut v,
            ["U3", "RETIRED-US", "10", "USD", "", "", "", ""],
            2,
            "cannot be ordered",
        );
        one(
            &mut v,
            ["U4", "PAUSED-US", "10", "USD", "", "", "", ""],
            2,
            "SUSPENDED",
        );
        let p = one(
            &mut v,
            ["U5", "AMZ-DE", "10", "USD", "", "", "", ""],
            4,
            "(EUR)",
        );
        assert_eq!(p.value.as_deref(), Some("USD"));
        one(
            &mut v,
            ["U6", "AMZ-US|AMZ-DE", "10", "USD", "", "", "", ""],
            2,
            "different currencies",
        );
        let p = one(
            &mut v,
            ["U7", "STEAM-US", "30", "USD", "", "", "", ""],
            3,
            "5, 10, 20, 50, 100 USD",
        );
        assert_eq!(p.value.as_deref(), Some("30"));
        one(
            &mut v,
            ["U8", "AMZ-DE", "501", "EUR", "", "", "", ""],
            3,
            "5 to 500 EUR",
        );
        one(
            &mut v,
            ["U9", "AMZ-DE", "4.99", "EUR", "", "", "", ""],
            3,
            "outside the range",
        );
        one(
            &mut v,
            ["U10", "VISA-US", "1000.01", "USD", "", "", "", ""],
            3,
            "10 to 1000",
        );
        one(
            &mut v,
            ["U11", "SPOTIFY-US", "11", "USD", "", "", "", ""],
            3,
            "10.99 (1 month), 32.97 (3 months)",
        );
        one(
            &mut v,
            ["U12", "AMZ-DE", "10", "EUR", "", "", "", "FR"],
            8,
            "DE, AT",
        );
        // In a choice, each product is checked.
        one(
            &mut v,
            ["U13", "AMZ-US|STEAM-US", "25", "USD", "", "", "", ""],
            3,
            "STEAM-US",
        );
        one(
            &mut v,
            ["U14", "AMZ-US|STEAM-US", "10", "USD", "", "", "", "CA"],
            8,
            "AMZ-US",
        );
    }

    /// The service's published rule for a choice of products (MULTIPLE): at least two
    /// different products, and a whole face value.
    #[test]
    fn a_choice_needs_two_different_products_and_a_whole_amount() {
        let cat = catalog();
        let mut v = Validator::new(&cat, ValidateOptions::default());
        assert!(
            check(
                &mut v,
                2,
                ["C1", "AMZ-US|STEAM-US", "50", "USD", "", "", "", ""]
            )
            .is_empty()
        );
        let ps = problems(["C2", "AMZ-US|AMZ-US", "50", "USD", "", "", "", ""]);
        assert_eq!(ps.len(), 1, "{ps:#?}");
        assert_eq!(ps[0].column, Some(2));
        assert!(ps[0].message.contains("twice"), "{}", ps[0]);
        let ps = check(
            &mut v,
            4,
            ["C3", "AMZ-US|VISA-US", "50.50", "USD", "", "", "", ""],
        );
        assert!(
            ps.iter()
                .any(|p| p.column == Some(3) && p.message.contains("not a whole amount")),
            "{ps:#?}"
        );
        // One product alone keeps its own denominations: cents are fine there.
        assert!(check(&mut v, 5, ["C4", "AMZ-US", "50.50", "USD", "", "", "", ""]).is_empty());
    }

    /// Published product states: LIVE and TEMPORARILY_DEGRADED are payable while
    /// `is_orderable`; TEMPORARILY_DISABLED is not; a payout type this version does not know
    /// is listed but never paid.
    #[test]
    fn degraded_products_are_payable_and_unknown_payout_types_are_not() {
        let mut degraded = open("DEG-US", "USD", "1", "100", &["US"]);
        degraded.state = "TEMPORARILY_DEGRADED".into();
        let mut disabled = open("DIS-US", "USD", "1", "100", &["US"]);
        disabled.state = "TEMPORARILY_DISABLED".into();
        let mut other = open("NEW-US", "USD", "1", "100", &["US"]);
        other.payout_type = PayoutType::Other;
        let products = vec![degraded, disabled, other];
        let cat = CatalogIndex::new(products);
        let mut v = Validator::new(&cat, ValidateOptions::default());
        assert!(check(&mut v, 2, ["D1", "DEG-US", "10", "USD", "", "", "", ""]).is_empty());
        let ps = check(&mut v, 3, ["D2", "DIS-US", "10", "USD", "", "", "", ""]);
        assert!(ps[0].message.contains("TEMPORARILY_DISABLED"), "{ps:#?}");
        let ps = check(&mut v, 4, ["D3", "NEW-US", "10", "USD", "", "", "", ""]);
        assert!(ps[0].message.contains("payout type"), "{ps:#?}");
    }

    #[test]
    fn a_product_whose_catalog_values_are_impossible_is_not_payable() {
        let mut free = open("FREE-US", "USD", "1", "100", &["US"]);
        free.discount_multiplier = Some(d("1"));
        let mut dearer = open("DEAR-US", "USD", "1", "100", &["US"]);
        dearer.discount_multiplier = Some(d("-0.5"));
        let upside_down = open("UPSIDE-US", "USD", "100", "1", &["US"]);
        let negative = open("NEG-US", "USD", "-5", "100", &["US"]);
        let zero_value = fixed("ZERO-US", "USD", &["0", "10"], &["US"]);
        let mut fine = open("FINE-US", "USD", "1", "100", &["US"]);
        fine.discount_multiplier = Some(d("0.99"));
        let cat = CatalogIndex::new(vec![free, dearer, upside_down, negative, zero_value, fine]);
        let mut v = Validator::new(&cat, ValidateOptions::default());
        for (n, (code, why)) in [
            (
                "FREE-US",
                "the discount multiplier 1 (it must be from 0 to below 1)",
            ),
            ("DEAR-US", "the discount multiplier -0.5"),
            ("UPSIDE-US", "a minimum value 100 above its maximum value 1"),
            ("NEG-US", "the minimum value -5 (amounts must be positive)"),
            ("ZERO-US", "the listed value 0 (amounts must be positive)"),
        ]
        .into_iter()
        .enumerate()
        {
            let reference = format!("R{n}");
            let ps = check(
                &mut v,
                2 + n as u64,
                [&reference, code, "10", "USD", "", "", "", ""],
            );
            assert!(
                ps.iter().any(|p| p.column == Some(2)
                    && p.message.contains(&format!(
                        "product `{code}` cannot be paid: the catalog gives it {why}"
                    ))),
                "{code}: {ps:#?}"
            );
        }
        let ps = check(&mut v, 9, ["R9", "FINE-US", "10", "USD", "", "", "", ""]);
        assert!(ps.is_empty(), "{ps:#?}");
    }

    #[test]
    fn problems_are_kept_bounded_the_first_of_each_kind_and_counted() {
        let mut all = Problems::default();
        for line in 2..100_002u64 {
            let column = ["face_value", "email", "face_value", "face_value"][(line % 4) as usize];
            all.push(Problem::at(line, 2, column, "bad"));
        }
        all.push(Problem::file(
            100_002,
            "this row has 3 fields but the header has 4",
        ));
        assert_eq!(all.len(), 100_001);
        assert_eq!(all.per_kind["face_value"], 75_000);
        assert_eq!(all.per_kind["email"], 25_000);
        assert_eq!(all.per_kind["row"], 1);
        assert_eq!(all.shown.len(), 2 * KEPT_PER_KIND + 1);
        assert_eq!(all.omitted(), 100_001 - all.shown.len());
        // In file order, the first of each kind.
        assert_eq!(all.shown[0].line, 2);
        assert!(all.shown.windows(2).all(|w| w[0].line < w[1].line));
        assert!(!all.all_file_level());
        // Never more than KEPT, however many kinds.
        let many: Problems = (0..1000)
            .map(|k| Problem::at(2, k, &format!("c{k}"), "bad"))
            .collect();
        assert_eq!(many.shown.len(), KEPT);
        assert_eq!(many.per_kind.len(), 1000);
    }

    /// Two addresses equal in lower case are one recipient, whatever their length, their case
    /// and their characters (`K`, the Kelvin sign, is `k` in lower case); others are not.
    #[test]
    fn likely_duplicates_compare_addresses_in_lower_case() {
        let cat = catalog();
        let long = format!("Ann@{}com", "Abcdefghij.".repeat(8));
        let pairs = [
            ("a@example.com", "A@EXAMPLE.COM", true),
            ("\u{212a}im@example.com", "kim@example.com", true),
            ("ÉLODIE@example.com", "élodie@example.com", true),
            (long.as_str(), &long.to_uppercase(), true),
            (long.as_str(), &format!("{long}x"), false),
            ("a@example.com", "b@example.com", false),
            ("ab@example.com", "a@bexample.com", false),
        ];
        for (first, second, same) in pairs {
            let mut v = Validator::new(&cat, ValidateOptions::default());
            let cells = |r, e| [r, "AMZ-US", "10", "USD", "", e, "", ""];
            assert!(check(&mut v, 2, cells("R1", first)).is_empty(), "{first}");
            let found = check(&mut v, 3, cells("R2", second));
            assert_eq!(
                found.len(),
                usize::from(same),
                "{first} / {second}: {found:?}"
            );
        }
    }

    #[test]
    fn repeated_references_and_likely_duplicates() {
        let cat = catalog();
        let mut v = Validator::new(&cat, ValidateOptions::default());
        assert!(
            check(
                &mut v,
                2,
                ["R1", "AMZ-US", "10", "USD", "", "a@example.com", "", ""]
            )
            .is_empty()
        );
        let ps = check(
            &mut v,
            5,
            ["R1", "AMZ-US", "20", "USD", "", "b@example.com", "", ""],
        );
        assert_eq!(ps.len(), 1);
        assert_eq!((ps[0].line, ps[0].column), (5, Some(1)));
        assert!(ps[0].message.contains("line 2"), "{}", ps[0]);

        let ps = check(
            &mut v,
            6,
            ["R2", "AMZ-US", "10.00", "USD", "", "A@Example.com", "", ""],
        );
        assert_eq!(ps.len(), 1, "{ps:?}");
        assert_eq!(ps[0].column, Some(6));
        assert!(ps[0].message.contains("line 2"), "{}", ps[0]);
        // Payout links without an email are not duplicates of each other.
        assert!(check(&mut v, 7, ["R3", "AMZ-US", "10", "USD", "", "", "", ""]).is_empty());
        assert!(check(&mut v, 8, ["R4", "AMZ-US", "10", "USD", "", "", "", ""]).is_empty());

        let mut v = Validator::new(
            &cat,
            ValidateOptions {
                allow_duplicates: true,
                default_payment_currency: None,
            },
        );
        assert!(
            check(
                &mut v,
                2,
                ["R1", "AMZ-US", "10", "USD", "", "a@example.com", "", ""]
            )
            .is_empty()
        );
        assert!(
            check(
                &mut v,
                3,
                ["R2", "AMZ-US", "10", "USD", "", "a@example.com", "", ""]
            )
            .is_empty()
        );
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

    #[test]
    fn values_in_messages_are_escaped_and_cut() {
        assert_eq!(show("a\nb"), "a\\nb");
        assert_eq!(show(&"x".repeat(100)).chars().count(), 61);
    }
}
