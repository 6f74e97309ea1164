//! Unpredictable numbers: for sampling (which request sweeps), from the clock's nanoseconds
//! (read without a system call, where seeding a hasher from the kernel would take two at every
//! request); for secrets, from the kernel.

/// A number no client can choose or foresee, spread over 64 bits: for sampling, never for
/// secrets (it is the clock's reading, mixed).
pub fn u64() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    mix(nanos as u64 ^ (nanos >> 64) as u64)
}

/// SplitMix64's finaliser: every bit of `x` moves about half of the result's, so that readings
/// a few nanoseconds apart give unrelated numbers.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_close_together_sample_as_often_as_asked() {
        // Clock readings 1 ns to 40 µs apart, as consecutive requests' would be.
        for step in [1u64, 7, 1000, 40_000] {
            let start = 1_796_000_000_000_000_000u64;
            let hits = (0..40_000u64)
                .filter(|i| mix(start + i * step).is_multiple_of(4))
                .count();
            assert!(
                (9_000..=11_000).contains(&hits),
                "step {step}: {hits} of 40000"
            );
        }
        assert_ne!(mix(1), mix(2));
    }
}
