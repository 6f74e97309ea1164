//! Signed values for the dashboard: one HMAC-SHA256 key derived from the password hash and the
//! server's secret, tags for a purpose and a text, checked in constant time. Pure.
//!
//! Changing the password changes the key, so every cookie and form made before stops being
//! accepted; so does replacing the server's secret.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// What the key is derived for, so that no other use of the same inputs gives the same key.
const LABEL: &[u8] = b"resolve dashboard key v1\0";

/// The key every dashboard value is signed with.
#[derive(Clone)]
pub struct Keys {
    key: [u8; 32],
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(***)")
    }
}

/// What the keys of a site with no password yet (its setup page) are derived from, in the
/// password hash's place: no hash has this form.
pub const SETUP_KEYS: &str = "(setup: no password yet)";

impl Keys {
    /// HMAC-SHA256 keyed with the server's secret over the label and the password hash.
    pub fn derive(server_secret: &[u8], password_hash: &str) -> Keys {
        let mut mac = HmacSha256::new_from_slice(server_secret).expect("HMAC takes any key length");
        mac.update(LABEL);
        mac.update(password_hash.as_bytes());
        Keys {
            key: mac.finalize().into_bytes().into(),
        }
    }

    fn mac(&self, purpose: &str, text: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        // The purpose names are fixed words without NUL: purpose and text never run together.
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(text.as_bytes());
        mac
    }

    /// The tag of `text` for `purpose`, as 64 hex digits.
    pub fn tag(&self, purpose: &str, text: &str) -> String {
        hex(&self.mac(purpose, text).finalize().into_bytes())
    }

    /// Whether `tag` is the tag of `text` for `purpose`; compared in constant time.
    pub fn check(&self, purpose: &str, text: &str, tag: &str) -> bool {
        match unhex(tag) {
            Some(bytes) if bytes.len() == 32 => {
                self.mac(purpose, text).verify_slice(&bytes).is_ok()
            }
            _ => false,
        }
    }

    /// `text.TAG`: the text with its tag, to be given out and read back with [`Keys::open`].
    pub fn seal(&self, purpose: &str, text: &str) -> String {
        format!("{text}.{}", self.tag(purpose, text))
    }

    /// The text of a sealed value, when its tag is right.
    pub fn open<'a>(&self, purpose: &str, sealed: &'a str) -> Option<&'a str> {
        let (text, tag) = sealed.rsplit_once('.')?;
        self.check(purpose, text, tag).then_some(text)
    }
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// The bytes of lower-case hex; None for anything else.
fn unhex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2g";

    #[test]
    fn a_sealed_value_opens_with_the_same_key_only() {
        let keys = Keys::derive(&[7; 32], HASH);
        let sealed = keys.seal("session", "s1.100.abc");
        assert_eq!(keys.open("session", &sealed), Some("s1.100.abc"));
        // Another purpose, another password, another server secret: refused.
        assert_eq!(keys.open("signout", &sealed), None);
        let other_password = Keys::derive(&[7; 32], &HASH.replace("aGFz", "aGFa"));
        assert_eq!(other_password.open("session", &sealed), None);
        assert_eq!(Keys::derive(&[8; 32], HASH).open("session", &sealed), None);
    }

    #[test]
    fn any_change_to_a_sealed_value_is_refused() {
        let keys = Keys::derive(&[1; 32], HASH);
        let sealed = keys.seal("session", "s1.100.abc");
        for i in 0..sealed.len() {
            let mut bytes = sealed.clone().into_bytes();
            bytes[i] = if bytes[i] == b'0' { b'1' } else { b'0' };
            let changed = String::from_utf8(bytes).unwrap();
            assert_eq!(keys.open("session", &changed), None, "{changed}");
        }
        for bad in ["", ".", "s1.100.abc", "s1.100.abc.", "x.ABCDEF", "x.zz"] {
            assert_eq!(keys.open("session", bad), None, "{bad:?}");
        }
        let upper = format!(
            "s1.100.abc.{}",
            keys.tag("session", "s1.100.abc").to_uppercase()
        );
        assert_eq!(keys.open("session", &upper), None, "one spelling only");
    }

    #[test]
    fn the_key_is_not_shown() {
        assert_eq!(format!("{:?}", Keys::derive(&[1; 32], HASH)), "Keys(***)");
        assert_eq!(hex(&[0, 15, 255]), "000fff");
        assert_eq!(unhex("000fff"), Some(vec![0, 15, 255]));
        assert_eq!(unhex("0"), None);
    }
}
