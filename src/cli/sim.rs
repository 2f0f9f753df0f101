//! `paybatch sim serve`: runs the playground simulator as a server of its own, so that paybatch
//! (or curl, or another tool) can be pointed at it. It answers like the service's playground,
//! with the state in memory or in a SQLite file, and with faults that can be switched on.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use rust_decimal::Decimal;

use crate::sim::{DEFAULT_CARD, DEFAULT_KEY, Faults, Hostile, SeedOrders, SimConfig};

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    pub command: SimCommand,
}

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Serve the simulated playground on an address until Ctrl-C or SIGTERM.
    Serve(ServeArgs),
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
                },
            },
        }
    }
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
pub async fn execute(args: SimArgs) -> anyhow::Result<()> {
    match args.command {
        SimCommand::Serve(serve) => run_serve(serve).await,
    }
}

async fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    if !args.addr.ip().is_loopback() && !args.public {
        bail!(
            "refusing to listen on {}: it is not a loopback address\nhelp: listen on 127.0.0.1, or add --public to serve the simulator to other machines",
            args.addr
        );
    }
    let config = args.config();
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
