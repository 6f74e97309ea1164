//! API keys: how programs identify themselves. Keys arrive in a request header, are known to
//! the configuration only by their SHA-256, and appear in logs only as a short hash prefix.

use sha2::{Digest, Sha256};

use crate::core::rule::Rule;
use crate::http::problem::{Kind, Problem};

/// One accepted key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KnownKey {
    /// A name for logs and counters (a-z, 0-9, `_`, `-`).
    pub name: String,
    /// SHA-256 of the key, lowercase hex.
    pub sha256: String,
    /// Limits of this key, replacing the `api_key` rules of the configuration (None: those).
    pub rules: Option<Vec<Rule>>,
}

/// What the configuration says about keys.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyPolicy {
    /// Request header that carries the key.
    pub header: String,
    /// Refuse requests without a key (401).
    pub require: bool,
    /// When not empty, only these keys are accepted (others: 401).
    pub keys: Vec<KnownKey>,
}

/// A request's key, once checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientKey<'a> {
    /// Counts by this (`partner` or `sha256:0123abcd…`).
    pub id: String,
    /// The configured entry, when the key is listed.
    pub known: Option<&'a KnownKey>,
}

/// SHA-256 of a key, lowercase hex: what the configuration stores.
pub fn hash(key: &str) -> String {
    crate::support::hex::lower(&Sha256::digest(key.as_bytes()))
}

/// Longest key accepted, in bytes.
const MAX_KEY_BYTES: usize = 256;

impl KeyPolicy {
    /// The `WWW-Authenticate` value that tells a client where the key goes.
    pub fn challenge(&self) -> String {
        format!("ApiKey realm=\"resolve\", header=\"{}\"", self.header)
    }

    fn unauthorized(&self, kind: Kind, detail: &str, log: String) -> Problem {
        let mut p = Problem::new(401, kind, detail).log(log);
        p.challenge = Some(self.challenge().into_boxed_str());
        p
    }

    /// Checks the header's value. `Ok(None)`: no key, and none required.
    pub fn check<'a>(&'a self, value: Option<&[u8]>) -> Result<Option<ClientKey<'a>>, Problem> {
        let Some(raw) = value else {
            if self.require {
                return Err(self.unauthorized(
                    Kind::MissingApiKey,
                    &format!("Send your API key in the {} header.", self.header),
                    format!("no {} header", self.header),
                ));
            }
            return Ok(None);
        };
        let key = std::str::from_utf8(raw).ok().map(str::trim).filter(|k| {
            !k.is_empty() && k.len() <= MAX_KEY_BYTES && k.bytes().all(|b| b.is_ascii_graphic())
        });
        let Some(key) = key else {
            return Err(self.unauthorized(
                Kind::InvalidApiKey,
                "The API key is not valid.",
                format!("a malformed {} header ({} bytes)", self.header, raw.len()),
            ));
        };
        let digest = hash(key);
        let short = format!("sha256:{}", &digest[..16]);
        if self.keys.is_empty() {
            return Ok(Some(ClientKey {
                id: short,
                known: None,
            }));
        }
        match self.keys.iter().find(|k| k.sha256 == digest) {
            Some(known) => Ok(Some(ClientKey {
                id: known.name.clone(),
                known: Some(known),
            })),
            None => Err(self.unauthorized(
                Kind::UnknownApiKey,
                "The API key is not valid.",
                format!("unknown API key {short}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(require: bool, listed: &[(&str, &str)]) -> KeyPolicy {
        KeyPolicy {
            header: "X-API-Key".into(),
            require,
            keys: listed
                .iter()
                .map(|(name, key)| KnownKey {
                    name: (*name).into(),
                    sha256: hash(key),
                    rules: None,
                })
                .collect(),
        }
    }

    #[test]
    fn hashes_are_sha256_hex() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn optional_keys() {
        let p = policy(false, &[]);
        assert_eq!(p.check(None).unwrap(), None);
        let k = p.check(Some(b"secret-key-1")).unwrap().unwrap();
        assert_eq!(k.id, format!("sha256:{}", &hash("secret-key-1")[..16]));
        assert!(!k.id.contains("secret"));
    }

    #[test]
    fn required_and_listed_keys() {
        let p = policy(true, &[("partner", "k-123")]);
        let e = p.check(None).unwrap_err();
        assert_eq!((e.status, e.code()), (401, "missing_api_key"));
        assert_eq!(
            e.challenge.as_deref(),
            Some("ApiKey realm=\"resolve\", header=\"X-API-Key\"")
        );
        let e = p.check(Some(b"k-999")).unwrap_err();
        assert_eq!((e.status, e.code()), (401, "unknown_api_key"));
        assert!(!e.log.as_deref().unwrap().contains("k-999"));
        assert_eq!(p.check(Some(b" k-123 ")).unwrap().unwrap().id, "partner");
    }

    #[test]
    fn malformed_keys() {
        let p = policy(false, &[]);
        let long = "k".repeat(257);
        for bad in [&b""[..], b"a b", b"k\r\nX: y", b"\xff\xfe", long.as_bytes()] {
            let e = p.check(Some(bad)).unwrap_err();
            assert_eq!(e.code(), "invalid_api_key", "{bad:?}");
        }
    }
}
