//! Tests of the server's memory of refusals, on the memory store and a fake clock, in a
//! temporary data directory of their own: what it recalls, for how long, for whom, and what a
//! damaged, foreign or planted file makes of it (a miss, never a refusal).

use std::rc::Rc;
use std::time::Duration;

use super::*;
use crate::core::clock::{Clock, FakeClock};
use crate::core::journal::HOUR_MS;
use crate::core::rule::{Algorithm, KeyKind, Rule};
use crate::store::memory::MemoryStore;
use crate::support::temp::Dir;

const T0: u64 = 400_000 * HOUR_MS;

fn rule(name: &str, limit: u32, window_secs: u32) -> Rule {
    let ip = defaults::KEY_TEMPLATE_IP;
    Rule::new(name, KeyKind::Ip, Algorithm::Fixed, limit, window_secs, ip).unwrap()
}

fn check<'a>(rule: &'a Rule, who: &str) -> Check<'a> {
    Check {
        rule,
        key: rule.key_for(who),
    }
}

/// The memory store behind a memory of refusals in `dir`, and their clock at `T0`.
fn remembered(
    dir: &Path,
) -> (
    RememberedRefusals,
    MemoryStore<Rc<FakeClock>>,
    Rc<FakeClock>,
) {
    let clock = Rc::new(FakeClock::at(T0));
    let inner = MemoryStore::new(clock.clone(), Duration::ZERO);
    let counters = inner.as_store().counters;
    (RememberedRefusals::new(counters, dir), inner, clock)
}

/// The store's refusal of `checks` (its first admitted), remembered as the pipeline does.
fn refused(memory: &RememberedRefusals, checks: &[Check<'_>], clock: &FakeClock) -> Decision {
    let asked = clock.now_ms();
    let decision = memory.decide(checks).unwrap();
    assert!(!decision.is_admit(), "the store refuses: {decision:?}");
    memory.remember_own(checks, asked, &decision);
    decision
}

fn wait_ms(d: &Decision) -> u64 {
    match d {
        Decision::Refuse { wait_ms, .. } => *wait_ms,
        Decision::Admit { .. } => panic!("admitted: {d:?}"),
    }
}

#[test]
fn a_refusal_is_recalled_as_it_stands_for_up_to_a_second() {
    let dir = Dir::new("refusals", "recalled");
    let (memory, _inner, clock) = remembered(&dir);
    let ip = rule("ip", 1, 60);
    let checks = [check(&ip, "192.0.2.1")];
    assert!(memory.decide(&checks).unwrap().is_admit());
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), None);
    let refusal = refused(&memory, &checks, &clock);
    assert_eq!(wait_ms(&refusal), 60_000);
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), Some(refusal));
    clock.advance_ms(999);
    let later = memory.recall_own(&checks, clock.now_ms()).unwrap();
    assert_eq!(wait_ms(&later), 59_001);
    assert_eq!(later.statuses()[0].reset_ms, 59_001);
    // A second after it was asked, the store is asked again.
    clock.advance_ms(1);
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), None);
    // A clock that went back recalls nothing either.
    assert_eq!(memory.recall_own(&checks, T0 - 1), None);
}

#[test]
fn a_refusal_is_never_recalled_past_its_end() {
    let dir = Dir::new("refusals", "end");
    let (memory, _inner, clock) = remembered(&dir);
    let ip = rule("ip", 1, 1);
    let checks = [check(&ip, "192.0.2.1")];
    assert!(memory.decide(&checks).unwrap().is_admit());
    clock.advance_ms(700);
    let refusal = refused(&memory, &checks, &clock);
    assert_eq!(wait_ms(&refusal), 300);
    clock.advance_ms(299);
    assert_eq!(
        wait_ms(&memory.recall_own(&checks, clock.now_ms()).unwrap()),
        1
    );
    clock.advance_ms(1);
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), None);
    assert!(memory.decide(&checks).unwrap().is_admit());
}

#[test]
fn only_the_same_checks_of_the_same_client_are_recalled() {
    let dir = Dir::new("refusals", "whom");
    let (memory, _inner, clock) = remembered(&dir);
    let ip = rule("ip", 1, 60);
    let checks = [check(&ip, "192.0.2.1")];
    memory.decide(&checks).unwrap();
    refused(&memory, &checks, &clock);
    let now = clock.now_ms();
    assert!(memory.recall_own(&checks, now).is_some());
    assert_eq!(memory.recall_own(&[check(&ip, "192.0.2.2")], now), None);
    // The owner raised the limit: other checks, asked of the store.
    let raised = rule("ip", 2, 60);
    assert_eq!(memory.recall_own(&[check(&raised, "192.0.2.1")], now), None);
    let renamed = rule("ip-minute", 1, 60);
    assert_eq!(
        memory.recall_own(&[check(&renamed, "192.0.2.1")], now),
        None
    );
    // The same rule with another beside it is another question too.
    let day = rule("day", 100, 86_400);
    let both = [check(&ip, "192.0.2.1"), check(&day, "192.0.2.1")];
    assert_eq!(memory.recall_own(&both, now), None);
}

#[test]
fn an_admission_is_never_remembered() {
    let dir = Dir::new("refusals", "admission");
    let (memory, _inner, clock) = remembered(&dir);
    let ip = rule("ip", 5, 60);
    let checks = [check(&ip, "192.0.2.1")];
    let admitted = memory.decide(&checks).unwrap();
    memory.remember_own(&checks, clock.now_ms(), &admitted);
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), None);
    assert!(!dir.join(defaults::REFUSALS_FILE).exists());
}

#[test]
fn a_refund_forgets_every_refusal() {
    let dir = Dir::new("refusals", "refund");
    let (memory, _inner, clock) = remembered(&dir);
    let ip = rule("ip", 1, 60);
    let one = [check(&ip, "192.0.2.1")];
    let two = [check(&ip, "192.0.2.2")];
    let Decision::Admit { at_ms, .. } = memory.decide(&one).unwrap() else {
        panic!("the first is admitted");
    };
    memory.decide(&two).unwrap();
    refused(&memory, &one, &clock);
    refused(&memory, &two, &clock);
    memory.refund(&one, at_ms).unwrap();
    let now = clock.now_ms();
    assert_eq!(memory.recall_own(&one, now), None);
    assert_eq!(memory.recall_own(&two, now), None);
    // The place freed is the client's again, from the store.
    assert!(memory.decide(&one).unwrap().is_admit());
}

#[test]
fn a_damaged_or_half_written_slot_is_a_miss() {
    let dir = Dir::new("refusals", "damaged");
    let (memory, _inner, clock) = remembered(&dir);
    let ip = rule("ip", 1, 60);
    let checks = [check(&ip, "192.0.2.1")];
    memory.decide(&checks).unwrap();
    refused(&memory, &checks, &clock);
    let path = dir.join(defaults::REFUSALS_FILE);
    let offset = slot_offset(&checks_key(&checks)) as usize;
    let whole = std::fs::read(&path).unwrap();
    // Every byte of the slot's header and payload changed in turn: never recalled.
    for at in 0..HEADER + 60 {
        let mut bytes = whole.clone();
        bytes[offset + at] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(
            memory.recall_own(&checks, clock.now_ms()),
            None,
            "byte {at} changed"
        );
    }
    // A slot cut short (the file ends inside it).
    std::fs::write(&path, &whole[..offset + SLOT_BYTES / 2]).unwrap();
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), None);
    std::fs::write(&path, &whole).unwrap();
    assert!(memory.recall_own(&checks, clock.now_ms()).is_some());
}

#[test]
fn a_slot_taken_by_another_client_is_a_miss_for_the_first() {
    let dir = Dir::new("refusals", "taken");
    let (memory, _inner, clock) = remembered(&dir);
    let ip = rule("ip", 1, 60);
    let first = [check(&ip, "192.0.2.1")];
    let first_slot = slot_offset(&checks_key(&first));
    // Another address whose checks fall in the same slot.
    let other = (2..u32::MAX)
        .map(|n| format!("10.{}.{}.{}", n >> 16 & 255, n >> 8 & 255, n & 255))
        .find(|who| slot_offset(&checks_key(&[check(&ip, who)])) == first_slot)
        .unwrap();
    let second = [check(&ip, &other)];
    for c in [&first, &second] {
        memory.decide(c).unwrap();
        refused(&memory, c, &clock);
    }
    let now = clock.now_ms();
    assert_eq!(memory.recall_own(&first, now), None);
    assert!(memory.recall_own(&second, now).is_some());
}

#[test]
fn the_file_holds_a_slot_per_place_however_many_clients() {
    let dir = Dir::new("refusals", "bounded");
    let (memory, _inner, clock) = remembered(&dir);
    let ip = rule("ip", 1, 60);
    for n in 0..5000u32 {
        let who = format!("10.0.{}.{}", n >> 8, n & 255);
        let checks = [check(&ip, &who)];
        memory.decide(&checks).unwrap();
        refused(&memory, &checks, &clock);
    }
    let len = std::fs::metadata(dir.join(defaults::REFUSALS_FILE))
        .unwrap()
        .len();
    assert!(
        len <= (defaults::REFUSAL_SLOTS * SLOT_BYTES) as u64,
        "{len}"
    );
    let last = [check(&ip, "10.0.19.135")];
    assert!(memory.recall_own(&last, clock.now_ms()).is_some());
}

#[test]
fn a_refusal_too_large_for_a_slot_is_not_remembered() {
    let dir = Dir::new("refusals", "large");
    let (memory, _inner, clock) = remembered(&dir);
    // Forty rules: their statuses alone are more than a slot holds.
    let rules: Vec<Rule> = (0..40).map(|i| rule(&format!("r{i}"), 1, 60)).collect();
    let checks: Vec<Check<'_>> = rules.iter().map(|r| check(r, "192.0.2.1")).collect();
    memory.decide(&checks).unwrap();
    refused(&memory, &checks, &clock);
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), None);
    // Two of them fit.
    refused(&memory, &checks[..2], &clock);
    assert!(memory.recall_own(&checks[..2], clock.now_ms()).is_some());
}

#[test]
fn a_link_or_a_directory_in_the_files_place_is_never_used() {
    let dir = Dir::new("refusals", "planted");
    let (memory, _inner, clock) = remembered(&dir);
    let ip = rule("ip", 1, 60);
    let checks = [check(&ip, "192.0.2.1")];
    memory.decide(&checks).unwrap();
    let path = dir.join(defaults::REFUSALS_FILE);
    // A link to a file elsewhere: neither written through nor read.
    let elsewhere = dir.join("elsewhere");
    std::fs::write(&elsewhere, b"").unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    refused(&memory, &checks, &clock);
    assert_eq!(std::fs::metadata(&elsewhere).unwrap().len(), 0);
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), None);
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    refused(&memory, &checks, &clock);
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), None);
}

#[test]
fn a_missing_data_directory_remembers_nothing_and_decides_as_the_store() {
    let dir = Dir::new("refusals", "missing");
    let (memory, _inner, clock) = remembered(&dir.join("gone"));
    let ip = rule("ip", 1, 60);
    let checks = [check(&ip, "192.0.2.1")];
    assert!(memory.decide(&checks).unwrap().is_admit());
    refused(&memory, &checks, &clock);
    assert_eq!(memory.recall_own(&checks, clock.now_ms()), None);
}

#[test]
fn a_refusal_of_every_shape_reads_back_as_written() {
    let statuses = |n: u32| {
        (0..n)
            .map(|i| RuleStatus {
                remaining: i * 7,
                reset_ms: u64::from(i) * 1_000_003,
                shared: i % 2 == 1,
            })
            .collect::<Vec<_>>()
    };
    for n in 1..=8 {
        let refusal = Decision::Refuse {
            rule: usize::try_from(n - 1).unwrap(),
            wait_ms: u64::MAX - u64::from(n),
            statuses: statuses(n),
        };
        let slot = encode("key\u{0}with\u{1}bytes", T0 + u64::from(n), &refusal).unwrap();
        assert_eq!(
            decode(&slot, "key\u{0}with\u{1}bytes"),
            Some((T0 + u64::from(n), refusal))
        );
        assert_eq!(decode(&slot, "key\u{0}with\u{1}byte"), None);
    }
    assert_eq!(encode("k", T0, &Decision::no_checks()), None);
}
