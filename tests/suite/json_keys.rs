//! The JSON objects of `--json` are part of the interface: scripts and cron jobs read them by
//! their keys. Each command's object is pinned here, key for key (nested objects and the objects
//! of lists too), against the simulator: a key renamed, dropped or added fails.

use std::collections::BTreeSet;

use crate::support::*;
use serde_json::Value;

/// Every key path of `value`: `a.b` for a key of a nested object, `a[].b` for a key of the
/// objects of a list. The objects named in `maps` are keyed by data (row states, currencies):
/// their keys are `*`. Below `depth` levels of objects, nothing more is listed.
fn shape(value: &Value, maps: &[&str], depth: usize) -> BTreeSet<String> {
    fn walk(v: &Value, path: &str, maps: &[&str], depth: usize, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(map) if depth > 0 => {
                for (key, item) in map {
                    let key = if maps.contains(&path) { "*" } else { key };
                    let inner = if path.is_empty() {
                        key.to_string()
                    } else {
                        format!("{path}.{key}")
                    };
                    out.insert(inner.clone());
                    walk(item, &inner, maps, depth - 1, out);
                }
            }
            Value::Array(items) => {
                for item in items {
                    walk(item, &format!("{path}[]"), maps, depth, out);
                }
            }
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(value, "", maps, depth, &mut out);
    out
}

/// The one JSON value `out` printed on stdout.
fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_str(stdout_of(out).trim())
        .unwrap_or_else(|e| panic!("one JSON value on stdout ({e}): {}", output_of(out)))
}

/// Asserts that the JSON printed by `out` has exactly the key paths `expected`.
fn assert_keys(what: &str, out: &std::process::Output, maps: &[&str], expected: &[&str]) {
    assert_keys_to(what, out, maps, usize::MAX, expected);
}

fn assert_keys_to(
    what: &str,
    out: &std::process::Output,
    maps: &[&str],
    depth: usize,
    expected: &[&str],
) {
    let found = shape(&json_of(out), maps, depth);
    let expected: BTreeSet<String> = expected.iter().map(|k| k.to_string()).collect();
    assert_eq!(
        found,
        expected,
        "{what}: the keys of its JSON changed\nmissing: {:?}\nnew: {:?}",
        expected.difference(&found).collect::<Vec<_>>(),
        found.difference(&expected).collect::<Vec<_>>()
    );
}

const RUN_KEYS: &[&str] = &[
    "batch",
    "environment",
    "exit_code",
    "incomplete_reason",
    "likely_repeats",
    "likely_repeats.listed",
    "likely_repeats.rows",
    "outcome",
    "replanned",
    "replanned.because",
    "replanned.rows",
    "result_file",
    "result_format",
    "result_format.bom",
    "result_format.chosen",
    "result_format.delimiter",
    "result_format.line_end",
    "rows",
    "rows.*",
    "simulated",
    "stopped",
    "total_unconfirmed_rows",
    "totals",
    "totals.per_paying_balance",
    "totals.per_paying_balance[].amount",
    "totals.per_paying_balance[].currency",
    "totals.per_paying_balance[].paid_by",
    "totals.per_product_currency",
    "totals.per_product_currency.*",
    "totals.per_product_currency.*.face_value",
    "totals.per_product_currency.*.price",
    "unconfirmed_rows",
];

const RUN_MAPS: &[&str] = &["rows", "totals.per_product_currency", "replanned.because"];

const STATUS_MAPS: &[&str] = &["states", "orders", "payouts"];

/// The maps of the unclaimed value (`payouts --json`, `report --since --json` under
/// `unclaimed`): per paying currency, the totals and each age bucket of each status.
fn unclaimed_maps(prefix: &str) -> Vec<String> {
    let mut maps: Vec<String> = [
        "outstanding_charged",
        "expired_charged",
        "cancelled_charged",
    ]
    .iter()
    .map(|m| format!("{prefix}{m}"))
    .collect();
    for kind in ["outstanding", "expired", "cancelled"] {
        for age in ["0-30", "31-60", "61-90", "over_90"] {
            maps.push(format!("{prefix}ageing.{kind}.{age}"));
        }
    }
    maps
}

/// The keys of the unclaimed value when only links not claimed yet, paid today, are known.
fn unclaimed_keys(prefix: &str) -> Vec<String> {
    let mut keys: Vec<String> = [
        "outstanding_charged",
        "outstanding_charged.*",
        "outstanding_charged.*.charged",
        "outstanding_charged.*.rows",
        "expired_charged",
        "cancelled_charged",
        "ageing",
        "ageing.outstanding.0-30.*",
        "ageing.outstanding.0-30.*.charged",
        "ageing.outstanding.0-30.*.rows",
    ]
    .iter()
    .map(|k| format!("{prefix}{k}"))
    .collect();
    for kind in ["outstanding", "expired", "cancelled"] {
        keys.push(format!("{prefix}ageing.{kind}"));
        for age in ["0-30", "31-60", "61-90", "over_90"] {
            keys.push(format!("{prefix}ageing.{kind}.{age}"));
        }
    }
    keys
}

#[tokio::test]
async fn every_json_output_keeps_its_keys() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let base = sim.base_url();
    ws.copy(SAMPLE, "nov.csv");
    ws.copy(SAMPLE_MISTAKES, "bad.csv");
    let ledger = ws.ledger();
    let ledger = ledger.to_str().expect("utf-8 path");

    let out = against_url(&ws, &base, &["validate", "bad.csv", "--json"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", output_of(&out));
    assert_keys(
        "validate",
        &out,
        &[
            "totals.per_payment_currency",
            "totals.per_payment_currency.*.converted",
            "totals.per_product",
            "totals.per_card",
            "totals.per_delivery",
            "problems_per_kind",
        ],
        &[
            "balance",
            "balance[].available",
            "balance[].converted",
            "balance[].converted.priced",
            "balance[].converted.priced_by",
            "balance[].converted.rows",
            "balance[].converted.unpriced",
            "balance[].converted.unpriced_rows",
            "balance[].converted.why_not",
            "balance[].currency",
            "balance[].enough",
            "balance[].needed",
            "batch",
            "catalog_cached",
            "catalog_products",
            "changed_after_submission",
            "digest",
            "environment",
            "file",
            "plan_not_kept",
            "problems",
            "problems[].column",
            "problems[].column_name",
            "problems[].help",
            "problems[].line",
            "problems[].message",
            "problems[].value",
            "problems_per_kind",
            "problems_per_kind.*",
            "problems_total",
            "repeats",
            "repeats.decision",
            "repeats.files",
            "repeats.likely",
            "repeats.likely_references",
            "repeats.likely_references_total",
            "repeats.likely_total",
            "repeats.rows",
            "rows",
            "skip_invalid",
            "taken_out",
            "taken_out.intents_cancelled",
            "taken_out.orders_followed",
            "taken_out.rows_removed",
            "taken_out.rows_removed_named",
            "taken_out.rows_sent",
            "taken_out.rows_sent_named",
            "totals",
            "totals.already_submitted",
            "totals.per_card",
            "totals.per_delivery",
            "totals.per_delivery.*",
            "totals.per_payment_currency",
            "totals.per_payment_currency.*",
            "totals.per_payment_currency.*.converted",
            "totals.per_payment_currency.*.converted.*",
            "totals.per_payment_currency.*.converted_estimate",
            "totals.per_payment_currency.*.converted_note",
            "totals.per_payment_currency.*.price",
            "totals.per_payment_currency.*.rows",
            "totals.per_product",
            "totals.per_product.*",
            "totals.per_product.*.currency",
            "totals.per_product.*.face_value",
            "totals.per_product.*.price",
            "totals.per_product.*.rows",
            "valid",
            "valid_rows",
        ],
    );

    // Held to its approved plan: its approval is on record (`status --batch`).
    let digest = plan_digest(&ws, &base, "nov.csv").await;
    let out = run_file(
        &ws,
        &sim,
        "nov.csv",
        &["--json", "--expect-digest", &digest],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_keys("run", &out, RUN_MAPS, RUN_KEYS);

    // A second batch of the same rows, planned and not sent: orders in flight, a decision on
    // repeats.
    let out = run_file(
        &ws,
        &sim,
        "nov.csv",
        &[
            "--batch",
            "again",
            "--allow-repeats",
            "--plan-only",
            "--json",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(5), "{}", output_of(&out));
    // Nothing paid yet: the totals are empty.
    let planned: Vec<&str> = RUN_KEYS
        .iter()
        .copied()
        .filter(|k| !k.starts_with("totals.per_paying_balance[]"))
        .filter(|k| !k.starts_with("totals.per_product_currency.*"))
        .collect();
    assert_keys("run --plan-only", &out, RUN_MAPS, &planned);

    let out = against_url(&ws, &base, &["run", "missing.csv", "--json"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_of(&out));
    assert_keys(
        "run that stopped",
        &out,
        &[],
        &[
            "batch",
            "environment",
            "error",
            "error.help",
            "error.message",
            "exit_code",
            "outcome",
            "problems",
            "simulated",
        ],
    );
    let out = against_url(&ws, &base, &["run", "nov.csv", "--env", "bogus", "--json"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_of(&out));
    assert_keys(
        "run refused",
        &out,
        &[],
        &[
            "batch",
            "environment",
            "error",
            "error.help",
            "error.message",
            "exit_code",
            "file",
            "outcome",
        ],
    );
    let out = paybatch_in(ws.dir.path(), &["run", "--json", "--no-such-flag"], &[]).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_of(&out));
    assert_keys(
        "a command line that cannot be used",
        &out,
        &[],
        &[
            "error",
            "error.help",
            "error.message",
            "exit_code",
            "outcome",
        ],
    );

    let out = paybatch_in(
        ws.dir.path(),
        &["status", "--json", "--ledger", ledger],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_keys(
        "status",
        &out,
        &["[].states", "[].charged"],
        &[
            "[].base_url",
            "[].batch",
            "[].charged",
            "[].charged.*",
            "[].created_at",
            "[].environment",
            "[].input",
            "[].rows",
            "[].states",
            "[].states.*",
        ],
    );
    let one_batch = [
        "approvals",
        "base_url",
        "batch",
        "charged",
        "created_at",
        "environment",
        "events",
        "events[].at",
        "events[].cause",
        "events[].from",
        "events[].subject",
        "events[].to",
        "in_flight",
        "input",
        "input_sha256",
        "key_fingerprint",
        "next",
        "orders",
        "orders.*",
        "payouts",
        "payouts_read_at",
        "refused_rows",
        "repeats",
        "rows",
        "states",
        "states.*",
        "total_unconfirmed_orders",
        "unconfirmed_orders",
    ];
    let out = paybatch_in(
        ws.dir.path(),
        &["status", "--batch", "nov", "--json", "--ledger", ledger],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let mut paid = one_batch.to_vec();
    paid.extend([
        "approvals[].approved_at",
        "approvals[].approved_by",
        "approvals[].digest",
        "approvals[].host",
        "approvals[].run",
        "approvals[].user",
        "charged[].amount",
        "charged[].by",
        "charged[].currency",
        "charged[].paid_by",
        "payouts.*",
    ]);
    assert_keys("status --batch (paid)", &out, STATUS_MAPS, &paid);
    let out = paybatch_in(
        ws.dir.path(),
        &[
            "payouts",
            "--batch",
            "nov",
            "--json",
            "--no-read",
            "--ledger",
            ledger,
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let mut maps = unclaimed_maps("");
    maps.extend(["payouts", "outstanding", "expired"].map(String::from));
    let maps: Vec<&str> = maps.iter().map(String::as_str).collect();
    let mut expected = unclaimed_keys("");
    expected.extend(
        [
            "batch",
            "environment",
            "exit_code",
            "expired",
            "expiring",
            "expiring_links",
            "expiring_within_days",
            "not_read",
            "orders_read",
            "outstanding",
            "outstanding.*",
            "outstanding.*.face_value",
            "outstanding.*.price",
            "outstanding.*.rows",
            "payouts",
            "payouts.*",
            "read_at",
            "reissued",
        ]
        .map(String::from),
    );
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    assert_keys("payouts --batch", &out, &maps, &expected);
    let out = paybatch_in(
        ws.dir.path(),
        &["status", "--batch", "again", "--json", "--ledger", ledger],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let mut planned = one_batch.to_vec();
    planned.extend([
        "in_flight[].age_seconds",
        "in_flight[].order",
        "in_flight[].polls",
        "in_flight[].sends",
        "in_flight[].service_order_id",
        "in_flight[].since",
        "in_flight[].state",
        "in_flight[].what",
        "repeats[].at",
        "repeats[].decision",
    ]);
    assert_keys("status --batch (planned)", &out, STATUS_MAPS, &planned);

    let out = paybatch_in(
        ws.dir.path(),
        &[
            "history",
            "--email",
            "jordan.lee@example.com",
            "--json",
            "--ledger",
            ledger,
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_keys(
        "history",
        &out,
        &["paid_face_value"],
        &[
            "batches_searched",
            "count",
            "email",
            "ledger",
            "paid",
            "paid_face_value",
            "paid_face_value.*",
            "payouts",
            "payouts[].attempt",
            "payouts[].batch",
            "payouts[].batch_created_at",
            "payouts[].completed_at",
            "payouts[].currency",
            "payouts[].date",
            "payouts[].debited_amount",
            "payouts[].debited_currency",
            "payouts[].email",
            "payouts[].environment",
            "payouts[].error_type",
            "payouts[].face_value",
            "payouts[].order_id",
            "payouts[].price",
            "payouts[].product_codes",
            "payouts[].reference",
            "payouts[].state",
            "reference",
        ],
    );

    let out = against_url(&ws, &base, &["retry", "--batch", "nov", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_keys(
        "retry",
        &out,
        &["rows"],
        &[
            "batch",
            "environment",
            "exit_code",
            "not_read",
            "result_file",
            "retried",
            "rows",
            "rows.*",
            "totals",
            "totals.per_paying_balance",
            "totals.per_paying_balance[].amount",
            "totals.per_paying_balance[].currency",
            "totals.per_paying_balance[].paid_by",
        ],
    );
    let out = against_url(&ws, &base, &["retry", "--batch", "nosuch", "--json"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", output_of(&out));
    assert_keys(
        "retry that stopped",
        &out,
        &[],
        &["batch", "error", "error.help", "error.message", "exit_code"],
    );

    let out = against_url(&ws, &base, &["reconcile", "--batch", "nov", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_keys(
        "reconcile",
        &out,
        &[],
        &[
            "absent",
            "adopted",
            "dry_run",
            "duplicates",
            "found",
            "kept_in_doubt",
            "reissued",
            "released",
            "retired",
            "superseded",
            "unattached",
            "unattributed",
            "unknown_rows",
            "updated",
        ],
    );

    let out = against_url(&ws, &base, &["balance", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_keys(
        "balance",
        &out,
        &[],
        &[
            "balances",
            "balances[].balance",
            "balances[].currency",
            "environment",
        ],
    );

    let out = against_url(&ws, &base, &["ping", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_keys(
        "ping",
        &out,
        &[],
        &[
            "base_url",
            "environment",
            "key_fingerprint",
            "message",
            "ok",
        ],
    );

    let out = against_url(&ws, &base, &["config", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_keys(
        "config",
        &out,
        &[],
        &[
            "api_key",
            "api_key.fingerprint",
            "api_key.from",
            "environment",
            "error",
            "file",
            "settings",
            "settings.api_key_file",
            "settings.api_key_file.from",
            "settings.api_key_file.value",
            "settings.base_url",
            "settings.base_url.from",
            "settings.base_url.value",
            "settings.env",
            "settings.env.from",
            "settings.env.value",
            "settings.ledger",
            "settings.ledger.from",
            "settings.ledger.value",
            "settings.second_person",
            "settings.second_person.from",
            "settings.second_person.value",
            "settings.accounts.date_format",
            "settings.accounts.date_format.from",
            "settings.accounts.date_format.value",
            "settings.accounts.expense",
            "settings.accounts.expense.from",
            "settings.accounts.expense.value",
            "settings.accounts.expense_ungrouped",
            "settings.accounts.expense_ungrouped.from",
            "settings.accounts.expense_ungrouped.value",
            "settings.accounts.prepaid",
            "settings.accounts.prepaid.from",
            "settings.accounts.prepaid.value",
            "settings.accounts.suspense",
            "settings.accounts.suspense.from",
            "settings.accounts.suspense.value",
            "usable",
        ],
    );

    // The products are the service's own objects: their keys are pinned at the top level.
    let out = against_url(&ws, &base, &["catalog", "list", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    assert_keys_to(
        "catalog list",
        &out,
        &[],
        1,
        &[
            "[].availability",
            "[].categories",
            "[].code",
            "[].countries_redeemable_in",
            "[].currency",
            "[].customer_service",
            "[].discount_multiplier",
            "[].gift_card",
            "[].is_orderable",
            "[].name",
            "[].payment",
            "[].payout_type",
            "[].state",
            "[].subscription",
        ],
    );
}

/// The keys of a line of costs (`report --json`), under `at`.
fn cost_line_keys(at: &str) -> Vec<String> {
    [
        "charged",
        "charged_currency",
        "discount",
        "effective_rate",
        "face_value",
        "price",
        "product_currency",
        "rows",
        "value",
    ]
    .iter()
    .map(|k| format!("{at}.{k}"))
    .collect()
}

/// The keys `report --json` shares between a batch and a period.
fn costs_keys() -> Vec<String> {
    let mut keys: Vec<String> = [
        "balances",
        "balances[].charged",
        "balances[].currency",
        "balances[].lines",
        "balances[].lines[].charged",
        "balances[].lines[].face_value",
        "balances[].lines[].product_currency",
        "balances[].lines[].rows",
        "balances[].payer",
        "balances[].rows",
        "groups",
        "groups[].column",
        "groups[].lines",
        "paid_rows",
        "products",
        "rows",
    ]
    .iter()
    .map(|k| k.to_string())
    .collect();
    keys.extend(cost_line_keys("products[]"));
    keys.extend(cost_line_keys("groups[].lines[]"));
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_json_keeps_its_keys() {
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let base = sim.base_url();
    ws.copy(SAMPLE, "nov.csv");
    let ledger = ws.ledger();
    let ledger = ledger.to_str().expect("utf-8 path");
    let out = against_url(&ws, &base, &["run", "nov.csv", "-q"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));

    let out = paybatch_in(
        ws.dir.path(),
        &[
            "report",
            "--batch",
            "nov",
            "--ledger",
            ledger,
            "--json",
            "--group-by",
            "department",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let mut expected = costs_keys();
    expected.extend(["batch", "environment"].map(String::from));
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    assert_keys("report --batch", &out, &[], &expected);

    let out = paybatch_in(
        ws.dir.path(),
        &[
            "report",
            "--since",
            "2000-01-01",
            "--ledger",
            ledger,
            "--json",
            "--group-by",
            "department",
        ],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", output_of(&out));
    let mut expected = costs_keys();
    expected.extend(
        [
            "balances[].environment",
            "batches",
            "batches[].approval",
            "batches[].charged",
            "batches[].charged[].amount",
            "batches[].charged[].currency",
            "batches[].last_booked_at",
            "batches[].name",
            "batches[].paid_rows",
            "batches[].suspense_rows",
            "closed",
            "journal_totals",
            "journal_totals[].amount",
            "journal_totals[].currency",
            "journal_totals[].environment",
            "journal_totals[].kind",
            "journal_totals[].lines",
            "since",
            "suspense",
            "unfinished",
            "until",
        ]
        .map(String::from),
    );
    expected.push("unclaimed".to_string());
    expected.extend(unclaimed_keys("unclaimed."));
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    let maps = unclaimed_maps("unclaimed.");
    let maps: Vec<&str> = maps.iter().map(String::as_str).collect();
    assert_keys("report --since", &out, &maps, &expected);
}

/// A run stopped by SIGINT while it reads its file: the object says how far it got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_of_an_interrupted_run_keeps_its_keys() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let ws = Workspace::new();
    let sim = start_sim(fast_config(None)).await;
    let mut csv = String::from("reference,product_code,face_value,currency,email\n");
    for i in 0..150_000 {
        csv.push_str(&format!("B-{i},AMZ-US,10.00,USD,b{i}@example.com\n"));
    }
    ws.write("big.csv", &csv);
    let args = run_args(&ws, &sim.base_url(), "big.csv", &["--json"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut child = spawn_paybatch(ws.dir.path(), &args, &[]);
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    wait_for_line(&mut lines, "catalog:", std::time::Duration::from_secs(60)).await;
    signal(&child, "-INT");
    let mut stdout = String::new();
    let mut out = child.stdout.take().expect("stdout");
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        out.read_to_string(&mut stdout),
    )
    .await
    .expect("the run ends its output soon after the signal")
    .expect("stdout read");
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), child.wait())
        .await
        .expect("the run stops soon after the signal")
        .expect("wait");
    assert_eq!(status.code(), Some(130), "{stdout}");
    let value: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    let expected: BTreeSet<String> = [
        "batch",
        "environment",
        "exit_code",
        "orders_in_doubt",
        "orders_sent",
        "outcome",
        "progress_unread",
        "rows_not_sent",
        "signal",
        "simulated",
    ]
    .iter()
    .map(|k| k.to_string())
    .collect();
    assert_eq!(shape(&value, &[], usize::MAX), expected, "{stdout}");
}
