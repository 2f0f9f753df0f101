//! What `run` and `validate` share: the flags that turn a file into a plan, and how rows per
//! delivery are written.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::batch::options::RunOptions;
use crate::batch::repeats::OnRepeat;

use super::ServiceArgs;

/// What `run` and `validate` share: the file, the service, and how the file becomes a plan.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The file of recipients: CSV, or a workbook (.xlsx, .ods).
    pub file: PathBuf,
    #[command(flatten)]
    pub service: ServiceArgs,
    /// The batch name (default: the file name without extension). Re-use it to resume; it is
    /// part of the plan digest.
    #[arg(long)]
    pub batch: Option<String>,
    /// Field delimiter (default: detected among , ; and tab).
    #[arg(long, value_parser = parse_delimiter)]
    pub delimiter: Option<u8>,
    /// Amounts are written with a decimal comma (`10,99`), whatever the delimiter (without it,
    /// a decimal comma is read where the delimiter is `;` or a tab). A thousands separator is
    /// refused.
    #[arg(long)]
    pub decimal_comma: bool,
    /// The sheet of a workbook (.xlsx, .ods) that holds the rows (default: the first).
    #[arg(long, value_name = "NAME")]
    pub sheet: Option<String>,
    /// Pay the valid rows and mark the others INVALID instead of stopping.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Allow the same (email, product, amount) more than once.
    #[arg(long)]
    pub allow_duplicates: bool,
    /// Pay rows that other batches of the ledger already paid, have in flight or planned, and
    /// a file another batch was made from (refused by default; recorded on the batch).
    #[arg(long, conflicts_with = "skip_repeats")]
    pub allow_repeats: bool,
    /// Pay only the rows no other batch of the ledger has; the repeats are recorded SKIPPED
    /// with the batch that has them.
    #[arg(long)]
    pub skip_repeats: bool,
    /// Pay even when the service holds finished orders answered with neither description nor
    /// metadata (both optional in its published contract): whose they are cannot be told, and
    /// rows of the file they may hold are not checked (refused by default, exit 5).
    #[arg(long)]
    pub allow_untold_orders: bool,
    /// Balance to pay from for rows whose product currency has no balance (EUR, GBP, USD, CAD).
    #[arg(long, value_name = "CUR")]
    pub payment_currency: Option<String>,
    /// Pay by this card instead of from the account balance (a `card_id` column in the file
    /// overrides it per row). Card-paid rows skip the balance check.
    #[arg(long, value_name = "ID")]
    pub card_id: Option<String>,
    /// Refresh the cached catalog when older than this many seconds.
    #[arg(long, default_value_t = crate::catalog::DEFAULT_TTL.as_secs(), value_name = "SECONDS")]
    pub catalog_ttl: u64,
}

impl PlanArgs {
    /// The run options these flags set (the rest keep their defaults).
    pub fn options(&self) -> Result<RunOptions, crate::environment::UsageError> {
        let mut o = RunOptions::new(&self.file);
        o.environment = self.service.environment()?;
        o.batch = self.batch.clone();
        o.ledger = self.service.ledger.clone();
        o.api_key_file = self.service.api_key_file.clone();
        o.delimiter = self.delimiter;
        o.decimal_comma = self.decimal_comma;
        o.sheet = self.sheet.clone();
        o.skip_invalid = self.skip_invalid;
        o.allow_duplicates = self.allow_duplicates;
        o.on_repeat = if self.allow_repeats {
            OnRepeat::Allow
        } else if self.skip_repeats {
            OnRepeat::Skip
        } else {
            OnRepeat::Refuse
        };
        o.allow_untold_orders = self.allow_untold_orders;
        o.default_payment_currency = self.payment_currency.clone();
        o.card_id = self.card_id.clone().filter(|c| !c.trim().is_empty());
        o.catalog_ttl = Duration::from_secs(self.catalog_ttl);
        Ok(o)
    }
}

pub fn parse_delimiter(s: &str) -> Result<u8, String> {
    match s {
        "," | "comma" => Ok(b','),
        ";" | "semicolon" => Ok(b';'),
        "\\t" | "\t" | "tab" => Ok(b'\t'),
        "|" | "pipe" => Ok(b'|'),
        other => Err(format!("`{other}` is not a delimiter: use , ; tab or |")),
    }
}

/// `7 EMAIL, 5 PAYOUT_LINK`.
pub fn delivery_counts<N: std::fmt::Display>(
    counts: &std::collections::BTreeMap<String, N>,
) -> String {
    counts
        .iter()
        .map(|(delivery, n)| format!("{n} {delivery}"))
        .collect::<Vec<_>>()
        .join(", ")
}
