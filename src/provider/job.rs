//! A long job: work the provider was paid to start and is still doing when a request's time
//! is up. It is kept in the store under the link's key, so that asking again (any visitor, the
//! same link) polls the same job instead of paying for a new one. It holds what the next poll
//! needs, never the token.

use std::collections::BTreeMap;

/// The values a provider call works with (as `provider::spec::Vars`).
type Vars = BTreeMap<String, String>;

/// Values a job never keeps: the token and what the configuration gives again.
const NOT_KEPT: [&str; 3] = ["token", "base", "link"];

/// Work under way at the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The step (from 0) that polls it.
    pub step: usize,
    /// Values extracted so far (no token).
    pub vars: Vars,
    /// The provider's last word on its progress, in words.
    pub progress: Option<String>,
    /// How long to wait between polls, in seconds.
    pub poll_secs: u32,
    /// When the paid call was counted (the admission's time, for a refund).
    pub paid_at_ms: u64,
    /// When the provider was last asked.
    pub polled_at_ms: u64,
    /// Which of several services runs it (0, the first, with one): polled there.
    pub service: usize,
}

impl Job {
    /// A job of `step` with the values so far (the token and configuration values left out).
    pub fn new(step: usize, vars: &Vars, progress: Option<String>, poll_secs: u32) -> Job {
        Job {
            step,
            vars: vars
                .iter()
                .filter(|(k, _)| !NOT_KEPT.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            progress,
            poll_secs: poll_secs.max(1),
            paid_at_ms: 0,
            polled_at_ms: 0,
            service: 0,
        }
    }

    /// The store key of a link's job: beside its cached answer, never equal to one.
    pub fn key(link: &str) -> String {
        crate::core::key::Reserved::Job(&crate::provider::cache::digest(link))
            .key()
            .into_owned()
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::json!({
            "step": self.step, "vars": self.vars, "progress": self.progress,
            "poll_secs": self.poll_secs, "paid_at_ms": self.paid_at_ms,
            "polled_at_ms": self.polled_at_ms, "service": self.service,
        })
        .to_string()
        .into_bytes()
    }

    /// A stored job, if it is one.
    pub fn decode(bytes: &[u8]) -> Option<Job> {
        let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let vars: BTreeMap<String, String> = serde_json::from_value(v["vars"].clone()).ok()?;
        Some(Job {
            step: usize::try_from(v["step"].as_u64()?).ok()?,
            vars,
            progress: v["progress"].as_str().map(str::to_owned),
            poll_secs: u32::try_from(v["poll_secs"].as_u64()?).ok()?.max(1),
            paid_at_ms: v["paid_at_ms"].as_u64()?,
            polled_at_ms: v["polled_at_ms"].as_u64()?,
            // A job kept before services were numbered ran at the first.
            service: v.get("service").map_or(Some(0), |s| {
                s.as_u64().and_then(|s| usize::try_from(s).ok())
            })?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_round_trips_without_the_token() {
        let vars: Vars = [
            ("token", "s3cret"),
            ("link", "L"),
            ("base", "B"),
            ("id", "42"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
        let mut job = Job::new(1, &vars, Some("40% done".into()), 0);
        job.paid_at_ms = 7;
        job.polled_at_ms = 9;
        job.service = 2;
        let bytes = job.encode();
        assert!(!String::from_utf8_lossy(&bytes).contains("s3cret"));
        let back = Job::decode(&bytes).unwrap();
        assert_eq!(back, job);
        assert_eq!(back.vars.len(), 1);
        assert_eq!(back.poll_secs, 1);
        assert_eq!(Job::decode(b"junk"), None);
        let older = br#"{"step":1,"vars":{},"poll_secs":5,"paid_at_ms":1,"polled_at_ms":2}"#;
        assert_eq!(Job::decode(older).map(|j| j.service), Some(0));
        let key = Job::key("https://h.example/f");
        assert!(key.starts_with("resolve:cache:job:"), "{key}");
        assert_ne!(key, crate::provider::cache::key("https://h.example/f"));
    }
}
