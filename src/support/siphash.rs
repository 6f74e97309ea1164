//! SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed hash of 64 bits, fast on short input, that
//! nobody without the key can make collide. It names a request's kept answer: the request's
//! text is the client's to choose, and what is kept must never be another request's.

/// The two halves of a 128-bit key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key(pub u64, pub u64);

impl Key {
    /// The key in 16 bytes (little-endian halves), as the reference implementation takes it.
    pub fn from_bytes(bytes: [u8; 16]) -> Key {
        let (k0, k1) = bytes.split_at(8);
        Key(
            u64::from_le_bytes(k0.try_into().unwrap_or_default()),
            u64::from_le_bytes(k1.try_into().unwrap_or_default()),
        )
    }
}

/// The state between blocks of eight bytes.
struct State([u64; 4]);

impl State {
    fn new(key: Key) -> State {
        State([
            key.0 ^ 0x736f_6d65_7073_6575,
            key.1 ^ 0x646f_7261_6e64_6f6d,
            key.0 ^ 0x6c79_6765_6e65_7261,
            key.1 ^ 0x7465_6462_7974_6573,
        ])
    }

    fn round(&mut self) {
        let v = &mut self.0;
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }

    fn block(&mut self, m: u64) {
        self.0[3] ^= m;
        self.round();
        self.round();
        self.0[0] ^= m;
    }
}

/// An incremental SipHash-2-4: the bytes given piece by piece hash as they would at once.
pub struct Hasher {
    state: State,
    /// Bytes not yet a whole block, and how many.
    tail: [u8; 8],
    filled: usize,
    length: u64,
}

impl Hasher {
    pub fn new(key: Key) -> Hasher {
        Hasher {
            state: State::new(key),
            tail: [0; 8],
            filled: 0,
            length: 0,
        }
    }

    pub fn write(&mut self, mut bytes: &[u8]) {
        self.length = self.length.wrapping_add(bytes.len() as u64);
        if self.filled > 0 {
            let take = (8 - self.filled).min(bytes.len());
            self.tail[self.filled..self.filled + take].copy_from_slice(&bytes[..take]);
            self.filled += take;
            bytes = &bytes[take..];
            if self.filled < 8 {
                return;
            }
            self.state.block(u64::from_le_bytes(self.tail));
            self.filled = 0;
        }
        let mut blocks = bytes.chunks_exact(8);
        for b in &mut blocks {
            self.state
                .block(u64::from_le_bytes(b.try_into().unwrap_or_default()));
        }
        let rest = blocks.remainder();
        self.tail[..rest.len()].copy_from_slice(rest);
        self.filled = rest.len();
    }

    pub fn finish(mut self) -> u64 {
        let mut last = [0u8; 8];
        last[..self.filled].copy_from_slice(&self.tail[..self.filled]);
        let m = u64::from_le_bytes(last) | (self.length << 56);
        self.state.block(m);
        self.state.0[2] ^= 0xff;
        for _ in 0..4 {
            self.state.round();
        }
        let v = self.state.0;
        v[0] ^ v[1] ^ v[2] ^ v[3]
    }
}

/// SipHash-2-4 of `bytes` under `key`.
pub fn hash(key: Key, bytes: &[u8]) -> u64 {
    let mut h = Hasher::new(key);
    h.write(bytes);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference key: bytes 0 to 15.
    fn reference_key() -> Key {
        Key::from_bytes(std::array::from_fn(|i| i as u8))
    }

    #[test]
    fn the_papers_example_and_the_reference_vectors_first_and_last() {
        let message: Vec<u8> = (0..15).collect();
        // Appendix A of the paper: 15 bytes 00..0e under the key 00..0f.
        assert_eq!(hash(reference_key(), &message), 0xa129_ca61_49be_45e5);
        // The reference implementation's vectors: the empty message, and 63 bytes 00..3e.
        assert_eq!(hash(reference_key(), &[]), 0x726f_db47_dd0e_0e31);
        let long: Vec<u8> = (0..63).collect();
        assert_eq!(hash(reference_key(), &long), 0x958a_324c_eb06_4572);
    }

    /// The standard library's SipHash-2-4 (kept, though no longer offered for new code) as a
    /// second implementation: every length, every split into pieces.
    #[test]
    #[allow(deprecated)]
    fn it_agrees_with_the_standard_librarys_on_every_length_and_split() {
        use std::hash::Hasher as _;
        let key = Key(0x0706_0504_0302_0100 ^ 0x5555, 0x0f0e_0d0c_0b0a_0908);
        let bytes: Vec<u8> = (0..100u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..bytes.len() {
            let mut std = std::hash::SipHasher::new_with_keys(key.0, key.1);
            std.write(&bytes[..len]);
            let want = std.finish();
            assert_eq!(hash(key, &bytes[..len]), want, "{len} bytes");
            for split in [1, 3, 7, 8, 9] {
                let mut h = Hasher::new(key);
                for piece in bytes[..len].chunks(split) {
                    h.write(piece);
                }
                assert_eq!(h.finish(), want, "{len} bytes in pieces of {split}");
            }
        }
    }
}
