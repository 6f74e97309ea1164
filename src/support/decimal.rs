//! Whole numbers in decimal, as `format!("{n}")` writes them, without the formatting
//! machinery: the figures of every answer's headers (a refused request wrote a dozen through
//! `format!`, each a buffer of its own and a few hundred instructions).

/// `n` in decimal, written at the end of `buf`; the digits written.
pub fn decimal(n: u64, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    let mut n = n;
    loop {
        at -= 1;
        // A digit, 0 to 9: the cast keeps it whole.
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Only ASCII digits were written, so this never fails.
    std::str::from_utf8(&buf[at..]).unwrap_or_default()
}

/// `n` in decimal, added to `out`.
pub fn push(out: &mut String, n: u64) {
    out.push_str(decimal(n, &mut [0; 20]));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_format_writes_it() {
        let mut buf = [0; 20];
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            429,
            86_400,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            assert_eq!(decimal(n, &mut buf), n.to_string());
        }
        let mut out = "q=".to_owned();
        push(&mut out, 1500);
        assert_eq!(out, "q=1500");
    }
}
