//! Repeats across the batches of one ledger, found before anything of a batch is sent:
//!
//! - a **repeat**: a row whose `reference`, as a person reads it (in any case, width and
//!   look-alike letters: [`crate::reference::fold_reference`]), another batch of the same
//!   environment paid (COMPLETED), has in flight (SUBMITTED), in doubt or planned (PLANNED), or
//!   holds for a person (MISMATCH);
//! - a **repeated file**: a new batch made from a file whose SHA-256 another batch was made of;
//! - a **likely repeat** (a warning, never a refusal: weekly bonuses repeat): a row that pays
//!   a recipient (email) the same products, face value and currency as a row another batch
//!   paid within the last [`ALIKE_WINDOW_DAYS`] days; or a row whose reference another batch
//!   has as a repeat would, but for `-`, `_` and spaces (`EMP_1` for `EMP-1`:
//!   [`crate::reference::loose_reference`]).
//!
//! A run refuses repeats (exit 3) unless the person running it says what to do with them:
//! `--allow-repeats` pays them anyway (recorded on the batch), `--skip-repeats` pays only the
//! other rows (the repeats are recorded INVALID, with the batch that has them).
//!
//! What the other batches hold is loaded once, before the file is read ([`Earlier`]): their
//! references (by the hash of their loose forms) and the recipients they paid as 32-bit hashes
//! (4 bytes a row, from indexes, no row read), so that checking a row costs a look-up; a row
//! whose hash is found is then compared with the ledger's rows themselves ([`Checker`]).

mod check;
mod earlier;
mod findings;
mod hashes;
mod service;

pub use check::{Checker, Noticed};
pub use earlier::{ALIKE_WINDOW_DAYS, Earlier, Found};
pub use findings::{
    EarlierState, LikelyReference, LikelyRepeat, OnRepeat, Repeat, RepeatedFile, Repeats,
};
pub use service::{LedgerAccess, ServiceSync, check_service, sync_service};

/// What a batch about to send is checked against: the ledger's other batches, and the service's
/// orders this ledger does not know, read since its last read ([`sync_service`]) and refused
/// when they are this batch's ([`check_service`]). Made before every run that may send: a new
/// batch, a resume, a retry, a reissue, rows appended.
pub async fn against_service(
    ledger: &mut crate::ledger::Ledger,
    client: &crate::api::Client,
    base_url: &str,
    batch: &str,
    existing: Option<&crate::ledger::BatchRecord>,
    input: &std::path::Path,
    allow_untold: bool,
) -> Result<(Earlier, ServiceSync), crate::ops::error::OpError> {
    let sync = sync_service(
        &std::sync::Mutex::new(&mut *ledger),
        client,
        base_url,
        allow_untold,
    )
    .await?;
    against_read(sync, ledger, base_url, batch, existing, input)
}

/// [`against_service`] once the service's order list is read (`sync`).
pub fn against_read(
    sync: ServiceSync,
    ledger: &mut crate::ledger::Ledger,
    base_url: &str,
    batch: &str,
    existing: Option<&crate::ledger::BatchRecord>,
    input: &std::path::Path,
) -> Result<(Earlier, ServiceSync), crate::ops::error::OpError> {
    let at = check_service(sync, ledger, base_url, batch, input)?;
    let earlier = Earlier::load(ledger, base_url, existing.map(|b| b.id))?
        .with_service(ledger, base_url, batch)?;
    Ok((earlier, at))
}
