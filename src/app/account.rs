//! The owner's account, read at most once a day: after an admitted request's answer is written
//! (a refused request never reads it, nor the kept reading), or by `resolve report`. The
//! reading is kept in `account.json` in the data directory (mode 600): the facts, or why they
//! could not be had, and when; never the token. A failed reading is tried again an hour later
//! at the earliest. A reading's warnings (premium ending within 7 days, fair use past 80%, no
//! premium) are logged and kept as `ACTION NEEDED` notes.

use std::fs::{File, TryLockError};
use std::path::Path;

use crate::app::App;
use crate::provider::account::Reading;
use crate::support::log::Level;
use crate::support::private_file;
use crate::support::secret;

/// The kept reading, in the data directory.
pub const FILE: &str = "account.json";
/// Held by the one process that reads the account.
const LOCK: &str = "account.lock";

/// The kept reading of the account, if there is one.
pub fn kept(data_dir: &Path) -> Option<Reading> {
    let bytes = std::fs::read(data_dir.join(FILE)).ok()?;
    Reading::from_json(&serde_json::from_slice(&bytes).ok()?)
}

impl App<'_> {
    /// Reads the owner's account when the description says where it is and the kept reading
    /// is due (a day old, an hour after a failure): one process at a time, the others go on.
    /// The reading now kept, if any.
    pub fn read_account_if_due(&self) -> Option<Reading> {
        let provider = self.provider?;
        let now = self.clock.now_ms();
        let dir = &self.config.data_dir;
        let before = kept(dir);
        if before.as_ref().is_some_and(|r| !r.due(now)) {
            return before;
        }
        std::fs::create_dir_all(dir).ok()?;
        let lock = File::create(dir.join(LOCK)).ok()?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return before,
            Err(TryLockError::Error(_)) => return before,
        }
        // Another process may have read it while this one waited for nothing.
        let before = kept(dir);
        if before.as_ref().is_some_and(|r| !r.due(now)) {
            return before;
        }
        let read = provider.account(now)?;
        let forms = secret::all_forms(&self.config.secrets());
        let reading = match read {
            Ok(facts) => Reading::Read { at_ms: now, facts },
            Err(reason) => Reading::Failed {
                at_ms: now,
                reason: secret::mask(&reason, &forms).into_owned(),
            },
        };
        let text = reading.to_json().to_string();
        if let Err(e) = private_file::replace(&dir.join(FILE), text.as_bytes()) {
            self.log.line(
                Level::Warn,
                &format!("keeping the provider account's reading failed: {e}"),
            );
        }
        match &reading {
            Reading::Failed { reason, .. } => self.log.line(
                Level::Warn,
                &format!(
                    "the provider account could not be read: {reason}; tried again in an hour at the earliest"
                ),
            ),
            Reading::Read { .. } => {
                for line in reading.warnings(now) {
                    self.log.line(Level::Warn, &line);
                    self.note(&line);
                }
            }
        }
        Some(reading)
    }
}
