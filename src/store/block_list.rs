//! The list of blocked clients every process of a site shares: read it, or change it under a
//! lock so that concurrent changes (two `resolve block` commands, automatic blocks from many
//! requests) all take effect. Kept in the cache of any store, as bytes the owner's controls
//! write and read.

use std::time::{Duration, Instant};

use crate::core::key::Reserved;
use crate::store::StoreError;
use crate::store::cache::Cache;

/// A lock left by a process that died is free again after this.
const LOCK_TTL: Duration = Duration::from_secs(10);
/// How long a change waits for the lock.
const LOCK_WAIT: Duration = Duration::from_secs(5);
/// How long a change waits before it asks for the lock again.
const LOCK_POLL: Duration = Duration::from_millis(10);

/// What a change makes of the stored list: the new list and how long to keep it, or an error
/// that leaves the list as it was.
pub type Change<'a> =
    Box<dyn FnOnce(Option<Vec<u8>>) -> Result<(Vec<u8>, Duration), StoreError> + 'a>;

/// The shared block list.
/// Kept under [`Reserved::BlockList`], changed under [`Reserved::BlockListLock`].
pub trait BlockList {
    /// The stored list, None when none is stored (or it expired).
    fn block_list(&self) -> Result<Option<Vec<u8>>, StoreError>;

    /// Replaces the list with what `change` makes of it, holding the list's lock meanwhile:
    /// `change` runs once, and no other change runs between its read and its write.
    fn change_block_list(&self, change: Change<'_>) -> Result<(), StoreError>;
}

impl<T: Cache + ?Sized> BlockList for T {
    fn block_list(&self) -> Result<Option<Vec<u8>>, StoreError> {
        self.cache_get(&Reserved::BlockList.key())
    }

    fn change_block_list(&self, change: Change<'_>) -> Result<(), StoreError> {
        let token = format!("{:016x}", crate::support::random::u64());
        let give_up = Instant::now() + LOCK_WAIT;
        while !self.cache_claim(&Reserved::BlockListLock.key(), token.as_bytes(), LOCK_TTL)? {
            if Instant::now() >= give_up {
                return Err(StoreError::unavailable(
                    "the block list is locked by another process (try again)",
                ));
            }
            std::thread::sleep(LOCK_POLL);
        }
        let result = self
            .cache_get(&Reserved::BlockList.key())
            .and_then(change)
            .and_then(|(list, ttl)| self.cache_put(&Reserved::BlockList.key(), &list, ttl));
        self.cache_release(&Reserved::BlockListLock.key(), token.as_bytes())?;
        result
    }
}
