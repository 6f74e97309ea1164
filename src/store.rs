//! Where counters live: the one operation every store must do atomically, and its errors. The
//! stores themselves are in the modules below; `open` builds the one the configuration names.

pub mod file;
pub mod held;
pub mod memory;
pub mod mysql;
pub mod open;
pub mod redis;
pub mod settings;
pub mod spool;

use std::fmt;
use std::time::Duration;

use crate::core::decision::Decision;
use crate::core::journal;
use crate::core::rule::Rule;

/// One rule applied to one key, e.g. rule `ip` on `resolve:ip:203.0.113.7`.
#[derive(Debug, Clone)]
pub struct Check<'a> {
    pub rule: &'a Rule,
    pub key: String,
}

/// What a sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    pub scanned: u64,
    pub removed: u64,
    /// Damaged entries found and moved aside.
    pub damaged: u64,
    /// False when the time budget ran out before everything was looked at.
    pub complete: bool,
}

/// A store of rate-limit counters.
pub trait Store {
    /// Reads every check's counter, decides with the limiter and records the request when it
    /// is admitted, as one atomic step: concurrent requests never see each other's halves.
    fn decide(&self, checks: &[Check<'_>]) -> Result<Decision, StoreError>;

    /// Says that a request begins: a store with a time bound per request (MySQL) shares it
    /// among all of that request's operations from here on. Commands that are not requests
    /// never call it, and each of their operations has the bound to itself.
    fn begin_request(&self) {}

    /// Removes keys whose windows ended long ago, spending at most `budget` (None: no bound).
    fn sweep(&self, budget: Option<Duration>) -> Result<SweepReport, StoreError>;

    /// Makes sure the store is reachable and writable without counting anything, and says
    /// what it is.
    fn probe(&self) -> Result<String, StoreError>;

    /// Takes back one request admitted at `at_ms` (the decision's time) from every check's
    /// key, if its window still holds it: for a paid call that never reached the provider.
    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError>;

    /// A cached value, if one is stored under `key` and has not expired.
    fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Stores `value` under `key` for `ttl`.
    fn cache_put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError>;

    /// Atomically stores `value` under `key` for `ttl` only if nothing live is there: true when
    /// this call stored it. Used to claim a link that is being resolved.
    fn cache_claim(&self, key: &str, value: &[u8], ttl: Duration) -> Result<bool, StoreError>;

    /// Removes the entry under `key` if it still holds `value`.
    fn cache_release(&self, key: &str, value: &[u8]) -> Result<(), StoreError>;

    /// How many requests each check's key counts now, counting nothing: what `stats` shows as
    /// a spend limit's use.
    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError>;

    /// Adds one request's entry to the usage journal: one to each of its hour's totals and
    /// one to its client's count, all of it or none, exact under concurrency. Sweeps remove
    /// what [`journal::Expiry`] lets go.
    fn journal_add(&self, entry: &journal::Entry) -> Result<(), StoreError>;

    /// Adds the entry without waiting on a server: a spooled store (see [`spool`]) appends it
    /// to its local file for a later request to write; the others add it as `journal_add` does.
    /// What an idle or exiting FastCGI process uses.
    fn journal_keep(&self, entry: &journal::Entry) -> Result<(), StoreError> {
        self.journal_add(entry)
    }

    /// The journal's rows for the hours `from..to`, in any order.
    fn journal_rows(&self, from_hour: u32, to_hour: u32) -> Result<Vec<journal::Row>, StoreError>;

    /// Keeps an `ACTION NEEDED` note; only the newest [`journal::KEEP_NOTES`] are kept.
    fn journal_note(&self, note: &journal::Note) -> Result<(), StoreError>;

    /// The kept notes, newest first.
    fn journal_notes(&self) -> Result<Vec<journal::Note>, StoreError>;

    /// Puts whatever the store holds back (a FastCGI process's journal entries, see [`held`])
    /// where it is kept, without waiting on a server; the others hold nothing back.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Inside the `impl Store` of a store in front of another (`self.inner`): the methods named,
/// passed on unchanged, e.g. `pass_on!(sweep, probe);`.
macro_rules! pass_on {
    ($($method:ident),* $(,)?) => { $( $crate::store::pass_on!(@one $method); )* };
    (@one decide) => {
        fn decide(
            &self,
            checks: &[$crate::store::Check<'_>],
        ) -> Result<$crate::core::decision::Decision, $crate::store::StoreError> {
            self.inner.decide(checks)
        }
    };
    (@one begin_request) => {
        fn begin_request(&self) {
            self.inner.begin_request();
        }
    };
    (@one sweep) => {
        fn sweep(
            &self,
            budget: Option<std::time::Duration>,
        ) -> Result<$crate::store::SweepReport, $crate::store::StoreError> {
            self.inner.sweep(budget)
        }
    };
    (@one probe) => {
        fn probe(&self) -> Result<String, $crate::store::StoreError> {
            self.inner.probe()
        }
    };
    (@one refund) => {
        fn refund(
            &self,
            checks: &[$crate::store::Check<'_>],
            at_ms: u64,
        ) -> Result<(), $crate::store::StoreError> {
            self.inner.refund(checks, at_ms)
        }
    };
    (@one cache_get) => {
        fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, $crate::store::StoreError> {
            self.inner.cache_get(key)
        }
    };
    (@one cache_put) => {
        fn cache_put(
            &self,
            key: &str,
            value: &[u8],
            ttl: std::time::Duration,
        ) -> Result<(), $crate::store::StoreError> {
            self.inner.cache_put(key, value, ttl)
        }
    };
    (@one cache_claim) => {
        fn cache_claim(
            &self,
            key: &str,
            value: &[u8],
            ttl: std::time::Duration,
        ) -> Result<bool, $crate::store::StoreError> {
            self.inner.cache_claim(key, value, ttl)
        }
    };
    (@one cache_release) => {
        fn cache_release(&self, key: &str, value: &[u8]) -> Result<(), $crate::store::StoreError> {
            self.inner.cache_release(key, value)
        }
    };
    (@one used) => {
        fn used(
            &self,
            checks: &[$crate::store::Check<'_>],
        ) -> Result<Vec<u32>, $crate::store::StoreError> {
            self.inner.used(checks)
        }
    };
    (@one journal_note) => {
        fn journal_note(
            &self,
            note: &$crate::core::journal::Note,
        ) -> Result<(), $crate::store::StoreError> {
            self.inner.journal_note(note)
        }
    };
    (@one journal_notes) => {
        fn journal_notes(&self) -> Result<Vec<$crate::core::journal::Note>, $crate::store::StoreError> {
            self.inner.journal_notes()
        }
    };
}
pub(crate) use pass_on;

/// What kind of failure a store had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// The store could not be reached or written (missing directory, permissions, full disk).
    Unavailable,
    /// Stored data could not be read back.
    Corrupt,
}

/// A store failure, with a detail meant for the owner's log (never for the client).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    pub kind: StoreErrorKind,
    pub detail: String,
}

impl StoreError {
    pub fn unavailable(detail: impl Into<String>) -> StoreError {
        StoreError {
            kind: StoreErrorKind::Unavailable,
            detail: detail.into(),
        }
    }

    pub fn corrupt(detail: impl Into<String>) -> StoreError {
        StoreError {
            kind: StoreErrorKind::Corrupt,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}
