//! The store's usage journal: one entry per request added to its hour's totals, read back by
//! hours.

use crate::core::journal::{Entry, Row};
use crate::store::StoreError;

/// The usage journal, shared by every process of a site.
pub trait Journal {
    /// Adds one request's entry to the usage journal: one to each of its hour's totals and
    /// one to its client's count, all of it or none, exact under concurrency. Sweeps remove
    /// what [`crate::core::journal::Expiry`] lets go.
    fn journal_add(&self, entry: &Entry) -> Result<(), StoreError>;

    /// Adds the entry without waiting on a server: a spooled journal appends it to its local
    /// file for a later request to write; the others add it as `journal_add` does. What an
    /// idle or exiting FastCGI process uses.
    fn journal_keep(&self, entry: &Entry) -> Result<(), StoreError> {
        self.journal_add(entry)
    }

    /// The journal's rows for the hours `from..to`, in any order.
    fn journal_rows(&self, from_hour: u32, to_hour: u32) -> Result<Vec<Row>, StoreError>;

    /// Puts whatever the journal holds back (a FastCGI process's held entries) where it is
    /// kept, without waiting on a server; the others hold nothing back.
    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
