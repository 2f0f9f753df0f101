//! The plan a person approved (`paybatch validate` shows its digest), as the ledger keeps it
//! ([`crate::ledger::approved`]), and what changed since: when `paybatch run --expect-digest`
//! refuses a file whose digest differs, it says which rows were added, removed and changed
//! (field by field), and which other parts of the digest differ (the batch, the orders followed
//! for rows no longer in the file, the repeats and the decision on them).
//!
//! A plan's rows are kept column by column (reference, line, then each payable field), each
//! column one deflate stream of length-prefixed values: the columns of few values (products,
//! currencies, amounts) shrink to almost nothing, and a plan is written as the file is read,
//! in memory the size of its compressed columns.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use serde::{Deserialize, Serialize};

use crate::batch::repeats::Repeats;
use crate::input::rules::{RowSpec, show};
use crate::ledger::approved::ApprovedPlan;
use crate::ledger::attempts::LaterAttempt;

/// The payable fields of a row, named as the CSV names their columns.
pub const FIELDS: [&str; 8] = [
    "product_code",
    "face_value",
    "currency",
    "distribution",
    "email",
    "payment_currency",
    "country",
    "card_id",
];

/// Whether a changed field is said with its values (the recipient's address and the card
/// are named only).
const QUOTED: [bool; 8] = [true, true, true, true, false, true, true, false];

/// Rows named in each list of differences; the others are counted.
pub const NAMED: usize = 10;

/// The first bytes of a kept plan's rows (its version).
const TAG: &[u8] = b"paybatch-plan-rows-v1\n";

/// Reference, line, then the fields.
const COLUMNS: usize = 2 + FIELDS.len();

/// The payable fields of a valid row, in the order of [`FIELDS`], each length-prefixed.
fn encoded_fields(spec: &RowSpec, out: &mut Vec<u8>) {
    out.clear();
    let codes = spec.product_codes.join("|");
    let face_value = spec.face_value.to_string();
    let values: [&str; 8] = [
        &codes,
        &face_value,
        &spec.currency,
        spec.distribution.as_str(),
        spec.email.as_deref().unwrap_or(""),
        &spec.payment_currency,
        spec.country.as_deref().unwrap_or(""),
        spec.card_id.as_deref().unwrap_or(""),
    ];
    for v in values {
        put_value(out, v.as_bytes());
    }
}

fn put_varint(out: &mut impl Extend<u8>, mut n: u64) {
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.extend([low]);
            return;
        }
        out.extend([low | 0x80]);
    }
}

fn put_value(out: &mut Vec<u8>, value: &[u8]) {
    put_varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

/// The rows of a plan, written as the file is read ([`PlanRows::add`] for each valid row, in
/// file order), kept compressed. Each column's values are gathered in a buffer and handed to
/// its compressor `CHUNK` bytes at a time (a call to the compressor per value costs more than
/// compressing it).
pub struct PlanRows {
    rows: u64,
    pending: Vec<Vec<u8>>,
    columns: Vec<DeflateEncoder<Vec<u8>>>,
    scratch: Vec<u8>,
    failed: Option<std::io::Error>,
}

/// How many bytes of a column are handed to its compressor at once.
const CHUNK: usize = 64 * 1024;

impl Default for PlanRows {
    fn default() -> Self {
        PlanRows {
            rows: 0,
            pending: (0..COLUMNS).map(|_| Vec::with_capacity(CHUNK)).collect(),
            columns: (0..COLUMNS)
                .map(|_| DeflateEncoder::new(Vec::new(), Compression::fast()))
                .collect(),
            scratch: Vec::new(),
            failed: None,
        }
    }
}

impl PlanRows {
    pub fn add(&mut self, spec: &RowSpec) {
        self.rows += 1;
        put_value(&mut self.pending[0], spec.reference.as_bytes());
        put_varint(&mut self.pending[1], spec.line);
        let mut fields = std::mem::take(&mut self.scratch);
        encoded_fields(spec, &mut fields);
        let mut rest = fields.as_slice();
        for column in 2..COLUMNS {
            let Some((value, after)) = split_value(rest) else {
                break;
            };
            put_value(&mut self.pending[column], value);
            rest = after;
        }
        self.scratch = fields;
        for column in 0..COLUMNS {
            if self.pending[column].len() >= CHUNK {
                self.compress(column);
            }
        }
    }

    /// Hands a column's gathered values to its compressor.
    fn compress(&mut self, column: usize) {
        if let Err(e) = self.columns[column].write_all(&self.pending[column])
            && self.failed.is_none()
        {
            self.failed = Some(e);
        }
        self.pending[column].clear();
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The plan's rows as the ledger keeps them.
    pub fn finish(mut self) -> std::io::Result<Vec<u8>> {
        for column in 0..COLUMNS {
            self.compress(column);
        }
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut out = TAG.to_vec();
        put_varint(&mut out, self.rows);
        for column in self.columns {
            let bytes = column.finish()?;
            put_varint(&mut out, bytes.len() as u64);
            out.extend_from_slice(&bytes);
        }
        Ok(out)
    }
}

/// The first length-prefixed value of `bytes`, and what follows it.
fn split_value(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = split_varint(bytes)?;
    let len = usize::try_from(len).ok()?;
    (rest.len() >= len).then(|| rest.split_at(len))
}

fn split_varint(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let mut n = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        n |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((n, &bytes[i + 1..]));
        }
    }
    None
}

fn read_varint(r: &mut impl BufRead) -> std::io::Result<u64> {
    let mut n = 0u64;
    for i in 0..10 {
        let mut b = [0u8];
        r.read_exact(&mut b)?;
        n |= u64::from(b[0] & 0x7f) << (7 * i);
        if b[0] & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(std::io::Error::other("a number too long"))
}

fn read_value(r: &mut impl BufRead, into: &mut Vec<u8>) -> std::io::Result<()> {
    let len = read_varint(r)?;
    into.clear();
    r.take(len).read_to_end(into)?;
    if into.len() as u64 != len {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// A row of a kept plan: its reference, line and encoded fields (`encoded_fields`).
pub struct KeptRow {
    pub reference: String,
    pub line: u64,
    fields: Vec<u8>,
}

/// Reads a kept plan's rows, in file order; why it cannot, when the kept bytes are not a plan.
pub fn read_rows(kept: &[u8], mut each: impl FnMut(KeptRow)) -> Result<(), String> {
    let damaged = |what: &str| format!("the kept plan is damaged ({what})");
    let rest = kept
        .strip_prefix(TAG)
        .ok_or_else(|| damaged("unknown version"))?;
    let (rows, mut rest) = split_varint(rest).ok_or_else(|| damaged("no row count"))?;
    let mut columns = Vec::with_capacity(COLUMNS);
    for _ in 0..COLUMNS {
        let (column, after) = split_value(rest).ok_or_else(|| damaged("a column cut short"))?;
        columns.push(BufReader::new(DeflateDecoder::new(column)));
        rest = after;
    }
    let io = |e: std::io::Error| damaged(&e.to_string());
    let mut value = Vec::new();
    for _ in 0..rows {
        read_value(&mut columns[0], &mut value).map_err(io)?;
        let reference = String::from_utf8_lossy(&value).into_owned();
        let line = read_varint(&mut columns[1]).map_err(io)?;
        let mut fields = Vec::new();
        for column in &mut columns[2..] {
            read_value(column, &mut value).map_err(io)?;
            put_value(&mut fields, &value);
        }
        each(KeptRow {
            reference,
            line,
            fields,
        });
    }
    Ok(())
}

/// What the plan digest covers besides the rows, as kept with an approved plan: the file's own
/// digest (its rows), the orders followed for rows no longer in the file, and the repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanContext {
    /// The digest of the file's valid rows ([`crate::input::scan::PlanDigest`]).
    pub rows_digest: String,
    /// Orders followed for rows the file does not have: key and SHA-256 of the body, sorted.
    pub followed: Vec<(String, String)>,
    /// The repeats of other batches and the decision on them.
    pub repeats: RepeatsKept,
    /// The rows of the file at a later attempt than their first (retried or reissued), with
    /// what each pays. Plans kept before the digest covered attempts have none.
    #[serde(default)]
    pub attempts: Vec<LaterAttempt>,
}

/// What the digest covers of the repeats ([`Repeats::fold_into`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatsKept {
    /// The decision, in the words of its flag (none: the run refuses them).
    pub decision: Option<String>,
    pub rows: usize,
    /// Other batches made of the same file.
    pub files: usize,
    /// What they add to the digest ([`Repeats::fold_into`] of nothing), empty without any.
    pub digest: String,
}

impl RepeatsKept {
    pub fn of(r: &Repeats) -> Self {
        if !r.any() {
            return RepeatsKept::default();
        }
        RepeatsKept {
            decision: r.decision.flag().map(str::to_string),
            rows: r.rows.len(),
            files: r.files.len(),
            digest: r.fold_into(""),
        }
    }
}

/// A list of differences: how many, and the first [`NAMED`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed<T> {
    pub count: usize,
    pub first: Vec<T>,
}

impl<T> Default for Listed<T> {
    fn default() -> Self {
        Listed {
            count: 0,
            first: Vec::new(),
        }
    }
}

impl<T> Listed<T> {
    fn push(&mut self, item: impl FnOnce() -> T) {
        self.count += 1;
        if self.first.len() < NAMED {
            self.first.push(item());
        }
    }
}

/// A row of the approved plan, held while the file is compared with it.
struct Approved {
    position: usize,
    line: u64,
    fields: Box<[u8]>,
}

/// The rows of the file against those of an approved plan: fed each valid row of the file in
/// order ([`RowComparison::see`]), then [`RowComparison::finish`].
pub struct RowComparison {
    approved: HashMap<String, Approved>,
    /// The approved position of the last row of the file found in the plan.
    last: Option<usize>,
    reordered: bool,
    scratch: Vec<u8>,
    differences: RowDifferences,
}

/// How the file's rows differ from the approved plan's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowDifferences {
    /// Rows the plan did not have: reference and line.
    pub added: Listed<(String, u64)>,
    /// Rows of the plan the file no longer has: reference and the line it was on.
    pub removed: Listed<(String, u64)>,
    /// Rows whose payable fields changed: reference, line, and each field changed in words.
    pub changed: Listed<(String, u64, Vec<String>)>,
    /// The same rows in another order (the digest follows the file's order).
    pub reordered: bool,
}

impl RowComparison {
    pub fn new(kept: &[u8]) -> Result<Self, String> {
        let mut approved = HashMap::new();
        read_rows(kept, |row| {
            let position = approved.len();
            approved.insert(
                row.reference,
                Approved {
                    position,
                    line: row.line,
                    fields: row.fields.into_boxed_slice(),
                },
            );
        })?;
        Ok(RowComparison {
            approved,
            last: None,
            reordered: false,
            scratch: Vec::new(),
            differences: RowDifferences::default(),
        })
    }

    pub fn see(&mut self, spec: &RowSpec) {
        let Some(was) = self.approved.remove(&spec.reference) else {
            self.differences
                .added
                .push(|| (spec.reference.clone(), spec.line));
            return;
        };
        if self.last.is_some_and(|last| was.position < last) {
            self.reordered = true;
        }
        self.last = Some(was.position);
        encoded_fields(spec, &mut self.scratch);
        if *self.scratch != *was.fields {
            let now = &self.scratch;
            self.differences.changed.push(|| {
                (
                    spec.reference.clone(),
                    spec.line,
                    changed_fields(&was.fields, now),
                )
            });
        }
    }

    pub fn finish(mut self) -> RowDifferences {
        let mut removed: Vec<(String, Approved)> = self.approved.into_iter().collect();
        removed.sort_by_key(|(_, a)| a.position);
        for (reference, a) in removed {
            self.differences.removed.push(|| (reference, a.line));
        }
        self.differences.reordered = self.reordered;
        self.differences
    }
}

/// The fields that differ between two rows' encoded fields, in words: `face_value 25.00 ->
/// 250.00`, or the name alone for a field not quoted ([`QUOTED`]).
fn changed_fields(was: &[u8], now: &[u8]) -> Vec<String> {
    let (mut was, mut now) = (was, now);
    let mut out = Vec::new();
    for (i, name) in FIELDS.iter().enumerate() {
        let (Some((a, was_rest)), Some((b, now_rest))) = (split_value(was), split_value(now))
        else {
            break;
        };
        if a != b {
            let text = |v: &[u8]| match std::str::from_utf8(v) {
                Ok("") => "(empty)".to_string(),
                Ok(s) => show(s),
                Err(_) => "(unreadable)".to_string(),
            };
            out.push(if QUOTED[i] {
                format!("{name} {} -> {}", text(a), text(b))
            } else {
                (*name).to_string()
            });
        }
        was = was_rest;
        now = now_rest;
    }
    out
}

/// What the run is checking against the approved plan: its batch and environment, and what
/// the digest covers besides the rows.
pub struct Now<'a> {
    pub batch: &'a str,
    pub environment: &'a str,
    pub context: &'a PlanContext,
}

/// What changed since `plan` was approved, one line each (indented lines list rows): the batch
/// or environment, the rows (`rows`: `None` when the rows are the ones approved), the orders
/// followed for rows no longer in the file, the repeats.
pub fn what_changed(
    plan: &ApprovedPlan,
    kept: &PlanContext,
    now: &Now<'_>,
    rows: Option<&RowDifferences>,
) -> Vec<String> {
    let mut out = vec![format!(
        "what changed since that plan was approved ({}, `paybatch validate` of {}, {} valid rows):",
        plan.approved_at,
        show(&plan.input_path),
        plan.rows
    )];
    let elsewhere = plan.batch != now.batch || plan.environment != now.environment;
    if elsewhere {
        out.push(format!(
            "  it was approved for batch {} in environment {}; this run is batch {} in environment {}",
            show(&plan.batch),
            show(&plan.environment),
            show(now.batch),
            show(now.environment)
        ));
    }
    if let Some(rows) = rows {
        row_lines(rows, elsewhere, &mut out);
    }
    followed_lines(&kept.followed, &now.context.followed, &mut out);
    out.extend(attempts_added(&kept.attempts, &now.context.attempts));
    repeats_lines(&kept.repeats, &now.context.repeats, &mut out);
    if out.len() == 1 {
        out.push(
            "  nothing this ledger can name (the digest covers the same rows, orders and repeats)"
                .into(),
        );
    }
    out
}

/// The rows added, removed and changed; `elsewhere`: the plan was approved for another batch or
/// environment (which alone makes the rows' digest differ).
fn row_lines(rows: &RowDifferences, elsewhere: bool, out: &mut Vec<String>) {
    let more = |listed_count: usize, named: usize, out: &mut Vec<String>| {
        if listed_count > named {
            out.push(format!("    and {} more", listed_count - named));
        }
    };
    if rows.added.count > 0 {
        out.push(format!("  {} added:", crate::text::rows(rows.added.count)));
        for (reference, line) in &rows.added.first {
            out.push(format!("    `{}` (line {line})", show(reference)));
        }
        more(rows.added.count, rows.added.first.len(), out);
    }
    if rows.removed.count > 0 {
        out.push(format!(
            "  {} removed:",
            crate::text::rows(rows.removed.count)
        ));
        for (reference, line) in &rows.removed.first {
            out.push(format!("    `{}` (was line {line})", show(reference)));
        }
        more(rows.removed.count, rows.removed.first.len(), out);
    }
    if rows.changed.count > 0 {
        out.push(format!(
            "  {} changed:",
            crate::text::rows(rows.changed.count)
        ));
        for (reference, line, fields) in &rows.changed.first {
            out.push(format!(
                "    `{}` (line {line}): {}",
                show(reference),
                fields.join(", ")
            ));
        }
        more(rows.changed.count, rows.changed.first.len(), out);
    }
    let none = rows.added.count + rows.removed.count + rows.changed.count == 0;
    if rows.reordered && none {
        out.push("  the same rows, in another order".into());
    } else if rows.reordered {
        out.push("  and rows are in another order".into());
    } else if none && !elsewhere {
        out.push("  the rows' digest differs, yet no row differs by reference and fields".into());
    }
}

/// The rows made payable again since the plan was approved (at a later attempt now than then),
/// reissued then retried, each with what it pays per currency: `  210 reissued rows: CAD
/// 956.25, EUR 3,698.50 (...)`.
pub fn attempts_added(was: &[LaterAttempt], now: &[LaterAttempt]) -> Vec<String> {
    let before: HashMap<&str, i64> = was
        .iter()
        .map(|a| (a.reference.as_str(), a.attempt))
        .collect();
    let added: Vec<&LaterAttempt> = now
        .iter()
        .filter(|a| {
            before
                .get(a.reference.as_str())
                .is_none_or(|&then| a.attempt > then)
        })
        .collect();
    let mut out = Vec::new();
    for (reissued, word, how) in [
        (
            true,
            "reissued",
            "their payout link expired: `paybatch retry --expired`",
        ),
        (
            false,
            "retried",
            "they failed or were refused: `paybatch retry`",
        ),
    ] {
        let rows: Vec<&&LaterAttempt> = added.iter().filter(|a| a.reissued == reissued).collect();
        if rows.is_empty() {
            continue;
        }
        let mut totals: std::collections::BTreeMap<&str, rust_decimal::Decimal> =
            std::collections::BTreeMap::new();
        for a in &rows {
            let (Some(currency), Some(value)) = (&a.currency, a.face_value) else {
                continue;
            };
            *totals.entry(currency.as_str()).or_default() += value;
        }
        let totals: Vec<String> = totals
            .iter()
            .map(|(currency, value)| {
                format!(
                    "{} {}",
                    show(currency),
                    crate::money::human_amount(*value, currency)
                )
            })
            .collect();
        let count = rows.len();
        out.push(format!(
            "  {count} {word} {}: {} (made payable again since, at their next attempt: {how})",
            if count == 1 { "row" } else { "rows" },
            totals.join(", ")
        ));
    }
    out
}

fn followed_lines(was: &[(String, String)], now: &[(String, String)], out: &mut Vec<String>) {
    let new = now.iter().filter(|o| !was.contains(o)).count();
    let gone = was.iter().filter(|o| !now.contains(o)).count();
    if new > 0 {
        out.push(format!(
            "  {new} {} already sent for rows the file no longer has {} followed now, which the approved plan did not have (`paybatch status` shows them)",
            if new == 1 { "order" } else { "orders" },
            if new == 1 { "is" } else { "are" }
        ));
    }
    if gone > 0 {
        out.push(format!(
            "  {gone} {} the approved plan followed for rows no longer in its file {} not followed now (the file has those rows again)",
            if gone == 1 { "order" } else { "orders" },
            if gone == 1 { "is" } else { "are" }
        ));
    }
}

fn repeats_lines(was: &RepeatsKept, now: &RepeatsKept, out: &mut Vec<String>) {
    if was.digest == now.digest {
        return;
    }
    let decision = |d: &Option<String>| d.clone().unwrap_or_else(|| "no decision".to_string());
    let count = |r: &RepeatsKept| {
        format!(
            "{} other batches have{}",
            crate::text::rows(r.rows),
            if r.files > 0 {
                ", the file itself made into another batch"
            } else {
                ""
            }
        )
    };
    if was.rows != now.rows || was.files != now.files {
        out.push(format!(
            "  repeats: when approved, {}; now {}",
            count(was),
            count(now)
        ));
    } else if was.decision != now.decision {
        out.push(format!(
            "  the decision on repeats: approved with {}, this run has {}",
            decision(&was.decision),
            decision(&now.decision)
        ));
    } else {
        out.push(format!(
            "  repeats: as many as approved ({}), but not the same rows or batches",
            count(now)
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::rules::{CatalogIndex, ValidateOptions};
    use crate::input::scan;

    /// The valid rows of `text` as the file's reading gives them.
    fn specs(text: &str) -> Vec<RowSpec> {
        let f = tempfile::NamedTempFile::new().expect("temp file");
        std::fs::write(f.path(), text).expect("write");
        let catalog = CatalogIndex::new(crate::sim::catalog::Catalog::new().products().to_vec());
        let mut out = Vec::new();
        scan::scan(
            f.path(),
            &Default::default(),
            &catalog,
            &ValidateOptions::default(),
            None,
            |s| out.push(s.clone()),
        )
        .expect("scan");
        out
    }

    const HEADER: &str = "reference,product_code,face_value,currency,email,country\n";

    fn kept(text: &str) -> Vec<u8> {
        let mut plan = PlanRows::default();
        for s in specs(text) {
            plan.add(&s);
        }
        assert_eq!(plan.rows() as usize, specs(text).len());
        plan.finish().expect("finish")
    }

    fn compare(approved: &str, now: &str) -> RowDifferences {
        let mut c = RowComparison::new(&kept(approved)).expect("kept plan");
        for s in specs(now) {
            c.see(&s);
        }
        c.finish()
    }

    #[test]
    fn a_kept_plan_reads_back_row_by_row() {
        let text = format!("{HEADER}A,AMZ-US,10,USD,a@example.com,US\nB,AMZ-US,25.50,USD,,\n");
        let mut rows = Vec::new();
        read_rows(&kept(&text), |r| rows.push(r)).expect("read");
        let got: Vec<(&str, u64)> = rows
            .iter()
            .map(|r| (r.reference.as_str(), r.line))
            .collect();
        assert_eq!(got, [("A", 2), ("B", 3)]);
        let mut encoded = Vec::new();
        for (row, spec) in rows.iter().zip(specs(&text)) {
            encoded_fields(&spec, &mut encoded);
            assert_eq!(row.fields, encoded);
        }
        assert!(read_rows(b"not a plan", |_| {}).is_err());
        let mut cut = kept(&text);
        cut.truncate(cut.len() - 3);
        assert!(read_rows(&cut, |_| {}).is_err());
    }

    #[test]
    fn rows_compare_by_reference_and_field() {
        let approved = format!(
            "{HEADER}A,AMZ-US,10,USD,a@example.com,US\nB,AMZ-US,10,USD,b@example.com,\nC,AMZ-US,10,USD,,\n"
        );
        assert_eq!(compare(&approved, &approved), RowDifferences::default());
        let now = format!(
            "{HEADER}A,AMZ-US,10,USD,x@example.com,\nC,AMZ-US,10.00,USD,,\nD,AMZ-US,10,USD,,\n"
        );
        let d = compare(&approved, &now);
        assert_eq!(d.added.first, [("D".to_string(), 4)]);
        assert_eq!(d.removed.first, [("B".to_string(), 3)]);
        assert_eq!(
            d.changed.first,
            [
                (
                    "A".to_string(),
                    2,
                    vec!["email".to_string(), "country US -> (empty)".to_string()]
                ),
                (
                    "C".to_string(),
                    3,
                    vec!["face_value 10 -> 10.00".to_string()]
                ),
            ]
        );
        assert!(!d.reordered);
        // The same rows in another order.
        let swapped = format!(
            "{HEADER}B,AMZ-US,10,USD,b@example.com,\nA,AMZ-US,10,USD,a@example.com,US\nC,AMZ-US,10,USD,,\n"
        );
        let d = compare(&approved, &swapped);
        assert!(d.reordered);
        assert_eq!(d.added.count + d.removed.count + d.changed.count, 0);
    }

    #[test]
    fn the_other_parts_of_the_digest_are_said_in_words() {
        let plan = ApprovedPlan {
            digest: String::new(),
            batch: "nov".into(),
            environment: "sim".into(),
            input_path: "nov.csv".into(),
            input_hash: String::new(),
            approved_at: "2026-11-26T10:00:00.000Z".into(),
            rows: 3,
            context: String::new(),
            plan: Vec::new(),
        };
        let order = |k: &str| (k.to_string(), "body".to_string());
        let was = PlanContext {
            rows_digest: "r".into(),
            followed: vec![order("k1"), order("k2")],
            repeats: RepeatsKept::default(),
            attempts: Vec::new(),
        };
        let now_context = PlanContext {
            followed: vec![order("k2"), order("k3"), order("k4")],
            repeats: RepeatsKept {
                decision: Some("--skip-repeats".into()),
                rows: 2,
                files: 0,
                digest: "x".into(),
            },
            ..was.clone()
        };
        let now = Now {
            batch: "nov",
            environment: "sim",
            context: &now_context,
        };
        let lines = what_changed(&plan, &was, &now, None);
        assert_eq!(
            lines[1..],
            [
                "  2 orders already sent for rows the file no longer has are followed now, which the approved plan did not have (`paybatch status` shows them)",
                "  1 order the approved plan followed for rows no longer in its file is not followed now (the file has those rows again)",
                "  repeats: when approved, 0 rows other batches have; now 2 rows other batches have",
            ]
        );
        let same = Now {
            context: &was,
            ..now
        };
        let later =
            |reference: &str, attempt, reissued, currency: &str, value: &str| LaterAttempt {
                reference: reference.into(),
                attempt,
                reissued,
                currency: Some(currency.into()),
                face_value: value.parse().ok(),
            };
        let retried = PlanContext {
            attempts: vec![
                later("A", 2, true, "CAD", "956.25"),
                later("B", 3, false, "USD", "10"),
                later("C", 2, true, "EUR", "1698.50"),
                later("D", 2, true, "EUR", "2000"),
                later("E", 2, false, "USD", "14.50"),
            ],
            ..was.clone()
        };
        let kept_then = PlanContext {
            attempts: vec![
                later("B", 2, false, "USD", "10"),
                later("E", 2, false, "USD", "14.50"),
            ],
            ..was.clone()
        };
        let after = Now {
            context: &retried,
            ..now
        };
        assert_eq!(
            what_changed(&plan, &kept_then, &after, None)[1..],
            [
                "  3 reissued rows: CAD 956.25, EUR 3,698.50 (made payable again since, at their next attempt: their payout link expired: `paybatch retry --expired`)",
                "  1 retried row: USD 10.00 (made payable again since, at their next attempt: they failed or were refused: `paybatch retry`)",
            ]
        );
        assert_eq!(
            what_changed(&plan, &was, &same, None)[1..],
            [
                "  nothing this ledger can name (the digest covers the same rows, orders and repeats)"
            ]
        );
    }
}
