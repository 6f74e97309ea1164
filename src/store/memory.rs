//! The memory store: counters and cached answers in this process's memory, behind one lock.
//! For the tests, the benchmarks and the fuzz targets only: compiled for the unit tests and
//! with the `memory-store` feature, which the program itself never turns on.
//!
//! It decides like every store: under its lock it reads each check's state (the client's own
//! first, the others only when those admit), calls the limiter with the time of its clock (read
//! under the lock, so decisions are ordered in time as they are in the map) and applies the
//! writes. Fixed and sliding windows, refunds, sweeps and the cache all follow the other
//! stores; what it holds lives as long as the process. Clones are handles of one store: threads
//! that share a clone share every count.
//!
//! As in the Redis store, a sliding key's records that left the window are dropped whenever the
//! key is read, and a key left by a rule of the other algorithm (the configuration changed)
//! starts afresh. For tests of what callers do when a store is down, a store can be told to
//! fail ([`MemoryStore::set_failing`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::core::clock::Clock;
use crate::core::decision::Decision;
use crate::core::journal;
use crate::core::limiter::{self, State, Write};
use crate::core::rule::{Algorithm, Rule};
use crate::store::cache::Cache;
use crate::store::counters::Counters;
use crate::store::journal::Journal;
use crate::store::notes::Notes;
use crate::store::roles::Store;
use crate::store::upkeep::Upkeep;
use crate::store::{Check, StoreError, SweepReport};

/// Counters and cached answers in memory. Cloning gives another handle of the same store.
pub struct MemoryStore<C: Clock> {
    shared: Arc<Shared<C>>,
}

impl<C: Clock> Clone for MemoryStore<C> {
    fn clone(&self) -> Self {
        MemoryStore {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<C> {
    clock: C,
    grace_ms: u64,
    failing: AtomicBool,
    data: Mutex<Data>,
}

#[derive(Default)]
struct Data {
    keys: HashMap<String, Entry>,
    cache: HashMap<String, Cached>,
    /// The usage journal: (hour, name) -> count, and (hour, client, count) -> n.
    totals: BTreeMap<(u32, String), u64>,
    clients: BTreeMap<(u32, String, &'static str), u64>,
    /// Newest last.
    notes: Vec<journal::Note>,
}

/// What one rule's key holds.
struct Entry {
    state: State,
    /// The window of the rule that last wrote the key, so a sweep can tell when a sliding
    /// record went stale without knowing the rules (a fixed counter keeps its own).
    window_ms: u64,
}

struct Cached {
    value: Vec<u8>,
    expires_ms: u64,
}

fn algorithm_of(state: &State) -> Algorithm {
    match state {
        State::Fixed(_) => Algorithm::Fixed,
        State::Sliding(_) => Algorithm::Sliding,
    }
}

fn empty(algorithm: Algorithm) -> State {
    match algorithm {
        Algorithm::Fixed => State::Fixed(None),
        Algorithm::Sliding => State::Sliding(Vec::new()),
    }
}

/// What `check`'s key holds at `now`, as a decision reads it: a sliding key's records that
/// left the window dropped, a key of the other algorithm (the configuration changed) removed.
fn read_state(data: &mut Data, check: &Check<'_>, now: u64) -> State {
    let window_ms = check.rule.window_ms();
    match data.keys.get_mut(&check.key) {
        Some(e) if algorithm_of(&e.state) == check.rule.algorithm => {
            if let State::Sliding(times) = &mut e.state {
                times.retain(|t| t.saturating_add(window_ms) > now);
            }
            e.state.clone()
        }
        Some(_) => {
            data.keys.remove(&check.key);
            empty(check.rule.algorithm)
        }
        None => empty(check.rule.algorithm),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl<C: Clock> MemoryStore<C> {
    /// An empty store on `clock`. Keys whose windows ended more than `grace` ago, and cached
    /// answers that expired that long ago, are removed by sweeps.
    pub fn new(clock: C, grace: Duration) -> Self {
        MemoryStore {
            shared: Arc::new(Shared {
                clock,
                grace_ms: millis(grace),
                failing: AtomicBool::new(false),
                data: Mutex::new(Data::default()),
            }),
        }
    }

    pub fn clock(&self) -> &C {
        &self.shared.clock
    }

    /// While `failing`, every operation fails as a store that cannot be reached does
    /// (`StoreErrorKind::Unavailable`) and changes nothing.
    pub fn set_failing(&self, failing: bool) {
        self.shared.failing.store(failing, Ordering::SeqCst);
    }

    /// Forgets every counter and cached answer, as the end of the process would.
    pub fn clear(&self) {
        *self.data() = Data::default();
    }

    /// What the store holds for `key`, if anything.
    pub fn state(&self, key: &str) -> Option<State> {
        self.data().keys.get(key).map(|e| e.state.clone())
    }

    /// How many rules' keys the store holds.
    pub fn key_count(&self) -> usize {
        self.data().keys.len()
    }

    fn data(&self) -> MutexGuard<'_, Data> {
        // A panic elsewhere cannot leave a half-made decision behind: writes are applied only
        // after the limiter has decided, each one whole.
        self.shared
            .data
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn up(&self) -> Result<(), StoreError> {
        if self.shared.failing.load(Ordering::SeqCst) {
            return Err(StoreError::unavailable(
                "memory store: unavailable (told to fail)",
            ));
        }
        Ok(())
    }

    /// The cached value under `key`, if it has not expired at `now`.
    fn live<'a>(data: &'a Data, key: &str, now: u64) -> Option<&'a [u8]> {
        data.cache
            .get(key)
            .filter(|c| c.expires_ms > now)
            .map(|c| c.value.as_slice())
    }

    fn put(&self, data: &mut Data, key: &str, value: &[u8], ttl: Duration) {
        let expires_ms = self.shared.clock.now_ms().saturating_add(millis(ttl));
        data.cache.insert(
            key.to_owned(),
            Cached {
                value: value.to_vec(),
                expires_ms,
            },
        );
    }
}

impl<C: Clock + 'static> MemoryStore<C> {
    /// A site's store with every role served by a handle of this one.
    pub fn as_store(&self) -> Store {
        Store::whole(self.clone())
    }
}

impl<C: Clock> Counters for MemoryStore<C> {
    fn decide_sized(
        &self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
    ) -> Result<Decision, StoreError> {
        self.up()?;
        let mut keys: Vec<&str> = checks.iter().map(|c| c.key.as_str()).collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.len() != checks.len() {
            return Err(StoreError::unavailable("two rules share one key"));
        }
        let own = own.min(checks.len());
        let mut data = self.data();
        let now = self.shared.clock.now_ms();
        let rules: Vec<&Rule> = checks.iter().map(|c| c.rule).collect();
        // The client's own keys first: when they refuse, the others are never read (a read
        // drops a sliding key's old records), as in the stores that lock what they read.
        let mut states: Vec<State> = checks[..own]
            .iter()
            .map(|c| read_state(&mut data, c, now))
            .collect();
        if own < checks.len()
            && let Some(refused) = limiter::own_refusal_sized(&rules[..own], &states, size, now)
        {
            return Ok(refused.decision);
        }
        states.extend(checks[own..].iter().map(|c| read_state(&mut data, c, now)));
        let outcome = limiter::decide_sized(&rules, &states, rules.len(), size, now);
        for ((check, state), write) in checks.iter().zip(states).zip(&outcome.writes) {
            let entry = match (state, write) {
                (_, Write::Keep) => continue,
                (_, Write::Counter(counter)) => Entry {
                    state: State::Fixed(Some(*counter)),
                    window_ms: counter.window_ms,
                },
                (state, Write::Append) => {
                    let mut times = match state {
                        State::Sliding(times) => times,
                        State::Fixed(_) => Vec::new(),
                    };
                    times.push(outcome.now_ms);
                    Entry {
                        state: State::Sliding(times),
                        window_ms: check.rule.window_ms(),
                    }
                }
            };
            data.keys.insert(check.key.clone(), entry);
        }
        Ok(outcome.decision)
    }

    fn refund(&self, checks: &[Check<'_>], at_ms: u64) -> Result<(), StoreError> {
        self.up()?;
        let mut data = self.data();
        for c in checks {
            let Some(entry) = data.keys.get_mut(&c.key) else {
                continue;
            };
            match (&mut entry.state, c.rule.algorithm) {
                (State::Fixed(Some(counter)), Algorithm::Fixed) => {
                    if let Some(back) = limiter::refunded(c.rule, *counter, at_ms) {
                        *counter = back;
                    }
                }
                (State::Sliding(times), Algorithm::Sliding) => {
                    if let Some(i) = times.iter().position(|t| *t == at_ms) {
                        times.swap_remove(i);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn charge(&self, checks: &[Check<'_>], at_ms: u64, size: u64) -> Result<(), StoreError> {
        self.up()?;
        let mut data = self.data();
        for c in checks {
            if let Some(Entry {
                state: State::Fixed(Some(counter)),
                ..
            }) = data.keys.get_mut(&c.key)
                && let Some(more) = limiter::charged(c.rule, *counter, at_ms, size)
            {
                *counter = more;
            }
        }
        Ok(())
    }

    fn used(&self, checks: &[Check<'_>]) -> Result<Vec<u32>, StoreError> {
        self.up()?;
        let data = self.data();
        let now = self.shared.clock.now_ms();
        Ok(checks
            .iter()
            .map(|c| match data.keys.get(&c.key) {
                Some(e) if algorithm_of(&e.state) == c.rule.algorithm => {
                    limiter::used(c.rule, &e.state, now)
                }
                _ => 0,
            })
            .collect())
    }
}

impl<C: Clock> Cache for MemoryStore<C> {
    fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.up()?;
        let data = self.data();
        Ok(Self::live(&data, key, self.shared.clock.now_ms()).map(<[u8]>::to_vec))
    }

    fn cache_put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError> {
        self.up()?;
        let mut data = self.data();
        self.put(&mut data, key, value, ttl);
        Ok(())
    }

    fn cache_claim(&self, key: &str, value: &[u8], ttl: Duration) -> Result<bool, StoreError> {
        self.up()?;
        let mut data = self.data();
        if Self::live(&data, key, self.shared.clock.now_ms()).is_some() {
            return Ok(false);
        }
        self.put(&mut data, key, value, ttl);
        Ok(true)
    }

    fn cache_release(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        self.up()?;
        let mut data = self.data();
        if Self::live(&data, key, self.shared.clock.now_ms()) == Some(value) {
            data.cache.remove(key);
        }
        Ok(())
    }
}

impl<C: Clock> Journal for MemoryStore<C> {
    fn journal_add(&self, entry: &journal::Entry) -> Result<(), StoreError> {
        self.up()?;
        let mut data = self.data();
        for (name, n) in &entry.totals {
            *data.totals.entry((entry.hour, name.clone())).or_default() += n;
        }
        for (client, count, n) in &entry.clients {
            *data
                .clients
                .entry((entry.hour, client.clone(), count.name()))
                .or_default() += n;
        }
        Ok(())
    }

    fn journal_rows(&self, from_hour: u32, to_hour: u32) -> Result<Vec<journal::Row>, StoreError> {
        self.up()?;
        let data = self.data();
        let within = |hour: &u32| (from_hour..to_hour).contains(hour);
        let totals = data
            .totals
            .iter()
            .filter(|((hour, _), _)| within(hour))
            .map(|((hour, name), count)| journal::Row::Total {
                hour: *hour,
                name: name.clone(),
                count: *count,
            });
        let clients = data
            .clients
            .iter()
            .filter(|((hour, _, _), _)| within(hour))
            .filter_map(|((hour, client, count), n)| {
                Some(journal::Row::Client {
                    hour: *hour,
                    client: client.clone(),
                    count: journal::ClientCount::from_name(count)?,
                    n: *n,
                })
            });
        Ok(totals.chain(clients).collect())
    }
}

impl<C: Clock> Notes for MemoryStore<C> {
    fn journal_note(&self, note: &journal::Note) -> Result<(), StoreError> {
        self.up()?;
        let mut data = self.data();
        data.notes.push(note.clone());
        let kept = journal::notes_kept(data.notes.iter().rev().map(|n| n.text.as_str()));
        let mut keep = kept.into_iter().rev();
        data.notes.retain(|_| keep.next().unwrap_or(false));
        Ok(())
    }

    fn journal_notes(&self) -> Result<Vec<journal::Note>, StoreError> {
        self.up()?;
        Ok(self.data().notes.iter().rev().cloned().collect())
    }
}

impl<C: Clock> Upkeep for MemoryStore<C> {
    /// Always complete: a map is looked over in far less than any budget.
    fn sweep(&self, _budget: Option<Duration>) -> Result<SweepReport, StoreError> {
        self.up()?;
        let mut data = self.data();
        let now = self.shared.clock.now_ms();
        let grace = self.shared.grace_ms;
        let mut report = SweepReport {
            complete: true,
            ..SweepReport::default()
        };
        let stale = |end: u64| end.saturating_add(grace) < now;
        let before = data.keys.len() + data.cache.len();
        data.keys.retain(|_, e| {
            let end = match &e.state {
                State::Fixed(c) => c.map_or(0, |c| c.end_ms()),
                State::Sliding(times) => times
                    .iter()
                    .max()
                    .map_or(0, |t| t.saturating_add(e.window_ms)),
            };
            !stale(end)
        });
        data.cache.retain(|_, c| !stale(c.expires_ms));
        let expiry = journal::Expiry::at(now);
        data.totals
            .retain(|(hour, _), _| *hour >= expiry.totals_before);
        data.clients
            .retain(|(hour, _, _), _| *hour >= expiry.clients_before);
        let after = data.keys.len() + data.cache.len();
        report.scanned = before as u64;
        report.removed = (before - after) as u64;
        Ok(report)
    }

    fn probe(&self) -> Result<String, StoreError> {
        self.up()?;
        let data = self.data();
        Ok(format!(
            "memory store ({} keys, {} cached answers)",
            data.keys.len(),
            data.cache.len()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::{FakeClock, SystemClock};
    use crate::core::limiter::Counter;
    use crate::core::rule::KeyKind;
    use crate::store::StoreErrorKind;

    fn rule(name: &str, algorithm: Algorithm, limit: u32, window_secs: u32) -> Rule {
        let ip = crate::support::defaults::KEY_TEMPLATE_IP;
        Rule::new(name, KeyKind::Ip, algorithm, limit, window_secs, ip).unwrap()
    }

    fn check<'a>(rule: &'a Rule, key: &str) -> Check<'a> {
        Check {
            rule,
            key: key.to_owned(),
        }
    }

    #[test]
    fn threads_sharing_clones_are_admitted_exactly_to_the_limit() {
        let r = rule("ip", Algorithm::Fixed, 30, 3600);
        let s = rule("burst", Algorithm::Sliding, 40, 3600);
        let store = MemoryStore::new(SystemClock, Duration::ZERO);
        let admitted: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|_| {
                    let store = store.clone();
                    let (r, s) = (&r, &s);
                    scope.spawn(move || {
                        let checks = [check(r, "k"), check(s, "b")];
                        (0..20)
                            .filter(|_| store.decide(&checks).unwrap().is_admit())
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(admitted, 30);
        match store.state("k") {
            Some(State::Fixed(Some(c))) => assert_eq!(c.count, 30),
            other => panic!("{other:?}"),
        }
        match store.state("b") {
            Some(State::Sliding(times)) => assert_eq!(times.len(), 30),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sliding_records_age_out_and_refunds_take_one_back() {
        let r = rule("ip", Algorithm::Sliding, 2, 10);
        let store = MemoryStore::new(FakeClock::at(1_000), Duration::ZERO);
        let c = [check(&r, "k")];
        let first = match store.decide(&c).unwrap() {
            Decision::Admit { at_ms, .. } => at_ms,
            other => panic!("{other:?}"),
        };
        store.clock().advance_ms(4_000);
        assert!(store.decide(&c).unwrap().is_admit());
        match store.decide(&c).unwrap() {
            Decision::Refuse { wait_ms, .. } => assert_eq!(wait_ms, 6_000),
            other => panic!("{other:?}"),
        }
        store.refund(&c, first).unwrap();
        assert!(store.decide(&c).unwrap().is_admit(), "the first taken back");
        // Records older than the window are dropped when the key is read.
        store.clock().set_ms(1_000 + 4_000 + 10_000);
        assert!(store.decide(&c).unwrap().is_admit());
        assert_eq!(store.state("k"), Some(State::Sliding(vec![15_000])));
    }

    #[test]
    fn a_key_of_the_other_algorithm_starts_afresh() {
        let fixed = rule("ip", Algorithm::Fixed, 1, 60);
        let sliding = rule("ip", Algorithm::Sliding, 1, 60);
        let store = MemoryStore::new(FakeClock::at(0), Duration::ZERO);
        assert!(store.decide(&[check(&fixed, "k")]).unwrap().is_admit());
        assert!(!store.decide(&[check(&fixed, "k")]).unwrap().is_admit());
        assert!(store.decide(&[check(&sliding, "k")]).unwrap().is_admit());
        assert!(!store.decide(&[check(&sliding, "k")]).unwrap().is_admit());
        assert!(store.decide(&[check(&fixed, "k")]).unwrap().is_admit());
    }

    #[test]
    fn cached_answers_expire_on_the_clock() {
        let store = MemoryStore::new(FakeClock::at(0), Duration::ZERO);
        assert!(
            store
                .cache_claim("k", b"pending", Duration::from_secs(5))
                .unwrap()
        );
        assert!(
            !store
                .cache_claim("k", b"other", Duration::from_secs(5))
                .unwrap()
        );
        store.cache_release("k", b"other").unwrap();
        assert_eq!(
            store.cache_get("k").unwrap().as_deref(),
            Some(&b"pending"[..])
        );
        store.clock().set_ms(4_999);
        assert!(store.cache_get("k").unwrap().is_some());
        store.clock().set_ms(5_000);
        assert_eq!(store.cache_get("k").unwrap(), None, "expired");
        assert!(
            store
                .cache_claim("k", b"mine", Duration::from_secs(5))
                .unwrap()
        );
        store.cache_release("k", b"mine").unwrap();
        assert_eq!(store.cache_get("k").unwrap(), None, "released");
    }

    #[test]
    fn sweeps_remove_what_ended_more_than_the_grace_ago() {
        let short = rule("short", Algorithm::Fixed, 5, 10);
        let slide = rule("slide", Algorithm::Sliding, 5, 10);
        let long = rule("long", Algorithm::Fixed, 5, 600);
        let store = MemoryStore::new(FakeClock::at(0), Duration::from_secs(60));
        let checks = [check(&short, "s"), check(&slide, "d"), check(&long, "l")];
        assert!(store.decide(&checks).unwrap().is_admit());
        store.cache_put("c", b"v", Duration::from_secs(10)).unwrap();
        store.clock().set_ms(70_000);
        assert_eq!(store.sweep(None).unwrap().removed, 0, "within the grace");
        store.clock().set_ms(70_001);
        let report = store.sweep(None).unwrap();
        assert_eq!(
            (report.scanned, report.removed, report.complete),
            (4, 3, true)
        );
        assert_eq!(store.key_count(), 1);
        assert_eq!(
            store.state("l"),
            Some(State::Fixed(Some(Counter {
                start_ms: 0,
                window_ms: 600_000,
                count: 1
            })))
        );
    }

    #[test]
    fn told_to_fail_it_fails_everything_and_changes_nothing() {
        let r = rule("ip", Algorithm::Fixed, 1, 60);
        let store = MemoryStore::new(FakeClock::at(0), Duration::ZERO);
        store.set_failing(true);
        let e = store.decide(&[check(&r, "k")]).unwrap_err();
        assert_eq!(e.kind, StoreErrorKind::Unavailable);
        assert!(store.probe().is_err());
        assert!(store.cache_put("c", b"v", Duration::from_secs(1)).is_err());
        assert_eq!(store.key_count(), 0);
        store.set_failing(false);
        assert!(store.decide(&[check(&r, "k")]).unwrap().is_admit());
        assert!(store.probe().unwrap().starts_with("memory store"));
        store.clear();
        assert_eq!(store.key_count(), 0);
    }
}
