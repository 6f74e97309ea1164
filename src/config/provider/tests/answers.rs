//! Every preset's documented answers, read as the program reads them: each error the service
//! documents (and the odd answers it gives), as an HTTP status and a JSON body, and what it
//! comes to: the class of failure, the service's code, its wait, its words passed on, the
//! owner's advice. The preset's description is checked as the configuration checks it, then
//! its steps interpret the answers one call after another: no process, no network. (Here, in
//! the configuration's layer, because the preset becomes a description only through it.) Where
//! the answers' form comes from is written beside each preset's end-to-end test in
//! tests/providers.rs. One file per preset in `answers/`.

use serde_json::{Value, json};

use super::super::parse;
use crate::provider::described::ProviderSpec;
use crate::provider::resolved::Resolved;
use crate::provider::spec::{HttpSpec, StepOutcome};
use crate::provider::{Failure, ProviderError};

const LINK: &str = "https://hoster.example/file/case.zip";

/// A preset's description, with a token.
fn preset(name: &str) -> HttpSpec {
    match parse(json!({"preset": name, "token": "tok-answers"})) {
        Ok((ProviderSpec::Http(h), _)) => h.spec().expect("built").clone(),
        Ok((ProviderSpec::Echo, _)) => panic!("{name}: echo"),
        Err(e) => panic!("{name}: {e}"),
    }
}

/// One answer of the service.
#[derive(Clone)]
struct Answer {
    status: u16,
    retry_after: Option<u32>,
    body: Vec<u8>,
}

/// A JSON answer with this status.
fn reply(status: u16, v: Value) -> Answer {
    Answer {
        status,
        retry_after: None,
        body: v.to_string().into_bytes(),
    }
}

/// A JSON answer with status 200.
fn ok(v: Value) -> Answer {
    reply(200, v)
}

/// An answer that is not JSON.
fn raw(status: u16, text: &str) -> Answer {
    Answer {
        status,
        retry_after: None,
        body: text.as_bytes().to_vec(),
    }
}

impl Answer {
    /// With a Retry-After header of `secs`.
    fn wait(mut self, secs: u32) -> Answer {
        self.retry_after = Some(secs);
        self
    }
}

/// Runs the description's steps for [`LINK`] as `provider::http` does, each call answered by
/// the next of `answers`, which names the end of the URL it answers: the result, and the calls
/// made. Panics when a call has no answer left or goes elsewhere.
fn run(spec: &HttpSpec, answers: &[(&str, Answer)]) -> (Result<Resolved, ProviderError>, usize) {
    let mut vars = spec.start_vars(LINK);
    let mut files = Vec::new();
    let mut calls = 0;
    for (index, step) in spec.steps.iter().enumerate() {
        if index > 0 && !step.runs(&vars) {
            continue;
        }
        loop {
            let url = step.url.render(&vars).expect("the step's URL");
            let Some((to, a)) = answers.get(calls) else {
                panic!("call {} to {url} has no answer", calls + 1);
            };
            assert!(
                url.ends_with(to),
                "call {} went to {url}, not {to}",
                calls + 1
            );
            calls += 1;
            match spec.interpret(step, a.status, a.retry_after, &a.body) {
                Ok(StepOutcome::Done(found, list)) => {
                    vars.extend(found);
                    if !list.is_empty() {
                        files = list;
                    }
                    break;
                }
                Ok(StepOutcome::Again(_)) => {}
                Err(e) => return (Err(e), calls),
            }
        }
    }
    (spec.finish(&vars, files), calls)
}

/// One answer (or a few, of the same resolution) and what it must come to.
struct Case {
    what: &'static str,
    answers: Vec<(&'static str, Answer)>,
    failure: Failure,
    /// The service's code, which the owner's log shows.
    code: Option<&'static str>,
    /// The wait passed on (None: the class's own).
    retry_after: Option<u32>,
    /// Words of the service's message passed on to the visitor.
    message: Option<&'static str>,
    /// Words of the service's own fix in the owner's advice.
    advice: Option<&'static str>,
}

fn case(
    what: &'static str,
    (to, answer): (&'static str, Answer),
    failure: Failure,
    code: Option<&'static str>,
) -> Case {
    Case {
        what,
        answers: vec![(to, answer)],
        failure,
        code,
        retry_after: None,
        message: None,
        advice: None,
    }
}

impl Case {
    fn retry_after(mut self, secs: u32) -> Case {
        self.retry_after = Some(secs);
        self
    }

    fn message(mut self, words: &'static str) -> Case {
        self.message = Some(words);
        self
    }

    fn advice(mut self, words: &'static str) -> Case {
        self.advice = Some(words);
        self
    }

    /// An earlier call of the same resolution answered first.
    fn after(mut self, to: &'static str, answer: Answer) -> Case {
        self.answers.insert(0, (to, answer));
        self
    }

    /// What is wrong with the result, if anything.
    fn problems(&self, result: &Result<Resolved, ProviderError>, calls: usize) -> Vec<String> {
        let e = match result {
            Ok(r) => return vec![format!("resolved to {}", r.download)],
            Err(e) => e,
        };
        let mut bad = Vec::new();
        let mut want = |what: &str, got: String, wanted: String| {
            if got != wanted {
                bad.push(format!("{what} {got} (want {wanted})"));
            }
        };
        want(
            "class",
            format!("{:?}", e.failure),
            format!("{:?}", self.failure),
        );
        want("calls", calls.to_string(), self.answers.len().to_string());
        let last = &self.answers[self.answers.len() - 1].1;
        want(
            "status",
            format!("{:?}", e.status),
            format!("{:?}", Some(last.status)),
        );
        want(
            "retry_after",
            format!("{:?}", e.retry_after),
            format!("{:?}", self.retry_after),
        );
        if let Some(code) = self.code {
            want("code", format!("{:?}", e.code), format!("{:?}", Some(code)));
        }
        if let Some(m) = self.message
            && !e.message.as_deref().is_some_and(|said| said.contains(m))
        {
            bad.push(format!("message {:?} does not pass on {m:?}", e.message));
        }
        if let Some(fix) = self.advice
            && !e.advice.as_deref().is_some_and(|a| a.contains(fix))
        {
            bad.push(format!(
                "advice {:?} does not give the fix {fix:?}",
                e.advice
            ));
        }
        if !e.reached {
            bad.push("not reached, though answered".into());
        }
        if format!("{e}").contains("tok-answers") {
            bad.push("the token is in the error".into());
        }
        bad
    }
}

/// Runs every case against the preset; reports every mismatch at once.
fn table(name: &str, cases: &[Case]) {
    let spec = preset(name);
    let mut problems = Vec::new();
    for c in cases {
        let (result, calls) = run(&spec, &c.answers);
        let bad = c.problems(&result, calls);
        if !bad.is_empty() {
            problems.push(format!("{name} / {}: {}", c.what, bad.join("; ")));
        }
    }
    assert!(
        problems.is_empty(),
        "{} of {} {name} cases read wrongly:\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n")
    );
}

/// The download and file name `answers` resolve to.
fn resolves(name: &str, answers: &[(&str, Answer)]) -> (String, Option<String>) {
    let (download, filename, _) = resolves_sized(name, answers);
    (download, filename)
}

/// [`resolves`], and the file's size the answer gave.
fn resolves_sized(name: &str, answers: &[(&str, Answer)]) -> (String, Option<String>, Option<u64>) {
    let (result, calls) = run(&preset(name), answers);
    let r = result.unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(calls, answers.len(), "{name}");
    (r.download, r.filename, r.size)
}

mod alldebrid;
mod debridlink;
mod premiumize;
mod realdebrid;
mod torbox;

/// Each preset's account call, and the facts it reads from an answer of the form its
/// documentation (or, where marked in docs/providers.md, its clients) gives.
#[test]
fn the_presets_read_their_accounts() {
    // 2026-12-05T08:00:00Z.
    const NOW: u64 = 1_796_457_600_000;
    let cases = [
        (
            "realdebrid",
            "https://api.real-debrid.com/rest/1.0/user",
            json!({"id": 1, "username": "u", "type": "premium", "premium": 86_400,
                   "expiration": "2026-12-11T08:00:00.000Z"}),
            (Some(true), Some("2026-12-11T08:00:00Z"), None, 0),
        ),
        (
            "alldebrid",
            "https://api.alldebrid.com/v4/user",
            json!({"status": "success", "data": {"user": {"username": "u", "isPremium": true,
                   "isSubscribed": false, "premiumUntil": 1_796_976_000,
                   "limitedHostersQuotas": {"ddownload": 50, "uptobox": 1000}}}}),
            (Some(true), Some("2026-12-11T08:00:00Z"), None, 2),
        ),
        (
            "premiumize",
            "https://www.premiumize.me/api/account/info",
            json!({"status": "success", "customer_id": "1", "premium_until": 1_796_976_000,
                   "limit_used": 0.25, "space_used": 0}),
            (None, Some("2026-12-11T08:00:00Z"), Some(0.25), 0),
        ),
        (
            "torbox",
            "https://api.torbox.app/v1/api/user/me",
            json!({"success": true, "error": null, "detail": "", "data": {"id": 1, "plan": 2,
                   "is_subscribed": true, "premium_expires_at": "2026-12-11T08:00:00Z"}}),
            (None, Some("2026-12-11T08:00:00Z"), None, 0),
        ),
        (
            "debridlink",
            "https://debrid-link.com/api/v2/account/infos",
            json!({"success": true, "value": {"username": "u", "accountType": 1,
                   "premiumLeft": 518_400, "registerDate": 1_700_000_000}}),
            (None, Some("2026-12-11T08:00:00Z"), None, 0),
        ),
    ];
    for (name, url, answer, (premium, until, fair_use, quotas)) in cases {
        let spec = preset(name);
        let call = spec
            .account
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no account"));
        let vars = spec.start_vars("");
        let rendered = crate::provider::spec::Template(call.url.clone()).render(&vars);
        assert_eq!(rendered.as_deref(), Ok(url), "{name}");
        assert_eq!(
            call.headers,
            [("Authorization".to_owned(), "Bearer {token}".to_owned())]
        );
        assert!(
            call.success.as_ref().is_none_or(|t| t.holds(&answer)),
            "{name}"
        );
        let facts = call
            .facts(&answer, NOW)
            .unwrap_or_else(|| panic!("{name}: no facts"));
        assert_eq!(facts.premium, premium, "{name}");
        assert_eq!(
            facts
                .premium_until_ms
                .map(crate::core::calendar::iso)
                .as_deref(),
            until,
            "{name}"
        );
        assert_eq!(facts.fair_use_used, fair_use, "{name}");
        assert_eq!(facts.host_quotas.len(), quotas, "{name}");
    }
    // An answer that is not a success reads no facts (Debrid-Link's errors are
    // `{"success": false, "error": "badToken"}`).
    let debridlink = preset("debridlink");
    let call = debridlink.account.as_ref().unwrap();
    let refused = json!({"success": false, "error": "badToken"});
    assert!(!call.success.as_ref().unwrap().holds(&refused));
}
