//! The HTML report of a batch: one self-contained page (inline CSS, an inline SVG chart, no
//! script, no external asset, nothing fetched) that a finance lead can open or print: the batch's
//! facts, its totals per currency and status, and the rows that need attention with their
//! reasons.
//!
//! Payout links are bearer instruments: they are never put on this page (the result CSV holds
//! them). Every value from the input file, the service or the ledger is HTML-escaped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

use rust_decimal::Decimal;

use crate::batch::output::PrivateFile;
use crate::input::reader::canonical_column;
use crate::ledger::{BatchRecord, RowRecord, RowState};
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
    }
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
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
    price: Option<Decimal>,
    reason: String,
}

fn row_view(headers: &[String], row: &RowRecord) -> RowView {
    let spec: Option<serde_json::Value> = row
        .spec
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok());
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
    RowView {
        line: row.line,
        reference: row.reference.clone(),
        products,
        face_value: crate::api::decimal::parse_decimal_text(&face_text),
        face_text,
        currency: from_spec("currency").unwrap_or_else(|| cell("currency")),
        state: row.state,
        price: row
            .price
            .as_deref()
            .and_then(crate::api::decimal::parse_decimal_text),
        reason,
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Total {
    rows: usize,
    face_value: Decimal,
    price: Decimal,
}

/// What the page says of a batch's rows, gathered one row at a time (a batch can hold a
/// million): counts and totals, and only the rows that need attention.
#[derive(Debug, Default)]
pub struct Tally {
    rows: usize,
    /// What left each balance for the completed rows: charged currency -> (rows, amount).
    charged: BTreeMap<String, (usize, Decimal)>,
    totals: BTreeMap<String, BTreeMap<RowState, Total>>,
    counts: BTreeMap<RowState, usize>,
    attention: Vec<RowView>,
}

impl Tally {
    /// Counts one row of the batch (REMOVED rows are not part of it any more).
    pub fn add(&mut self, headers: &[String], row: &RowRecord) {
        if row.state == RowState::Removed {
            return;
        }
        let v = row_view(headers, row);
        self.rows += 1;
        if row.state == RowState::Completed
            && let (Some(amount), Some(currency)) = (
                row.debited_amount
                    .as_deref()
                    .and_then(crate::api::decimal::parse_decimal_text),
                &row.debited_currency,
            )
        {
            let c = self.charged.entry(currency.clone()).or_default();
            c.0 += 1;
            c.1 += amount;
        }
        *self.counts.entry(v.state).or_default() += 1;
        let currency = if v.currency.is_empty() {
            "?".to_string()
        } else {
            v.currency.clone()
        };
        let t = self
            .totals
            .entry(currency)
            .or_default()
            .entry(v.state)
            .or_default();
        t.rows += 1;
        t.face_value += v.face_value.unwrap_or_default();
        t.price += v.price.unwrap_or_default();
        if matches!(
            v.state,
            RowState::Failed | RowState::Rejected | RowState::Invalid | RowState::Mismatch
        ) {
            self.attention.push(v);
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
    let mut tally = Tally::default();
    for row in rows {
        tally.add(&batch.headers, row);
    }
    render_tally(batch, &tally, ledger_path, generated_at, version)
}

/// Renders the report page of the rows counted in `tally`.
pub fn render_tally(
    batch: &BatchRecord,
    tally: &Tally,
    ledger_path: &str,
    generated_at: &str,
    version: &str,
) -> String {
    let Tally {
        rows,
        charged,
        totals,
        counts,
        attention,
    } = tally;

    let mut h = String::new();
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
    let summary = SHOWN
        .iter()
        .filter_map(|s| counts.get(s).map(|n| format!("{n} {}", s.as_str())))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        h,
        "<p class=\"summary\">{} rows: {}.</p>",
        rows,
        escape(if summary.is_empty() { "none" } else { &summary })
    );
    let unfinished: usize = [RowState::Pending, RowState::Planned, RowState::Submitted]
        .iter()
        .filter_map(|s| counts.get(s))
        .sum();
    if unfinished > 0 {
        let _ = writeln!(
            h,
            "<p class=\"note\">{unfinished} rows were not finished when this report was made: the batch is still running or was interrupted. Running the same <code>paybatch run</code> command again finishes it.</p>"
        );
    }

    // What left each balance, first: what a finance lead signs off.
    h.push_str("<h2>What left each balance</h2>\n");
    if charged.is_empty() {
        h.push_str("<p>Nothing was charged: no row completed.</p>\n");
    } else {
        h.push_str(
            "<table class=\"totals\">\n<thead><tr><th scope=\"col\">Balance</th><th scope=\"col\" class=\"num\">Completed rows</th><th scope=\"col\" class=\"num\">Charged</th></tr></thead>\n<tbody>\n",
        );
        for (currency, (n, amount)) in charged {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"num\">{n}</td><td class=\"num\">{}</td></tr>",
                escape(currency),
                escape(&display_amount(*amount, currency))
            );
        }
        h.push_str("</tbody>\n</table>\n");
        h.push_str("<p class=\"note\">What each paying balance was charged for the completed rows, conversions between currencies included (a row paid from another currency's balance counts in that balance's currency).</p>\n");
    }

    // Facts.
    h.push_str("<h2>Batch</h2>\n<table class=\"facts\">\n");
    let env_text = match batch.environment.as_str() {
        "sim" => "SIMULATED (embedded simulator)".to_string(),
        "production" => "PRODUCTION".to_string(),
        other => other.to_string(),
    };
    for (k, v) in [
        ("Batch", batch.name.as_str()),
        ("Environment", env_text.as_str()),
        ("Service", batch.base_url.as_str()),
        ("Input file", batch.input_path.as_str()),
        ("Input file SHA-256", batch.input_hash.as_str()),
        ("Created", batch.created_at.as_str()),
        ("API key fingerprint", batch.key_fingerprint.as_str()),
        ("Ledger", ledger_path),
        ("Report generated", generated_at),
    ] {
        let _ = writeln!(
            h,
            "<tr><th scope=\"row\">{}</th><td>{}</td></tr>",
            escape(k),
            escape(v)
        );
    }
    h.push_str("</table>\n");

    // Totals: chart and table.
    h.push_str("<h2>Totals per currency and status</h2>\n");
    if totals.is_empty() {
        h.push_str("<p>No rows.</p>\n");
    } else {
        h.push_str(&chart(totals));
        h.push_str(
            "<table class=\"totals\">\n<thead><tr><th scope=\"col\">Currency</th><th scope=\"col\">Status</th><th scope=\"col\" class=\"num\">Rows</th><th scope=\"col\" class=\"num\">Face value</th><th scope=\"col\" class=\"num\">Price</th></tr></thead>\n<tbody>\n",
        );
        for (currency, by_state) in totals {
            for state in SHOWN {
                let Some(t) = by_state.get(&state) else {
                    continue;
                };
                let price = if state == RowState::Completed || !t.price.is_zero() {
                    display_amount(t.price, currency)
                } else {
                    "&mdash;".to_string()
                };
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td class=\"state\"><span class=\"dot\" style=\"background:{}\"></span>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                    escape(currency),
                    color(state),
                    state.as_str(),
                    t.rows,
                    display_amount(t.face_value, currency),
                    price
                );
            }
        }
        h.push_str("</tbody>\n</table>\n");
        h.push_str("<p class=\"note\">Face value and price are in the currency of each row's product. Price is what the payout cost (face value less discount); it is known once a row completed.</p>\n");
    }

    // Rows that need attention.
    h.push_str("<h2>Rows that need attention: mismatched, failed, rejected and invalid</h2>\n");
    if attention.is_empty() {
        h.push_str("<p>None.</p>\n");
    } else {
        h.push_str(
            "<table class=\"rows\">\n<thead><tr><th scope=\"col\" class=\"num\">Line</th><th scope=\"col\">Reference</th><th scope=\"col\">Product</th><th scope=\"col\" class=\"num\">Face value</th><th scope=\"col\">Currency</th><th scope=\"col\">Status</th><th scope=\"col\">Reason</th></tr></thead>\n<tbody>\n",
        );
        for v in attention {
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
        h.push_str("<p class=\"note\">FAILED and REJECTED rows are paid again only after a person decides: fix the cause, then <code>paybatch retry --batch NAME</code> and run the batch again. INVALID rows were never submitted: fix them in the input file and run again.</p>\n");
    }

    let _ = writeln!(
        h,
        "<footer>Made by paybatch {} from its ledger. Payout links are deliberately not on this page: they are in the result file, which is readable by its owner only.</footer>",
        escape(version)
    );
    h.push_str("</body>\n</html>\n");
    h
}

/// One horizontal bar per currency, split by status in proportion to face value (row counts
/// when no face value is known), with the total and a legend. Text labels keep it readable in
/// black and white.
fn chart(totals: &BTreeMap<String, BTreeMap<RowState, Total>>) -> String {
    const LABEL: f64 = 70.0;
    const BAR: f64 = 520.0;
    const ROW: f64 = 44.0;
    const TOP: f64 = 10.0;
    let present: Vec<RowState> = SHOWN
        .iter()
        .copied()
        .filter(|s| totals.values().any(|m| m.contains_key(s)))
        .collect();
    let height = TOP + ROW * totals.len() as f64 + 34.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg class=\"chart\" viewBox=\"0 0 800 {height}\" width=\"800\" height=\"{height}\" role=\"img\" aria-label=\"Face value per currency, split by row status\">"
    );
    for (i, (currency, by_state)) in totals.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let face_total: Decimal = by_state.values().map(|t| t.face_value).sum();
        let rows_total: usize = by_state.values().map(|t| t.rows).sum();
        let weight = |t: &Total| -> f64 {
            if face_total > Decimal::ZERO {
                ratio(t.face_value, face_total)
            } else if rows_total > 0 {
                t.rows as f64 / rows_total as f64
            } else {
                0.0
            }
        };
        let _ = writeln!(
            s,
            "<text x=\"0\" y=\"{}\" class=\"cur\">{}</text>",
            y + 21.0,
            escape(currency)
        );
        let mut x = LABEL;
        for state in SHOWN {
            let Some(t) = by_state.get(&state) else {
                continue;
            };
            let w = (weight(t) * BAR).max(0.0);
            if w <= 0.0 {
                continue;
            }
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"28\" fill=\"{}\"><title>{} {}: {}, face value {}</title></rect>",
                color(state),
                escape(currency),
                state.as_str(),
                rows_text(t.rows),
                escape(&display_amount(t.face_value, currency))
            );
            if w >= 28.0 {
                let _ = writeln!(
                    s,
                    "<text x=\"{:.1}\" y=\"{}\" class=\"in\">{}</text>",
                    x + 5.0,
                    y + 19.0,
                    t.rows
                );
            }
            x += w;
        }
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" class=\"tot\">{} {} ({})</text>",
            LABEL + BAR + 8.0,
            y + 19.0,
            escape(&display_amount(face_total, currency)),
            escape(currency),
            rows_text(rows_total)
        );
    }
    let legend_y = TOP + ROW * totals.len() as f64 + 8.0;
    let mut x = LABEL;
    for state in present {
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{legend_y}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" class=\"leg\">{}</text>",
            color(state),
            x + 16.0,
            legend_y + 11.0,
            state.as_str()
        );
        x += 16.0 + 9.0 * state.as_str().len() as f64 + 18.0;
    }
    s.push_str("</svg>\n");
    s
}

fn rows_text(n: usize) -> String {
    if n == 1 {
        "1 row".into()
    } else {
        format!("{n} rows")
    }
}

fn ratio(part: Decimal, whole: Decimal) -> f64 {
    use rust_decimal::prelude::ToPrimitive;
    if whole.is_zero() {
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
svg.chart { max-width: 100%; height: auto; margin: 0.5rem 0; }
svg.chart text { font-family: -apple-system, "Segoe UI", Roboto, Arial, sans-serif; font-size: 13px; fill: #1b1b1b; }
svg.chart text.cur { font-weight: 700; }
svg.chart text.in { fill: #fff; font-weight: 700; }
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

    #[test]
    fn production_is_labelled_and_simulated_is_not_claimed() {
        let page = render(&batch("production"), &[], "l.db", "now", "0.1.0");
        assert!(page.contains("PRODUCTION"));
        assert!(!page.contains("SIMULATED"));
    }
}
