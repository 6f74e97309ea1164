//! The store's cache: bytes under a key for a while, and claims that let one process resolve
//! a link while the others wait for its answer.

use std::time::Duration;

use crate::store::StoreError;

/// Values kept for a time, shared by every process of a site.
pub trait Cache {
    /// A cached value, if one is stored under `key` and has not expired.
    fn cache_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Stores `value` under `key` for `ttl`.
    fn cache_put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), StoreError>;

    /// Atomically stores `value` under `key` for `ttl` only if nothing live is there: true when
    /// this call stored it. Used to claim a link that is being resolved.
    fn cache_claim(&self, key: &str, value: &[u8], ttl: Duration) -> Result<bool, StoreError>;

    /// Removes the entry under `key` if it still holds `value`.
    fn cache_release(&self, key: &str, value: &[u8]) -> Result<(), StoreError>;
}
