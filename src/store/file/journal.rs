//! The file store's usage journal, in `journal/` under the data directory (mode 700, created
//! like a shard directory; a link there is refused, never followed).
//!
//! Layout:
//! - `h<HOUR>-<S>`: the hour's counts for one of [`SHARDS`] shards: the totals of the requests
//!   of the shard and the counts of its clients (S is a hash of the client; requests without
//!   one go to a random shard). An entry changes one such file: one locked read-modify-write
//!   of a file that holds only its shard's clients of that hour. Requests reach it through the
//!   spool ([`crate::store::spool`]), which adds a second's entries at once: a request itself
//!   appends a line, whatever the size of its hour's file.
//! - `d<DAY>`: a day's totals, hour by hour, once its hours are older than `CLIENT_HOURS`
//!   (48): sweeps move the hour files into it (their client counts are dropped, as
//!   `journal::Expiry` allows) and delete them. Its header's mark says which hours it holds;
//!   an hour file of those is a left-over (of a crash between writing the day file and
//!   deleting the hour files), ignored by readers and deleted by the next sweep, so no step
//!   counts twice. Days older than `KEEP_HOURS` (400 days) are deleted.
//! - `notes`: the newest `KEEP_NOTES` (50) notes.
//!
//! Every file is written in place in the form of `journal_record` (a header, then the live
//! copy of the lines, a new copy never over the live one), so a process killed at any instant
//! leaves the previous counts readable. A damaged file is moved aside as `NAME.damaged`, like a
//! damaged counter file, and reported as `Corrupt`.
//!
//! Locks: a request takes its hour file's lock only. A sweep moving hours into a day's file
//! holds the day file's lock throughout; a reader holds it (shared) while it reads the day's
//! files, and a request for an hour already that old (never the hour it is answered in) takes
//! it before the hour file: always the day before the hour, so no two wait on each other.
//!
//! Size: an hour file holds at most about twice its lines and a 128-byte header; a line is
//! its key and count, about 25 bytes for an IPv4 client, 35 for an IPv6 prefix. Bound: a day of
//! 10,000 clients seen in two hours each (a refusal for one in five) takes under 1.5 MB while
//! its client counts are kept (1.08 MB measured, 1.57 MB of disk blocks), and under 10 kB of
//! totals once swept two days on (1.9 kB measured): the store contract's
//! `journal_size_of_a_busy_day` checks both.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::core::journal::{Entry, Expiry, Note, Row};
use crate::store::file::journal_record::{self as record, Damage, HEADER, Header};
use crate::store::file::lock::{Lock, Locked, lock_within, open_locked, open_shared};
use crate::store::file::record::checksum;
use crate::store::file::safe_open::{
    DAMAGED_SUFFIX, io_error, modified_secs, move_aside, open_ro, still_named,
};
use crate::store::{StoreError, SweepReport};

/// The journal's directory under the data directory.
pub const DIR_NAME: &str = "journal";
/// Files per hour: the clients of an hour are spread over this many.
pub const SHARDS: u64 = 16;
const NOTES: &str = "notes";

/// What a file of the journal directory is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    Hour(u32),
    Day(u32),
    Damaged,
    Other,
}

fn parse_name(name: &str) -> Name {
    let number = |s: &str| -> Option<u32> {
        (!s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    if name.ends_with(DAMAGED_SUFFIX) {
        return Name::Damaged;
    }
    if let Some(rest) = name.strip_prefix('h')
        && let Some((hour, shard)) = rest.split_once('-')
        && let Some(hour) = number(hour)
        && u64::from_str_radix(shard, 16).is_ok_and(|s| s < SHARDS)
        && shard.len() == 1
    {
        return Name::Hour(hour);
    }
    match name.strip_prefix('d').and_then(number) {
        Some(day) => Name::Day(day),
        None => Name::Other,
    }
}

/// A file's header (none for a new file) and live copy.
type Contents = (Option<Header>, Vec<u8>);

/// The files of the directory by day, and those moved aside as damaged.
type Listing = (BTreeMap<u32, DayFiles>, Vec<PathBuf>);

/// The files of one day found in the directory.
#[derive(Default)]
struct DayFiles {
    hours: Vec<(u32, PathBuf)>,
    has_file: bool,
}

/// The journal of the file store whose data directory is `data`.
pub struct Journal<'a> {
    pub data: &'a Path,
    /// Whether the working directory is `data` (see `FileStore::working_in_dir`).
    pub below: bool,
    pub timeout: Duration,
    pub grace_ms: u64,
    /// Where a data directory made again is said.
    pub log: &'a dyn crate::support::log::Log,
}

impl Journal<'_> {
    fn dir(&self) -> PathBuf {
        self.data.join(DIR_NAME)
    }

    fn hour_path(&self, hour: u32, shard: u64) -> PathBuf {
        self.dir().join(format!("h{hour}-{shard:x}"))
    }

    fn day_path(&self, day: u32) -> PathBuf {
        self.dir().join(format!("d{day}"))
    }

    fn lock(&self, path: &Path, kind: Lock) -> Result<Locked, StoreError> {
        open_locked((self.data, self.below), path, kind, self.timeout, self.log)
    }

    /// A locked file's header and live copy, changing nothing. One read takes the whole of a
    /// usual file (a request's hour file is a few kB).
    fn read(&self, file: &File, path: &Path) -> Result<Result<Contents, Damage>, StoreError> {
        self.read_known(file, path, None)
    }

    /// [`Self::read`] of a file whose length is known (`len`): the first read asks for no more.
    fn read_known(
        &self,
        file: &File,
        path: &Path,
        len: Option<u64>,
    ) -> Result<Result<Contents, Damage>, StoreError> {
        const FIRST: usize = 16 * 1024;
        let first = len.map_or(FIRST, |l| {
            usize::try_from(l).map_or(FIRST, |l| l.min(FIRST))
        });
        let mut bytes = vec![0u8; first];
        let got = read_from(file, path, &mut bytes, 0)?;
        bytes.truncate(got);
        // A header never written (a process killed before it wrote one) reads as zeros.
        if bytes.iter().take(HEADER).all(|b| *b == 0) {
            return Ok(Ok((None, Vec::new())));
        }
        let header = match record::decode_header(&bytes[..got.min(HEADER)]) {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(Ok((None, Vec::new()))),
            Err(d) => return Ok(Err(d)),
        };
        let end = header
            .off
            .checked_add(header.len)
            .and_then(|e| usize::try_from(e).ok());
        let Some(end) = end else {
            return Ok(Err(Damage::Copy));
        };
        if end > bytes.len() {
            if got < FIRST {
                return Ok(Err(Damage::Copy)); // the file ends before its copy does
            }
            bytes.resize(end, 0);
            if read_from(file, path, &mut bytes[FIRST..], FIRST as u64)? < end - FIRST {
                return Ok(Err(Damage::Copy));
            }
        }
        let copy = bytes[header.off as usize..end].to_vec();
        Ok(record::check_copy(&header, &copy).map(|()| (Some(header), copy)))
    }

    /// Reads a file under its exclusive lock; a damaged one is moved aside.
    fn load(&self, locked: &Locked) -> Result<Contents, StoreError> {
        self.read_known(&locked.file, &locked.path, locked.len_when_locked)?
            .map_err(|d| damaged(&locked.path, d))
    }

    /// Writes `copy` as the file's lines: beside the live copy, then the header naming it.
    fn write(
        &self,
        locked: &Locked,
        live: Option<&Header>,
        copy: &[u8],
        mark: u32,
    ) -> Result<(), StoreError> {
        let len = copy.len() as u64;
        let header = Header {
            off: record::place(live, len),
            len,
            mark,
            sum: record::sum(copy),
        };
        let write = |bytes: &[u8], at: u64| {
            locked
                .file
                .write_all_at(bytes, at)
                .map_err(|e| io_error("write", &locked.path, &e))
        };
        write(copy, header.off)?;
        write(&record::encode_header(&header), 0)
    }

    /// Adds one to each of `keys` in the file at `path`.
    fn add_to(&self, path: &Path, keys: &[(String, u64)], mark: u32) -> Result<(), StoreError> {
        let locked = self.lock(path, Lock::Exclusive)?;
        let (header, copy) = self.load(&locked)?;
        let new = record::add(&copy, keys).map_err(|d| damaged(path, d))?;
        self.write(&locked, header.as_ref(), &new, mark)
    }

    pub fn add(&self, entry: &Entry, now_ms: u64) -> Result<(), StoreError> {
        if entry.is_empty() {
            return Ok(());
        }
        // A request's client names its shard; a batch of several clients' requests goes to
        // the first one's (any shard may hold any client: readers add up all of them).
        let shard = match entry.clients.first() {
            Some((client, _, _)) => u64::from(checksum(client.as_bytes())) % SHARDS,
            None => crate::support::random::u64() % SHARDS,
        };
        let keys =
            |offset: u32, with_clients: bool| -> Vec<(String, u64)> {
                let mut keys: Vec<(String, u64)> = entry
                    .totals
                    .iter()
                    .map(|(name, n)| (record::total_key(offset, name), *n))
                    .collect();
                if with_clients {
                    keys.extend(entry.clients.iter().map(|(client, count, n)| {
                        (record::client_key(offset, client, *count), *n)
                    }));
                }
                keys
            };
        let hour_path = self.hour_path(entry.hour, shard);
        if entry.hour >= Expiry::at(now_ms).clients_before {
            // Every request's case: its own hour, which no sweep moves.
            return self.add_to(&hour_path, &keys(0, true), 0);
        }
        // An hour a sweep may be moving into its day's file: under the day's lock.
        let day = entry.hour / 24;
        let day_lock = self.lock(&self.day_path(day), Lock::Exclusive)?;
        let (header, copy) = self.load(&day_lock)?;
        let mark = header.map_or(0, |h| h.mark);
        if entry.hour < mark {
            // Moved already: the totals go to the day's file; the client's count is past
            // keeping.
            let keys = keys(entry.hour - day * 24, false);
            if keys.is_empty() {
                return Ok(());
            }
            let new = record::add(&copy, &keys).map_err(|d| damaged(&day_lock.path, d))?;
            return self.write(&day_lock, header.as_ref(), &new, mark);
        }
        self.add_to(&hour_path, &keys(0, true), 0)
    }

    /// The journal's directory, if there is one yet; a link or a file in its place is refused.
    fn existing_dir(&self) -> Result<Option<PathBuf>, StoreError> {
        let dir = self.dir();
        match fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error("inspect", &dir, &e)),
            Ok(m) if m.is_dir() => Ok(Some(dir)),
            Ok(_) => Err(StoreError::unavailable(format!(
                "{} is not a directory (a symbolic link is never followed): remove it, the \
                 store makes a directory there",
                dir.display()
            ))),
        }
    }

    /// The files of the directory, by day (those `wanted`), and the damaged ones moved aside.
    fn list(&self, wanted: impl Fn(Name) -> bool) -> Result<Listing, StoreError> {
        let Some(dir) = self.existing_dir()? else {
            return Ok((BTreeMap::new(), Vec::new()));
        };
        let mut days: BTreeMap<u32, DayFiles> = BTreeMap::new();
        let mut damaged = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| io_error("list", &dir, &e))? {
            let entry = entry.map_err(|e| io_error("list", &dir, &e))?;
            let name = parse_name(&entry.file_name().to_string_lossy());
            if !wanted(name) {
                continue;
            }
            match name {
                Name::Hour(hour) => days
                    .entry(hour / 24)
                    .or_default()
                    .hours
                    .push((hour, entry.path())),
                Name::Day(day) => days.entry(day).or_default().has_file = true,
                Name::Damaged => damaged.push(entry.path()),
                Name::Other => {}
            }
        }
        Ok((days, damaged))
    }

    pub fn rows(&self, from: u32, to: u32) -> Result<Vec<Row>, StoreError> {
        let within = |hour: u32| (from..to).contains(&hour);
        let (days, _) = self.list(|name| match name {
            Name::Hour(h) => within(h),
            Name::Day(d) => {
                let start = u64::from(d) * 24;
                start < u64::from(to) && start + 24 > u64::from(from)
            }
            _ => false,
        })?;
        let mut out = Vec::new();
        for (day, files) in days {
            // Shared, the day's lock keeps a sweep from moving its hours meanwhile.
            let day_lock = self.lock(&self.day_path(day), Lock::Shared)?;
            let read = self.read(&day_lock.file, &day_lock.path)?;
            let (mark, rows) = match read
                .and_then(|(h, copy)| Ok((h.map_or(0, |h| h.mark), record::rows(&copy, day * 24)?)))
            {
                Ok(got) => got,
                Err(d) => return Err(self.damaged_while_reading(day_lock, d)),
            };
            out.extend(rows.into_iter().filter(|r| within(row_hour(r))));
            for (hour, path) in files.hours.iter().filter(|(h, _)| *h >= mark) {
                let Some(file) = open_shared((path, path), self.timeout)? else {
                    continue;
                };
                let read = self.read(&file, path)?;
                match read.and_then(|(_, copy)| record::rows(&copy, *hour)) {
                    Ok(rows) => out.extend(rows),
                    Err(d) => {
                        let locked = Locked {
                            path: path.clone(),
                            file,
                            len_when_locked: None,
                        };
                        return Err(self.damaged_while_reading(locked, d));
                    }
                }
            }
        }
        Ok(out)
    }

    /// A file found damaged under a shared lock (`read`): moved aside under the exclusive
    /// lock, unless a writer replaced it meanwhile.
    fn damaged_while_reading(&self, read: Locked, d: Damage) -> StoreError {
        let Locked { path, file, .. } = read;
        let seen = file.metadata().ok();
        drop(file);
        let locked = match self.lock(&path, Lock::Exclusive) {
            Ok(l) => l,
            Err(e) => return e,
        };
        let same = match (seen, locked.file.metadata()) {
            (Some(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if same {
            damaged(&path, d)
        } else {
            StoreError::corrupt(format!(
                "{} was damaged ({d:?}) and has been started anew",
                path.display()
            ))
        }
    }

    pub fn note(&self, note: &Note) -> Result<(), StoreError> {
        let locked = self.lock(&self.dir().join(NOTES), Lock::Exclusive)?;
        let (header, copy) = self.load(&locked)?;
        let new = record::add_note(&copy, note).map_err(|d| damaged(&locked.path, d))?;
        self.write(&locked, header.as_ref(), &new, 0)
    }

    pub fn notes(&self) -> Result<Vec<Note>, StoreError> {
        let Some(dir) = self.existing_dir()? else {
            return Ok(Vec::new());
        };
        let path = dir.join(NOTES);
        let Some(file) = open_shared((&path, &path), self.timeout)? else {
            return Ok(Vec::new());
        };
        let read = self.read(&file, &path)?;
        match read.and_then(|(_, copy)| record::notes(&copy)) {
            Ok(mut notes) => {
                notes.reverse();
                Ok(notes)
            }
            Err(d) => Err(self.damaged_while_reading(
                Locked {
                    path,
                    file,
                    len_when_locked: None,
                },
                d,
            )),
        }
    }

    /// Moves hours past `CLIENT_HOURS` into their day's file and deletes what
    /// [`Expiry`] lets go, until `past` says the sweep's time is up; false when it ran out
    /// first.
    pub fn sweep(
        &self,
        now_ms: u64,
        past: &dyn Fn() -> bool,
        report: &mut SweepReport,
    ) -> Result<bool, StoreError> {
        if !fs::symlink_metadata(self.dir()).is_ok_and(|m| m.is_dir()) {
            // None yet; a link there is refused by requests and never swept.
            return Ok(true);
        }
        let (days, damaged) = self.list(|name| name != Name::Other)?;
        // Moved aside longer than the grace ago: the owner had time to look.
        let stale_before = now_ms.saturating_sub(self.grace_ms);
        for path in damaged {
            if fs::symlink_metadata(&path)
                .is_ok_and(|m| modified_secs(&m).saturating_mul(1000) < stale_before)
            {
                let _ = fs::remove_file(path);
            }
        }
        let expiry = Expiry::at(now_ms);
        // Some work in every sweep however short its time, so the journal never only grows.
        let mut worked = false;
        for (day, files) in days {
            if worked && past() {
                return Ok(false);
            }
            let start = day.saturating_mul(24);
            if start.saturating_add(24) <= expiry.totals_before {
                // All of it past keeping: the hours first, so that a crash leaves the day's
                // mark over any that remain.
                for (_, path) in &files.hours {
                    report.removed += remove_unused(path)?;
                }
                report.removed += remove_unused(&self.day_path(day))?;
                worked = true;
                continue;
            }
            let due = files.hours.iter().any(|(h, _)| *h < expiry.clients_before)
                || (files.has_file && start < expiry.totals_before);
            if due {
                if !self.compact(day, &files.hours, expiry, past, report)? {
                    return Ok(false);
                }
                worked = true;
            }
        }
        Ok(true)
    }

    /// Moves the day's hours past `CLIENT_HOURS` into its file (their totals; the client
    /// counts go), drops its totals past `KEEP_HOURS`, then deletes the hour files it holds.
    /// Returns false when `past` came first (the hours moved so far stay moved: the mark
    /// says up to where).
    fn compact(
        &self,
        day: u32,
        hours: &[(u32, PathBuf)],
        expiry: Expiry,
        past: &dyn Fn() -> bool,
        report: &mut SweepReport,
    ) -> Result<bool, StoreError> {
        let base = day * 24;
        let day_lock = self.lock(&self.day_path(day), Lock::Exclusive)?;
        let read = self.read(&day_lock.file, &day_lock.path)?;
        let Ok((header, kept)) = read.and_then(|(h, copy)| Ok((h, record::rows(&copy, base)?)))
        else {
            let _ = damaged(&day_lock.path, Damage::Copy);
            report.damaged += 1;
            return Ok(true);
        };
        let mark = header.map_or(0, |h| h.mark).max(base);
        let mut new_mark = mark.max(expiry.clients_before.min(base + 24));
        let mut totals: BTreeMap<(u32, String), u64> = BTreeMap::new();
        let before = kept.len();
        add_totals(&mut totals, kept, expiry);
        let mut changed = totals.len() != before;
        let mut hours: Vec<&(u32, PathBuf)> = hours.iter().collect();
        hours.sort();
        let mut done = Vec::new();
        let mut current = None;
        let mut complete = true;
        for (hour, path) in hours {
            if *hour < mark {
                done.push(path); // a left-over: its counts are in the day's file
                continue;
            }
            if *hour >= new_mark {
                continue;
            }
            if current != Some(*hour) {
                // Whole hours at a time, and at least one per sweep.
                if current.is_some() && past() {
                    new_mark = *hour;
                    complete = false;
                    break;
                }
                current = Some(*hour);
            }
            let file = match open_ro(path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error("open", path, &e)),
            };
            lock_within(&file, path, Lock::Exclusive, self.timeout)?;
            let read = self.read(&file, path)?;
            match read.and_then(|(_, copy)| record::rows(&copy, *hour)) {
                Ok(rows) => {
                    add_totals(&mut totals, rows, expiry);
                    done.push(path);
                    changed = true;
                }
                Err(_) => {
                    move_aside(path);
                    report.damaged += 1;
                }
            }
        }
        if changed || new_mark != mark {
            let new = record::totals(&totals, base);
            self.write(&day_lock, header.as_ref(), &new, new_mark)?;
        }
        for path in done {
            match fs::remove_file(path) {
                Ok(()) => report.removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("remove", path, &e)),
            }
        }
        Ok(complete)
    }

    /// How many bytes the journal's files take (their lengths), for tests and `stats`.
    pub fn bytes(&self) -> Result<u64, StoreError> {
        let dir = self.dir();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(io_error("list", &dir, &e)),
        };
        Ok(entries
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .filter(fs::Metadata::is_file)
            .map(|m| m.len())
            .sum())
    }
}

/// Reads into `buf` from `offset` until it is full or the file ends; how many bytes came.
fn read_from(file: &File, path: &Path, buf: &mut [u8], offset: u64) -> Result<usize, StoreError> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error("read", path, &e)),
        }
    }
    Ok(got)
}

/// Adds the totals among `rows` that are still kept to `totals`.
fn add_totals(totals: &mut BTreeMap<(u32, String), u64>, rows: Vec<Row>, expiry: Expiry) {
    for row in rows {
        if let Row::Total { hour, name, count } = row
            && hour >= expiry.totals_before
        {
            *totals.entry((hour, name)).or_default() += count;
        }
    }
}

fn row_hour(row: &Row) -> u32 {
    match row {
        Row::Total { hour, .. } | Row::Client { hour, .. } => *hour,
    }
}

/// A damaged file moved aside, as the error that says so.
fn damaged(path: &Path, d: Damage) -> StoreError {
    let aside = move_aside(path);
    StoreError::corrupt(format!(
        "{} is damaged ({d:?}); moved it to {} and started it anew",
        path.display(),
        aside.display()
    ))
}

/// Removes a file nobody holds (a busy one is left for the next sweep): 1 when removed.
fn remove_unused(path: &Path) -> Result<u64, StoreError> {
    let file = match open_ro(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io_error("open", path, &e)),
    };
    if file.try_lock().is_err() || !still_named(path, &file) {
        return Ok(0);
    }
    match fs::remove_file(path) {
        Ok(()) => Ok(1),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io_error("remove", path, &e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_strictly() {
        assert_eq!(parse_name("h493812-a"), Name::Hour(493_812));
        assert_eq!(parse_name("d20575"), Name::Day(20_575));
        assert_eq!(parse_name("h493812-a.damaged"), Name::Damaged);
        for other in [
            "h-1", "h1-g", "h1-10", "hx-1", "d", "dx", "notes", "d1.tmp", "h1",
        ] {
            assert_eq!(parse_name(other), Name::Other, "{other}");
        }
    }
}
