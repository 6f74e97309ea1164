//! The cookie that remembers a solved challenge for a while: when it ends and an HMAC-SHA256
//! tag over that and the client it was solved by (its address as counted), keyed from the
//! challenge's secret, so that neither a visitor nor a copy of the cookie at another address
//! can make one. Changing `challenge.secret` ends every cookie made before. Pure.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The cookie's name.
pub const NAME: &str = "resolve_challenge";
/// What the key is derived for, so that no other use of the secret gives the same key.
const LABEL: &[u8] = b"resolve challenge cookie v1\0";

fn mac(secret: &str, text: &str) -> HmacSha256 {
    let mut derive = HmacSha256::new_from_slice(secret.as_bytes()).expect("any key length");
    derive.update(LABEL);
    let key = derive.finalize().into_bytes();
    let mut mac = HmacSha256::new_from_slice(&key).expect("any key length");
    mac.update(text.as_bytes());
    mac
}

fn signed_text(expires: u64, client: &str) -> String {
    format!("{expires}|{client}")
}

/// The cookie's value for `client`, remembered until `expires` (seconds since the epoch).
pub fn value(secret: &str, client: &str, expires: u64) -> String {
    let tag = mac(secret, &signed_text(expires, client))
        .finalize()
        .into_bytes();
    format!("{expires}.{}", crate::support::hex::lower(&tag))
}

/// Whether `value` was made by [`value`] for `client` and has not ended at `now` (seconds).
pub fn holds(secret: &str, client: &str, value: &str, now: u64) -> bool {
    let Some((expires, tag)) = value.split_once('.') else {
        return false;
    };
    let Ok(expires) = expires.parse::<u64>() else {
        return false;
    };
    if expires <= now || tag.len() != 64 {
        return false;
    }
    let Some(bytes) = unhex(tag) else {
        return false;
    };
    mac(secret, &signed_text(expires, client))
        .verify_slice(&bytes)
        .is_ok()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The cookie's value in a `Cookie` header, if it carries one.
pub fn find(header: &str) -> Option<&str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == NAME)
        .map(|(_, v)| v.trim())
}

/// The `Set-Cookie` header's value: the program's own path only, never read by scripts,
/// sent with the page's own requests (`SameSite=Strict`), `Secure` over https.
pub fn set_cookie(value: &str, max_age_secs: u32, path: &str, secure: bool) -> String {
    format!(
        "{NAME}={value}; Max-Age={max_age_secs}; Path={path}; HttpOnly; SameSite=Strict{}",
        if secure { "; Secure" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_holds_for_its_client_until_it_ends() {
        let v = value("secret", "192.0.2.1", 1000);
        assert!(holds("secret", "192.0.2.1", &v, 999));
        assert!(!holds("secret", "192.0.2.1", &v, 1000), "ended");
        assert!(!holds("secret", "192.0.2.2", &v, 999), "another client");
        assert!(!holds("other", "192.0.2.1", &v, 999), "another secret");
        let later = v.replacen("1000", "9000", 1);
        assert!(!holds("secret", "192.0.2.1", &later, 999), "its end moved");
        for bad in ["", "1000", "1000.", "x.y", "1000.zz", &v[..v.len() - 1]] {
            assert!(!holds("secret", "192.0.2.1", bad, 999), "{bad:?}");
        }
    }

    #[test]
    fn found_among_other_cookies() {
        assert_eq!(find("a=1; resolve_challenge=5.ab; b=2"), Some("5.ab"));
        assert_eq!(find("xresolve_challenge=5.ab"), None);
        assert_eq!(find(""), None);
        let set = set_cookie("5.ab", 60, "/cgi-bin/resolve", true);
        assert!(set.starts_with("resolve_challenge=5.ab; Max-Age=60; Path=/cgi-bin/resolve;"));
        assert!(set.ends_with("; Secure"));
    }
}
