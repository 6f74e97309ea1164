//! Scenarios of the usage journal and of `used`, on every store: entries read back as rows
//! (totals and clients, by hour), notes newest first and capped, counts read without being
//! counted, what sweeps (or the store's own expiries) let go after 48 hours and 400 days,
//! exact counts when 300 processes add at once, and the size a busy day takes.
//!
//! The 300 processes are this test program run again, each running only
//! [`child_adds_one_entry`] (`journal_add_in_a_child_process` in store_contract.rs): it opens
//! the store from the store section it is given, says it is ready, waits for its standard input
//! to close, adds one entry and says so. The memory store, which processes cannot share, gets
//! 300 threads instead.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::Instant;

use resolve::config::Config;
use resolve::core::journal::{
    self, Batch, CLIENT_HOURS, ClientCount, Entry, Event, HOUR_MS, KEEP_HOURS, KEEP_NOTES, Note,
    Row, hour_of,
};
use resolve::core::rule::Algorithm;
use resolve::store::Check;
use resolve::store::journal::Journal;
use resolve::store::roles::Backend;

use crate::handles::rule;
use crate::stores::{StoreUnderTest, Timeouts};

/// The environment variable that makes this program a child adding one entry: the store
/// section, as JSON.
pub const CHILD_STORE: &str = "RESOLVE_TEST_JOURNAL_STORE";
/// The hour the child adds to.
const CHILD_HOUR: &str = "RESOLVE_TEST_JOURNAL_HOUR";
/// When set, the data directory the child spools its entries in (as a request does with a
/// store on a server), with files of one millisecond so that movers meet, and adds
/// [`SPOOLED_ENTRIES`] entries.
const CHILD_SPOOL: &str = "RESOLVE_TEST_JOURNAL_SPOOL";
/// Entries each spooling child adds.
const SPOOLED_ENTRIES: u64 = 5;
const READY: &str = "journal child: ready";
const ADDED: &str = "journal child: added";

/// A row's place, and what it counts.
type Tally = BTreeMap<(u32, String, String), u64>;

/// Rows as `(hour, "total"|"admitted"|"refused", name or client) -> count`, summed.
fn tally(rows: &[Row]) -> Tally {
    let mut out = Tally::new();
    for row in rows {
        let (key, n) = match row {
            Row::Total { hour, name, count } => ((*hour, "total".into(), name.clone()), *count),
            Row::Client {
                hour,
                client,
                count,
                n,
            } => ((*hour, count.name().into(), client.clone()), *n),
        };
        *out.entry(key).or_default() += n;
    }
    out
}

fn entry(hour: u32, totals: &[&str], client: Option<(&str, ClientCount)>) -> Entry {
    Entry {
        hour,
        totals: totals.iter().map(|t| ((*t).to_owned(), 1)).collect(),
        clients: client
            .map(|(c, n)| (c.to_owned(), n, 1))
            .into_iter()
            .collect(),
    }
}

fn add(sut: &dyn StoreUnderTest, store: &dyn Journal, e: &Entry) {
    store
        .journal_add(e)
        .unwrap_or_else(|err| panic!("{}: add {e:?}: {err}", sut.name()));
}

fn rows(sut: &dyn StoreUnderTest, store: &dyn Journal, from: u32, to: u32) -> Tally {
    tally(
        &store
            .journal_rows(from, to)
            .unwrap_or_else(|e| panic!("{}: rows {from}..{to}: {e}", sut.name())),
    )
}

fn expect(items: &[(u32, &str, &str, u64)]) -> Tally {
    items
        .iter()
        .map(|(h, kind, what, n)| ((*h, (*kind).to_owned(), (*what).to_owned()), *n))
        .collect()
}

/// Entries come back as rows of their hour: one per total and per client count, summed; rows
/// outside the hours asked for stay out.
pub fn journal_rows_round_trip(sut: &mut dyn StoreUnderTest) {
    let store = sut.open(&[]);
    let now = hour_of(sut.now_ms());
    let (a, b) = ("203.0.113.7", "2001:db8:1:2::/64");
    use ClientCount::{Admitted, Refused};
    for e in [
        entry(
            now - 2,
            &["requests", "admitted", "paid"],
            Some((a, Admitted)),
        ),
        entry(now - 1, &["requests", "refused:ip"], Some((a, Refused))),
        entry(now - 1, &["requests", "refused:ip"], Some((a, Refused))),
        entry(
            now - 1,
            &["requests", "admitted", "paid"],
            Some((b, Admitted)),
        ),
        entry(now - 1, &["requests", "bad:invalid_link"], None),
        entry(
            now,
            &["requests", "admitted", "cache_hits"],
            Some((b, Admitted)),
        ),
        entry(
            now,
            &["requests", "refused:ip", "refused:burst"],
            Some((b, Refused)),
        ),
        entry(now, &[], None),
        // A file served: its bytes in a total and in the client's own count, amounts far past
        // a 32-bit count.
        Entry::new(
            u64::from(now) * HOUR_MS + 1,
            Some(b),
            &[
                Event::Request,
                Event::Admitted,
                Event::Paid,
                Event::Bytes(12_400_000_000),
            ],
        ),
    ] {
        add(sut, &*store, &e);
    }
    let want = expect(&[
        (now - 1, "total", "requests", 4),
        (now - 1, "total", "refused:ip", 2),
        (now - 1, "total", "admitted", 1),
        (now - 1, "total", "paid", 1),
        (now - 1, "total", "bad:invalid_link", 1),
        (now - 1, "refused", a, 2),
        (now - 1, "admitted", b, 1),
        (now, "total", "requests", 3),
        (now, "total", "admitted", 2),
        (now, "total", "paid", 1),
        (now, "total", "bytes", 12_400_000_000),
        (now, "total", "cache_hits", 1),
        (now, "total", "refused:ip", 1),
        (now, "total", "refused:burst", 1),
        (now, "admitted", b, 2),
        (now, "refused", b, 1),
        (now, "bytes", b, 12_400_000_000),
    ]);
    assert_eq!(rows(sut, &*store, now - 1, now + 1), want, "{}", sut.name());
    let earlier = rows(sut, &*store, now - 2, now - 1);
    assert_eq!(
        earlier,
        expect(&[
            (now - 2, "total", "requests", 1),
            (now - 2, "total", "admitted", 1),
            (now - 2, "total", "paid", 1),
            (now - 2, "admitted", a, 1),
        ]),
        "{}",
        sut.name()
    );
    assert!(
        rows(sut, &*store, now + 1, now + 30).is_empty(),
        "{}",
        sut.name()
    );
    // Another handle sees the same.
    let other = sut.open(&[]);
    assert_eq!(rows(sut, &*other, now - 1, now + 1), want, "{}", sut.name());

    // A batch (what a FastCGI process gathers) adds many requests' amounts at once, with
    // several clients in one entry.
    let mut batch = Batch::default();
    for _ in 0..250 {
        batch.add(&entry(
            now - 5,
            &["requests", "refused:ip"],
            Some((a, Refused)),
        ));
    }
    for _ in 0..7 {
        batch.add(&entry(
            now - 5,
            &["requests", "admitted"],
            Some((b, Admitted)),
        ));
    }
    batch.add(&entry(now - 4, &["requests"], None));
    for e in batch.take() {
        add(sut, &*store, &e);
    }
    assert_eq!(
        rows(sut, &*store, now - 5, now - 3),
        expect(&[
            (now - 5, "total", "requests", 257),
            (now - 5, "total", "refused:ip", 250),
            (now - 5, "total", "admitted", 7),
            (now - 5, "refused", a, 250),
            (now - 5, "admitted", b, 7),
            (now - 4, "total", "requests", 1),
        ]),
        "{}: a batch",
        sut.name()
    );
}

/// Notes come back newest first, and only the newest 50 are kept.
pub fn journal_notes_newest_first_and_capped(sut: &mut dyn StoreUnderTest) {
    let store = sut.open(&[]);
    assert_eq!(store.journal_notes().unwrap(), [], "{}", sut.name());
    let note = |n: u64| Note {
        at_ms: 1_700_000_000_000 + n,
        text: format!("ACTION NEEDED: note {n}: spaces, \"quotes\", é\nand a second line"),
    };
    for n in 0..3 {
        store.journal_note(&note(n)).unwrap();
    }
    assert_eq!(
        store.journal_notes().unwrap(),
        [note(2), note(1), note(0)],
        "{}",
        sut.name()
    );
    for n in 3..60 {
        store.journal_note(&note(n)).unwrap();
    }
    let kept = sut.open(&[]).journal_notes().unwrap();
    let want: Vec<Note> = (10..60).rev().map(note).collect();
    assert_eq!(kept.len(), KEEP_NOTES, "{}", sut.name());
    assert_eq!(kept, want, "{}", sut.name());
}

/// One kind of event cannot push out the others: a provider out of quota for 60 visitors'
/// links keeps its newest 10 notes, and the credentials note before them stays.
pub fn journal_notes_keep_a_share_for_each_kind(sut: &mut dyn StoreUnderTest) {
    let store = sut.open(&[]);
    let failed = |n: u64, cause: &str| Note {
        at_ms: 1_700_000_000_000 + n,
        text: format!(
            "ACTION NEEDED: {cause}: provider call for \"https://host.example/{n}\" failed: {n}"
        ),
    };
    let auth = |n| failed(n, "the provider refused the site's credentials");
    let quota = |n| failed(n, "the provider account has no quota left");
    for n in 0..3 {
        store.journal_note(&auth(n)).unwrap();
    }
    for n in 3..63 {
        store.journal_note(&quota(n)).unwrap();
    }
    let kept = sut.open(&[]).journal_notes().unwrap();
    let mut want: Vec<Note> = (53..63).rev().map(quota).collect();
    want.extend((0..3).rev().map(auth));
    assert_eq!(kept, want, "{}", sut.name());
}

/// `used` says what each key counts now, for fixed and (where kept) sliding rules: 0 for a key
/// never seen, and asking counts nothing.
pub fn used_counts_without_counting(sut: &mut dyn StoreUnderTest) {
    for algorithm in [Algorithm::Fixed, Algorithm::Sliding] {
        let rules = [rule("spend", algorithm, 5, 600)];
        let store = sut.open(&rules);
        let check = |who: &str| Check {
            rule: &rules[0],
            key: rules[0].key_for(who),
        };
        let (seen, unseen) = (check("seen"), check("unseen"));
        if !sut.algorithms().contains(&algorithm) {
            let e = store
                .used(std::slice::from_ref(&seen))
                .expect_err("a store that keeps no sliding windows says so");
            assert!(e.detail.contains("sliding window"), "{}: {e}", sut.name());
            continue;
        }
        let both = [seen.clone(), unseen.clone()];
        assert_eq!(store.used(&both).unwrap(), [0, 0], "{}", sut.name());
        for _ in 0..3 {
            assert!(
                store
                    .decide(std::slice::from_ref(&seen))
                    .unwrap()
                    .is_admit()
            );
        }
        for _ in 0..5 {
            assert_eq!(
                store.used(&both).unwrap(),
                [3, 0],
                "{} {algorithm:?}",
                sut.name()
            );
        }
        assert_eq!(store.used(&[]).unwrap(), Vec::<u32>::new());
        // Asking counted nothing: two more are admitted, then the limit.
        assert!(
            store
                .decide(std::slice::from_ref(&seen))
                .unwrap()
                .is_admit()
        );
        assert!(
            store
                .decide(std::slice::from_ref(&seen))
                .unwrap()
                .is_admit()
        );
        assert!(
            !store
                .decide(std::slice::from_ref(&seen))
                .unwrap()
                .is_admit()
        );
        assert_eq!(store.used(&both).unwrap(), [5, 0], "{}", sut.name());
        assert!(!sut.holds(&unseen.key), "{}: used wrote a key", sut.name());
    }
    // A window that ended counts nothing.
    let rules = [rule("brief", Algorithm::Fixed, 5, 1)];
    let store = sut.open(&rules);
    let c = Check {
        rule: &rules[0],
        key: rules[0].key_for("brief"),
    };
    let began = sut.now_ms();
    store.decide(std::slice::from_ref(&c)).unwrap();
    store.decide(std::slice::from_ref(&c)).unwrap();
    if sut.now_ms() < began + 1000 {
        assert_eq!(store.used(std::slice::from_ref(&c)).unwrap(), [2]);
    }
    sut.wait_until(sut.past(sut.now_ms() + 1000));
    assert_eq!(
        store.used(std::slice::from_ref(&c)).unwrap(),
        [0],
        "{}",
        sut.name()
    );
}

/// Client counts go once they are more than 48 hours old, totals once more than 400 days old:
/// after a sweep (the Redis store expires them by itself), rows of those hours are gone and the
/// rest are all there. Entries of such old hours are added directly (the database servers'
/// clocks cannot be moved); with a clock the test holds, the hours also grow old by the clock.
pub fn journal_sweep_lets_old_hours_go(sut: &mut dyn StoreUnderTest) {
    let store = sut.open(&[]);
    let now = hour_of(sut.now_ms());
    let c = Some(("198.51.100.4", ClientCount::Admitted));
    // Two hours either side of each edge: a test that crosses an hour still sees the same.
    let clients_gone = now - CLIENT_HOURS - 2;
    let clients_kept = now - CLIENT_HOURS + 2;
    let totals_gone = now - KEEP_HOURS - 2;
    let totals_kept = now - KEEP_HOURS + 2;
    for hour in [totals_gone, totals_kept, clients_gone, clients_kept, now] {
        add(sut, &*store, &entry(hour, &["requests", "paid"], c));
    }
    let report = store.sweep(None).expect("sweep");
    assert!(report.complete, "{}: {report:?}", sut.name());
    let mut want = Tally::new();
    for hour in [totals_kept, clients_gone, clients_kept, now] {
        for name in ["requests", "paid"] {
            want.insert((hour, "total".into(), name.into()), 1);
        }
    }
    for hour in [clients_kept, now] {
        want.insert((hour, "admitted".into(), "198.51.100.4".into()), 1);
    }
    let all = |store: &dyn Backend| rows(sut, store, totals_gone - 24, now + 1);
    assert_eq!(all(&*store), want, "{}", sut.name());
    // An entry for an hour that a sweep has put away already is still counted.
    add(sut, &*store, &entry(clients_gone, &["paid"], None));
    *want
        .get_mut(&(clients_gone, "total".into(), "paid".into()))
        .expect("kept") += 1;
    assert_eq!(all(&*store), want, "{}: after a late entry", sut.name());
    store.sweep(None).expect("sweep again");
    assert_eq!(all(&*sut.open(&[])), want, "{}: swept again", sut.name());

    let Some(clock) = sut.held_clock().cloned() else {
        return;
    };
    // The same by the clock: this hour's client count goes 49 hours on, its totals stay until
    // 401 days on.
    let moved = |hours: u32| (u64::from(now) + u64::from(hours)) * HOUR_MS + 1;
    clock.advance_to(moved(CLIENT_HOURS + 1));
    store.sweep(None).expect("sweep two days on");
    let this_hour = |t: &Tally| -> Tally {
        t.iter()
            .filter(|((h, _, _), _)| *h == now)
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };
    assert_eq!(
        this_hour(&rows(sut, &*store, now, now + 1)),
        expect(&[(now, "total", "paid", 1), (now, "total", "requests", 1)]),
        "{}: two days on",
        sut.name()
    );
    clock.advance_to(moved(KEEP_HOURS + 1));
    store.sweep(None).expect("sweep 400 days on");
    assert!(
        rows(sut, &*store, totals_gone, now + KEEP_HOURS).is_empty(),
        "{}: 400 days on",
        sut.name()
    );
}

/// 300 processes (threads for the memory store) add one entry each to the same hour and
/// client, all at once: every count is exactly 300.
pub fn journal_exact_under_300_processes(sut: &mut dyn StoreUnderTest) {
    const N: u64 = 300;
    let store = sut.open(&[]);
    let hour = hour_of(sut.now_ms());
    let e = child_entry(hour);
    // The tables or directories exist before the crowd arrives, as on a site in use.
    add(sut, &*store, &entry(hour - 1, &["warm-up"], None));
    let began = Instant::now();
    match sut.in_process() {
        Some(memory) => {
            let start = std::sync::Barrier::new(N as usize);
            std::thread::scope(|s| {
                for _ in 0..N {
                    let (memory, start, e) = (memory.clone(), &start, &e);
                    s.spawn(move || {
                        start.wait();
                        memory.journal_add(e).expect("add");
                    });
                }
            });
        }
        None => run_children(sut, hour, N as usize, None),
    }
    eprintln!(
        "{}: {N} entries at once in {:?}",
        sut.name(),
        began.elapsed()
    );
    let got = rows(sut, &*store, hour, hour + 1);
    let want = expect(&[
        (hour, "total", "requests", N),
        (hour, "total", "refused:ip", N),
        (hour, "refused", "192.0.2.30", N),
    ]);
    assert_eq!(got, want, "{}", sut.name());
}

/// 300 processes add 5 entries each through the journal's spool (files of one millisecond, so
/// that many of them start a file and move the spool at once, as requests do): the store
/// counts every entry once, after a reader writes what is left.
pub fn journal_exact_under_300_processes_through_the_spool(sut: &mut dyn StoreUnderTest) {
    const N: u64 = 300;
    let store = sut.open(&[]);
    let hour = hour_of(sut.now_ms());
    add(sut, &*store, &entry(hour - 1, &["warm-up"], None));
    let data = std::env::temp_dir().join(format!(
        "resolve-spool-{}-{}-{}",
        sut.name(),
        std::process::id(),
        sut.now_ms()
    ));
    let began = Instant::now();
    run_children(sut, hour, N as usize, Some(&data));
    let spool = data.join(resolve::support::defaults::JOURNAL_SPOOL_DIR);
    let left = std::fs::read_dir(&spool).map_or(0, |d| d.count());
    let before = rows(sut, &*store, hour, hour + 1)
        .get(&(hour, "total".to_owned(), "requests".to_owned()))
        .copied()
        .unwrap_or(0);
    eprintln!(
        "{}: {N} processes x {SPOOLED_ENTRIES} entries through the spool in {:?}: {before} \
         written by them, {left} files left",
        sut.name(),
        began.elapsed()
    );
    assert!(before > 0, "{}: the processes moved the spool", sut.name());
    let reader = resolve::store::spool::SpooledJournal::new(
        Rc::<dyn Backend>::from(sut.open(&[])),
        &data,
        std::time::Duration::from_secs(5),
    );
    let got = rows(sut, &reader, hour, hour + 1);
    let want = expect(&[
        (hour, "total", "requests", N * SPOOLED_ENTRIES),
        (hour, "total", "refused:ip", N * SPOOLED_ENTRIES),
        (hour, "refused", "192.0.2.30", N * SPOOLED_ENTRIES),
    ]);
    assert_eq!(got, want, "{}", sut.name());
    assert_eq!(std::fs::read_dir(&spool).map_or(0, |d| d.count()), 0);
    let _ = std::fs::remove_dir_all(&data);
}

fn child_entry(hour: u32) -> Entry {
    entry(
        hour,
        &["requests", "refused:ip"],
        Some(("192.0.2.30", ClientCount::Refused)),
    )
}

/// Starts `n` copies of this program as children adding one entry each, waits until every
/// one has its store open, lets them all go at once, and checks each added.
fn run_children(sut: &dyn StoreUnderTest, hour: u32, n: usize, spool: Option<&std::path::Path>) {
    let section = sut.store_json("deny", Timeouts::Patient).to_string();
    let exe = std::env::current_exe().expect("this test program");
    let mut children: Vec<Child> = (0..n)
        .map(|i| {
            let mut command = Command::new(&exe);
            if let Some(dir) = spool {
                command.env(CHILD_SPOOL, dir);
            }
            command
                .args(["journal_add_in_a_child_process", "--exact", "--nocapture"])
                .args(["--test-threads", "1"])
                .env(CHILD_STORE, &section)
                .env(CHILD_HOUR, hour.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap_or_else(|e| panic!("start child {i}: {e}"))
        })
        .collect();
    let mut outputs: Vec<BufReader<_>> = children
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().expect("piped")))
        .collect();
    for (i, out) in outputs.iter_mut().enumerate() {
        let mut line = String::new();
        loop {
            line.clear();
            let read = out.read_line(&mut line).expect("read a child's output");
            assert!(
                read > 0,
                "{}: child {i} ended before it was ready",
                sut.name()
            );
            // (After the harness's own `test NAME ... ` on the same line.)
            if line.trim_end().ends_with(READY) {
                break;
            }
        }
    }
    // All ready: closing their standard inputs lets them go together.
    for c in &mut children {
        drop(c.stdin.take());
    }
    let mut failed = Vec::new();
    for (i, (mut c, mut out)) in children.into_iter().zip(outputs).enumerate() {
        let mut rest = String::new();
        out.read_to_string(&mut rest)
            .expect("read a child's output");
        let status = c.wait().expect("wait for a child");
        if !status.success() || !rest.lines().any(|l| l.ends_with(ADDED)) {
            failed.push(format!("child {i}: {status}: {rest}"));
        }
    }
    assert!(failed.is_empty(), "{}: {failed:#?}", sut.name());
}

/// The body of each child of [`run_children`]; nothing without [`CHILD_STORE`].
pub fn child_adds_one_entry() {
    let Ok(section) = std::env::var(CHILD_STORE) else {
        return;
    };
    let hour: u32 = std::env::var(CHILD_HOUR)
        .expect("the hour")
        .parse()
        .expect("an hour");
    let text = format!(r#"{{"store": {section}}}"#);
    let config = Config::from_json(&text, std::path::Path::new("/")).expect("a store section");
    let spool = std::env::var_os(CHILD_SPOOL);
    let mut store =
        resolve::site::open::from_config(&config, &resolve::support::log::Context::default());
    if let Some(dir) = &spool {
        store = store.with_journal(|journal| {
            Rc::new(
                resolve::store::spool::SpooledJournal::new(
                    journal,
                    std::path::Path::new(dir),
                    std::time::Duration::from_secs(5),
                )
                .with_period_ms(1),
            )
        });
    }
    // Connected (the database stores) before the signal, so that the adds meet at the store.
    store.notes.journal_notes().expect("reach the store");
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{READY}")
        .and_then(|()| stdout.flush())
        .expect("say ready");
    let mut go = Vec::new();
    std::io::stdin()
        .read_to_end(&mut go)
        .expect("wait for the signal");
    for _ in 0..if spool.is_some() { SPOOLED_ENTRIES } else { 1 } {
        store
            .journal
            .journal_add(&child_entry(hour))
            .expect("add the entry");
    }
    writeln!(stdout, "{ADDED}")
        .and_then(|()| stdout.flush())
        .expect("say added");
}

/// The clients of a busy day and what it leaves: 10,000 clients (one in five an IPv6 prefix),
/// each seen in two hours of the day, one in five also refused once: 22,000 entries. Prints
/// the bytes the journal takes while the day's client counts are kept, and once only its
/// totals are, and checks them against the store's bound.
pub fn journal_size_of_a_busy_day(sut: &mut dyn StoreUnderTest) {
    let Some(bound) = day_bound(sut.name()) else {
        return;
    };
    let store = sut.open(&[]);
    let now = hour_of(sut.now_ms());
    let first = now - 23;
    let began = Instant::now();
    for c in 0..10_000u32 {
        let client = if c % 5 == 4 {
            format!("2001:db8:{:x}:{:x}::/64", c / 4096, c % 4096)
        } else {
            format!("10.{}.{}.{}", c >> 16, (c >> 8) & 255, c & 255)
        };
        let admitted = Some((client.as_str(), ClientCount::Admitted));
        for hour in [first + c % 24, first + (c * 7 + 5) % 24] {
            add(
                sut,
                &*store,
                &entry(hour, &["requests", "admitted", "paid"], admitted),
            );
        }
        if c % 5 == 0 {
            let refused = Some((client.as_str(), ClientCount::Refused));
            let hour = first + (c * 11 + 3) % 24;
            add(
                sut,
                &*store,
                &entry(hour, &["requests", "refused:ip"], refused),
            );
        }
    }
    let took = began.elapsed();
    let day = store.journal_rows(first, now + 1).expect("the day's rows");
    let figures = journal::Figures::from_rows(&day, first, now + 1);
    assert_eq!(figures.requests, 22_000, "{}", sut.name());
    assert_eq!(figures.clients.len(), 10_000, "{}", sut.name());
    assert_eq!(figures.refused_total(), 2_000, "{}", sut.name());
    let with_clients = sut.journal_bytes(false).expect("a size");
    let after = match sut.held_clock().cloned() {
        // Two days on, a sweep leaves the day's totals only.
        Some(clock) => {
            clock.advance_to((u64::from(now) + u64::from(CLIENT_HOURS) + 1) * HOUR_MS + 1);
            store.sweep(None).expect("sweep");
            let totals = store.journal_rows(first, now + 1).expect("rows");
            let f = journal::Figures::from_rows(&totals, first, now + 1);
            assert_eq!((f.requests, f.clients.len()), (22_000, 0), "{}", sut.name());
            "after the sweep two days on"
        }
        None => "of its totals alone",
    };
    let totals_only = sut.journal_bytes(true).expect("a size");
    eprintln!(
        "JOURNAL SIZE {}: a day of 10,000 clients (22,000 entries, {} rows, added in {took:?}): \
         {with_clients} bytes with its client counts (bound {}), {totals_only} bytes {after} \
         (bound {})",
        sut.name(),
        day.len(),
        bound.0,
        bound.1
    );
    assert!(with_clients < bound.0, "{}: {with_clients}", sut.name());
    assert!(totals_only < bound.1, "{}: {totals_only}", sut.name());
}

/// The bytes a day of [`journal_size_of_a_busy_day`] may take per store: with its client
/// counts, and with its totals only. None for the memory store, which has no size of its own.
fn day_bound(store: &str) -> Option<(u64, u64)> {
    match store {
        // Measured: 1.08 MB (1.57 MB of disk blocks), then 1.9 kB.
        "file" => Some((1_500_000, 10_000)),
        // MyISAM's data and index (DATA_LENGTH + INDEX_LENGTH): 1.39 MB, 6.8 kB (InnoDB's
        // pages, half filled by keys arriving out of order, took 3.7 MB, 16 kB).
        "mysql" => Some((2_500_000, 20_000)),
        // MEMORY USAGE: 1.6 MB, 3.3 kB.
        "redis" => Some((3_000_000, 32_000)),
        _ => None,
    }
}
