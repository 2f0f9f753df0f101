//! The service's catalog, cached in the ledger database per environment, refreshed when older
//! than a TTL (`paybatch catalog sync` forces it).

use std::time::Duration;

use crate::api::client::ProductQuery;
use crate::api::{ApiError, Client, Product};
use crate::ledger::{Ledger, LedgerError};

/// Default age after which the cached catalog is fetched again.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("cannot read the catalog from the service: {0}")]
    Api(#[from] ApiError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// Where the catalog in hand came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogSource {
    Cache,
    Service,
}

/// Whether the catalog may come from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fetch {
    /// From the cache when it is younger than the time to live.
    IfStale,
    /// From the service, whatever the cache holds.
    Always,
}

/// The catalog of `environment`: from the cache when it is younger than `ttl` (unless
/// [`Fetch::Always`]), else fetched through all pages and cached.
pub async fn load(
    ledger: &mut Ledger,
    client: &Client,
    environment: &str,
    ttl: Duration,
    fetch: Fetch,
) -> Result<(Vec<Product>, CatalogSource), CatalogError> {
    if fetch == Fetch::IfStale
        && let Some(parsed) = fresh_cache(ledger, environment, ttl)?
    {
        return Ok((parsed, CatalogSource::Cache));
    }
    let products = fetch_all(client).await?;
    store(ledger, environment, &products)?;
    Ok((products, CatalogSource::Service))
}

/// The cached catalog of `environment` when it is younger than `ttl` and every product of it
/// reads back.
pub fn fresh_cache(
    ledger: &Ledger,
    environment: &str,
    ttl: Duration,
) -> Result<Option<Vec<Product>>, LedgerError> {
    let Some((fetched_at, products)) = ledger.cached_catalog(environment)? else {
        return Ok(None);
    };
    let fresh = chrono::DateTime::parse_from_rfc3339(&fetched_at)
        .map(|t| {
            let age = chrono::Utc::now().signed_duration_since(t);
            age.to_std().map(|a| a < ttl).unwrap_or(true)
        })
        .unwrap_or(false);
    let parsed: Option<Vec<Product>> = products
        .iter()
        .map(|json| serde_json::from_str(json).ok())
        .collect();
    Ok(parsed.filter(|_| fresh))
}

/// The service's catalog, through all pages.
pub async fn fetch_all(client: &Client) -> Result<Vec<Product>, ApiError> {
    client
        .all_products(&ProductQuery {
            limit: Some(500),
            ..Default::default()
        })
        .await
}

/// Caches `products` as the catalog of `environment`.
pub fn store(
    ledger: &mut Ledger,
    environment: &str,
    products: &[Product],
) -> Result<(), LedgerError> {
    let rows: Vec<(String, String)> = products
        .iter()
        .filter_map(|p| serde_json::to_string(p).ok().map(|j| (p.code.clone(), j)))
        .collect();
    ledger.store_catalog(environment, &rows)
}
