//! What a run is asked to do: [`RunOptions`], with the one copy of each default that the flags
//! and library callers share, and how many rows go in an order (`--items-per-order`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::api::models::ExecutionMode;
use crate::catalog;
use crate::environment::Environment;
use crate::file_format::{FileFormat, OutFormat, ResultFormat};
use crate::ledger;

/// Orders in flight at once the orders of `--items-per-order auto` are sized for by default
/// (without `--concurrency`).
pub const DEFAULT_CONCURRENCY: usize = 8;
/// Orders in flight at once at most by default (without `--concurrency`): a burst the service's
/// window allows goes out in a few round trips, not in 300 / 8 of them. The pacer keeps the
/// rate; the service publishes no limit on requests at once.
pub const DEFAULT_IN_FLIGHT: usize = 64;
/// How long a run waits for the service by default (`--poll-timeout`), in seconds.
pub const DEFAULT_POLL_TIMEOUT_SECS: u64 = 30 * 60;
/// Sends of one order within one run by default (`--send-tries`).
pub const DEFAULT_SEND_TRIES: u32 = 8;
/// Hours an order may be in doubt before it is looked up at the service (`--in-doubt-hours`),
/// kept with the rule it is for.
pub use super::in_doubt::DEFAULT_IN_DOUBT_HOURS;

/// The longest `--poll-timeout`: a week.
pub const MAX_POLL_TIMEOUT_SECS: u64 = 7 * 24 * 3600;

/// Default pace of order creation: the service's published limit, order creations in any
/// sliding minute (see [`super::pace::Pacer`]).
pub const DEFAULT_ORDER_RATE: u32 = 300;

/// `--items-per-order`: `auto` (the default) or a number of rows, 1 to 200.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ItemsPerOrder {
    #[default]
    Auto,
    Fixed(usize),
}

impl std::str::FromStr for ItemsPerOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(ItemsPerOrder::Auto);
        }
        match s.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_ITEMS_PER_ORDER).contains(&n) => Ok(ItemsPerOrder::Fixed(n)),
            _ => Err(format!(
                "`{s}` is not `auto` or a number of rows from 1 to {MAX_ITEMS_PER_ORDER}"
            )),
        }
    }
}

impl std::fmt::Display for ItemsPerOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ItemsPerOrder::Auto => f.write_str("auto"),
            ItemsPerOrder::Fixed(n) => write!(f, "{n}"),
        }
    }
}

/// Orders a batch's sends fill at most, per request in flight: each round of concurrent sends
/// costs about one round trip, so a batch goes out in a few of them.
const AUTO_ROUNDS: usize = 4;

/// Rows per order for `--items-per-order auto`: enough that every order of the batch fits in
/// one window of the service's rate limit (⌈rows / rate⌉), and enough that the batch goes out in
/// a few rounds of the requests in flight (⌈rows / (4 × concurrency)⌉); no more, so that an
/// order that fails takes as few rows with it as that speed allows. At most 200.
pub fn auto_rows_per_order(rows: usize, rate: u32, concurrency: usize) -> usize {
    let by_window = rows.div_ceil(rate.max(1) as usize);
    let by_rounds = rows.div_ceil(AUTO_ROUNDS * concurrency.max(1));
    by_window.max(by_rounds).clamp(1, MAX_ITEMS_PER_ORDER)
}

/// Most items the service takes in one order.
pub const MAX_ITEMS_PER_ORDER: usize = 200;

/// Rows per order of this run: `--items-per-order` as given, or chosen from the batch's valid
/// rows; one in sync mode.
pub fn per_order(opts: &RunOptions, valid_rows: usize) -> usize {
    if opts.mode == ExecutionMode::Sync {
        return 1;
    }
    match opts.items_per_order {
        ItemsPerOrder::Fixed(n) => n.clamp(1, MAX_ITEMS_PER_ORDER),
        ItemsPerOrder::Auto => {
            auto_rows_per_order(valid_rows, opts.order_rate, opts.sized_for_in_flight())
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub input: PathBuf,
    pub batch: Option<String>,
    pub ledger: PathBuf,
    pub out: Option<PathBuf>,
    pub environment: Environment,
    pub api_key_file: Option<PathBuf>,
    pub delimiter: Option<u8>,
    /// `--decimal-comma`: a comma is the decimal separator of amounts whatever the delimiter
    /// (it is where the delimiter is `;` or a tab).
    pub decimal_comma: bool,
    /// `--sheet`: the sheet of a workbook (`.xlsx`, `.ods`) that holds the rows; `None`: the
    /// first.
    pub sheet: Option<String>,
    pub skip_invalid: bool,
    pub allow_duplicates: bool,
    pub default_payment_currency: Option<String>,
    pub mode: ExecutionMode,
    /// Rows per order: a number (1..=200), or chosen from the batch ([`auto_rows_per_order`]).
    pub items_per_order: ItemsPerOrder,
    pub order_rate: u32,
    /// `--concurrency`: orders in flight at once, and what `--items-per-order auto` sizes the
    /// orders for; `None` (the default): orders sized for [`DEFAULT_CONCURRENCY`] in flight,
    /// up to [`DEFAULT_IN_FLIGHT`] sent at once.
    pub concurrency: Option<usize>,
    pub poll_timeout: Duration,
    pub catalog_ttl: Duration,
    /// Pay by this card instead of from the balance (a `card_id` column overrides it per row).
    pub card_id: Option<String>,
    /// Stop after the intents are committed: nothing is sent (the next run sends them).
    pub plan_only: bool,
    /// Sends of one order within one run before the run gives up on it (exit 5).
    pub max_send_tries: u32,
    /// An in-doubt intent first sent longer ago than this is not re-sent blindly.
    pub in_doubt_window: Duration,
    /// `--expect-digest`: the plan digest a person approved (`paybatch validate`); the run
    /// refuses a file whose digest differs.
    pub expect_digest: Option<String>,
    /// `--second-person` (or `second_person = true` in `paybatch.toml`): the run pays only a
    /// plan whose digest another user than the one running it approved (`paybatch approve`).
    pub second_person: bool,
    /// What to do with rows other batches of the ledger already have (`--allow-repeats`,
    /// `--skip-repeats`; refused by default).
    pub on_repeat: super::repeats::OnRepeat,
    /// `--allow-untold-orders`: finished orders at the service that say nothing of whose they
    /// are (no description, no metadata) do not hold the run back.
    pub allow_untold_orders: bool,
    /// `--out-format`: the layout of the result file; `None` keeps the batch's (a new batch:
    /// the input's).
    pub out_format: Option<OutFormat>,
}

impl RunOptions {
    /// Orders in flight at once at most ([`RunOptions::concurrency`]).
    pub fn in_flight(&self) -> usize {
        self.concurrency.unwrap_or(DEFAULT_IN_FLIGHT).max(1)
    }

    /// The orders in flight `--items-per-order auto` sizes the orders for
    /// ([`RunOptions::concurrency`]).
    pub fn sized_for_in_flight(&self) -> usize {
        self.concurrency.unwrap_or(DEFAULT_CONCURRENCY).max(1)
    }

    pub fn new(input: impl Into<PathBuf>) -> Self {
        RunOptions {
            input: input.into(),
            batch: None,
            ledger: PathBuf::from(ledger::DEFAULT_PATH),
            out: None,
            environment: Environment::Sim,
            api_key_file: None,
            delimiter: None,
            decimal_comma: false,
            sheet: None,
            out_format: None,
            skip_invalid: false,
            allow_duplicates: false,
            default_payment_currency: None,
            mode: ExecutionMode::Async,
            items_per_order: ItemsPerOrder::default(),
            order_rate: DEFAULT_ORDER_RATE,
            concurrency: None,
            poll_timeout: Duration::from_secs(DEFAULT_POLL_TIMEOUT_SECS),
            catalog_ttl: catalog::DEFAULT_TTL,
            card_id: None,
            plan_only: false,
            max_send_tries: DEFAULT_SEND_TRIES,
            in_doubt_window: super::in_doubt::default_window(),
            expect_digest: None,
            second_person: false,
            on_repeat: super::repeats::OnRepeat::Refuse,
            allow_untold_orders: false,
        }
    }

    /// The flags that chose the service, its key file and the ledger, for a command the run
    /// suggests: ` --env playground` or ` --base-url URL`, ` --api-key-file FILE`, and
    /// ` --ledger PATH` when it is not the default, each quoted for a shell.
    pub fn repeated_flags(&self) -> String {
        use crate::text::shell_word;
        let mut flags = match &self.environment {
            Environment::Custom(url) => format!(" --base-url {}", shell_word(url)),
            env => format!(" --env {}", env.name()),
        };
        if let Some(f) = &self.api_key_file {
            let f = f.display().to_string();
            flags.push_str(&format!(" --api-key-file {}", shell_word(&f)));
        }
        if self.ledger != std::path::Path::new(crate::ledger::DEFAULT_PATH) {
            let l = self.ledger.display().to_string();
            flags.push_str(&format!(" --ledger {}", shell_word(&l)));
        }
        flags
    }

    /// `--batch`, else the input file's stem.
    pub fn batch_name(&self) -> String {
        self.batch
            .clone()
            .unwrap_or_else(|| default_batch_name(&self.input))
    }

    /// The layouts the batch records of an input file of layout `input`: the input's, and the
    /// result file's when this run chooses it: `--out-format` resolved against the input, or
    /// for a batch `new` to the ledger the input's own. A batch resumed without `--out-format`
    /// keeps the one it recorded.
    /// How the input file is read: its delimiter and sheet as given.
    pub fn input_options(&self) -> crate::input::reader::InputOptions {
        crate::input::reader::InputOptions {
            delimiter: self.delimiter,
            sheet: self.sheet.clone(),
        }
    }

    pub fn formats(&self, input: FileFormat, new: bool) -> ledger::Formats {
        let chosen = self.out_format.or(new.then_some(OutFormat::Same));
        ledger::Formats {
            input,
            result: chosen.map(|c| ResultFormat::of(c, Some(input))),
        }
    }
}

pub fn default_batch_name(input: &Path) -> String {
    input
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "batch".into())
}

/// Where the result file goes by default: beside the input, labelled when simulated.
pub fn default_result_path(input: &Path, environment: &Environment) -> PathBuf {
    let stem = default_batch_name(input);
    let name = if environment.is_simulated() {
        format!("{stem}.SIMULATED.result.csv")
    } else {
        format!("{stem}.result.csv")
    };
    input.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_rows_per_order_fill_one_window_in_few_rounds() {
        // 300 rows at the published rate, 8 in flight: 30 orders of 10.
        assert_eq!(auto_rows_per_order(300, 300, 8), 10);
        // A small batch: one row an order.
        assert_eq!(auto_rows_per_order(20, 300, 8), 1);
        assert_eq!(auto_rows_per_order(0, 300, 8), 1);
        // A large batch: the service's largest order, 500 orders in two windows.
        assert_eq!(auto_rows_per_order(100_000, 300, 8), 200);
        // Every order of the batch fits one window while 200 rows an order allow it.
        for rows in [1_000, 9_999, 60_000] {
            let per = auto_rows_per_order(rows, 300, 8);
            assert!(rows.div_ceil(per) <= 300, "{rows} rows: {per} an order");
        }
        // More in flight: smaller orders.
        assert!(auto_rows_per_order(3_000, 300, 32) < auto_rows_per_order(3_000, 300, 8));
    }

    #[test]
    fn the_default_sizes_orders_for_8_in_flight_and_sends_a_burst_64_at_once() {
        let mut opts = RunOptions::new("rows.csv");
        assert_eq!(
            per_order(&opts, 300),
            10,
            "30 orders of 10, as for 8 in flight"
        );
        assert_eq!(opts.in_flight(), 64);
        // `--concurrency N` given: N in flight, and the orders sized for N.
        opts.concurrency = Some(8);
        assert_eq!((per_order(&opts, 300), opts.in_flight()), (10, 8));
        opts.concurrency = Some(64);
        assert_eq!((per_order(&opts, 300), opts.in_flight()), (2, 64));
        opts.concurrency = Some(0);
        assert_eq!(opts.in_flight(), 1);
    }

    #[test]
    fn items_per_order_reads_auto_or_a_number() {
        assert_eq!("auto".parse::<ItemsPerOrder>(), Ok(ItemsPerOrder::Auto));
        assert_eq!("AUTO".parse::<ItemsPerOrder>(), Ok(ItemsPerOrder::Auto));
        assert_eq!(
            "200".parse::<ItemsPerOrder>(),
            Ok(ItemsPerOrder::Fixed(200))
        );
        for bad in ["0", "201", "-1", "many", ""] {
            assert!(bad.parse::<ItemsPerOrder>().is_err(), "{bad}");
        }
    }
}
