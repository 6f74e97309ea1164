//! Unpredictable numbers: for sampling (which request sweeps), from the standard library's
//! randomly seeded hasher (no dependency, no file to read); for secrets, from the kernel.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// A random 64-bit number. Not for secrets.
pub fn u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// `N` bytes from the kernel's cryptographic generator (`/dev/urandom`), for secrets: keys,
/// salts, nonces.
pub fn secret_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    use std::io::Read;
    let mut out = [0; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut out)?;
    Ok(out)
}

/// True once in `n` calls on average (always for n <= 1).
pub fn one_in(n: u32) -> bool {
    n <= 1 || u64().is_multiple_of(u64::from(n))
}
