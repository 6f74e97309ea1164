//! The one-time setup code: made from random bytes, written to a file beside the configuration
//! with the moment it expires, and compared with what the owner typed (case, spaces and dashes
//! aside, in constant time). Pure: the file's text in and out; the file itself is
//! `config_file`'s.

use crate::support::defaults;

/// Letters and digits that cannot be mistaken for one another (no I, L, O, U).
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// The line of the file that holds the expiry, in seconds since the Unix epoch.
const EXPIRES: &str = "expires: ";

/// A code from random bytes: 5 bits a character, in groups of four (`ABCD-EFGH-...`).
pub fn generate(bytes: &[u8; defaults::SETUP_CODE_BYTES]) -> String {
    let mut bits: u128 = 0;
    for b in bytes {
        bits = (bits << 8) | u128::from(*b);
    }
    let n = defaults::SETUP_CODE_BYTES * 8 / 5;
    let chars: Vec<char> = (0..n)
        .map(|i| ALPHABET[((bits >> (5 * (n - 1 - i))) & 31) as usize] as char)
        .collect();
    chars
        .chunks(4)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join("-")
}

/// A code read from its file: what it is and when it stops working.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Code {
    pub code: String,
    pub expires_secs: u64,
}

impl Code {
    /// Whether it still works at `now_secs`.
    pub fn is_current(&self, now_secs: u64) -> bool {
        now_secs < self.expires_secs
    }

    /// The file's text: the code on the first line, then what it is for and its expiry.
    pub fn file_text(&self) -> String {
        format!(
            "{}\n\nThe one-time code that sets up this site's dashboard: type it into the \
             setup page.\nIt works once, until {} UTC; this file is removed when the setup is \
             saved.\n{EXPIRES}{}\n",
            self.code,
            minute(self.expires_secs),
            self.expires_secs
        )
    }

    /// A code from its file's text; None when the text is not one.
    pub fn parse(text: &str) -> Option<Code> {
        let code = text.lines().next()?.trim();
        let expires_secs = text
            .lines()
            .find_map(|l| l.strip_prefix(EXPIRES))?
            .trim()
            .parse()
            .ok()?;
        (!code.is_empty()).then(|| Code {
            code: code.to_owned(),
            expires_secs,
        })
    }

    /// Whether `typed` is this code (case, spaces and dashes aside), compared in constant
    /// time.
    pub fn matches(&self, typed: &str) -> bool {
        let plain = |s: &str| -> Vec<u8> {
            s.bytes()
                .filter(|b| !matches!(b, b'-' | b' ' | b'\t'))
                .map(|b| b.to_ascii_uppercase())
                .collect()
        };
        let (want, got) = (plain(&self.code), plain(typed));
        if want.len() != got.len() || want.is_empty() {
            return false;
        }
        want.iter().zip(&got).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

/// `2026-12-01 16:00` for a time in seconds.
fn minute(secs: u64) -> String {
    let iso = crate::core::calendar::iso(secs.saturating_mul(1000));
    format!("{} {}", &iso[..10], &iso[11..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_sixteen_plain_characters_in_groups() {
        let code = generate(&[0; 10]);
        assert_eq!(code, "0000-0000-0000-0000");
        let code = generate(&[0xff; 10]);
        assert_eq!(code, "ZZZZ-ZZZZ-ZZZZ-ZZZZ");
        let code = generate(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(code.len(), 19);
        assert!(code.bytes().all(|b| b == b'-' || ALPHABET.contains(&b)));
    }

    #[test]
    fn the_file_says_the_code_and_when_it_ends() {
        let c = Code {
            code: "ABCD-EFGH-JKMN-PQRS".into(),
            expires_secs: 1_700_003_600,
        };
        let text = c.file_text();
        assert!(text.starts_with("ABCD-EFGH-JKMN-PQRS\n"), "{text}");
        assert!(text.contains("until 2023-11-14 23:13 UTC"), "{text}");
        assert_eq!(Code::parse(&text), Some(c.clone()));
        assert!(c.is_current(1_700_003_599));
        assert!(!c.is_current(1_700_003_600), "an hour means an hour");
        for bad in ["", "\n", "ABCD\nexpires: soon\n", "ABCD\n"] {
            assert_eq!(Code::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn typed_codes_match_whatever_their_case_and_dashes() {
        let c = Code {
            code: "ABCD-EFGH-JKMN-PQRS".into(),
            expires_secs: 1,
        };
        for typed in [
            "ABCD-EFGH-JKMN-PQRS",
            "abcdefghjkmnpqrs",
            " abcd efgh jkmn pqrs ",
        ] {
            assert!(c.matches(typed), "{typed}");
        }
        for typed in [
            "",
            "ABCD-EFGH-JKMN-PQRT",
            "ABCD-EFGH-JKMN-PQR",
            "ABCD-EFGH-JKMN-PQRSX",
        ] {
            assert!(!c.matches(typed), "{typed}");
        }
        let empty = Code {
            code: "-".into(),
            expires_secs: 1,
        };
        assert!(!empty.matches(""), "an empty code matches nothing");
    }
}
