//! Tests of the file store.

use super::*;
use crate::core::clock::FakeClock;
use crate::core::rule::KeyKind;
use crate::store::upkeep::Upkeep;
use lock::{MAX_WAITERS, WAITERS};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::support::temp::Dir;

// A request waiting on a file's lock while the file is removed: tests/waiting.rs.
mod waiting;

fn rule(name: &str, limit: u32, window: u32) -> Rule {
    Rule::new(
        name,
        KeyKind::Ip,
        Algorithm::Fixed,
        limit,
        window,
        crate::support::defaults::KEY_TEMPLATE_IP,
    )
    .unwrap()
}

/// A store in `dir` at time 0, with the usual ten-minute sweep grace.
fn store_in(dir: &Path) -> FileStore<FakeClock> {
    FileStore::new(dir, FakeClock::at(0), Duration::from_secs(600))
}

/// Decides one request for `key` under `rule`.
fn decide_one(
    store: &FileStore<FakeClock>,
    rule: &Rule,
    key: &str,
) -> Result<Decision, StoreError> {
    store.decide(&[Check {
        rule,
        key: key.into(),
    }])
}

/// Takes the lock on `key`'s counter file as another process would, until the file is dropped.
fn hold_lock(store: &FileStore<FakeClock>, key: &str) -> File {
    let holder = File::open(store.path_for(key)).unwrap();
    holder.lock().unwrap();
    holder
}

/// How many entries `dir` holds.
fn entries(dir: &Path) -> usize {
    fs::read_dir(dir).unwrap().count()
}

/// A directory of its own for a test, removed when it is dropped (kept when the test fails).
fn tempdir(name: &str) -> Dir {
    Dir::new("fs", name)
}

#[test]
fn file_names_are_hashes_inside_the_directory() {
    let dir = tempdir("names");
    let store = store_in(&dir);
    for key in ["resolve:ip:../../etc/passwd", "resolve:ip:\0/x", "", "a/b"] {
        let p = store.path_for(key);
        assert!(p.starts_with(&dir));
        assert_eq!(p.components().count(), dir.components().count() + 2);
        assert!(is_key_file_name(&p.file_name().unwrap().to_string_lossy()));
    }
    assert_ne!(
        store.path_for("resolve:ip:1.2.3.4"),
        store.path_for("resolve:ip:1.2.3.5")
    );
    // The layout stays `DIR/ab/HASH` (a cached answer's with its suffix) whatever the directory
    // is written as, the block list's name written out included.
    for dir in ["", "rel", "/abs", "/abs/"] {
        let store = store_in(Path::new(dir));
        for key in ["resolve:ip:192.0.2.1", &Reserved::BlockList.key()] {
            let name = crate::support::hex::lower(&Sha256::digest(key.as_bytes()));
            let want = Path::new(dir).join(&name[..2]).join(&name);
            assert_eq!(store.path_for(key), want, "{dir:?} {key}");
            let cached = format!("{}{CACHE_SUFFIX}", want.display());
            assert_eq!(store.cache_path(key), Path::new(&cached));
        }
    }
}

/// One key counted once (of 3 a minute) in a store in a directory of its own, `name`, that
/// waits up to `lock_timeout_ms` for a counter file's lock (`store.lock_timeout_ms`).
struct Counted {
    store: FileStore<FakeClock>,
    rule: Rule,
    key: &'static str,
    _dir: Dir,
}

impl Counted {
    fn new(name: &str, key: &'static str, lock_timeout_ms: u64) -> Counted {
        let dir = tempdir(name);
        let counted = Counted {
            store: store_in(&dir).with_lock_timeout(Duration::from_millis(lock_timeout_ms)),
            rule: rule("ip", 3, 60),
            key,
            _dir: dir,
        };
        assert!(counted.check().unwrap().is_admit());
        counted
    }

    /// The next request for the key.
    fn check(&self) -> Result<Decision, StoreError> {
        decide_one(&self.store, &self.rule, self.key)
    }

    /// The key's lock, taken as another process would, until the file is dropped.
    fn hold(&self) -> File {
        hold_lock(&self.store, self.key)
    }
}

#[test]
fn a_busy_lock_is_waited_for_and_a_stuck_one_ends_the_wait() {
    let key = Counted::new("lockwait", "resolve:ip:192.0.2.1", 300);
    // Another holder that lets go after 100 ms: the request waits for it and counts.
    let holder = key.hold();
    let released = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(holder);
    });
    assert!(key.check().unwrap().is_admit());
    released.join().unwrap();
    // One that never lets go: a store error after the timeout, not a wait without end.
    let holder = key.hold();
    let started = Instant::now();
    let error = key.check().unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(error.to_string().contains("stayed locked"), "{error}");
    drop(holder);
    // Once it is gone, the count goes on where it was.
    assert!(key.check().unwrap().is_admit());
    assert!(!key.check().unwrap().is_admit());
}

#[test]
fn a_client_over_its_own_limit_never_opens_the_sites_files() {
    let global = crate::support::defaults::KEY_TEMPLATE_GLOBAL;
    let site = Rule::new("day", KeyKind::Global, Algorithm::Fixed, 9, 86_400, global).unwrap();
    let key = Counted::new("ownfirst", "resolve:ip:192.0.2.1", 300);
    let checks = [
        Check {
            rule: &key.rule,
            key: key.key.into(),
        },
        Check {
            rule: &site,
            key: site.key_for(""),
        },
    ];
    for _ in 0..2 {
        assert!(key.store.decide_own_first(&checks, 1).unwrap().is_admit());
    }
    let site_file = key.store.path_for(&checks[1].key);
    let before = fs::read(&site_file).unwrap();
    // Another process holds the site's file: a request that locked it would wait, then fail.
    let holder = hold_lock(&key.store, &checks[1].key);
    match key.store.decide_own_first(&checks, 1).unwrap() {
        Decision::Refuse { rule, statuses, .. } => assert_eq!((rule, statuses.len()), (0, 1)),
        other => panic!("{other:?}"),
    }
    let every_rule = key.store.decide(&checks).unwrap_err();
    assert!(
        every_rule.to_string().contains("stayed locked"),
        "{every_rule}"
    );
    drop(holder);
    assert_eq!(
        fs::read(&site_file).unwrap(),
        before,
        "the site's count untouched"
    );
}

#[test]
fn waiters_given_up_on_are_capped() {
    // Giving up at once and after the wait stand a second apart: a busy machine moves neither
    // that far.
    let key = Counted::new("waiters", "resolve:ip:192.0.2.77", 1000);
    let holder = key.hold();
    // Each request gives up; the first ones leave a waiter behind, the later ones find
    // the cap reached and give up at once instead of adding one.
    let at_once = (0..MAX_WAITERS + 4)
        .filter(|_| {
            let started = Instant::now();
            assert!(key.check().is_err());
            started.elapsed() < Duration::from_millis(500)
        })
        .count();
    assert!(at_once >= 4, "{at_once} gave up at once");
    assert!(WAITERS.load(Ordering::SeqCst) <= MAX_WAITERS);
    // Released: the waiters take the lock in turn and end, and counting goes on.
    drop(holder);
    let deadline = Instant::now() + Duration::from_secs(5);
    while WAITERS.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(key.check().unwrap().is_admit());
}

#[test]
fn links_and_fifos_are_refused_never_followed_or_waited_on() {
    let dir = tempdir("links");
    let outside = tempdir("links-outside");
    let r = rule("ip", 3, 60);
    let store = store_in(&dir);
    let check = |key: &str| decide_one(&store, &r, key);
    // A counter file that is a link, dangling or not.
    let target = outside.join("target");
    fs::write(&target, b"").unwrap();
    for (key, to) in [
        ("resolve:ip:a", target.clone()),
        ("resolve:ip:b", outside.join("none")),
    ] {
        let path = store.path_for(key);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&to, &path).unwrap();
        let error = check(key).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
    }
    assert_eq!(
        fs::read(&target).unwrap(),
        b"",
        "nothing written through the link"
    );
    assert!(
        !outside.join("none").exists(),
        "nothing created through the link"
    );
    // A shard directory that is a link.
    let key = "resolve:ip:c";
    let shard = store.path_for(key).parent().unwrap().to_owned();
    if !shard.exists() {
        std::os::unix::fs::symlink(&outside, &shard).unwrap();
        let error = check(key).unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
    }
    // A FIFO, which a read-only open would wait on for ever.
    let key = "resolve:ip:d";
    let path = store.path_for(key);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&path).status();
    if made.is_ok_and(|s| s.success()) {
        assert!(check(key).is_err());
        let error = store.read(key).unwrap_err();
        assert!(error.to_string().contains("regular"), "{error}");
        let report = store.sweep(None).unwrap();
        assert!(report.complete);
    }
    assert_eq!(entries(&outside), 1, "only the target outside");
}

#[test]
fn counts_persist_across_store_instances() {
    let dir = tempdir("persist");
    let r = rule("ip", 3, 60);
    for i in 0..5 {
        // A new store per request, as each CGI request is a new process.
        let store = FileStore::new(&*dir, FakeClock::at(1_000 + i), Duration::from_secs(600));
        let d = decide_one(&store, &r, "resolve:ip:192.0.2.1").unwrap();
        assert_eq!(d.is_admit(), i < 3, "request {i}");
    }
    let store = store_in(&dir);
    assert_eq!(
        store.read("resolve:ip:192.0.2.1").unwrap().unwrap().count,
        3
    );
    assert_eq!(store.read("resolve:ip:192.0.2.2").unwrap(), None);
}

#[test]
fn a_missing_directory_is_created_private() {
    let base = tempdir("missing");
    let dir = base.join("nested").join("data");
    let store = store_in(&dir);
    let r = rule("ip", 3, 60);
    assert!(decide_one(&store, &r, "k").unwrap().is_admit());
    let mode = fs::metadata(&dir).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn an_uncreatable_directory_is_an_error_with_a_fix() {
    let base = tempdir("uncreatable");
    fs::write(base.join("file"), b"").unwrap();
    let store = store_in(&base.join("file/data"));
    let r = rule("ip", 3, 60);
    let e = decide_one(&store, &r, "k").unwrap_err();
    assert!(e.detail.contains("mkdir -m 700"), "{e}");
    assert!(store.probe().is_err());
}

#[test]
fn damaged_files_are_reported_and_moved_aside() {
    let dir = tempdir("damaged");
    let store = store_in(&dir);
    let r = rule("ip", 3, 60);
    let check = [Check {
        rule: &r,
        key: "resolve:ip:192.0.2.9".into(),
    }];
    let path = store.path_for(&check[0].key);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, b"garbage").unwrap();
    // A reader reports it and leaves it where it is.
    assert_eq!(
        store.read(&check[0].key).unwrap_err().kind,
        crate::store::StoreErrorKind::Corrupt
    );
    assert_eq!(fs::read(&path).unwrap(), b"garbage");
    // A request moves it aside.
    let e = store.decide(&check).unwrap_err();
    assert_eq!(e.kind, crate::store::StoreErrorKind::Corrupt);
    assert!(e.detail.contains(".damaged"), "{e}");
    // The next request starts a new count.
    assert!(store.decide(&check).unwrap().is_admit());
}

#[test]
fn sweeps_remove_only_long_finished_windows() {
    let dir = tempdir("sweep");
    fs::write(dir.join(".htaccess"), "Require all denied\n").unwrap();
    let r = rule("ip", 3, 60);
    let clock = FakeClock::at(1_000_000);
    let store = FileStore::new(&*dir, clock, Duration::from_secs(600));
    for n in 0..20 {
        decide_one(&store, &r, &format!("resolve:ip:192.0.2.{n}")).unwrap();
    }
    // A window that ended, but not long ago: kept.
    store.clock.advance_ms(60_000 + 599_000);
    let fresh = Check {
        rule: &r,
        key: "resolve:ip:198.51.100.1".into(),
    };
    store.decide(std::slice::from_ref(&fresh)).unwrap();
    let report = store.sweep(None).unwrap();
    assert_eq!(
        (report.scanned, report.removed, report.complete),
        (21, 0, true)
    );
    store.clock.advance_ms(2_000);
    let report = store.sweep(None).unwrap();
    assert_eq!((report.scanned, report.removed), (21, 20));
    assert!(store.read(&fresh.key).unwrap().is_some());
    assert!(dir.join(".htaccess").exists(), "never touches other files");
}

#[test]
fn a_zero_budget_sweep_stops_early() {
    let dir = tempdir("budget");
    let r = rule("ip", 3, 1);
    let store = FileStore::new(&*dir, FakeClock::at(0), Duration::from_secs(0));
    for n in 0..50 {
        decide_one(&store, &r, &format!("k{n}")).unwrap();
    }
    store.clock.advance_ms(10_000);
    let report = store.sweep(Some(Duration::ZERO)).unwrap();
    assert!(!report.complete);
    assert_eq!(report.removed, 0);
    assert_eq!(store.sweep(None).unwrap().removed, 50);
}

#[test]
fn a_sweeps_budget_is_kept_on_the_stores_clock() {
    // However slow the machine, a millisecond on a clock that does not move never runs out;
    // a clock already past the budget stops the sweep before its first file.
    let dir = tempdir("budget-clock");
    let r = rule("ip", 3, 1);
    let store = FileStore::new(&*dir, FakeClock::at(0), Duration::from_secs(0));
    for n in 0..50 {
        decide_one(&store, &r, &format!("k{n}")).unwrap();
    }
    store.clock.advance_ms(10_000);
    let report = store.sweep(Some(Duration::from_millis(1))).unwrap();
    assert!(report.complete);
    assert_eq!(report.removed, 50);
}

/// One entry of `hour` for client `who`: a request and its refusal.
fn refused_entry(hour: u32, who: &str) -> usage::Entry {
    usage::Entry {
        hour,
        totals: vec![("requests".into(), 1), ("refused:ip".into(), 1)],
        clients: vec![(who.into(), usage::ClientCount::Refused, 1)],
    }
}

/// The journal's rows of `from..to` as `(hour, name or client, count)`, sorted.
fn journal_of(store: &FileStore<FakeClock>, from: u32, to: u32) -> Vec<(u32, String, u64)> {
    let mut rows: Vec<(u32, String, u64)> = store
        .journal_rows(from, to)
        .unwrap()
        .into_iter()
        .map(|r| match r {
            usage::Row::Total { hour, name, count } => (hour, name, count),
            usage::Row::Client {
                hour, client, n, ..
            } => (hour, format!("client {client}"), n),
        })
        .collect();
    rows.sort();
    // Totals of one hour are kept per shard: summed, as readers sum them.
    rows.dedup_by(|b, a| {
        let same = a.0 == b.0 && a.1 == b.1;
        if same {
            a.2 += b.2;
        }
        same
    });
    rows
}

/// The journal's files whose names start with `prefix`.
fn journal_files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir.join(journal::DIR_NAME))
        .map(|e| {
            e.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

const HOUR: u32 = 480_000;

fn journal_store(name: &str) -> (Dir, FileStore<FakeClock>) {
    let dir = tempdir(name);
    let store = FileStore::new(
        &*dir,
        FakeClock::at(u64::from(HOUR) * usage::HOUR_MS + 5),
        Duration::from_secs(600),
    );
    (dir, store)
}

#[test]
fn journal_files_are_private_and_a_crash_left_over_never_counts_twice() {
    let (dir, store) = journal_store("journal-crash");
    for who in ["192.0.2.1", "192.0.2.2", "192.0.2.1"] {
        store.journal_add(&refused_entry(HOUR, who)).unwrap();
    }
    let mode = |p: &Path| fs::metadata(p).unwrap().mode() & 0o777;
    assert_eq!(mode(&dir.join(journal::DIR_NAME)), 0o700);
    let hours = journal_files(&dir, "h");
    assert!(!hours.is_empty() && hours.iter().all(|p| mode(p) == 0o600));
    let want = vec![
        (HOUR, "client 192.0.2.1".to_owned(), 2),
        (HOUR, "client 192.0.2.2".to_owned(), 1),
        (HOUR, "refused:ip".to_owned(), 3),
        (HOUR, "requests".to_owned(), 3),
    ];
    assert_eq!(journal_of(&store, HOUR, HOUR + 1), want);
    // Two days on, a sweep moves the hour into its day's file and deletes the hour's files.
    let saved: Vec<(PathBuf, Vec<u8>)> = hours
        .iter()
        .map(|p| (p.clone(), fs::read(p).unwrap()))
        .collect();
    store.clock.advance_ms(49 * usage::HOUR_MS);
    let report = store.sweep(None).unwrap();
    assert_eq!(report.removed, hours.len() as u64);
    assert!(journal_files(&dir, "h").is_empty());
    assert_eq!(journal_files(&dir, "d").len(), 1);
    let totals = want[2..].to_vec();
    assert_eq!(journal_of(&store, HOUR, HOUR + 1), totals);
    // A crash between writing the day's file and deleting the hour's: they are still there,
    // ignored by readers, and deleted by the next sweep.
    for (path, bytes) in &saved {
        fs::write(path, bytes).unwrap();
    }
    assert_eq!(journal_of(&store, HOUR, HOUR + 1), totals);
    store.sweep(None).unwrap();
    assert!(journal_files(&dir, "h").is_empty());
    assert_eq!(journal_of(&store, HOUR, HOUR + 1), totals);
}

#[test]
fn a_journal_write_that_never_completed_leaves_the_counts_before_it() {
    let (dir, store) = journal_store("journal-torn");
    store
        .journal_add(&refused_entry(HOUR, "192.0.2.1"))
        .unwrap();
    let path = journal_files(&dir, "h").remove(0);
    let before = fs::read(&path).unwrap();
    let live = journal_record::decode_header(&before).unwrap().unwrap();
    // The next copy, cut short where it goes, its header never written: every cut reads as
    // the counts before it.
    let next = journal_record::place(Some(&live), live.len + 40) as usize;
    for cut in [0, 1, 20, 39, 80] {
        let mut torn = before.clone();
        torn.resize(torn.len().max(next + cut), 0);
        torn[next..next + cut].fill(b'x');
        fs::write(&path, &torn).unwrap();
        assert_eq!(
            journal_of(&store, HOUR, HOUR + 1),
            [
                (HOUR, "client 192.0.2.1".to_owned(), 1),
                (HOUR, "refused:ip".to_owned(), 1),
                (HOUR, "requests".to_owned(), 1),
            ],
            "cut at {cut}"
        );
    }
    store
        .journal_add(&refused_entry(HOUR, "192.0.2.1"))
        .unwrap();
    assert_eq!(journal_of(&store, HOUR, HOUR + 1)[0].2, 2);
}

#[test]
fn damaged_journal_files_are_moved_aside_and_reported() {
    let (dir, store) = journal_store("journal-damaged");
    let entry = refused_entry(HOUR, "192.0.2.1");
    store.journal_add(&entry).unwrap();
    let path = journal_files(&dir, "h").remove(0);
    fs::write(&path, b"garbage").unwrap();
    // A reader reports it and moves it aside; the journal reads on without it.
    let e = store.journal_rows(HOUR, HOUR + 1).unwrap_err();
    assert_eq!(e.kind, crate::store::StoreErrorKind::Corrupt, "{e}");
    assert!(e.detail.contains(".damaged"), "{e}");
    assert!(journal_of(&store, HOUR, HOUR + 1).is_empty());
    // A writer likewise, then counts afresh.
    store.journal_add(&entry).unwrap();
    let header = journal_record::encode_header(&journal_record::Header {
        off: 128,
        len: 5,
        mark: 0,
        sum: 1,
    });
    fs::write(&path, header).unwrap();
    let e = store.journal_add(&entry).unwrap_err();
    assert_eq!(e.kind, crate::store::StoreErrorKind::Corrupt, "{e}");
    store.journal_add(&entry).unwrap();
    assert_eq!(journal_of(&store, HOUR, HOUR + 1)[0].2, 1);
    // Damaged notes likewise.
    store
        .journal_note(&usage::Note {
            at_ms: 1,
            text: "ACTION NEEDED: x".into(),
        })
        .unwrap();
    fs::write(dir.join(journal::DIR_NAME).join("notes"), b"junk").unwrap();
    assert!(store.journal_notes().is_err());
    assert_eq!(store.journal_notes().unwrap(), []);
}

#[test]
fn a_journal_directory_that_is_a_link_is_refused_never_followed() {
    let (dir, store) = journal_store("journal-link");
    let outside = tempdir("journal-link-outside");
    std::os::unix::fs::symlink(&outside, dir.join(journal::DIR_NAME)).unwrap();
    let e = store
        .journal_add(&refused_entry(HOUR, "192.0.2.1"))
        .unwrap_err();
    assert!(e.detail.contains("symbolic link"), "{e}");
    assert!(store.journal_rows(HOUR, HOUR + 1).is_err());
    assert!(store.journal_notes().is_err());
    assert!(store.sweep(None).unwrap().complete);
    assert_eq!(entries(&outside), 0, "nothing outside");
}

#[test]
fn used_reads_counters_without_writing() {
    let dir = tempdir("used");
    let store = store_in(&dir);
    let r = rule("ip", 3, 60);
    let check = |key: &str| Check {
        rule: &r,
        key: key.into(),
    };
    decide_one(&store, &r, "resolve:ip:a").unwrap();
    decide_one(&store, &r, "resolve:ip:a").unwrap();
    assert_eq!(
        store
            .used(&[check("resolve:ip:a"), check("resolve:ip:b")])
            .unwrap(),
        [2, 0]
    );
    assert!(!store.path_for("resolve:ip:b").exists(), "nothing written");
    store.clock.advance_ms(60_000);
    assert_eq!(store.used(&[check("resolve:ip:a")]).unwrap(), [0]);
}

#[test]
fn a_bounded_sweep_moves_whole_hours_and_the_rest_later() {
    let (dir, store) = journal_store("journal-budget");
    let first = HOUR - HOUR % 24;
    for hour in first..first + 6 {
        for who in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
            store.clock.set_ms(u64::from(hour) * usage::HOUR_MS);
            store.journal_add(&refused_entry(hour, who)).unwrap();
        }
    }
    let totals = |store: &FileStore<FakeClock>| -> (Vec<(u32, String, u64)>, usize) {
        let (clients, totals): (Vec<_>, Vec<_>) = journal_of(store, first, first + 6)
            .into_iter()
            .partition(|(_, name, _)| name.starts_with("client"));
        (totals, clients.len())
    };
    let (want, clients) = totals(&store);
    assert_eq!(clients, 18);
    store
        .clock
        .set_ms(u64::from(first + 24 + 49) * usage::HOUR_MS);
    // No time at all: one whole hour per sweep (its client counts gone), the totals whole.
    let mut sweeps = 0;
    while !store.sweep(Some(Duration::ZERO)).unwrap().complete {
        sweeps += 1;
        assert_eq!(
            totals(&store),
            (want.clone(), 18 - 3 * sweeps),
            "sweep {sweeps}"
        );
    }
    assert_eq!(sweeps, 5, "one hour each, the last one complete");
    assert!(journal_files(&dir, "h").is_empty());
    assert_eq!(journal_of(&store, first, first + 6), want);
}
