//! The HTML report of a batch: one self-contained page (inline CSS, inline SVG bars, no script,
//! no external asset, nothing fetched) for the finance lead who signs the batch off. First what
//! left each paying balance (conversions included) and the plan digest; then the rows per
//! currency and status, per product and per any column of the file, with bars scaled within
//! each currency; the rows that need attention with their own reasons; the technical details
//! (hashes, key fingerprint, ledger) last.
//!
//! Payout links are bearer instruments: they are never put on this page (the result CSV holds
//! them). Every value from the input file, the service or the ledger is HTML-escaped.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use rust_decimal::Decimal;

use crate::api::decimal::parse_decimal_text;
use crate::api::models::DistributionType;
use crate::batch::output::PrivateFile;
use crate::input::reader::{ColumnMap, canonical_column, normalize_header};
use crate::input::rules::{RowSpec, content_hash};
use crate::input::scan::{self, OrdersOutside, PlanDigest};
use crate::ledger::{BatchRecord, OrderLabel, RowRecord, RowState};
use crate::money::display_amount;

/// The row states the report shows, in the order of the chart and the tables (REMOVED rows are
/// not part of the batch any more, as in the result file).
const SHOWN: [RowState; 8] = [
    RowState::Completed,
    RowState::Submitted,
    RowState::Planned,
    RowState::Pending,
    RowState::Mismatch,
    RowState::Failed,
    RowState::Rejected,
    RowState::Invalid,
];

fn color(state: RowState) -> &'static str {
    match state {
        RowState::Completed => "#2e7d32",
        RowState::Submitted => "#1565c0",
        RowState::Planned => "#42a5f5",
        RowState::Pending => "#90caf9",
        RowState::Failed => "#c62828",
        RowState::Rejected => "#ef6c00",
        RowState::Invalid => "#757575",
        RowState::Removed => "#bdbdbd",
        RowState::Mismatch => "#6a1b9a",
        RowState::Skipped => "#a1887f",
    }
}

/// Escapes text for HTML element content and quoted attribute values: markup characters as
/// entities, control characters (line breaks and tabs aside) and bidirectional overrides in the
/// visible form the terminal shows (`\u{1b}`, `\u{202e}`), and what is or looks like an API key
/// hidden ([`crate::api::key::conceal`]).
pub fn escape(text: &str) -> String {
    let text = crate::api::key::conceal(text);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if crate::text::is_unsafe(c) && c != '\n' && c != '\t' => {
                out.extend(c.escape_default())
            }
            c => out.push(c),
        }
    }
    out
}

/// One row as the report shows it: what was asked and what happened, never the payout link.
#[derive(Debug, Clone, PartialEq)]
struct RowView {
    line: i64,
    reference: String,
    products: String,
    face_value: Option<Decimal>,
    face_text: String,
    currency: String,
    state: RowState,
    /// What the payout cost: known, and counted, only once the row COMPLETED (the items of a
    /// failed order can carry a price that nobody paid).
    price: Option<Decimal>,
    /// The row's own error, as the ledger recorded it for this row.
    reason: String,
}

fn parsed_spec(row: &RowRecord) -> Option<serde_json::Value> {
    row.spec
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
}

fn row_view(headers: &[String], row: &RowRecord) -> RowView {
    let spec = parsed_spec(row);
    let cell = |canonical: &str| -> String {
        headers
            .iter()
            .position(|h| canonical_column(h) == Some(canonical))
            .and_then(|i| row.fields.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let from_spec = |name: &str| -> Option<String> {
        spec.as_ref()
            .and_then(|s| s.get(name))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let products = spec
        .as_ref()
        .and_then(|s| s.get("product_codes"))
        .and_then(|v| v.as_array())
        .map(|codes| {
            codes
                .iter()
                .filter_map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join("|")
        })
        .unwrap_or_else(|| cell("product_code"));
    let face_text = from_spec("face_value").unwrap_or_else(|| cell("face_value"));
    let reason = match (&row.error_type, &row.error_message) {
        (Some(t), Some(m)) => format!("{t}: {m}"),
        (Some(t), None) => t.clone(),
        (None, Some(m)) => m.clone(),
        (None, None) => String::new(),
    };
    let price = (row.state == RowState::Completed)
        .then(|| row.price.as_deref().and_then(parse_decimal_text))
        .flatten();
    RowView {
        line: row.line,
        reference: row.reference.clone(),
        products,
        face_value: parse_decimal_text(&face_text),
        face_text,
        currency: from_spec("currency").unwrap_or_else(|| cell("currency")),
        state: row.state,
        price,
        reason,
    }
}

/// What the file asked for a row, rebuilt from the specification the ledger recorded, for
/// the plan digest. `None` for a row that was not valid (it has no specification).
fn recorded_spec(row: &RowRecord) -> Option<Result<RowSpec, String>> {
    let spec = parsed_spec(row);
    let spec = match (&row.spec, spec) {
        (None, _) => return None,
        (Some(_), None) => return Some(Err(format!("row {} has no readable record", row.line))),
        (Some(_), Some(s)) => s,
    };
    let text = |name: &str| spec.get(name).and_then(|v| v.as_str()).map(str::to_string);
    let unreadable = || format!("the record of row {} cannot be read", row.line);
    let face_value = text("face_value")
        .and_then(|f| f.parse::<Decimal>().ok())
        .ok_or_else(unreadable);
    let distribution = serde_json::from_value::<DistributionType>(
        spec.get("distribution").cloned().unwrap_or_default(),
    )
    .map_err(|_| unreadable());
    let codes = spec
        .get("product_codes")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect::<Vec<_>>()
        });
    Some((|| {
        Ok(RowSpec {
            line: u64::try_from(row.line).unwrap_or_default(),
            reference: row.reference.clone(),
            product_codes: codes.ok_or_else(unreadable)?,
            face_value: face_value?,
            currency: text("currency").ok_or_else(unreadable)?,
            distribution: distribution?,
            email: text("email"),
            payment_currency: text("payment_currency").ok_or_else(unreadable)?,
            country: text("country"),
            card_id: text("card_id"),
            fields: Vec::new(),
            columns: ColumnMap::default(),
        })
    })())
}

/// Rows and amounts of one line of a breakdown, all in one currency.
#[derive(Debug, Clone, Default, PartialEq)]
struct Total {
    rows: usize,
    face_value: Decimal,
    completed: usize,
    /// What the completed rows cost.
    price: Decimal,
}

impl Total {
    fn add(&mut self, v: &RowView) {
        self.rows += 1;
        self.face_value += v.face_value.unwrap_or_default();
        if v.state == RowState::Completed {
            self.completed += 1;
            self.price += v.price.unwrap_or_default();
        }
    }
}

/// What one paying balance (or card) was charged for the completed rows of one product
/// currency.
#[derive(Debug, Clone, Default, PartialEq)]
struct Charge {
    rows: usize,
    /// In the product's currency.
    face_value: Decimal,
    /// In the paying balance's currency.
    charged: Decimal,
}

/// A breakdown of the rows by the value of one column, per currency.
struct Breakdown {
    /// The column as the file names it (`None`: the products).
    column: Option<(String, usize)>,
    /// (currency, value) -> total.
    lines: BTreeMap<(String, String), Total>,
}

/// The plan digest, rebuilt row by row, or why it cannot be.
enum Digest {
    Building(PlanDigest),
    Unknown(String),
}

/// What the page says of a batch's rows, gathered one row at a time (a batch can hold a
/// million): counts and totals, and only the rows that need attention.
pub struct Tally {
    headers: Vec<String>,
    rows: usize,
    /// (payer, charged currency) -> product currency -> charge, for the completed rows.
    charged: BTreeMap<(String, String), BTreeMap<String, Charge>>,
    by_state: BTreeMap<String, BTreeMap<RowState, Total>>,
    breakdowns: Vec<Breakdown>,
    counts: BTreeMap<RowState, usize>,
    attention: Vec<RowView>,
    /// Completed rows whose order could not be confirmed as the one sent.
    unconfirmed: Vec<RowView>,
    digest: Digest,
    /// The batch's latest merge ([`Tally::latest_merge`]): rows of an earlier one are no longer
    /// in the file.
    latest_merge: Option<i64>,
    /// The orders of the rows no longer in the file, part of the plan digest.
    outside: BTreeSet<i64>,
    outside_digest: OrdersOutside,
}

/// How the page names what paid: a card, or the balance of a currency.
fn payer(order: Option<&OrderLabel>, currency: &str) -> String {
    match order.and_then(|o| o.card_id.as_deref()) {
        Some(card) => format!("card {card}"),
        None => format!("balance {currency}"),
    }
}

/// The index of `wanted` among `headers`: the same name, else the same once normalised.
fn column_index(headers: &[String], wanted: &str) -> Option<usize> {
    headers.iter().position(|h| h == wanted).or_else(|| {
        let n = normalize_header(wanted);
        headers.iter().position(|h| normalize_header(h) == n)
    })
}

impl Tally {
    /// An empty tally of `batch`, broken down per product.
    pub fn new(batch: &BatchRecord) -> Self {
        Tally {
            headers: batch.headers.clone(),
            rows: 0,
            charged: BTreeMap::new(),
            by_state: BTreeMap::new(),
            breakdowns: vec![Breakdown {
                column: None,
                lines: BTreeMap::new(),
            }],
            counts: BTreeMap::new(),
            attention: Vec::new(),
            unconfirmed: Vec::new(),
            digest: Digest::Building(PlanDigest::new(&batch.name, &batch.environment)),
            latest_merge: None,
            outside: BTreeSet::new(),
            outside_digest: OrdersOutside::default(),
        }
    }

    /// A person decided about rows other batches have (`note`: allowed or skipped, with
    /// which): the plan digest `validate` showed also covers them, and the rows alone cannot
    /// give it back; the page says so (and shows the decision) instead of another digest.
    pub fn repeats_decided(&mut self, note: &str) {
        self.digest = Digest::Unknown(format!(
            "this plan had rows other batches have ({note}); its digest covers that decision: paybatch validate shows it"
        ));
    }

    /// The number of the batch's latest merge ([`crate::ledger::Ledger::merges`]): the plan
    /// digest is then the one `validate` shows for the latest file, made of the rows it had and
    /// of the orders followed for the rows it no longer had ([`scan::plan_digest`]). Without it
    /// every row counts as in the file.
    pub fn latest_merge(&mut self, merges: i64) {
        self.latest_merge = Some(merges);
    }

    /// The orders holding rows counted so far that the latest file no longer had, in id order.
    pub fn orders_outside(&self) -> impl Iterator<Item = i64> + '_ {
        self.outside.iter().copied()
    }

    /// One of [`Tally::orders_outside`], by its key and exact body, for the plan digest.
    pub fn add_order_outside(&mut self, key: &str, body: &[u8]) {
        self.outside_digest.add(key, body);
    }

    /// Adds a breakdown per value of the input column `column`; refuses a column the file does
    /// not have, naming those it has.
    pub fn group_by(&mut self, column: &str) -> Result<(), String> {
        let Some(index) = column_index(&self.headers, column) else {
            return Err(format!(
                "the input file has no column `{column}`; its columns: {}",
                self.headers.join(", ")
            ));
        };
        self.breakdowns.push(Breakdown {
            column: Some((self.headers[index].clone(), index)),
            lines: BTreeMap::new(),
        });
        Ok(())
    }

    /// Counts one row of the batch, with the order that holds it (REMOVED rows are not part
    /// of the batch any more).
    pub fn add(&mut self, row: &RowRecord, order: Option<&OrderLabel>) {
        if row.state == RowState::Removed {
            return;
        }
        let v = row_view(&self.headers, row);
        self.rows += 1;
        self.add_charge(row, &v, order);
        if self.latest_merge.is_none_or(|m| row.merged == m) {
            self.add_to_digest(row);
        } else if let Some(order) = row.order_id {
            self.outside.insert(order);
        }
        *self.counts.entry(v.state).or_default() += 1;
        let currency = if v.currency.is_empty() {
            "?".to_string()
        } else {
            v.currency.clone()
        };
        let by_state = self.by_state.entry(currency.clone()).or_default();
        by_state.entry(v.state).or_default().add(&v);
        for b in &mut self.breakdowns {
            let value = match &b.column {
                None => v.products.clone(),
                Some((_, i)) => row.fields.get(*i).cloned().unwrap_or_default(),
            };
            let key = (currency.clone(), value);
            b.lines.entry(key).or_default().add(&v);
        }
        if matches!(
            v.state,
            RowState::Failed | RowState::Rejected | RowState::Invalid | RowState::Mismatch
        ) {
            self.attention.push(v);
        } else if v.state == RowState::Completed
            && row.error_type.as_deref() == Some(super::record::UNCONFIRMED_TYPE)
        {
            self.unconfirmed.push(v);
        }
    }

    fn add_charge(&mut self, row: &RowRecord, v: &RowView, order: Option<&OrderLabel>) {
        let debited = row.debited_amount.as_deref().and_then(parse_decimal_text);
        let (RowState::Completed, Some(amount), Some(currency)) =
            (row.state, debited, &row.debited_currency)
        else {
            return;
        };
        let c = self
            .charged
            .entry((payer(order, currency), currency.clone()))
            .or_default()
            .entry(v.currency.clone())
            .or_default();
        c.rows += 1;
        c.face_value += v.face_value.unwrap_or_default();
        c.charged += amount;
    }

    fn add_to_digest(&mut self, row: &RowRecord) {
        let Digest::Building(digest) = &mut self.digest else {
            return;
        };
        match recorded_spec(row) {
            None => {}
            Some(Ok(spec)) if content_hash(&spec) == row.content_hash => digest.row(&spec),
            Some(Ok(_)) => {
                self.digest = Digest::Unknown(format!(
                    "the record of row {} does not give its recorded hash",
                    row.line
                ))
            }
            Some(Err(why)) => self.digest = Digest::Unknown(why),
        }
    }
}

/// Renders the report page of `rows`. `generated_at` and `version` are printed as given.
pub fn render(
    batch: &BatchRecord,
    rows: &[RowRecord],
    ledger_path: &str,
    generated_at: &str,
    version: &str,
) -> String {
    let mut tally = Tally::new(batch);
    for row in rows {
        tally.add(row, None);
    }
    render_tally(batch, tally, ledger_path, generated_at, version)
}

/// Renders the report page of the rows counted in `tally`: first what a finance lead signs
/// off (what left each balance, the plan digest), then the breakdowns, the rows that need
/// attention, and the technical details last.
pub fn render_tally(
    batch: &BatchRecord,
    tally: Tally,
    ledger_path: &str,
    generated_at: &str,
    version: &str,
) -> String {
    let mut h = String::new();
    head(&mut h, batch);
    summary(&mut h, &tally);
    balances(&mut h, &tally.charged);
    let digest = match tally.digest {
        Digest::Building(d) => Ok(scan::plan_digest(d.finish(), tally.outside_digest)),
        Digest::Unknown(why) => Err(why),
    };
    sign_off(&mut h, batch, tally.rows, &digest);
    per_state(&mut h, &tally.by_state);
    for b in &tally.breakdowns {
        breakdown(&mut h, b);
    }
    attention(&mut h, &tally.attention);
    unconfirmed(&mut h, &tally.unconfirmed);
    technical(&mut h, batch, ledger_path, generated_at, version);
    let _ = writeln!(
        h,
        "<footer>Made by paybatch {} from its ledger. Payout links are deliberately not on this page: they are in the result file, which is readable by its owner only.</footer>",
        escape(version)
    );
    h.push_str("</body>\n</html>\n");
    h
}

fn head(h: &mut String, batch: &BatchRecord) {
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n",
    );
    let _ = writeln!(
        h,
        "<title>Payout report: batch {}</title>",
        escape(&batch.name)
    );
    h.push_str(STYLE);
    h.push_str("</head>\n<body>\n");
    match batch.environment.as_str() {
        "sim" => h.push_str(
            "<div class=\"banner sim\">SIMULATED &mdash; a rehearsal on the simulator: no real money moved</div>\n",
        ),
        "production" => h.push_str(
            "<div class=\"banner production\">PRODUCTION &mdash; real money</div>\n",
        ),
        "playground" => h.push_str(
            "<div class=\"banner playground\">PLAYGROUND &mdash; the service's test environment: no real money moved</div>\n",
        ),
        _ => {}
    }
    let _ = writeln!(
        h,
        "<h1>Payout report &mdash; batch <span class=\"name\">{}</span></h1>",
        escape(&batch.name)
    );
}

fn summary(h: &mut String, tally: &Tally) {
    let summary = SHOWN
        .iter()
        .filter_map(|s| tally.counts.get(s).map(|n| format!("{n} {}", s.as_str())))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        h,
        "<p class=\"summary\">{} rows: {}.</p>",
        tally.rows,
        escape(if summary.is_empty() { "none" } else { &summary })
    );
    let unfinished: usize = [RowState::Pending, RowState::Planned, RowState::Submitted]
        .iter()
        .filter_map(|s| tally.counts.get(s))
        .sum();
    if unfinished > 0 {
        let _ = writeln!(
            h,
            "<p class=\"note warn\">{unfinished} rows were not finished when this report was made: the batch is still running or was interrupted. Running the same <code>paybatch run</code> command again finishes it.</p>"
        );
    }
}

/// What left each paying balance, conversions included: what a finance lead signs off.
fn balances(h: &mut String, charged: &BTreeMap<(String, String), BTreeMap<String, Charge>>) {
    h.push_str("<h2>What left each balance</h2>\n");
    if charged.is_empty() {
        h.push_str("<p>Nothing was charged: no row completed.</p>\n");
        return;
    }
    h.push_str(
        "<table class=\"balances\">\n<thead><tr><th scope=\"col\">Paid by</th><th scope=\"col\">For</th><th scope=\"col\" class=\"num\">Rows</th><th scope=\"col\" class=\"num\">Face value</th><th scope=\"col\" class=\"num\">Charged</th></tr></thead>\n<tbody>\n",
    );
    for ((payer, currency), per_product) in charged {
        for (i, (product_currency, c)) in per_product.iter().enumerate() {
            let what = if product_currency == currency {
                format!("{product_currency} products")
            } else {
                format!("{product_currency} products, converted to {currency}")
            };
            let _ = writeln!(
                h,
                "<tr{}><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                if i == 0 { " class=\"first\"" } else { "" },
                escape(payer),
                escape(&what),
                c.rows,
                escape(&money(c.face_value, product_currency)),
                escape(&money(c.charged, currency))
            );
        }
        if per_product.len() > 1 {
            let total: Decimal = per_product.values().map(|c| c.charged).sum();
            let rows: usize = per_product.values().map(|c| c.rows).sum();
            let _ = writeln!(
                h,
                "<tr class=\"total\"><th scope=\"row\">{}</th><td>Total charged</td><td class=\"num\">{rows}</td><td></td><td class=\"num\">{}</td></tr>",
                escape(payer),
                escape(&money(total, currency))
            );
        }
    }
    h.push_str("</tbody>\n</table>\n");
    h.push_str("<p class=\"note\">What each paying balance (or card) was charged for the completed rows, conversions between currencies included: a product in another currency than the balance that paid it counts in the balance's currency. Amounts of different currencies are never added.</p>\n");
}

/// `75.00 CAD`.
fn money(amount: Decimal, currency: &str) -> String {
    format!("{} {currency}", display_amount(amount, currency))
}

fn sign_off(h: &mut String, batch: &BatchRecord, rows: usize, digest: &Result<String, String>) {
    h.push_str("<h2>Batch</h2>\n<table class=\"facts\">\n");
    let env_text = match batch.environment.as_str() {
        "sim" => "SIMULATED (embedded simulator)".to_string(),
        "production" => "PRODUCTION".to_string(),
        other => other.to_string(),
    };
    let digest_text = match digest {
        Ok(d) => d.clone(),
        Err(why) => format!("not known: {why}"),
    };
    for (k, v) in [
        ("Batch", batch.name.as_str()),
        ("Environment", env_text.as_str()),
        ("Created", batch.created_at.as_str()),
        ("Rows", &rows.to_string()),
        ("Plan digest", digest_text.as_str()),
    ] {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td>{}</td></tr>",
            escape(k),
            escape(v)
        );
    }
    h.push_str("</table>\n");
    h.push_str("<p class=\"note\">The plan digest covers exactly what this batch pays (its batch name, environment, the valid rows of its latest input file, and the orders already sent for rows that file no longer has): it is the digest <code>paybatch validate</code> shows for the same file, and <code>paybatch run --expect-digest</code> pays nothing else. Compare it with the digest that was approved.</p>\n");
}

/// A bar `value / max` long (an inline SVG: it prints in colour and needs nothing fetched).
fn bar(value: Decimal, max: Decimal, fill: &str) -> String {
    let width = ratio(value, max) * 100.0;
    format!(
        "<svg class=\"bar\" viewBox=\"0 0 100 10\" preserveAspectRatio=\"none\" aria-hidden=\"true\"><rect width=\"100\" height=\"10\" fill=\"#eceff1\"/><rect width=\"{width:.2}\" height=\"10\" fill=\"{fill}\"/></svg>"
    )
}

/// One line of an amounts table: its label (HTML), the bar's colour and its totals.
struct Line<'a> {
    currency: &'a str,
    label: String,
    fill: &'static str,
    total: &'a Total,
}

const BARS_NOTE: &str = "<p class=\"note\">Face value and price are in the currency of each row's product; price is what the completed rows cost (face value less discount). Each bar compares face values within one currency only: every currency has its own scale, and amounts of different currencies are never added.</p>\n";

/// A table of rows and amounts per currency, a bar per line scaled to the largest face value
/// of the same currency.
fn amounts_table(h: &mut String, first: &str, lines: &[Line<'_>]) {
    let mut max: BTreeMap<&str, Decimal> = BTreeMap::new();
    for l in lines {
        let m = max.entry(l.currency).or_default();
        *m = (*m).max(l.total.face_value);
    }
    let _ = writeln!(
        h,
        "<table class=\"amounts\">\n<thead><tr><th scope=\"col\">Currency</th><th scope=\"col\">{}</th><th scope=\"col\" class=\"num\">Rows</th><th scope=\"col\" class=\"num\">Face value</th><th scope=\"col\" class=\"barcell scale\">scaled within each currency</th><th scope=\"col\" class=\"num\">Completed</th><th scope=\"col\" class=\"num\">Price</th></tr></thead>\n<tbody>",
        escape(first)
    );
    let mut previous = None;
    for l in lines {
        let t = l.total;
        let price = if t.completed > 0 {
            display_amount(t.price, l.currency)
        } else {
            "&mdash;".to_string()
        };
        let first_of_currency = previous != Some(l.currency);
        previous = Some(l.currency);
        let _ = writeln!(
            h,
            "<tr{}><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"barcell\">{}</td><td class=\"num\">{}</td><td class=\"num\">{price}</td></tr>",
            if first_of_currency {
                " class=\"first\""
            } else {
                ""
            },
            escape(l.currency),
            l.label,
            t.rows,
            escape(&display_amount(t.face_value, l.currency)),
            bar(
                t.face_value,
                max.get(l.currency).copied().unwrap_or_default(),
                l.fill
            ),
            t.completed,
        );
    }
    h.push_str("</tbody>\n</table>\n");
}

fn per_state(h: &mut String, by_state: &BTreeMap<String, BTreeMap<RowState, Total>>) {
    h.push_str("<h2>Per currency and status</h2>\n");
    if by_state.is_empty() {
        h.push_str("<p>No rows.</p>\n");
        return;
    }
    let lines: Vec<Line<'_>> = by_state
        .iter()
        .flat_map(|(currency, states)| {
            SHOWN.iter().filter_map(move |s| {
                states.get(s).map(|total| Line {
                    currency,
                    label: format!(
                        "<span class=\"dot\" style=\"background:{}\"></span>{}",
                        color(*s),
                        s.as_str()
                    ),
                    fill: color(*s),
                    total,
                })
            })
        })
        .collect();
    amounts_table(h, "Status", &lines);
    h.push_str(BARS_NOTE);
}

fn breakdown(h: &mut String, b: &Breakdown) {
    let name = match &b.column {
        None => "Product".to_string(),
        Some((column, _)) => column.clone(),
    };
    let _ = writeln!(h, "<h2>Per {}</h2>", escape(&name.to_lowercase()));
    if b.lines.is_empty() {
        h.push_str("<p>No rows.</p>\n");
        return;
    }
    let lines: Vec<Line<'_>> = b
        .lines
        .iter()
        .map(|((currency, value), total)| Line {
            currency,
            label: if value.is_empty() {
                "<em>(empty)</em>".to_string()
            } else {
                escape(value)
            },
            fill: "#5c6bc0",
            total,
        })
        .collect();
    amounts_table(h, &name, &lines);
}

fn attention(h: &mut String, rows: &[RowView]) {
    h.push_str("<h2>Rows that need attention: mismatched, failed, rejected and invalid</h2>\n");
    if rows.is_empty() {
        h.push_str("<p>None.</p>\n");
        return;
    }
    h.push_str(
        "<table class=\"rows\">\n<thead><tr><th scope=\"col\" class=\"num\">Line</th><th scope=\"col\">Reference</th><th scope=\"col\">Product</th><th scope=\"col\" class=\"num\">Face value</th><th scope=\"col\">Currency</th><th scope=\"col\">Status</th><th scope=\"col\">Reason</th></tr></thead>\n<tbody>\n",
    );
    for v in rows {
        let _ = writeln!(
            h,
            "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"state\"><span class=\"dot\" style=\"background:{}\"></span>{}</td><td class=\"reason\">{}</td></tr>",
            v.line,
            escape(&v.reference),
            escape(&v.products),
            escape(&v.face_text),
            escape(&v.currency),
            color(v.state),
            v.state.as_str(),
            escape(&v.reason)
        );
    }
    h.push_str("</tbody>\n</table>\n");
    h.push_str("<p class=\"note\">These rows cost nothing: no price is shown for them. FAILED and REJECTED rows are paid again only after a person decides: fix the cause, then <code>paybatch retry --batch NAME</code> and run the batch again. INVALID rows were never submitted: fix them in the input file and run again. MISMATCH rows are never paid again by paybatch: compare them with the account's orders.</p>\n");
}

/// Paid rows whose order the service's answer did not name: shown only when there are some.
fn unconfirmed(h: &mut String, rows: &[RowView]) {
    if rows.is_empty() {
        return;
    }
    h.push_str("<h2>Paid rows not confirmed as the orders sent</h2>\n");
    h.push_str(
        "<table class=\"rows\">\n<thead><tr><th scope=\"col\" class=\"num\">Line</th><th scope=\"col\">Reference</th><th scope=\"col\">Product</th><th scope=\"col\" class=\"num\">Face value</th><th scope=\"col\">Currency</th><th scope=\"col\">Reason</th></tr></thead>\n<tbody>\n",
    );
    for v in rows {
        let _ = writeln!(
            h,
            "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"reason\">{}</td></tr>",
            v.line,
            escape(&v.reference),
            escape(&v.products),
            escape(&v.face_text),
            escape(&v.currency),
            escape(&v.reason)
        );
    }
    h.push_str("</tbody>\n</table>\n");
    h.push_str("<p class=\"note\">These rows are COMPLETED and counted as paid above, but the service's answer named neither their order's idempotency key nor their batch: compare them with the account's orders.</p>\n");
}

fn technical(
    h: &mut String,
    batch: &BatchRecord,
    ledger_path: &str,
    generated_at: &str,
    version: &str,
) {
    h.push_str("<h2>Technical details</h2>\n<table class=\"facts technical\">\n");
    for (k, v) in [
        ("Service", batch.base_url.as_str()),
        ("Input file", batch.input_path.as_str()),
        ("Input file SHA-256", batch.input_hash.as_str()),
        ("API key fingerprint", batch.key_fingerprint.as_str()),
        ("Ledger", ledger_path),
        ("Report generated", generated_at),
        ("paybatch version", version),
    ] {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td>{}</td></tr>",
            escape(k),
            escape(v)
        );
    }
    h.push_str("</table>\n");
}

fn ratio(part: Decimal, whole: Decimal) -> f64 {
    use rust_decimal::prelude::ToPrimitive;
    if whole <= Decimal::ZERO {
        return 0.0;
    }
    (part / whole).to_f64().unwrap_or(0.0).clamp(0.0, 1.0)
}

const STYLE: &str = r#"<style>
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: #1b1b1b; margin: 2rem auto; max-width: 60rem; padding: 0 1.5rem; line-height: 1.4; }
h1 { font-size: 1.6rem; margin: 0.6rem 0 0.2rem; }
h1 .name { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ccc; padding-bottom: 0.2rem; }
.banner { font-weight: 700; font-size: 1.2rem; padding: 0.7rem 1rem; border-radius: 4px; letter-spacing: 0.02em; }
.banner.sim { background: #fff3cd; border: 3px dashed #b8860b; color: #6b4e00; }
.banner.playground { background: #e3f2fd; border: 2px solid #1565c0; color: #0d3c73; }
.banner.production { background: #fdecea; border: 2px solid #c62828; color: #7f1515; }
.summary { font-size: 1.05rem; }
.note { color: #555; font-size: 0.9rem; }
table { border-collapse: collapse; width: 100%; margin: 0.5rem 0; font-size: 0.92rem; }
th, td { text-align: left; padding: 0.3rem 0.6rem; border-bottom: 1px solid #e0e0e0; vertical-align: top; }
thead th { border-bottom: 2px solid #999; }
table.facts th { width: 13rem; color: #444; font-weight: 600; }
table.facts td { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; word-break: break-all; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
td.reason { word-break: break-word; }
td.state { white-space: nowrap; }
.dot { display: inline-block; width: 0.7rem; height: 0.7rem; border-radius: 2px; margin-right: 0.4rem; vertical-align: baseline; }
svg.bar { display: block; width: 12rem; height: 0.8rem; }
td.barcell, th.barcell { width: 12.5rem; vertical-align: middle; }
tr.first td { border-top: 1px solid #999; }
tr.total th, tr.total td { font-weight: 700; border-bottom: 2px solid #999; }
table.balances td.num:last-child, table.balances tr.total td { white-space: nowrap; }
th.scale { color: #666; font-weight: 400; font-size: 0.8rem; }
.warn { color: #8a4b00; font-weight: 600; }
table.technical { font-size: 0.85rem; }
footer { margin-top: 2.5rem; color: #666; font-size: 0.85rem; border-top: 1px solid #ccc; padding-top: 0.5rem; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
@media print {
  body { margin: 0; max-width: none; font-size: 11pt; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
  h2 { break-after: avoid; }
  tr { break-inside: avoid; }
}
</style>
"#;

/// Writes `contents` to `path` atomically with mode 0600 (a [`PrivateFile`]).
pub fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    let file = PrivateFile::create(path)?;
    let mut out = file.file();
    out.write_all(contents)?;
    out.flush()?;
    file.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(escape("plain 10.50"), "plain 10.50");
    }

    #[test]
    fn control_characters_bidi_overrides_and_keys_are_shown_not_obeyed() {
        assert_eq!(
            escape("a\u{1b}]8;;http://evil\u{7}\u{9b}2J\u{202e}\u{2066}b"),
            "a\\u{1b}]8;;http://evil\\u{7}\\u{9b}2J\\u{202e}\\u{2066}b"
        );
        assert_eq!(escape("two\nlines\tx"), "two\nlines\tx");
        assert_eq!(
            escape("ref xx_abcdefghijklmnopq"),
            format!("ref {}", crate::api::key::CONCEALED)
        );
    }

    fn batch(environment: &str) -> BatchRecord {
        BatchRecord {
            id: 1,
            name: "nov<b>".into(),
            input_path: "/data/nov.csv".into(),
            input_hash: "ab".repeat(32),
            headers: vec![
                "reference".into(),
                "product_code".into(),
                "face_value".into(),
                "currency".into(),
            ],
            environment: environment.into(),
            base_url: "embedded-simulator".into(),
            key_fingerprint: "sha256:0123456789abcdef".into(),
            created_at: "2026-11-01T10:00:00.000Z".into(),
        }
    }

    fn row(reference: &str, state: RowState, url: Option<&str>, error: Option<&str>) -> RowRecord {
        RowRecord {
            id: 1,
            reference: reference.into(),
            position: 0,
            line: 2,
            fields: vec![
                reference.into(),
                "AMZ-US".into(),
                "25.00".into(),
                "USD".into(),
            ],
            spec: None,
            content_hash: String::new(),
            state,
            attempt: 1,
            order_id: None,
            item_index: None,
            item_id: None,
            payout_url: url.map(str::to_string),
            price: url.map(|_| "24.50".to_string()),
            discount: None,
            error_type: error.map(|_| "invalid".to_string()),
            error_message: error.map(str::to_string),
            completed_at: None,
            debited_amount: url.map(|_| "24.50".to_string()),
            debited_currency: url.map(|_| "USD".to_string()),
            merged: 1,
        }
    }

    #[test]
    fn the_page_is_self_contained_escaped_and_has_no_payout_link() {
        let rows = [
            row(
                "R-1",
                RowState::Completed,
                Some("https://playground.example/p/SECRET-1"),
                None,
            ),
            row(
                "R-2",
                RowState::Invalid,
                None,
                Some("`<img src=x onerror=alert(1)>` is not valid"),
            ),
        ];
        let page = render(&batch("sim"), &rows, "ledger.db", "now", "0.1.0");
        assert!(!page.contains("SECRET-1"));
        assert!(!page.contains("<img"));
        assert!(page.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(page.contains("nov&lt;b&gt;"));
        assert!(page.contains("SIMULATED"));
        assert!(!page.contains("<script"));
        for external in ["src=\"http", "href=\"http", "url(", "@import"] {
            assert!(!page.contains(external), "{external}");
        }
        assert!(page.contains("<svg"));
        assert!(page.contains("24.50"));
    }

    fn priced(reference: &str, product: &str, face: &str, currency: &str) -> RowRecord {
        let mut r = row(reference, RowState::Completed, Some("https://x/p/1"), None);
        r.fields = vec![
            reference.into(),
            product.into(),
            face.into(),
            currency.into(),
        ];
        r.price = Some(face.into());
        r.debited_amount = Some(face.into());
        r.debited_currency = Some(currency.into());
        r
    }

    #[test]
    fn bars_are_scaled_within_a_currency_and_currencies_are_never_added() {
        let rows = [
            priced("R-1", "VISA-US", "150.00", "USD"),
            priced("R-2", "AMZ-US", "50.00", "USD"),
            priced("R-3", "PAYPAL-CA", "75.00", "CAD"),
        ];
        let page = render(&batch("sim"), &rows, "l.db", "now", "0.1.0");
        let products = &page[page.find("<h2>Per product</h2>").expect("breakdown")..];
        let width = |product: &str| -> String {
            let line = &products[products.find(product).expect(product)..];
            let marker = "fill=\"#eceff1\"/><rect width=\"";
            let at = line.find(marker).expect("a bar") + marker.len();
            line[at..at + line[at..].find('"').expect("end")].to_string()
        };
        assert_eq!(width("VISA-US"), "100.00");
        assert_eq!(width("AMZ-US"), "33.33");
        assert_eq!(width("PAYPAL-CA"), "100.00", "CAD has its own scale");
        assert!(page.contains("every currency has its own scale"));
        assert!(!page.contains("275"), "75 CAD and 200 USD are never added");
    }

    #[test]
    fn a_row_that_did_not_complete_has_no_price() {
        let mut failed = row("R-9", RowState::Failed, None, Some("the order failed"));
        failed.price = Some("98.76".into());
        let page = render(&batch("sim"), &[failed], "l.db", "now", "0.1.0");
        assert!(!page.contains("98.76"), "{page}");
        assert!(page.contains("invalid: the order failed"), "{page}");
    }

    #[test]
    fn production_is_labelled_and_simulated_is_not_claimed() {
        let page = render(&batch("production"), &[], "l.db", "now", "0.1.0");
        assert!(page.contains("PRODUCTION"));
        assert!(!page.contains("SIMULATED"));
    }
}
