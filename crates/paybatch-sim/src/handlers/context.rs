//! The context of a `/v2` request: latency, counting, settling of due orders, authentication
//! (`X-Api-Key`) and the dated version (`X-Api-Version`).

use std::time::Duration;

use axum::http::HeaderMap;

use super::answers::{Answered, error, internal};
use crate::{ApiVersion, Sim, fingerprint};

pub(super) struct Ctx {
    pub(super) fp: String,
    pub(super) version: ApiVersion,
}

pub(super) async fn pause(d: Duration) {
    if !d.is_zero() {
        tokio::time::sleep(d).await;
    }
}

pub(super) fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<Result<&'a str, ()>> {
    headers.get(name).map(|v| v.to_str().map_err(|_| ()))
}

/// Counts the request, settles due orders, authenticates and reads the version.
pub(super) fn begin(sim: &Sim, headers: &HeaderMap, endpoint: &str) -> Answered<Ctx> {
    sim.stat(|s| *s.requests.entry(endpoint.to_string()).or_default() += 1);
    sim.settle().map_err(internal)?;
    let key = match header_text(headers, "x-api-key") {
        None => {
            return Err(error(
                401,
                "unauthorized",
                "The X-Api-Key header is missing.",
            ));
        }
        Some(Err(())) => {
            return Err(error(
                401,
                "invalid_api_key",
                "The API key holds characters that are not valid in a key.",
            ));
        }
        Some(Ok(k)) if k.trim().is_empty() => {
            return Err(error(401, "unauthorized", "The X-Api-Key header is empty."));
        }
        Some(Ok(k)) => k,
    };
    if key.starts_with("wg") {
        return Err(error(
            401,
            "invalid_api_key",
            "A production API key (prefix wg) was used against the playground; use a playground key (prefix xx).",
        ));
    }
    if !sim.config.keys.iter().any(|k| k == key) {
        return Err(error(
            401,
            "invalid_api_key",
            "The API key is not valid (unknown or revoked).",
        ));
    }
    let version = match header_text(headers, "x-api-version") {
        None => ApiVersion::V2024,
        Some(Ok("2024-02-05")) => ApiVersion::V2024,
        Some(Ok("2023-07-27")) if sim.config.version_2023 => ApiVersion::V2023,
        Some(Ok("2023-07-27")) => {
            return Err(error(
                410,
                "version_removed",
                "API version 2023-07-27 is no longer supported and has been removed (since 2025-11-14).",
            ));
        }
        Some(Ok(other)) => {
            return Err(error(
                400,
                "invalid_version",
                format!("`{other}` is not an API version: use 2024-02-05."),
            ));
        }
        Some(Err(())) => {
            return Err(error(
                400,
                "invalid_version",
                "The X-Api-Version header is not readable text.",
            ));
        }
    };
    Ok(Ctx {
        fp: fingerprint(key),
        version,
    })
}

/// Latency, then [`begin`].
pub(super) async fn enter(sim: &Sim, headers: &HeaderMap, endpoint: &str) -> Answered<Ctx> {
    pause(sim.chance.latency(&sim.config.faults)).await;
    begin(sim, headers, endpoint)
}
