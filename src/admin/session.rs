//! The owner's session and the forms' CSRF tokens, as values signed with the dashboard's key:
//! what the cookies hold, when they expire, and the token each form carries. Pure: the time
//! and the random nonces are given.
//!
//! - The session cookie is `s1.EXPIRES.NONCE.TAG`: the expiry (Unix seconds) is inside the
//!   signed text, so a cookie kept past its `Max-Age` is refused all the same.
//! - The sign-in form is bound to a cookie of its own (`EXPIRES.NONCE`, set with the form): its
//!   token is the tag of that cookie's value, so another site can neither read nor forge it.
//! - The sign-out form's token is the tag of the session's nonce.
//! - The device cookie is `d1.EXPIRES.NONCE.TAG`, given at each sign-in: a browser that holds
//!   one signed in before, and its failed sign-ins are counted by its own budget.

use crate::admin::token::Keys;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "resolve_admin";
/// The cookie the sign-in form is bound to.
pub const FORM_COOKIE: &str = "resolve_admin_form";
/// The cookie of a browser that signed in before.
pub const DEVICE_COOKIE: &str = "resolve_admin_device";

const SESSION: &str = "session";
const SIGN_IN: &str = "signin";
const SIGN_OUT: &str = "signout";
const DEVICE: &str = "device";

/// A session that was opened: when it ends, and its nonce (which the sign-out token signs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub expires_secs: u64,
    pub nonce: String,
}

/// A nonce as the cookies carry it: 16 to 64 lower-case hex digits.
fn is_nonce(s: &str) -> bool {
    (16..=64).contains(&s.len()) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `EXPIRES.NONCE`, read back; None when malformed.
fn expiring(text: &str) -> Option<(u64, &str)> {
    let (expires, nonce) = text.split_once('.')?;
    if expires.is_empty() || expires.len() > 20 || !expires.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    is_nonce(nonce).then_some((expires.parse().ok()?, nonce))
}

/// The session cookie's value for a session starting at `now_secs` and lasting `lifetime_secs`.
pub fn new_session(keys: &Keys, now_secs: u64, lifetime_secs: u64, nonce: &str) -> String {
    keys.seal(
        SESSION,
        &format!("s1.{}.{nonce}", now_secs.saturating_add(lifetime_secs)),
    )
}

/// The session a cookie holds, when its tag is right and it has not expired by `now_secs`.
/// One whose expiry lies further ahead than a session lasts was not made here: refused too.
pub fn open_session(
    keys: &Keys,
    cookie: &str,
    now_secs: u64,
    lifetime_secs: u64,
) -> Option<Session> {
    let text = keys.open(SESSION, cookie)?;
    let (expires_secs, nonce) = expiring(text.strip_prefix("s1.")?)?;
    let live = now_secs < expires_secs && expires_secs <= now_secs.saturating_add(lifetime_secs);
    live.then(|| Session {
        expires_secs,
        nonce: nonce.to_owned(),
    })
}

/// The device cookie's value for a browser that signed in at `now_secs`.
pub fn new_device(keys: &Keys, now_secs: u64, lifetime_secs: u64, nonce: &str) -> String {
    keys.seal(
        DEVICE,
        &format!("d1.{}.{nonce}", now_secs.saturating_add(lifetime_secs)),
    )
}

/// The nonce of a device cookie, when its tag is right and it is current.
pub fn open_device(keys: &Keys, cookie: &str, now_secs: u64, lifetime_secs: u64) -> Option<String> {
    let text = keys.open(DEVICE, cookie)?;
    let (expires, nonce) = expiring(text.strip_prefix("d1.")?)?;
    let live = now_secs < expires && expires <= now_secs.saturating_add(lifetime_secs);
    live.then(|| nonce.to_owned())
}

/// The sign-out form's token for this session.
pub fn sign_out_token(keys: &Keys, session: &Session) -> String {
    keys.tag(SIGN_OUT, &session.nonce)
}

/// Whether `token` is this session's sign-out token.
pub fn check_sign_out(keys: &Keys, session: &Session, token: &str) -> bool {
    keys.check(SIGN_OUT, &session.nonce, token)
}

/// The value of the cookie a new sign-in form is bound to.
pub fn new_form(now_secs: u64, lifetime_secs: u64, nonce: &str) -> String {
    format!("{}.{nonce}", now_secs.saturating_add(lifetime_secs))
}

/// Whether a form cookie is well made and still current (then its form's token can be kept).
pub fn form_is_current(form_cookie: &str, now_secs: u64, lifetime_secs: u64) -> bool {
    expiring(form_cookie).is_some_and(|(expires, _)| {
        now_secs < expires && expires <= now_secs.saturating_add(lifetime_secs)
    })
}

/// The sign-in form's token, bound to its cookie.
pub fn sign_in_token(keys: &Keys, form_cookie: &str) -> String {
    keys.tag(SIGN_IN, form_cookie)
}

/// Whether `token` is the token of this form cookie, and the cookie is still current.
pub fn check_sign_in(
    keys: &Keys,
    form_cookie: &str,
    token: &str,
    now_secs: u64,
    lifetime_secs: u64,
) -> bool {
    form_is_current(form_cookie, now_secs, lifetime_secs) && keys.check(SIGN_IN, form_cookie, token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::{Clock, FakeClock};

    const HOURS_12: u64 = 12 * 3600;
    const NONCE: &str = "00112233445566778899aabbccddeeff";

    fn keys() -> Keys {
        Keys::derive(&[3; 32], "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA")
    }

    fn secs(clock: &FakeClock) -> u64 {
        clock.now_ms() / 1000
    }

    #[test]
    fn a_session_lasts_twelve_hours_and_not_a_second_more() {
        let clock = FakeClock::at(1_700_000_000_000);
        let cookie = new_session(&keys(), secs(&clock), HOURS_12, NONCE);
        let session = open_session(&keys(), &cookie, secs(&clock), HOURS_12).expect("fresh");
        assert_eq!(session.nonce, NONCE);
        assert_eq!(session.expires_secs, secs(&clock) + HOURS_12);
        clock.advance_ms((HOURS_12 - 1) * 1000);
        assert!(open_session(&keys(), &cookie, secs(&clock), HOURS_12).is_some());
        clock.advance_ms(1000);
        assert_eq!(
            open_session(&keys(), &cookie, secs(&clock), HOURS_12),
            None,
            "expired at twelve hours"
        );
        clock.advance_ms(365 * 24 * 3600 * 1000);
        assert_eq!(open_session(&keys(), &cookie, secs(&clock), HOURS_12), None);
    }

    #[test]
    fn a_session_from_elsewhere_is_refused() {
        let now = 1_700_000_000;
        // Made with another key (another password), or with an expiry too far ahead.
        let other = Keys::derive(&[4; 32], "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA");
        let cookie = new_session(&other, now, HOURS_12, NONCE);
        assert_eq!(open_session(&keys(), &cookie, now, HOURS_12), None);
        let far = new_session(&keys(), now, 10 * HOURS_12, NONCE);
        assert_eq!(open_session(&keys(), &far, now, HOURS_12), None);
        // Well signed but not a session's text.
        for text in [
            "s2.1700000100.00112233445566778899",
            "s1.abc.0011223344556677",
            "s1.1700000100.xyz",
            "s1.1700000100",
        ] {
            let sealed = keys().seal(SESSION, text);
            assert_eq!(
                open_session(&keys(), &sealed, now, HOURS_12),
                None,
                "{text}"
            );
        }
    }

    #[test]
    fn a_device_cookie_is_its_own_and_not_a_session() {
        let now = 1_700_000_000;
        let year = 365 * 24 * 3600;
        let device = new_device(&keys(), now, year, NONCE);
        assert_eq!(
            open_device(&keys(), &device, now, year).as_deref(),
            Some(NONCE)
        );
        assert_eq!(open_device(&keys(), &device, now + year, year), None);
        // A session is not a device cookie, nor the other way round.
        let session = new_session(&keys(), now, HOURS_12, NONCE);
        assert_eq!(open_device(&keys(), &session, now, year), None);
        assert_eq!(open_session(&keys(), &device, now, year), None);
        let other = Keys::derive(&[4; 32], "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA");
        assert_eq!(open_device(&other, &device, now, year), None);
    }

    #[test]
    fn the_sign_out_token_belongs_to_its_session() {
        let now = 1_700_000_000;
        let one = open_session(
            &keys(),
            &new_session(&keys(), now, HOURS_12, NONCE),
            now,
            HOURS_12,
        )
        .unwrap();
        let two = open_session(
            &keys(),
            &new_session(&keys(), now, HOURS_12, "ffeeddccbbaa99887766554433221100"),
            now,
            HOURS_12,
        )
        .unwrap();
        let token = sign_out_token(&keys(), &one);
        assert!(check_sign_out(&keys(), &one, &token));
        assert!(!check_sign_out(&keys(), &two, &token));
        assert!(!check_sign_out(&keys(), &one, ""));
        assert!(!check_sign_out(&keys(), &one, &token[1..]));
    }

    #[test]
    fn the_sign_in_token_is_bound_to_its_form_cookie_and_expires() {
        let clock = FakeClock::at(1_700_000_000_000);
        let life = 7200;
        let form = new_form(secs(&clock), life, NONCE);
        assert!(form_is_current(&form, secs(&clock), life));
        let token = sign_in_token(&keys(), &form);
        assert!(check_sign_in(&keys(), &form, &token, secs(&clock), life));
        // Another form cookie, a forged expiry, a missing token: refused.
        let other = new_form(secs(&clock), life, "ffeeddccbbaa99887766554433221100");
        assert!(!check_sign_in(&keys(), &other, &token, secs(&clock), life));
        let later = new_form(secs(&clock) + 60, life, NONCE);
        assert!(!check_sign_in(&keys(), &later, &token, secs(&clock), life));
        assert!(!check_sign_in(&keys(), &form, "", secs(&clock), life));
        // Two hours on, the form has expired.
        clock.advance_ms(life * 1000);
        assert!(!form_is_current(&form, secs(&clock), life));
        assert!(!check_sign_in(&keys(), &form, &token, secs(&clock), life));
        for bad in [
            "",
            ".",
            "1.",
            ".0011223344556677",
            "x.0011223344556677",
            "99999999999999999999999.0011223344556677",
        ] {
            assert!(!form_is_current(bad, 0, life), "{bad:?}");
        }
    }
}
