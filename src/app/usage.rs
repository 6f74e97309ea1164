//! What the usage journal learns from a request: its events, counted in the store after the
//! answer is decided, and the `ACTION NEEDED` lines kept as notes. A journal that cannot be
//! written changes no answer.

use std::time::Duration;

use crate::app::{App, Tally};
use crate::core::journal;
use crate::support::defaults;
use crate::support::log::Level;

impl App<'_> {
    /// Adds the request to the usage journal. A failure changes no answer: it is logged, at
    /// most once a minute across processes.
    /// Returns the entry written; None when none was (the journal is off, the store down, or
    /// it failed).
    pub(super) fn journal(&self, tally: &Tally) -> Option<journal::Entry> {
        if !self.config.journal || tally.store_down {
            return None;
        }
        let entry =
            journal::Entry::new(self.clock.now_ms(), tally.client.as_deref(), &tally.events);
        match self.store.journal.journal_add(&entry) {
            Ok(()) => Some(entry),
            Err(e) => {
                self.log_now_and_then(&format!("the usage journal could not be written: {e}"));
                None
            }
        }
    }

    /// Writes the journal entries the store holds back (a FastCGI process's), logging a
    /// failure as a request's would be.
    pub fn flush_journal(&self) {
        if let Err(e) = self.store.journal.flush() {
            self.log_now_and_then(&format!("the usage journal could not be written: {e}"));
        }
    }

    /// Keeps an `ACTION NEEDED` line in the store for `stats`, `report` and the dashboard.
    pub(super) fn note(&self, text: &str) {
        if !self.config.journal {
            return;
        }
        let forms = crate::support::secret::all_forms(&self.config.secrets());
        let note = journal::Note {
            at_ms: self.clock.now_ms(),
            text: crate::support::secret::mask(text, &forms).into_owned(),
        };
        if let Err(e) = self.store.notes.journal_note(&note) {
            self.log_now_and_then(&format!("the usage journal could not be written: {e}"));
        }
    }

    /// Logs `message` unless a journal problem was logged in the last minute.
    fn log_now_and_then(&self, message: &str) {
        let stamp = self.config.data_dir.join(defaults::JOURNAL_ERROR_STAMP);
        let interval = Duration::from_secs(defaults::JOURNAL_ERROR_LOG_INTERVAL_SECS);
        if crate::support::log::once_in_data_dir(&stamp, interval) {
            self.log.line(
                Level::Warn,
                &format!(
                    "{message} (answers are not affected; this line is repeated at most once a minute)"
                ),
            );
        }
    }
}
