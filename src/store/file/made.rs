//! The file store's data directory made again: every count it held is gone with it, the spend
//! limits' among them, so the site may spend its day's limit again. Said out loud: the first
//! process to make the directory again logs an `ACTION NEEDED` line, and the store's notes (for
//! `resolve stats`, the report and the dashboard) say when the counts restarted.
//!
//! Whether the directory was there before is kept outside it, beside it: a mark
//! (`.ratelimit.made`) naming the directory (its inode and when it was made), written when the store makes the
//! directory and at a sweep where it is missing (a directory made by `deploy.sh`, the starter,
//! an earlier version). The directory made where the mark is, or found at a sweep to be another
//! directory than the mark's (made by another part of the program first), was made again: the
//! process that creates [`defaults::DATA_DIR_MADE_AGAIN_MARK`] in it says so, once. Nothing of
//! this runs on a request that finds the directory there, but one `stat` per sweep.

use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::core::journal::Note;
use crate::support::defaults;
use crate::support::log::{Level, Log};

/// The mark beside `dir`: `.NAME.made` in its parent.
pub fn mark_path(dir: &Path) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.with_file_name(format!(".{name}{}", defaults::DATA_DIR_MARK_SUFFIX))
}

/// Which directory this is: its inode and, where the file system keeps it, when it was made
/// (an inode number is used again for the next directory made).
fn identity(meta: &fs::Metadata) -> String {
    let born = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{} {born}", meta.ino())
}

/// Records which directory `dir` is in its mark; nothing when `dir` is not there.
pub fn mark(dir: &Path) {
    if let Ok(meta) = fs::metadata(dir) {
        let _ = fs::write(mark_path(dir), format!("{}\n", identity(&meta)));
    }
}

/// The directory the mark names: None without a mark.
fn marked(dir: &Path) -> Option<String> {
    Some(fs::read_to_string(mark_path(dir)).ok()?.trim().to_owned())
}

/// After this process made `dir`: said when a mark shows it was there before; marked.
pub fn made(dir: &Path, log: &dyn Log) {
    if marked(dir).is_some() {
        again(dir, log);
    }
    mark(dir);
}

/// At a sweep: marks a directory not marked yet, and says so when the directory is not the one
/// marked (made again by another part of the program, or moved back by hand).
pub fn check(dir: &Path, log: &dyn Log) {
    let Ok(meta) = fs::metadata(dir) else {
        return;
    };
    match marked(dir) {
        Some(marked) if marked == identity(&meta) => {}
        Some(_) => {
            again(dir, log);
            mark(dir);
        }
        None => mark(dir),
    }
}

/// Claims the mark of the directory made again (one process of many) and logs the line.
fn again(dir: &Path, log: &dyn Log) {
    let at_ms = now_ms();
    let claimed = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(defaults::DATA_DIR_MADE_AGAIN_MARK))
        .and_then(|mut f| writeln!(f, "{at_ms}"));
    if claimed.is_ok() {
        log.line(Level::Error, &text(dir, at_ms));
    }
}

/// The note for the store's notes while the directory made again is recent (as long as a
/// spend limit's month), None otherwise.
pub fn note(dir: &Path, now_ms: u64) -> Option<Note> {
    let at_ms: u64 = fs::read_to_string(dir.join(defaults::DATA_DIR_MADE_AGAIN_MARK))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (now_ms.saturating_sub(at_ms) < defaults::DATA_DIR_MADE_AGAIN_NOTE_SECS * 1000).then(|| Note {
        at_ms,
        text: text(dir, at_ms),
    })
}

/// The owner's line: what was lost, what it means for the money, what to do.
pub fn text(dir: &Path, at_ms: u64) -> String {
    format!(
        "ACTION NEEDED: the data directory {} was missing and was made again at {}: the spend \
         limits' counts (today's and this month's) started again from zero then, so the site \
         may spend up to its limits again, and visitors' counts, temporary blocks and the \
         dashboard's sign-ins were lost with it. Keep an eye on the provider account's use \
         today; if the folder was moved or deleted by mistake, leave the new one in place. A \
         MySQL or Redis store keeps the counts outside this folder",
        dir.display(),
        crate::core::calendar::iso(at_ms)
    )
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::log::MemoryLog;

    #[test]
    fn made_again_is_said_once_and_noted_for_a_month() {
        let home = crate::support::temp::dir("made", "again");
        let dir = home.join("ratelimit");
        assert_eq!(mark_path(&dir), home.join(".ratelimit.made"));
        let log = MemoryLog::default();
        // Made the first time: marked, nothing said.
        fs::create_dir(&dir).unwrap();
        made(&dir, &log);
        assert!(mark_path(&dir).is_file());
        assert_eq!(note(&dir, now_ms()), None);
        check(&dir, &log);
        assert_eq!(note(&dir, now_ms()), None);
        // Deleted and made again by the store.
        fs::remove_dir_all(&dir).unwrap();
        fs::create_dir(&dir).unwrap();
        made(&dir, &log);
        let n = note(&dir, now_ms()).expect("a note");
        assert!(
            n.text.starts_with("ACTION NEEDED: the data directory "),
            "{}",
            n.text
        );
        assert!(n.text.contains("started again from zero"), "{}", n.text);
        assert_eq!(log.lines.borrow().len(), 1, "said in the log it was given");
        // Said once: a second process finds the claim made.
        let claim = fs::read_to_string(dir.join(defaults::DATA_DIR_MADE_AGAIN_MARK)).unwrap();
        made(&dir, &log);
        assert_eq!(
            fs::read_to_string(dir.join(defaults::DATA_DIR_MADE_AGAIN_MARK)).unwrap(),
            claim
        );
        assert_eq!(log.lines.borrow().len(), 1, "said once");
        // Kept while the month lasts.
        let month = defaults::DATA_DIR_MADE_AGAIN_NOTE_SECS * 1000;
        assert!(note(&dir, n.at_ms + month - 1).is_some());
        assert_eq!(note(&dir, n.at_ms + month), None);
        // Made again by another part of the program: the sweep sees another directory.
        fs::remove_dir_all(&dir).unwrap();
        fs::create_dir(&dir).unwrap();
        assert_eq!(note(&dir, now_ms()), None);
        check(&dir, &log);
        assert!(note(&dir, now_ms()).is_some());
        let _ = fs::remove_dir_all(&home);
    }
}
