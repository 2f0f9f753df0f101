//! The HTML report of a batch: one self-contained page (inline CSS, inline SVG bars, no script,
//! no external asset, nothing fetched) for the finance lead who signs the batch off. First what
//! left each paying balance (conversions included) and the plan digest; then the rows per
//! currency and status, per product and per any column of the file, with bars scaled within
//! each currency; the rows that need attention with their own reasons; the technical details
//! (hashes, key fingerprint, ledger) last.
//!
//! The page is the template `page.html`, filled with plain data made here from a [`Tally`]. The
//! markup is in the template only; every value put in it goes through [`escape`], the engine's
//! one formatter, so a value cannot add markup whatever it holds.
//!
//! Payout links are bearer instruments: they are never put on this page (the result CSV holds
//! them).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{Environment, Output, State, UndefinedBehavior, Value};
use rust_decimal::Decimal;
use serde::Serialize;

use crate::batch::output::PrivateFile;
use crate::input::scan;
use crate::ledger::approvals::{Approval, NO_APPROVAL};
use crate::ledger::{BatchRecord, RowState};
use crate::money::display_amount;

use super::costs::CostLine;
use super::tally::{Breakdown, Charge, Digest, ReportRow, SHOWN, Tally, Total, color};

/// The template of the page, compiled into the program.
const TEMPLATE: &str = include_str!("page.html");
const TEMPLATE_NAME: &str = "page.html";

/// The template of a period's page ([`super::period`]).
pub(super) const PERIOD_TEMPLATE: &str = "period.html";

/// The templates the pages include (the style, the balances and costs tables), and the period's
/// page.
const PARTS: [(&str, &str); 5] = [
    ("style.html", include_str!("style.html")),
    ("balances.html", include_str!("balances.html")),
    ("costs.html", include_str!("costs.html")),
    ("unclaimed.html", include_str!("unclaimed.html")),
    (PERIOD_TEMPLATE, include_str!("period.html")),
];

/// Why the page could not be made: a defect of the template, never of the batch's data (values
/// are data to the engine, never template text).
#[derive(Debug, thiserror::Error)]
#[error("the report page could not be made: {0}")]
pub struct PageError(#[from] minijinja::Error);

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

/// The engine's formatter: every `{{ value }}` of the template is written through [`escape`],
/// a value marked safe included (the page has no markup made outside the template).
fn escape_formatter(
    out: &mut Output<'_>,
    _state: &mut State<'_, '_>,
    value: &Value,
) -> Result<(), minijinja::Error> {
    out.write_str(&escape(&value.to_string()))
        .map_err(minijinja::Error::from)
}

/// The engine as the page uses it: the template's line breaks around `{% %}` tags dropped (the
/// page reads as the template does), a name the template uses but the data lacks an error,
/// and [`escape`] for every value.
pub(super) fn engine() -> Result<Environment<'static>, PageError> {
    let mut env = Environment::new();
    env.set_syntax(
        SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()?,
    );
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_formatter(escape_formatter);
    // Amounts are for people on the page: thousands grouped (`99,999,925.00 USD`).
    env.add_filter("grouped", |text: String| crate::money::grouped_text(&text));
    // The engine's own escaping filters know nothing of keys or control characters, and `safe`
    // would let a value bypass `escape`: the template has no use for them.
    for filter in ["escape", "e", "safe"] {
        env.remove_filter(filter);
    }
    env.add_template(TEMPLATE_NAME, TEMPLATE)?;
    for (name, template) in PARTS {
        env.add_template(name, template)?;
    }
    Ok(env)
}

/// The page's data: what the template shows, in the template's order.
#[derive(Serialize)]
struct Page<'a> {
    name: &'a str,
    environment: &'a str,
    rows: usize,
    summary: String,
    unfinished: usize,
    balances: Vec<Balance>,
    costs: Vec<CostTable>,
    facts: Vec<Fact<'a>>,
    tables: Vec<Table>,
    claims: Vec<ClaimsTable>,
    reissued: Vec<ReissuedLine>,
    reissued_more: usize,
    attention: Vec<RowLine>,
    attention_more: usize,
    unconfirmed: Vec<RowLine>,
    unconfirmed_more: usize,
    technical: Vec<Fact<'a>>,
    version: &'a str,
}

/// A line of a table of facts: a name and its value.
#[derive(Serialize)]
struct Fact<'a> {
    name: &'a str,
    value: String,
}

/// What the paid rows cost per product, or per value of a column: face value, price and
/// discount in the product's currency, charged in the paying balance's, and the effective rate
/// of a conversion.
#[derive(Serialize)]
pub(super) struct CostTable {
    /// What follows "per" in the heading.
    pub(super) heading: String,
    /// The name of the first column.
    pub(super) column: String,
    pub(super) lines: Vec<CostLine>,
}

/// The costs tables of a tally: per product, then per `--group-by` column.
pub(super) fn cost_tables(tally: &Tally) -> Vec<CostTable> {
    tally
        .costs()
        .map(|(column, costs)| {
            let (heading, column) = match column {
                None => ("product".to_string(), "Product".to_string()),
                Some(name) => (name.to_lowercase(), name.to_string()),
            };
            CostTable {
                heading,
                column,
                lines: costs.shown(),
            }
        })
        .collect()
}

/// What one payer (a card, or the balance of a currency) was charged, per product currency.
#[derive(Serialize)]
pub(super) struct Balance {
    payer: String,
    lines: Vec<BalanceLine>,
    /// Shown when the payer paid for products of more than one currency.
    total: Option<BalanceTotal>,
}

#[derive(Serialize)]
pub(super) struct BalanceLine {
    what: String,
    rows: usize,
    face_value: String,
    charged: String,
}

#[derive(Serialize)]
pub(super) struct BalanceTotal {
    rows: usize,
    charged: String,
}

/// A table of rows and amounts per currency: the one per state, then one per breakdown.
#[derive(Serialize)]
struct Table {
    /// What follows "Per" in the heading.
    heading: String,
    /// The name of the second column.
    column: String,
    lines: Vec<AmountLine>,
    /// The note on bars and prices follows the first table.
    bars_note: bool,
}

/// One line of an amounts table, with its bar.
#[derive(Serialize)]
struct AmountLine {
    first_of_currency: bool,
    currency: String,
    /// The row state the line counts (shown with its colour), or `None` for a breakdown line.
    state: Option<&'static str>,
    /// The value of a breakdown line (empty: shown as such).
    value: String,
    rows: usize,
    face_value: String,
    /// The bar's length, in percent of the largest face value of the same currency.
    bar_width: String,
    fill: &'static str,
    completed: usize,
    /// What the completed rows cost; `None` when none completed.
    price: Option<String>,
}

/// The life of the paid rows' links, per product or per value of a column.
#[derive(Serialize)]
struct ClaimsTable {
    heading: String,
    column: String,
    lines: Vec<ClaimsLine>,
}

#[derive(Serialize)]
struct ClaimsLine {
    first_of_currency: bool,
    currency: String,
    value: String,
    paid: usize,
    claimed: usize,
    active: usize,
    cancelled: usize,
    expired: usize,
    unknown: usize,
    /// Claimed rows in percent of the paid ones.
    claimed_share: String,
    outstanding: String,
    expired_value: String,
}

/// A row reissued after its link expired: both attempts, linked.
#[derive(Serialize)]
struct ReissuedLine {
    line: i64,
    reference: String,
    earlier: String,
    expired_at: String,
    now: String,
    state: &'static str,
}

/// A row that needs attention, or a paid row not confirmed.
#[derive(Serialize)]
struct RowLine {
    line: i64,
    reference: String,
    products: String,
    face_value: String,
    currency: String,
    state: &'static str,
    fill: &'static str,
    reason: String,
}

/// The colour of the bars of a breakdown per column.
const BREAKDOWN_FILL: &str = "#5c6bc0";

/// Renders the report page of the rows counted in `tally`: first what a finance lead signs
/// off (what left each balance, the plan digest), then the breakdowns, the rows that need
/// attention, and the technical details last. `generated_at` and `version` are printed as
/// given.
pub fn render_tally(
    batch: &BatchRecord,
    tally: Tally,
    ledger_path: &str,
    generated_at: &str,
    version: &str,
) -> Result<String, PageError> {
    let claims = claims_tables(&tally);
    let costs = cost_tables(&tally);
    let digest = match tally.digest {
        Digest::Building(d) => Ok(scan::fold_attempts(
            scan::plan_digest(d.finish(), tally.outside_digest),
            tally.attempts.iter().map(|(r, a)| (r.as_str(), *a)),
        )),
        Digest::Unknown(why) => Err(why),
    };
    let mut tables = vec![per_state(&tally.by_state)];
    tables.extend(tally.breakdowns.iter().map(breakdown));
    let page = Page {
        name: &batch.name,
        environment: &batch.environment,
        rows: tally.rows,
        summary: summary(&tally.counts),
        unfinished: [RowState::Pending, RowState::Planned, RowState::Submitted]
            .iter()
            .filter_map(|s| tally.counts.get(s))
            .sum(),
        balances: balances(&tally.charged),
        costs,
        facts: facts(batch, tally.rows, &digest, &tally.approvals),
        claims,
        reissued_more: tally.reissued.more,
        reissued: tally
            .reissued
            .rows
            .iter()
            .map(|r| ReissuedLine {
                line: r.line,
                reference: r.reference.clone(),
                earlier: format!("attempt {}: {}", r.earlier_attempt, r.earlier_order),
                expired_at: r.expired_at.clone(),
                now: if r.order.is_empty() {
                    format!("attempt {}", r.attempt)
                } else {
                    format!("attempt {}: {}", r.attempt, r.order)
                },
                state: r.state.as_str(),
            })
            .collect(),
        tables,
        attention: tally.attention.rows.iter().map(row_line).collect(),
        attention_more: tally.attention.more,
        unconfirmed: tally.unconfirmed.rows.iter().map(row_line).collect(),
        unconfirmed_more: tally.unconfirmed.more,
        technical: technical(batch, ledger_path, generated_at, version),
        version,
    };
    let env = engine()?;
    let page = env
        .get_template(TEMPLATE_NAME)?
        .render(Value::from(Serde(&page)))?;
    Ok(page)
}

/// The claims tables: per product, then per `--group-by` column; none when no row was paid.
fn claims_tables(tally: &Tally) -> Vec<ClaimsTable> {
    if tally.claims.iter().all(|c| c.is_empty()) {
        return Vec::new();
    }
    tally
        .breakdowns
        .iter()
        .zip(&tally.claims)
        .map(|(b, claims)| {
            let (heading, column) = match &b.column {
                None => ("product".to_string(), "Product".to_string()),
                Some((name, _)) => (name.to_lowercase(), name.clone()),
            };
            let mut last_currency: Option<&str> = None;
            let lines = claims
                .iter()
                .map(|((currency, value), c)| {
                    let first = last_currency != Some(currency.as_str());
                    last_currency = Some(currency.as_str());
                    let share = (c.claimed * 100 + c.paid / 2)
                        .checked_div(c.paid)
                        .unwrap_or(0)
                        .to_string();
                    ClaimsLine {
                        first_of_currency: first,
                        currency: currency.clone(),
                        value: value.clone(),
                        paid: c.paid,
                        claimed: c.claimed,
                        active: c.active,
                        cancelled: c.cancelled,
                        expired: c.expired,
                        unknown: c.unknown,
                        claimed_share: share,
                        outstanding: money(c.outstanding, currency),
                        expired_value: money(c.expired_value, currency),
                    }
                })
                .collect();
            ClaimsTable {
                heading,
                column,
                lines,
            }
        })
        .collect()
}

/// `3 COMPLETED, 1 INVALID`, or `none`.
fn summary(counts: &BTreeMap<RowState, usize>) -> String {
    let summary = SHOWN
        .iter()
        .filter_map(|s| counts.get(s).map(|n| format!("{n} {}", s.as_str())))
        .collect::<Vec<_>>()
        .join(", ");
    if summary.is_empty() {
        "none".to_string()
    } else {
        summary
    }
}

/// What left each paying balance, conversions included: what a finance lead signs off.
pub(super) fn balances(
    charged: &BTreeMap<(String, String), BTreeMap<String, Charge>>,
) -> Vec<Balance> {
    charged
        .iter()
        .map(|((payer, currency), per_product)| Balance {
            payer: payer.clone(),
            lines: per_product
                .iter()
                .map(|(product_currency, c)| BalanceLine {
                    what: if product_currency == currency {
                        format!("{product_currency} products")
                    } else {
                        format!("{product_currency} products, converted to {currency}")
                    },
                    rows: c.rows,
                    face_value: money(c.face_value, product_currency),
                    charged: money(c.charged, currency),
                })
                .collect(),
            total: (per_product.len() > 1).then(|| BalanceTotal {
                rows: per_product.values().map(|c| c.rows).sum(),
                charged: money(per_product.values().map(|c| c.charged).sum(), currency),
            }),
        })
        .collect()
}

/// `75.00 CAD`.
fn money(amount: Decimal, currency: &str) -> String {
    format!("{} {currency}", display_amount(amount, currency))
}

/// Approvals named one by one on the page (the earlier ones are counted).
const LISTED_APPROVALS: usize = 10;

/// The facts of the batch a finance lead compares with what was approved: beside the plan
/// digest, the runs held to an approved one (digest, when, user@host who ran it, run, and who
/// approved it with `paybatch approve`), or that none was.
fn facts<'a>(
    batch: &'a BatchRecord,
    rows: usize,
    digest: &Result<String, String>,
    approvals: &[Approval],
) -> Vec<Fact<'a>> {
    let environment = match batch.environment.as_str() {
        "sim" => "SIMULATED (embedded simulator)".to_string(),
        "production" => "PRODUCTION".to_string(),
        other => other.to_string(),
    };
    let digest = match digest {
        Ok(d) => d.clone(),
        Err(why) => format!("not known: {why}"),
    };
    let mut facts = vec![
        fact("Batch", &batch.name),
        fact("Environment", &environment),
        fact("Created", &batch.created_at),
        fact("Rows", &rows.to_string()),
        fact("Plan digest", &digest),
    ];
    if approvals.is_empty() {
        facts.push(fact("Approval", NO_APPROVAL));
    }
    let earlier = approvals.len().saturating_sub(LISTED_APPROVALS);
    if earlier > 0 {
        facts.push(fact("Approved", &format!("{earlier} earlier runs")));
    }
    for a in &approvals[earlier..] {
        let approved = format!(
            "{} at {} by {} (run {}); {}",
            scan::short_digest(&a.digest),
            a.approved_at,
            a.by(),
            a.run,
            a.approvers()
        );
        facts.push(fact("Approved", &approved));
    }
    facts
}

fn fact<'a>(name: &'a str, value: &str) -> Fact<'a> {
    Fact {
        name,
        value: value.to_string(),
    }
}

fn technical<'a>(
    batch: &'a BatchRecord,
    ledger_path: &str,
    generated_at: &str,
    version: &str,
) -> Vec<Fact<'a>> {
    vec![
        fact("Service", &batch.base_url),
        fact("Input file", &batch.input_path),
        fact("Input file SHA-256", &batch.input_hash),
        fact("API key fingerprint", &batch.key_fingerprint),
        fact("Ledger", ledger_path),
        fact("Report generated", generated_at),
        fact("paybatch version", version),
    ]
}

/// The table per currency and status.
fn per_state(by_state: &BTreeMap<String, BTreeMap<RowState, Total>>) -> Table {
    let lines: Vec<(&str, Option<RowState>, &str, &Total)> = by_state
        .iter()
        .flat_map(|(currency, states)| {
            SHOWN.iter().filter_map(move |s| {
                states
                    .get(s)
                    .map(|total| (currency.as_str(), Some(*s), "", total))
            })
        })
        .collect();
    Table {
        heading: "currency and status".to_string(),
        column: "Status".to_string(),
        lines: amount_lines(&lines),
        bars_note: true,
    }
}

/// The table per value of one column (the products when it names none).
fn breakdown(b: &Breakdown) -> Table {
    let name = match &b.column {
        None => "Product".to_string(),
        Some((column, _)) => column.clone(),
    };
    let lines: Vec<(&str, Option<RowState>, &str, &Total)> = b
        .lines
        .iter()
        .map(|((currency, value), total)| (currency.as_str(), None, value.as_str(), total))
        .collect();
    Table {
        heading: name.to_lowercase(),
        column: name,
        lines: amount_lines(&lines),
        bars_note: false,
    }
}

/// The lines of an amounts table, `(currency, state, value, total)` each, a bar per line scaled
/// to the largest face value of the same currency.
fn amount_lines(lines: &[(&str, Option<RowState>, &str, &Total)]) -> Vec<AmountLine> {
    let mut max: BTreeMap<&str, Decimal> = BTreeMap::new();
    for (currency, _, _, total) in lines {
        let m = max.entry(currency).or_default();
        *m = (*m).max(total.face_value);
    }
    let mut previous = None;
    lines
        .iter()
        .map(|&(currency, state, value, t)| {
            let first_of_currency = previous != Some(currency);
            previous = Some(currency);
            let width = ratio(t.face_value, max.get(currency).copied().unwrap_or_default());
            AmountLine {
                first_of_currency,
                currency: currency.to_string(),
                state: state.map(|s| s.as_str()),
                value: value.to_string(),
                rows: t.rows,
                face_value: display_amount(t.face_value, currency),
                bar_width: format!("{:.2}", width * 100.0),
                fill: state.map_or(BREAKDOWN_FILL, color),
                completed: t.completed,
                price: (t.completed > 0).then(|| display_amount(t.price, currency)),
            }
        })
        .collect()
}

fn row_line(v: &ReportRow) -> RowLine {
    RowLine {
        line: v.line,
        reference: v.reference.clone(),
        products: v.products.clone(),
        face_value: v.face_text.clone(),
        currency: v.currency.clone(),
        state: v.state.as_str(),
        fill: color(v.state),
        reason: v.reason.clone(),
    }
}

/// How long a bar is, from 0 to 1 (only drawn, never a figure of the page).
fn ratio(part: Decimal, whole: Decimal) -> f64 {
    use rust_decimal::prelude::ToPrimitive;
    if whole <= Decimal::ZERO {
        return 0.0;
    }
    (part / whole).to_f64().unwrap_or(0.0).clamp(0.0, 1.0)
}

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
    use crate::ledger::RowRecord;

    /// The page of `rows`, counted one by one as `report` counts a batch's rows.
    fn render(
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
        render_tally(batch, tally, ledger_path, generated_at, version).expect("the page renders")
    }

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
            input_format: None,
            result_format: None,
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
            price: url.map(|_| rust_decimal::Decimal::new(2450, 2)),
            discount: None,
            error_type: error.map(|_| "invalid".to_string()),
            error_message: error.map(str::to_string),
            completed_at: None,
            debited_amount: url.map(|_| rust_decimal::Decimal::new(2450, 2)),
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
        r.price = Some(face.parse().expect("a decimal"));
        r.debited_amount = r.price;
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
        failed.price = Some(rust_decimal::Decimal::new(9876, 2));
        let page = render(&batch("sim"), &[failed], "l.db", "now", "0.1.0");
        assert!(!page.contains("98.76"), "{page}");
        assert!(page.contains("invalid: the order failed"), "{page}");
    }

    #[test]
    fn a_batch_of_many_failed_rows_lists_a_thousand_and_says_how_many_more() {
        let rows: Vec<RowRecord> = (0..super::super::tally::LISTED_ROWS + 5)
            .map(|i| row(&format!("R-{i}"), RowState::Failed, None, Some("refused")))
            .collect();
        let page = render(&batch("sim"), &rows, "l.db", "now", "0.1.0");
        assert!(page.contains("And 5 more: the result file has every row."));
        assert_eq!(page.matches("invalid: refused").count(), 1000);
    }

    #[test]
    fn production_is_labelled_and_simulated_is_not_claimed() {
        let page = render(&batch("production"), &[], "l.db", "now", "0.1.0");
        assert!(page.contains("PRODUCTION"));
        assert!(!page.contains("SIMULATED"));
    }

    #[test]
    fn every_value_on_the_page_goes_through_the_report_escape() {
        let hostile = "<x>\u{1b}[2J\u{202e} xx_abcdefghijklmnopq";
        let mut b = batch("sim");
        b.name = format!("n{hostile}");
        b.base_url = format!("u{hostile}");
        b.input_path = format!("p{hostile}");
        b.key_fingerprint = format!("f{hostile}");
        b.headers.push(format!("team{hostile}"));
        let fields = |r: &str| {
            vec![
                r.to_string(),
                format!("P{hostile}"),
                "25.00".into(),
                format!("C{hostile}"),
                format!("t{hostile}"),
            ]
        };
        let mut invalid = row(
            &format!("R1{hostile}"),
            RowState::Invalid,
            None,
            Some(hostile),
        );
        invalid.fields = fields(&invalid.reference);
        let mut paid = row(
            &format!("R2{hostile}"),
            RowState::Completed,
            Some("https://x/p/1"),
            None,
        );
        paid.fields = fields(&paid.reference);
        paid.debited_currency = Some(format!("D{hostile}"));
        paid.error_type = Some(crate::batch::record::UNCONFIRMED_TYPE.into());
        paid.error_message = Some(format!("m{hostile}"));
        let mut tally = Tally::new(&b);
        tally.group_by(&b.headers[4]).expect("the column");
        tally.add(&invalid, None);
        tally.add(&paid, None);
        let page = render_tally(
            &b,
            tally,
            &format!("l{hostile}"),
            &format!("g{hostile}"),
            &format!("v{hostile}"),
        )
        .expect("the page renders");
        assert!(!page.contains("<x>"), "{page}");
        assert!(
            !page.contains('\u{1b}') && !page.contains('\u{202e}'),
            "{page}"
        );
        assert!(!page.contains("xx_abcdefghijklmnopq"), "{page}");
        let shown = format!(
            "&lt;x&gt;\\u{{1b}}[2J\\u{{202e}} {}",
            crate::api::key::CONCEALED
        );
        // Batch name (title, heading, facts), service, input file, key fingerprint, ledger,
        // time, version (facts, footer), references, products, currencies, the column and
        // its values, reasons, the paying balance.
        assert!(page.matches(shown.as_str()).count() >= 20, "{page}");
    }
}
