//! `paybatch payouts --batch NAME | --all`: follows each payout link after its order COMPLETED
//! (claimed, cancelled, expired), through [`crate::ops::payouts`]; prints rows per status, the
//! value outstanding and expired per currency and the links expiring soon, or lists the rows in
//! a state as CSV (`--list`), the file reminders are mailed from.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

use crate::batch::output::{PrivateFile, not_a_regular_file, output_clash, result_cell};
use crate::batch::workbook::{Cell, SheetWriter, is_workbook};
use crate::exit::Exit;
use crate::file_format::FileFormat;
use crate::input::columns::canonical_column;
use crate::ledger::payouts::PayoutRow;
use crate::ledger::{Ledger, PayoutStatus};
use crate::ops::payouts::{
    self, DEFAULT_EXPIRING_DAYS, DEFAULT_READS_PER_SECOND, DEFAULT_TIMEOUT_SECS, PayoutSummary,
    PayoutsOptions,
};
use crate::text::shell_word;

use super::progress::Console;
use super::{CliError, ServiceArgs};

/// The long help of the command (`--help`).
pub const LONG_ABOUT: &str = "Follow each payout link after its order COMPLETED: read again every \
finished order of the batch whose links are not all final (CLAIMED, CANCELLED and EXPIRED are \
final; ACTIVE is not), each at most once, record each link's status, since when and its expiry \
in the ledger, and print the rows per status, the value outstanding (ACTIVE) and expired per \
currency, the links expiring within --expiring-within days and when the batch was last read.\n\n\
Reads are paced (--reads-per-second) and tried again as the run's polls are (429, server errors, \
--timeout); a read that fails, or an answer that does not match the order recorded, leaves the \
last known status and is said (exit 5). Exit 7 when links expire within the window, for a cron \
job to alert on. --list writes the rows in a state as CSV (stdout, or --out FILE of mode 0600), \
with their links only with --with-links. `paybatch retry --batch NAME --expired` reissues the \
expired ones.";

/// The help line of `--out-format` here.
const LIST_FORMAT_HELP: &str = "With --list: the layout of the CSV written (delimiter, byte-order mark, line ends). With --out FILE, by default as the batch's result file (as its input file, unless --out-format chose otherwise; plain CSV when the batches listed differ); on stdout, plain CSV";

#[derive(Debug, Args)]
pub struct PayoutsArgs {
    /// The batch whose payout links to follow.
    #[arg(long, required_unless_present = "all", conflicts_with = "all")]
    pub batch: Option<String>,
    /// Every batch of the environment that still has links to follow (ACTIVE or never read).
    #[arg(long)]
    pub all: bool,
    /// Links ACTIVE that expire within this many days are listed (and make the exit code 7).
    #[arg(long, value_name = "DAYS", default_value_t = DEFAULT_EXPIRING_DAYS,
          value_parser = clap::value_parser!(u32).range(0..=3650))]
    pub expiring_within: u32,
    /// Write the rows whose link is in these states as CSV: ACTIVE, CLAIMED, CANCELLED, EXPIRED
    /// (comma-separated), or `expiring` (ACTIVE, expiring within the window).
    #[arg(long, value_name = "STATUS[,STATUS]", value_delimiter = ',', value_parser = parse_listed)]
    pub list: Vec<Listed>,
    /// With --list: write the CSV here (mode 0600) instead of stdout.
    #[arg(long, value_name = "FILE", requires = "list")]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, value_name = "FORMAT", requires = "list", help = LIST_FORMAT_HELP)]
    pub out_format: Option<crate::file_format::OutFormat>,
    /// With --list: add each row's payout link (a bearer instrument: whoever holds it can
    /// redeem it).
    #[arg(long, requires = "list")]
    pub with_links: bool,
    /// Read nothing from the service: sum up and list what the ledger knows.
    #[arg(long)]
    pub no_read: bool,
    /// At most this many order reads a second (a 429 halves it).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_READS_PER_SECOND,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub reads_per_second: u32,
    /// How long the reads may wait for the service (429s, errors); the orders not read by then
    /// keep their last known status (exit 5).
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_TIMEOUT_SECS,
          value_parser = clap::value_parser!(u64).range(1..=crate::batch::options::MAX_POLL_TIMEOUT_SECS))]
    pub timeout: u64,
    /// One JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub service: ServiceArgs,
}

/// What `--list` selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    Status(PayoutStatus),
    Expiring,
}

fn parse_listed(s: &str) -> Result<Listed, String> {
    let upper = s.trim().to_ascii_uppercase();
    if upper == "EXPIRING" {
        return Ok(Listed::Expiring);
    }
    match PayoutStatus::parse(&upper) {
        PayoutStatus::Other(_) => Err(format!(
            "`{s}` is not a payout status: use ACTIVE, CLAIMED, CANCELLED, EXPIRED or expiring"
        )),
        status => Ok(Listed::Status(status)),
    }
}

pub async fn execute(args: PayoutsArgs, quiet: bool) -> Result<Exit, CliError> {
    if !args.list.is_empty() && args.out.is_none() && args.json {
        return Err(CliError::usage(
            "--list without --out writes the CSV on stdout, where --json would go too",
            "pass --out FILE for the list, or leave --json out",
        ));
    }
    if let Some(out) = &args.out
        && let Some(clash) = output_clash(out, &args.service.ledger, &[], &[])
    {
        return Err(CliError::usage(
            format!("refusing to write the list over {clash}"),
            "pass another --out FILE",
        ));
    }
    if let Some(out) = &args.out
        && let Some(what) = not_a_regular_file(out)
    {
        return Err(CliError::usage(
            format!(
                "--out {} is {what}: writing the list would replace that with a regular file",
                out.display()
            ),
            "pass --out the path of a regular file",
        ));
    }
    let opts = PayoutsOptions {
        ledger: args.service.ledger.clone(),
        environment: args.service.environment()?,
        api_key_file: args.service.api_key_file.clone(),
        batch: args.batch.clone(),
        reads_per_second: args.reads_per_second,
        timeout: std::time::Duration::from_secs(args.timeout),
        offline: args.no_read,
    };
    let console = Console::new(quiet || args.json);
    let reporter = console.reporter();
    let summaries = payouts::payouts(&opts, args.expiring_within, &reporter).await?;
    if !args.list.is_empty() {
        write_list(&args, &summaries, payouts::clock_now(&opts))?;
    }
    if args.json {
        print_json(&args, &summaries);
    } else if args.list.is_empty() || !quiet {
        // With --list the CSV may be on stdout: the summary goes to stderr.
        let to_stderr = !args.list.is_empty();
        for s in &summaries {
            print_summary(s, to_stderr, args.batch.is_none(), &args.service.repeated());
        }
        if summaries.is_empty() {
            say(
                to_stderr,
                "no batch of this environment has paid links to follow",
            );
        }
    }
    Ok(exit_of(&summaries))
}

/// 7 when links expire within the window, else 5 when orders could not be read, else 0.
fn exit_of(summaries: &[PayoutSummary]) -> Exit {
    if summaries.iter().any(|s| s.expiring > 0) {
        Exit::Expiring
    } else if summaries.iter().any(|s| !s.not_read.is_empty()) {
        Exit::Incomplete
    } else {
        Exit::Ok
    }
}

fn say(to_stderr: bool, line: &str) {
    if to_stderr {
        errln!("{line}");
    } else {
        outln!("{line}");
    }
}

/// Amounts per currency: `USD 400.00 (40 rows, price 380.00)`.
fn values_text(values: &BTreeMap<String, payouts::Value>) -> String {
    values
        .iter()
        .map(|(currency, v)| {
            format!(
                "face value {currency} {} in {} (price {})",
                crate::money::human_amount(v.face_value, currency),
                crate::text::rows(v.rows),
                crate::money::human_amount(v.price, currency)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What left the paying balances, per paying currency, followed by `then`: `USD 20.20 paid
/// from the USD balance (2 rows); ` (only `then` when nothing is recorded).
fn charged_text(charged: &crate::report::unclaimed::PerCurrency, then: &str) -> String {
    if charged.is_empty() {
        return then.to_string();
    }
    let each = charged
        .iter()
        .map(|(currency, c)| {
            format!(
                "{currency} {} paid from the {currency} balance ({})",
                crate::money::human_amount(c.charged, currency),
                crate::text::rows(c.rows)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    if then.is_empty() {
        return each;
    }
    format!("{each}; {then}")
}

/// What is not claimed, expired and cancelled per age since payment, in the paying
/// currencies: one line per status that has any.
fn print_ageing(u: &crate::report::unclaimed::Unclaimed, to_stderr: bool) {
    use crate::report::unclaimed::{AGES, KINDS};
    for (kind, buckets) in KINDS.iter().filter_map(|k| Some((k, u.ageing.get(k)?))) {
        if buckets.values().all(|per| per.is_empty()) {
            continue;
        }
        let shown = AGES
            .iter()
            .chain(std::iter::once(&"unknown"))
            .filter_map(|age| {
                let per = buckets.get(age)?;
                if per.is_empty() && *age == "unknown" {
                    return None;
                }
                let amounts = per
                    .iter()
                    .map(|(c, v)| format!("{c} {}", crate::money::human_amount(v.charged, c)))
                    .collect::<Vec<_>>();
                let amounts = if amounts.is_empty() {
                    "-".to_string()
                } else {
                    amounts.join(", ")
                };
                Some(format!("{} days {amounts}", age.replace('_', " ")))
            })
            .collect::<Vec<_>>()
            .join("; ");
        say(
            to_stderr,
            &format!("  {kind} by days since payment: {shown}"),
        );
    }
}

/// Links named on the expiring line at most (`--list expiring` writes them all).
const NAMED: usize = 10;

fn print_summary(s: &PayoutSummary, to_stderr: bool, all: bool, flags: &str) {
    let read = match &s.read_at {
        Some(at) => format!("last read {at}"),
        None => "never read from the service".into(),
    };
    say(
        to_stderr,
        &format!(
            "batch {} ({}): payout links, {read}; {} orders read now",
            s.batch, s.environment, s.orders_read
        ),
    );
    let counts = s
        .payouts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(status, n)| format!("{status} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    say(
        to_stderr,
        &format!(
            "  rows by link: {}",
            if counts.is_empty() {
                "none paid yet".into()
            } else {
                counts
            }
        ),
    );
    let u = &s.unclaimed;
    if !s.outstanding.is_empty() {
        say(
            to_stderr,
            &format!(
                "  not claimed yet (ACTIVE): {}",
                charged_text(&u.outstanding_charged, &values_text(&s.outstanding))
            ),
        );
    }
    if !s.expired.is_empty() {
        say(
            to_stderr,
            &format!(
                "  expired: {}; `paybatch retry --batch {} --expired{flags}` reissues them",
                charged_text(&u.expired_charged, &values_text(&s.expired)),
                shell_word(&s.batch)
            ),
        );
    }
    if !u.cancelled_charged.is_empty() {
        say(
            to_stderr,
            &format!("  cancelled: {}", charged_text(&u.cancelled_charged, "")),
        );
    }
    print_ageing(u, to_stderr);
    if s.reissued > 0 {
        say(
            to_stderr,
            &format!("  reissued after their link expired: {} rows", s.reissued),
        );
    }
    print_expiring(s, to_stderr, all, flags);
    for n in &s.not_read {
        say(
            to_stderr,
            &format!(
                "  order {}: {}; its links keep their last known status",
                n.order_id, n.reason
            ),
        );
    }
}

/// The links expiring soon, named up to a few, and how to list them all.
/// `flags` are the flags that chose the service and the ledger, for the commands suggested.
fn print_expiring(s: &PayoutSummary, to_stderr: bool, all: bool, flags: &str) {
    if s.expiring == 0 {
        return;
    }
    let named = s
        .expiring_rows
        .iter()
        .take(NAMED)
        .map(|e| format!("{} ({})", e.reference, e.expires_at))
        .collect::<Vec<_>>()
        .join(", ");
    let more = s.expiring.saturating_sub(NAMED);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    say(
        to_stderr,
        &format!(
            "  expiring within {} days: {} links: {named}{more}",
            s.expiring_within_days, s.expiring
        ),
    );
    if !all {
        say(
            to_stderr,
            &format!(
                "  the list to remind them: paybatch payouts --batch {}{flags} --list expiring --out expiring.csv",
                shell_word(&s.batch)
            ),
        );
    }
}

/// `payouts --all --json`: the batches and their totals (another shape than any one batch).
#[derive(Serialize)]
struct AllJson<'a> {
    batches: &'a [PayoutSummary],
    orders_read: usize,
    expiring: usize,
    not_read: usize,
    exit_code: i32,
}

fn print_json(args: &PayoutsArgs, summaries: &[PayoutSummary]) {
    let exit_code = exit_of(summaries).code();
    if args.all {
        super::out_json(&AllJson {
            batches: summaries,
            orders_read: summaries.iter().map(|s| s.orders_read).sum(),
            expiring: summaries.iter().map(|s| s.expiring).sum(),
            not_read: summaries.iter().map(|s| s.not_read.len()).sum(),
            exit_code,
        });
    } else if let Some(s) = summaries.first() {
        #[derive(Serialize)]
        struct One<'a> {
            #[serde(flatten)]
            batch: &'a PayoutSummary,
            exit_code: i32,
        }
        super::out_json(&One {
            batch: s,
            exit_code,
        });
    }
}

/// The columns of `--list`, before the input's other columns.
const LIST_COLUMNS: [&str; 9] = [
    "reference",
    "email",
    "product_code",
    "face_value",
    "currency",
    "payout_status",
    "status_since",
    "expires_at",
    "order_id",
];

/// Writes the rows `--list` selects, of every batch summed up, as CSV on stdout or `--out`.
fn write_list(
    args: &PayoutsArgs,
    summaries: &[PayoutSummary],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), CliError> {
    let failed = |path: &Path, e: &dyn std::fmt::Display| {
        CliError::new(
            Exit::Unexpected,
            format!("cannot write {}: {e}", path.display()),
            Some("check that the directory exists and is writable, or pass another --out FILE"),
        )
    };
    let ledger = crate::ops::status::open_existing(&args.service.ledger)?;
    let format = list_format(&ledger, args, summaries)?;
    match &args.out {
        Some(path) => {
            let file = PrivateFile::create(path).map_err(|e| failed(path, &e))?;
            let n = (|| {
                let mut out = if is_workbook(path) {
                    ListOut::Sheet(None)
                } else {
                    ListOut::Csv(Box::new(format.writer(file.file())?), format)
                };
                let n = write_rows(&ledger, args, summaries, now, &mut out)?;
                out.finish(Some(file.file()))?;
                Ok::<_, ListError>(n)
            })()
            .map_err(|e| failed(path, &e))?;
            file.commit().map_err(|e| failed(path, &e))?;
            errln!(
                "{n} rows written to {} (mode 0600{})",
                path.display(),
                if args.with_links {
                    ": it holds payout links"
                } else {
                    ""
                }
            );
        }
        None => match (|| {
            let mut out = ListOut::Csv(Box::new(format.writer(std::io::stdout().lock())?), format);
            write_rows(&ledger, args, summaries, now, &mut out)?;
            out.finish(None)
        })() {
            Ok(_) => {}
            // A reader that went away (`| head`) ends the list quietly.
            Err(e) if e.is_closed_pipe() => {}
            Err(e) => return Err(failed(Path::new("(stdout)"), &e)),
        },
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
enum ListError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Csv(#[from] csv::Error),
    #[error("{0}")]
    Run(#[from] crate::ops::error::OpError),
}

impl ListError {
    /// Whether the list's reader went away (a closed pipe).
    fn is_closed_pipe(&self) -> bool {
        let broken = |e: &std::io::Error| e.kind() == std::io::ErrorKind::BrokenPipe;
        match self {
            ListError::Io(e) => broken(e),
            ListError::Csv(e) => matches!(e.kind(), csv::ErrorKind::Io(e) if broken(e)),
            ListError::Run(_) => false,
        }
    }
}

impl From<crate::ledger::LedgerError> for ListError {
    fn from(e: crate::ledger::LedgerError) -> Self {
        ListError::Run(e.into())
    }
}

/// The layout of the list: `--out-format` (`same`: as each batch's input), else with `--out
/// FILE` as the batches' result files, on stdout plain CSV; batches of different layouts are
/// listed as plain CSV.
fn list_format(
    ledger: &Ledger,
    args: &PayoutsArgs,
    summaries: &[PayoutSummary],
) -> Result<FileFormat, CliError> {
    if args.out.is_none() && args.out_format.is_none() {
        return Ok(FileFormat::CSV);
    }
    let mut formats: Vec<FileFormat> = Vec::new();
    for s in summaries {
        if let Some(batch) = ledger.batch(&s.batch)? {
            let format = crate::ops::report::result_format(&batch, args.out_format).format;
            if !formats.contains(&format) {
                formats.push(format);
            }
        }
    }
    Ok(match formats.as_slice() {
        [one] => *one,
        _ => FileFormat::CSV,
    })
}

/// Where the list goes: CSV in a layout, or a sheet of a workbook (`--out FILE.xlsx`), made
/// once its header is known.
enum ListOut<W: Write> {
    Csv(Box<csv::Writer<W>>, FileFormat),
    Sheet(Option<Box<SheetWriter>>),
}

/// Where `face_value` is among the cells of a line ([`LIST_COLUMNS`], after `batch` with
/// `--all`).
fn amount_at(args: &PayoutsArgs) -> usize {
    usize::from(args.all) + 3
}

/// Where the link is among the cells of a line, with `--with-links`.
fn link_at(args: &PayoutsArgs) -> Option<usize> {
    args.with_links
        .then(|| usize::from(args.all) + LIST_COLUMNS.len())
}

impl<W: Write> ListOut<W> {
    fn header(&mut self, header: &[&str]) -> Result<(), ListError> {
        match self {
            ListOut::Csv(csv, _) => csv.write_record(header)?,
            ListOut::Sheet(sheet) => {
                *sheet = Some(Box::new(SheetWriter::create(
                    header.iter().map(|h| crate::text::cell(h)),
                )?));
            }
        }
        Ok(())
    }

    /// One line of raw cells: in CSV as the result file writes them (the amount with the
    /// layout's decimal mark), in a sheet the amount as a number and the rest as text.
    fn line(
        &mut self,
        cells: &[String],
        amount: usize,
        link: Option<usize>,
    ) -> std::io::Result<()> {
        match self {
            ListOut::Csv(csv, format) => {
                let shown = cells.iter().enumerate().map(|(i, c)| {
                    let c = if i == amount {
                        format.amount(c)
                    } else {
                        std::borrow::Cow::Borrowed(c.as_str())
                    };
                    result_cell(&c, Some(i) == link).into_owned()
                });
                csv.write_record(shown).map_err(|e| match e.into_kind() {
                    // A reader that went away stays one ([`ListError::is_closed_pipe`]).
                    csv::ErrorKind::Io(io) => io,
                    other => std::io::Error::other(format!("{other:?}")),
                })
            }
            ListOut::Sheet(sheet) => {
                let Some(sheet) = sheet else {
                    return Err(std::io::Error::other("a line before the header"));
                };
                let shown: Vec<std::borrow::Cow<str>> =
                    cells.iter().map(|c| crate::text::cell(c)).collect();
                sheet.write(shown.iter().enumerate().map(|(i, c)| {
                    if i == amount {
                        Cell::Amount(c)
                    } else {
                        Cell::Text(c)
                    }
                }))
            }
        }
    }

    /// Ends the list: the CSV flushed, or the workbook put together on `file`.
    fn finish(self, file: Option<&std::fs::File>) -> Result<(), ListError> {
        match (self, file) {
            (ListOut::Csv(mut csv, _), _) => csv.flush()?,
            (ListOut::Sheet(Some(sheet)), Some(file)) => {
                let mut out = std::io::BufWriter::new(file);
                sheet.finish(&mut out)?;
                out.flush()?;
            }
            (ListOut::Sheet(_), _) => {}
        }
        Ok(())
    }
}

/// Writes the header and the selected rows to `csv`; returns how many rows were written.
fn write_rows<W: Write>(
    ledger: &Ledger,
    args: &PayoutsArgs,
    summaries: &[PayoutSummary],
    now: chrono::DateTime<chrono::Utc>,
    csv: &mut ListOut<W>,
) -> Result<usize, ListError> {
    let statuses: Vec<PayoutStatus> = args
        .list
        .iter()
        .filter_map(|l| match l {
            Listed::Status(s) => Some(s.clone()),
            Listed::Expiring => None,
        })
        .collect();
    let expiring = args
        .list
        .contains(&Listed::Expiring)
        .then_some(args.expiring_within);
    let mut written = 0;
    let mut header_done = false;
    for s in summaries {
        let Some(batch) = ledger.batch(&s.batch)? else {
            continue;
        };
        // The input's columns paybatch does not write itself, by their position.
        let others: Vec<(usize, &String)> = batch
            .headers
            .iter()
            .enumerate()
            .filter(|(_, h)| canonical_column(h).is_none())
            .collect();
        if !header_done {
            let mut header: Vec<&str> = Vec::new();
            if args.all {
                header.push("batch");
            }
            header.extend(LIST_COLUMNS);
            if args.with_links {
                header.push("payout_url");
            }
            header.extend(others.iter().map(|(_, h)| h.as_str()));
            csv.header(&header)?;
            header_done = true;
        }
        let mut failure: Option<std::io::Error> = None;
        let listed = payouts::listed_rows(ledger, &batch, &statuses, expiring, now, |row| {
            let line = list_line(&row, args, &s.batch, &others);
            csv.line(&line, amount_at(args), link_at(args))
                .map_err(|e| {
                    let told = std::io::Error::new(e.kind(), e.to_string());
                    failure = Some(e);
                    told
                })
        });
        // The writer's own error first: a reader that went away is told apart from a ledger
        // that failed.
        if let Some(e) = failure {
            return Err(e.into());
        }
        written += listed?;
    }
    if !header_done {
        let mut header: Vec<&str> = LIST_COLUMNS.to_vec();
        if args.with_links {
            header.push("payout_url");
        }
        csv.header(&header)?;
    }
    Ok(written)
}

/// One line of `--list`, its cells as the ledger holds them.
fn list_line(
    row: &PayoutRow,
    args: &PayoutsArgs,
    batch: &str,
    others: &[(usize, &String)],
) -> Vec<String> {
    let (email, products, face_value, currency) = match &row.spec {
        Some(s) => (
            s.email.as_deref().unwrap_or("").to_string(),
            s.product_codes.join(" "),
            s.face_value.to_string(),
            s.currency.to_string(),
        ),
        None => Default::default(),
    };
    let mut cells: Vec<String> = Vec::new();
    if args.all {
        cells.push(batch.to_string());
    }
    cells.extend([
        row.reference.clone(),
        email,
        products,
        face_value,
        currency,
        row.status
            .as_ref()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        row.since.clone().unwrap_or_default(),
        row.expires_at.clone().unwrap_or_default(),
        row.service_order_id.clone().unwrap_or_default(),
    ]);
    if args.with_links {
        cells.push(row.payout_url.clone().unwrap_or_default());
    }
    cells.extend(
        others
            .iter()
            .map(|(i, _)| row.fields.get(*i).cloned().unwrap_or_default()),
    );
    cells
}
