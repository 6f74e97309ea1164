//! The problems logged within the last interval, kept in one small file that every process
//! shares, so that each distinct problem is logged once per interval however many requests
//! meet it, and a second, different problem is never hidden behind the first.
//!
//! The file holds one line per problem logged within the interval: the first 16 hex digits
//! of the SHA-256 of its text, a space, and when it was logged (seconds since 1970). Only
//! digests are kept, never the text: a problem may quote the configuration. The decision
//! ([`decide`]) is pure; [`once_each`] locks the file, reads it, decides and writes it back.

use std::io::{Read, Seek, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Most problems remembered at once: far more than distinct mistakes an owner makes in a
/// minute, few enough that the file stays one small read.
const MAX_REMEMBERED: usize = 64;

/// The digest a problem is remembered by.
pub fn digest(problem: &str) -> String {
    use sha2::{Digest, Sha256};
    crate::support::hex::lower(&Sha256::digest(problem.as_bytes())[..8])
}

/// Whether the problem with `digest` is to be logged at `now` (seconds), given the file's
/// `kept` text, and the text to keep: the entries still within `interval` (seconds), this
/// problem's with `now` when it is logged. Lines that cannot be read are dropped.
pub fn decide(kept: &str, digest: &str, now: u64, interval: u64) -> (bool, String) {
    let mut log = true;
    let mut entries: Vec<(&str, u64)> = Vec::new();
    for line in kept.lines() {
        let Some((d, at)) = line.split_once(' ') else {
            continue;
        };
        let Ok(at) = at.parse::<u64>() else { continue };
        // A time ahead of now (a clock set back) counts as now.
        let at = at.min(now);
        if now - at >= interval {
            continue;
        }
        if d == digest {
            log = false;
        }
        entries.push((d, at));
    }
    if log {
        entries.push((digest, now));
    }
    let skip = entries.len().saturating_sub(MAX_REMEMBERED);
    let text = entries[skip..]
        .iter()
        .map(|(d, at)| format!("{d} {at}\n"))
        .collect();
    (log, text)
}

/// True when `problem` was not logged within `interval` according to the file `path`: the
/// caller logs it, and the file remembers it. When the file cannot be kept (no directory, no
/// write access, not a regular file), the answer is true: a line too many beats a line lost.
pub fn once_each(path: &Path, problem: &str, interval: Duration) -> bool {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    remember(path, &digest(problem), now, interval.as_secs()).unwrap_or(true)
}

fn remember(path: &Path, digest: &str, now: u64, interval: u64) -> std::io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(true);
    }
    // Held for one small read and write: another process deciding waits that long.
    file.lock()?;
    let mut kept = String::new();
    // A file grown past what this program writes is read in part; what is unreadable is
    // dropped by the decision.
    let _ = (&mut file).take(64 * 1024).read_to_string(&mut kept);
    let (log, text) = decide(&kept, digest, now, interval);
    if text != kept {
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(text.as_bytes())?;
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_problem_once_per_interval() {
        let (a, b) = (digest("problem a"), digest("problem b"));
        assert_eq!(a.len(), 16);
        let (log, kept) = decide("", &a, 1000, 60);
        assert!(log);
        assert_eq!(kept, format!("{a} 1000\n"));
        let (log, kept) = decide(&kept, &a, 1030, 60);
        assert!(!log, "again within the minute");
        // Another problem within the minute is logged all the same.
        let (log, kept) = decide(&kept, &b, 1031, 60);
        assert!(log);
        assert_eq!(kept, format!("{a} 1000\n{b} 1031\n"));
        // A minute after the first, it is logged again; the second is still remembered.
        let (log, kept) = decide(&kept, &a, 1060, 60);
        assert!(log);
        assert_eq!(kept, format!("{b} 1031\n{a} 1060\n"));
        assert!(!decide(&kept, &b, 1090, 60).0);
        assert!(decide(&kept, &b, 1091, 60).0);
    }

    #[test]
    fn unreadable_lines_and_clocks_set_back_do_no_harm() {
        let a = digest("a");
        let (log, kept) = decide("garbage\n\u{0}x y\nabc 12 3\n", &a, 50, 60);
        assert!(log);
        assert_eq!(kept, format!("{a} 50\n"));
        // Logged "in the future": taken as now, so remembered for a minute from now.
        let (log, _) = decide(&format!("{a} 9999\n"), &a, 100, 60);
        assert!(!log);
        // Bounded.
        let many: String = (0..200)
            .map(|i| format!("{} 10\n", digest(&i.to_string())))
            .collect();
        let (_, kept) = decide(&many, &a, 20, 60);
        assert_eq!(kept.lines().count(), MAX_REMEMBERED);
        assert!(kept.ends_with(&format!("{a} 20\n")));
    }

    #[test]
    fn the_file_is_shared_and_never_followed() {
        let dir = crate::support::temp::dir("recent", "shared");
        let path = dir.join("stamp");
        let minute = Duration::from_secs(60);
        assert!(once_each(&path, "problem a", minute));
        assert!(!once_each(&path, "problem a", minute));
        assert!(once_each(&path, "problem b", minute));
        assert!(!once_each(&path, "problem b", minute));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(text.contains(&digest("problem a")) && !text.contains("problem"));
        // No place for the file, or a link where it should be: every time.
        for path in [dir.join("missing/stamp"), dir.join("link")] {
            if path.ends_with("link") {
                std::os::unix::fs::symlink(dir.join("elsewhere"), &path).unwrap();
            }
            assert!(once_each(&path, "a", minute));
            assert!(once_each(&path, "a", minute));
        }
        assert!(!dir.join("elsewhere").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
