//! The store's upkeep: the bound of one request's time, sweeping what ended, the probe
//! `resolve check` makes, and the shared keys a full store counts new clients by.

use std::time::Duration;

use crate::store::{StoreError, SweepReport};

/// What keeps a store in shape, apart from what it stores.
pub trait Upkeep {
    /// Says that a request begins: a store with a time bound per request (MySQL) shares it
    /// among all of that request's operations from here on. Commands that are not requests
    /// never call it, and each of their operations has the bound to itself.
    fn begin_request(&self) {}

    /// Removes keys whose windows ended long ago, spending at most `budget` (None: no bound).
    fn sweep(&self, budget: Option<Duration>) -> Result<SweepReport, StoreError>;

    /// Makes sure the store is reachable and writable without counting anything, and says
    /// what it is.
    fn probe(&self) -> Result<String, StoreError>;

    /// Whether new clients are counted by shared keys now, because the store is full (only
    /// the file store, which has a budget, ever folds).
    fn folding(&self) -> Result<Option<Folding>, StoreError> {
        Ok(None)
    }

    /// Removes the shared keys new clients were counted by; how many were removed.
    fn clear_folded(&self) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// New clients counted by shared (folded) keys now, because the store's room for clients' own
/// keys is full: what `resolve report`, `resolve stats` and the dashboard tell the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folding {
    /// Entries the store holds, and how many it may hold before it folds.
    pub entries: u64,
    pub cap: u64,
    /// The budget that sets it (`store.max_files`, `store.max_bytes`).
    pub max_files: u64,
    pub max_bytes: u64,
    /// Folded keys counting a window now, and how many each rule may have.
    pub folded_keys: u64,
    pub buckets: u64,
}
