//! The result cache: a link resolved a moment ago is answered again from the store without a
//! new paid call. Entries are keyed by a hash of the normalised link and hold the answer.

use sha2::{Digest, Sha256};

use crate::provider::resolved::{FileLink, Resolved};

/// The value of a link being resolved right now: others wait for the real answer.
pub const PENDING: &[u8] = b"resolve:pending";

/// The link as the cache sees it: the URL parser's standard form (scheme and host in lower
/// case, no default port, dot segments resolved) without the fragment, which is never sent to a
/// server. Path and query keep their case: they are case-sensitive on most hosts.
pub fn normalise(link: &str) -> String {
    match crate::net::url::parse(link, &["https", "http"]) {
        Ok(u) => u.normalised(),
        // Links are checked before they get here; anything else keys as written.
        Err(_) => link.to_owned(),
    }
}

/// The SHA-256 of a link in its standard form, in lower-case hex: what its cached answer and
/// its job are kept under.
pub fn digest(link: &str) -> String {
    crate::support::hex::lower(&Sha256::digest(normalise(link).as_bytes()))
}

/// The store key of a link's cached answer.
pub fn key(link: &str) -> String {
    crate::core::key::Reserved::CachedAnswer(&digest(link))
        .key()
        .into_owned()
}

/// A resolved link as stored.
pub fn encode(r: &Resolved) -> Vec<u8> {
    let mut v = serde_json::json!({"download": r.download, "filename": r.filename});
    if let Some(size) = r.size {
        v["size"] = size.into();
    }
    if !r.files.is_empty() {
        v["files"] = r
            .files
            .iter()
            .map(|f| serde_json::json!({"download": f.download, "filename": f.filename}))
            .collect();
    }
    v.to_string().into_bytes()
}

/// A stored answer, if it is one.
pub fn decode(bytes: &[u8]) -> Option<Resolved> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let download = v["download"].as_str()?;
    if !crate::net::url::has_web_scheme(download) {
        return None;
    }
    let mut files = Vec::new();
    for f in v["files"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let download = f["download"].as_str()?;
        if !crate::net::url::has_web_scheme(download) {
            return None;
        }
        files.push(FileLink {
            download: download.to_owned(),
            filename: f["filename"].as_str().map(str::to_owned),
        });
    }
    Some(Resolved {
        size: v["size"].as_u64().filter(|n| *n > 0),
        download: download.to_owned(),
        filename: v["filename"].as_str().map(str::to_owned),
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_link_written_differently_has_one_key() {
        let same = [
            "https://Host.Example/File?x=1",
            "HTTPS://host.example:443/File?x=1",
            "https://host.example/File?x=1#part",
        ];
        for s in same {
            assert_eq!(normalise(s), "https://host.example/File?x=1", "{s}");
            assert_eq!(key(s), key(same[0]));
        }
        assert_eq!(normalise("http://h.example:80"), "http://h.example/");
        assert_ne!(key("https://h.example/File"), key("https://h.example/file"));
        assert_ne!(key("https://h.example:8443/f"), key("https://h.example/f"));
        assert!(key("https://h.example/f").starts_with("resolve:cache:"));
        // Among the keys no rule's template may make.
        assert!(crate::core::key::RESERVED_PREFIXES.contains(&"resolve:cache:"));
    }

    #[test]
    fn answers_round_trip_and_junk_is_no_answer() {
        let r = Resolved {
            size: None,
            download: "https://dl.example/f".into(),
            filename: Some("f.zip".into()),
            files: Vec::new(),
        };
        assert_eq!(decode(&encode(&r)), Some(r.clone()));
        let several = Resolved {
            size: Some(123_456_789),
            files: vec![
                FileLink {
                    download: r.download.clone(),
                    filename: r.filename.clone(),
                },
                FileLink {
                    download: "https://dl.example/g".into(),
                    filename: None,
                },
            ],
            ..r
        };
        assert_eq!(decode(&encode(&several)), Some(several));
        assert_eq!(
            decode(br#"{"download": "https://a.example/", "files": [{"download": "data:x"}]}"#),
            None
        );
        assert_eq!(decode(b"junk"), None);
        assert_eq!(decode(br#"{"download": "javascript:x"}"#), None);
    }
}
