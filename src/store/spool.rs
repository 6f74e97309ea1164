//! The usage journal of every store, spooled in the data directory: a request appends its entry
//! to the file of the current second (`journal-spool/<second>`), a few local system calls
//! instead of a statement (MySQL, Redis) or the read and rewrite of an hour file that grows
//! with the hour's clients (the file store), and the request that starts a second's file
//! writes the earlier seconds' entries to the store, summed: one write per hour a second,
//! whatever the traffic. Readers (`stats`, `report`, the dashboard) write the whole spool first.
//!
//! Writers hold a file's shared lock while they append one line; the mover holds the exclusive
//! lock while it reads, writes the sums and removes the file, so it never takes half a line and
//! a writer never appends to a file already moved (it finds the name gone and starts again).
//! Entries the store refused stay in the spool, summed, for the next mover. A FastCGI process
//! that is idle puts what it holds here without waiting on the server at all.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use crate::core::clock::{Clock, SystemClock};
use crate::core::journal::{Batch, Entry, Row};
use crate::store::StoreError;
use crate::store::file::lock::{Lock, ensure_data_dir, ensure_dir, lock_within};
use crate::store::file::safe_open::{
    OPEN_FLAGS, io_error, link_refused, locked_file, open_regular, still_named,
};
use crate::store::journal::Journal;
use crate::support::defaults;

/// Times an entry is appended again after the file it was appended to was moved meanwhile.
const APPEND_TRIES: usize = 100;

/// A journal spooled in `dir` in front of the store's own.
pub struct SpooledJournal<C: Clock = SystemClock> {
    inner: Rc<dyn Journal>,
    data_dir: PathBuf,
    dir: PathBuf,
    clock: C,
    period_ms: u64,
    lock_timeout: Duration,
    /// Entries were put in the spool without moving it (an idle FastCGI process): the next
    /// entry added moves it.
    kept: std::cell::Cell<bool>,
    /// Where the data directory made again is said, when it holds the store's counts (the
    /// file store's): see [`Self::holding_counts`].
    counts_log: Option<Rc<dyn crate::support::log::Log>>,
}

impl SpooledJournal<SystemClock> {
    /// `inner`'s journal spooled in `data_dir`'s [`defaults::JOURNAL_SPOOL_DIR`].
    pub fn new(inner: Rc<dyn Journal>, data_dir: &Path, lock_timeout: Duration) -> SpooledJournal {
        SpooledJournal::with_clock(inner, data_dir, lock_timeout, SystemClock)
    }
}

impl<C: Clock> SpooledJournal<C> {
    pub fn with_clock(
        inner: Rc<dyn Journal>,
        data_dir: &Path,
        lock_timeout: Duration,
        clock: C,
    ) -> SpooledJournal<C> {
        SpooledJournal {
            inner,
            data_dir: data_dir.to_owned(),
            dir: data_dir.join(defaults::JOURNAL_SPOOL_DIR),
            clock,
            period_ms: defaults::JOURNAL_SPOOL_PERIOD_MS,
            lock_timeout,
            kept: std::cell::Cell::new(false),
            counts_log: None,
        }
    }

    /// Files cover `period_ms` each instead of [`defaults::JOURNAL_SPOOL_PERIOD_MS`] (tests
    /// make movers meet more often).
    pub fn with_period_ms(mut self, period_ms: u64) -> SpooledJournal<C> {
        self.period_ms = period_ms.max(1);
        self
    }

    /// The data directory holds the store's counts (the file store's): made again by the
    /// spool (a request that reaches no counter, say a 400), it is said out loud in `log`, as
    /// the store says it ([`crate::store::file::made`]), rather than left for a sweep to find.
    pub fn holding_counts(mut self, log: Rc<dyn crate::support::log::Log>) -> SpooledJournal<C> {
        self.counts_log = Some(log);
        self
    }

    fn period_now(&self) -> u64 {
        self.clock.now_ms() / self.period_ms
    }

    /// Appends `entry` to the current period's file; true when this call created that file.
    fn append(&self, entry: &Entry) -> Result<bool, StoreError> {
        let line = entry.to_line();
        // A mover takes a file once a period: a few tries always find one that stays.
        for _ in 0..APPEND_TRIES {
            let path = self.dir.join(self.period_now().to_string());
            let (file, created) = self.open_for_append(&path)?;
            lock_within(&file, &path, Lock::Shared, self.lock_timeout)?;
            // What the descriptor is, once locked (one `fstat`): moved while we waited for the
            // lock (the mover removes a file under its lock, leaving the inode without a
            // name), the next period's file takes the entry; not a regular file, an error.
            match locked_file(&path, &file) {
                Ok(Some(_)) => {}
                Ok(None) => continue,
                Err(e) => return Err(io_error("open", &path, &e)),
            }
            (&file)
                .write_all(&line)
                .map_err(|e| io_error("append to", &path, &e))?;
            return Ok(created);
        }
        Err(StoreError::unavailable(format!(
            "the files of {} were taken away {APPEND_TRIES} times in a row as entries were \
             appended to them",
            self.dir.display()
        )))
    }

    /// Opens the file at `path` to append to it, creating it (and the spool's directory) when
    /// missing; true when this call created it.
    fn open_for_append(&self, path: &Path) -> Result<(File, bool), StoreError> {
        // A directory that is a link would take the entries somewhere else.
        if fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(linked(&self.dir));
        }
        // Opened as it is (never through a link, never waiting on a FIFO): what it is, the
        // lock's `fstat` says next.
        let append = |create: bool| {
            OpenOptions::new()
                .append(true)
                .create_new(create)
                .mode(0o600)
                .custom_flags(OPEN_FLAGS)
                .open(path)
                .map_err(|e| link_refused(path, e))
        };
        loop {
            match append(false) {
                Ok(f) => return Ok((f, false)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("open", path, &e)),
            }
            match append(true) {
                Ok(f) => return Ok((f, true)),
                // Another request created it meanwhile.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    make_dir(&self.data_dir, &self.dir, self.counts_log.as_deref())?
                }
                Err(e) => return Err(io_error("create", path, &e)),
            }
        }
    }

    /// The periods in the spool before `before` (all of them for None), oldest first.
    fn periods(&self, before: Option<u64>) -> Result<Vec<u64>, StoreError> {
        if fs::symlink_metadata(&self.dir).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(linked(&self.dir));
        }
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("read", &self.dir, &e)),
        };
        let mut periods: Vec<u64> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|p| before.is_none_or(|b| *p < b))
            .collect();
        periods.sort_unstable();
        Ok(periods)
    }

    /// Writes the entries of up to [`defaults::JOURNAL_SPOOL_FILES_PER_MOVE`] files of periods
    /// before `before` to the store, summed, and removes the files. Entries the store refused
    /// are written back to the oldest file, summed; a line that is not an entry is dropped and
    /// reported. Returns how many files it took.
    fn move_spool(&self, before: Option<u64>) -> Result<usize, StoreError> {
        let mut taken: Vec<(PathBuf, File)> = Vec::new();
        let mut batch = Batch::default();
        let mut damaged = 0usize;
        let mut first_error = None;
        for period in self
            .periods(before)?
            .into_iter()
            .take(defaults::JOURNAL_SPOOL_FILES_PER_MOVE)
        {
            let path = self.dir.join(period.to_string());
            let mut options = OpenOptions::new();
            options.read(true).write(true);
            let mut file = match open_regular(&mut options, &path) {
                Ok(f) => f,
                // Another mover took it.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                    first_error.get_or_insert(StoreError::unavailable(format!(
                        "cannot open {}: {e}; another account made it (resolve run by hand as \
                         another user?): remove it, and run resolve as the site's account",
                        path.display()
                    )));
                    continue;
                }
                Err(e) => {
                    first_error.get_or_insert(io_error("open", &path, &e));
                    continue;
                }
            };
            if let Err(e) = lock_within(&file, &path, Lock::Exclusive, self.lock_timeout) {
                first_error.get_or_insert(e);
                continue;
            }
            if !still_named(&path, &file) {
                continue;
            }
            let mut text = Vec::new();
            if let Err(e) = file.read_to_end(&mut text) {
                first_error.get_or_insert(io_error("read", &path, &e));
                continue;
            }
            for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                match Entry::from_line(line) {
                    Some(entry) => batch.add(&entry),
                    None => damaged += 1,
                }
            }
            taken.push((path, file));
        }
        let mut refused = Batch::default();
        for entry in batch.take() {
            if let Err(e) = self.inner.journal_add(&entry) {
                refused.add(&entry);
                first_error.get_or_insert(e);
            }
        }
        let count = taken.len();
        let mut files = taken.into_iter();
        if !refused.is_empty()
            && let Some((path, mut file)) = files.next()
        {
            let mut text = Vec::new();
            for entry in refused.take() {
                text.extend(entry.to_line());
            }
            let rewritten = file
                .set_len(0)
                .and_then(|()| file.rewind())
                .and_then(|()| file.write_all(&text));
            if let Err(e) = rewritten {
                first_error.get_or_insert(io_error("write", &path, &e));
            }
        }
        for (path, _locked) in files {
            if let Err(e) = fs::remove_file(&path) {
                first_error.get_or_insert(io_error("remove", &path, &e));
            }
        }
        if damaged > 0 {
            first_error.get_or_insert(StoreError::corrupt(format!(
                "{damaged} lines of {} were not journal entries and were dropped (a full \
                 disk cuts lines short: see `df -h`)",
                self.dir.display()
            )));
        }
        first_error.map_or(Ok(count), Err)
    }

    /// Writes the whole spool to the store.
    fn move_all(&self) -> Result<(), StoreError> {
        let mut first_error = None;
        for _ in 0..defaults::JOURNAL_SPOOL_MOVES_TO_READ {
            match self.move_spool(None) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                    break;
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Creates the spool's directory `dir` (mode 700) in `data_dir`, and `data_dir` when it is
/// missing (said in `counts_log` when it held the store's counts).
fn make_dir(
    data_dir: &Path,
    dir: &Path,
    counts_log: Option<&dyn crate::support::log::Log>,
) -> Result<(), StoreError> {
    match counts_log {
        Some(log) => ensure_data_dir(data_dir, log)?,
        None => ensure_dir(data_dir)?,
    }
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_error("create directory", dir, &e)),
    }
}

fn linked(dir: &Path) -> StoreError {
    StoreError::unavailable(format!(
        "{} is a symbolic link, which is never followed: remove it (a directory is made there)",
        dir.display()
    ))
}

/// Appends `line` (an entry's, whole) to the spool of `data_dir` at `now_ms`, only when that
/// period's file is there already: a process that has no store to move the spool to
/// (`gateway::replay`) leaves a new period to a request that has. False when the file was not
/// there, or was moved while this waited for its lock.
pub fn append_to_started(
    data_dir: &Path,
    line: &[u8],
    now_ms: u64,
    lock_timeout: Duration,
) -> Result<bool, StoreError> {
    let dir = data_dir.join(defaults::JOURNAL_SPOOL_DIR);
    if fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(linked(&dir));
    }
    let path = dir.join((now_ms / defaults::JOURNAL_SPOOL_PERIOD_MS).to_string());
    let opened = OpenOptions::new()
        .append(true)
        .custom_flags(OPEN_FLAGS)
        .open(&path)
        .map_err(|e| link_refused(&path, e));
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_error("open", &path, &e)),
    };
    lock_within(&file, &path, Lock::Shared, lock_timeout)?;
    match locked_file(&path, &file) {
        Ok(Some(_)) => {}
        Ok(None) => return Ok(false),
        Err(e) => return Err(io_error("open", &path, &e)),
    }
    (&file)
        .write_all(line)
        .map_err(|e| io_error("append to", &path, &e))?;
    Ok(true)
}

/// Makes sure the spool of `data_dir` exists and takes files (what `check` reports); says
/// where it is.
pub fn ready(data_dir: &Path) -> Result<String, StoreError> {
    let dir = data_dir.join(defaults::JOURNAL_SPOOL_DIR);
    if fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(linked(&dir));
    }
    make_dir(data_dir, &dir, None)?;
    // Not a number: movers never take it.
    let probe = dir.join(format!(".check-{}", std::process::id()));
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(true).mode(0o600);
    open_regular(&mut options, &probe).map_err(|e| io_error("create", &probe, &e))?;
    fs::remove_file(&probe).map_err(|e| io_error("remove", &probe, &e))?;
    Ok(dir.display().to_string())
}

impl<C: Clock> Journal for SpooledJournal<C> {
    /// Appends the entry to the spool; the request that started the current second's file
    /// (or the first after entries were kept without moving) writes the earlier seconds. When
    /// the spool cannot be written (no data directory the process may create, say), the entry
    /// goes to the store as it is: nothing is lost, it costs a statement, and `resolve check`
    /// says why (a line per request in the log would say it too often: where the data
    /// directory is missing, the log's once-a-minute stamp cannot be kept either).
    fn journal_add(&self, entry: &Entry) -> Result<(), StoreError> {
        let now = self.period_now();
        match self.append(entry) {
            Ok(created) => {
                if self.kept.replace(false) {
                    // What was kept may be in this second's file: that one too.
                    self.move_spool(Some(now + 1))?;
                } else if created {
                    self.move_spool(Some(now))?;
                }
                Ok(())
            }
            Err(_) => self.inner.journal_add(entry),
        }
    }

    /// Appends the entry to the spool and nothing more: it never waits on the server.
    fn journal_keep(&self, entry: &Entry) -> Result<(), StoreError> {
        self.append(entry)?;
        self.kept.set(true);
        Ok(())
    }

    /// The spool is written first: the figures read include every request's.
    fn journal_rows(&self, from_hour: u32, to_hour: u32) -> Result<Vec<Row>, StoreError> {
        self.move_all()?;
        self.inner.journal_rows(from_hour, to_hour)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests;
