//! Rules of bytes on every store: a size known before the paid call decides with the whole
//! file (exact), a size known only after the answer is charged to the window that admitted
//! the request (an increment, never a second decision), a refund leaves the bytes counted; and
//! under concurrency, processes (threads for the memory store) deciding and charging at once:
//! no charge is lost, sizes known before never pass the limit, sizes charged after pass it by
//! at most one file per request in flight, and once over, the next request is refused.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

use resolve::config::Config;
use resolve::core::decision::Decision;
use resolve::core::rule::{Algorithm, KeyKind, Rule, Unit};
use resolve::store::Check;
use resolve::store::counters::Counters;

use crate::handles::rule;
use crate::stores::{StoreUnderTest, Timeouts};

const KIB: u64 = 1024;

/// A rule of bytes on the client's address, `limit_kib` kibibytes a `window_secs`.
fn bytes_rule(name: &str, limit_kib: u32, window_secs: u32) -> Rule {
    Rule {
        unit: Unit::Bytes,
        ..rule(name, Algorithm::Fixed, limit_kib, window_secs)
    }
}

fn checks<'a>(rules: &'a [Rule], who: &str) -> Vec<Check<'a>> {
    rules
        .iter()
        .map(|rule| Check {
            rule,
            key: rule.key_for(who),
        })
        .collect()
}

/// The time of an admission; panics on a refusal.
fn admitted(d: Result<Decision, resolve::store::StoreError>, what: &str) -> u64 {
    match d {
        Ok(Decision::Admit { at_ms, .. }) => at_ms,
        other => panic!("{what}: {other:?}"),
    }
}

fn refused(d: Result<Decision, resolve::store::StoreError>, what: &str) {
    match d {
        Ok(Decision::Refuse { rule: 0, .. }) => {}
        other => panic!("{what}: {other:?}"),
    }
}

/// Sizes known before, sizes charged after, refunds and windows, on handles.
pub fn bytes_count_sizes_and_charge_after(sut: &mut dyn StoreUnderTest) {
    let name = sut.name();
    let rules = [
        bytes_rule("ip-bytes", 100, 600),
        rule("ip", Algorithm::Fixed, 50, 600),
    ];
    let store = sut.open(&rules);
    let c = checks(&rules, "b");
    let (bytes_key, calls_key) = (c[0].key.clone(), c[1].key.clone());
    let counted = |sut: &dyn StoreUnderTest| {
        (
            sut.counted(&bytes_key, Algorithm::Fixed),
            sut.counted(&calls_key, Algorithm::Fixed),
        )
    };
    // Known sizes: 60 KiB, then 40 KiB less a few bytes (rounded up to 40): exactly the limit.
    admitted(store.decide_sized(&c, 2, Some(60 * KIB)), "60 KiB");
    let at = admitted(store.decide_sized(&c, 2, Some(40 * KIB - 5)), "40 KiB");
    assert_eq!(counted(sut), (100, 2), "{name}");
    // Nothing is left: a byte more is refused, and a size not known yet too.
    refused(store.decide_sized(&c, 2, Some(1)), "one byte over");
    refused(store.decide_own_first(&c, 2), "full, size unknown");
    assert_eq!(counted(sut), (100, 2), "{name}: refusals count nothing");
    // A refund gives the request back, not its bytes.
    store.refund(&c, at).unwrap();
    assert_eq!(counted(sut), (100, 1), "{name}: refund");

    // Sizes known only after the answer: admitted below the limit, then charged whole.
    let rules = [bytes_rule("after", 100, 600)];
    let store = sut.open(&rules);
    let c = checks(&rules, "b");
    let key = c[0].key.clone();
    let first = admitted(store.decide_own_first(&c, 1), "unknown 1");
    assert_eq!(
        sut.counted(&key, Algorithm::Fixed),
        0,
        "{name}: nothing yet"
    );
    store.charge(&c, first, 70 * KIB).unwrap();
    let second = admitted(
        store.decide_own_first(&c, 1),
        "unknown 2, 70 of 100 KiB used",
    );
    store.charge(&c, second, 150 * KIB + 1).unwrap();
    assert_eq!(
        sut.counted(&key, Algorithm::Fixed),
        221,
        "{name}: over by one file"
    );
    refused(store.decide_own_first(&c, 1), "over: the next is refused");
    refused(store.decide_sized(&c, 1, Some(1)), "over: a known size too");
    // A charge for a request of an earlier window changes nothing.
    store
        .charge(&c, first.saturating_sub(700_000), 5 * KIB)
        .unwrap();
    assert_eq!(
        sut.counted(&key, Algorithm::Fixed),
        221,
        "{name}: stale charge"
    );

    // A charge leaves rules of requests alone, and a window that ended takes nothing.
    let rules = [
        bytes_rule("short", 1000, 2),
        rule("calls", Algorithm::Fixed, 9, 600),
    ];
    let store = sut.open(&rules);
    let c = checks(&rules, "b");
    let at = admitted(store.decide_own_first(&c, 2), "short");
    store.charge(&c, at, 10 * KIB).unwrap();
    assert_eq!(sut.counted(&c[0].key, Algorithm::Fixed), 10, "{name}");
    assert_eq!(sut.counted(&c[1].key, Algorithm::Fixed), 1, "{name}");
    sut.wait_until(sut.past(at + 2000));
    let next = admitted(store.decide_own_first(&c, 2), "next window");
    store.charge(&c, at, 10 * KIB).unwrap();
    let d = store.decide_sized(&c, 2, Some(1000 * KIB));
    // (Unless the test stalled past this window too.)
    if sut.now_ms() < next + 2000 {
        admitted(d, "the old window's charge did not reach the new one");
    }
}

/// How many requests each crowd member makes, one after another.
const EACH: usize = 8;
/// Members at once: the requests in flight.
const CROWD: usize = 8;
/// The limit of the crowd's rule, in kibibytes.
const LIMIT_KIB: u32 = 4000;

/// Member `i`'s sizes in bytes: 100 to 400 KiB, some not whole kibibytes.
fn sizes(i: usize) -> Vec<u64> {
    (0..EACH)
        .map(|j| (100 + ((i * 37 + j * 53) % 301) as u64) * KIB - (j as u64 % 3))
        .collect()
}

const MAX_KIB: u64 = 400;

/// The crowd's rule and its checks; `sized` names the key apart.
fn crowd_rules(sized: bool) -> Vec<Rule> {
    let name = if sized { "crowd-sized" } else { "crowd-after" };
    vec![Rule {
        key: KeyKind::Global,
        key_template: resolve::config::default_key_template(KeyKind::Global),
        ..bytes_rule(name, LIMIT_KIB, 600)
    }]
}

/// One member's requests: each decided (with its size when `sized`), and when admitted with
/// its size unknown, charged after a pause (the paid call); returns the kibibytes admitted.
fn member_requests(store: &dyn Counters, sized: bool, sizes: &[u64]) -> Vec<u64> {
    let rules = crowd_rules(sized);
    let c = checks(&rules, "");
    let mut got = Vec::new();
    for &size in sizes {
        let d = if sized {
            store.decide_sized(&c, 1, Some(size))
        } else {
            store.decide_own_first(&c, 1)
        };
        if let Ok(Decision::Admit { at_ms, .. }) = d {
            if !sized {
                std::thread::sleep(std::time::Duration::from_millis(3));
                store.charge(&c, at_ms, size).expect("charge");
            }
            got.push(size.div_ceil(KIB));
        } else {
            d.expect("a decision");
        }
    }
    got
}

/// Crowds of requests on one rule of bytes, sizes known before and charged after: every
/// admitted file is counted (the store's count is their sum), a known size never passes the
/// limit, a charged one passes it by at most one file per request in flight, and the next
/// request is refused.
pub fn bytes_bound_under_concurrency(sut: &mut dyn StoreUnderTest) {
    let name = sut.name();
    for sized in [true, false] {
        let admitted: Vec<u64> = match sut.in_process() {
            Some(memory) => {
                let start = std::sync::Barrier::new(CROWD);
                std::thread::scope(|s| {
                    let members: Vec<_> = (0..CROWD)
                        .map(|i| {
                            let (memory, start) = (memory.clone(), &start);
                            s.spawn(move || {
                                start.wait();
                                member_requests(&memory, sized, &sizes(i))
                            })
                        })
                        .collect();
                    members
                        .into_iter()
                        .flat_map(|m| m.join().expect("a member"))
                        .collect()
                })
            }
            None => run_members(sut, sized),
        };
        let total: u64 = admitted.iter().sum();
        let rules = crowd_rules(sized);
        let c = checks(&rules, "");
        let counted = sut.counted(&c[0].key, Algorithm::Fixed);
        eprintln!(
            "{name}: {} of {} requests admitted, {total} KiB (limit {LIMIT_KIB}), sizes {}",
            admitted.len(),
            CROWD * EACH,
            if sized {
                "known before"
            } else {
                "charged after"
            }
        );
        assert_eq!(counted, total, "{name}: every admitted file counted once");
        let limit = u64::from(LIMIT_KIB);
        if sized {
            assert!(total <= limit, "{name}: {total} KiB past {limit}");
            // Refused files were each too large for what was left: the limit was nearly met.
            assert!(total + MAX_KIB > limit, "{name}: only {total} KiB admitted");
        } else {
            // Admitted below the limit, each of the requests in flight may add its file.
            let bound = limit - 1 + CROWD as u64 * MAX_KIB;
            assert!(total <= bound, "{name}: {total} KiB past {bound}");
            assert!(total >= limit, "{name}: only {total} KiB admitted");
        }
        // Once over (or, sizes known, with less left than the next file), the next is refused.
        let store = sut.open(&rules);
        let next = if sized {
            store.decide_sized(&c, 1, Some((limit + 1 - total.min(limit)) * KIB))
        } else {
            store.decide_own_first(&c, 1)
        };
        refused(next, "after the crowd");
    }
}

/// The environment variable that makes the test program a crowd member: the store section.
pub const MEMBER_STORE: &str = "RESOLVE_TEST_BYTES_STORE";
const MEMBER_INDEX: &str = "RESOLVE_TEST_BYTES_MEMBER";
const MEMBER_SIZED: &str = "RESOLVE_TEST_BYTES_SIZED";
const READY: &str = "bytes member: ready";
const ADMITTED: &str = "bytes member: admitted";

/// The crowd as processes, this test program run again: each connects, says it is ready,
/// and makes its requests when every one is.
fn run_members(sut: &dyn StoreUnderTest, sized: bool) -> Vec<u64> {
    let section = sut.store_json("deny", Timeouts::Patient).to_string();
    let exe = std::env::current_exe().expect("this test program");
    let mut members: Vec<Child> = (0..CROWD)
        .map(|i| {
            Command::new(&exe)
                .args(["bytes_member_in_a_child_process", "--exact", "--nocapture"])
                .args(["--test-threads", "1"])
                .env(MEMBER_STORE, &section)
                .env(MEMBER_INDEX, i.to_string())
                .env(MEMBER_SIZED, if sized { "1" } else { "0" })
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap_or_else(|e| panic!("start member {i}: {e}"))
        })
        .collect();
    let mut outputs: Vec<BufReader<_>> = members
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().expect("piped")))
        .collect();
    for (i, out) in outputs.iter_mut().enumerate() {
        let mut line = String::new();
        loop {
            line.clear();
            let read = out.read_line(&mut line).expect("read a member's output");
            assert!(
                read > 0,
                "{}: member {i} ended before it was ready",
                sut.name()
            );
            if line.trim_end().ends_with(READY) {
                break;
            }
        }
    }
    for m in &mut members {
        drop(m.stdin.take());
    }
    let mut admitted = Vec::new();
    for (i, (mut m, mut out)) in members.into_iter().zip(outputs).enumerate() {
        let mut rest = String::new();
        out.read_to_string(&mut rest)
            .expect("read a member's output");
        let status = m.wait().expect("wait for a member");
        assert!(
            status.success(),
            "{}: member {i}: {status}: {rest}",
            sut.name()
        );
        let line = rest
            .lines()
            .find_map(|l| l.split_once(ADMITTED).map(|(_, kib)| kib.to_owned()))
            .unwrap_or_else(|| panic!("{}: member {i} said nothing: {rest}", sut.name()));
        admitted.extend(
            line.split_whitespace()
                .map(|n| n.parse::<u64>().expect("KiB")),
        );
    }
    admitted
}

/// The body of each member of [`run_members`]; nothing without [`MEMBER_STORE`].
pub fn member_in_a_child_process() {
    let Ok(section) = std::env::var(MEMBER_STORE) else {
        return;
    };
    let i: usize = std::env::var(MEMBER_INDEX)
        .expect("the index")
        .parse()
        .expect("an index");
    let sized = std::env::var(MEMBER_SIZED).as_deref() == Ok("1");
    let text = format!(r#"{{"store": {section}}}"#);
    let config = Config::from_json(&text, std::path::Path::new("/")).expect("a store section");
    let store =
        resolve::site::open::from_config(&config, &resolve::support::log::Context::default());
    // Connected (the database stores) before the signal, so that the requests meet at the store.
    store.notes.journal_notes().expect("reach the store");
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{READY}")
        .and_then(|()| stdout.flush())
        .expect("say ready");
    let mut go = Vec::new();
    std::io::stdin()
        .read_to_end(&mut go)
        .expect("wait for the signal");
    let got = member_requests(&*store.counters, sized, &sizes(i));
    let words: Vec<String> = got.iter().map(u64::to_string).collect();
    writeln!(stdout, "{ADMITTED} {}", words.join(" "))
        .and_then(|()| stdout.flush())
        .expect("say what was admitted");
}
