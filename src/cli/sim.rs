//! `paybatch sim serve`: runs the playground simulator as a server of its own, so that paybatch
//! (or curl, or another tool) can be pointed at it. It answers like the service's playground,
//! with the state in memory or in a SQLite file, and with faults that can be switched on.
//!
//! `paybatch sim clock`, `sim account` and `sim payouts` work on a simulator's state without
//! serving it (the embedded simulator's beside a ledger, or a `sim serve --state` file): move its
//! clock forward, set up the simulated account's payout links (link expiry, how recipients
//! claim and cancel), and count its payout links by status, to rehearse what happens to the
//! rewards after the money moves.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use rust_decimal::Decimal;
use serde::Serialize;

use super::{CliError, DEFAULT_LEDGER};
use crate::exit::Exit;
use crate::sim::{
    DEFAULT_CANCEL_SHARE, DEFAULT_CARD, DEFAULT_CLAIM_SHARE, DEFAULT_CLAIM_WITHIN_DAYS,
    DEFAULT_KEY, DEFAULT_LINK_EXPIRY_DAYS, Faults, Flips, Hostile, KeySpelling, PayoutLife,
    PayoutStatus, SeedOrders, SimConfig, SimState,
};

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: SimCommand,
}

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Serve the simulated playground on an address until Ctrl-C or SIGTERM.
    Serve(Box<ServeArgs>),
    /// Show the simulated clock of a simulator state, or move it forward (--advance 30d): the
    /// payout links live on as the clock moves.
    Clock(ClockArgs),
    /// Show or change the simulated account's payout-link settings: link expiry, and the share
    /// of links its recipients claim or cancel and within how many days.
    Account(AccountArgs),
    /// Count a simulator state's payout links by status (ACTIVE, CLAIMED, CANCELLED, EXPIRED)
    /// at its simulated now: the simulator's own account, for comparison.
    Payouts(PayoutsArgs),
}

/// Which simulator state: the embedded simulator's beside a ledger, or a `sim serve` file.
#[derive(Debug, Clone, Args)]
pub struct StateArgs {
    /// The ledger whose embedded simulator state is meant (LEDGER.sim.db beside it, for
    /// LEDGER.db).
    #[arg(long, env = "PAYBATCH_LEDGER", value_name = "PATH", default_value = DEFAULT_LEDGER)]
    pub ledger: PathBuf,
    /// A `paybatch sim serve --state` file instead (takes precedence over --ledger).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

impl StateArgs {
    /// The simulator settings that open the state: `sim serve`'s defaults for a `--state` file,
    /// the embedded simulator's for the state beside a ledger.
    fn config(&self) -> SimConfig {
        match &self.state {
            Some(file) => SimConfig {
                state: Some(file.clone()),
                ..SimConfig::default()
            },
            None => crate::environment::embedded_sim_config(Some(
                crate::environment::embedded_state_path(&self.ledger),
            )),
        }
    }

    /// Opens the state; one that does not exist is created only when `create` (a command that
    /// changes it), else refused.
    fn open(&self, create: bool) -> Result<SimState, CliError> {
        let config = self.config();
        let path = config.state.clone().unwrap_or_default();
        if !create && !path.exists() {
            return Err(CliError::usage(
                format!("there is no simulator state at {}", path.display()),
                "name the ledger of a batch run on the embedded simulator (--ledger PATH) or a \
                 `sim serve --state` file (--state FILE)",
            ));
        }
        SimState::open(config).map_err(|e| CliError::unexpected(e.to_string()))
    }
}

#[derive(Debug, Args)]
pub struct ClockArgs {
    /// Move the clock forward by this much: a number and a unit, d (days), h, m or s, e.g. 30d
    /// or 1d12h. The clock never goes back.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub advance: Option<Duration>,
    #[command(flatten)]
    pub state: StateArgs,
}

#[derive(Debug, Args)]
pub struct AccountArgs {
    /// Links expire this many days after their order finished; 0: they do not expire (answers
    /// carry no expiry_date).
    #[arg(long, value_name = "DAYS")]
    pub link_expiry_days: Option<u32>,
    /// Share of links the recipients claim (0 to 1).
    #[arg(long, value_name = "F")]
    pub claim_share: Option<f64>,
    /// Share of links cancelled (0 to 1; with the claim share at most 1).
    #[arg(long, value_name = "F")]
    pub cancel_share: Option<f64>,
    /// Claims and cancellations happen between one hour and this many days after the order
    /// finished.
    #[arg(long, value_name = "DAYS")]
    pub claim_within_days: Option<u32>,
    #[command(flatten)]
    pub state: StateArgs,
}

impl AccountArgs {
    fn changes(&self) -> bool {
        self.link_expiry_days.is_some()
            || self.claim_share.is_some()
            || self.cancel_share.is_some()
            || self.claim_within_days.is_some()
    }

    /// `life` with the settings given here.
    fn apply(&self, life: PayoutLife) -> PayoutLife {
        PayoutLife {
            claim_share: self.claim_share.unwrap_or(life.claim_share),
            cancel_share: self.cancel_share.unwrap_or(life.cancel_share),
            claim_within_days: self.claim_within_days.unwrap_or(life.claim_within_days),
            link_expiry_days: self.link_expiry_days.unwrap_or(life.link_expiry_days),
        }
    }
}

#[derive(Debug, Args)]
pub struct PayoutsArgs {
    #[command(flatten)]
    pub state: StateArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Listen on a non-loopback address (anyone who can reach it can use the simulator).
    #[arg(long)]
    pub public: bool,
    /// SQLite file holding the state across restarts (default: in memory).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Seed of the random source (same seed and requests: same run).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Accepted API key; repeat for several. Replaces the default key.
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,
    /// Order creations per API key and minute (0: no limit).
    #[arg(long, value_name = "N", default_value_t = 300)]
    pub rate_limit: u32,
    /// Shortest time an async order stays PROCESSING, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub processing_min_ms: u64,
    /// Longest time an async order stays PROCESSING, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 4000)]
    pub processing_max_ms: u64,
    /// Probability (0 to 1) that an order ends FAILED.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub failure_rate: f64,
    /// Initial balance of a currency, e.g. USD=2500.00; repeat for several. Replaces the default
    /// balances (100000.00 in USD, EUR, GBP and CAD). Used only when the state is new.
    #[arg(long = "balance", value_name = "CUR=AMOUNT", value_parser = parse_balance)]
    pub balances: Vec<(String, Decimal)>,
    /// Take CARD payments, as the interface document describes them (by default they are
    /// answered 400 payment_method_unavailable: the published contract lists only
    /// ACCOUNT_BALANCE).
    #[arg(long)]
    pub cards_accepted: bool,
    /// Card id accepted for CARD payments; repeat for several (default: card_sim_visa).
    /// Implies --cards-accepted.
    #[arg(long = "card", value_name = "ID")]
    pub cards: Vec<String>,
    /// Latency added to every request, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub latency_ms: u64,
    /// Uniform extra latency from 0 to N milliseconds.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub latency_jitter_ms: u64,
    /// Probability of a 500/503 answer on POST /order and GET /order/{id}.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub error_rate: f64,
    /// Probability that POST /order creates the order and then drops the connection.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub drop_rate: f64,
    /// Probability that POST /order fails with a 500 that the service keeps under the
    /// idempotency key (every retry with that key gets it again; no order is created).
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub stored_error_rate: f64,
    /// Probability that POST /order is answered 504 timeout although the order was handled (its
    /// real answer is kept under the idempotency key).
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub timeout_rate: f64,
    /// Probability that a POST /order starts a burst of 429 answers.
    #[arg(long = "burst-429-rate", value_name = "F", default_value_t = 0.0)]
    pub burst_429_rate: f64,
    /// Length of a 429 burst.
    #[arg(long = "burst-429-len", value_name = "N", default_value_t = 3)]
    pub burst_429_len: u32,
    /// Accepted for compatibility: the order list leaves `metadata` out by default now, as the
    /// published contract lists it.
    #[arg(long, conflicts_with = "list_with_metadata")]
    pub list_without_metadata: bool,
    /// The older order list: every entry with its basic details and `metadata`, processing
    /// orders included.
    #[arg(long)]
    pub list_with_metadata: bool,
    /// Serve X-Api-Version 2023-07-27 with that version's shapes (by default it is answered
    /// 410 version_removed: the service switched it off on 2025-11-14).
    #[arg(long = "version-2023-07-27")]
    pub version_2023: bool,
    /// Answer every order creation 403 ordering_restricted (the account's spending limit is
    /// reached).
    #[arg(long)]
    pub ordering_restricted: bool,
    /// Hostile answers: probability that a new idempotency key is answered with an earlier
    /// order of the account (of the same items when there is one) and nothing is created.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub swap_rate: f64,
    /// Hostile answers: share of COMPLETED orders answered without their payout links.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub unlinked_rate: f64,
    /// Hostile answers: share of finished orders answered with a total_price 1000 times over.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub inflated_total_rate: f64,
    /// Hostile answers: share of FAILED orders answered with payout links on their items.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub linked_failure_rate: f64,
    /// Hostile answers: share of failed orders' messages and injected server errors that carry
    /// terminal escape sequences (OSC 8, CSI, C1, right-to-left override).
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub escape_rate: f64,
    /// Answer POST /order/estimate 404 not_found, as the service's playground does (by default
    /// it prices an order as POST /order would charge it, as the service does in production)
    #[arg(long)]
    pub without_estimate: bool,
    /// Extra time a POST /order holds its idempotency key, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub in_progress_delay_ms: u64,
    /// Start with N finished orders of the first key, some paybatch's and some not, spread
    /// over the last --seed-days days (for benchmarks of the order list; a new state only).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed_orders: usize,
    /// Days over which the orders of --seed-orders are spread, up to the start.
    #[arg(
        long,
        value_name = "DAYS",
        default_value_t = 20,
        requires = "seed_orders"
    )]
    pub seed_days: u32,
    /// Payout links expire this many days after their order finished; 0: they do not expire.
    /// Used only when the state is new (`paybatch sim account` changes it).
    #[arg(long, value_name = "DAYS", default_value_t = DEFAULT_LINK_EXPIRY_DAYS)]
    pub link_expiry_days: u32,
    /// Share of payout links the recipients claim (0 to 1). Used only when the state is new.
    #[arg(long, value_name = "F", default_value_t = DEFAULT_CLAIM_SHARE)]
    pub claim_share: f64,
    /// Share of payout links cancelled (0 to 1). Used only when the state is new.
    #[arg(long, value_name = "F", default_value_t = DEFAULT_CANCEL_SHARE)]
    pub cancel_share: f64,
    /// Claims and cancellations happen between one hour and this many days after the order
    /// finished. Used only when the state is new.
    #[arg(long, value_name = "DAYS", default_value_t = DEFAULT_CLAIM_WITHIN_DAYS)]
    pub claim_within_days: u32,
    /// Start with the simulated clock this far ahead of the wall clock, e.g. 30d (never behind
    /// the clock of the state).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub clock_offset: Option<Duration>,
    /// Make the first page of the order list odd, as the published contract does not describe
    /// it: `empty` (no entry, a cursor to read on) or `old-first` (the account's oldest order
    /// listed first, out of order), to try a client's read of the list.
    #[arg(long, value_name = "KIND", value_enum)]
    pub odd_first_page: Option<crate::sim::OddList>,
    /// Payout answers against themselves: share of ACTIVE links (from an hour after their order
    /// finished) answered EXPIRED with their expiry_date still ahead.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub expired_ahead_rate: f64,
    /// Payout answers against themselves: share of ACTIVE links (from an hour after their order
    /// finished) answered EXPIRED at the first read, then CLAIMED at every later read.
    #[arg(long, value_name = "F", default_value_t = 0.0)]
    pub expired_once_rate: f64,
    /// Careless answers: every answer's message, and a refusal's help, details and 429 error,
    /// quote the request's API key spelt this way: upper, base64, base64-nopad, base64url,
    /// base64url-nopad, unprefixed (without xx or wg), percent (every byte %XX), or all.
    #[arg(long, value_name = "SPELLING")]
    pub echo_key: Option<KeySpelling>,
    /// Share of answers (0 to 1, seeded) that hold only what the published contract requires:
    /// every optional field left out, or null where the schema allows it (no transaction_detail,
    /// description, metadata, completed_at, item currency, link expiry, product details, error
    /// help).
    #[arg(long, value_name = "SHARE", default_value_t = 0.0)]
    pub minimal_answers: f64,
    /// With --seed-orders: every seeded order is paybatch's, of another ledger, COMPLETED, with N
    /// items (1 to 200), its metadata naming each row (SEED-i-0 .. SEED-i-(N-1)), for benchmarks
    /// of the check against the service's orders.
    #[arg(
        long,
        value_name = "N",
        requires = "seed_orders",
        value_parser = clap::value_parser!(u16).range(1..=200)
    )]
    pub seed_paybatch_items: Option<u16>,
    /// Refuse these addresses by item: a file of e-mail addresses, one a line (`#` starts a
    /// comment); an order with one of them is answered 422 validation_error naming each such
    /// item (items.N.distribution_method.email_address), as the service refuses an address it
    /// does not take.
    #[arg(long, value_name = "FILE")]
    pub refuse_emails: Option<PathBuf>,
}

/// A duration written as numbers with units, d (days), h, m or s: `30d`, `1d12h`, `90m`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration like 30d, 12h, 90m or 1d12h");
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit: u64 = match c {
            'd' => 24 * 3600,
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        let n: u64 = number.parse().map_err(|_| bad())?;
        number.clear();
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(bad)?;
    }
    if !number.is_empty() || text.trim().is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

/// `30d 4h 5m 6s`, leaving out the units that are zero (`0s` for none).
fn duration_text(d: Duration) -> String {
    let s = d.as_secs();
    let parts = [
        (s / 86400, "d"),
        (s / 3600 % 24, "h"),
        (s / 60 % 60, "m"),
        (s % 60, "s"),
    ];
    let text: Vec<String> = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    if text.is_empty() {
        "0s".into()
    } else {
        text.join(" ")
    }
}

fn parse_balance(text: &str) -> Result<(String, Decimal), String> {
    let (currency, amount) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not CUR=AMOUNT (for example USD=2500.00)"))?;
    let currency = currency.trim().to_ascii_uppercase();
    if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!("`{currency}` is not a three-letter currency code"));
    }
    let amount = Decimal::from_str(amount.trim())
        .map_err(|_| format!("`{amount}` is not a decimal amount"))?;
    if amount.is_sign_negative() {
        return Err(format!("`{amount}` is negative"));
    }
    Ok((currency, amount))
}

impl ServeArgs {
    /// The simulator configuration these flags describe.
    pub fn config(&self) -> SimConfig {
        let defaults = SimConfig::default();
        SimConfig {
            keys: if self.keys.is_empty() {
                defaults.keys
            } else {
                self.keys.clone()
            },
            seed: self.seed,
            state: self.state.clone(),
            rate_limit_per_minute: self.rate_limit,
            processing_min: Duration::from_millis(self.processing_min_ms),
            processing_max: Duration::from_millis(self.processing_max_ms),
            failure_rate: self.failure_rate,
            balances: if self.balances.is_empty() {
                defaults.balances
            } else {
                self.balances.clone()
            },
            cards_accepted: self.cards_accepted || !self.cards.is_empty(),
            cards: if self.cards.is_empty() {
                vec![DEFAULT_CARD.to_string()]
            } else {
                self.cards.clone()
            },
            list_metadata: self.list_with_metadata,
            version_2023: self.version_2023,
            ordering_restricted: self.ordering_restricted,
            estimates: !self.without_estimate,
            seed_orders: (self.seed_orders > 0).then(|| SeedOrders {
                count: self.seed_orders,
                span: Duration::from_secs(u64::from(self.seed_days) * 24 * 3600),
            }),
            payout_life: PayoutLife {
                claim_share: self.claim_share,
                cancel_share: self.cancel_share,
                claim_within_days: self.claim_within_days,
                link_expiry_days: self.link_expiry_days,
            },
            clock_offset: self.clock_offset,
            odd_list: self.odd_first_page,
            faults: Faults {
                latency: Duration::from_millis(self.latency_ms),
                latency_jitter: Duration::from_millis(self.latency_jitter_ms),
                error_rate: self.error_rate,
                drop_rate: self.drop_rate,
                stored_error_rate: self.stored_error_rate,
                timeout_rate: self.timeout_rate,
                burst_429_rate: self.burst_429_rate,
                burst_429_len: self.burst_429_len,
                in_progress_delay: Duration::from_millis(self.in_progress_delay_ms),
                hostile: Hostile {
                    swap_rate: self.swap_rate,
                    unlinked_rate: self.unlinked_rate,
                    inflated_total_rate: self.inflated_total_rate,
                    linked_failure_rate: self.linked_failure_rate,
                    escape_rate: self.escape_rate,
                    echo_key: self.echo_key,
                },
                flips: Flips {
                    expired_ahead_rate: self.expired_ahead_rate,
                    expired_once_rate: self.expired_once_rate,
                },
            },
            minimal_answers: self.minimal_answers,
            seed_paybatch_items: self.seed_paybatch_items.map(usize::from),
            refuse_emails: Default::default(),
        }
    }
}

/// The addresses of a `--refuse-emails` file, in lower case: one a line, blank lines and `#`
/// comments left out.
fn refused_emails(file: &std::path::Path) -> anyhow::Result<std::collections::BTreeSet<String>> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read --refuse-emails {}", file.display()))?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim().to_lowercase())
        .filter(|l| !l.is_empty())
        .collect())
}

/// Waits for Ctrl-C or SIGTERM. The handlers are installed when this is called, before the
/// future is first polled: a signal that comes as soon as the address is printed is caught.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    async move {
        #[cfg(unix)]
        if let Some(mut term) = term {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = ctrl_c.await;
    }
}

/// Runs `paybatch sim ...`.
pub async fn execute(args: SimArgs) -> Result<Exit, CliError> {
    match args.command {
        SimCommand::Serve(serve) => run_serve(*serve)
            .await
            .map(|()| Exit::Ok)
            .map_err(|e| CliError::unexpected(format!("{e:#}"))),
        SimCommand::Clock(clock) => run_clock(&clock),
        SimCommand::Account(account) => run_account(&account),
        SimCommand::Payouts(payouts) => run_payouts(&payouts),
    }
}

fn failed(e: crate::sim::SimError) -> CliError {
    match e {
        crate::sim::SimError::Config(message) => CliError::usage(
            message,
            "see `paybatch sim account --help` for the settings and their ranges",
        ),
        other => CliError::unexpected(other.to_string()),
    }
}

/// The simulated clock, as `sim clock` prints it (two separate reads of the simulator's state,
/// put together).
#[derive(Serialize)]
struct ClockJson {
    now: String,
    clock_offset_seconds: u64,
}

fn run_clock(args: &ClockArgs) -> Result<Exit, CliError> {
    let state = args.state.open(args.advance.is_some())?;
    if let Some(by) = args.advance {
        state.advance_clock(by).map_err(failed)?;
    }
    let now = state.now().map_err(failed)?;
    let offset = state.clock_offset().map_err(failed)?;
    if args.state.json {
        super::out_json(&ClockJson {
            now,
            clock_offset_seconds: offset.as_secs(),
        });
    } else {
        outln!("simulated now: {now}");
        outln!(
            "clock offset:  {} ahead of the wall clock",
            duration_text(offset)
        );
    }
    Ok(Exit::Ok)
}

fn run_account(args: &AccountArgs) -> Result<Exit, CliError> {
    let state = args.state.open(args.changes())?;
    let mut life = state.payout_life().map_err(failed)?;
    if args.changes() {
        life = args.apply(life);
        state.set_payout_life(life).map_err(failed)?;
    }
    if args.state.json {
        super::out_json(&life);
    } else {
        let expiry = match life.link_expiry_days {
            0 => "none (links do not expire)".to_string(),
            days => format!("{days} days after the order finished"),
        };
        outln!("link expiry:       {expiry}");
        outln!("claim share:       {}", life.claim_share);
        outln!("cancel share:      {}", life.cancel_share);
        outln!("claim within days: {}", life.claim_within_days);
    }
    Ok(Exit::Ok)
}

fn run_payouts(args: &PayoutsArgs) -> Result<Exit, CliError> {
    let state = args.state.open(false)?;
    let census = state.payouts().map_err(failed)?;
    if args.state.json {
        super::out_json(&census);
    } else {
        outln!("simulated now: {}", census.now);
        for status in PayoutStatus::ALL {
            outln!("{:<10} {:>8}", status.as_str(), census.count(status));
        }
    }
    Ok(Exit::Ok)
}

async fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    if !args.addr.ip().is_loopback() && !args.public {
        bail!(
            "refusing to listen on {}: it is not a loopback address\nhelp: listen on 127.0.0.1, or add --public to serve the simulator to other machines",
            args.addr
        );
    }
    let mut config = args.config();
    if let Some(file) = &args.refuse_emails {
        config.refuse_emails = refused_emails(file)?;
    }
    let shown_key = if config.keys.iter().any(|k| k == DEFAULT_KEY) {
        DEFAULT_KEY.to_string()
    } else {
        // Keys given with --key are the caller's; they are not echoed.
        "(the key given with --key)".to_string()
    };
    let sim = crate::sim::start(config, args.addr)
        .await
        .context("cannot start the simulator")?;
    let stop = stop_signal();
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "paybatch simulator (SIMULATED playground) listening on {}",
            sim.base_url()
        )?;
        writeln!(out, "api key: {shown_key}")?;
        out.flush()?;
    }
    stop.await;
    sim.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_map_to_the_configuration() {
        use clap::Parser;
        #[derive(Parser)]
        struct Serve {
            #[command(flatten)]
            args: ServeArgs,
        }
        let parse = |args: &[&str]| {
            Serve::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
                .map(|s| s.args.config())
        };
        let defaults = parse(&[]).unwrap();
        assert_eq!(defaults.rate_limit_per_minute, 300);
        assert!(!defaults.cards_accepted && !defaults.list_metadata && !defaults.version_2023);
        assert!(!defaults.ordering_restricted);
        assert_eq!(defaults.faults.timeout_rate, 0.0);
        // The old flag is still accepted: the published list is the default.
        assert!(!parse(&["--list-without-metadata"]).unwrap().list_metadata);
        assert!(parse(&["--list-with-metadata"]).unwrap().list_metadata);
        assert!(parse(&["--list-with-metadata", "--list-without-metadata"]).is_err());
        let cards = parse(&["--cards-accepted"]).unwrap();
        assert!(cards.cards_accepted);
        assert_eq!(cards.cards, [DEFAULT_CARD]);
        let card = parse(&["--card", "card_x"]).unwrap();
        assert!(card.cards_accepted);
        assert_eq!(card.cards, ["card_x"]);
        let asked = parse(&[
            "--version-2023-07-27",
            "--ordering-restricted",
            "--timeout-rate",
            "0.25",
        ])
        .unwrap();
        assert!(asked.version_2023 && asked.ordering_restricted);
        assert_eq!(asked.faults.timeout_rate, 0.25);
        assert_eq!(defaults.seed_orders, None);
        let seeded = parse(&["--seed-orders", "20000", "--seed-days", "10"]).unwrap();
        assert_eq!(
            seeded.seed_orders,
            Some(SeedOrders {
                count: 20000,
                span: Duration::from_secs(10 * 24 * 3600),
            })
        );
        assert!(parse(&["--seed-days", "10"]).is_err());
        assert_eq!(seeded.seed_paybatch_items, None);
        let theirs = parse(&["--seed-orders", "10", "--seed-paybatch-items", "200"]).unwrap();
        assert_eq!(theirs.seed_paybatch_items, Some(200));
        assert!(parse(&["--seed-orders", "10", "--seed-paybatch-items", "201"]).is_err());
        assert!(parse(&["--seed-paybatch-items", "20"]).is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(
            parse_duration("30d").unwrap(),
            Duration::from_secs(30 * 86400)
        );
        assert_eq!(
            parse_duration("1d12h").unwrap(),
            Duration::from_secs(36 * 3600)
        );
        assert_eq!(parse_duration("90m").unwrap(), Duration::from_secs(5400));
        for bad in ["", "30", "d", "3w", "-1d", "1.5d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(
            duration_text(Duration::from_secs(30 * 86400 + 61)),
            "30d 1m 1s"
        );
        assert_eq!(duration_text(Duration::ZERO), "0s");
    }

    #[test]
    fn payout_life_flags_map_to_the_configuration() {
        use clap::Parser;
        #[derive(Parser)]
        struct Serve {
            #[command(flatten)]
            args: ServeArgs,
        }
        let parse = |args: &[&str]| {
            Serve::try_parse_from(std::iter::once("serve").chain(args.iter().copied()))
                .map(|s| s.args.config())
        };
        let defaults = parse(&[]).unwrap();
        assert_eq!(defaults.payout_life, PayoutLife::default());
        assert_eq!(defaults.clock_offset, None);
        let set = parse(&[
            "--link-expiry-days",
            "0",
            "--claim-share",
            "0.5",
            "--cancel-share",
            "0.1",
            "--claim-within-days",
            "3",
            "--clock-offset",
            "2d",
        ])
        .unwrap();
        assert_eq!(
            set.payout_life,
            PayoutLife {
                claim_share: 0.5,
                cancel_share: 0.1,
                claim_within_days: 3,
                link_expiry_days: 0,
            }
        );
        assert_eq!(set.clock_offset, Some(Duration::from_secs(2 * 86400)));
        assert_eq!(defaults.faults.flips, Flips::default());
        let flips = parse(&["--expired-ahead-rate", "0.25", "--expired-once-rate", "1"]).unwrap();
        assert_eq!(
            flips.faults.flips,
            Flips {
                expired_ahead_rate: 0.25,
                expired_once_rate: 1.0,
            }
        );
    }

    #[test]
    fn balances_parse() {
        assert_eq!(
            parse_balance("usd=12.50").unwrap(),
            ("USD".to_string(), Decimal::from_str("12.50").unwrap())
        );
        assert!(parse_balance("USD").is_err());
        assert!(parse_balance("US=1").is_err());
        assert!(parse_balance("USD=-1").is_err());
        assert!(parse_balance("USD=ten").is_err());
    }
}
