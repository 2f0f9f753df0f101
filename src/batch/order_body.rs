//! Turning validated rows into orders: the deterministic idempotency key and the exact body.
//! Both are committed to the ledger before the first send and never rebuilt afterwards.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::api::models::{
    DistributionMethod, DistributionType, NewOrder, NewOrderItem, PaymentMethod, PaymentMethodType,
    ProductSelection,
};

use crate::input::rules::RowSpec;
use crate::ledger::RowKey;

/// The namespace of paybatch's UUID v5 idempotency keys.
pub const KEY_NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2a4e_58b3_4d0e_9a71_c3e2_5b8d_0f47);

/// UUID v5 of (environment, batch, row reference, attempt): the same row and attempt always get
/// the same key; a retry (next attempt) gets a new one.
pub fn idempotency_key(environment: &str, batch: &str, reference: &str, attempt: i64) -> String {
    let mut name = key_prefix(environment, batch);
    push_part(&mut name, reference);
    push_part(&mut name, &attempt.to_string());
    Uuid::new_v5(&KEY_NAMESPACE, name.as_bytes()).to_string()
}

/// Each part is length-prefixed, so no choice of names can make two key inputs collide.
fn push_part(name: &mut String, part: &str) {
    name.push_str(&part.len().to_string());
    name.push(':');
    name.push_str(part);
}

fn key_prefix(environment: &str, batch: &str) -> String {
    let mut name = String::from("paybatch-key-v1/");
    push_part(&mut name, environment);
    push_part(&mut name, batch);
    name
}

/// The key of an order of several rows: UUID v5 of (environment, batch, every row reference and
/// attempt in item order). An order of one row gets that row's [`idempotency_key`].
pub fn order_key(environment: &str, batch: &str, rows: &[(&str, i64)]) -> String {
    match rows {
        [(reference, attempt)] => idempotency_key(environment, batch, reference, *attempt),
        many => {
            let mut name = key_prefix(environment, batch);
            push_part(&mut name, "order");
            for (reference, attempt) in many {
                push_part(&mut name, reference);
                push_part(&mut name, &attempt.to_string());
            }
            Uuid::new_v5(&KEY_NAMESPACE, name.as_bytes()).to_string()
        }
    }
}

/// How an order names its batch and its rows, within the service's published limits: a
/// `description` of at most 128 characters (the only field the order list shows of a finished
/// order), and at most 20 `metadata` pairs, keys of at most 40 characters, values of at most 200
/// (shown only by `GET /order/{id}` of a finished order). A PROCESSING order shows neither.
///
/// - `description`: `paybatch KEY batch=NAME row=REF` (or `rows=FIRST (+N more)`), cut to 128
///   characters; the idempotency key comes first, so it survives any cut. With the ledger, the
///   key names the intent, and the ledger names its rows.
/// - `metadata`: `paybatch_batch` (the batch name, or `sha256:HEX` of a name longer than 200
///   characters), `paybatch_attempts` (one number when every row has the same attempt, else runs
///   such as `1*150,2*50`) and the row references joined by `|` in item order, in pieces of 200
///   characters under `paybatch_rows`, `paybatch_rows_2` .. `paybatch_rows_18` (3,600
///   characters: 200 references of up to 17 characters). When they do not fit, each reference
///   after the first is written against the one before it ([`compact_references`]) under
///   `paybatch_refs`, `paybatch_refs_2` .. `paybatch_refs_18` instead. Without the ledger
///   (`reconcile --rebuild`), a finished order names its rows by itself: an order takes a row
///   only while its references fit ([`MetadataFit`]).
pub use crate::api::rules::{
    MAX_DESCRIPTION, MAX_METADATA_KEY, MAX_METADATA_PAIRS, MAX_METADATA_VALUE,
};
/// Pairs that carry row references: all but the batch and the attempts.
const ROW_PAIRS: usize = MAX_METADATA_PAIRS - 2;
/// Characters of `|`-joined references an order can carry.
pub const ROWS_BUDGET: usize = ROW_PAIRS * MAX_METADATA_VALUE;

const META_BATCH: &str = "paybatch_batch";
const META_ATTEMPTS: &str = "paybatch_attempts";
const META_ROWS: &str = "paybatch_rows";
/// The references written against each other ([`compact_references`]), when the plain ones do
/// not fit. A key of its own: a paybatch that does not know this form finds no `paybatch_rows`
/// and takes the order as naming its first row only (said by every run), never as naming
/// other rows.
const META_REFS: &str = "paybatch_refs";

/// The metadata key of the `n`th piece (from 1) of the references written under `base`.
fn piece_key(base: &str, n: usize) -> String {
    if n == 1 {
        base.to_string()
    } else {
        format!("{base}_{n}")
    }
}

/// How a reference is written after `previous` in [`compact_references`]: `P,S,MIDDLE` when
/// it shares its first P and last S characters with `previous` and that is shorter, else
/// whole. A reference holds neither `,` nor `|` (`input::row`), so each entry reads back one way.
fn compact_entry(previous: &str, reference: &str) -> String {
    let (p, s) = shared_ends(previous, reference);
    let whole = reference.chars().count();
    if entry_chars(p, s, whole) < whole {
        let middle: String = reference.chars().skip(p).take(whole - p - s).collect();
        format!("{p},{s},{middle}")
    } else {
        reference.to_string()
    }
}

/// The characters of [`compact_entry`], counted without writing it.
fn compact_entry_chars(previous: &str, reference: &str) -> usize {
    let (p, s) = shared_ends(previous, reference);
    let whole = char_count(reference);
    entry_chars(p, s, whole).min(whole)
}

fn entry_chars(p: usize, s: usize, whole: usize) -> usize {
    digits(p as i128) + 1 + digits(s as i128) + 1 + (whole - p - s)
}

fn char_count(text: &str) -> usize {
    if text.is_ascii() {
        text.len()
    } else {
        text.chars().count()
    }
}

/// The characters `reference` shares with `previous` at its start, then at its end (not
/// counting those of the start again, in either).
fn shared_ends(previous: &str, reference: &str) -> (usize, usize) {
    if previous.is_ascii() && reference.is_ascii() {
        // One byte a character: the same counts, without decoding, eight bytes at a time (a
        // row at a time, on the planning of a million rows).
        let (a, b) = (previous.as_bytes(), reference.as_bytes());
        let p = shared_start(a, b);
        let left = a.len().min(b.len()) - p;
        let s = shared_end(&a[p..], &b[p..]).min(left);
        return (p, s);
    }
    let p = previous
        .chars()
        .zip(reference.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let left = previous.chars().count().min(reference.chars().count()) - p;
    let s = previous
        .chars()
        .rev()
        .zip(reference.chars().rev())
        .take(left)
        .take_while(|(a, b)| a == b)
        .count();
    (p, s)
}

/// The bytes `a` and `b` share at their start.
fn shared_start(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let (Ok(x), Ok(y)) = (
            <[u8; 8]>::try_from(&a[i..i + 8]),
            <[u8; 8]>::try_from(&b[i..i + 8]),
        ) else {
            break;
        };
        let differ = u64::from_le_bytes(x) ^ u64::from_le_bytes(y);
        if differ != 0 {
            return i + (differ.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + a[i..n]
        .iter()
        .zip(&b[i..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// The bytes `a` and `b` share at their end.
fn shared_end(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (a, b) = (&a[a.len() - n..], &b[b.len() - n..]);
    let mut j = 0;
    while j + 8 <= n {
        let (from, to) = (n - j - 8, n - j);
        let (Ok(x), Ok(y)) = (
            <[u8; 8]>::try_from(&a[from..to]),
            <[u8; 8]>::try_from(&b[from..to]),
        ) else {
            break;
        };
        let differ = u64::from_be_bytes(x) ^ u64::from_be_bytes(y);
        if differ != 0 {
            return j + (differ.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    j + a[..n - j]
        .iter()
        .rev()
        .zip(b[..n - j].iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
}

/// The references of an order joined by `|`, each after the first written against the one
/// before it ([`compact_entry`]): `EMP-00000001-2026-11` after `EMP-00000000-2026-11` is
/// `11,8,1`.
pub fn compact_references(references: &[&str]) -> String {
    let mut out = String::new();
    let mut previous: Option<&str> = None;
    for reference in references {
        if let Some(previous) = previous {
            out.push('|');
            out.push_str(&compact_entry(previous, reference));
        } else {
            out.push_str(reference);
        }
        previous = Some(reference);
    }
    out
}

/// Reads [`compact_references`] back; `None` when an entry does not read (a number that is
/// not one, more shared characters than the reference before it has).
fn references_of_compact(text: &str) -> Option<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for entry in text.split('|') {
        let Some((p, rest)) = entry.split_once(',') else {
            out.push(entry.to_string());
            continue;
        };
        let (s, middle) = rest.split_once(',')?;
        let (p, s): (usize, usize) = (p.parse().ok()?, s.parse().ok()?);
        if middle.contains(',') {
            return None;
        }
        let previous: Vec<char> = out.last()?.chars().collect();
        if p.checked_add(s)? > previous.len() {
            return None;
        }
        let reference: String = previous[..p]
            .iter()
            .copied()
            .chain(middle.chars())
            .chain(previous[previous.len() - s..].iter().copied())
            .collect();
        out.push(reference);
    }
    Some(out)
}

/// How `metadata` names a batch: the name, or a hash of a name too long for one value.
pub fn batch_tag(batch: &str) -> String {
    if batch.chars().count() <= MAX_METADATA_VALUE {
        batch.to_string()
    } else {
        use sha2::{Digest, Sha256};
        format!("sha256:{}", hex::encode(Sha256::digest(batch.as_bytes())))
    }
}

/// `description`: the idempotency key first, then the batch and the rows, for the service's
/// order list and for the person who reads the account's orders.
pub fn description(key: &str, batch: &str, references: &[&str]) -> String {
    let text = match references {
        [one] => format!("paybatch {key} batch={batch} row={one}"),
        [first, rest @ ..] => format!(
            "paybatch {key} batch={batch} rows={first} (+{} more)",
            rest.len()
        ),
        [] => format!("paybatch {key} batch={batch}"),
    };
    truncate_chars(&text, MAX_DESCRIPTION)
}

/// The idempotency key a paybatch `description` starts with.
pub fn key_in_description(description: &str) -> Option<&str> {
    let rest = description.strip_prefix("paybatch ")?;
    let key = rest.get(..36)?;
    let ends = rest[36..].is_empty() || rest[36..].starts_with(' ');
    (ends && Uuid::parse_str(key).is_ok()).then_some(key)
}

/// Whether a `description` is as long as the service keeps one, so that it may have been cut
/// (a description of exactly [`MAX_DESCRIPTION`] characters is taken as cut: nothing tells).
pub fn description_may_be_cut(description: &str) -> bool {
    description.chars().count() >= MAX_DESCRIPTION
}

/// Whether a `description` names a batch (see [`batch_named_by`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchNaming {
    /// It names the batch.
    Names,
    /// It was cut inside the batch name, and what is left is the beginning of this batch's
    /// name: it may be this batch's.
    MayName,
    /// Another batch's, or not paybatch's.
    Other,
}

/// Whether `description` names `batch`: paybatch's `paybatch KEY batch=NAME ...`, or the older
/// `paybatch batch=NAME row=REF`. A description cut by the service's limit inside the name
/// [`BatchNaming::MayName`] every batch whose name goes on from where it was cut.
pub fn batch_named_by(description: &str, batch: &str) -> BatchNaming {
    let cut = description_may_be_cut(description);
    let named = match key_in_description(description) {
        Some(key) => {
            let head = format!("paybatch {key} batch={batch}");
            (
                description == head || description.starts_with(&format!("{head} ")),
                head,
            )
        }
        None => {
            // The older form always went on with the row.
            let head = format!("paybatch batch={batch} ");
            (description.starts_with(&head), head)
        }
    };
    match named {
        (true, _) => BatchNaming::Names,
        (false, head) if cut && head.starts_with(description) => BatchNaming::MayName,
        _ => BatchNaming::Other,
    }
}

/// What a paybatch `description` says (see [`description`], and the older `paybatch
/// batch=NAME row=REF`), each part as written, and perhaps cut by the service's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptionParts<'a> {
    /// The idempotency key (none in the older form).
    pub key: Option<&'a str>,
    /// The batch name, as far as it is written. A name that itself holds ` row=` or ` rows=`
    /// is split at the last of them: [`batch_named_by`] tells for a name known beforehand.
    pub batch: Option<&'a str>,
    /// The first row's reference (`row=REF`, or `FIRST` of `rows=FIRST (+N more)`), as far as
    /// it is written.
    pub first_reference: Option<&'a str>,
    /// The description may have been cut ([`description_may_be_cut`]).
    pub cut: bool,
    /// The first row's reference may not be whole: the description may have been cut inside
    /// it or before it.
    pub first_reference_cut: bool,
}

/// Reads a description written by paybatch; `None` when it does not start with `paybatch `.
pub fn read_description(description: &str) -> Option<DescriptionParts<'_>> {
    let after = description.strip_prefix("paybatch ")?;
    let cut = description_may_be_cut(description);
    let key = key_in_description(description);
    let rest = match key {
        Some(k) => {
            let tail = &after[k.len()..];
            tail.strip_prefix(' ').unwrap_or(tail)
        }
        None => after,
    };
    let mut parts = DescriptionParts {
        key,
        batch: None,
        first_reference: None,
        cut,
        first_reference_cut: false,
    };
    let Some(named) = rest.strip_prefix("batch=") else {
        return Some(parts);
    };
    // A reference holds no `=`, so the last ` row=` or ` rows=` starts the rows.
    let one = named
        .rfind(" row=")
        .map(|at| (at, at + " row=".len(), false));
    let many = named
        .rfind(" rows=")
        .map(|at| (at, at + " rows=".len(), true));
    let split = match (one, many) {
        (Some(a), Some(b)) => Some(if a.0 > b.0 { a } else { b }),
        (a, b) => a.or(b),
    };
    let Some((at, from, several)) = split else {
        parts.batch = Some(named);
        parts.first_reference_cut = cut;
        return Some(parts);
    };
    parts.batch = Some(&named[..at]);
    let text = &named[from..];
    let (first, whole) = match text.find(" (+") {
        Some(end) if several => (&text[..end], true),
        _ => (text, !cut),
    };
    parts.first_reference = (!first.is_empty()).then_some(first);
    parts.first_reference_cut = !whole;
    Some(parts)
}

/// The attempts of an order's rows as `metadata` writes them: `N` when all are `N`, else runs.
fn attempts_text(attempts: impl IntoIterator<Item = i64>) -> String {
    let mut runs: Vec<(i64, usize)> = Vec::new();
    for a in attempts {
        match runs.last_mut() {
            Some((last, n)) if *last == a => *n += 1,
            _ => runs.push((a, 1)),
        }
    }
    match runs.as_slice() {
        [] => String::new(),
        [(a, _)] => a.to_string(),
        many => many
            .iter()
            .map(|(a, n)| format!("{a}*{n}"))
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// Reads [`attempts_text`] back for `count` rows (and the older `1|1|2` form).
fn attempts_of(text: &str, count: usize) -> Option<Vec<i64>> {
    let text = text.trim();
    if text.contains('|') {
        let all: Option<Vec<i64>> = text.split('|').map(|a| a.parse().ok()).collect();
        return all.filter(|a| a.len() == count);
    }
    if !text.contains('*') {
        let a: i64 = text.parse().ok()?;
        return Some(vec![a; count]);
    }
    let mut out = Vec::new();
    for run in text.split(',') {
        let (a, n) = run.split_once('*')?;
        let (a, n): (i64, usize) = (a.parse().ok()?, n.parse().ok()?);
        if n > count.saturating_sub(out.len()) {
            return None;
        }
        out.extend(std::iter::repeat_n(a, n));
    }
    (out.len() == count).then_some(out)
}

/// Whether the rows of an order still fit in its `metadata`: an order takes a row only while
/// the references (and the attempts) it names fit the service's limits.
#[derive(Debug, Clone, Default)]
pub struct MetadataFit {
    /// Characters of the references so far as [`compact_references`] writes them (never more
    /// than the `|`-joined ones).
    rows_chars: usize,
    /// The last reference added.
    last: String,
    /// The attempts so far as [`attempts_text`] has them: each attempt and its rows in a row.
    runs: Vec<(i64, usize)>,
}

impl MetadataFit {
    pub fn admits(&self, reference: &str, attempt: i64) -> bool {
        if self.rows_chars + self.entry_chars(reference) > ROWS_BUDGET {
            return false;
        }
        attempts_chars(&self.runs, attempt) <= MAX_METADATA_VALUE
    }

    pub fn add(&mut self, reference: &str, attempt: i64) {
        self.rows_chars += self.entry_chars(reference);
        self.last.clear();
        self.last.push_str(reference);
        match self.runs.last_mut() {
            Some((a, n)) if *a == attempt => *n += 1,
            _ => self.runs.push((attempt, 1)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The characters `reference` adds to the references (its `|` included).
    fn entry_chars(&self, reference: &str) -> usize {
        if self.runs.is_empty() {
            char_count(reference)
        } else {
            1 + compact_entry_chars(&self.last, reference)
        }
    }
}

/// The characters of [`attempts_text`] of the attempts of `runs` (each attempt and its rows
/// in a row) and one more, `attempt`, counted without writing the text: a row's fit costs the
/// runs, not the rows before it.
fn attempts_chars(runs: &[(i64, usize)], attempt: i64) -> usize {
    let run = |a: i64, n: usize| digits(a as i128) + 1 + digits(n as i128);
    let Some((&(last, n), before)) = runs.split_last() else {
        return digits(attempt as i128);
    };
    let before_chars: usize = before.iter().map(|&(a, n)| run(a, n) + 1).sum();
    match (last == attempt, before.is_empty()) {
        (true, true) => digits(last as i128),
        (true, false) => before_chars + run(last, n + 1),
        (false, _) => before_chars + run(last, n) + 1 + run(attempt, 1),
    }
}

/// The characters of `n` written in decimal.
fn digits(n: i128) -> usize {
    let (mut len, mut m) = (usize::from(n < 0) + 1, n.unsigned_abs());
    while m >= 10 {
        m /= 10;
        len += 1;
    }
    len
}

/// Whether the `metadata` of an order of `rows` (reference, attempt), in item order, keeps to
/// the service's limits. The planner makes only such orders ([`MetadataFit`]); some of an
/// order's rows may not be one (written against each other, a reference can take more room
/// after another than after the one left out between them).
pub fn metadata_fits(rows: &[(&str, i64)]) -> bool {
    let mut fit = MetadataFit::default();
    rows.iter().all(|(reference, attempt)| {
        let admitted = fit.admits(reference, *attempt);
        fit.add(reference, *attempt);
        admitted
    })
}

/// The `metadata` of an order of `rows` (reference, attempt) of `batch`.
pub fn metadata(batch: &str, rows: &[(&str, i64)]) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    m.insert(META_BATCH.to_string(), batch_tag(batch));
    m.insert(
        META_ATTEMPTS.to_string(),
        attempts_text(rows.iter().map(|(_, a)| *a)),
    );
    let references: Vec<&str> = rows.iter().map(|(r, _)| *r).collect();
    let plain = references.join("|");
    let (base, joined) = if plain.chars().count() <= ROWS_BUDGET {
        (META_ROWS, plain)
    } else {
        (META_REFS, compact_references(&references))
    };
    let joined: Vec<char> = joined.chars().collect();
    for (i, piece) in joined.chunks(MAX_METADATA_VALUE).enumerate() {
        m.insert(piece_key(base, i + 1), piece.iter().collect());
    }
    m
}

/// The rows (reference, attempt) an order's `metadata` names, in item order, when it is an
/// order of `batch`. `None` when it is not paybatch's or not `batch`'s.
pub fn rows_in_metadata(batch: &str, m: &BTreeMap<String, String>) -> Option<Vec<RowKey>> {
    if m.get(META_BATCH)? != &batch_tag(batch) {
        return None;
    }
    let refs = references_in_metadata(m);
    if refs.is_empty() {
        return None;
    }
    let attempts = match m.get(META_ATTEMPTS) {
        Some(text) => attempts_of(text, refs.len())?,
        None => vec![1; refs.len()],
    };
    Some(
        refs.into_iter()
            .zip(attempts)
            .map(|(reference, attempt)| RowKey::new(reference, attempt))
            .collect(),
    )
}

/// The row references an order's `metadata` names, in item order, whatever its batch: the
/// `|`-joined ones, else the [`compact_references`]. None when it names none, or when the
/// compact ones do not read.
pub fn references_in_metadata(m: &BTreeMap<String, String>) -> Vec<String> {
    let joined = pieces(m, META_ROWS);
    if !joined.is_empty() {
        return joined.split('|').map(str::to_string).collect();
    }
    let compact = pieces(m, META_REFS);
    if compact.is_empty() {
        return Vec::new();
    }
    references_of_compact(&compact).unwrap_or_default()
}

/// The pieces `base`, `base_2`, ... of `m` joined, up to the first missing.
fn pieces(m: &BTreeMap<String, String>, base: &str) -> String {
    let mut joined = String::new();
    for n in 1..=ROW_PAIRS + 1 {
        match m.get(&piece_key(base, n)) {
            Some(piece) => joined.push_str(piece),
            None => break,
        }
    }
    joined
}

/// The attempts an order's `metadata` names for its `count` rows, in item order; `None` when
/// it names none, or not one for each row.
pub fn attempts_in_metadata(m: &BTreeMap<String, String>, count: usize) -> Option<Vec<i64>> {
    attempts_of(m.get(META_ATTEMPTS)?, count)
}

/// The batch an order's `metadata` names (its [`batch_tag`]), if it is paybatch's.
pub fn batch_in_metadata(m: &BTreeMap<String, String>) -> Option<&str> {
    m.get(META_BATCH).map(String::as_str)
}

fn truncate_chars(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// How an order is paid: from the balance in `currency`, or by `card` in `currency`.
pub fn payment_method(currency: &str, card: Option<&str>) -> PaymentMethod {
    match card {
        Some(card) => PaymentMethod {
            kind: PaymentMethodType::Card,
            card_id: Some(card.to_string()),
            currency: Some(currency.to_string()),
        },
        None => PaymentMethod {
            kind: PaymentMethodType::AccountBalance,
            card_id: None,
            currency: Some(currency.to_string()),
        },
    }
}

/// The exact body of the order `key` paying `rows` (one item per row, in this order) with
/// `payment`.
pub fn order_body(
    key: &str,
    batch: &str,
    payment: &PaymentMethod,
    rows: &[(&RowSpec, i64)],
) -> Result<Vec<u8>, serde_json::Error> {
    let items = rows
        .iter()
        .map(|(row, _)| NewOrderItem {
            face_value: row.face_value,
            distribution_method: DistributionMethod {
                kind: row.distribution,
                email_address: match row.distribution {
                    DistributionType::Email => row.email.clone(),
                    _ => None,
                },
                template_id: None,
            },
            products: ProductSelection::of(&row.product_codes),
        })
        .collect();
    let named: Vec<(&str, i64)> = rows
        .iter()
        .map(|(r, a)| (r.reference.as_str(), *a))
        .collect();
    let refs: Vec<&str> = named.iter().map(|(r, _)| *r).collect();
    let body = NewOrder {
        payment_method: payment.clone(),
        items,
        description: Some(description(key, batch, &refs)),
        metadata: Some(metadata(batch, &named)),
    };
    serde_json::to_vec(&body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_deterministic_and_change_with_each_part() {
        let k = idempotency_key("sim", "nov", "EMP-1", 1);
        assert_eq!(k, idempotency_key("sim", "nov", "EMP-1", 1));
        assert_ne!(k, idempotency_key("sim", "nov", "EMP-1", 2));
        assert_ne!(k, idempotency_key("production", "nov", "EMP-1", 1));
        assert_ne!(k, idempotency_key("sim", "dec", "EMP-1", 1));
        assert_ne!(k, idempotency_key("sim", "nov", "EMP-2", 1));
        // No ambiguity from joining: ("a b", "c") differs from ("a", "b c").
        assert_ne!(
            idempotency_key("sim", "a\u{1f}b", "c", 1),
            idempotency_key("sim", "a", "b\u{1f}c", 1)
        );
    }

    #[test]
    fn order_keys_of_one_row_are_row_keys_and_groups_differ_by_member() {
        assert_eq!(
            order_key("sim", "nov", &[("EMP-1", 1)]),
            idempotency_key("sim", "nov", "EMP-1", 1)
        );
        let ab = order_key("sim", "nov", &[("A", 1), ("B", 1)]);
        assert_eq!(ab, order_key("sim", "nov", &[("A", 1), ("B", 1)]));
        assert_ne!(ab, order_key("sim", "nov", &[("A", 1), ("B", 2)]));
        assert_ne!(ab, order_key("sim", "nov", &[("B", 1), ("A", 1)]));
        assert_ne!(ab, order_key("sim", "nov", &[("A", 1)]));
    }

    const KEY: &str = "0b5e3c1e-7d59-5d43-9a55-2b1f0a9e3c11";

    #[test]
    fn description_fits_the_service_limit_and_keeps_the_key() {
        let long = "x".repeat(300);
        let d = description(KEY, &long, &["r"]);
        assert_eq!(d.chars().count(), MAX_DESCRIPTION);
        assert_eq!(key_in_description(&d), Some(KEY));
        assert_eq!(
            description(KEY, "nov", &["EMP-1"]),
            format!("paybatch {KEY} batch=nov row=EMP-1")
        );
        assert_eq!(
            description(KEY, "nov", &["A", "B", "C"]),
            format!("paybatch {KEY} batch=nov rows=A (+2 more)")
        );
        assert_eq!(key_in_description("paybatch batch=nov row=EMP-1"), None);
        assert_eq!(key_in_description(&format!("paybatch {KEY}x")), None);
    }

    #[test]
    fn a_description_names_its_batch_even_when_cut_inside_the_name() {
        let d = description(KEY, "nov", &["EMP-1"]);
        assert_eq!(batch_named_by(&d, "nov"), BatchNaming::Names);
        assert_eq!(batch_named_by(&d, "no"), BatchNaming::Other);
        assert_eq!(batch_named_by(&d, "nov-2"), BatchNaming::Other);
        let head = format!("paybatch {KEY} batch=nov");
        assert_eq!(batch_named_by(&head, "nov"), BatchNaming::Names);
        // The older form.
        let old = "paybatch batch=nov row=EMP-1";
        assert_eq!(batch_named_by(old, "nov"), BatchNaming::Names);
        assert_eq!(batch_named_by(old, "nov row=EMP"), BatchNaming::Other);
        assert_eq!(
            batch_named_by("paybatch batch=nov", "nov"),
            BatchNaming::Other
        );
        // Cut inside the name: every batch whose name goes on from there may be it; a short
        // description is never taken for cut.
        let long = format!("nov-{}", "x".repeat(150));
        let d = description(KEY, &long, &["EMP-1"]);
        assert_eq!(batch_named_by(&d, &long), BatchNaming::MayName);
        assert_eq!(
            batch_named_by(&d, &format!("{long}-more")),
            BatchNaming::MayName
        );
        assert_eq!(batch_named_by(&d, "nov"), BatchNaming::Other);
        assert_eq!(
            batch_named_by(&format!("paybatch {KEY} batch=no"), "nov"),
            BatchNaming::Other
        );
        let old_cut: String = format!("paybatch batch={long} row=EMP-1")
            .chars()
            .take(128)
            .collect();
        assert_eq!(batch_named_by(&old_cut, &long), BatchNaming::MayName);
        assert_eq!(batch_named_by("Team lunch", "nov"), BatchNaming::Other);
    }

    #[test]
    fn descriptions_are_read_back_in_parts() {
        fn parts(d: &str) -> DescriptionParts<'_> {
            read_description(d).expect("paybatch's")
        }
        let one = description(KEY, "nov", &["EMP 1"]);
        let p = parts(&one);
        assert_eq!(
            (
                p.key,
                p.batch,
                p.first_reference,
                p.cut,
                p.first_reference_cut
            ),
            (Some(KEY), Some("nov"), Some("EMP 1"), false, false)
        );
        let two = description(KEY, "nov", &["A", "B"]);
        let p = parts(&two);
        assert_eq!(
            (p.first_reference, p.first_reference_cut),
            (Some("A"), false)
        );
        let p = parts("paybatch batch=nov rows=A (+1 more)");
        assert_eq!(
            (p.key, p.batch, p.first_reference),
            (None, Some("nov"), Some("A"))
        );
        let none = format!("paybatch {KEY} batch=nov");
        let p = parts(&none);
        assert_eq!(
            (p.batch, p.first_reference, p.first_reference_cut),
            (Some("nov"), None, false)
        );
        // Cut right after `row=`: nothing of the reference, which is unknown.
        let d = format!("paybatch {KEY} batch={} row=EMP-1", "b".repeat(71));
        let d: String = d.chars().take(MAX_DESCRIPTION).collect();
        assert!(d.ends_with(" row="));
        let p = parts(&d);
        assert_eq!((p.first_reference, p.first_reference_cut), (None, true));
        // Not paybatch's, or nothing after the key.
        assert_eq!(read_description("Team lunch"), None);
        let p = parts("paybatch says hello");
        assert_eq!((p.key, p.batch, p.first_reference), (None, None, None));
    }

    /// Every order the planner can make keeps to the published metadata limits, and its
    /// metadata gives its rows back.
    #[test]
    fn metadata_keeps_to_the_published_limits_and_names_every_row() {
        let long_ref = "R".repeat(100);
        for (reference, attempts) in [
            ("EMP-000123", vec![1; 200]),
            (long_ref.as_str(), vec![1; 200]),
            ("EMP-7", (0..200).map(|i| 1 + (i % 2)).collect::<Vec<i64>>()),
        ] {
            let mut fit = MetadataFit::default();
            let mut rows: Vec<RowKey> = Vec::new();
            for (i, a) in attempts.iter().enumerate() {
                let r = format!("{reference}-{i}");
                if !fit.admits(&r, *a) {
                    break;
                }
                fit.add(&r, *a);
                rows.push(RowKey::new(r, *a));
            }
            assert!(!rows.is_empty());
            let named: Vec<(&str, i64)> = rows.iter().map(RowKey::named).collect();
            let m = metadata(&"b".repeat(250), &named);
            assert!(m.len() <= MAX_METADATA_PAIRS, "{} pairs", m.len());
            for (k, v) in &m {
                assert!(k.chars().count() <= MAX_METADATA_KEY, "{k}");
                assert!(v.chars().count() <= MAX_METADATA_VALUE, "{k}: {}", v.len());
            }
            let back = rows_in_metadata(&"b".repeat(250), &m).expect("its rows");
            assert_eq!(back, rows);
            assert!(rows_in_metadata("other", &m).is_none());
        }
        // References of up to 17 characters: all 200 rows of a full order fit; one more
        // character, and the order closes earlier.
        let mut fit = MetadataFit::default();
        for i in 0..200 {
            let r = format!("EMP-2026-11-{i:05}");
            assert_eq!(r.len(), 17);
            assert!(fit.admits(&r, 1), "row {i}");
            fit.add(&r, 1);
        }
        // Longer references that share nothing with the one before them: n of 18 characters
        // take 19 n - 1, and the order closes earlier.
        let mut fit = MetadataFit::default();
        let fits = (0..200)
            .take_while(|i| {
                let r = format!("{}-2026-11-X{i:05}", ["EMP", "XYZ"][i % 2]);
                let r = if i % 2 == 1 {
                    r.replace("-2026-", "#2026#")
                } else {
                    r
                };
                let ok = fit.admits(&r, 1);
                fit.add(&r, 1);
                ok
            })
            .count();
        assert_eq!(fits, 3601 / 19);
    }

    /// References that do not fit `|`-joined are written against each other under
    /// `paybatch_refs`, and read back the same; those that fit keep the plain form.
    #[test]
    fn references_too_long_to_join_are_written_against_each_other() {
        let refs: Vec<String> = (0..200).map(|i| format!("EMP-{i:08}-2026-11")).collect();
        let named: Vec<(&str, i64)> = refs.iter().map(|r| (r.as_str(), 1)).collect();
        let mut fit = MetadataFit::default();
        for (r, a) in &named {
            assert!(fit.admits(r, *a), "{r}");
            fit.add(r, *a);
        }
        let m = metadata("nov", &named);
        assert!(!m.contains_key("paybatch_rows"));
        assert!(m["paybatch_refs"].starts_with("EMP-00000000-2026-11|11,8,1|11,8,2|"));
        let written: usize = m.values().map(|v| v.chars().count()).sum();
        assert!(written < 2000, "{written}");
        let back: Vec<String> = references_in_metadata(&m);
        assert_eq!(back, refs);
        let rows = rows_in_metadata("nov", &m).expect("its rows");
        assert_eq!(rows.len(), 200);
        // 171 of them still fit joined: written as before.
        let m = metadata("nov", &named[..171]);
        assert!(m.contains_key("paybatch_rows") && !m.contains_key("paybatch_refs"));
        assert_eq!(references_in_metadata(&m), refs[..171]);
    }

    /// Some of an order's rows may need more room than all of them: each reference differs
    /// from the one before it at one end only, and from the one two before at both.
    #[test]
    fn some_rows_of_an_order_that_fits_may_not_fit() {
        let refs: Vec<String> = (0..200)
            .map(|i| format!("{:02}{}{:02}", (i + 1) / 2, "x".repeat(80), i / 2))
            .collect();
        let all: Vec<(&str, i64)> = refs.iter().map(|r| (r.as_str(), 1)).collect();
        assert!(metadata_fits(&all));
        let every_other: Vec<(&str, i64)> = all.iter().copied().step_by(2).collect();
        assert!(!metadata_fits(&every_other));
        let m = metadata("nov", &every_other);
        assert!(m.len() > MAX_METADATA_PAIRS, "what the service refuses");
        assert!(metadata_fits(&every_other[..40]));
    }

    /// Compact entries that do not read name no row: never a guess, never a panic.
    #[test]
    fn compact_references_that_do_not_read_name_no_row() {
        for text in [
            "AB|3,0,",
            "AB|1,2,",
            "AB|x,0,C",
            "AB|1,0",
            "1,0,A",
            "AB|1,0,C,D",
            "AB|99999999999999999999999,0,C",
            "AB|18446744073709551615,1,",
        ] {
            let mut m = BTreeMap::new();
            m.insert("paybatch_batch".to_string(), "nov".to_string());
            m.insert("paybatch_refs".to_string(), text.to_string());
            assert!(references_in_metadata(&m).is_empty(), "{text}");
            assert!(rows_in_metadata("nov", &m).is_none(), "{text}");
        }
        assert_eq!(
            references_of_compact("AB|1,0,C|1,1,"),
            Some(vec!["AB".into(), "AC".into(), "AC".into()])
        );
    }

    /// [`shared_ends`] as its definition says, one character at a time.
    fn shared_ends_slowly(previous: &str, reference: &str) -> (usize, usize) {
        let (a, b): (Vec<char>, Vec<char>) =
            (previous.chars().collect(), reference.chars().collect());
        let p = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let (a, b) = (&a[p..], &b[p..]);
        let s = a
            .iter()
            .rev()
            .zip(b.iter().rev())
            .take_while(|(x, y)| x == y)
            .count();
        (p, s)
    }

    proptest::proptest! {
        /// The shared ends of two references, eight bytes at a time for ASCII ones, are those
        /// of their definition.
        #[test]
        fn shared_ends_are_counted_as_defined(a in "[AB0-9é-]{0,40}", b in "[AB0-9é-]{0,40}") {
            proptest::prop_assert_eq!(shared_ends(&a, &b), shared_ends_slowly(&a, &b));
            let (a, b) = (a.replace('é', "e"), b.replace('é', "e"));
            proptest::prop_assert_eq!(shared_ends(&a, &b), shared_ends_slowly(&a, &b));
            let long = format!("{}{a}", "X".repeat(17));
            let other = format!("{}{b}", "X".repeat(17));
            proptest::prop_assert_eq!(shared_ends(&long, &other), shared_ends_slowly(&long, &other));
        }

        /// Any references a row may hold are read back from their compact form, and the fit
        /// counts exactly the characters written.
        #[test]
        fn compact_references_read_back(refs in proptest::collection::vec("[A-Za-zé0-9 ._:/#-]{1,12}", 1..40)) {
            let named: Vec<&str> = refs.iter().map(String::as_str).collect();
            let text = compact_references(&named);
            proptest::prop_assert_eq!(references_of_compact(&text), Some(refs.clone()));
            let mut fit = MetadataFit::default();
            for r in &named {
                fit.add(r, 1);
            }
            proptest::prop_assert_eq!(fit.rows_chars, text.chars().count());
            proptest::prop_assert!(text.chars().count() <= named.join("|").chars().count());
        }
    }

    #[test]
    fn attempts_are_written_short_and_read_back() {
        assert_eq!(attempts_text([1, 1, 1]), "1");
        assert_eq!(attempts_text([1, 1, 2, 1]), "1*2,2*1,1*1");
        assert_eq!(attempts_of("1", 3), Some(vec![1, 1, 1]));
        assert_eq!(attempts_of("1*2,2*1,1*1", 4), Some(vec![1, 1, 2, 1]));
        assert_eq!(attempts_of("1|2", 2), Some(vec![1, 2]));
        assert_eq!(attempts_of("1*2", 3), None);
        assert_eq!(attempts_of("1*999999999999", 3), None);
        // A run long enough to overflow an addition is refused, never a panic.
        assert_eq!(attempts_of("1*1,1*18446744073709551615", 2), None);
        assert_eq!(attempts_of("x", 1), None);
    }
}
