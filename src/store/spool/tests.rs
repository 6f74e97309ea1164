//! Tests of the journal's spool: in a temporary data directory, over the memory store (looked
//! into directly, so what reached "the server" is seen apart from what waits in the spool), on
//! a fake clock; and threads that append and move at once on the real one.

use std::rc::Rc;
use std::sync::Arc;

use super::*;
use crate::core::clock::FakeClock;
use crate::core::journal::{ClientCount, HOUR_MS, hour_of};
use crate::store::StoreErrorKind;
use crate::store::memory::MemoryStore;

const T0: u64 = 400_000 * HOUR_MS + 10_000;

fn tempdir(name: &str) -> PathBuf {
    crate::support::temp::dir("spool", name)
}

fn refused(client: &str) -> Entry {
    Entry {
        hour: hour_of(T0),
        totals: vec![("requests".into(), 1), ("refused:ip".into(), 1)],
        clients: vec![(client.into(), ClientCount::Refused, 1)],
    }
}

struct Spool {
    store: SpooledJournal<Rc<FakeClock>>,
    server: MemoryStore<Rc<FakeClock>>,
    clock: Rc<FakeClock>,
    data: PathBuf,
}

fn spool(name: &str) -> Spool {
    let data = tempdir(name).join("data");
    let clock = Rc::new(FakeClock::at(T0));
    let server = MemoryStore::new(clock.clone(), Duration::ZERO);
    let store = SpooledJournal::with_clock(
        Rc::new(server.clone()),
        &data,
        Duration::from_millis(500),
        clock.clone(),
    );
    Spool {
        store,
        server,
        clock,
        data,
    }
}

impl Spool {
    /// `requests` as the server counts it this hour, read past the spool.
    fn on_server(&self) -> u64 {
        total(&self.server.journal_rows(0, u32::MAX).unwrap(), "requests")
    }

    /// `requests` as a reader through the spool counts it (which writes the spool first).
    fn read_through(&self) -> Result<u64, StoreError> {
        let rows = self.store.journal_rows(0, u32::MAX)?;
        Ok(total(&rows, "requests"))
    }

    /// The spool's files, oldest first.
    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.data.join(defaults::JOURNAL_SPOOL_DIR))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

fn total(rows: &[Row], name: &str) -> u64 {
    rows.iter()
        .map(|r| match r {
            Row::Total { name: n, count, .. } if n == name => *count,
            _ => 0,
        })
        .sum()
}

fn refusals_of(rows: &[Row], who: &str) -> u64 {
    rows.iter()
        .map(|r| match r {
            Row::Client {
                client,
                count: ClientCount::Refused,
                n,
                ..
            } if client == who => *n,
            _ => 0,
        })
        .sum()
}

#[test]
fn entries_wait_in_the_spool_until_a_request_starts_a_later_second() {
    let s = spool("wait");
    s.store.journal_add(&refused("a")).unwrap();
    s.clock.set_ms(T0 + 999);
    s.store.journal_add(&refused("b")).unwrap();
    assert_eq!(
        s.on_server(),
        0,
        "nothing reaches the server within the second"
    );
    assert_eq!(s.files(), [(T0 / 1000).to_string()]);
    s.clock.set_ms(T0 + 1000);
    s.store.journal_add(&refused("a")).unwrap();
    assert_eq!(s.on_server(), 2, "the earlier second is written, summed");
    let rows = s.server.journal_rows(0, u32::MAX).unwrap();
    assert_eq!(total(&rows, "refused:ip"), 2);
    assert_eq!((refusals_of(&rows, "a"), refusals_of(&rows, "b")), (1, 1));
    assert_eq!(s.files(), [(T0 / 1000 + 1).to_string()]);
    // A reader writes the whole spool, the current second's too.
    let rows = s.store.journal_rows(0, u32::MAX).unwrap();
    assert_eq!(total(&rows, "requests"), 3);
    assert_eq!(refusals_of(&rows, "a"), 2);
    assert!(s.files().is_empty(), "{:?}", s.files());
}

#[test]
fn entries_the_server_refused_stay_summed_for_the_next_request() {
    let s = spool("refused");
    s.store.journal_add(&refused("a")).unwrap();
    s.store.journal_add(&refused("a")).unwrap();
    s.server.set_failing(true);
    s.clock.set_ms(T0 + 1000);
    let e = s.store.journal_add(&refused("a")).unwrap_err();
    assert!(e.detail.contains("told to fail"), "{e}");
    // The first second's file now holds one line: the two entries' sums.
    let first = s
        .data
        .join(defaults::JOURNAL_SPOOL_DIR)
        .join((T0 / 1000).to_string());
    let text = fs::read(&first).unwrap();
    assert_eq!(text.iter().filter(|b| **b == b'\n').count(), 1);
    let kept = Entry::from_line(&text).unwrap();
    assert_eq!(
        kept.totals,
        [("refused:ip".into(), 2), ("requests".into(), 2)]
    );
    s.server.set_failing(false);
    s.clock.set_ms(T0 + 2000);
    s.store.journal_add(&refused("a")).unwrap();
    assert_eq!(s.on_server(), 3);
    assert_eq!(s.read_through(), Ok(4));
}

#[test]
fn a_line_that_is_no_entry_is_dropped_and_reported_and_the_rest_written() {
    let s = spool("damaged");
    s.store.journal_add(&refused("a")).unwrap();
    let file = s
        .data
        .join(defaults::JOURNAL_SPOOL_DIR)
        .join((T0 / 1000).to_string());
    let mut f = OpenOptions::new().append(true).open(&file).unwrap();
    f.write_all(b"[400000,[[\"requ").unwrap();
    drop(f);
    s.clock.set_ms(T0 + 1000);
    let e = s.store.journal_add(&refused("b")).unwrap_err();
    assert_eq!(e.kind, StoreErrorKind::Corrupt);
    assert!(e.detail.starts_with("1 lines of "), "{e}");
    assert_eq!(s.on_server(), 1);
    assert!(!file.exists());
}

#[test]
fn a_spool_that_cannot_be_written_sends_the_entry_to_the_server() {
    let s = spool("unwritable");
    fs::create_dir_all(&s.data).unwrap();
    fs::write(s.data.join(defaults::JOURNAL_SPOOL_DIR), b"a file").unwrap();
    s.store.journal_add(&refused("a")).unwrap();
    assert_eq!(s.on_server(), 1, "the entry is not lost");
    assert!(ready(&s.data).is_err(), "check says why");
    // Both failing: the server's error.
    s.server.set_failing(true);
    let e = s.store.journal_add(&refused("a")).unwrap_err();
    assert!(e.detail.contains("told to fail"), "{e}");
}

#[test]
fn a_spool_directory_that_is_a_link_is_refused() {
    let s = spool("link");
    let elsewhere = tempdir("link-target");
    fs::create_dir_all(&s.data).unwrap();
    std::os::unix::fs::symlink(&elsewhere, s.data.join(defaults::JOURNAL_SPOOL_DIR)).unwrap();
    s.store.journal_add(&refused("a")).unwrap();
    assert_eq!(s.on_server(), 1, "written to the server instead");
    let e = s.store.journal_keep(&refused("a")).unwrap_err();
    assert!(e.detail.contains("symbolic link"), "{e}");
    let e = s.store.journal_rows(0, 1).unwrap_err();
    assert!(e.detail.contains("symbolic link"), "{e}");
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn a_spool_file_that_is_a_link_or_a_fifo_is_refused_and_the_entry_written_to_the_server() {
    let s = spool("odd-file");
    let dir = s.data.join(defaults::JOURNAL_SPOOL_DIR);
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join((T0 / defaults::JOURNAL_SPOOL_PERIOD_MS).to_string());
    // A link to a file elsewhere: never followed, never written through.
    let elsewhere = tempdir("odd-file-target").join("target");
    fs::write(&elsewhere, "").unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let e = s.store.journal_keep(&refused("a")).unwrap_err();
    assert!(e.detail.contains("symbolic link"), "{e}");
    s.store.journal_add(&refused("a")).unwrap();
    assert_eq!(s.on_server(), 1, "written to the server instead");
    assert_eq!(
        fs::read(&elsewhere).unwrap(),
        b"",
        "nothing written through the link"
    );
    // A FIFO: neither waited on nor written to.
    fs::remove_file(&path).unwrap();
    let made = std::process::Command::new("mkfifo").arg(&path).status();
    assert!(made.is_ok_and(|m| m.success()), "mkfifo (coreutils)");
    assert!(s.store.journal_keep(&refused("a")).is_err());
    s.store.journal_add(&refused("a")).unwrap();
    assert_eq!(s.on_server(), 2, "written to the server instead");
}

#[test]
fn a_data_directory_holding_counts_made_again_by_the_spool_is_said_out_loud() {
    use crate::support::log::MemoryLog;
    let said = |holding: bool| {
        let s = spool(if holding { "made-counts" } else { "made-spool" });
        // The directory the store made (and marked), then lost.
        fs::create_dir_all(&s.data).unwrap();
        crate::store::file::made::made(&s.data, &MemoryLog::default());
        fs::remove_dir_all(&s.data).unwrap();
        let log = Rc::new(MemoryLog::default());
        let store = if holding {
            s.store.holding_counts(log.clone())
        } else {
            s.store
        };
        store.journal_keep(&refused("a")).unwrap();
        assert!(s.data.join(defaults::JOURNAL_SPOOL_DIR).is_dir());
        log.lines.take()
    };
    let lines = said(true);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("ACTION NEEDED"), "{lines:?}");
    // A store on a server keeps its counts there: nothing to say.
    assert_eq!(said(false), Vec::<String>::new());
}

#[test]
fn kept_entries_never_reach_the_server_until_the_next_entry_added() {
    let s = spool("kept");
    // Kept in two seconds' files, the last while the server is down.
    for (at_ms, server_down) in [(T0, false), (T0 + 5000, false), (T0 + 5000, true)] {
        s.clock.set_ms(at_ms);
        s.server.set_failing(server_down);
        s.store.journal_keep(&refused("a")).unwrap();
    }
    s.server.set_failing(false);
    assert_eq!(s.on_server(), 0);
    assert_eq!(s.files().len(), 2);
    // In the same second as the last file: everything moved, this second's file too,
    // because entries were kept.
    s.store.journal_add(&refused("b")).unwrap();
    assert_eq!(s.on_server(), 4);
    s.store.journal_add(&refused("b")).unwrap();
    assert_eq!(s.on_server(), 4, "moved once, not at every entry");
    assert_eq!(s.read_through(), Ok(5));
}

#[test]
fn a_reader_writes_a_long_spool_in_rounds() {
    let s = spool("long");
    let n = defaults::JOURNAL_SPOOL_FILES_PER_MOVE as u64 * 2 + 3;
    for i in 0..n {
        s.clock.set_ms(T0 + i * 1000);
        s.store.journal_keep(&refused("a")).unwrap();
    }
    assert_eq!(s.files().len() as u64, n);
    // A request moves one round's worth.
    s.store.journal_add(&refused("a")).unwrap();
    assert_eq!(s.on_server(), defaults::JOURNAL_SPOOL_FILES_PER_MOVE as u64);
    let rows = s.store.journal_rows(0, u32::MAX).unwrap();
    assert_eq!(total(&rows, "requests"), n + 1);
    assert!(s.files().is_empty());
}

/// Threads append and move at once, each with its own handle and open files (locks belong to
/// open files, so threads meet as processes do), on the real clock with a 5 ms period: every
/// entry is counted once. (With 1 ms, a thread that a busy machine kept waiting a millisecond
/// at each of its 100 tries found its file moved every time and gave up: a thousand times the
/// real period's pace, not a fault of the spool.) Each thread pauses past a period twice on
/// its way, so that moves happen however fast the machine appends.
#[test]
fn appends_and_moves_at_once_count_every_entry_once() {
    const THREADS: u64 = 8;
    const EACH: u64 = 300;
    let data = tempdir("threads").join("data");
    let server = MemoryStore::new(SystemClock, Duration::ZERO);
    let start = Arc::new(std::sync::Barrier::new(THREADS as usize));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (server, data, start) = (server.clone(), data.clone(), start.clone());
            std::thread::spawn(move || {
                let store = SpooledJournal::new(Rc::new(server), &data, Duration::from_secs(5))
                    .with_period_ms(5);
                start.wait();
                for i in 0..EACH {
                    if i % 100 == 99 {
                        std::thread::sleep(Duration::from_millis(6));
                    }
                    store.journal_add(&refused(&format!("t{t}"))).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let moved = total(&server.journal_rows(0, u32::MAX).unwrap(), "requests");
    assert!(moved > 0, "requests moved the spool as they went");
    let reader = SpooledJournal::new(Rc::new(server.clone()), &data, Duration::from_secs(5));
    let rows = reader.journal_rows(0, u32::MAX).unwrap();
    assert_eq!(total(&rows, "requests"), THREADS * EACH);
    for t in 0..THREADS {
        assert_eq!(refusals_of(&rows, &format!("t{t}")), EACH);
    }
    eprintln!("{moved} of {} written by requests", THREADS * EACH);
}

#[test]
fn ready_makes_the_spool_and_says_what_is_wrong_with_it() {
    let data = tempdir("ready").join("data");
    let dir = data.join(defaults::JOURNAL_SPOOL_DIR);
    assert_eq!(ready(&data), Ok(dir.display().to_string()));
    assert!(dir.is_dir());
    assert_eq!(
        fs::read_dir(&dir).unwrap().count(),
        0,
        "the probe is removed"
    );
    fs::remove_dir(&dir).unwrap();
    fs::write(&dir, b"a file").unwrap();
    let e = ready(&data).unwrap_err();
    assert!(e.detail.starts_with("cannot create"), "{e}");
    fs::remove_file(&dir).unwrap();
    std::os::unix::fs::symlink(tempdir("ready-target"), &dir).unwrap();
    assert!(ready(&data).unwrap_err().detail.contains("symbolic link"));
}
