//! A FastCGI process's store: the configured one, with two things a process that answers
//! request after request can keep in memory. Its journal entries are summed and written at
//! most once a second (one statement an hour instead of one per request). And a client it saw
//! refused is answered from memory for up to a second, never past the refusal's end, without
//! asking the store again: within a window counts only grow, so the refusal still holds.
//!
//! Only one thing makes a remembered refusal wrong: a paid call taken back (refunded) by
//! another process, which frees a place in the window. This process's own refunds forget what
//! it remembered; another's are seen within [`defaults::REFUSAL_MEMORY_MS`]. Nothing
//! remembered ever admits a request: admissions always go to the store, exact as before.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::rc::Rc;

use crate::core::clock::{Clock, SystemClock};
use crate::core::decision::Decision;
use crate::core::journal::{Batch, Entry, Row};
use crate::store::counters::Counters;
use crate::store::journal::Journal;
use crate::store::refusals::still_holds;
use crate::store::roles::Store;
use crate::store::{Check, StoreError, checks_key};
use crate::support::defaults;
use crate::support::log::{Level, Log, StderrLog};

/// A refusal as the store gave it, and when it was asked (by this process's clock, before the
/// store decided: the refusal is never taken to last longer than it does).
struct Remembered {
    asked_ms: u64,
    decision: Decision,
}

/// Journal entries waiting to be written, and since when the oldest waits.
#[derive(Default)]
struct Held {
    batch: Batch,
    since_ms: Option<u64>,
    /// What was held was last put aside without waiting on a server (idle): the next entry is
    /// written at once, so that the spool it went to is moved by a request.
    kept_aside: bool,
}

/// The counters with a FastCGI process's memory of refusals in front of them.
pub struct HeldCounters<C: Clock = SystemClock> {
    inner: Rc<dyn Counters>,
    clock: C,
    refusals: RefCell<HashMap<String, Remembered>>,
}

/// The journal with a FastCGI process's held entries in front of it.
pub struct HeldJournal<C: Clock = SystemClock> {
    inner: Rc<dyn Journal>,
    clock: C,
    held: RefCell<Held>,
    /// Where what could not be written as the process ended is said.
    log: StderrLog,
}

/// `store` with both of a FastCGI process's memories in front of it; `log` says what the
/// journal could not write as the process ended.
pub fn held(store: Store, log: StderrLog) -> Store {
    store
        .with_counters(|c| Rc::new(HeldCounters::new(c)))
        .with_journal(|j| Rc::new(HeldJournal::new(j).with_log(log)))
}

/// The name a refusal by the client's own checks is remembered under.
fn own_key(own: &[Check<'_>]) -> String {
    let mut key = checks_key(own);
    key.push_str("own");
    key
}

impl HeldCounters<SystemClock> {
    pub fn new(inner: Rc<dyn Counters>) -> HeldCounters<SystemClock> {
        HeldCounters::with_clock(inner, SystemClock)
    }
}

impl<C: Clock> HeldCounters<C> {
    pub fn with_clock(inner: Rc<dyn Counters>, clock: C) -> HeldCounters<C> {
        HeldCounters {
            inner,
            clock,
            refusals: RefCell::new(HashMap::new()),
        }
    }

    /// The remembered refusal of these checks as it stands now, if it still holds.
    fn recall(&self, key: &str, now_ms: u64) -> Option<Decision> {
        let mut refusals = self.refusals.borrow_mut();
        let r = refusals.get(key)?;
        let later = still_holds(&r.decision, r.asked_ms, now_ms);
        if later.is_none() {
            refusals.remove(key);
        }
        later
    }

    fn remember(&self, key: String, asked_ms: u64, decision: Decision) {
        let mut refusals = self.refusals.borrow_mut();
        if refusals.len() >= defaults::FASTCGI_REFUSALS_REMEMBERED {
            let now = self.clock.now_ms();
            refusals.retain(|_, r| {
                now.checked_sub(r.asked_ms)
                    .is_some_and(|e| e < defaults::REFUSAL_MEMORY_MS)
            });
            if refusals.len() >= defaults::FASTCGI_REFUSALS_REMEMBERED {
                refusals.clear();
            }
        }
        refusals.insert(key, Remembered { asked_ms, decision });
    }
}

impl<C: Clock> Counters for HeldCounters<C> {
    /// A refusal by the client's own checks alone is remembered as it came: its statuses cover
    /// those checks, whose windows alone can end it; a request of a known size only by one of
    /// the same size.
    fn decide_sized(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
    ) -> Result<Decision, StoreError> {
        let mut key = checks_key(checks);
        let _ = write!(key, "{}", own.min(checks.len()));
        if let Some(size) = size {
            let _ = write!(key, ":{size}");
        }
        let now = self.clock.now_ms();
        if let Some(refused) = self.recall(&key, now) {
            return Ok(refused);
        }
        let decision = self.inner.decide_sized(checks, own, size)?;
        if !decision.is_admit() {
            self.remember(key, now, decision.clone());
        }
        Ok(decision)
    }

    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError> {
        // A place freed: nothing remembered may stand in its way.
        self.refusals.borrow_mut().clear();
        self.inner.refund(checks, at_ms)
    }

    /// A charge only adds: every refusal remembered still stands.
    fn charge(&self, checks: &[Check<'_>], at_ms: u64, size: u64) -> Result<(), StoreError> {
        self.inner.charge(checks, at_ms, size)
    }

    /// What [`Counters::remember_own`] kept, under a name of its own (a key of
    /// `decide_sized` ends with a number).
    fn recall_own(&self, own: &[Check<'_>], now_ms: u64) -> Option<Decision> {
        self.recall(&own_key(own), now_ms)
    }

    fn remember_own(&self, own: &[Check<'_>], asked_ms: u64, refusal: &Decision) {
        if !refusal.is_admit() {
            self.remember(own_key(own), asked_ms, refusal.clone());
        }
    }

    /// Counts are read from the store: a count remembered would not be exact.
    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError> {
        self.inner.used(checks)
    }
}

impl HeldJournal<SystemClock> {
    pub fn new(inner: Rc<dyn Journal>) -> HeldJournal<SystemClock> {
        HeldJournal::with_clock(inner, SystemClock)
    }
}

impl<C: Clock> HeldJournal<C> {
    pub fn with_clock(inner: Rc<dyn Journal>, clock: C) -> HeldJournal<C> {
        HeldJournal {
            inner,
            clock,
            held: RefCell::new(Held::default()),
            log: StderrLog::default(),
        }
    }

    /// The log its last words go to.
    pub fn with_log(mut self, log: StderrLog) -> HeldJournal<C> {
        self.log = log;
        self
    }
}

impl<C: Clock> Journal for HeldJournal<C> {
    /// Holds the entry; writes what is held once the oldest has waited
    /// [`defaults::FASTCGI_JOURNAL_HOLD_MS`] or too much is held. A failed write is this call's
    /// error (the request's journal failure, logged as such); what it held is gone with it.
    fn journal_add(&self, entry: &Entry) -> Result<(), StoreError> {
        let now = self.clock.now_ms();
        let due = {
            let mut held = self.held.borrow_mut();
            held.batch.add(entry);
            let since = *held.since_ms.get_or_insert(now);
            now.checked_sub(since)
                .is_none_or(|waited| waited >= defaults::FASTCGI_JOURNAL_HOLD_MS)
                || held.batch.len() >= defaults::FASTCGI_JOURNAL_HOLD_ROWS
                || held.kept_aside
        };
        if due { self.write_held(false) } else { Ok(()) }
    }

    /// What is held is written first: the figures read include this process's requests.
    fn journal_rows(&self, from_hour: u32, to_hour: u32) -> Result<Vec<Row>, StoreError> {
        self.write_held(false)?;
        self.inner.journal_rows(from_hour, to_hour)
    }

    /// Puts the held entries aside without waiting on a server (an idle process, one that
    /// exits): a store on a server keeps them in its spool (see [`crate::store::spool`]); what
    /// the spool does not take stays held.
    fn flush(&self) -> Result<(), StoreError> {
        self.write_held(true)
    }
}

impl<C: Clock> HeldJournal<C> {
    /// Writes the held entries, one per hour (`keep`: with [`Journal::journal_keep`]); the
    /// first failure is returned after every hour was tried. An entry that could not be kept
    /// aside (a spool that cannot be written) is held again, for the next request to write.
    fn write_held(&self, keep: bool) -> Result<(), StoreError> {
        let entries = {
            let mut held = self.held.borrow_mut();
            held.since_ms = None;
            let entries = held.batch.take();
            if keep {
                held.kept_aside |= !entries.is_empty();
            } else {
                held.kept_aside = false;
            }
            entries
        };
        let mut first_error = None;
        for entry in &entries {
            if keep {
                if self.inner.journal_keep(entry).is_err() {
                    self.held.borrow_mut().batch.add(entry);
                }
            } else if let Err(e) = self.inner.journal_add(entry) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl<C: Clock> Drop for HeldJournal<C> {
    /// The last chance for what is still held (the process normally writes it before).
    fn drop(&mut self) {
        let _ = self.flush();
        // What could not be kept aside goes to the store itself.
        if let Err(e) = self.write_held(false) {
            self.log.line(
                Level::Warn,
                &format!("the usage journal could not be written as the process ended: {e}"),
            );
        }
    }
}

#[cfg(test)]
mod tests;
