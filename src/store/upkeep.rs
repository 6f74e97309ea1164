//! The store's upkeep: the bound of one request's time, sweeping what ended, and the probe
//! `resolve check` makes.

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
}
