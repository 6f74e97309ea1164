//! The sessions that are open, kept on the server: a small file in the data directory
//! (`admin-sessions`, mode 600) with one line per session, `NONCE LAST_SEEN EXPIRES` (Unix
//! seconds). A session cookie opens the dashboard only while its nonce is listed here: signing
//! out takes it off, "sign out everywhere" empties the list, and a session unused for
//! [`defaults::ADMIN_IDLE_SECS`] is taken off when next seen. The list keeps at most
//! [`defaults::ADMIN_MAX_SESSIONS`], the longest unused going first.
//!
//! [`Table`] is the list as a value (pure); [`change`] reads and writes the file under its lock.
//! A damaged file only loses lines: those sessions must sign in again.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::support::{defaults, private_file};

/// One open session.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    nonce: String,
    last_secs: u64,
    expires_secs: u64,
}

/// The open sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    entries: Vec<Entry>,
}

fn is_nonce(s: &str) -> bool {
    (16..=64).contains(&s.len()) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl Table {
    /// The list read back; lines that do not parse are dropped.
    pub fn parse(text: &str) -> Table {
        let entries = text
            .lines()
            .filter_map(|line| {
                let mut parts = line.split(' ');
                let nonce = parts.next().filter(|n| is_nonce(n))?;
                let last_secs = parts.next()?.parse().ok()?;
                let expires_secs = parts.next()?.parse().ok()?;
                Some(Entry {
                    nonce: nonce.to_owned(),
                    last_secs,
                    expires_secs,
                })
            })
            .take(defaults::ADMIN_MAX_SESSIONS)
            .collect();
        Table { entries }
    }

    /// The list as the file holds it.
    pub fn encode(&self) -> String {
        self.entries
            .iter()
            .map(|e| format!("{} {} {}\n", e.nonce, e.last_secs, e.expires_secs))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops what ended by `now_secs`: expired, or idle too long.
    fn prune(&mut self, now_secs: u64, idle_secs: u64) {
        self.entries.retain(|e| {
            now_secs < e.expires_secs && now_secs < e.last_secs.saturating_add(idle_secs)
        });
    }

    /// Opens a session, seen now; the longest unused make way past the bound.
    pub fn add(&mut self, nonce: &str, now_secs: u64, expires_secs: u64, idle_secs: u64) {
        self.prune(now_secs, idle_secs);
        self.entries.retain(|e| e.nonce != nonce);
        self.entries.push(Entry {
            nonce: nonce.to_owned(),
            last_secs: now_secs,
            expires_secs,
        });
        while self.entries.len() > defaults::ADMIN_MAX_SESSIONS {
            if let Some(i) = (0..self.entries.len()).min_by_key(|&i| self.entries[i].last_secs) {
                self.entries.remove(i);
            }
        }
    }

    /// Whether the session is open at `now_secs`; then it is seen now.
    pub fn touch(&mut self, nonce: &str, now_secs: u64, idle_secs: u64) -> bool {
        self.prune(now_secs, idle_secs);
        match self.entries.iter_mut().find(|e| e.nonce == nonce) {
            Some(e) => {
                e.last_secs = e.last_secs.max(now_secs);
                true
            }
            None => false,
        }
    }

    /// Ends one session.
    pub fn remove(&mut self, nonce: &str) {
        self.entries.retain(|e| e.nonce != nonce);
    }

    /// Ends every session.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// Reads the list in `dir`, lets `f` change it, and writes it back, all under the file's lock.
pub fn change<T>(dir: &Path, f: impl FnOnce(&mut Table) -> T) -> std::io::Result<T> {
    let mut file = private_file::kept()
        .read(true)
        .open(dir.join(defaults::ADMIN_SESSIONS_FILE))?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    file.lock()?;
    let mut bytes = Vec::new();
    Read::by_ref(&mut file)
        .take(64 * 1024)
        .read_to_end(&mut bytes)?;
    let before = Table::parse(&String::from_utf8_lossy(&bytes));
    let mut table = before.clone();
    let out = f(&mut table);
    if table != before || bytes.len() != before.encode().len() {
        file.seek(SeekFrom::Start(0))?;
        file.set_len(0)?;
        file.write_all(table.encode().as_bytes())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "00112233445566778899aabbccddeeff";
    const B: &str = "ffeeddccbbaa99887766554433221100";
    const IDLE: u64 = 30 * 60;

    #[test]
    fn a_session_is_open_until_removed_idle_or_expired() {
        let mut t = Table::default();
        t.add(A, 1000, 1000 + 12 * 3600, IDLE);
        assert!(t.touch(A, 1000 + IDLE - 1, IDLE));
        // Seen then: another thirty minutes from there.
        assert!(t.touch(A, 1000 + 2 * IDLE - 2, IDLE));
        assert!(!t.touch(B, 1000, IDLE), "never opened");
        // Thirty minutes unused: ended.
        assert!(!t.touch(A, 1000 + 3 * IDLE - 2, IDLE));
        assert!(t.is_empty());
        // Expired, however busy.
        t.add(A, 0, 100, IDLE);
        assert!(t.touch(A, 99, IDLE));
        assert!(!t.touch(A, 100, IDLE));
        // Removed; cleared.
        t.add(A, 0, 10_000, IDLE);
        t.add(B, 0, 10_000, IDLE);
        t.remove(A);
        assert!(!t.touch(A, 1, IDLE) && t.touch(B, 1, IDLE));
        t.clear();
        assert!(!t.touch(B, 1, IDLE));
    }

    #[test]
    fn the_list_is_bounded_and_reads_back() {
        let mut t = Table::default();
        for i in 0..(defaults::ADMIN_MAX_SESSIONS as u64 + 5) {
            t.add(&format!("{i:032x}"), 100 + i, 10_000, IDLE);
        }
        assert_eq!(t.len(), defaults::ADMIN_MAX_SESSIONS);
        assert!(
            !t.touch(&format!("{:032x}", 0), 200, IDLE),
            "the longest unused went"
        );
        assert_eq!(Table::parse(&t.encode()), t);
        let damaged = format!("{A} 1 99\nnot a line\n{B} x 5\nzz 1 2\n");
        assert_eq!(Table::parse(&damaged).len(), 1);
    }

    #[test]
    fn the_file_is_changed_under_its_lock() {
        let dir = crate::support::temp::dir("sessions", "lock");
        change(&dir, |t| t.add(A, 10, 1000, IDLE)).unwrap();
        assert!(change(&dir, |t| t.touch(A, 20, IDLE)).unwrap());
        change(&dir, |t| t.remove(A)).unwrap();
        assert!(!change(&dir, |t| t.touch(A, 30, IDLE)).unwrap());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(defaults::ADMIN_SESSIONS_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
