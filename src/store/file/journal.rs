//! The file store's usage journal, in `journal/` under the data directory (mode 700, created
//! like a shard directory; a link there is refused, never followed).
//! Long because its hour, append and day files share one set of locks and marks, which are
//! read best together.
//!
//! Layout:
//! - `a<HOUR>-<S>`: the hour's entries as they came, for one of [`SHARDS`] shards (S is a hash
//!   of the client; requests without one go to a random shard). A request appends its entry:
//!   one `write` of a line to a file opened `O_APPEND`, under the file's shared lock: 7 system
//!   calls and some 3,200 instructions, where a locked read-modify-write of the hour file took
//!   10 and 18,600 (docs/performance.md). Readers add its lines to the hour file's counts.
//! - `h<HOUR>-<S>`: the hour's counts for the shard: the totals of its requests and the
//!   counts of its clients. The append file is folded into it by the request that finds the
//!   append file past [`APPEND_MAX_BYTES`], and by sweeps once the hour has ended, so that a
//!   client refused in a loop (a scraper, thousands a second) grows neither file past its
//!   bound: the append file stays under 16 kB and the hour file holds a line per client.
//! - `d<DAY>`: a day's totals, hour by hour, once its hours are older than `CLIENT_HOURS`
//!   (48): sweeps move the hour files into it (their client counts are dropped, as
//!   `journal::Expiry` allows) and delete them. Its header's mark says which hours it holds;
//!   an hour or append file of those is a left-over (of a crash between writing the day file
//!   and deleting the hour's files), ignored by readers and deleted by the next sweep, so no
//!   step counts twice. Days older than `KEEP_HOURS` (400 days) are deleted.
//! - `notes`: the newest `KEEP_NOTES` (50) notes.
//!
//! Every file but the append files is written in place in the form of `journal_record` (a
//! header, then the live copy of the lines, a new copy never over the live one), so a process
//! killed at any instant leaves the previous counts readable. An append file's entries carry
//! their own checksums: one cut short counts for nothing and the next counts as it is. A
//! damaged file is moved aside as `NAME.damaged`, like a damaged counter file, and reported
//! as `Corrupt`.
//!
//! A fold, under the hour file's lock: the hour file's mark is set to 0, the append file is
//! sealed (made read-only), its exclusive lock taken (so that the writers that saw it
//! unsealed have written), its lines added to the hour file in the write that sets the mark
//! to 1, and the append file deleted. A sealed append file counts, for readers, unless the
//! hour file's mark is 1; a writer that finds it sealed takes the hour file's lock and folds
//! it (or deletes it, folded). So a fold stopped at any step counts every entry once.
//!
//! Locks: a request takes its append file's shared lock, or its hour file's lock. A sweep
//! moving hours into a day's file holds the day file's lock throughout; a reader holds it
//! (shared) while it reads the day's files, and a request for an hour already that old (never
//! the hour it is answered in) takes it before the hour file: always the day before the hour,
//! then the append file, so no two wait on each other. A writer would have to stop for two
//! days between choosing its hour and writing to write into an hour a sweep has moved.
//!
//! Size: an hour file holds at most about twice its lines and a 128-byte header; a line is
//! its key and count, about 25 bytes for an IPv4 client, 35 for an IPv6 prefix; an appended
//! entry is about 47 bytes. Bound: a day of 10,000 clients seen in two hours each (a refusal
//! for one in five) takes under 1.5 MB while its client counts are kept (1.15 MB measured,
//! its entries still appended; 1.08 MB in hour files), and under 10 kB of totals once swept
//! two days on (1.9 kB measured): the store contract's `journal_size_of_a_busy_day` checks
//! both. Files: an hour keeps one file a shard once swept; the hour in progress (and one not
//! yet swept) an append file a shard more.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Read as _, Write as _};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::core::journal::{Entry, Expiry, Note, Row};
use crate::store::file::journal_record::{self as record, Damage, HEADER, Header};
use crate::store::file::lock::{
    Lock, Locked, lock_within, make_parent, open_locked, open_shared, refuse_linked_parent,
};
use crate::store::file::record::checksum;
use crate::store::file::safe_open::{
    DAMAGED_SUFFIX, OPEN_FLAGS, io_error, modified_secs, move_aside, not_a_file, not_regular,
    open_regular_checked, open_ro, still_named,
};
use crate::store::{StoreError, SweepReport};

/// The journal's directory under the data directory (also in [`Journal::append_path`]).
pub const DIR_NAME: &str = "journal";
/// Files per hour: the clients of an hour are spread over this many.
pub const SHARDS: u64 = 16;
/// An append file's size past which the next request folds it into its hour file: some 300
/// entries of about 50 bytes.
pub const APPEND_MAX_BYTES: u64 = 16 * 1024;
const NOTES: &str = "notes";
/// An append file's mode; a fold takes its write permission away (sealed).
const APPEND_MODE: u32 = 0o600;
const SEALED_MODE: u32 = 0o400;

/// What a file of the journal directory is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    /// An hour file `h<HOUR>-<S>`.
    Hour(u32, u64),
    /// An append file `a<HOUR>-<S>`.
    Appended(u32, u64),
    Day(u32),
    Damaged,
    Other,
}

/// Whether an append file was sealed by a fold: its entries are being, or have been, folded.
fn sealed(m: &fs::Metadata) -> bool {
    m.mode() & 0o200 == 0
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
    let hour_and_shard = |rest: &str| -> Option<(u32, u64)> {
        let (hour, shard) = rest.split_once('-')?;
        let shard = u64::from_str_radix(shard, 16).ok().filter(|s| *s < SHARDS);
        Some((
            number(hour)?,
            shard.filter(|_| rest.len() - hour.len() == 2)?,
        ))
    };
    if let Some((hour, shard)) = name.strip_prefix('h').and_then(hour_and_shard) {
        return Name::Hour(hour, shard);
    }
    if let Some((hour, shard)) = name.strip_prefix('a').and_then(hour_and_shard) {
        return Name::Appended(hour, shard);
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
    /// Each hour and shard with a file, and whether its append file was seen.
    slots: BTreeMap<(u32, u64), bool>,
    has_file: bool,
}

/// The journal of the file store whose data directory is `data`.
pub struct Journal<'a> {
    pub data: &'a Path,
    pub timeout: Duration,
    pub grace_ms: u64,
    /// [`APPEND_MAX_BYTES`], smaller in tests.
    pub append_max: u64,
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

    /// `journal/a<HOUR>-<S>`, put together without formatting: every request's path.
    #[inline]
    fn append_path(&self, hour: u32, shard: u64) -> PathBuf {
        let mut path = self.data.as_os_str().as_bytes().to_vec();
        path.extend_from_slice(b"/journal/a");
        record::push_number(&mut path, u64::from(hour));
        path.extend_from_slice(&[b'-', b"0123456789abcdef"[(shard % SHARDS) as usize]]);
        PathBuf::from(OsString::from_vec(path))
    }

    fn day_path(&self, day: u32) -> PathBuf {
        self.dir().join(format!("d{day}"))
    }

    fn lock(&self, path: &Path, kind: Lock) -> Result<Locked, StoreError> {
        open_locked(self.data, path, kind, self.timeout, self.log)
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

    /// Writes `copy` as the file's lines: beside the live copy, then the header naming it;
    /// returns the new header.
    fn write(
        &self,
        locked: &Locked,
        live: Option<&Header>,
        copy: &[u8],
        mark: u32,
    ) -> Result<Header, StoreError> {
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
        write(&record::encode_header(&header), 0)?;
        Ok(header)
    }

    /// Adds `keys` to the hour file of `hour` and `shard`, folding its append file into it.
    fn add_to(&self, hour: u32, shard: u64, keys: &[(String, u64)]) -> Result<(), StoreError> {
        let locked = self.lock(&self.hour_path(hour, shard), Lock::Exclusive)?;
        let (mut header, copy) = self.load(&locked)?;
        let append = self.append_path(hour, shard);
        let folded = self.seal(&locked, &mut header, &copy, &append)?;
        let (new, mark) = match &folded {
            Some(lines) => {
                let mut all = record::keys_of(lines).map_err(|d| damaged(&append, d))?;
                all.extend_from_slice(keys);
                (record::add(&copy, &all), 1)
            }
            None if keys.is_empty() => return Ok(()),
            None => (record::add(&copy, keys), header.map_or(0, |h| h.mark)),
        };
        let new = new.map_err(|d| damaged(&locked.path, d))?;
        self.write(&locked, header.as_ref(), &new, mark)?;
        if folded.is_some() {
            remove_if_there(&append)?;
        }
        Ok(())
    }

    /// Seals the append file at `path` for folding into the hour file `hour` (locked, its
    /// `header` and live `copy`), and returns its entries' lines; None when there is nothing
    /// to fold. A sealed file already folded (a fold stopped before deleting it) is deleted.
    ///
    /// The hour file's mark says whether a sealed append file is folded (1) or not (0): it is
    /// set to 0 before a file is sealed, and to 1 by the write that holds its entries. Writers
    /// hold the append file's shared lock from before they look at its mode until their
    /// write is done; the fold takes the exclusive lock before reading, so no entry can come
    /// after it has read the file.
    fn seal(
        &self,
        hour_lock: &Locked,
        header: &mut Option<Header>,
        copy: &[u8],
        path: &Path,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let (mut file, m) = match open_regular_checked(OpenOptions::new().read(true), path) {
            Ok(opened) => opened,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("open", path, &e)),
        };
        let mark = header.map_or(0, |h| h.mark);
        if sealed(&m) && mark == 1 {
            remove_if_there(path)?; // folded: its entries are in the hour file
            return Ok(None);
        }
        if !sealed(&m) {
            if mark == 1 {
                *header = Some(self.write(hour_lock, header.as_ref(), copy, 0)?);
            }
            file.set_permissions(Permissions::from_mode(SEALED_MODE))
                .map_err(|e| io_error("seal", path, &e))?;
        }
        // Writers that looked before the seal hold the shared lock until they have written.
        lock_within(&file, path, Lock::Exclusive, self.timeout)?;
        let mut bytes = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0) + 256);
        file.read_to_end(&mut bytes)
            .map_err(|e| io_error("read", path, &e))?;
        Ok(Some(record::appended_lines(&bytes)))
    }

    /// Appends `entry` to the append file at `path` in one `write`; false when the file is
    /// sealed or past `append_max`, so that the entry goes to the hour file instead.
    fn append(&self, entry: &Entry, path: &Path) -> Result<bool, StoreError> {
        let line = record::appended(entry);
        let dir = path.parent().unwrap_or(self.data);
        refuse_linked_parent(dir)?;
        let open = || {
            OpenOptions::new()
                .append(true)
                .create(true)
                .mode(APPEND_MODE)
                .custom_flags(OPEN_FLAGS)
                .open(path)
        };
        let file = match open() {
            Ok(f) => f,
            // Sealed, for a process that has no right to write a read-only file.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::NotFound || !self.data.is_dir() => {
                make_parent(self.data, dir, self.log)?;
                open().map_err(|e| io_error("create", path, &e))?
            }
            Err(e) if not_a_file(&e) => return Err(io_error("open", path, &not_regular(path))),
            Err(e) => return Err(io_error("open", path, &e)),
        };
        // Looked at under the shared lock: a fold seals the file before it waits for the
        // exclusive one, so a file seen unsealed here is read by no fold before this write.
        lock_within(&file, path, Lock::Shared, self.timeout)?;
        let m = file.metadata().map_err(|e| io_error("inspect", path, &e))?;
        if !m.file_type().is_file() {
            return Err(io_error("open", path, &not_regular(path)));
        }
        if sealed(&m) || m.nlink() == 0 || m.len() >= self.append_max {
            return Ok(false);
        }
        match (&file).write(&line) {
            Ok(n) if n == line.len() => Ok(true),
            Ok(_) => Err(StoreError::unavailable(format!(
                "cannot write {}: the disk took part of an entry only (is it full?)",
                path.display()
            ))),
            Err(e) => Err(io_error("write", path, &e)),
        }
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
        if entry.hour >= Expiry::at(now_ms).clients_before {
            // Every request's case: its own hour, which no sweep moves. One write to the
            // hour's append file; past its size, the hour file takes the entry and the file.
            if self.append(entry, &self.append_path(entry.hour, shard))? {
                return Ok(());
            }
            return self.add_to(entry.hour, shard, &keys(0, true));
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
            self.write(&day_lock, header.as_ref(), &new, mark)?;
            return Ok(());
        }
        self.add_to(entry.hour, shard, &keys(0, true))
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
                Name::Hour(hour, shard) => {
                    let day = days.entry(hour / 24).or_default();
                    day.slots.entry((hour, shard)).or_default();
                }
                Name::Appended(hour, shard) => {
                    let day = days.entry(hour / 24).or_default();
                    *day.slots.entry((hour, shard)).or_default() = true;
                }
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
            Name::Hour(h, _) | Name::Appended(h, _) => within(h),
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
            for (hour, shard) in files.slots.keys().filter(|(h, _)| *h >= mark) {
                self.slot_rows(*hour, *shard, &mut out)?;
            }
        }
        Ok(out)
    }

    /// The rows of one hour and shard: its hour file's, and its append file's unless they
    /// are folded into the hour file already.
    fn slot_rows(&self, hour: u32, shard: u64, out: &mut Vec<Row>) -> Result<(), StoreError> {
        // The append file is opened first: a fold that deletes it afterwards has put its
        // entries in the hour file, read below under the lock that waits for the fold.
        let append = self.append_path(hour, shard);
        let appended = match open_ro(&append) {
            Ok(f) => Some(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(io_error("open", &append, &e)),
        };
        let path = self.hour_path(hour, shard);
        // Held until the append file is read: no fold meanwhile.
        let (mark, _held) = match open_shared(&path, self.timeout)? {
            None => (None, None),
            Some(file) => {
                let read = self.read(&file, &path)?;
                match read
                    .and_then(|(h, copy)| Ok((h.map_or(0, |h| h.mark), record::rows(&copy, hour)?)))
                {
                    Ok((mark, rows)) => {
                        out.extend(rows);
                        (Some(mark), Some(file))
                    }
                    Err(d) => {
                        let locked = Locked {
                            path,
                            file,
                            len_when_locked: None,
                        };
                        return Err(self.damaged_while_reading(locked, d));
                    }
                }
            }
        };
        let Some(mut file) = appended else {
            return Ok(());
        };
        let m = file
            .metadata()
            .map_err(|e| io_error("inspect", &append, &e))?;
        // With the hour file read: deleted (by a fold) or sealed with the hour file's mark
        // set, the append file is in it. With none read, whatever the file holds counts.
        if mark.is_some_and(|mark| m.nlink() == 0 || (sealed(&m) && mark == 1)) {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0) + 256);
        file.read_to_end(&mut bytes)
            .map_err(|e| io_error("read", &append, &e))?;
        let rows =
            record::rows(&record::appended_lines(&bytes), hour).map_err(|d| damaged(&append, d))?;
        out.extend(rows);
        Ok(())
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
        self.write(&locked, header.as_ref(), &new, 0)?;
        Ok(())
    }

    pub fn notes(&self) -> Result<Vec<Note>, StoreError> {
        let Some(dir) = self.existing_dir()? else {
            return Ok(Vec::new());
        };
        let path = dir.join(NOTES);
        let Some(file) = open_shared(&path, self.timeout)? else {
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
                for (hour, shard) in files.slots.keys() {
                    report.removed += remove_unused(&self.append_path(*hour, *shard))?;
                    report.removed += remove_unused(&self.hour_path(*hour, *shard))?;
                }
                report.removed += remove_unused(&self.day_path(day))?;
                worked = true;
                continue;
            }
            let due = files.slots.keys().any(|(h, _)| *h < expiry.clients_before)
                || (files.has_file && start < expiry.totals_before);
            if due {
                if !self.compact(day, &files.slots, expiry, past, report)? {
                    return Ok(false);
                }
                worked = true;
            }
            // An ended hour's append files go into its hour files: a past hour keeps one file
            // per shard, as the store's budget counts.
            let now = crate::core::journal::hour_of(now_ms);
            let ended = files.slots.iter().filter(|((hour, _), appended)| {
                **appended && *hour >= expiry.clients_before && *hour < now
            });
            let mut day_lock = None;
            for ((hour, shard), _) in ended {
                if worked && past() {
                    return Ok(false);
                }
                if day_lock.is_none() {
                    day_lock = Some(self.lock(&self.day_path(day), Lock::Exclusive)?);
                }
                self.fold_for_sweep(*hour, *shard, report)?;
                worked = true;
            }
        }
        Ok(true)
    }

    /// Folds an hour's append file into its hour file for a sweep: a damaged hour file is
    /// moved aside and counted, as a sweep does with any damaged file.
    fn fold_for_sweep(
        &self,
        hour: u32,
        shard: u64,
        report: &mut SweepReport,
    ) -> Result<(), StoreError> {
        match self.add_to(hour, shard, &[]) {
            Err(e) if e.kind == crate::store::StoreErrorKind::Corrupt => {
                report.damaged += 1;
                Ok(())
            }
            other => other,
        }
    }

    /// Moves the day's hours past `CLIENT_HOURS` into its file (their totals; the client
    /// counts go), drops its totals past `KEEP_HOURS`, then deletes the hour files it holds.
    /// Returns false when `past` came first (the hours moved so far stay moved: the mark
    /// says up to where).
    fn compact(
        &self,
        day: u32,
        slots: &BTreeMap<(u32, u64), bool>,
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
        let mut done = Vec::new();
        let mut current = None;
        let mut complete = true;
        for (&(hour, shard), &appended) in slots {
            let path = self.hour_path(hour, shard);
            if hour < mark {
                // Left-overs: their counts are in the day's file.
                done.push(self.append_path(hour, shard));
                done.push(path);
                continue;
            }
            if hour >= new_mark {
                continue;
            }
            if current != Some(hour) {
                // Whole hours at a time, and at least one per sweep.
                if current.is_some() && past() {
                    new_mark = hour;
                    complete = false;
                    break;
                }
                current = Some(hour);
            }
            if appended {
                // Into the hour file first, under the lock and mark that make a fold exact.
                self.fold_for_sweep(hour, shard, report)?;
                done.push(self.append_path(hour, shard));
            }
            let path = &path;
            let file = match open_ro(path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error("open", path, &e)),
            };
            lock_within(&file, path, Lock::Exclusive, self.timeout)?;
            let read = self.read(&file, path)?;
            match read.and_then(|(_, copy)| record::rows(&copy, hour)) {
                Ok(rows) => {
                    add_totals(&mut totals, rows, expiry);
                    done.push(path.clone());
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
            report.removed += u64::from(remove_if_there(&path)?);
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

/// Removes a file; true when it was there.
fn remove_if_there(path: &Path) -> Result<bool, StoreError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_error("remove", path, &e)),
    }
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
        assert_eq!(parse_name("h493812-a"), Name::Hour(493_812, 10));
        assert_eq!(parse_name("a493812-f"), Name::Appended(493_812, 15));
        assert_eq!(parse_name("d20575"), Name::Day(20_575));
        assert_eq!(parse_name("h493812-a.damaged"), Name::Damaged);
        for other in [
            "h-1", "h1-g", "h1-10", "hx-1", "d", "dx", "notes", "d1.tmp", "h1", "a1-10", "a-1",
            "a1",
        ] {
            assert_eq!(parse_name(other), Name::Other, "{other}");
        }
    }
}
