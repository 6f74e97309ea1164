//! Lowercase hexadecimal text of bytes, written digit by digit: the file store's file names,
//! API key hashes and cache keys, where `format!` per byte cost more than the hash itself.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `bytes` as lowercase hex, two digits a byte.
pub fn lower(bytes: &[u8]) -> String {
    // Bytes written in place, not pushed: `String::push` encodes each digit as UTF-8 on its
    // own, and a push checks the capacity each time; the file store's names (ten on a refused
    // request) cost more that way than their SHA-256.
    let mut out = vec![0; bytes.len() * 2];
    lower_into(bytes, &mut out);
    // Only ASCII digits were written, so this never fails.
    String::from_utf8(out).unwrap_or_default()
}

/// `bytes` as lowercase hex written into `out`, two digits a byte (as many as `out` holds):
/// for a name built in a buffer of its own, without a `String` of its own.
pub fn lower_into(bytes: &[u8], out: &mut [u8]) {
    for (pair, &b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0x0f)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_format_writes_it() {
        let bytes: Vec<u8> = (0..=255).collect();
        let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(lower(&bytes), expected);
        assert_eq!(lower(&[]), "");
        let mut out = [0u8; 4];
        lower_into(&[0xab, 0x01], &mut out);
        assert_eq!(&out, b"ab01");
    }
}
