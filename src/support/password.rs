//! The dashboard's password: made into an Argon2id hash in its standard PHC string form
//! (`$argon2id$v=19$m=...,t=...,p=...$SALT$HASH`), salted and deliberately slow, and checked
//! against one. The configuration holds the hash only, never the password.

use std::fmt;

use argon2::password_hash;
use argon2::{Algorithm, Argon2, Params, PasswordHash, PasswordHasher, PasswordVerifier, Version};

use crate::support::defaults;

/// Least memory (KiB) a hash may ask for: OWASP's lowest Argon2id setting (7 MiB, 5 passes).
const MIN_M_COST_KIB: u32 = 7 * 1024;
/// Least memory times passes (KiB): each of OWASP's Argon2id settings costs at least this.
const MIN_WORK_KIB: u64 = 7 * 1024 * 5;
/// Most memory (KiB), passes, lanes and memory times passes a hash may ask for: near the cost
/// `hash-password` uses (see `defaults`), since each sign-in attempt computes one.
const MAX_M_COST_KIB: u32 = defaults::ADMIN_HASH_MAX_MEMORY_KIB;
const MAX_T_COST: u32 = defaults::ADMIN_HASH_MAX_PASSES;
const MAX_P_COST: u32 = defaults::ADMIN_HASH_MAX_LANES;
const MAX_WORK_KIB: u64 = defaults::ADMIN_HASH_MAX_WORK_KIB;

/// The fix every message about a hash ends with.
const MAKE_ONE: &str = "make one with `resolve hash-password` (it reads the password on standard input) \
     and paste the line it prints";

/// Why a password or a hash is refused, or a hash could not be made; each message ends with
/// what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordError {
    /// The password is empty or blank ([`check_strength`]).
    Empty,
    /// The password has fewer characters than the least ([`check_strength`]).
    TooShort { chars: usize },
    /// The default costs were refused ([`hash`]).
    Params(argon2::Error),
    /// Hashing failed ([`hash`]).
    Hashing(password_hash::Error),
    /// Not a hash in its standard form ([`check_hash`], and so on below).
    NotPhc(password_hash::phc::Error),
    /// A hash of another algorithm.
    NotArgon2id(String),
    /// A hash of another version of Argon2.
    NotVersion19,
    /// A hash without its salt or its hash part.
    Incomplete,
    /// The hash's costs could not be read.
    Costs(password_hash::Error),
    /// The costs are too low to slow down guessing.
    TooCheap { m: u32, t: u32 },
    /// The costs are too high for a shared host.
    TooDear { m: u32, t: u32, p: u32 },
}

impl fmt::Display for PasswordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PasswordError::Empty => f.write_str("the password is empty"),
            PasswordError::TooShort { chars } => write!(
                f,
                "the password has {chars} characters: use at least {} (a few unrelated words make \
                 a good one, or let deploy.sh --admin-password make one)",
                defaults::ADMIN_PASSWORD_MIN_CHARS
            ),
            PasswordError::Params(e) => write!(f, "bad hash parameters: {e}"),
            PasswordError::Hashing(e) => write!(f, "hashing failed: {e}"),
            PasswordError::NotPhc(e) => write!(
                f,
                "not a password hash in its standard form ($argon2id$v=19$m=...,t=...,p=...$SALT$HASH): \
                 {e}; {MAKE_ONE}"
            ),
            PasswordError::NotArgon2id(algorithm) => {
                write!(f, "the hash is {algorithm}, not argon2id; {MAKE_ONE}")
            }
            PasswordError::NotVersion19 => {
                write!(f, "the hash must say v=19 (Argon2 version 1.3); {MAKE_ONE}")
            }
            PasswordError::Incomplete => {
                write!(f, "the hash has no salt or no hash part; {MAKE_ONE}")
            }
            PasswordError::Costs(e) => {
                write!(f, "the hash's costs do not read: {e}; {MAKE_ONE}")
            }
            PasswordError::TooCheap { m, t } => write!(
                f,
                "the hash is too cheap to slow down guessing (m={m}, t={t}: at least m={MIN_M_COST_KIB} \
                 and m times t at least {MIN_WORK_KIB}); {MAKE_ONE}"
            ),
            PasswordError::TooDear { m, t, p } => write!(
                f,
                "the hash asks too much of a shared host for each sign-in (m={m}, t={t}, p={p}: at \
                 most m={MAX_M_COST_KIB}, t={MAX_T_COST}, p={MAX_P_COST}, and m times t at most \
                 {MAX_WORK_KIB}); {MAKE_ONE}"
            ),
        }
    }
}

impl std::error::Error for PasswordError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PasswordError::Params(e) => Some(e),
            PasswordError::Hashing(e) | PasswordError::Costs(e) => Some(e),
            PasswordError::NotPhc(e) => Some(e),
            _ => None,
        }
    }
}

/// Whether a password is long enough to be worth a dashboard; the reason when not.
pub fn check_strength(password: &str) -> Result<(), PasswordError> {
    let chars = password.chars().count();
    if password.trim().is_empty() {
        return Err(PasswordError::Empty);
    }
    if chars < defaults::ADMIN_PASSWORD_MIN_CHARS {
        return Err(PasswordError::TooShort { chars });
    }
    Ok(())
}

/// The hash of `password` with this `salt` (16 random bytes), with the default costs.
pub fn hash(password: &str, salt: &[u8; 16]) -> Result<String, PasswordError> {
    let params = Params::new(
        defaults::ADMIN_HASH_MEMORY_KIB,
        defaults::ADMIN_HASH_PASSES,
        defaults::ADMIN_HASH_LANES,
        None,
    )
    .map_err(PasswordError::Params)?;
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_with_salt(password.as_bytes(), salt)
        .map(|h| h.to_string())
        .map_err(PasswordError::Hashing)
}

/// Checks that `hash` is an Argon2id hash in its standard form whose costs are neither too low
/// to slow down guessing nor too high for a shared host; the problem and its fix when not.
pub fn check_hash(hash: &str) -> Result<(), PasswordError> {
    let parsed = PasswordHash::new(hash).map_err(PasswordError::NotPhc)?;
    if parsed.algorithm.as_str() != "argon2id" {
        return Err(PasswordError::NotArgon2id(
            parsed.algorithm.as_str().to_owned(),
        ));
    }
    if parsed.version != Some(0x13) {
        return Err(PasswordError::NotVersion19);
    }
    if parsed.salt.is_none() || parsed.hash.is_none() {
        return Err(PasswordError::Incomplete);
    }
    let params = Params::try_from(&parsed).map_err(PasswordError::Costs)?;
    let (m, t, p) = (params.m_cost(), params.t_cost(), params.p_cost());
    if m < MIN_M_COST_KIB || u64::from(m) * u64::from(t) < MIN_WORK_KIB {
        return Err(PasswordError::TooCheap { m, t });
    }
    if m > MAX_M_COST_KIB
        || t > MAX_T_COST
        || p > MAX_P_COST
        || u64::from(m) * u64::from(t) > MAX_WORK_KIB
    {
        return Err(PasswordError::TooDear { m, t, p });
    }
    Ok(())
}

/// Whether `password` is the one `hash` was made from (a hash that fails [`check_hash`] matches
/// nothing). Takes as long as the hash's costs say, on purpose.
pub fn verify(hash: &str, password: &str) -> bool {
    check_hash(hash).is_ok()
        && PasswordHash::new(hash).is_ok_and(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: [u8; 16] = *b"0123456789abcdef";

    #[test]
    fn a_hash_is_argon2id_with_the_default_costs_and_checks_its_password() {
        let h = hash("correct horse battery", &SALT).unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert_eq!(check_hash(&h), Ok(()));
        assert!(verify(&h, "correct horse battery"));
        assert!(!verify(&h, "correct horse battery "));
        assert!(!verify(&h, ""));
        // OWASP's other Argon2id settings are still accepted.
        for costs in [
            "m=47104,t=1,p=1",
            "m=12288,t=3,p=1",
            "m=9216,t=4,p=1",
            "m=7168,t=5,p=1",
        ] {
            let other =
                format!("$argon2id$v=19${costs}$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA");
            assert_eq!(check_hash(&other), Ok(()), "{costs}");
        }
        // Salted: another salt, another hash.
        assert_ne!(hash("correct horse battery", &[9; 16]).unwrap(), h);
    }

    #[test]
    fn short_and_empty_passwords_are_refused() {
        assert_eq!(check_strength(""), Err(PasswordError::Empty));
        assert_eq!(check_strength("            "), Err(PasswordError::Empty));
        assert_eq!(
            check_strength("").unwrap_err().to_string(),
            "the password is empty"
        );
        let short = check_strength("hunter2").unwrap_err().to_string();
        assert!(
            short.contains("7 characters") && short.contains("at least 12"),
            "{short}"
        );
        assert_eq!(check_strength("twelve chars"), Ok(()));
        assert_eq!(
            check_strength("ééééééééééé\u{e9}"),
            Ok(()),
            "characters, not bytes"
        );
    }

    #[test]
    fn hashes_that_are_not_right_say_why() {
        for (bad, says) in [
            ("", "standard form"),
            ("hunter22hunter22", "standard form"),
            ("$2y$10$abcdefghijklmnopqrstuu", "standard form"),
            (
                "$argon2i$v=19$m=19456,t=2,p=1$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA",
                "not argon2id",
            ),
            (
                "$argon2id$v=16$m=19456,t=2,p=1$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA",
                "v=19",
            ),
            ("$argon2id$v=19$m=19456,t=2,p=1", "no salt"),
            (
                "$argon2id$v=19$m=1024,t=1,p=1$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA",
                "too cheap",
            ),
            (
                "$argon2id$v=19$m=8192,t=2,p=1$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA",
                "too cheap",
            ),
            (
                "$argon2id$v=19$m=4194304,t=2,p=1$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA",
                "too much",
            ),
            // What the cap used to let through: 256 MiB, 20 passes, 8 lanes (seconds each).
            (
                "$argon2id$v=19$m=262144,t=20,p=8$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA",
                "too much",
            ),
            (
                "$argon2id$v=19$m=65536,t=1,p=1$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA",
                "too much",
            ),
            (
                "$argon2id$v=19$m=40960,t=2,p=1$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA",
                "too much",
            ),
            (
                "$argon2id$v=19$m=19456,t=2,p=4$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA",
                "too much",
            ),
        ] {
            let e = check_hash(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(e.contains("resolve hash-password"), "{bad}: {e}");
            assert!(!verify(bad, "anything at all"), "{bad}");
        }
    }

    #[test]
    fn an_error_says_the_words_it_said_before_and_keeps_its_cause() {
        use std::error::Error as _;
        assert_eq!(
            PasswordError::TooShort { chars: 7 }.to_string(),
            "the password has 7 characters: use at least 12 (a few unrelated words make a good \
             one, or let deploy.sh --admin-password make one)"
        );
        assert_eq!(
            PasswordError::NotArgon2id("argon2i".to_owned()).to_string(),
            format!("the hash is argon2i, not argon2id; {MAKE_ONE}")
        );
        assert_eq!(
            PasswordError::TooCheap { m: 1024, t: 1 }.to_string(),
            format!(
                "the hash is too cheap to slow down guessing (m=1024, t=1: at least m=7168 and \
                 m times t at least 35840); {MAKE_ONE}"
            )
        );
        assert!(PasswordError::TooCheap { m: 1, t: 1 }.source().is_none());
        // A hash that does not parse keeps the parser's error as its cause.
        let e = check_hash("hunter22hunter22").unwrap_err();
        assert!(matches!(e, PasswordError::NotPhc(_)), "{e:?}");
        let cause = e.source().expect("the parser's error").to_string();
        assert!(e.to_string().contains(&format!(": {cause}; ")), "{e}");
    }

    /// The costs the cap allowed before: 256 MiB, 20 passes, 8 lanes.
    fn within_old_cap(hash: &str) -> bool {
        let params = Params::try_from(&PasswordHash::new(hash).unwrap()).unwrap();
        params.m_cost() <= 262_144 && params.t_cost() <= 20 && params.p_cost() <= 8
    }

    #[test]
    fn costs_the_old_cap_allowed_are_refused_before_any_hashing() {
        // 256 MiB in one pass: each attempt would take a quarter of a gigabyte.
        let memory =
            "$argon2id$v=19$m=262144,t=1,p=1$MDEyMzQ1Njc4OWFiY2RlZg$aGFzaGhhc2hoYXNoaGFzaA";
        assert!(within_old_cap(memory));
        let e = check_hash(memory).unwrap_err().to_string();
        assert!(e.contains("too much") && e.contains("m=262144"), "{e}");
        assert!(!verify(memory, "anything at all"));

        // 20 passes over 8 lanes: a real hash of the password, so that only a refusal made
        // before hashing can make `verify` say no.
        let params = Params::new(MIN_M_COST_KIB, 20, 8, None).unwrap();
        let passes = Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password_with_salt(b"correct horse battery", &SALT)
            .unwrap()
            .to_string();
        assert!(passes.contains("m=7168,t=20,p=8"), "{passes}");
        assert!(within_old_cap(&passes));
        let e = check_hash(&passes).unwrap_err().to_string();
        assert!(e.contains("too much") && e.contains("t=20, p=8"), "{e}");
        assert!(!verify(&passes, "correct horse battery"));
    }
}
