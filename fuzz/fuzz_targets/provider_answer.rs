//! Fuzz target: a provider's answers, read by `HttpSpec::interpret` step by step as the HTTP
//! provider does (skipping `when` steps, polling on `Again`), then `HttpSpec::finish`, for every
//! preset.
//!
//! Input: byte 0 picks the preset (low 3 bits, modulo the number of presets) and the step to
//! start at (high 5 bits, modulo its number of steps). Then answers, each as a 2-byte status
//! (big-endian), a Retry-After byte (0: none, else seconds) and a 2-byte body length
//! (big-endian, cut to what is left), then the body.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use resolve::provider::described::ProviderSpec;
use resolve::provider::presets;
use resolve::provider::spec::{HttpSpec, StepOutcome};
use resolve::provider::{Failure, ProviderError};

const LINK: &str = "https://host.example/file/abc";

fn specs() -> &'static Vec<HttpSpec> {
    static SPECS: OnceLock<Vec<HttpSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        presets::NAMES
            .iter()
            .map(|name| {
                let section =
                    serde_json::json!({"preset": name, "token": "t", "base_url": "https://x"});
                match resolve::config::provider::parse(section) {
                    Ok((ProviderSpec::Http(spec), _)) => {
                        spec.spec().expect("a preset builds").clone()
                    }
                    other => panic!("preset {name} does not give an HTTP provider: {other:?}"),
                }
            })
            .collect()
    })
}

/// One answer cut from the input, or None when the input is used up.
fn next_answer<'a>(input: &mut &'a [u8]) -> Option<(u16, Option<u32>, &'a [u8])> {
    let (&[s1, s0, retry, l1, l0], rest) = input.split_first_chunk::<5>()?;
    let len = usize::from(u16::from_be_bytes([l1, l0])).min(rest.len());
    let (body, rest) = rest.split_at(len);
    *input = rest;
    let retry = (retry != 0).then_some(u32::from(retry));
    Some((u16::from_be_bytes([s1, s0]), retry, body))
}

/// Text that reaches the visitor or the log: cleaned by the provider module.
fn assert_clean(what: &str, text: &Option<String>) {
    if let Some(t) = text {
        assert!(!t.is_empty(), "{what} is empty rather than absent");
        assert!(t.chars().count() <= 200, "{what} is too long: {t:?}");
        assert!(
            !t.chars().any(char::is_control),
            "{what} has control characters: {t:?}"
        );
        assert_eq!(t.trim(), t, "{what} is not trimmed");
    }
}

fn check_error(spec: &HttpSpec, e: &ProviderError, status: u16, body: &[u8]) {
    assert!(
        e.reached,
        "an answer that arrived is not marked as reached: {e:?}"
    );
    assert_eq!(e.status, Some(status));
    assert!(!e.detail.is_empty());
    assert_clean("message", &e.message);
    assert_clean("code", &e.code);
    let json = serde_json::from_slice::<serde_json::Value>(body).is_ok();
    // What the status says; a known error code may say more, except about a broken answer.
    let by_status = match status {
        401 | 403 => None,
        429 => Some(Failure::RateLimited),
        300..=399 => Some(Failure::BadAnswer),
        200..=299 if !json => Some(Failure::BadAnswer),
        200..=499 => None,
        _ => Some(Failure::Unavailable),
    };
    // A known code, words of the message, or the provider's own meaning of the status.
    let classified = e
        .code
        .as_ref()
        .is_some_and(|c| spec.errors.iter().any(|(k, f)| k == c && *f == e.failure))
        || e.message.as_ref().is_some_and(|m| {
            let m = m.to_lowercase();
            spec.error_messages
                .iter()
                .any(|(w, f)| m.contains(w.as_str()) && *f == e.failure)
        })
        || spec
            .statuses
            .iter()
            .any(|(s, f)| *s == status && *f == e.failure);
    match by_status {
        Some(Failure::BadAnswer) => assert_eq!(e.failure, Failure::BadAnswer, "status {status}"),
        Some(f) => assert!(
            e.failure == f || classified,
            "status {status} gave {:?} without a known code: {e:?}",
            e.failure
        ),
        None => assert!(
            !matches!(e.failure, Failure::Timeout | Failure::Unreachable),
            "status {status} gave {:?}",
            e.failure
        ),
    }
}

fn is_web_url(s: &str) -> bool {
    let lower = s.get(..8).unwrap_or(s).to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && s.len() <= 8192
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, mut input)) = data.split_first() else {
        return;
    };
    let specs = specs();
    let spec = &specs[usize::from(pick & 7) % specs.len()];
    let first = usize::from(pick >> 3) % spec.steps.len();
    let mut vars = spec.start_vars(LINK);
    let mut files = Vec::new();
    'steps: for step in &spec.steps[first..] {
        if !step.runs(&vars) {
            continue;
        }
        loop {
            let Some((status, retry, body)) = next_answer(&mut input) else {
                break 'steps;
            };
            match spec.interpret(step, status, retry, body) {
                Ok(StepOutcome::Done(found, listed)) => {
                    assert!((200..=299).contains(&status), "status {status} succeeded");
                    for f in &listed {
                        assert!(is_web_url(&f.download), "file {:?}", f.download);
                    }
                    if !listed.is_empty() {
                        files = listed;
                    }
                    for (name, value) in &found {
                        assert!(
                            !value.is_empty() && value.len() <= 8192,
                            "{name} extracted as {value:?}"
                        );
                    }
                    vars.extend(found);
                    continue 'steps;
                }
                Ok(StepOutcome::Again(progress)) => {
                    if let Some(p) = &progress {
                        assert!(p.ends_with(" done") || p.ends_with(" s left"), "{p:?}");
                        assert!(p.len() <= 40, "{p:?}");
                    }
                    assert!(step.poll.is_some(), "Again from a step that does not poll");
                    assert!((200..=299).contains(&status), "status {status} polls again");
                }
                Err(e) => {
                    check_error(spec, &e, status, body);
                    return;
                }
            }
        }
    }
    let listed = files.first().map(|f| f.download.clone());
    match spec.finish(&vars, files) {
        Ok(r) => {
            assert!(is_web_url(&r.download), "download {:?}", r.download);
            assert_eq!(Some(&r.download), vars.get("download").or(listed.as_ref()));
            assert!(r.files.len() != 1, "one file is given as before");
        }
        Err(e) => {
            assert!(
                matches!(e.failure, Failure::BadAnswer | Failure::Rejected),
                "{e:?}"
            );
            assert!(!e.detail.is_empty());
        }
    }
});
