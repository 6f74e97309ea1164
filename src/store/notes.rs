//! The store's notes: the last `ACTION NEEDED` lines of the owner's log, kept beside the usage
//! journal for `resolve stats`, the report and the dashboard.

use crate::core::journal::Note;
use crate::store::StoreError;

/// The kept `ACTION NEEDED` notes, shared by every process of a site.
pub trait Notes {
    /// Keeps an `ACTION NEEDED` note; only the newest [`crate::core::journal::KEEP_NOTES`]
    /// are kept.
    fn journal_note(&self, note: &Note) -> Result<(), StoreError>;

    /// The kept notes, newest first.
    fn journal_notes(&self) -> Result<Vec<Note>, StoreError>;
}
