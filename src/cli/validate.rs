//! `paybatch validate FILE`: every check of `paybatch run` without paying anything: the rows
//! against the catalog, the balance, the totals per payment currency and per product, and the
//! plan digest a person approves before `paybatch run FILE --expect-digest DIGEST`. It writes
//! nothing but the catalog cache and the approved plan (so that a run refusing a changed file
//! says what changed): no batch, no row.

use std::io::Write;

use clap::Args;

use crate::batch::options::RunOptions;
use crate::batch::repeats::OnRepeat;
use crate::exit::Exit;
use crate::money::human_amount as amount;
use crate::ops::preview::{self, BalanceCheck, Preview, TakenOut};
use crate::text::shell_word;

use super::plan_args::{PlanArgs, delivery_counts};
use super::{CliError, print_error};

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Check a CSV batch exactly as `paybatch run` would (file, rows, catalog, balance) \
without paying anything, show what it would cost per payment currency and per product, and print \
its plan digest.\n\nThe plan digest is a SHA-256 over every valid row's payable content (in input \
order), the batch name and the environment, and, for a batch the ledger already has, over the \
orders already sent for rows the file no longer has (an intent never sent for such a row is \
cancelled by the run, and shown). Approve it, then pay exactly that plan with `paybatch run FILE \
--expect-digest DIGEST`: the run refuses a plan that changed since, and says what changed (rows \
added, removed and changed, field by field) against the plan kept when it was validated.\n\nWrites \
nothing but the catalog cache and the validated plan (the last 20 of a batch) in the ledger \
database; a plan that cannot be kept there is said, and its digest still printed. Exit 0 when the batch is valid, 3 when it is not (or the \
balance is too low).";

#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Print the whole report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

impl ValidateArgs {
    fn options(&self) -> Result<RunOptions, crate::environment::UsageError> {
        self.plan.options()
    }

    /// The `paybatch run` command that pays exactly the validated plan.
    fn run_command(&self, digest: &str) -> String {
        run_command(&self.plan, digest)
    }
}

/// The `paybatch run` command that pays exactly the plan of digest `digest` of `plan`'s file.
pub(super) fn run_command(plan: &PlanArgs, digest: &str) -> String {
    let mut cmd = format!(
        "paybatch run {}",
        shell_word(&plan.file.display().to_string())
    );
    if let Some(b) = &plan.batch {
        cmd.push_str(&format!(" --batch {}", shell_word(b)));
    }
    cmd.push_str(&plan.service.repeated());
    if let Some(c) = &plan.payment_currency {
        cmd.push_str(&format!(" --payment-currency {}", shell_word(c)));
    }
    if let Some(sheet) = &plan.sheet {
        cmd.push_str(&format!(" --sheet {}", shell_word(sheet)));
    }
    if plan.decimal_comma {
        cmd.push_str(" --decimal-comma");
    }
    if plan.allow_duplicates {
        cmd.push_str(" --allow-duplicates");
    }
    if plan.skip_invalid {
        cmd.push_str(" --skip-invalid");
    }
    if plan.allow_repeats {
        cmd.push_str(" --allow-repeats");
    }
    if plan.skip_repeats {
        cmd.push_str(" --skip-repeats");
    }
    if plan.allow_untold_orders {
        cmd.push_str(" --allow-untold-orders");
    }
    if let Some(card) = &plan.card_id {
        cmd.push_str(&format!(" --card-id {}", shell_word(card)));
    }
    cmd.push_str(&format!(" --expect-digest {digest}"));
    cmd
}

pub async fn execute(args: ValidateArgs, quiet: bool) -> Result<Exit, CliError> {
    let opts = args.options()?;
    opts.environment.api_key(opts.api_key_file.as_deref())?;
    let preview = preview::preview(&opts).await?;
    if let (Some(_), Some(why)) = (&preview.digest, &preview.plan_not_kept) {
        errln!(
            "warning: this plan could not be kept in the ledger ({}): should the file change, `paybatch run --expect-digest` cannot say what changed",
            crate::text::escape(why)
        );
    }
    let code = if preview.is_valid() {
        Exit::Ok
    } else {
        Exit::Invalid
    };
    if args.json {
        let mut value =
            serde_json::to_value(&preview).map_err(|e| CliError::unexpected(e.to_string()))?;
        value["valid"] = serde_json::Value::Bool(preview.is_valid());
        super::out_json(&value);
        return Ok(code);
    }
    if !quiet {
        let mut out = std::io::stdout().lock();
        outln!("paybatch validate: {}", opts.environment.banner());
        let _ = print_preview(&preview, &mut out);
    }
    print_verdict(&preview);
    if let Some(d) = &preview.digest
        && !quiet
    {
        outln!("approve this digest, then pay exactly this plan with:");
        outln!("  {}", args.run_command(d));
    }
    Ok(code)
}

/// The problems of the file and of the balance, on stderr, with what to do.
fn print_verdict(preview: &Preview) {
    super::print_problems(&preview.problem_report());
    if preview.problems_total > 0 {
        errln!();
        let n = preview.problems_total;
        if preview.changed_after_submission > 0 {
            print_error(
                &format!(
                    "{n} problem(s) in {}, {} of them rows changed after they were submitted; `paybatch run` would submit nothing",
                    preview.file, preview.changed_after_submission
                ),
                Some(
                    "restore the changed rows as they were, or give the new payouts new references, and validate again",
                ),
            );
        } else if preview.skip_invalid && preview.valid_rows > 0 {
            errln!(
                "warning: {n} problem(s) in {}: with --skip-invalid those rows would be marked INVALID and not paid",
                preview.file
            );
        } else {
            print_error(
                &format!(
                    "{n} problem(s) in {}; `paybatch run` would submit nothing",
                    preview.file
                ),
                Some(if preview.file_level_only {
                    "fix the file as said above (encoding, header row, rows) and validate again"
                } else {
                    "fix the rows above and validate again; --skip-invalid pays the valid rows and marks the others INVALID"
                }),
            );
        }
    } else if preview.valid_rows == 0 {
        print_error(
            &format!("{} has no row to pay", preview.file),
            Some("add one row per recipient below the header"),
        );
    }
    if preview.repeats.refuses() {
        print_error(
            &format!(
                "{} repeats what other batches have (listed above); `paybatch run` would submit nothing",
                preview.file
            ),
            Some(
                "if it was paid already there is nothing to do; --skip-repeats pays only the rows not paid yet, --allow-repeats pays the repeats again too",
            ),
        );
    }
    let short: Vec<String> = preview.short().map(BalanceCheck::short_words).collect();
    if !short.is_empty() {
        print_error(
            &format!("the balance is too low:\n  {}", short.join("\n  ")),
            Some("top up the account, or pay fewer rows (split the file), then validate again"),
        );
    }
    for warning in preview
        .balance
        .iter()
        .filter_map(BalanceCheck::may_be_short)
    {
        errln!("warning: the balance may be short: {warning}");
    }
}

/// `writeln!` of one line, its control characters escaped and what looks like an API key
/// hidden ([`crate::text::shown`]).
macro_rules! put {
    ($out:expr) => {
        writeln!($out)
    };
    ($out:expr, $($arg:tt)*) => {
        writeln!($out, "{}", crate::text::shown(&format!($($arg)*)))
    };
}

/// The human report of a preview: whether it would pay at all, rows, totals per payment
/// currency (with the balance) and per product, and the plan digest. Shared with the
/// production confirmation of `paybatch run`.
pub fn print_preview(p: &Preview, out: &mut dyn Write) -> std::io::Result<()> {
    let payable = (p.problems_total == 0 || (p.skip_invalid && p.valid_rows > 0))
        && p.changed_after_submission == 0;
    if !payable {
        put!(
            out,
            "NOTHING WILL BE PAID: {} of {} rows have problems (listed below), and `paybatch run` refuses a file with problems{}",
            p.rows - p.valid_rows + p.changed_after_submission,
            p.rows,
            if p.valid_rows > 0 && p.changed_after_submission == 0 {
                format!(
                    "; --skip-invalid would pay the {} valid rows and mark the others INVALID",
                    p.valid_rows
                )
            } else {
                String::new()
            }
        )?;
        put!(out, "what the valid rows would cost:")?;
    }
    print_counts(p, out)?;
    print_repeats(p, out)?;
    if p.totals.per_payment_currency.is_empty() && p.totals.per_card.is_empty() {
        put!(out, "nothing to pay")?;
    } else if !p.totals.per_payment_currency.is_empty() {
        put!(out)?;
        print_per_currency(p, payable, out)?;
        put!(out)?;
        print_per_product(p, out)?;
        put!(out)?;
    }
    match (p.short().next().is_none(), payable) {
        (true, true) => put!(out, "balance: enough in every payment currency")?,
        (true, false) => put!(
            out,
            "balance: would cover the valid rows (nothing is paid while rows have problems)"
        )?,
        (false, _) => put!(out, "balance: TOO LOW (see below)")?,
    }
    match &p.digest {
        Some(d) => put!(out, "plan digest: {d}")?,
        None => put!(out, "plan digest: none (the batch is not valid)")?,
    }
    Ok(())
}

/// What other batches of the ledger already have of the file, and what a run does with it.
fn print_repeats(p: &Preview, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some((head, warnings)) = &p.service {
        put!(out, "{head}")?;
        for w in warnings {
            put!(out, "warning: {w}")?;
        }
    }
    let r = &p.repeats;
    if r.any() {
        put!(
            out,
            "repeats: {} rows{} that other batches (of this ledger, or at the service) already have:",
            r.rows.len(),
            if r.files.is_empty() {
                ""
            } else {
                " and the file itself"
            }
        )?;
        for line in r.lines() {
            put!(out, "  {line}")?;
        }
        put!(
            out,
            "{}",
            match r.decision {
                OnRepeat::Refuse =>
                    "  `paybatch run` refuses them: --skip-repeats pays only the other rows, --allow-repeats pays them again too",
                OnRepeat::Allow => "  with --allow-repeats they are paid again",
                OnRepeat::Skip =>
                    "  with --skip-repeats they are left out (SKIPPED), the other rows paid",
            }
        )?;
    }
    if r.likely_total > 0 {
        put!(
            out,
            "likely repeats (a warning): {} rows pay a recipient what another batch paid them in the last {} days:",
            r.likely_total,
            crate::batch::repeats::ALIKE_WINDOW_DAYS
        )?;
        for line in r.likely_lines() {
            put!(out, "  {line}")?;
        }
    }
    if r.likely_references_total > 0 {
        put!(
            out,
            "likely repeats (a warning): {} rows have a reference that another batch has but for `-`, `_` or spaces:",
            r.likely_references_total
        )?;
        for line in r.likely_reference_lines() {
            put!(out, "  {line}")?;
        }
    }
    Ok(())
}

/// `N rows (`A`, `B` and 3 more)`.
fn rows_named(count: usize, named: &[String]) -> String {
    let mut names: Vec<String> = named.iter().map(|r| format!("`{r}`")).collect();
    if count > names.len() {
        names.push(format!("{} more", count - names.len()));
    }
    format!(
        "{count} {} ({})",
        if count == 1 { "row" } else { "rows" },
        names.join(", ")
    )
}

/// What the ledger holds for rows the file no longer has: intents the run cancels, orders it
/// follows.
fn print_taken_out(t: &TakenOut, out: &mut dyn Write) -> std::io::Result<()> {
    if t.intents_cancelled > 0 {
        put!(
            out,
            "taken out of the file, never sent: {} in {} {}: the run cancels {} (the rows still in the file are planned again)",
            rows_named(t.rows_removed, &t.rows_removed_named),
            t.intents_cancelled,
            if t.intents_cancelled == 1 {
                "intent"
            } else {
                "intents"
            },
            if t.intents_cancelled == 1 {
                "it"
            } else {
                "them"
            }
        )?;
    }
    if t.orders_followed > 0 {
        put!(
            out,
            "taken out of the file but already sent: {} in {} {}: still followed, and part of the plan digest",
            rows_named(t.rows_sent, &t.rows_sent_named),
            t.orders_followed,
            if t.orders_followed == 1 {
                "order"
            } else {
                "orders"
            }
        )?;
    }
    Ok(())
}

/// Batch, file, catalog, rows, deliveries, rows already in the ledger, card payments.
fn print_counts(p: &Preview, out: &mut dyn Write) -> std::io::Result<()> {
    put!(out, "batch: {}", p.batch)?;
    put!(out, "file: {}", p.file)?;
    put!(
        out,
        "catalog: {} products ({})",
        p.catalog_products,
        if p.catalog_cached {
            "cached"
        } else {
            "fetched from the service"
        }
    )?;
    put!(
        out,
        "rows: {} read, {} valid, {} with problems",
        p.rows,
        p.valid_rows,
        p.rows - p.valid_rows + p.changed_after_submission
    )?;
    if !p.totals.per_delivery.is_empty() {
        put!(
            out,
            "to pay per delivery: {}",
            delivery_counts(&p.totals.per_delivery)
        )?;
    }
    if p.totals.already_submitted > 0 {
        put!(
            out,
            "already sent or paid by this batch (not paid again, not counted below): {} rows",
            p.totals.already_submitted
        )?;
    }
    print_taken_out(&p.taken_out, out)?;
    for (card, (rows, prices)) in &p.totals.per_card {
        let prices: Vec<String> = prices
            .iter()
            .map(|(cur, price)| format!("{} {cur}", amount(*price, cur)))
            .collect();
        put!(
            out,
            "paid by card {card}: {rows} rows, {} (not checked against the balance)",
            prices.join(" + ")
        )?;
    }
    Ok(())
}

/// What each payment currency's balance pays, against what it has.
fn print_per_currency(p: &Preview, payable: bool, out: &mut dyn Write) -> std::io::Result<()> {
    put!(out, "to pay, per payment currency:")?;
    put!(
        out,
        "  {:<8} {:>6} {:>16} {:>16}  NOTE",
        "CURRENCY",
        "ROWS",
        "PRICE",
        "BALANCE"
    )?;
    for (cur, t) in &p.totals.per_payment_currency {
        let balance = p.balance.iter().find(|b| &b.currency == cur);
        let available = balance
            .map(|b| amount(b.available, cur))
            .unwrap_or_else(|| "-".into());
        let mut note = match balance {
            Some(b) if !b.enough => format!("SHORT by {}", amount(b.needed - b.available, cur)),
            Some(_) if payable => "enough".to_string(),
            Some(_) => "would be enough".to_string(),
            None => String::new(),
        };
        if !t.converted.is_empty() {
            let converted: Vec<String> = t
                .converted
                .iter()
                .map(|(product_cur, price)| {
                    format!("{} {product_cur}", amount(*price, product_cur))
                })
                .collect();
            if !note.is_empty() {
                note.push_str("; ");
            }
            note.push_str(&format!(
                "plus {} converted by the service at order time",
                converted.join(" and ")
            ));
        }
        match (t.converted_estimate, &t.converted_note) {
            (Some(priced), how) => note.push_str(&format!(
                ": {} {cur} ({}), in the balance check",
                amount(priced, cur),
                how.as_deref().unwrap_or("priced")
            )),
            (None, Some(why)) => note.push_str(&format!(": not priced here ({why})")),
            (None, None) => {}
        }
        put!(
            out,
            "  {:<8} {:>6} {:>16} {:>16}  {note}",
            cur,
            t.rows,
            amount(t.price, cur),
            available
        )?;
    }
    Ok(())
}

/// What each product (or choice of products) costs.
fn print_per_product(p: &Preview, out: &mut dyn Write) -> std::io::Result<()> {
    put!(out, "to pay, per product:")?;
    put!(
        out,
        "  {:<24} {:<8} {:>6} {:>16} {:>16}",
        "PRODUCT",
        "CURRENCY",
        "ROWS",
        "FACE VALUE",
        "PRICE"
    )?;
    for (code, t) in &p.totals.per_product {
        put!(
            out,
            "  {:<24} {:<8} {:>6} {:>16} {:>16}",
            code,
            t.currency,
            t.rows,
            amount(t.face_value, &t.currency),
            amount(t.price, &t.currency)
        )?;
    }
    Ok(())
}
