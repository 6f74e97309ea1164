//! Tests of a FastCGI process's memory in front of its store, on the memory store and a fake
//! clock shared by both. A store told to fail shows when it was asked: an answer that still
//! comes back came from memory.

use std::rc::Rc;
use std::time::Duration;

use super::*;
use crate::core::clock::FakeClock;
use crate::core::journal::{Event, HOUR_MS};
use crate::core::rule::{Algorithm, KeyKind, Rule};
use crate::store::memory::MemoryStore;

const T0: u64 = 400_000 * HOUR_MS;

fn rule(limit: u32, window_secs: u32) -> Rule {
    let ip = defaults::KEY_TEMPLATE_IP;
    Rule::new("ip", KeyKind::Ip, Algorithm::Fixed, limit, window_secs, ip).unwrap()
}

fn check<'a>(rule: &'a Rule, who: &str) -> Check<'a> {
    Check {
        rule,
        key: rule.key_for(who),
    }
}

/// A store on the memory store and a fake clock at `T0`: the store, and their clock.
fn memory() -> (MemoryStore<Rc<FakeClock>>, Rc<FakeClock>) {
    let clock = Rc::new(FakeClock::at(T0));
    (MemoryStore::new(clock.clone(), Duration::ZERO), clock)
}

/// The store under memory, a handle on what is behind it, and their clock.
fn held() -> (Store, MemoryStore<Rc<FakeClock>>, Rc<FakeClock>) {
    let (inner, clock) = memory();
    let store = held_with(inner.as_store(), &clock);
    (store, inner, clock)
}

/// `store` with both memories in front of it, on `clock`.
fn held_with(store: Store, clock: &Rc<FakeClock>) -> Store {
    store
        .with_counters(|c| Rc::new(HeldCounters::with_clock(c, clock.clone())))
        .with_journal(|j| Rc::new(HeldJournal::with_clock(j, clock.clone())))
}

/// One client (192.0.2.1) under one rule, asking the held store of [`held`].
struct Client {
    store: Store,
    inner: MemoryStore<Rc<FakeClock>>,
    clock: Rc<FakeClock>,
    rule: Rule,
}

impl Client {
    fn new(limit: u32, window_secs: u32) -> Client {
        let (store, inner, clock) = held();
        Client {
            store,
            inner,
            clock,
            rule: rule(limit, window_secs),
        }
    }

    fn checks(&self) -> [Check<'_>; 1] {
        [check(&self.rule, "192.0.2.1")]
    }

    fn decide(&self) -> Result<Decision, StoreError> {
        self.store.counters.decide(&self.checks())
    }

    /// Whether the next request is admitted (the store answering).
    fn admitted(&self) -> bool {
        self.decide().unwrap().is_admit()
    }
}

/// Whether the held store admits `checks` (the store answering).
fn admits(store: &Store, checks: &[Check<'_>]) -> bool {
    store.counters.decide(checks).unwrap().is_admit()
}

fn wait_ms(d: &Decision) -> u64 {
    match d {
        Decision::Refuse { wait_ms, .. } => *wait_ms,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn a_refusal_is_answered_from_memory_for_up_to_a_second() {
    let client = Client::new(2, 60);
    assert!(client.admitted());
    assert!(client.admitted());
    assert_eq!(wait_ms(&client.decide().unwrap()), 60_000);
    client.inner.set_failing(true);
    client.clock.advance_ms(999);
    let later = client.decide().unwrap();
    assert_eq!(wait_ms(&later), 59_001, "the wait counts down");
    assert_eq!(later.statuses()[0].reset_ms, 59_001);
    client.clock.advance_ms(1);
    assert!(
        client.decide().is_err(),
        "after a second the store is asked again"
    );
}

#[test]
fn a_refusal_is_never_remembered_past_its_end() {
    let client = Client::new(1, 1);
    assert!(client.admitted());
    client.clock.advance_ms(500);
    assert_eq!(wait_ms(&client.decide().unwrap()), 500);
    client.inner.set_failing(true);
    client.clock.advance_ms(499);
    assert_eq!(wait_ms(&client.decide().unwrap()), 1);
    client.clock.advance_ms(1);
    assert!(
        client.decide().is_err(),
        "the window ended: the store decides"
    );
    client.inner.set_failing(false);
    assert!(client.admitted());
}

#[test]
fn admissions_always_ask_the_store() {
    let client = Client::new(5, 60);
    assert!(client.admitted());
    client.inner.set_failing(true);
    assert!(client.decide().is_err());
}

#[test]
fn other_clients_and_other_rules_are_not_answered_by_a_remembered_refusal() {
    let client = Client::new(1, 60);
    assert!(client.admitted());
    assert!(!client.admitted());
    assert!(admits(&client.store, &[check(&client.rule, "192.0.2.2")]));
    // The same key under a rule with another limit is another question.
    let wider = rule(2, 60);
    assert!(admits(&client.store, &[check(&wider, "192.0.2.1")]));
}

#[test]
fn a_refusal_by_the_clients_own_rules_is_theirs_and_remembered_so() {
    let (store, inner, clock) = held();
    let own = rule(1, 60);
    let day = Rule::new(
        "day",
        KeyKind::Global,
        Algorithm::Fixed,
        1,
        86_400,
        defaults::KEY_TEMPLATE_GLOBAL,
    )
    .unwrap();
    let checks = [check(&own, "192.0.2.1"), check(&day, "")];
    assert!(
        store
            .counters
            .decide_own_first(&checks, 1)
            .unwrap()
            .is_admit()
    );
    // Both spent: the client's own rule answers, with its own wait and status alone.
    let refused = store.counters.decide_own_first(&checks, 1).unwrap();
    assert_eq!((wait_ms(&refused), refused.statuses().len()), (60_000, 1));
    inner.set_failing(true);
    clock.advance_ms(400);
    let later = store.counters.decide_own_first(&checks, 1).unwrap();
    assert_eq!((wait_ms(&later), later.statuses().len()), (59_600, 1));
    // Every rule at once is another question, asked of the store.
    assert!(store.counters.decide(&checks).is_err());
}

#[test]
fn a_refund_forgets_what_was_remembered() {
    let client = Client::new(1, 60);
    let Decision::Admit { at_ms, .. } = client.decide().unwrap() else {
        panic!("the first is admitted");
    };
    assert!(!client.admitted());
    client
        .store
        .counters
        .refund(&client.checks(), at_ms)
        .unwrap();
    assert!(client.admitted(), "the place given back is taken at once");
}

#[test]
fn a_clock_gone_back_forgets() {
    let client = Client::new(1, 60);
    assert!(client.admitted());
    assert!(!client.admitted());
    client.inner.set_failing(true);
    client.clock.set_ms(T0 - 1);
    assert!(client.decide().is_err());
}

#[test]
fn no_more_refusals_are_remembered_than_the_bound() {
    let (inner, clock) = memory();
    let store = HeldCounters::with_clock(Rc::new(inner), clock);
    let r = rule(1, 60);
    let n = defaults::FASTCGI_REFUSALS_REMEMBERED + 10;
    for i in 0..n {
        let c = [check(&r, &format!("10.0.{}.{}", i / 256, i % 256))];
        assert!(store.decide(&c).unwrap().is_admit());
        assert!(!store.decide(&c).unwrap().is_admit());
        assert!(store.refusals.borrow().len() <= defaults::FASTCGI_REFUSALS_REMEMBERED);
    }
}

fn refused_entry(at_ms: u64, who: &str) -> Entry {
    Entry::new(
        at_ms,
        Some(who),
        &[Event::Request, Event::Refused("ip".into())],
    )
}

/// The totals and client counts behind the held store, as (hour, name, count), sorted.
fn written(inner: &MemoryStore<Rc<FakeClock>>) -> Vec<(u32, String, u64)> {
    let hour = crate::core::journal::hour_of(T0);
    let mut rows: Vec<(u32, String, u64)> = inner
        .journal_rows(hour - 1, hour + 2)
        .unwrap()
        .into_iter()
        .map(|r| match r {
            Row::Total { hour, name, count } => (hour, name, count),
            Row::Client {
                hour,
                client,
                count,
                n,
            } => (hour, format!("{}:{client}", count.name()), n),
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn journal_entries_are_held_for_a_second_then_written_as_sums() {
    let (store, inner, clock) = held();
    let hour = crate::core::journal::hour_of(T0);
    store.journal.journal_add(&refused_entry(T0, "a")).unwrap();
    clock.advance_ms(500);
    store
        .journal
        .journal_add(&refused_entry(T0 + 500, "a"))
        .unwrap();
    store
        .journal
        .journal_add(&refused_entry(T0 + 500, "b"))
        .unwrap();
    clock.advance_ms(499);
    store
        .journal
        .journal_add(&refused_entry(T0 + 999, "a"))
        .unwrap();
    assert_eq!(written(&inner), [], "held");
    clock.advance_ms(1);
    store
        .journal
        .journal_add(&refused_entry(T0 + 1000, "b"))
        .unwrap();
    assert_eq!(
        written(&inner),
        [
            (hour, "refused:a".to_owned(), 3),
            (hour, "refused:b".to_owned(), 2),
            (hour, "refused:ip".to_owned(), 5),
            (hour, "requests".to_owned(), 5),
        ]
    );
    // The next one waits its own second.
    store
        .journal
        .journal_add(&refused_entry(T0 + 1000, "c"))
        .unwrap();
    assert_eq!(written(&inner).len(), 4);
}

#[test]
fn the_journal_is_written_before_it_is_read_when_flushed_and_when_dropped() {
    let (store, inner, _) = held();
    store.journal.journal_add(&refused_entry(T0, "a")).unwrap();
    assert_eq!(written(&inner), []);
    let hour = crate::core::journal::hour_of(T0);
    let rows = store.journal.journal_rows(hour, hour + 1).unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    store.journal.journal_add(&refused_entry(T0, "a")).unwrap();
    store.journal.flush().unwrap();
    assert_eq!(written(&inner)[0], (hour, "refused:a".to_owned(), 2));
    store.journal.journal_add(&refused_entry(T0, "a")).unwrap();
    drop(store);
    assert_eq!(written(&inner)[0], (hour, "refused:a".to_owned(), 3));
}

#[test]
fn too_many_distinct_counts_are_written_before_the_second_is_up() {
    let (store, inner, _) = held();
    let mut i = 0;
    while written(&inner).is_empty() {
        store
            .journal
            .journal_add(&refused_entry(T0, &format!("client-{i}")))
            .unwrap();
        i += 1;
        assert!(i <= defaults::FASTCGI_JOURNAL_HOLD_ROWS, "never written");
    }
    // Two totals and one count per client: written when the bound was reached.
    assert_eq!(i + 2, defaults::FASTCGI_JOURNAL_HOLD_ROWS);
}

#[test]
fn a_failed_write_is_the_error_of_the_call_that_wrote_and_holds_nothing_after() {
    let (store, inner, clock) = held();
    store.journal.journal_add(&refused_entry(T0, "a")).unwrap();
    inner.set_failing(true);
    clock.advance_ms(1000);
    assert!(
        store
            .journal
            .journal_add(&refused_entry(T0 + 1000, "a"))
            .is_err()
    );
    inner.set_failing(false);
    store.journal.flush().unwrap();
    assert_eq!(written(&inner), [], "what failed is not written twice");
    let entry = Entry::new(T0, Some("b"), &[Event::Request, Event::Admitted]);
    store.journal.journal_add(&entry).unwrap();
    store.journal.flush().unwrap();
    assert!(
        written(&inner)
            .iter()
            .any(|(_, name, n)| name == "admitted:b" && *n == 1)
    );
}

/// Over a store on a server, what an idle process holds goes to the spool, never to the
/// server (which may hang: a request would wait behind it); the next request writes it.
#[test]
fn idle_entries_go_to_the_spool_and_the_next_request_writes_them() {
    let (server, clock) = memory();
    let data = crate::support::temp::dir("held", "spool");
    let spooled = server.as_store().with_journal(|j| {
        Rc::new(crate::store::spool::SpooledJournal::with_clock(
            j,
            &data,
            Duration::from_millis(500),
            clock.clone(),
        ))
    });
    let store = held_with(spooled, &clock);
    store.journal.journal_add(&refused_entry(T0, "a")).unwrap();
    server.set_failing(true);
    clock.advance_ms(300);
    store.journal.flush().unwrap();
    server.set_failing(false);
    assert_eq!(written(&server), [], "kept in the spool");
    // Within the same second: written at once, not held, because the spool was used.
    store
        .journal
        .journal_add(&refused_entry(T0 + 300, "a"))
        .unwrap();
    assert_eq!(
        written(&server)[0],
        (crate::core::journal::hour_of(T0), "refused:a".to_owned(), 2)
    );
    let _ = std::fs::remove_dir_all(&data);
}

/// A spool that cannot be written loses nothing: what an idle process could not put aside
/// stays held, the next request writes it, and so does the end of the process.
#[test]
fn what_the_spool_does_not_take_stays_held() {
    let (server, clock) = memory();
    let data = crate::support::temp::dir("held", "nospool");
    std::fs::write(data.join(defaults::JOURNAL_SPOOL_DIR), b"in the way").unwrap();
    let spooled = || {
        server.as_store().with_journal(|j| {
            Rc::new(crate::store::spool::SpooledJournal::with_clock(
                j,
                &data,
                Duration::from_millis(500),
                clock.clone(),
            ))
        })
    };
    let store = held_with(spooled(), &clock);
    store.journal.journal_add(&refused_entry(T0, "a")).unwrap();
    store.journal.flush().unwrap();
    store.journal.flush().unwrap();
    assert_eq!(written(&server), []);
    store.journal.journal_add(&refused_entry(T0, "a")).unwrap();
    let hour = crate::core::journal::hour_of(T0);
    assert_eq!(written(&server)[0], (hour, "refused:a".to_owned(), 2));
    // Held at the end: written as the process ends.
    let store = held_with(spooled(), &clock);
    store.journal.journal_add(&refused_entry(T0, "a")).unwrap();
    drop(store);
    assert_eq!(written(&server)[0], (hour, "refused:a".to_owned(), 3));
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn a_refusal_of_the_clients_own_checks_is_recalled_before_the_cache_until_a_refund() {
    let client = Client::new(1, 60);
    let checks = [check(&client.rule, "192.0.2.1")];
    let Decision::Admit { at_ms, .. } = client.decide().unwrap() else {
        panic!("the first is admitted");
    };
    let refused = client.decide().unwrap();
    let counters = &client.store.counters;
    assert_eq!(counters.recall_own(&checks, T0), None, "not remembered yet");
    counters.remember_own(&checks, T0, &refused);
    assert_eq!(counters.recall_own(&checks, T0), Some(refused));
    assert_eq!(
        wait_ms(&counters.recall_own(&checks, T0 + 999).unwrap()),
        59_001
    );
    assert_eq!(counters.recall_own(&checks, T0 + 1000), None);
    counters.remember_own(&checks, T0, &client.decide().unwrap());
    counters.refund(&checks, at_ms).unwrap();
    assert_eq!(counters.recall_own(&checks, T0), None);
}
