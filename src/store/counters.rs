//! The store's counters: the one operation every store must do atomically (read the checks'
//! counts, decide, record), taking back one request, charging a file's size to the rules of
//! bytes after the answer, reading counts, and the two counts the owner's controls keep (a log
//! line's throttle, refusals towards an automatic block).

use crate::core::decision::Decision;
use crate::core::rule::{Algorithm, KeyKind, Rule};
use crate::store::{Check, StoreError};
use crate::support::defaults;

/// A slot of the data directory's `refusals` file, as a refusal was recalled from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecalledSlot {
    /// Its place in the file.
    pub at: u64,
    pub bytes: Vec<u8>,
}

/// Rate-limit counters shared by every process of a site.
pub trait Counters {
    /// Reads every check's counter, decides with the limiter and records the request when it
    /// is admitted, as one atomic step: concurrent requests never see each other's halves.
    /// The same as [`Counters::decide_own_first`] with every check the client's own.
    fn decide(&self, checks: &[Check<'_>]) -> Result<Decision, StoreError> {
        self.decide_own_first(checks, checks.len())
    }

    /// Decides a request whose first `own` checks are the client's own rules, the rest the
    /// site's (the spend limits, the provider's rates), as `limiter::decide_own_first` does:
    /// when the client's own checks refuse, the refusal is theirs alone, and the other checks
    /// are neither decided, locked nor counted (the file store does not open their files, the
    /// Redis script does not read their keys; MySQL's one unlocked read fetches their rows
    /// without deciding by them); the refusal's statuses then cover the first `own` checks
    /// only. Otherwise every check decides and records at once, as one atomic step, as
    /// [`Counters::decide`]. A rule of bytes counts nothing here (the size is not known): it
    /// admits while its count is below its limit.
    fn decide_own_first(&self, checks: &[Check<'_>], own: usize) -> Result<Decision, StoreError> {
        self.decide_sized(checks, own, None)
    }

    /// [`Counters::decide_own_first`] for a request whose file is known to be `size` bytes
    /// before the paid call: a rule of bytes admits it only when the whole file fits, and
    /// counts it (`limiter::decide_sized`), in the same atomic step.
    fn decide_sized(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
    ) -> Result<Decision, StoreError>;

    /// Takes back one request admitted at `at_ms` (the decision's time) from every check's
    /// key of requests, if its window still holds it: for a paid call that never reached the
    /// provider. A rule of bytes keeps what it counted.
    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError>;

    /// Adds a file of `size` bytes, admitted at `at_ms` with its size unknown, to every check
    /// of bytes whose window still holds the request (`limiter::charged`): an atomic increment
    /// of each such key, never a second decision, so the count may pass the limit by this file
    /// and the next request is refused. Checks of requests are not touched.
    fn charge(&self, checks: &[Check<'_>], at_ms: u64, size: u64) -> Result<(), StoreError>;

    /// How many requests each check's key counts now, counting nothing: what `stats` shows as
    /// a spend limit's use.
    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError>;

    /// A refusal of the client's own checks (`own`: a request's first checks) that this
    /// process or server remembers ([`Counters::remember_own`]) and that still holds at
    /// `now_ms`: the store's answer without asking it (nor the cache before it). None when
    /// nothing is remembered; a store itself remembers nothing.
    fn recall_own(&self, _own: &[Check<'_>], _now_ms: u64) -> Option<Decision> {
        None
    }

    /// Where the last refusal [`Counters::recall_own`] found was kept, and its bytes: what a
    /// CGI process's kept answer rests on (`gateway::replay`). None where refusals are
    /// remembered in memory, or none was recalled.
    fn recalled_from(&self) -> Option<RecalledSlot> {
        None
    }

    /// Remembers `refusal`, the store's refusal of a request by its own checks `own` alone,
    /// asked at `asked_ms` (before the store decided, so that it is never taken to last
    /// longer than it does). A store itself remembers nothing.
    fn remember_own(&self, _own: &[Check<'_>], _asked_ms: u64, _refusal: &Decision) {}

    /// True the first time `key` is asked within `secs`, across every process sharing the
    /// store: a log line written at most once a while. True also when the store cannot tell
    /// (a line too many beats a line lost).
    fn first_within(&self, key: &str, secs: u32) -> bool {
        let once = Count {
            name: "log",
            kind: KeyKind::Global,
            template: defaults::KEY_TEMPLATE_GLOBAL,
            limit: 1,
            window_secs: secs,
        };
        !matches!(once.decide(self, key), Some(Ok(Decision::Refuse { .. })))
    }

    /// Counts one event under `key` in a fixed window of `window_secs`: true for the event
    /// that makes the count reach `limit` (exactly once a window), false for the others and
    /// when the store cannot count.
    fn count_reaches(&self, key: &str, limit: u32, window_secs: u32) -> bool {
        let count = Count {
            name: "count",
            kind: KeyKind::Ip,
            template: defaults::KEY_TEMPLATE_IP,
            limit,
            window_secs,
        };
        match count.decide(self, key) {
            Some(Ok(Decision::Admit { statuses, .. })) => {
                statuses.first().is_some_and(|s| s.remaining == 0)
            }
            _ => false,
        }
    }
}

/// A fixed-window count the store keeps for the owner's controls, under a key of its own.
struct Count<'a> {
    name: &'a str,
    kind: KeyKind,
    template: &'a str,
    limit: u32,
    window_secs: u32,
}

impl Count<'_> {
    /// Counts one under `key`; None when no such rule can be (a zero limit or window).
    fn decide<C: Counters + ?Sized>(
        &self,
        counters: &C,
        key: &str,
    ) -> Option<Result<Decision, StoreError>> {
        let rule = Rule::new(
            self.name,
            self.kind,
            Algorithm::Fixed,
            self.limit,
            self.window_secs,
            self.template,
        )?;
        let check = Check {
            rule: &rule,
            key: key.to_owned(),
        };
        Some(counters.decide(&[check]))
    }
}
