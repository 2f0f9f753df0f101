//! `paybatch catalog sync|list`: the service's catalog as cached in the ledger database. `list`
//! creates no ledger: without one, it reads the catalog from the service and caches nothing.

use clap::{Args, Subcommand};

use crate::api::client::ProductQuery;
use crate::api::models::{PayoutType, Product};
use crate::catalog::{self, CatalogSource};
use crate::environment::Connection;
use crate::exit::Exit;
use crate::ledger::Ledger;

use super::{CliError, ServiceArgs};

#[derive(Debug, Args)]
pub struct CatalogArgs {
    #[command(subcommand)]
    pub command: CatalogCommand,
}

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Fetch the whole catalog (all pages) and replace the local cache.
    #[command(after_help = super::man::examples_help("catalog sync"))]
    Sync {
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// List products from the cache (fetched first when missing or stale); without a ledger,
    /// from the service, caching nothing.
    #[command(after_help = super::man::examples_help("catalog list"))]
    List {
        #[command(flatten)]
        service: ServiceArgs,
        /// Only products redeemable in this country (ISO 3166 alpha-2).
        #[arg(long)]
        country: Option<String>,
        /// Only products in this category.
        #[arg(long)]
        category: Option<String>,
        /// Only this payout type: gift_card, subscription or payment.
        #[arg(long = "type", value_name = "TYPE")]
        payout_type: Option<String>,
        /// Only orderable products.
        #[arg(long)]
        orderable: bool,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

pub async fn execute(args: CatalogArgs) -> Result<Exit, CliError> {
    match args.command {
        CatalogCommand::Sync { service } => sync(&service).await,
        CatalogCommand::List {
            service,
            country,
            category,
            payout_type,
            orderable,
            json,
        } => {
            let filter = Filter {
                country,
                category,
                payout_type: parse_type(payout_type.as_deref())?,
                orderable,
            };
            list(&service, &filter, json).await
        }
    }
}

/// `catalog sync`: fetches the whole catalog and replaces the cache (creating the ledger).
async fn sync(service: &ServiceArgs) -> Result<Exit, CliError> {
    let environment = service.environment()?;
    let identity = environment.identity();
    let mut ledger = Ledger::open(&service.ledger)?;
    let conn = Connection::open(
        environment,
        service.api_key_file.as_deref(),
        &service.ledger,
    )
    .await?;
    let (products, source) = catalog::load(
        &mut ledger,
        &conn.client,
        &identity,
        catalog::DEFAULT_TTL,
        catalog::Fetch::Always,
    )
    .await
    .map_err(catalog_failure)?;
    errln!(
        "catalog: {} products {} for {identity}",
        products.len(),
        if source == CatalogSource::Service {
            "fetched and cached"
        } else {
            "cached"
        }
    );
    Ok(Exit::Ok)
}

/// The catalog could not be read from the service.
fn catalog_failure(e: impl std::fmt::Display) -> CliError {
    CliError::new(
        Exit::Unexpected,
        e.to_string(),
        Some("check the key and environment with `paybatch ping`"),
    )
}

/// What `catalog list` keeps.
struct Filter {
    country: Option<String>,
    category: Option<String>,
    payout_type: Option<PayoutType>,
    orderable: bool,
}

impl Filter {
    fn keeps(&self, p: &Product) -> bool {
        let same = |a: &str, b: &str| a.eq_ignore_ascii_case(b);
        (!self.orderable || p.is_orderable)
            && self.payout_type.is_none_or(|t| p.payout_type == t)
            && self
                .country
                .as_deref()
                .is_none_or(|c| p.countries_redeemable_in.iter().any(|x| same(x, c)))
            && self.category.as_deref().is_none_or(|c| {
                p.categories
                    .as_ref()
                    .is_some_and(|cs| cs.iter().any(|x| same(x, c)))
            })
    }
}

/// `--type`: gift_card, subscription or payment; a usage error for anything else.
fn parse_type(given: Option<&str>) -> Result<Option<PayoutType>, CliError> {
    match given.map(str::to_ascii_lowercase).as_deref() {
        None => Ok(None),
        Some("gift_card") | Some("giftcard") => Ok(Some(PayoutType::GiftCard)),
        Some("subscription") => Ok(Some(PayoutType::Subscription)),
        Some("payment") => Ok(Some(PayoutType::Payment)),
        Some(other) => Err(CliError::usage(
            format!("unknown payout type `{other}`"),
            "use gift_card, subscription or payment",
        )),
    }
}

/// The products of the catalog: from the ledger's cache (fetched and cached when missing or
/// stale); without a ledger, fetched from the service and not cached, so that listing creates
/// no ledger.
async fn products(service: &ServiceArgs) -> Result<Vec<Product>, CliError> {
    let environment = service.environment()?;
    let identity = environment.identity();
    let conn = Connection::open_for_reading(
        environment,
        service.api_key_file.as_deref(),
        &service.ledger,
    )
    .await?;
    if !service.ledger.exists() {
        errln!(
            "no ledger at {}: the catalog is read from the service and not cached (`paybatch catalog sync` caches it)",
            service.ledger.display()
        );
        let query = ProductQuery {
            limit: Some(500),
            ..Default::default()
        };
        return conn
            .client
            .all_products(&query)
            .await
            .map_err(catalog_failure);
    }
    let mut ledger = Ledger::open(&service.ledger)?;
    let ttl = catalog::DEFAULT_TTL;
    let (products, _) = catalog::load(
        &mut ledger,
        &conn.client,
        &identity,
        ttl,
        catalog::Fetch::IfStale,
    )
    .await
    .map_err(catalog_failure)?;
    Ok(products)
}

/// `catalog list`: the products, filtered, as a table or JSON.
async fn list(service: &ServiceArgs, filter: &Filter, json: bool) -> Result<Exit, CliError> {
    let products = products(service).await?;
    let list: Vec<&Product> = products.iter().filter(|p| filter.keeps(p)).collect();
    if json {
        let value = serde_json::to_value(&list).map_err(|e| CliError::unexpected(e.to_string()))?;
        super::out_line(&super::json_text(&value, true));
        return Ok(Exit::Ok);
    }
    outln!(
        "{:<18} {:<13} {:<4} {:<9} {:<22} NAME",
        "CODE",
        "TYPE",
        "CUR",
        "ORDERABLE",
        "VALUES"
    );
    for p in list {
        outln!(
            "{:<18} {:<13} {:<4} {:<9} {:<22} {}",
            p.code,
            p.payout_type.as_str(),
            p.currency,
            if p.is_orderable { "yes" } else { "no" },
            describe_values(p),
            p.name
        );
    }
    Ok(Exit::Ok)
}

fn describe_values(p: &Product) -> String {
    if let Some(d) = p.denominations() {
        if let Some(list) = &d.available_list {
            return list
                .iter()
                .map(|v| v.0.to_string())
                .collect::<Vec<_>>()
                .join(",");
        }
        if let (Some(min), Some(max)) = (d.minimum_value, d.maximum_value) {
            return format!("{min}..{max}");
        }
    }
    let plans = p.subscription_plans();
    if !plans.is_empty() {
        return plans
            .iter()
            .map(|pl| pl.price.to_string())
            .collect::<Vec<_>>()
            .join(",");
    }
    "-".into()
}
