//! Provider presets, spend protection and the result cache, against a scripted stand-in of each provider's API: every paid call is counted by the stand-in, and those counts are the figures.

mod support;

use std::io;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::config::{self, TOKEN};
use support::site::SiteBuilder;
use support::system::{command, output_text};
use support::urlenc::link_param;
use support::{
    Call, Cgi, CgiOutput, HttpClient, Provider, Reply, Request, Response, Setup, Site, fire,
    free_port,
};

/// What the visitor reads when the owner's provider account is the problem.
const GENERIC: &str = "The download service is not available right now. Please try again later.";

// Each API's paths on the stand-in: the presets' base URLs with the host replaced.
const RD_BASE: &str = "/rest/1.0";
const RD_CALL: &str = "/rest/1.0/unrestrict/link";
// AllDebrid's base is the API's root: its calls name their version, v4.1 where there is one.
const AD_BASE: &str = "";
const AD_UNLOCK: &str = "/v4.1/link/unlock";
const AD_DELAYED: &str = "/v4.1/link/delayed";
const AD_STREAMING: &str = "/v4/link/streaming";
const PM_BASE: &str = "/api";
const PM_CALL: &str = "/api/transfer/directdl";
const DL_BASE: &str = "/api/v2";
const DL_CALL: &str = "/api/v2/downloader/add";
const TB_BASE: &str = "/v1/api";
const TB_CREATE: &str = "/v1/api/webdl/createwebdownload";
const TB_LIST: &str = "/v1/api/webdl/mylist";
const TB_REQUEST: &str = "/v1/api/webdl/requestdl";

const POST: &str = "POST";
const GET: &str = "GET";

/// The `provider` section for preset `name`, pointed at the stand-in. Without the host list,
/// the link check and the account's reading, so that each test's calls are its own;
/// `host_list_*`, `link_check_*` and tests/account.rs test them.
fn preset(name: &str, api: &Provider, base: &str) -> Value {
    json!({"preset": name, "token": TOKEN, "base_url": api.url(base), "hosts": null, "link_check": null,
           "account": null})
}

/// `v` with the top-level fields of `extra` set.
fn merged(mut v: Value, extra: Value) -> Value {
    config::merge(&mut v, extra);
    v
}

fn spend(limit: u64) -> Value {
    json!({"spend": [{"name": "day", "limit": limit, "window_secs": 86400}]})
}

/// A stand-in for a provider's API: only the routes it is given answer.
fn api_stand_in() -> Provider {
    Provider::builder().routes_only().start()
}

/// A site for preset `name` whose API (at `base`) is a fresh stand-in, a file store, a generous
/// client rule and the top-level fields of `extra`. `.write()` for direct runs, `.start()` under
/// Apache.
fn preset_site(label: &str, name: &'static str, base: &'static str, extra: Value) -> SiteBuilder {
    Site::builder(label)
        .provider(api_stand_in())
        .provider_section(move |api| preset(name, api, base))
        .config(move |cfg| config::merge(cfg, extra))
}

/// Adds `fields` to the site's provider section.
fn provider_fields(builder: SiteBuilder, fields: Value) -> SiteBuilder {
    builder.config(move |cfg| config::merge(&mut cfg["provider"], fields))
}

/// A Real-Debrid answer for `f.bin`.
fn f_bin() -> Reply {
    Reply::ok(json!({"download": "https://dl.example/d/f.bin", "filename": "f.bin"}))
}

/// The paid call carried the token in the Authorization header, `link` in form field `field`
/// and no token in its query.
fn assert_paid_call(call: &Call, field: &str, link: &str) {
    assert_eq!(call.header("Authorization"), Some(bearer().as_str()));
    assert_eq!(call.form(field), Some(link), "{}", call.everything());
    assert!(!call.raw_query.contains(TOKEN), "{}", call.everything());
}

/// Requests to the binary run directly as a CGI program.
trait Ask {
    fn request(&self, method: &str, link: &str, from: &str) -> CgiOutput;

    fn get(&self, link: &str) -> CgiOutput {
        self.request(GET, link, "127.0.0.1")
    }
}

impl Ask for Setup {
    fn request(&self, method: &str, link: &str, from: &str) -> CgiOutput {
        self.run(
            Cgi::new(method, link_param(link))
                .var("REMOTE_ADDR", from)
                .header("Accept", "application/json"),
        )
    }
}

/// Status and JSON body of a CGI answer.
fn status_body(out: &CgiOutput) -> (u16, Value) {
    let a = out.answer();
    let body = serde_json::from_slice(&a.body).unwrap_or_else(|e| {
        panic!("body is not JSON ({e})\n{}", out.describe());
    });
    (a.status, body)
}

/// Checks a 504 `provider_timeout` that came within a second of the deadline.
fn assert_timed_out(out: &CgiOutput, deadline_ms: u64) {
    let (status, body) = status_body(out);
    assert_eq!(
        (status, body["code"].as_str()),
        (504, Some("provider_timeout")),
        "{}",
        out.describe()
    );
    // The program's own time (its Server-Timing); the process's whole run only has a backstop.
    let bound = Duration::from_millis(deadline_ms + 1000);
    let spent = out.answer().program_took();
    assert!(
        spent < bound && out.elapsed < support::timing::backstop(bound),
        "{spent:?} in the program, {:?} in all",
        out.elapsed
    );
}

/// Checks a 200 JSON answer and returns its body.
fn expect_ok(out: &CgiOutput) -> Value {
    let (status, body) = status_body(out);
    assert_eq!(status, 200, "{}", out.describe());
    assert_eq!(
        out.answer().header("Content-Type"),
        Some("application/json")
    );
    assert!(!out.describe().contains(TOKEN), "{}", out.describe());
    body
}

/// One provider failure through the binary, and what the visitor and the owner must get. Every
/// documented answer of each preset is read in the unit tests (`config/provider/tests/
/// answers.rs`); here one per preset goes through the whole program.
struct Case {
    what: &'static str,
    /// The reply scripted before the request: method, path, reply.
    script: (&'static str, &'static str, Reply),
    status: u16,
    code: &'static str,
    /// The visitor's exact sentence.
    detail: &'static str,
    /// The Retry-After the visitor must get (None: no header).
    retry_after: Option<u32>,
    /// Words the owner's `ACTION NEEDED` line must hold (None: no such line).
    action: Option<&'static str>,
    /// The provider's error code, which the owner's log must show.
    provider_code: Option<&'static str>,
}

impl Case {
    /// What is wrong with this answer, if anything.
    fn problems(&self, out: &CgiOutput) -> Vec<String> {
        let answer = match &out.answer {
            Ok(a) => a,
            Err(e) => return vec![format!("not a CGI answer: {e}")],
        };
        let mut bad = Vec::new();
        let body: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        let log = &out.stderr;
        if answer.status != self.status {
            bad.push(format!("status {} (want {})", answer.status, self.status));
        }
        if body["status"] != answer.status {
            bad.push(format!("body status {}", body["status"]));
        }
        if body["code"] != self.code {
            bad.push(format!("code {} (want {})", body["code"], self.code));
        }
        let detail = body["detail"].as_str().unwrap_or_default();
        if detail != self.detail {
            bad.push(format!("detail {detail:?} (want {:?})", self.detail));
        }
        let retry_after = answer.header("Retry-After").map(str::to_owned);
        let want = self.retry_after.map(|s| s.to_string());
        if retry_after != want {
            bad.push(format!("Retry-After {retry_after:?} (want {want:?})"));
        }
        let action = log.contains("ACTION NEEDED");
        if action != self.action.is_some() {
            bad.push(format!(
                "\"ACTION NEEDED\" in the log: {action} (want {})",
                self.action.is_some()
            ));
        }
        if let Some(cause) = self.action
            && !log
                .lines()
                .any(|l| l.contains("ACTION NEEDED: ") && l.contains(cause))
        {
            bad.push(format!("the owner's line does not say {cause:?}"));
        }
        if let Some(code) = self.provider_code {
            if !log.contains(&format!("code={code}")) {
                bad.push(format!("the log does not name the provider's code {code}"));
            }
            if self.action.is_some() && detail.contains(code) {
                bad.push(format!("the visitor sees the owner's problem ({code})"));
            }
        }
        if out.describe().contains(TOKEN) {
            bad.push("the token appears in the answer or the log".into());
        }
        bad
    }

    /// Runs the case against a fresh store and stand-in, one paid call.
    fn run(&self, name: &'static str, base: &'static str) {
        let site = preset_site(&format!("{name}-error"), name, base, json!({})).write();
        let api = &site.provider;
        let (method, path, reply) = &self.script;
        api.script(method, path, [reply.clone()]);
        let out = site.get(&format!("https://hoster.example/{name}/error.zip"));
        let mut bad = self.problems(&out);
        if api.calls() != 1 {
            bad.push(format!("{} provider calls (want 1)", api.calls()));
        }
        assert!(
            bad.is_empty(),
            "{name} / {}: {}\n{}",
            self.what,
            bad.join("; "),
            out.describe()
        );
    }
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

// ---------------------------------------------------------------------------------------------
// Real-Debrid: one call, errors as HTTP 4xx/5xx with `error_code`.
//
// Code 37 `disabled_endpoint` (403), not found in the documentation, as clients report
// it: https://github.com/g0ldyy/comet/issues/243.
//
// Where the answers' form comes from: https://api.real-debrid.com/ ("Errors are returned with
// HTTP code 4XX or 5XX, a JSON object with properties "error" (an error message) and
// "error_code" (optional, an integer)"; its "Error codes" table for the numbers and their
// meanings; POST /unrestrict/link for the `remote` parameter, "0 or 1, use Remote traffic,
// dedicated servers and account sharing protections lifted"; the 250 requests per minute,
// "all refused requests will return HTTP 429 error and will count in the limit"). The `error`
// strings are the ones the service sends (e.g. `hoster_not_free`), as long-lived clients
// match them.

fn rd_error(status: u16, error: &str, code: i32) -> Reply {
    Reply::json(status, json!({"error": error, "error_code": code}))
}

#[test]
fn realdebrid_resolves_and_maps_an_error() {
    let site = preset_site("rd-ok", "realdebrid", RD_BASE, json!({})).write();
    let api = &site.provider;
    let link = "https://hoster.example/file/rd-1.mkv";
    let download = "https://abc12.download.real-debrid.com/d/ABCDEF123/movie.mkv";
    api.route(
        POST,
        RD_CALL,
        Reply::ok(json!({
            "id": "ABCDEF123", "filename": "movie.mkv", "mimeType": "video/x-matroska",
            "filesize": 1_234_567_890u64, "link": link, "host": "hoster.example", "chunks": 16,
            "crc": 1, "download": download, "streamable": 1
        })),
    );
    let body = expect_ok(&site.get(link));
    assert_eq!(body, json!({"download": download, "filename": "movie.mkv"}));
    assert_eq!(api.calls(), 1);
    assert_paid_call(&api.requests_to(POST, RD_CALL)[0], "link", link);
    assert_eq!(
        api.requests_to(POST, RD_CALL)[0].form("remote"),
        None,
        "remote traffic only when the owner asks for it"
    );

    // Every documented answer is read in the unit tests; through the binary, one: a code that
    // says more than the HTTP status, with the class's own wait.
    Case {
        what: "hoster unavailable (503, 19)",
        script: (POST, RD_CALL, rd_error(503, "hoster_unavailable", 19)),
        status: 503,
        code: "host_unavailable",
        detail: "The file host is unavailable for now. Please try again later.",
        retry_after: Some(300),
        action: None,
        provider_code: Some("19"),
    }
    .run("realdebrid", RD_BASE);

    // Code 37, an endpoint Real-Debrid disabled: the owner's to fix by upgrading.
    Case {
        what: "37 disabled_endpoint",
        script: (POST, RD_CALL, rd_error(403, "disabled_endpoint", 37)),
        status: 502,
        code: "provider_unavailable",
        detail: GENERIC,
        retry_after: None,
        action: Some("retired an endpoint this version of resolve uses"),
        provider_code: Some("37"),
    }
    .run("realdebrid", RD_BASE);
}

#[test]
fn realdebrid_remote_option_sends_remote_1_and_the_refusal_names_it() {
    // Without the option, code 22 tells the owner which option lifts it.
    let site = preset_site("rd-remote", "realdebrid", RD_BASE, json!({})).write();
    let api = &site.provider;
    api.script(POST, RD_CALL, [rd_error(403, "ip_not_allowed", 22)]);
    let out = site.get("https://hoster.example/remote/1.bin");
    let (status, body) = status_body(&out);
    assert_eq!((status, body["detail"].as_str()), (502, Some(GENERIC)));
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("ACTION NEEDED"))
        .unwrap_or_else(|| panic!("no ACTION NEEDED line:\n{}", out.stderr));
    assert!(line.contains("this server's address"), "{line}");
    assert!(line.contains("\"remote\": true"), "{line}");
    assert!(
        !line.contains("check provider.token"),
        "the token is not at fault: {line}"
    );
    assert!(line.contains("class=server_refused"), "{line}");

    // With it, every paid call carries remote=1 beside the link.
    site.edit_config(|cfg| cfg["provider"]["remote"] = json!(true));
    api.route(POST, RD_CALL, f_bin());
    let link = "https://hoster.example/remote/2.bin";
    expect_ok(&site.get(link));
    let call = api.requests_to(POST, RD_CALL).pop().unwrap();
    assert_paid_call(&call, "link", link);
    assert_eq!(call.form("remote"), Some("1"), "{}", call.everything());
    assert_eq!(api.calls(), 2);

    // A preset without a remote mode says so at start-up.
    let (ok, text) = check(&["check", "--config", site.config_path.to_str().unwrap()]);
    assert!(ok, "{text}");
    site.edit_config(|cfg| {
        cfg["provider"] = merged(preset("torbox", api, TB_BASE), json!({"remote": true}))
    });
    let (ok, text) = check(&["check", "--config", site.config_path.to_str().unwrap()]);
    assert!(!ok && text.contains("provider.remote"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// AllDebrid v4 and v4.1: errors inside HTTP 200; some hosts answer "delayed".
//
// Where the answers' form comes from: https://docs.alldebrid.com/ ("Response format":
// `{"status": "error", "error": {"code", "message"}}`; "Rate limiting": "12 requests per second
// and 600 requests per minute. Any request in excess of those limits will return a 429 or 503
// errors"; "Unlocking links", "Streaming links" and "Delayed links" for the success answers;
// "All errors" for the codes and messages, NO_SERVER among them; the changelog of 15/01/2025,
// "Removed agent and version requirements", for the `agent` parameter and its
// AUTH_MISSING_AGENT / AUTH_BAD_AGENT errors of before; "Response format" for the `404`
// "Endpoint doesn't exist" of an endpoint it does not have). DISCONTINUED's form, the answer of a
// v4 endpoint that has a v4.1 form since December 2025, as clients report it:
// https://github.com/Gujal00/ResolveURL/issues/1330.

fn ad_error(code: &str, message: &str) -> Reply {
    Reply::ok(json!({"status": "error", "error": {"code": code, "message": message}}))
}

#[test]
fn alldebrid_resolves_and_maps_an_error() {
    let site = preset_site("ad-ok", "alldebrid", AD_BASE, json!({})).write();
    let api = &site.provider;
    let link = "https://hoster.example/file/ad-1.zip";
    let download = "https://a1b2c3.debrid.it/dl/2f3e4d/archive.zip";
    api.route(
        POST,
        AD_UNLOCK,
        Reply::ok(json!({"status": "success", "data": {
            "link": download, "host": "hoster", "filename": "archive.zip", "streams": [],
            "paws": false, "filesize": 52_428_800, "id": "2f3e4d", "hostDomain": "hoster.example"
        }})),
    );
    let body = expect_ok(&site.get(link));
    assert_eq!(
        body,
        json!({"download": download, "filename": "archive.zip"})
    );
    assert_eq!((api.calls(), api.calls_to(POST, AD_DELAYED)), (1, 0));
    let call = &api.requests_to(POST, AD_UNLOCK)[0];
    assert_paid_call(call, "link", link);
    assert_eq!(call.form("agent"), Some("resolve"), "{}", call.everything());

    // Every documented answer is read in the unit tests; through the binary, one error inside
    // HTTP 200.
    Case {
        what: "LINK_PASS_PROTECTED",
        script: (
            POST,
            AD_UNLOCK,
            ad_error("LINK_PASS_PROTECTED", "Link is password protected"),
        ),
        status: 422,
        code: "password_required",
        detail: "This file is protected by a password.",
        retry_after: None,
        action: None,
        provider_code: Some("LINK_PASS_PROTECTED"),
    }
    .run("alldebrid", AD_BASE);

    // An endpoint the service retired (`DISCONTINUED`, as v4 endpoints with a v4.1 form answer
    // since December 2025) is the owner's to fix, never the visitor's link.
    Case {
        what: "DISCONTINUED",
        script: (
            POST,
            AD_UNLOCK,
            Reply::ok(json!({"status": "error", "error": {"code": "DISCONTINUED",
                "message": "This API endpoint has been discontinued, please migrate to newest API. See https://docs.alldebrid.com"},
                "deprecated": true})),
        ),
        status: 502,
        code: "provider_unavailable",
        detail: GENERIC,
        retry_after: None,
        action: Some("upgrade resolve"),
        provider_code: Some("DISCONTINUED"),
    }
    .run("alldebrid", AD_BASE);

    // "Too many requests" as HTTP 503 with the catch-all GENERIC: busy, not unavailable.
    Case {
        what: "HTTP 503 with GENERIC",
        script: (
            POST,
            AD_UNLOCK,
            Reply::json(
                503,
                json!({"status": "error", "error": {"code": "GENERIC", "message": "An orror occured"}}),
            ),
        ),
        status: 503,
        code: "provider_busy",
        detail: "The download service is busy. Please try again shortly.",
        retry_after: Some(60),
        action: None,
        provider_code: Some("GENERIC"),
    }
    .run("alldebrid", AD_BASE);
}

#[test]
fn alldebrid_delayed_link_is_polled_until_ready() {
    let site = preset_site("ad-delayed", "alldebrid", AD_BASE, json!({})).write();
    let api = &site.provider;
    let link = "https://hoster.example/file/big.iso";
    let download = "https://a1b2c3.debrid.it/dl/987654/big.iso";
    api.script(
        POST,
        AD_UNLOCK,
        [Reply::ok(json!({"status": "success", "data": {
            "link": "", "host": "hoster", "filename": "big.iso", "filesize": 4_700_000_000u64,
            "delayed": 987_654
        }}))],
    );
    api.script(
        POST,
        AD_DELAYED,
        [
            Reply::ok(json!({"status": "success", "data": {"status": 1, "time_left": 5, "link": ""}})),
            Reply::ok(json!({"status": "success", "data": {"status": 2, "time_left": 0, "link": download}})),
        ],
    );
    let out = site.get(link);
    let took = out.answer().program_took();
    let body = expect_ok(&out);
    assert_eq!(body, json!({"download": download, "filename": "big.iso"}));
    assert_eq!(
        api.sequence(),
        [
            format!("POST {AD_UNLOCK}"),
            format!("POST {AD_DELAYED}"),
            format!("POST {AD_DELAYED}")
        ]
    );
    let polls = api.requests_to(POST, AD_DELAYED);
    for p in &polls {
        assert_eq!(p.form("id"), Some("987654"), "{}", p.everything());
        assert_eq!(p.form("agent"), Some("resolve"), "{}", p.everything());
        assert_eq!(p.header("Authorization"), Some(bearer().as_str()));
    }
    let gap = polls[1].at - polls[0].at;
    assert!(gap >= Duration::from_millis(4900), "polled after {gap:?}");
    assert!(took < Duration::from_secs(9), "{took:?}");
    eprintln!(
        "alldebrid delayed: 3 calls (unlock + 2 polls {} ms apart), answered in {} ms",
        gap.as_millis(),
        took.as_millis()
    );
}

/// A streaming host's answer, as docs.alldebrid.com's "Streaming links" shows it: no link, a
/// generation id and the qualities; the chosen one is asked of `link/streaming`.
#[test]
fn alldebrid_streaming_answer_gives_the_best_stream() {
    let site = preset_site("ad-stream", "alldebrid", AD_BASE, json!({})).write();
    let api = &site.provider;
    let link = "https://www.dailymotion.com/video/x8pnn16";
    let download = "https://p1cjev.alldeb.ovh/dl/1nsjw3315ad/Never%20Gonna.1080.mp4";
    api.script(
        POST,
        AD_UNLOCK,
        [Reply::ok(json!({"status": "success", "data": {
            "link": "", "host": "stream", "filename": "Never Gonna Give You Up", "filesize": 0,
            "id": "1nsjw3315ad",
            "streams": [
                {"id": "140", "ext": "mp3", "quality": "mp3", "filesize": 3_433_538, "proto": "https", "name": ""},
                {"id": "137+140", "ext": "mp4", "quality": 1080, "filesize": 75_910_363, "proto": "https", "name": ""},
                {"id": "398+140", "ext": "mp4", "quality": 720, "filesize": 32_752_789, "proto": "https", "name": ""}
            ]
        }}))],
    );
    api.script(
        POST,
        AD_STREAMING,
        [Reply::ok(json!({"status": "success", "data": {
            "link": download, "filename": "Never Gonna Give You Up.1080.mp4", "filesize": 75_910_363
        }}))],
    );
    let body = expect_ok(&site.get(link));
    assert_eq!(
        body,
        json!({"download": download, "filename": "Never Gonna Give You Up.1080.mp4"})
    );
    assert_eq!(
        api.sequence(),
        [format!("POST {AD_UNLOCK}"), format!("POST {AD_STREAMING}")]
    );
    let choose = &api.requests_to(POST, AD_STREAMING)[0];
    assert_eq!(
        (
            choose.form("id"),
            choose.form("stream"),
            choose.form("agent")
        ),
        (Some("1nsjw3315ad"), Some("137+140"), Some("resolve")),
        "the greatest quality: {}",
        choose.everything()
    );
    assert_eq!(choose.header("Authorization"), Some(bearer().as_str()));

    // A stream that needs time: link/streaming answers "delayed", which is polled.
    api.reset();
    api.script(
        POST,
        AD_UNLOCK,
        [Reply::ok(json!({"status": "success", "data": {
            "link": "", "id": "gen2", "streams": [{"id": "22", "quality": 720}]
        }}))],
    );
    api.script(
        POST,
        AD_STREAMING,
        [Reply::ok(json!({"status": "success", "data": {"filename": "s.mp4", "filesize": 1, "delayed": 2_277_564}}))],
    );
    api.script(
        POST,
        AD_DELAYED,
        [Reply::ok(
            json!({"status": "success", "data": {"status": 2, "time_left": 0, "link": download}}),
        )],
    );
    let body = expect_ok(&site.get("https://www.dailymotion.com/video/other"));
    assert_eq!(body["download"], download);
    assert_eq!(
        api.requests_to(POST, AD_DELAYED)[0].form("id"),
        Some("2277564")
    );
    assert_eq!(api.calls(), 3);
}

// ---------------------------------------------------------------------------------------------
// Premiumize.me: errors inside HTTP 200 (`status` "error", `message`), mostly without codes.
//
// Where the answers' form comes from: https://www.premiumize.me/api (Bearer API key found
// under Account; POST /transfer/directdl with `src`, answered `{"status": "success",
// "content": [{"path", "size", "link", ...}]}`) and the error envelope `{"status": "error",
// "message": TEXT}` its API pages show (https://www.premiumize.me/static/api/torrent.html:
// "Not logged in. Please log in first."). `topup_required` and "Fair use limit reached!" are
// the forms long-lived clients match; the documentation lists no error codes.

#[test]
fn premiumize_resolves_and_maps_an_error() {
    let site = preset_site("pm-ok", "premiumize", PM_BASE, json!({})).write();
    let api = &site.provider;
    let link = "https://hoster.example/file/pm-1.rar";
    let download = "https://sasha.premiumize.me/dl/9a8b7c/pm-1.rar";
    api.script(
        POST,
        PM_CALL,
        [
            Reply::ok(json!({"status": "success", "content": [{
                "path": "pm-1.rar", "size": 734_003_200, "link": download,
                "stream_link": null, "transcode_status": "not_applicable"
            }]})),
            // The older shape.
            Reply::ok(json!({"status": "success", "location": download, "filename": "pm-1.rar", "filesize": 734_003_200})),
        ],
    );
    for shape in ["content", "location"] {
        let body = expect_ok(&site.get(link));
        assert_eq!(
            body,
            json!({"download": download, "filename": "pm-1.rar"}),
            "{shape}"
        );
    }
    assert_eq!(api.calls(), 2);
    for call in api.requests_to(POST, PM_CALL) {
        assert_paid_call(&call, "src", link);
        assert_eq!(call.form("link"), None);
    }

    // Every documented answer is read in the unit tests; through the binary, one the owner
    // must act on.
    Case {
        what: "topup_required inside 200",
        script: (
            POST,
            PM_CALL,
            Reply::ok(
                json!({"status": "error", "error": "topup_required", "message": "Please top up your account."}),
            ),
        ),
        status: 502,
        code: "provider_unavailable",
        detail: GENERIC,
        retry_after: None,
        action: Some("plan does not cover this"),
        provider_code: Some("topup_required"),
    }
    .run("premiumize", PM_BASE);
}

// ---------------------------------------------------------------------------------------------
// Debrid-Link v2: errors inside HTTP 200 (`success` false, `error` code).
//
// Where the answers' form comes from: https://debrid-link.com/api_doc/v2/errors (the error
// keys and their descriptions, e.g. serverNotAllowed "Server / VPN are not allowed by default.
// The user must contact us", disabledServerHost "Server / VPN are not allowed on this host",
// floodDetected "API rate limit reached for the endpoint, retry after 1 hour"), and the
// envelope `{"success": false, "error": KEY, "error_description": TEXT}` of the same
// documentation, as long-lived clients (JDownloader's DebridLinkFr) read it.

fn dl_error(code: &str) -> Reply {
    Reply::ok(json!({"success": false, "error": code, "error_description": "as the API says"}))
}

#[test]
fn debridlink_resolves_and_maps_an_error() {
    let site = preset_site("dl-ok", "debridlink", DL_BASE, json!({})).write();
    let api = &site.provider;
    let link = "https://hoster.example/file/dl-1.mp4";
    let download = "https://dl3.debrid.link/dl/abc123/dl-1.mp4";
    api.route(
        POST,
        DL_CALL,
        Reply::ok(json!({"success": true, "value": {
            "id": "abc123", "name": "dl-1.mp4", "url": link, "downloadUrl": download,
            "host": "hoster", "size": 98_765_432, "chunk": 8, "expired": false,
            "created": 1_700_000_000
        }})),
    );
    let body = expect_ok(&site.get(link));
    assert_eq!(body, json!({"download": download, "filename": "dl-1.mp4"}));
    assert_eq!(api.calls(), 1);
    assert_paid_call(&api.requests_to(POST, DL_CALL)[0], "url", link);

    // Every documented answer is read in the unit tests; through the binary, one.
    Case {
        what: "hostNotValid",
        script: (POST, DL_CALL, dl_error("hostNotValid")),
        status: 422,
        code: "unsupported_host",
        detail: "This file host is not supported.",
        retry_after: None,
        action: None,
        provider_code: Some("hostNotValid"),
    }
    .run("debridlink", DL_BASE);
}

/// A folder link: Debrid-Link's `downloader/add` answers `value` as an array of files (the
/// form of its single-file answer, one per file).
#[test]
fn debridlink_folder_gives_every_file() {
    let site = preset_site("dl-folder", "debridlink", DL_BASE, json!({})).write();
    let api = &site.provider;
    let file = |n: u32| {
        json!({
            "id": format!("f{n}"), "name": format!("part{n}.rar"), "url": "https://hoster.example/folder/x",
            "downloadUrl": format!("https://dl3.debrid.link/dl/f{n}/part{n}.rar"),
            "host": "hoster", "size": 1000 + n, "chunk": 8, "expired": false, "created": 1_700_000_000
        })
    };
    api.route(
        POST,
        DL_CALL,
        Reply::ok(json!({"success": true, "value": [file(1), file(2), file(3)]})),
    );
    let link = "https://hoster.example/folder/x";
    let body = expect_ok(&site.get(link));
    assert_eq!(body["download"], "https://dl3.debrid.link/dl/f1/part1.rar");
    assert_eq!(body["filename"], "part1.rar");
    let files = body["files"].as_array().expect("every file");
    let urls: Vec<&str> = files
        .iter()
        .map(|f| f["download"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [
            "https://dl3.debrid.link/dl/f1/part1.rar",
            "https://dl3.debrid.link/dl/f2/part2.rar",
            "https://dl3.debrid.link/dl/f3/part3.rar"
        ]
    );
    assert_eq!(files[2]["filename"], "part3.rar");
    // The page lists them all; a plain-text client gets one URL a line.
    let page = site.run(
        Cgi::new(GET, link_param(link))
            .var("REMOTE_ADDR", "127.0.0.2")
            .header("Accept", "text/html"),
    );
    let a = page.answer();
    assert_eq!(a.status, 200, "{}", page.describe());
    let html = String::from_utf8_lossy(&a.body);
    assert!(html.contains("(3 files)"), "{html}");
    for n in 1..=3 {
        assert!(
            html.contains(&format!(
                "href=\"https://dl3.debrid.link/dl/f{n}/part{n}.rar\""
            )),
            "{html}"
        );
    }
    let text = site.run(Cgi::new(GET, link_param(link)).var("REMOTE_ADDR", "127.0.0.3"));
    assert_eq!(
        String::from_utf8_lossy(&text.answer().body),
        urls.iter().map(|u| format!("{u}\n")).collect::<String>()
    );
    assert_eq!(api.calls(), 3, "one paid call per request");
}

// ---------------------------------------------------------------------------------------------
// TorBox: create, poll until finished, then request the link with the token in the query.
//
// Where the answers' form comes from: https://api-docs.torbox.app/ ("Standard Response"
// `{"success", "error", "detail", "data"}`; "403 means authentication error. 500 means
// something went wrong on TorBox's end"; its "Errors Table" for the codes) and
// https://support.torbox.app/en/articles/13726368-api-rate-limits (300 per minute per API key
// for each endpoint; creating a web download 60 per hour with a 10 per minute edge).

fn tb_created(id: u64) -> Reply {
    Reply::ok(json!({
        "success": true, "error": null, "detail": "Found Cached Download. Using Cached Download.",
        "data": {"webdownload_id": id, "hash": "6f1ed002ab5595859014ebf0951522d9", "auth_id": "d3b07384"}
    }))
}

fn tb_list(id: u64, finished: bool) -> Reply {
    Reply::ok(json!({
        "success": true, "error": null, "detail": "Web downloads list retrieved successfully.",
        "data": {
            "id": id, "name": "archive.zip", "size": 1_048_576, "download_state":
            if finished { "completed" } else { "downloading" },
            "download_finished": finished, "download_present": finished, "progress": if finished { 1.0 } else { 0.4 },
            "files": if finished { json!([{"id": 0, "name": "archive.zip/archive.zip", "short_name": "archive.zip", "size": 1_048_576, "mimetype": "application/zip"}]) } else { json!([]) }
        }
    }))
}

fn tb_link(url: &str) -> Reply {
    Reply::ok(
        json!({"success": true, "error": null, "detail": "Download link generated.", "data": url}),
    )
}

const TB_DOWNLOAD: &str = "https://store-041.weur.tb-cdn.st/zip/4242?token=c0ffee";

#[test]
fn torbox_resolves_and_maps_an_error() {
    let site = preset_site("tb-ok", "torbox", TB_BASE, json!({})).write();
    let api = &site.provider;
    let link = "https://hoster.example/file/archive.zip";
    api.script(POST, TB_CREATE, [tb_created(4242)]);
    api.script(GET, TB_LIST, [tb_list(4242, true)]);
    api.script(GET, TB_REQUEST, [tb_link(TB_DOWNLOAD)]);
    let body = expect_ok(&site.get(link));
    assert_eq!(
        body,
        json!({"download": TB_DOWNLOAD, "filename": "archive.zip"})
    );
    assert_eq!(api.calls(), 3);
    let create = &api.requests_to(POST, TB_CREATE)[0];
    assert_eq!(create.form("link"), Some(link));

    // Every documented answer is read in the unit tests; through the binary, one: the
    // service's own wait passed on.
    Case {
        what: "HTTP 429 with Retry-After",
        script: (
            POST,
            TB_CREATE,
            Reply::json(429, json!({"success": false, "error": "RATE_LIMITED", "detail": "Slow down.", "data": null}))
                .header("Retry-After", "30"),
        ),
        status: 503,
        code: "provider_busy",
        detail: "The download service is busy. Please try again shortly.",
        retry_after: Some(30),
        action: None,
        provider_code: None,
    }
    .run("torbox", TB_BASE);
}

// ---------------------------------------------------------------------------------------------
// Under Apache.

fn target(link: &str) -> String {
    format!("/cgi-bin/resolve?{}", link_param(link))
}

fn get_json(client: &HttpClient, link: &str) -> io::Result<Response> {
    client.send(&Request::get(&target(link)).header("Accept", "application/json"))
}

#[test]
fn torbox_create_poll_requestdl_under_apache() {
    let site = preset_site("tb-apache", "torbox", TB_BASE, json!({})).start();
    let api = &site.provider;
    api.script(POST, TB_CREATE, [tb_created(4242)]);
    api.script(GET, TB_LIST, [tb_list(4242, false), tb_list(4242, true)]);
    api.script(GET, TB_REQUEST, [tb_link(TB_DOWNLOAD)]);
    let link = "https://hoster.example/file/archive.zip?dl=1";
    let started = Instant::now();
    let r = get_json(&site.apache.client(), link).unwrap();
    let took = started.elapsed();
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(
        r.json(),
        json!({"download": TB_DOWNLOAD, "filename": "archive.zip"})
    );
    assert_eq!(
        api.sequence(),
        [
            format!("POST {TB_CREATE}"),
            format!("GET {TB_LIST}"),
            format!("GET {TB_LIST}"),
            format!("GET {TB_REQUEST}"),
        ]
    );
    let calls = api.requests();
    assert_eq!(calls[0].header("Authorization"), Some(bearer().as_str()));
    assert_eq!(calls[0].form("link"), Some(link));
    for poll in &calls[1..3] {
        assert_eq!(poll.header("Authorization"), Some(bearer().as_str()));
        assert_eq!(
            (poll.query("id"), poll.query("bypass_cache")),
            (Some("4242"), Some("true")),
            "{}",
            poll.everything()
        );
        assert!(!poll.raw_query.contains(TOKEN), "{}", poll.everything());
    }
    let request = &calls[3];
    assert_eq!(
        request.query("token"),
        Some(TOKEN),
        "{}",
        request.everything()
    );
    assert_eq!(
        (request.query("web_id"), request.query("file_id")),
        (Some("4242"), Some("0"))
    );
    let gap = calls[2].at - calls[1].at;
    assert!(gap >= Duration::from_millis(1900), "polled after {gap:?}");
    site.apache.settle_log();
    let log = site.apache.error_log();
    assert!(!log.contains(TOKEN), "{log}");
    assert!(!r.everything().contains(TOKEN));
    eprintln!(
        "torbox under Apache: 4 calls in order (polls {} ms apart), answered in {} ms",
        gap.as_millis(),
        took.as_millis()
    );
}

#[test]
fn spend_limit_holds_for_many_clients_at_once_under_apache() {
    // The owner's spend limit alone: the preset's own rate would refuse such a burst first.
    let site = provider_fields(
        preset_site("spend", "realdebrid", RD_BASE, spend(50)),
        json!({"rate_limits": []}),
    )
    .start();
    let api = &site.provider;
    api.route(
        POST,
        RD_CALL,
        Reply::ok(json!({"download": "https://dl.example/d/file.bin", "filename": "file.bin"})),
    );
    let addr = site.apache.addr();
    let n = 80;
    let started = Instant::now();
    let results = fire(n, 16, |i| {
        let from = format!("127.0.0.{}", 10 + i % 20);
        let client = HttpClient::new(addr).bind_source(&from);
        get_json(&client, &format!("https://hoster.example/spend/{i}.bin"))
    });
    let took = started.elapsed();
    let responses: Vec<Response> = results.into_iter().map(|r| r.unwrap()).collect();
    let ok = responses.iter().filter(|r| r.status == 200).count();
    let refused: Vec<&Response> = responses.iter().filter(|r| r.status == 503).collect();
    assert_eq!(
        (ok, refused.len()),
        (50, n - 50),
        "{:?}",
        responses.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert_eq!(api.calls(), 50, "paid calls");
    for r in &refused {
        let body = r.json();
        assert_eq!(body["code"], "spend_limit", "{}", r.everything());
        let secs = r.retry_after();
        assert!((1..=86_400).contains(&secs), "{secs}");
        let detail = body["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("The service has reached its limit for now."),
            "{detail}"
        );
        let lower = detail.to_lowercase();
        for blame in ["you", "too many", "your"] {
            assert!(!lower.contains(blame), "{detail:?} blames the visitor");
        }
    }
    for r in &responses {
        for h in ["RateLimit-Policy", "RateLimit"] {
            let v = r.header(h).unwrap_or_default();
            assert!(
                !v.contains("day") && !v.contains("q=50") && !v.contains("provider"),
                "{h} reveals the site's budget: {v}"
            );
        }
    }
    // Admitted answers carry the visitor's own rule. (Which requests were admitted depends on
    // the order they reached the program, which under mod_fcgid is not the order sent.)
    for r in responses.iter().filter(|r| r.status == 200) {
        assert_eq!(
            r.header("RateLimit-Policy"),
            Some("\"ip\";q=1000;w=60"),
            "{}",
            r.everything()
        );
    }
    site.apache.settle_log();
    let log = site.apache.error_log();
    assert!(log.contains("site-wide limit day reached"), "{log}");
    eprintln!(
        "spend: {n} requests from 20 addresses, 16 at a time, in {} ms: {ok} paid calls (stand-in count {}), {} refused with spend_limit (Retry-After {:?})",
        took.as_millis(),
        api.calls(),
        refused.len(),
        refused[0].header("Retry-After")
    );
}

#[test]
fn cache_answers_one_link_with_one_paid_call_under_apache() {
    let site = preset_site(
        "cache",
        "realdebrid",
        RD_BASE,
        json!({"cache": {"ttl_secs": 3}}),
    )
    .start();
    let api = &site.provider;
    let answer = |n: u32| {
        Reply::ok(
            json!({"download": format!("https://dl.example/d/{n}/file.bin"), "filename": "file.bin"}),
        )
    };
    api.script(POST, RD_CALL, (1..=2).map(answer));
    let addr = site.apache.addr();
    let client = site.apache.client();
    let link = "https://hoster.example/files/abc?x=1";
    let first_url = "https://dl.example/d/1/file.bin";

    let r = get_json(&client, link).unwrap();
    let stored_by = Instant::now();
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(r.header("X-Resolve-Cache"), Some("miss"));
    assert_eq!(r.json()["download"], first_url);
    assert_eq!(api.calls(), 1);

    // The same link written differently is the same entry.
    for variant in [
        "HTTPS://Hoster.EXAMPLE/files/abc?x=1",
        "https://hoster.example:443/files/abc?x=1",
        "https://hoster.example/files/abc?x=1#part-2",
    ] {
        let r = get_json(&client, variant).unwrap();
        assert_eq!(r.status, 200, "{variant}: {}", r.everything());
        assert_eq!(r.header("X-Resolve-Cache"), Some("hit"), "{variant}");
        assert_eq!(r.json()["download"], first_url, "{variant}");
    }

    // 96 more from 10 addresses at once: 100 requests in all, one paid call.
    let burst = 96;
    let results = fire(burst, 10, |i| {
        let client = HttpClient::new(addr).bind_source(&format!("127.0.0.{}", 20 + i % 10));
        get_json(&client, link)
    });
    let burst_done = stored_by.elapsed();
    assert!(
        burst_done < Duration::from_millis(2900),
        "the burst took {burst_done:?}: too slow to stay inside the 3 s entry"
    );
    for r in &results {
        let r = r.as_ref().unwrap();
        assert_eq!(r.status, 200, "{}", r.everything());
        assert_eq!(r.header("X-Resolve-Cache"), Some("hit"));
        assert_eq!(r.json()["download"], first_url);
    }
    assert_eq!(api.calls(), 1, "100 requests, one paid call");
    let cached_requests = 100;

    // After the entry expires: one more paid call, then cached again.
    std::thread::sleep(Duration::from_millis(3300).saturating_sub(stored_by.elapsed()));
    let r = get_json(&client, link).unwrap();
    assert_eq!(
        r.header("X-Resolve-Cache"),
        Some("miss"),
        "{}",
        r.everything()
    );
    assert_eq!(r.json()["download"], "https://dl.example/d/2/file.bin");
    assert_eq!(api.calls(), 2);
    let r = get_json(&client, link).unwrap();
    assert_eq!(r.header("X-Resolve-Cache"), Some("hit"));
    assert_eq!(api.calls(), 2);

    // A failed resolution is not cached: the next request calls again.
    api.script(
        POST,
        RD_CALL,
        [
            rd_error(503, "service_unavailable", 25),
            Reply::ok(
                json!({"download": "https://dl.example/d/ok/other.bin", "filename": "other.bin"}),
            ),
        ],
    );
    let other = "https://hoster.example/files/other";
    let calls_before = api.calls();
    let r = get_json(&client, other).unwrap();
    assert_ne!(r.status, 200, "{}", r.everything());
    assert_eq!(r.header("X-Resolve-Cache"), None);
    let r = get_json(&client, other).unwrap();
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(r.header("X-Resolve-Cache"), Some("miss"));
    assert_eq!(r.json()["download"], "https://dl.example/d/ok/other.bin");
    assert_eq!(api.calls(), calls_before + 2);

    let requests = cached_requests + 2 + 2;
    let paid = api.calls();
    eprintln!(
        "cache: {requests} requests for 2 links -> {paid} paid calls, {} saved; the first \
         {cached_requests} (a burst of {burst} from 10 addresses done {} ms after the entry was \
         stored) cost 1 paid call",
        requests - paid,
        burst_done.as_millis(),
    );
}

// ---------------------------------------------------------------------------------------------
// Spend protection, directly as CGI.

#[test]
fn a_presets_rate_rule_limits_paid_calls() {
    // 12 per minute: on the file store, 2 per 12 s, so that no minute ever holds more than 12
    // calls (a window starting at a first call would let 24 through around its edge).
    let site = provider_fields(
        preset_site("rate-rule", "realdebrid", RD_BASE, json!({})),
        json!({"rate_limits": [{"name": "provider-minute", "limit": 12, "window_secs": 60}]}),
    )
    .write();
    let api = &site.provider;
    api.route(POST, RD_CALL, f_bin());
    let outs: Vec<CgiOutput> = (0..6)
        .map(|i| {
            site.request(
                GET,
                &format!("https://hoster.example/rate/{i}"),
                &format!("127.0.0.{}", 50 + i),
            )
        })
        .collect();
    let statuses: Vec<u16> = outs.iter().map(|o| o.answer().status).collect();
    assert_eq!(statuses, [200, 200, 503, 503, 503, 503]);
    assert_eq!(api.calls(), 2);
    for out in &outs[2..] {
        let (_, body) = status_body(out);
        assert_eq!(body["code"], "spend_limit", "{}", out.describe());
        let secs = out.answer().retry_after();
        assert!((1..=12).contains(&secs), "{secs}");
        assert!(out.stderr.contains("provider-minute"), "{}", out.stderr);
    }
    eprintln!("preset rate rule 12/60 s on the file store: a burst of 6 -> 2 paid calls, then 503");
}

/// A provider's rate counts every call it makes, polls included, and a rate may count one
/// step's calls only (TorBox publishes one for creating a download). With a Redis store the
/// rates are exact sliding windows.
#[test]
fn a_providers_rate_counts_every_call_polls_included() {
    let redis = support::Redis::start();
    let site = Site::builder("rate-polls")
        .provider(api_stand_in())
        .store(json!({"kind": "redis", "url": redis.url()}))
        .provider_section(|api| {
            json!({
                "kind": "http", "token": TOKEN, "base_url": api.url("/api"),
                "steps": [
                    {"method": "POST", "url": "{base}/create",
                     "headers": {"Authorization": "Bearer {token}"}, "form": {"link": "{link}"},
                     "extract": {"id": "/id"}},
                    {"method": "GET", "url": "{base}/status", "query": {"id": "{id}"},
                     "headers": {"Authorization": "Bearer {token}"},
                     "poll": {"interval_ms": 100, "until": {"pointer": "/done", "equals": true}},
                     "extract": {"download": "/link"}}
                ],
                "rate_limits": [
                    {"name": "provider-calls", "limit": 3, "window_secs": 60},
                    {"name": "provider-create", "limit": 2, "window_secs": 3600, "steps": [1]}
                ]
            })
        })
        .write();
    let api = &site.provider;
    api.route(POST, "/api/create", Reply::ok(json!({"id": 7})));
    api.route(GET, "/api/status", Reply::ok(json!({"done": false})));
    let out = site.get("https://hoster.example/polls/1.bin");
    let (status, body) = status_body(&out);
    assert_eq!(
        (status, body["code"].as_str()),
        (503, Some("provider_busy")),
        "{}",
        out.describe()
    );
    let secs = out.answer().retry_after();
    assert!((50..=60).contains(&secs), "{secs}");
    assert!(out.stderr.contains("provider-calls"), "{}", out.stderr);
    // Had provider-create (2 an hour, step 1 only) counted the polls, the second poll would
    // have been its third call.
    assert!(!out.stderr.contains("provider-create"), "{}", out.stderr);
    assert_eq!(
        api.sequence(),
        ["POST /api/create", "GET /api/status", "GET /api/status"],
        "the create and two polls: three calls in the minute, never a fourth"
    );
    // The next link is refused before any call: the minute holds three calls already.
    let out = site.get("https://hoster.example/polls/2.bin");
    let (status, body) = status_body(&out);
    assert_eq!((status, body["code"].as_str()), (503, Some("spend_limit")));
    assert_eq!(api.calls(), 3);
    eprintln!(
        "a rate of 3 calls a minute: create + 2 polls, then 503 provider_busy; the next link 503 spend_limit"
    );
}

const JOB_DEADLINE_MS: u64 = 3500;
const JOB_POLL_SECS: u64 = 2;

/// Past the kept job's next poll: the poll interval and a little, from a moment after the job
/// was kept.
const PAST_THE_NEXT_POLL: Duration = Duration::from_millis(JOB_POLL_SECS * 1000 + 100);

/// A site whose provider creates a job, then polls it every 2 s with its progress, within a
/// deadline of 3.5 s: a job that needs longer outlasts the request. The times leave a busy
/// machine room: a first answer is due well before the deadline, and the kept job's next poll
/// (`JOB_POLL_SECS` after it was kept) well after the requests that join it.
fn job_site(label: &str) -> Setup {
    Site::builder(label)
        .provider(api_stand_in())
        .provider_section(|api| {
            json!({
                "kind": "http", "token": TOKEN, "base_url": api.url("/api"),
                "connect_timeout_ms": 1500, "timeout_ms": 2500, "deadline_ms": JOB_DEADLINE_MS,
                "steps": [
                    {"method": "POST", "url": "{base}/create",
                     "headers": {"Authorization": "Bearer {token}"}, "form": {"link": "{link}"},
                     "extract": {"id": "/id"}},
                    {"method": "GET", "url": "{base}/status", "query": {"id": "{id}"},
                     "headers": {"Authorization": "Bearer {token}"},
                     "poll": {"interval_ms": JOB_POLL_SECS * 1000, "until": {"pointer": "/done", "equals": true},
                              "fail": {"pointer": "/failed", "equals": true},
                              "progress": {"pointer": "/progress", "unit": "fraction"}},
                     "extract": {"download": "/link", "filename": "/name"}}
                ]
            })
        })
        // One paid link a day, and one request an hour for each visitor.
        .rules(vec![
            json!({"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600}),
        ])
        .config(|cfg| config::merge(cfg, spend(1)))
        .write()
}

#[test]
fn a_long_job_is_kept_polled_and_joined_without_paying_again() {
    let site = job_site("job");
    let api = &site.provider;
    api.route(POST, "/api/create", Reply::ok(json!({"id": 7})));
    api.route(
        GET,
        "/api/status",
        Reply::ok(json!({"done": false, "progress": 0.4})),
    );
    let link = "https://hoster.example/big/file.iso";

    let out = site.request(GET, link, "127.0.0.60");
    let (status, body) = status_body(&out);
    assert_eq!(status, 202, "{}", out.describe());
    assert_eq!(body["status"], "pending");
    assert_eq!(body["progress"], "40% done");
    let a = out.answer();
    assert_eq!(
        a.header("Retry-After"),
        Some(JOB_POLL_SECS.to_string().as_str())
    );
    let location = a.header("Location").expect("Location");
    assert_eq!(
        location,
        format!(
            "/cgi-bin/resolve?link={}",
            "https%3A%2F%2Fhoster.example%2Fbig%2Ffile.iso"
        )
    );
    // By the deadline, on the program's own clock (its Server-Timing); the whole run only has
    // a backstop.
    let bound = Duration::from_millis(JOB_DEADLINE_MS + 1000);
    assert!(
        a.program_took() < bound && out.elapsed < support::timing::backstop(bound),
        "{:?} in the program, {:?} in all",
        a.program_took(),
        out.elapsed
    );
    let polls = api.calls_to(GET, "/api/status");
    assert!(polls >= 2, "{polls}");
    assert!(!out.describe().contains(TOKEN), "{}", out.describe());

    // At once, the same visitor, whose one request an hour is used: refused by its own rule
    // (decided before the day's spend limit, also spent, which is left unread) without the job
    // being read; another visitor: the kept job's progress, no call, and the request counted
    // by no rule.
    let out = site.request(GET, link, "127.0.0.60");
    let (status, body) = status_body(&out);
    assert_eq!(
        (status, body["code"].as_str(), body["rule"].as_str()),
        (429, Some("rate_limited"), Some("ip")),
        "{}",
        out.describe()
    );
    let wait = out.answer().retry_after();
    assert!((3500..=3600).contains(&wait), "{wait}");
    for _ in 0..2 {
        let out = site.request(GET, link, "127.0.0.61");
        let (status, body) = status_body(&out);
        assert_eq!(
            (status, body["progress"].as_str()),
            (202, Some("40% done")),
            "{}",
            out.describe()
        );
    }
    assert_eq!(
        api.calls_to(GET, "/api/status"),
        polls,
        "within the interval: no poll"
    );
    let stats: Value = serde_json::from_str(&site_command(&site, &["stats", "--json"])).unwrap();
    assert_eq!(
        (&stats["refused"], &stats["spend_refused"]),
        (&json!({"ip": 1}), &json!({})),
        "the first visitor's refusal, by its own rule; not the joined job's answers: {stats:#}"
    );

    // After the interval, the job is done: one poll, the answer, and no second creation.
    std::thread::sleep(PAST_THE_NEXT_POLL);
    api.route(
        GET,
        "/api/status",
        Reply::ok(
            json!({"done": true, "link": "https://dl.example/big/file.iso", "name": "file.iso"}),
        ),
    );
    let out = site.request(GET, link, "127.0.0.62");
    let body = expect_ok(&out);
    assert_eq!(
        body,
        json!({"download": "https://dl.example/big/file.iso", "filename": "file.iso"})
    );
    assert_eq!(
        api.calls_to(POST, "/api/create"),
        1,
        "one paid job for three visitors"
    );
    assert_eq!(api.calls_to(GET, "/api/status"), polls + 1);

    // The one paid link of the day was that job: another link is refused before paying.
    let out = site.request(GET, "https://hoster.example/other.iso", "127.0.0.63");
    let (status, body) = status_body(&out);
    assert_eq!((status, body["code"].as_str()), (503, Some("spend_limit")));
    assert_eq!(api.calls_to(POST, "/api/create"), 1);
}

#[test]
fn a_link_asked_twice_at_once_joins_the_one_job() {
    let site = job_site("job-race");
    site.edit_config(|cfg| cfg["cache"] = json!({"ttl_secs": 60}));
    let api = &site.provider;
    api.route(POST, "/api/create", Reply::ok(json!({"id": 5})));
    api.route(
        GET,
        "/api/status",
        Reply::ok(json!({"done": false, "progress": 0.2})),
    );
    let link = "https://hoster.example/race/file.iso";
    let outs: Vec<CgiOutput> = std::thread::scope(|s| {
        let first = s.spawn(|| site.request(GET, link, "127.0.0.80"));
        std::thread::sleep(Duration::from_millis(200));
        let second = s.spawn(|| site.request(GET, link, "127.0.0.81"));
        vec![first.join().unwrap(), second.join().unwrap()]
    });
    for out in &outs {
        let (status, body) = status_body(out);
        assert_eq!(
            (status, body["progress"].as_str()),
            (202, Some("20% done")),
            "{}",
            out.describe()
        );
    }
    assert_eq!(api.calls_to(POST, "/api/create"), 1, "one job for both");
}

#[test]
fn a_long_job_the_provider_reports_failed_is_refunded() {
    let site = job_site("job-failed");
    let api = &site.provider;
    api.route(POST, "/api/create", Reply::ok(json!({"id": 8})));
    api.route(
        GET,
        "/api/status",
        Reply::ok(json!({"done": false, "progress": 0.1})),
    );
    let out = site.request(GET, "https://hoster.example/broken.iso", "127.0.0.70");
    assert_eq!(out.answer().status, 202, "{}", out.describe());
    std::thread::sleep(PAST_THE_NEXT_POLL);
    api.route(
        GET,
        "/api/status",
        Reply::ok(json!({"done": false, "failed": true})),
    );
    let out = site.request(GET, "https://hoster.example/broken.iso", "127.0.0.71");
    let (status, body) = status_body(&out);
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some("link_refused")),
        "{}",
        out.describe()
    );
    // Given back: the day's one paid link is still there.
    api.route(
        GET,
        "/api/status",
        Reply::ok(json!({"done": true, "link": "https://dl.example/ok.iso"})),
    );
    let out = site.request(GET, "https://hoster.example/ok.iso", "127.0.0.72");
    expect_ok(&out);
    assert_eq!(api.calls_to(POST, "/api/create"), 2);
}

/// AllDebrid's public host list (docs.alldebrid.com, "Hosts": `GET /v4/hosts/domains`, "All
/// `/v4/hosts/*` endpoints are public", answered `{"status": "success", "data": {"hosts": [...],
/// "streams": [...], "redirectors": [...]}}`).
const AD_DOMAINS: &str = "/v4/hosts/domains";

#[test]
fn host_list_pre_check_refuses_an_unlisted_host_before_paying() {
    let site = provider_fields(
        preset_site("hosts", "alldebrid", AD_BASE, spend(10)),
        json!({"hosts": {"url": "{base}/v4/hosts/domains", "lists": ["/data/hosts", "/data/streams", "/data/redirectors"]}}),
    )
    .rules(vec![json!({"name": "ip", "key": "ip", "limit": 2, "window_secs": 3600})])
    .write();
    let api = &site.provider;
    api.route(
        GET,
        AD_DOMAINS,
        Reply::ok(json!({"status": "success", "data": {
            "hosts": ["mega.nz", "mega.co.nz", "rapidgator.net"],
            "streams": ["youtube.com"], "redirectors": ["adf.ly"]
        }})),
    );
    api.route(
        POST,
        AD_UNLOCK,
        Reply::ok(json!({"status": "success", "data": {"link": "https://a1b2c3.debrid.it/dl/x/f.zip", "filename": "f.zip"}})),
    );
    // Three links on a host AllDebrid does not list, from one visitor allowed two requests:
    // refused each time, nothing paid, the visitor's limit untouched.
    for i in 0..3 {
        let link = format!("https://unknown-host.example/f{i}.zip");
        assert_refused_before_paying(&site, &link, "127.0.0.90", "unsupported_host");
    }
    assert_eq!(api.calls_to(POST, AD_UNLOCK), 0);
    assert_fetched_once_without_token(api, AD_DOMAINS, "alldebrid");
    // A listed host (a subdomain of one) is paid as before, twice: the visitor's limit.
    for _ in 0..2 {
        let out = site.request(GET, "https://www.mega.nz/file/abc", "127.0.0.90");
        expect_ok(&out);
    }
    assert_eq!(api.calls_to(POST, AD_UNLOCK), 2);
    assert_eq!(api.calls_to(GET, AD_DOMAINS), 1);
}

#[test]
fn host_list_unavailable_lets_links_through_and_is_not_asked_again_that_day() {
    let site = provider_fields(
        preset_site("hosts-down", "alldebrid", AD_BASE, json!({})),
        json!({"hosts": {"url": "{base}/v4/hosts/domains", "lists": ["/data/hosts"]}}),
    )
    .write();
    let api = &site.provider;
    api.route(
        GET,
        AD_DOMAINS,
        Reply::raw(503, "text/html", "<h1>down</h1>"),
    );
    api.route(
        POST,
        AD_UNLOCK,
        Reply::ok(
            json!({"status": "success", "data": {"link": "https://a1b2c3.debrid.it/dl/y/g.zip"}}),
        ),
    );
    for i in 0..2 {
        expect_ok(&site.get(&format!("https://any-host.example/g{i}.zip")));
    }
    assert_eq!(api.calls_to(POST, AD_UNLOCK), 2);
    assert_eq!(
        api.calls_to(GET, AD_DOMAINS),
        1,
        "a failed fetch is not retried within the day"
    );
}

/// Asks for `link` from `from` and checks a 422 with `code`, refused before any paid call.
fn assert_refused_before_paying(site: &Setup, link: &str, from: &str, code: &str) {
    let out = site.request(GET, link, from);
    let (status, body) = status_body(&out);
    assert_eq!(
        (status, body["code"].as_str()),
        (422, Some(code)),
        "{}",
        out.describe()
    );
    assert!(
        out.stderr.contains("refused before any paid call"),
        "{}",
        out.stderr
    );
}

/// The host list at `list` was fetched once (kept for a day), without the token (a public call).
fn assert_fetched_once_without_token(api: &Provider, list: &str, name: &str) {
    assert_eq!(
        api.calls_to(GET, list),
        1,
        "{name}: fetched once, kept for a day"
    );
    let fetch = &api.requests_to(GET, list)[0];
    assert!(
        !fetch.everything().contains(TOKEN),
        "{name}: a public call: {}",
        fetch.everything()
    );
}

/// Each preset's own host list, from the endpoint and in the form its service documents:
/// - Real-Debrid (api.real-debrid.com, "GET /hosts/domains": "Get all hoster domains supported
///   on the service. This request is not requiring authentication", answered as an array of
///   domain strings);
/// - Premiumize (`GET /api/services/list`; its API's "best practices" post names two lists,
///   the domains found in the cache and those for which links can be generated: `cache` and
///   `directdl`, arrays of domains, in the answer clients read);
/// - Debrid-Link (`GET /api/v2/downloader/hosts`: `{"success": true, "value": [{"name",
///   "domains": [...]}]}`, the form its clients read);
/// - TorBox (api-docs.torbox.app, "Get Hoster List", `GET /v1/api/webdl/hosters`, public:
///   the standard answer with `data` a list of hosters, each with its `domains`).
#[test]
fn host_list_of_every_other_preset_refuses_an_unlisted_host_before_paying() {
    let presets: [(&str, &str, &str, Value, &str); 4] = [
        (
            "realdebrid",
            RD_BASE,
            "/rest/1.0/hosts/domains",
            json!(["mega.nz", "rapidgator.net"]),
            RD_CALL,
        ),
        (
            "premiumize",
            PM_BASE,
            "/api/services/list",
            json!({"status": "success", "directdl": ["rapidgator.net"], "cache": ["mega.nz"]}),
            PM_CALL,
        ),
        (
            "debridlink",
            DL_BASE,
            "/api/v2/downloader/hosts",
            json!({"success": true, "value": [
                {"name": "mega", "type": "host", "status": 1, "domains": ["mega.nz", "mega.co.nz"]},
                {"name": "rapidgator", "type": "host", "status": 1, "domains": ["rapidgator.net"]}
            ]}),
            DL_CALL,
        ),
        (
            "torbox",
            TB_BASE,
            "/v1/api/webdl/hosters",
            json!({"success": true, "error": null, "detail": "Hosters retrieved.", "data": [
                {"name": "Mega", "domains": ["mega.nz"], "status": true, "type": "hoster"},
                {"name": "Rapidgator", "domains": ["rapidgator.net", "rg.to"], "status": true, "type": "hoster"}
            ]}),
            TB_CREATE,
        ),
    ];
    for (name, base, list, answer, paid) in presets {
        let site = Site::builder(&format!("hosts-{name}"))
            .provider(api_stand_in())
            // The preset's own host list; no link check, so that every call counted is paid.
            .provider_section(move |api| {
                json!({"preset": name, "token": TOKEN, "base_url": api.url(base), "link_check": null,
                       "account": null})
            })
            .rules(vec![json!({"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600})])
            .write();
        let api = &site.provider;
        api.route(GET, list, Reply::ok(answer));
        // A visitor allowed one request: two links on a host the service does not list, both
        // refused, nothing paid, the one request still there.
        for i in 0..2 {
            let link = format!("https://unknown-host.example/f{i}.zip");
            assert_refused_before_paying(&site, &link, "127.0.0.93", "unsupported_host");
        }
        assert_eq!(api.calls_to(POST, paid), 0, "{name}");
        assert_fetched_once_without_token(api, list, name);
        // (The stand-in has no answer for the paid call: whatever the visitor reads then, the
        // call was made.)
        let out = site.request(GET, "https://www.mega.nz/file/abc", "127.0.0.93");
        let (status, body) = status_body(&out);
        assert!(
            status != 429 && body["code"] != "unsupported_host",
            "{name}: {}",
            out.describe()
        );
        assert_eq!(
            api.calls_to(POST, paid),
            1,
            "{name}: a listed host is paid as before"
        );
        assert_eq!(api.calls_to(GET, list), 1, "{name}");
    }
}

/// Real-Debrid's free link check (api.real-debrid.com, "POST /unrestrict/check": "Check if a
/// file is downloadable on the concerned hoster. This request is not requiring
/// authentication", form field `link`; HTTP 503 "File unavailable").
const RD_CHECK: &str = "/rest/1.0/unrestrict/check";

#[test]
fn link_check_refuses_a_dead_link_before_unrestricting_it() {
    let site = provider_fields(
        preset_site("link-check", "realdebrid", RD_BASE, json!({})),
        json!({"link_check": {"url": "{base}/unrestrict/check", "field": "link", "dead_statuses": [503]}}),
    )
    .rules(vec![json!({"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600})])
    .write();
    let api = &site.provider;
    api.route(
        POST,
        RD_CHECK,
        Reply::json(503, r#"{"error": "unavailable_file", "error_code": 24}"#),
    );
    api.route(POST, RD_CALL, f_bin());
    // A visitor allowed one request: two dead links refused, nothing unrestricted, the one
    // request still there.
    for i in 0..2 {
        let link = format!("https://rapidgator.net/file/dead{i}");
        assert_refused_before_paying(&site, &link, "127.0.0.94", "dead_link");
    }
    assert_eq!(api.calls_to(POST, RD_CALL), 0);
    let checks = api.requests_to(POST, RD_CHECK);
    assert_eq!(checks.len(), 2);
    assert_eq!(
        checks[1].form("link"),
        Some("https://rapidgator.net/file/dead1")
    );
    assert!(
        !checks[1].everything().contains(TOKEN),
        "{}",
        checks[1].everything()
    );
    // Found: unrestricted as before, with the visitor's one request.
    api.route(
        POST,
        RD_CHECK,
        Reply::ok(
            json!({"host": "rapidgator.net", "link": "https://rapidgator.net/file/ok",
                         "filename": "f.bin", "filesize": 1, "supported": 1}),
        ),
    );
    expect_ok(&site.request(GET, "https://rapidgator.net/file/ok", "127.0.0.94"));
    assert_eq!(api.calls_to(POST, RD_CALL), 1);
    // A check that fails says nothing: the link goes on as without it.
    api.route(
        POST,
        RD_CHECK,
        Reply::raw(500, "text/html", "<h1>oops</h1>"),
    );
    let out = site.request(GET, "https://rapidgator.net/file/other", "127.0.0.95");
    expect_ok(&out);
    assert!(out.stderr.contains("goes on unchecked"), "{}", out.stderr);
    assert_eq!(api.calls_to(POST, RD_CALL), 2);
}

/// A client over its limit costs no host-list work: the list is neither fetched nor read for
/// it, only for a request the limiter admitted.
#[test]
fn host_list_is_not_fetched_for_a_client_over_its_limit() {
    let site = preset_site("hosts-429", "alldebrid", AD_BASE, json!({}))
        .rules(vec![
            json!({"name": "ip", "key": "ip", "limit": 1, "window_secs": 3600}),
        ])
        .write();
    let api = &site.provider;
    api.route(
        GET,
        AD_DOMAINS,
        Reply::ok(json!({"status": "success", "data": {"hosts": ["mega.nz"]}})),
    );
    api.route(
        POST,
        AD_UNLOCK,
        Reply::ok(
            json!({"status": "success", "data": {"link": "https://a1b2c3.debrid.it/dl/z/h.zip"}}),
        ),
    );
    expect_ok(&site.request(GET, "https://mega.nz/file/one", "127.0.0.96"));
    // The host list turned on once the visitor's one request is used.
    site.edit_config(|cfg| {
        cfg["provider"]["hosts"] =
            json!({"url": "{base}/v4/hosts/domains", "lists": ["/data/hosts"]});
    });
    for i in 0..3 {
        let out = site.request(GET, &format!("https://mega.nz/file/more{i}"), "127.0.0.96");
        assert_eq!(out.answer().status, 429, "{}", out.describe());
    }
    assert_eq!(api.calls_to(GET, AD_DOMAINS), 0, "no fetch for a 429");
    // Another visitor, admitted: the list is fetched for it.
    expect_ok(&site.request(GET, "https://mega.nz/file/two", "127.0.0.97"));
    assert_eq!(api.calls_to(GET, AD_DOMAINS), 1);
    assert_eq!(api.calls_to(POST, AD_UNLOCK), 2);
}

/// The owner's line for a provider never reached: `ACTION NEEDED`, the cause, what to do.
fn assert_unreachable_says_what_to_do(log: &str) {
    let line = log
        .lines()
        .find(|l| l.contains("class=unreachable"))
        .unwrap_or_else(|| panic!("no class=unreachable line:\n{log}"));
    for words in [
        "ACTION NEEDED: the provider could not be reached from this server",
        "nothing was sent or charged",
        "look at the provider's status page",
        "ask the host whether this account may make outgoing HTTPS connections",
    ] {
        assert!(line.contains(words), "{words:?} not in {line}");
    }
}

/// A provider whose name never resolves, under Apache: the owner's error log says what to do,
/// and the dashboard's notes keep it.
#[test]
fn an_unreachable_provider_says_what_to_do_under_apache() {
    let site = Site::builder("unreachable-apache")
        .provider(api_stand_in())
        .provider_section(|_| {
            json!({
                "preset": "realdebrid", "token": TOKEN, "account": null,
                "base_url": "https://resolve-test.invalid/rest/1.0",
                "connect_timeout_ms": 2000, "timeout_ms": 3000
            })
        })
        .start();
    let r = get_json(&site.apache.client(), "https://hoster.example/dns/apache").unwrap();
    assert_eq!(r.status, 502, "{}", r.everything());
    assert!(
        site.apache
            .wait_for_log("class=unreachable", std::time::Duration::from_secs(5)),
        "{}",
        site.apache.error_log()
    );
    assert_unreachable_says_what_to_do(&site.apache.error_log());
    assert!(!site.apache.error_log().contains(TOKEN));
    let stats = site_command(&site, &["stats"]);
    assert!(
        stats.contains("ACTION NEEDED: the provider could not be reached"),
        "{stats}"
    );
}

/// A port on 127.0.0.1 where nothing listens.
#[test]
fn a_call_that_never_connected_is_refunded() {
    let provider = json!({
        "preset": "realdebrid", "token": TOKEN, "account": null,
        "base_url": format!("http://127.0.0.1:{}{RD_BASE}", free_port()),
        "connect_timeout_ms": 1000, "timeout_ms": 2000
    });
    let site = Site::builder("refund")
        .provider(api_stand_in())
        .provider_section(|_| provider)
        .config(|cfg| config::merge(cfg, spend(2)))
        .write();
    for i in 0..3 {
        let out = site.get(&format!("https://hoster.example/refund/{i}"));
        let (status, body) = status_body(&out);
        assert_eq!(
            (status, body["code"].as_str()),
            (502, Some("provider_unavailable")),
            "{}",
            out.describe()
        );
        assert_eq!(body["detail"], GENERIC);
        assert_unreachable_says_what_to_do(&out.stderr);
    }
    // Now the provider answers: the whole budget of 2 is still there.
    let api = &site.provider;
    api.route(POST, RD_CALL, f_bin());
    site.edit_config(|cfg| cfg["provider"] = preset("realdebrid", api, RD_BASE));
    let statuses: Vec<u16> = (0..3)
        .map(|i| {
            site.get(&format!("https://hoster.example/refund/ok-{i}"))
                .answer()
                .status
        })
        .collect();
    assert_eq!(statuses, [200, 200, 503]);
    assert_eq!(api.calls(), 2);
    eprintln!(
        "refund: 3 calls refused by the network (nothing spent), then 2 paid calls, then spend_limit"
    );
}

/// A host name under `.invalid` (RFC 6761) never resolves: the lookup fails before any request
/// exists, as it does for a mistyped `base_url` or a resolver that is down.
#[test]
fn a_failed_name_lookup_is_refunded() {
    let provider = json!({
        "preset": "realdebrid", "token": TOKEN, "account": null,
        "base_url": "https://resolve-test.invalid/rest/1.0",
        "connect_timeout_ms": 2000, "timeout_ms": 3000
    });
    let site = Site::builder("refund-dns")
        .provider(api_stand_in())
        .provider_section(|_| provider)
        .config(|cfg| config::merge(cfg, spend(1)))
        .write();
    for i in 0..3 {
        let out = site.get(&format!("https://hoster.example/dns/{i}"));
        let (status, body) = status_body(&out);
        assert_eq!(
            (status, body["code"].as_str()),
            (502, Some("provider_unavailable")),
            "{}",
            out.describe()
        );
        assert_unreachable_says_what_to_do(&out.stderr);
        assert!(!out.stderr.contains("class=bad_answer"), "{}", out.stderr);
    }
    // The one call the spend limit allows is still there.
    let api = &site.provider;
    api.route(POST, RD_CALL, f_bin());
    site.edit_config(|cfg| cfg["provider"] = preset("realdebrid", api, RD_BASE));
    let statuses: Vec<u16> = (0..2)
        .map(|i| {
            site.get(&format!("https://hoster.example/dns/ok-{i}"))
                .answer()
                .status
        })
        .collect();
    assert_eq!(statuses, [200, 503]);
    assert_eq!(api.calls(), 1);
}

/// `resolve ARGS --config` the site's configuration, run as the site's direct CGI runs are:
/// its standard output.
fn site_command(site: &Setup, args: &[&str]) -> String {
    let mut cmd = command(args);
    cmd.arg("--config").arg(&site.config_path);
    let out = cmd.output().expect("run the binary");
    assert!(out.status.success(), "{args:?}: {}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_refused_server_address_is_noted_for_the_owner_not_the_visitor() {
    // AllDebrid's documented refusal of a server address, inside HTTP 200.
    let site = preset_site("no-server", "alldebrid", AD_BASE, json!({})).write();
    let api = &site.provider;
    api.route(
        POST,
        AD_UNLOCK,
        ad_error(
            "NO_SERVER",
            "Servers are not allowed to use this feature. Visit https://alldebrid.com/vpn if you're using a VPN.",
        ),
    );
    let out = site.get("https://hoster.example/no-server/1.zip");
    let (status, body) = status_body(&out);
    assert_eq!((status, body["detail"].as_str()), (502, Some(GENERIC)));
    assert!(
        !body.to_string().contains("Servers are not allowed"),
        "the visitor is not told about the owner's server: {body}"
    );
    let stats = site_command(&site, &["stats"]);
    let note = stats
        .lines()
        .find(|l| l.contains("ACTION NEEDED: "))
        .unwrap_or_else(|| panic!("no ACTION NEEDED note in stats:\n{stats}"));
    assert!(note.contains("this server's address"), "{note}");
    assert!(note.contains("https://alldebrid.com/vpn"), "{note}");
    assert!(!stats.contains(TOKEN), "{stats}");
    assert!(
        stats.contains("server_refused"),
        "counted by class:\n{stats}"
    );
}

#[test]
fn a_hanging_provider_gets_504_within_the_deadline_and_stays_counted() {
    // One call that never answers: the call's timeout ends it.
    let site = provider_fields(
        preset_site("hang", "realdebrid", RD_BASE, spend(1)),
        json!({"connect_timeout_ms": 500, "timeout_ms": 1000, "deadline_ms": 1500}),
    )
    .write();
    let api = &site.provider;
    api.script(POST, RD_CALL, [Reply::Hang]);
    api.route(POST, RD_CALL, f_bin());
    let out = site.get("https://hoster.example/hang/1");
    assert_timed_out(&out, 1500);
    assert_eq!(api.calls(), 1);
    // A call that may have been charged is not refunded.
    let next = site.get("https://hoster.example/hang/2");
    let (status, body) = status_body(&next);
    assert_eq!((status, body["code"].as_str()), (503, Some("spend_limit")));
    assert_eq!(api.calls(), 1);
    let hang_ms = out.elapsed.as_millis();

    // Polling that does not finish within the deadline: the request ends there with 202 and
    // the job's progress (TorBox's `progress`), and the paid job is kept for asking again.
    let site = provider_fields(
        preset_site("hang-poll", "torbox", TB_BASE, json!({})),
        json!({"connect_timeout_ms": 500, "timeout_ms": 1000, "deadline_ms": 3000}),
    )
    .write();
    let api = &site.provider;
    api.script(POST, TB_CREATE, [tb_created(7)]);
    api.route(GET, TB_LIST, tb_list(7, false));
    let out = site.get("https://hoster.example/hang/poll");
    let (status, body) = status_body(&out);
    assert_eq!(
        (status, body["progress"].as_str()),
        (202, Some("40% done")),
        "{}",
        out.describe()
    );
    assert!(
        out.elapsed < Duration::from_millis(4000),
        "{:?}",
        out.elapsed
    );
    assert_eq!(
        (
            api.calls_to(POST, TB_CREATE),
            api.calls_to(GET, TB_LIST),
            api.calls_to(GET, TB_REQUEST)
        ),
        (1, 2, 0)
    );
    eprintln!(
        "hang: 504 after {hang_ms} ms (timeout 1000, deadline 1500), 1 call, not refunded; \
         long polling: 202 after {} ms (deadline 3000), 3 calls, the job kept",
        out.elapsed.as_millis()
    );
}

// ---------------------------------------------------------------------------------------------
// The cache, directly as CGI.

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

#[test]
fn cached_answers_cost_no_spend() {
    let site = preset_site(
        "cache-spend",
        "realdebrid",
        RD_BASE,
        merged(spend(1), json!({"cache": {"ttl_secs": 60}})),
    )
    .write();
    let api = &site.provider;
    api.route(POST, RD_CALL, f_bin());
    let link = "https://hoster.example/cached/f.bin";
    let first = site.get(link);
    assert_eq!(first.answer().header("X-Resolve-Cache"), Some("miss"));
    let mut hits = Vec::new();
    for i in 0..15 {
        let out = site.request(GET, link, &format!("127.0.1.{i}"));
        expect_ok(&out);
        assert_eq!(out.answer().header("X-Resolve-Cache"), Some("hit"));
        hits.push(out.elapsed);
    }
    // The budget of one paid call is spent; cached answers were free.
    let out = site.get("https://hoster.example/cached/other.bin");
    let (status, body) = status_body(&out);
    assert_eq!((status, body["code"].as_str()), (503, Some("spend_limit")));
    assert_eq!(api.calls(), 1);

    // A limit check alone (HEAD: counted, never paid, no cache read) for comparison.
    let heads: Vec<Duration> = (0..15)
        .map(|i| {
            let out = site.request("HEAD", link, &format!("127.0.2.{i}"));
            assert_eq!(out.answer().status, 200, "{}", out.describe());
            out.elapsed
        })
        .collect();
    let (hit, head) = (median(hits), median(heads));
    eprintln!(
        "cache: 16 requests, 1 paid call, 15 saved; whole CGI run, median of 15: cache hit {} us, limit check only (HEAD) {} us, difference {} us; paid call to the local stand-in {} us",
        hit.as_micros(),
        head.as_micros(),
        hit.as_micros() as i128 - head.as_micros() as i128,
        first.elapsed.as_micros()
    );
}

// ---------------------------------------------------------------------------------------------
// `resolve check`.

fn check(args: &[&str]) -> (bool, String) {
    let out = command(args).output().expect("run the binary");
    (out.status.success(), output_text(&out))
}

#[test]
fn check_describes_a_preset_and_live_makes_one_call() {
    let site = preset_site("check", "torbox", TB_BASE, json!({})).write();
    let api = &site.provider;
    let path = site.config_path.to_str().unwrap();
    let (ok, out) = check(&["check", "--config", path]);
    assert!(ok, "{out}");
    assert!(!out.contains(TOKEN), "{out}");
    assert!(out.contains("\"token\": \"***\""), "{out}");
    for want in [
        format!("preset torbox at {}", api.url(TB_BASE)),
        "token set".to_owned(),
        "step 1: POST {base}/webdl/createwebdownload".to_owned(),
        "reads id <- /data/webdownload_id".to_owned(),
        "step 2: GET {base}/webdl/mylist (every 2000 ms until /data/download_finished = true)"
            .to_owned(),
        "file_id <- /data/files/0/id".to_owned(),
        "step 3: GET {base}/webdl/requestdl".to_owned(),
        "reads download <- /data".to_owned(),
        // TorBox's 300 per minute, 60 and 10 per minute creations, cut into windows that
        // never let more through in any minute or hour on the file store (see site_rules).
        "spend provider-minute: 23 paid calls per 5 s".to_owned(),
        "spend provider-create: 6 paid calls per 400 s".to_owned(),
        "spend provider-create-minute: 2 paid calls per 15 s".to_owned(),
    ] {
        assert!(out.contains(&want), "missing {want:?} in:\n{out}");
    }
    assert_eq!(api.calls(), 0, "a plain check calls nobody");

    site.edit_config(|cfg| cfg["provider"] = preset("realdebrid", api, RD_BASE));
    let rd_path = path;
    let (ok, out) = check(&["check", "--config", rd_path]);
    assert!(ok, "{out}");
    for want in [
        format!("preset realdebrid at {}", api.url(RD_BASE)),
        "step 1: POST {base}/unrestrict/link; reads download <- /download, filename <- /filename"
            .to_owned(),
        "spend provider-minute: 19 paid calls per 5 s".to_owned(),
    ] {
        assert!(out.contains(&want), "missing {want:?} in:\n{out}");
    }
    assert!(!out.contains(TOKEN), "{out}");

    // --live: one announced call, and its outcome.
    let link = "https://hoster.example/live/f.bin";
    api.script(
        POST,
        RD_CALL,
        [
            Reply::ok(json!({"download": "https://dl.example/d/live.bin", "filename": "live.bin"})),
            rd_error(401, "bad_token", 8),
        ],
    );
    let (ok, out) = check(&["check", "--live", link, "--config", rd_path]);
    assert!(ok, "{out}");
    assert_eq!(api.calls(), 1, "{out}");
    assert_eq!(api.requests_to(POST, RD_CALL)[0].form("link"), Some(link));
    let announced = out
        .find(&format!("calling the provider once for {link}"))
        .unwrap_or_else(|| panic!("the call is not announced:\n{out}"));
    let outcome = out
        .find("https://dl.example/d/live.bin (live.bin)")
        .unwrap_or_else(|| panic!("no outcome:\n{out}"));
    assert!(announced < outcome, "{out}");
    assert!(!out.contains(TOKEN), "{out}");

    let (ok, out) = check(&["check", "--live", link, "--config", rd_path]);
    assert!(!ok, "a refused token is not ready:\n{out}");
    assert_eq!(api.calls(), 2, "{out}");
    assert!(out.contains("FAIL live"), "{out}");
    assert!(out.contains("code=8"), "{out}");
    assert!(!out.contains(TOKEN), "{out}");
    eprintln!("check: no call; check --live: exactly 1 call each time (2 runs, 2 calls)");
}

#[test]
fn a_link_asked_by_many_at_once_is_paid_once_under_apache() {
    let site = preset_site(
        "cache-at-once",
        "realdebrid",
        RD_BASE,
        json!({"cache": {"ttl_secs": 60}}),
    )
    .start();
    let api = &site.provider;
    // The provider takes a second: every request below arrives while the first is being paid.
    let slow = |n: u32| {
        Reply::ok(json!({
            "download": format!("https://dl.example/d/{n}/file.bin"), "filename": "file.bin"
        }))
        .after(Duration::from_millis(1000))
    };
    api.script(POST, RD_CALL, [slow(1)]);
    let addr = site.apache.addr();
    let link = "https://hoster.example/files/at-once";
    let started = Instant::now();
    let results = fire(12, 12, |i| {
        let client = HttpClient::new(addr).bind_source(&format!("127.0.0.{}", 40 + i % 6));
        get_json(&client, link)
    });
    let took = started.elapsed();
    let mut misses = 0;
    for r in &results {
        let r = r.as_ref().unwrap();
        assert_eq!(r.status, 200, "{}", r.everything());
        assert_eq!(r.json()["download"], "https://dl.example/d/1/file.bin");
        if r.header("X-Resolve-Cache") == Some("miss") {
            misses += 1;
        }
    }
    eprintln!(
        "12 requests for one link at once: {} paid call(s), {misses} miss, {took:?}",
        api.calls()
    );
    assert_eq!(api.calls(), 1, "one paid call for requests that overlapped");
    assert_eq!(misses, 1);

    // A failed resolution releases the link at once: the next request pays again.
    api.script(
        POST,
        RD_CALL,
        [
            Reply::json(
                503,
                json!({"error": "service_unavailable", "error_code": 25}),
            ),
            Reply::ok(json!({"download": "https://dl.example/d/2/file.bin"})),
        ],
    );
    let other = "https://hoster.example/files/fails-once";
    let client = site.apache.client();
    let r = get_json(&client, other).unwrap();
    assert_eq!(r.status, 503, "{}", r.everything());
    let r = get_json(&client, other).unwrap();
    assert_eq!(r.status, 200, "{}", r.everything());
    assert_eq!(api.calls(), 3);
}
