//! Abuse: forged forwarded-for headers, IPv6 address rotation, hostile API keys, control characters in every input that could reach a header or a log line, oversized and slow requests, and other sites' pages; through a real Apache, and directly as CGI or FastCGI where Apache would refuse the input before the program sees it.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use support::config::rule;
use support::fcgi::{FcgiProcess, FcgiRequest};
use support::net::free_port_on;
use support::site::SiteBuilder;
use support::temp;
use support::urlenc::{encode_bytes, link_param};
use support::{Cgi, CgiOutput, HttpClient, Mode, Provider, Request, Response, Setup, Site, fire};

const VALID: &str = "https://example.com/file/1";
const FORM: &str = "application/x-www-form-urlencoded";

fn q(link: &str) -> String {
    link_param(link)
}

fn target(i: usize) -> String {
    format!(
        "/cgi-bin/resolve?{}",
        q(&format!("https://example.com/file/{i}"))
    )
}

// ---------------------------------------------------------------------------------------------
// Counting: every test prints what it sent, the statuses and the provider calls.

/// Requests sent per class of input, their statuses (0: no HTTP answer) and the provider calls
/// they caused; printed as a table.
struct Tally {
    title: String,
    rows: Vec<TallyRow>,
}

struct TallyRow {
    class: String,
    sent: usize,
    statuses: BTreeMap<u16, usize>,
    calls: usize,
    note: String,
}

impl Tally {
    fn new(title: &str) -> Tally {
        Tally {
            title: title.to_string(),
            rows: Vec::new(),
        }
    }

    /// A tally of requests to `site`: the title names the mode Apache runs the binary in.
    fn for_site(title: &str, site: &Site) -> Tally {
        Tally::new(&format!("{title} [{}]", site.mode().name()))
    }

    fn add(&mut self, class: &str, statuses: &[u16], calls: usize, note: &str) {
        let mut counts = BTreeMap::new();
        for s in statuses {
            *counts.entry(*s).or_insert(0) += 1;
        }
        self.rows.push(TallyRow {
            class: class.to_string(),
            sent: statuses.len(),
            statuses: counts,
            calls,
            note: note.to_string(),
        });
    }

    fn print(&self) {
        let mut out = format!(
            "\n{}\n{:<52} {:>5} {:>5}  {:<24} note\n",
            self.title, "input", "sent", "calls", "statuses"
        );
        let (mut sent, mut calls) = (0, 0);
        for row in &self.rows {
            let (class, n, c, note) = (&row.class, row.sent, row.calls, &row.note);
            let statuses = row
                .statuses
                .iter()
                .map(|(s, k)| match s {
                    0 => format!("none x{k}"),
                    s => format!("{s} x{k}"),
                })
                .collect::<Vec<_>>()
                .join(", ");
            out.push_str(&format!(
                "{class:<52} {n:>5} {c:>5}  {statuses:<24} {note}\n"
            ));
            sent += n;
            calls += c;
        }
        out.push_str(&format!("{:<52} {sent:>5} {calls:>5}\n", "total"));
        eprintln!("{out}");
    }

    /// Prints the table, then fails with every problem found.
    fn finish(&self, fails: &[String]) {
        self.print();
        assert!(fails.is_empty(), "{}", fails.join("\n\n"));
    }
}

fn admitted(statuses: &[u16]) -> usize {
    statuses.iter().filter(|&&s| s == 200).count()
}

fn statuses(results: Vec<io::Result<Response>>) -> Vec<u16> {
    results
        .into_iter()
        .map(|r| r.map_or(0, |r| r.status))
        .collect()
}

impl Tally {
    /// Runs a batch (`send` gives its statuses) that must admit exactly `want`, each with one
    /// provider call, and refuse the rest with 429; adds its row and tells what is wrong.
    fn limited(
        &mut self,
        class: &str,
        want: usize,
        provider: &Provider,
        send: impl FnOnce() -> Vec<u16>,
    ) -> Option<String> {
        let before = provider.calls();
        let got = send();
        let calls = provider.calls() - before;
        self.add(class, &got, calls, "");
        let ok = admitted(&got);
        (ok != want || calls != want || got.iter().any(|&s| s != 200 && s != 429)).then(|| {
            format!(
                "{class}: {ok} admitted and {calls} provider calls, expected exactly {want}; statuses {got:?}"
            )
        })
    }
}

/// `request` with every forged header of `i`.
fn forged(mut request: Request, i: usize) -> Request {
    for (k, v) in forged_headers(i) {
        request = request.header(k, &v);
    }
    request
}

// ---------------------------------------------------------------------------------------------
// Sites under Apache, and configurations for direct runs.

/// A site with a file store, one `ip` rule of `limit` per 600 s, and two FastCGI processes
/// started in fcgid mode.
fn site(label: &str, limit: usize) -> SiteBuilder {
    Site::builder(label)
        .rules(vec![rule("ip", "ip", limit as u64, 600)])
        .fcgid_pool(2)
}

/// The same for runs without a web server.
fn direct(label: &str, limit: usize) -> SiteBuilder {
    Setup::builder(label).rules(vec![rule("ip", "ip", limit as u64, 600)])
}

/// A limit that is never reached.
const GENEROUS: usize = 100_000;

/// A client of `site` from `source` that waits 30 s for an answer.
fn patient_client(site: &Site, source: &str) -> HttpClient {
    site.client()
        .bind_source(source)
        .timeout(Duration::from_secs(30))
}

/// Runs `cgi` with this configuration; panics when it hangs or panics.
fn run(d: &Setup, cgi: Cgi) -> CgiOutput {
    let out = d.run(cgi.timeout(Duration::from_secs(20)));
    assert!(!out.timed_out, "the program hung:\n{}", out.describe());
    assert!(
        !out.stderr.contains("panicked"),
        "the program panicked:\n{}",
        out.describe()
    );
    out
}

/// The status of a GET from `remote` (REMOTE_ADDR as the server would set it).
fn status_from(d: &Setup, remote: &str, i: usize, extra: &[(&str, &str)]) -> u16 {
    let mut cgi = Cgi::new("GET", q(&format!("https://example.com/v6/{i}")))
        .var("REMOTE_ADDR", remote)
        .header("Accept", "application/json");
    for (k, v) in extra {
        cgi = cgi.header(k, v);
    }
    run(d, cgi).answer().status
}
// ---------------------------------------------------------------------------------------------
// Raw HTTP: what exactly came back, and whether anything in it was injected.

/// What came back for some request bytes: the bytes as received, the parsed answer (None when
/// the server closed without one) and how long it took.
struct Exchange {
    raw: Vec<u8>,
    response: Option<Response>,
    elapsed: Duration,
}

impl Exchange {
    fn status(&self) -> u16 {
        self.response.as_ref().map_or(0, |r| r.status)
    }

    /// Whether the program wrote the answer: all its answers carry `Cache-Control: no-store`,
    /// Apache's own error pages do not.
    fn by_program(&self) -> bool {
        self.response
            .as_ref()
            .and_then(|r| r.header("Cache-Control"))
            .is_some_and(|v| v.contains("no-store"))
    }

    fn code(&self) -> String {
        self.response
            .as_ref()
            .and_then(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .and_then(|j| j["code"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    fn describe(&self) -> String {
        String::from_utf8_lossy(&self.raw[..self.raw.len().min(1500)]).into_owned()
    }

    /// Reads the answer until the server closes; `elapsed` counts from `start`.
    fn read(mut s: TcpStream, start: Instant) -> Exchange {
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        Exchange {
            response: Response::parse(&raw).ok(),
            raw,
            elapsed: start.elapsed(),
        }
    }
}

/// Sends `bytes` on a fresh connection and reads until the server closes it.
fn exchange(client: &HttpClient, bytes: &[u8]) -> Exchange {
    let start = Instant::now();
    let mut s = client.connect().expect("connect to Apache");
    // The server may answer and close before taking everything (414, 400).
    let _ = s.write_all(bytes);
    Exchange::read(s, start)
}

/// `GET target HTTP/1.1` with these header values, byte for byte.
fn raw_get(target: &[u8], headers: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = b"GET ".to_vec();
    b.extend_from_slice(target);
    b.extend_from_slice(b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        b.extend_from_slice(name.as_bytes());
        b.extend_from_slice(b": ");
        b.extend_from_slice(value);
        b.extend_from_slice(b"\r\n");
    }
    b.extend_from_slice(b"\r\n");
    b
}

/// Header names an injected line would add.
const INJECTED_NAMES: &[&str] = &[
    "set-cookie",
    "x-injected",
    "location",
    "refresh",
    "content-disposition",
    "access-control-allow-origin",
];

fn header_name_ok(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b))
}

/// What is wrong with the head of a raw HTTP answer: a line not ended by CR LF, a control
/// character, a name that is not a token, or a header an injection would add.
fn head_problems(raw: &[u8]) -> Vec<String> {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return vec![format!(
            "no end of headers in {:?}",
            String::from_utf8_lossy(raw)
        )];
    };
    let mut problems = Vec::new();
    let head = &raw[..end + 2];
    let lines: Vec<&[u8]> = head.split(|&b| b == b'\n').collect();
    for (i, line) in lines[..lines.len() - 1].iter().enumerate() {
        let shown = String::from_utf8_lossy(line);
        let Some(line) = line.strip_suffix(b"\r") else {
            problems.push(format!("bare LF after {shown:?}"));
            continue;
        };
        if line.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            problems.push(format!("control character in header line {shown:?}"));
        }
        if i == 0 {
            if !line.starts_with(b"HTTP/1.") {
                problems.push(format!("status line {shown:?}"));
            }
            continue;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            problems.push(format!("header line without a colon {shown:?}"));
            continue;
        };
        let name = String::from_utf8_lossy(&line[..colon]).to_ascii_lowercase();
        if !header_name_ok(&line[..colon]) {
            problems.push(format!("header name {name:?} is not a token"));
        }
        if INJECTED_NAMES.contains(&name.as_str()) {
            problems.push(format!("injected header {shown:?}"));
        }
        let value = String::from_utf8_lossy(&line[colon + 1..]).to_ascii_lowercase();
        if value.contains("injected") || value.contains("pwned") {
            problems.push(format!("request text in header {shown:?}"));
        }
    }
    problems
}

/// The same checks on a CGI answer (its parser already refuses control characters, non-token
/// names and repeated fields).
fn cgi_answer_problems(stdout: &[u8]) -> Vec<String> {
    match Response::parse_cgi(stdout) {
        Err(e) => vec![format!("not a valid CGI answer: {e}")],
        Ok(a) => a
            .headers
            .iter()
            .filter(|(k, v)| {
                INJECTED_NAMES.contains(&k.to_ascii_lowercase().as_str())
                    || v.to_ascii_lowercase().contains("injected")
                    || v.to_ascii_lowercase().contains("pwned")
            })
            .map(|(k, v)| format!("injected header {k}: {v}"))
            .collect(),
    }
}

/// A character that must never stand raw in a log line: C0 and C1 controls (CR, LF, NUL, ESC,
/// TAB, NEL...), DEL, and the Unicode line and paragraph separators.
fn forbidden_in_log(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// What is wrong with log text: a line that is neither the program's (`resolve: `) nor
/// Apache's (`[`), which is what a line split by the input looks like, or a raw character
/// that must be escaped.
fn log_problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for line in text.split_terminator('\n') {
        if !line.starts_with("resolve: ") && !line.starts_with('[') {
            problems.push(format!("a line split off another: {line:?}"));
        }
        if let Some(c) = line.chars().find(|&c| forbidden_in_log(c)) {
            problems.push(format!("raw {c:?} in log line {line:?}"));
        }
    }
    problems
}

fn program_lines(text: &str) -> usize {
    text.lines().filter(|l| l.starts_with("resolve: ")).count()
}

// ---------------------------------------------------------------------------------------------
// Forged forwarded-for headers.

const SPOOF_LIMIT: usize = 5;

/// Headers a client might forge to look like someone else, different for each `i`: the
/// configured X-Forwarded-For (alone, and in chains that name the trusted proxy), and the
/// headers other products believe.
fn forged_headers(i: usize) -> Vec<(&'static str, String)> {
    let a = i % 250 + 1;
    let xff = match i % 4 {
        0 => format!("198.51.100.{a}"),
        1 => format!("127.0.0.2, 198.51.100.{a}"),
        2 => format!("198.51.100.{a}, 127.0.0.2"),
        _ => format!("10.{a}.0.1, 2001:db8::{a:x}, 127.0.0.2"),
    };
    vec![
        ("X-Forwarded-For", xff),
        ("CF-Connecting-IP", format!("203.0.113.{a}")),
        (
            "Forwarded",
            format!("for=192.0.2.{a};proto=https, for=\"[2001:db8::{a:x}]\""),
        ),
        ("X-Real-IP", format!("192.0.2.{a}")),
        ("True-Client-IP", format!("198.18.0.{a}")),
        ("X-Client-IP", format!("198.18.1.{a}")),
        ("Client-IP", format!("198.18.2.{a}")),
        ("X-Originating-IP", format!("198.18.3.{a}")),
    ]
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn forged_forwarded_for_headers_count_only_from_a_trusted_proxy() {
    // IPv6 loopback, when the machine has it: Apache listens there too, and on the
    // IPv4-mapped form of 127.0.0.1.
    let ipv6 = TcpListener::bind("[::1]:0")
        .ok()
        .map(|_| (free_port_on("[::1]:0"), free_port_on("127.0.0.1:0")));
    let site = site("abuse-spoof", SPOOF_LIMIT)
        .config(|c| c["client"] = json!({"trusted_proxies": ["127.0.0.2"]}))
        .apache(move |b| match ipv6 {
            Some((port6, port_mapped)) => b.conf(&format!(
                "Listen [::1]:{port6}\nListen [::ffff:127.0.0.1]:{port_mapped}"
            )),
            None => b,
        })
        .start();
    let mut tally = Tally::for_site(
        &format!("forwarded-for spoofing, limit {SPOOF_LIMIT} per address"),
        &site,
    );
    let mut fails = Vec::new();
    let provider = &site.provider;

    // An untrusted client forging every header, each request as someone else.
    let spoofer = site.apache.client().bind_source("127.0.0.3");
    let class = "untrusted 127.0.0.3, 8 forged headers, new each time";
    fails.extend(tally.limited(class, SPOOF_LIMIT, provider, || {
        statuses(fire(120, 8, |i| {
            spoofer.send(&forged(
                Request::get(&target(i)).header("Accept", "text/plain"),
                i,
            ))
        }))
    }));

    if let Some((port6, port_mapped)) = ipv6 {
        // The same from IPv6 loopback: one client, its /64.
        let v6 = HttpClient::new(format!("[::1]:{port6}").parse().expect("address"));
        let class = "untrusted ::1 (IPv6), forged headers";
        fails.extend(tally.limited(class, SPOOF_LIMIT, provider, || {
            statuses(fire(30, 4, |i| {
                v6.send(&forged(Request::get(&target(1000 + i)), i))
            }))
        }));

        // 127.0.0.1 and ::ffff:127.0.0.1 (a dual-stack listener) are one client.
        let plain = site.apache.client();
        let mapped = HttpClient::new(
            format!("[::ffff:127.0.0.1]:{port_mapped}")
                .parse()
                .expect("address"),
        );
        let class = "127.0.0.1 and ::ffff:127.0.0.1 alternately";
        fails.extend(tally.limited(class, SPOOF_LIMIT, provider, || {
            (0..=SPOOF_LIMIT)
                .map(|i| {
                    let c = if i % 2 == 0 { &plain } else { &mapped };
                    c.get(&target(2000 + i)).map_or(0, |r| r.status)
                })
                .collect()
        }));
        let logged_mapped = site
            .apache
            .access_log()
            .lines()
            .any(|l| l.starts_with("::ffff:127.0.0.1 "));
        tally.rows.last_mut().expect("row").note = format!(
            "Apache's REMOTE_ADDR: {}",
            if logged_mapped {
                "::ffff:127.0.0.1"
            } else {
                "127.0.0.1"
            }
        );
    } else {
        tally.add(
            "IPv6 loopback",
            &[],
            0,
            "unavailable on this machine: skipped",
        );
    }

    // Through the trusted proxy, the header names the client.
    let proxy = site.apache.client().bind_source("127.0.0.2");
    let via = |i: usize, headers: &[(&str, &str)]| -> u16 {
        let mut r = Request::get(&target(3000 + i));
        for (k, v) in headers {
            r = r.header(k, v);
        }
        proxy.send(&r).map_or(0, |r| r.status)
    };
    for client in ["203.0.113.1", "203.0.113.2"] {
        let class = format!("trusted proxy, X-Forwarded-For {client}");
        fails.extend(tally.limited(&class, SPOOF_LIMIT, provider, || {
            (0..SPOOF_LIMIT + 2)
                .map(|i| via(i, &[("X-Forwarded-For", client)]))
                .collect()
        }));
    }
    // 203.0.113.1 has used its quota. What it sends itself stands to the left of what the
    // proxy appends, and is never reached, wherever it names the proxy.
    let chains = [
        "127.0.0.2, 203.0.113.1",
        "127.0.0.2, 198.51.100.200, 203.0.113.1",
        "198.51.100.77, 203.0.113.1",
        "203.0.113.250, 127.0.0.2, 203.0.113.1",
        "2001:db8::77, 203.0.113.1",
    ];
    let class = "trusted proxy, client's own entries left of its address";
    fails.extend(tally.limited(class, 0, provider, || {
        chains
            .iter()
            .enumerate()
            .map(|(i, chain)| via(100 + i, &[("X-Forwarded-For", chain)]))
            .collect()
    }));
    // Only the configured header counts, even from the proxy.
    let class = "trusted proxy, other headers name fresh addresses";
    fails.extend(tally.limited(class, 0, provider, || {
        (0..3)
            .map(|i| {
                via(
                    200 + i,
                    &[
                        ("X-Forwarded-For", "203.0.113.1"),
                        ("CF-Connecting-IP", &format!("198.51.100.{}", 10 + i)),
                        ("X-Real-IP", &format!("198.51.100.{}", 20 + i)),
                    ],
                )
            })
            .collect()
    }));
    // Garbage from the proxy: the proxy itself is the client.
    let junk = ["unknown", "_hidden", "999.1.1.1", "203.0.113", "x, y", ""];
    let class = "trusted proxy, unreadable X-Forwarded-For";
    fails.extend(tally.limited(class, SPOOF_LIMIT, provider, || {
        (0..junk.len())
            .map(|i| via(300 + i, &[("X-Forwarded-For", junk[i])]))
            .collect()
    }));

    tally.print();
    let log = site.apache.log_since(0);
    assert!(!log.contains("panicked"), "{log}");
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// What the proxy's address, the header it sends, its value in request i, requests, admitted.
type HeaderBatch = (
    &'static str,
    &'static str,
    &'static str,
    fn(usize) -> String,
    usize,
    usize,
);

/// The limit per address of the forwarded-header test.
const HEADER_LIMIT: usize = 5;

#[test]
fn only_the_configured_header_from_a_trusted_proxy_names_the_client() {
    let d = direct("abuse-header", HEADER_LIMIT)
        .config(|c| {
            c["client"] = json!({
                "trusted_proxies": ["10.0.0.0/8", "2001:db8:ffff::/48"],
                "forwarded_header": "CF-Connecting-IP"
            });
        })
        .write();
    let mut tally = Tally::new(&format!(
        "forwarded_header CF-Connecting-IP, limit {HEADER_LIMIT} (direct CGI)"
    ));
    let mut fails = Vec::new();
    #[rustfmt::skip]
    let batches: [HeaderBatch; 5] = [
        ("proxy 10.0.0.1, X-Forwarded-For new each time", "10.0.0.1", "X-Forwarded-For", |i| format!("203.0.113.{i}"), 20, HEADER_LIMIT),
        ("proxy 10.0.0.2, CF-Connecting-IP new each time", "10.0.0.2", "CF-Connecting-IP", |i| format!("198.51.100.{i}"), 20, 20),
        ("proxy 10.0.0.3, CF-Connecting-IP ::ffff:a.b.c.d and a.b.c.d", "10.0.0.3", "CF-Connecting-IP", |i| ["::ffff:203.0.113.50", "203.0.113.50"][i % 2].to_string(), HEADER_LIMIT + 3, HEADER_LIMIT),
        ("untrusted 192.0.2.200, CF-Connecting-IP new each time", "192.0.2.200", "CF-Connecting-IP", |i| format!("203.0.113.{}", 100 + i), 10, HEADER_LIMIT),
        ("IPv6 proxy, CF-Connecting-IP rotating in one /64", "2001:db8:ffff::1", "CF-Connecting-IP", |i| format!("2001:db8:5:6::{:x}", i + 1), HEADER_LIMIT + 3, HEADER_LIMIT),
    ];
    for (class, from, header, value, n, want) in batches {
        fails.extend(tally.limited(class, want, &d.provider, || {
            (0..n)
                .map(|i| status_from(&d, from, i, &[(header, &value(i))]))
                .collect()
        }));
    }
    tally.finish(&fails);
}

// ---------------------------------------------------------------------------------------------
// IPv6 rotation: Apache on loopback cannot receive from many IPv6 addresses, so REMOTE_ADDR
// is set directly.

/// The limit per address (or prefix) of the IPv6 test.
const V6_LIMIT: usize = 5;

#[test]
fn ipv6_address_rotation_inside_one_prefix_is_one_client() {
    let d64 = direct("abuse-v6", V6_LIMIT).write();
    let d56 = direct("abuse-v6-56", V6_LIMIT)
        .config(|c| c["client"] = json!({"ipv6_prefix": 56}))
        .write();
    let mut tally = Tally::new(&format!(
        "IPv6 rotation and address spellings, limit {V6_LIMIT} (direct CGI)"
    ));
    let mut fails = Vec::new();
    // 100 addresses of 2001:db8:aaaa:1::/64, written every way a server might.
    let rotating: Vec<String> = (1..=100u32)
        .map(|i| {
            let (a, b, c) = (i * 7919 % 65536, i * 104_729 % 65536, i * 31);
            match i % 5 {
                0 => format!("2001:db8:aaaa:1:{a:x}:{b:x}:{c:x}:{i:x}"),
                1 => format!("2001:0DB8:AAAA:0001:{a:04X}:{b:04X}:{c:04X}:{i:04X}"),
                2 => format!("2001:db8:aaaa:1::{a:x}%eth0"),
                3 => format!("[2001:db8:aaaa:1::{b:x}]:443"),
                _ => format!("2001:db8:aaaa:1:{c:x}::{i:x}"),
            }
        })
        .collect();
    let per_64: Vec<String> = (0..30)
        .map(|i| format!("2001:db8:cccc:ab{i:02x}::1"))
        .collect();
    let alternating: Vec<String> = (0..V6_LIMIT + 3)
        .map(|i| ["::ffff:198.51.100.7", "198.51.100.7"][i % 2].to_string())
        .collect();
    let two_clients: Vec<String> = (0..2 * (V6_LIMIT + 1))
        .map(|i| if i <= V6_LIMIT { "::1" } else { "127.0.0.1" }.to_string())
        .collect();
    // (what, the configuration, admitted, the addresses in turn)
    #[rustfmt::skip]
    let batches: [(&str, &Setup, usize, Vec<String>); 6] = [
        ("100 addresses inside one /64", &d64, V6_LIMIT, rotating),
        ("another /64 (2001:db8:aaaa:2::1)", &d64, V6_LIMIT, vec!["2001:db8:aaaa:2::1".to_string(); V6_LIMIT + 2]),
        ("30 /64s of one /56, ipv6_prefix 64", &d64, 30, per_64.clone()),
        ("30 /64s of one /56, ipv6_prefix 56", &d56, V6_LIMIT, per_64),
        ("::ffff:198.51.100.7 and 198.51.100.7 alternately", &d64, V6_LIMIT, alternating),
        ("::1 then 127.0.0.1 (two clients)", &d64, 2 * V6_LIMIT, two_clients),
    ];
    for (class, d, want, addrs) in batches {
        fails.extend(tally.limited(class, want, &d.provider, || {
            addrs
                .iter()
                .enumerate()
                .map(|(i, a)| status_from(d, a, i, &[]))
                .collect()
        }));
    }
    tally.finish(&fails);
}

// ---------------------------------------------------------------------------------------------
// Hostile API keys.

/// Keys that name paths, each at most 256 bytes of printable ASCII: valid keys, which a
/// configuration without a key list accepts and counts by their hash.
fn traversal_keys(marker: &str) -> Vec<String> {
    vec![
        "../../../../../../../../etc/passwd".to_string(),
        "..%2f..%2f..%2f..%2fetc%2fpasswd".to_string(),
        "%2e%2e%2f%2e%2e%2fetc%2fpasswd".to_string(),
        "..\\..\\..\\windows\\win.ini".to_string(),
        "....//....//....//etc/passwd".to_string(),
        "%00../../etc/passwd".to_string(),
        "/etc/passwd".to_string(),
        "file:///etc/passwd".to_string(),
        "~root/.ssh/authorized_keys".to_string(),
        format!("/tmp/{marker}"),
        format!("../../{marker}"),
        format!("../../../../../../../../tmp/{marker}"),
        format!("./{marker}/../../../x"),
        "..".to_string(),
        ".".to_string(),
        "/".to_string(),
    ]
}

/// Every file under `dir`, relative to it, but the usage journal's: `journal/h<HOUR>-<SHARD>`
/// (an hour and a client shard, one hex digit), `journal/d<DAY>` and `journal/notes`, its
/// spool's `journal-spool/<SECOND>`, the store's count of its shards' entries and the
/// remembered refusals, whose names hold nothing a request sent (any other name there is kept,
/// to be reported).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let journal_file = |p: &Path| {
        let parts: Vec<String> = p
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let spooled = parts.len() == 2
            && parts[0] == resolve::support::defaults::JOURNAL_SPOOL_DIR
            && digits(&parts[1]);
        spooled
            || parts.len() == 2
                && parts[0] == "journal"
                && match parts[1].split_once('-') {
                    Some((hour, shard)) => {
                        hour.strip_prefix('h').is_some_and(digits)
                            && shard.len() == 1
                            && shard.bytes().all(|b| b.is_ascii_hexdigit())
                    }
                    None => parts[1] == "notes" || parts[1].strip_prefix('d').is_some_and(digits),
                }
    };
    // The store's count of its shards' entries, one file beside them; the refusals this server
    // remembers, one file of fixed slots.
    let count_file = |p: &Path| {
        p == Path::new(resolve::support::defaults::FILE_STORE_COUNT_FILE)
            || p == Path::new(resolve::support::defaults::REFUSALS_FILE)
    };
    temp::files_under(dir)
        .into_iter()
        .map(|p| p.strip_prefix(dir).expect("under dir").to_path_buf())
        .filter(|p| !journal_file(p) && !count_file(p))
        .collect()
}

/// What is wrong beside the data directory of a site in `dir`: it must hold only config.json
/// and the store's mark beside the data directory (`.ratelimit.made`, the program's own file).
fn files_beside_data(dir: &Path) -> Option<String> {
    let mark = PathBuf::from(format!(
        ".ratelimit{}",
        resolve::support::defaults::DATA_DIR_MARK_SUFFIX
    ));
    let outside: Vec<PathBuf> = files_under(dir)
        .into_iter()
        .filter(|f| !f.starts_with("ratelimit") && *f != mark)
        .collect();
    (outside != [PathBuf::from("config.json")])
        .then(|| format!("files beside the data directory: {outside:?}"))
}

/// Files of the data directory that are not `ab/abcdef…` (64 hex digits in the shard of its
/// first two).
fn unexpected_store_files(files: &[PathBuf]) -> Vec<PathBuf> {
    files
        .iter()
        .filter(|f| {
            let parts: Vec<String> = f
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            !(parts.len() == 2
                && parts[1].len() == 64
                && parts[1]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                && parts[1].starts_with(&parts[0]))
        })
        .cloned()
        .collect()
}

/// `base/rel` with `.` and `..` resolved by name, as an open() through them would go.
fn lexical(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The paths a key naming `marker` leads to from any of `bases`, resolved by name.
fn marker_paths(marker: &str, keys: &[String], bases: &[PathBuf]) -> BTreeSet<PathBuf> {
    keys.iter()
        .filter(|k| k.contains(marker))
        .flat_map(|k| bases.iter().map(move |b| lexical(b, k)))
        .collect()
}

/// What is at each of `paths` now, that exists: its modification time.
fn snapshot(paths: &BTreeSet<PathBuf>) -> BTreeMap<PathBuf, Option<SystemTime>> {
    paths
        .iter()
        .filter_map(|p| {
            let meta = fs::symlink_metadata(p).ok()?;
            Some((p.clone(), meta.modified().ok()))
        })
        .collect()
}

/// The files a key naming `marker` made or changed since `before` (taken before the requests
/// over `bases`, or more), and anywhere two levels down the temp directory a name holding the
/// marker: what the program did, never what the machine already held (a `/tmp/x`).
fn marker_files(
    marker: &str,
    keys: &[String],
    bases: &[PathBuf],
    before: &BTreeMap<PathBuf, Option<SystemTime>>,
) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = snapshot(&marker_paths(marker, keys, bases))
        .into_iter()
        .filter(|(p, modified)| before.get(p) != Some(modified))
        .map(|(p, _)| p)
        .collect();
    // The marker holds this test's process id: no name in the temp directory holds it before.
    let tmp = std::env::temp_dir();
    for e in fs::read_dir(&tmp).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().contains(marker) {
            found.push(e.path());
        }
        if e.path().is_dir() {
            for f in fs::read_dir(e.path()).into_iter().flatten().flatten() {
                if f.file_name().to_string_lossy().contains(marker) {
                    found.push(f.path());
                }
            }
        }
    }
    found
}

/// Keys: what they are, what the table says of them, the keys with their labels, and what a
/// wrong answer to one of them is (what was expected instead).
type KeyBatch = (
    &'static str,
    &'static str,
    Vec<(String, Vec<u8>)>,
    fn(&Exchange) -> Option<&'static str>,
);

/// Generous limits per address and per API key.
fn key_rules() -> Vec<Value> {
    vec![
        rule("ip", "ip", 100_000, 600),
        rule("key", "api_key", 100_000, 600),
    ]
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn api_keys_that_try_path_traversal_or_huge_lengths_stay_out_of_the_filesystem() {
    let marker = format!("resolve-abuse-pwned-{}", std::process::id());
    let site = site("abuse-keys", GENEROUS)
        .rules(key_rules())
        // No key list: every well-formed key is accepted and counted by its hash.
        .config(|c| c["api_keys"] = json!({"require": true}))
        .start();
    let mut tally = Tally::for_site("API keys through Apache, no key list", &site);
    // Where a key could lead, before any is sent: from the data directory, from every shard
    // of it the requests may make (two hex digits), from cgi-bin and from the root.
    let cgi_bin = site.apache.dir().join("cgi-bin");
    let mut bases = vec![site.data.clone(), cgi_bin.clone(), PathBuf::from("/")];
    bases.extend((0..=255u8).map(|b| site.data.join(format!("{b:02x}"))));
    let before = snapshot(&marker_paths(&marker, &traversal_keys(&marker), &bases));
    let mut fails = Vec::new();
    let client = site.apache.client();
    let log_from = site.apache.log_len();
    let send = |i: usize, key: &[u8]| {
        exchange(
            &client,
            &raw_get(
                target(i).as_bytes(),
                &[("X-API-Key", key), ("Accept", b"application/json")],
            ),
        )
    };

    // Three batches of keys.
    let traversal = traversal_keys(&marker);
    let malformed: Vec<(&str, Vec<u8>)> = vec![
        ("258 bytes of ../", "../".repeat(86).into_bytes()),
        ("8000 bytes", vec![b'k'; 8000]),
        ("not UTF-8", b"../../\xff\xfe/etc/passwd".to_vec()),
        (
            "U+2028 inside",
            "../..\u{2028}/etc/passwd".as_bytes().to_vec(),
        ),
        ("space inside", b"../.. /etc/passwd".to_vec()),
    ];
    let refused_by_apache: Vec<(&str, Vec<u8>)> = vec![
        ("64 KiB", vec![b'k'; 64 * 1024]),
        ("NUL inside", b"../..\0/etc/passwd".to_vec()),
        ("ESC inside", b"../..\x1b/etc/passwd".to_vec()),
    ];
    let labelled = |what: &str, keys: &[(&str, Vec<u8>)]| -> Vec<(String, Vec<u8>)> {
        keys.iter()
            .map(|(name, key)| (format!("{what} ({name})"), key.clone()))
            .collect()
    };
    let batches: Vec<KeyBatch> = vec![
        (
            "path-like keys (printable, <= 256 bytes)",
            "accepted, counted by hash",
            traversal
                .iter()
                .map(|k| (format!("traversal key {k:?}"), k.clone().into_bytes()))
                .collect(),
            |ex| (ex.status() != 200).then_some("expected 200 (counted by hash)"),
        ),
        (
            "malformed keys (long, not UTF-8, not printable)",
            "401 invalid_api_key",
            labelled("malformed key", &malformed),
            |ex| {
                let challenge = ex
                    .response
                    .as_ref()
                    .and_then(|r| r.header("WWW-Authenticate"))
                    .is_some();
                (ex.status() != 401
                    || !ex.by_program()
                    || ex.code() != "invalid_api_key"
                    || !challenge)
                    .then_some("expected 401 invalid_api_key with WWW-Authenticate")
            },
        ),
        (
            "keys Apache refuses (64 KiB, NUL, ESC)",
            "400 from Apache; program not run",
            labelled("key", &refused_by_apache),
            |ex| {
                (ex.status() != 400 || ex.by_program()).then_some(
                    "expected Apache's own 400 (LimitRequestFieldSize, control characters)",
                )
            },
        ),
    ];
    let mut paid = Vec::new();
    for (n, (class, note, keys, wrong)) in batches.into_iter().enumerate() {
        let before = site.provider.calls();
        let mut got = Vec::new();
        for (i, (label, key)) in keys.iter().enumerate() {
            let ex = send(100 * n + i, key);
            if let Some(expected) = wrong(&ex) {
                fails.push(format!("{label}: {expected}:\n{}", ex.describe()));
            }
            got.push(ex.status());
        }
        paid.push(site.provider.calls() - before);
        tally.add(class, &got, paid[n], note);
    }
    if paid[0] != traversal.len() {
        fails.push(format!(
            "{} provider calls for {} keys",
            paid[0],
            traversal.len()
        ));
    }

    // One log line per refusal by the program, and never the key.
    let log = site.apache.log_since(log_from);
    fails.extend(log_problems(&log));
    if program_lines(&log) != malformed.len() {
        fails.push(format!(
            "{} program log lines for {} refused keys:\n{log}",
            program_lines(&log),
            malformed.len()
        ));
    }
    for secret in ["passwd", "win.ini", "authorized_keys", marker.as_str()] {
        if log.contains(secret) {
            fails.push(format!("key text {secret:?} in the log:\n{log}"));
        }
    }
    if log.contains("panicked") {
        fails.push(format!("panic:\n{log}"));
    }

    // The data directory holds only hash-named files: one per accepted key and one for the
    // address; nothing else appeared anywhere.
    let files = files_under(&site.data);
    let odd = unexpected_store_files(&files);
    if !odd.is_empty() {
        fails.push(format!("unexpected files in the data directory: {odd:?}"));
    }
    if files.len() != traversal.len() + 1 {
        fails.push(format!(
            "{} files in the data directory, expected {} (one per key, one for the address): {files:?}",
            files.len(),
            traversal.len() + 1
        ));
    }
    fails.extend(files_beside_data(site.dir.path()));
    if files_under(&cgi_bin) != [PathBuf::from("resolve")] {
        fails.push(format!("cgi-bin holds {:?}", files_under(&cgi_bin)));
    }
    let mut bases = vec![site.data.clone(), cgi_bin, PathBuf::from("/")];
    bases.extend(files.iter().filter_map(|f| {
        f.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| site.data.join(p))
    }));
    let planted = marker_files(&marker, &traversal, &bases, &before);
    if !planted.is_empty() {
        fails.push(format!("files named by a key: {planted:?}"));
    }
    tally.add(
        "files in the data directory afterwards",
        &[],
        0,
        &format!("{} (all sha-named), nothing elsewhere", files.len()),
    );

    tally.finish(&fails);
}

const PARTNER: &str = "partner-key-7d1e";

/// Checks a key's refusal: 401 with this code, one log line, without the key's text.
fn key_refusal_problems(
    what: &str,
    code: &str,
    stdout: &[u8],
    stderr: &str,
    secrets: &[&str],
) -> Vec<String> {
    let mut fails = cgi_answer_problems(stdout);
    let got = Response::parse_cgi(stdout).map(|a| {
        let json: Value = serde_json::from_slice(&a.body).unwrap_or_default();
        (a.status, json["code"].clone())
    });
    if got.as_ref().ok() != Some(&(401, json!(code))) {
        fails.push(format!(
            "{what}: expected 401 {code}, got {got:?}\n{stderr}"
        ));
    }
    let lines: Vec<&str> = stderr.lines().collect();
    if lines.len() != 1 || !lines[0].starts_with("resolve: warn: 401 ") {
        fails.push(format!("{what}: expected one log line, got {stderr:?}"));
    }
    fails.extend(log_problems(stderr));
    for secret in secrets {
        if stderr.contains(secret) {
            fails.push(format!(
                "{what}: key text {secret:?} in the log: {stderr:?}"
            ));
        }
    }
    fails
}

#[test]
fn hostile_api_keys_run_directly_as_cgi_and_fastcgi() {
    let marker = format!("resolve-abuse-pwned-direct-{}", std::process::id());
    let d = direct("abuse-keys-direct", GENEROUS)
        .rules(key_rules())
        .config(|c| {
            c["api_keys"] = json!({"require": true, "keys": [
                {"name": "partner", "sha256": resolve::http::api_key::hash(PARTNER)}
            ]});
        })
        .write();
    let mut tally = Tally::new("API keys run directly, a key list of one");
    let mut fails = Vec::new();
    let get = |key: OsString| {
        Cgi::new("GET", q(VALID))
            .var("HTTP_X_API_KEY", key)
            .header("Accept", "application/json")
    };
    let secrets = ["passwd", "win.ini", marker.as_str(), "kkkkkkkk"];
    let traversal = traversal_keys(&marker);
    let bases = [d.data.clone(), PathBuf::from("/")];
    let before = snapshot(&marker_paths(&marker, &traversal, &bases));
    let mut got = Vec::new();
    for key in &traversal {
        let out = run(&d, get(key.into()));
        fails.extend(key_refusal_problems(
            &format!("CGI key {key:?}"),
            "unknown_api_key",
            &out.stdout,
            &out.stderr,
            &secrets,
        ));
        got.push(out.answer.as_ref().map_or(0, |a| a.status));
    }
    tally.add("CGI: path-like keys", &got, 0, "401 unknown_api_key");
    // The longest value one environment variable can hold is 128 KiB (MAX_ARG_STRLEN).
    let long = 120 * 1024;
    let mut got = Vec::new();
    for (what, key) in [
        ("CGI: 120 KiB key", vec![b'k'; long]),
        ("CGI: non-UTF-8 key", b"../../\xff\xfe/etc/passwd".to_vec()),
        (
            "CGI: key with ESC, DEL, CR LF",
            b"../..\x1b\x7f\r\nX: 1".to_vec(),
        ),
    ] {
        let out = run(&d, get(OsString::from_vec(key)));
        fails.extend(key_refusal_problems(
            what,
            "invalid_api_key",
            &out.stdout,
            &out.stderr,
            &secrets,
        ));
        if what.contains("KiB") && !out.stderr.contains(&format!("({long} bytes)")) {
            fails.push(format!(
                "{what}: the log does not give its length: {:?}",
                out.stderr
            ));
        }
        got.push(out.answer.as_ref().map_or(0, |a| a.status));
    }
    tally.add(
        "CGI: 120 KiB, non-UTF-8, control characters",
        &got,
        0,
        "401 invalid_api_key",
    );

    // FastCGI parameters have no such limit, and may hold NUL.
    let process = FcgiProcess::start(&d.config_path);
    let mut got = Vec::new();
    for (what, key, code) in [
        (
            "FastCGI: 1 MiB key",
            vec![b'k'; 1024 * 1024],
            "invalid_api_key",
        ),
        (
            "FastCGI: NUL inside",
            b"../..\0/etc/passwd".to_vec(),
            "invalid_api_key",
        ),
        ("FastCGI: NUL alone", b"\0".to_vec(), "invalid_api_key"),
        (
            "FastCGI: path-like key",
            b"../../etc/passwd".to_vec(),
            "unknown_api_key",
        ),
    ] {
        let before = process.stderr().len();
        let answer = process.send(
            &FcgiRequest::new("GET", &q(VALID))
                .var("HTTP_X_API_KEY", &key)
                .var("HTTP_ACCEPT", "application/json"),
        );
        let stderr = process.stderr()[before..].to_string();
        fails.extend(key_refusal_problems(
            what,
            code,
            &answer.stdout,
            &stderr,
            &secrets,
        ));
        got.push(Response::parse_cgi(&answer.stdout).map_or(0, |a| a.status));
    }
    tally.add("FastCGI: 1 MiB, NUL, path-like", &got, 0, "401");

    // The listed key works, by both ways.
    let out = run(&d, get(PARTNER.into()));
    let fcgi = process.send(&FcgiRequest::new("GET", &q(VALID)).var("HTTP_X_API_KEY", PARTNER));
    let got = [
        out.answer.as_ref().map_or(0, |a| a.status),
        Response::parse_cgi(&fcgi.stdout).map_or(0, |a| a.status),
    ];
    tally.add(
        "the listed key (CGI, FastCGI)",
        &got,
        d.provider.calls(),
        "",
    );
    if got != [200, 200] || d.provider.calls() != 2 {
        fails.push(format!(
            "the listed key: {got:?}, {} provider calls\n{}",
            d.provider.calls(),
            out.describe()
        ));
    }
    drop(process);

    let files = files_under(&d.data);
    let odd = unexpected_store_files(&files);
    if !odd.is_empty() || files.len() != 2 {
        fails.push(format!(
            "data directory holds {files:?}: expected two sha-named files (the address, the key)"
        ));
    }
    fails.extend(files_beside_data(d.dir.path()));
    let planted = marker_files(&marker, &traversal, &bases, &before);
    if !planted.is_empty() {
        fails.push(format!("files named by a key: {planted:?}"));
    }
    tally.finish(&fails);
}

// ---------------------------------------------------------------------------------------------
// Control characters in every input that could reach a header or a log line.

/// Characters that could split a header or a log line, or mislead whoever reads one. NUL is
/// added where the way in can carry it.
const HOSTILE: &[(&str, &str)] = &[
    ("CR", "\r"),
    ("LF", "\n"),
    (
        "CRLF+headers",
        "\r\nX-Injected: 1\r\nSet-Cookie: pwned=1\r\n",
    ),
    ("obs-fold", "\r\n X-Injected: 1"),
    ("TAB", "\t"),
    ("ESC", "\u{1b}[2J"),
    ("DEL", "\u{7f}"),
    ("NEL", "\u{85}"),
    ("U+2028", "\u{2028}"),
    ("U+2029", "\u{2029}"),
    ("U+202E", "\u{202e}"),
];

const NUL: (&str, &str) = ("NUL", "\0");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Link,
    LinkRaw,
    ParamName,
    ParamNameRaw,
    ApiKey,
    ForwardedFor,
    UserAgent,
    Referer,
    Origin,
    Accept,
    ContentType,
    ContentLength,
    RemoteAddr,
}

/// Every field, run directly.
const DIRECT: &[Field] = &[
    Field::Link,
    Field::LinkRaw,
    Field::ParamName,
    Field::ParamNameRaw,
    Field::ApiKey,
    Field::ForwardedFor,
    Field::UserAgent,
    Field::Referer,
    Field::Origin,
    Field::Accept,
    Field::ContentType,
    Field::ContentLength,
    Field::RemoteAddr,
];

/// Through Apache: every field but the three that Apache sets itself, which come last.
const THROUGH_APACHE: &[Field] = DIRECT.split_at(DIRECT.len() - 3).0;

fn cat(a: &[u8], b: &[u8], c: &[u8]) -> Vec<u8> {
    [a, b, c].concat()
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Link => "link (percent-encoded)",
            Field::LinkRaw => "link (raw in the query)",
            Field::ParamName => "query parameter name (encoded)",
            Field::ParamNameRaw => "query parameter name (raw)",
            Field::ApiKey => "X-API-Key",
            Field::ForwardedFor => "X-Forwarded-For (trusted peer)",
            Field::UserAgent => "User-Agent",
            Field::Referer => "Referer",
            Field::Origin => "Origin",
            Field::Accept => "Accept",
            Field::ContentType => "CONTENT_TYPE (POST)",
            Field::ContentLength => "CONTENT_LENGTH (POST)",
            Field::RemoteAddr => "REMOTE_ADDR",
        }
    }

    /// For header-like fields: the CGI variable, the request header, and the text around
    /// the payload (inside a value, where trimming cannot remove it).
    fn place(self) -> Option<(&'static str, &'static str, &'static str, &'static str)> {
        Some(match self {
            Field::ApiKey => ("HTTP_X_API_KEY", "X-API-Key", "good", "key"),
            Field::ForwardedFor => ("HTTP_X_FORWARDED_FOR", "X-Forwarded-For", "203.0.113.", "9"),
            Field::UserAgent => ("HTTP_USER_AGENT", "User-Agent", "Mozilla/5.0 ", " (X11)"),
            Field::Referer => ("HTTP_REFERER", "Referer", "https://mysite", ".example/page"),
            Field::Origin => ("HTTP_ORIGIN", "Origin", "https://mysite", ".example"),
            Field::Accept => ("HTTP_ACCEPT", "Accept", "application/", "json"),
            Field::ContentType => ("CONTENT_TYPE", "", "application/x-www-form-", "urlencoded"),
            Field::ContentLength => ("CONTENT_LENGTH", "", "4", "2"),
            Field::RemoteAddr => ("REMOTE_ADDR", "", "192.0.2.", "1"),
            _ => return None,
        })
    }

    /// For query fields: the query string carrying `p`.
    fn query(self, p: &[u8]) -> Option<Vec<u8>> {
        let valid = q(VALID);
        Some(match self {
            Field::Link => format!(
                "link={}",
                encode_bytes(&cat(b"https://example.com/a", p, b"b"))
            )
            .into_bytes(),
            Field::LinkRaw => cat(b"link=https://example.com/a", p, b"b"),
            Field::ParamName => {
                format!("{}=1&{valid}", encode_bytes(&cat(b"x", p, b"y"))).into_bytes()
            }
            Field::ParamNameRaw => cat(b"x", p, format!("y=1&{valid}").as_bytes()),
            _ => return None,
        })
    }

    /// The program's answer with `p` in this field.
    fn expected(self, p: &str) -> u16 {
        match self {
            Field::Link | Field::LinkRaw => {
                if p.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    400
                } else {
                    200
                }
            }
            Field::ParamName
            | Field::ParamNameRaw
            | Field::ForwardedFor
            | Field::UserAgent
            | Field::Accept => 200,
            Field::ApiKey => 401,
            Field::Referer | Field::Origin => 403,
            Field::ContentType => 415,
            Field::ContentLength | Field::RemoteAddr => 400,
        }
    }

    /// For a raw query cut at a CR LF: the answer to what is left of it.
    fn cut_at_line_end(self) -> Option<u16> {
        match self {
            // `link=https://example.com/a`: a valid link.
            Field::LinkRaw => Some(200),
            // `x`: no link.
            Field::ParamNameRaw => Some(400),
            _ => None,
        }
    }

    fn is_post(self) -> bool {
        matches!(self, Field::ContentType | Field::ContentLength)
    }
}

/// The site every control-character request goes to: other sites' pages refused (so Origin
/// and Referer are read), the peer trusted as a proxy (so X-Forwarded-For is read), keys
/// optional (so X-API-Key is read).
fn control_config(c: &mut Value) {
    c["allowed_origins"] = json!(["https://mysite.example"]);
    c["client"] = json!({"trusted_proxies": ["127.0.0.1"]});
    c["api_keys"] = json!({"require": false});
}

fn apache_request(field: Field, p: &[u8]) -> Vec<u8> {
    let json: &[u8] = b"application/json";
    if let Some(query) = field.query(p) {
        return raw_get(&cat(b"/cgi-bin/resolve?", &query, b""), &[("Accept", json)]);
    }
    let (_, header, pre, post) = field.place().expect("a header field");
    let value = cat(pre.as_bytes(), p, post.as_bytes());
    let mut headers: Vec<(&str, &[u8])> = vec![(header, &value)];
    if field != Field::Accept {
        headers.push(("Accept", json));
    }
    raw_get(
        format!("/cgi-bin/resolve?{}", q(VALID)).as_bytes(),
        &headers,
    )
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn control_characters_never_split_a_header_or_a_log_line_through_apache() {
    let site = site("abuse-ctl", GENEROUS).config(control_config).start();
    let client = site.apache.client();
    let mut tally = Tally::for_site(
        &format!(
            "control characters through Apache, {} kinds each",
            HOSTILE.len() + 1
        ),
        &site,
    );
    let mut fails = Vec::new();
    let log_from = site.apache.log_len();
    let mut refusals = 0;
    for &field in THROUGH_APACHE {
        let mut got = Vec::new();
        let mut by_apache = Vec::new();
        let mut http09 = Vec::new();
        let before = site.provider.calls();
        for (name, p) in HOSTILE.iter().chain([&NUL]) {
            let calls = site.provider.calls();
            let ex = exchange(&client, &apache_request(field, p.as_bytes()));
            let what = format!("{} with {name}", field.name());
            let new_calls = || site.provider.calls() - calls;
            // A raw CR LF ends the request line early: Apache (HttpProtocolOptions Allow0.9,
            // its default) serves what came before as an HTTP/0.9 request, whose answer is the
            // body alone, without a status line or headers.
            if !ex.raw.starts_with(b"HTTP/") {
                let cut = field.cut_at_line_end();
                let body = String::from_utf8_lossy(&ex.raw).into_owned();
                let matches = match cut {
                    Some(200) => body.starts_with("https://cdn.test/") && new_calls() == 1,
                    Some(_) => body == "Paste a link first.\n" && new_calls() == 0,
                    None => false,
                };
                if !p.contains("\r\n") || !matches {
                    fails.push(format!(
                        "{what}: an answer without status line: {body:?}, {} provider calls",
                        new_calls()
                    ));
                }
                if body.to_ascii_lowercase().contains("injected") || body.contains("pwned") {
                    fails.push(format!("{what}: request text in the answer {body:?}"));
                }
                let status = cut.unwrap_or(0);
                refusals += usize::from(status >= 400);
                http09.push(*name);
                got.push(status);
                continue;
            }
            for problem in head_problems(&ex.raw) {
                fails.push(format!("{what}: {problem}\n{}", ex.describe()));
            }
            let want = if ex.by_program() {
                field.expected(p)
            } else {
                by_apache.push(*name);
                400
            };
            if ex.status() != want {
                fails.push(format!(
                    "{what}: status {}, expected {want}\n{}",
                    ex.status(),
                    ex.describe()
                ));
            }
            if new_calls() != usize::from(ex.status() == 200) {
                fails.push(format!("{what}: {} provider calls", new_calls()));
            }
            if ex.by_program() && ex.status() >= 400 {
                refusals += 1;
            }
            got.push(ex.status());
        }
        let mut notes = Vec::new();
        if !by_apache.is_empty() {
            notes.push(format!("Apache 400: {}", by_apache.join(" ")));
        }
        if !http09.is_empty() {
            notes.push(format!("HTTP/0.9 cut: {}", http09.join(" ")));
        }
        let note = notes.join("; ");
        tally.add(field.name(), &got, site.provider.calls() - before, &note);
    }
    let log = site.apache.log_since(log_from);
    for problem in log_problems(&log) {
        fails.push(problem);
    }
    if program_lines(&log) != refusals {
        fails.push(format!(
            "{} program log lines for {refusals} refusals:\n{log}",
            program_lines(&log)
        ));
    }
    tally.add(
        "error_log lines written",
        &[],
        0,
        &format!(
            "{} by the program, {} by Apache; all single lines",
            program_lines(&log),
            log.lines().count() - program_lines(&log)
        ),
    );
    tally.finish(&fails);
}

/// One request with `p` in `field`, as the variables and body a server would pass.
struct Spec {
    method: &'static str,
    query: Vec<u8>,
    vars: Vec<(String, Vec<u8>)>,
    body: Option<Vec<u8>>,
}

fn spec(field: Field, p: &[u8]) -> Spec {
    let mut s = Spec {
        method: if field.is_post() { "POST" } else { "GET" },
        query: if field.is_post() {
            Vec::new()
        } else {
            q(VALID).into_bytes()
        },
        vars: vec![("HTTP_ACCEPT".to_string(), b"application/json".to_vec())],
        body: field.is_post().then(|| q(VALID).into_bytes()),
    };
    if let Some(query) = field.query(p) {
        s.query = query;
    }
    if let Some((var, _, pre, post)) = field.place() {
        s.vars
            .push((var.to_string(), cat(pre.as_bytes(), p, post.as_bytes())));
    }
    s
}

impl Spec {
    fn cgi(&self) -> Cgi {
        let mut c = Cgi::new(self.method, OsString::from_vec(self.query.clone()));
        if let Some(body) = &self.body {
            c = c.form(body.clone());
        }
        for (k, v) in &self.vars {
            c = c.var(k, OsString::from_vec(v.clone()));
        }
        c
    }

    fn fcgi(&self) -> FcgiRequest {
        let mut r = FcgiRequest::new(self.method, "").var("QUERY_STRING", &self.query);
        if let Some(body) = &self.body {
            r.body = body.clone();
            r = r
                .var("CONTENT_TYPE", FORM)
                .var("CONTENT_LENGTH", body.len().to_string());
        }
        for (k, v) in &self.vars {
            r = r.var(k, v);
        }
        r
    }
}

/// Checks one direct answer: a valid CGI answer with nothing injected, the expected status,
/// one log line per refusal, escaped.
fn check_direct(what: &str, want: u16, stdout: &[u8], stderr: &str) -> Vec<String> {
    let mut fails: Vec<String> = cgi_answer_problems(stdout)
        .into_iter()
        .map(|p| format!("{what}: {p}"))
        .collect();
    let status = Response::parse_cgi(stdout).map_or(0, |a| a.status);
    if status != want {
        fails.push(format!(
            "{what}: status {status}, expected {want}\n{}\n{stderr}",
            String::from_utf8_lossy(stdout)
        ));
    }
    fails.extend(
        log_problems(stderr)
            .into_iter()
            .map(|p| format!("{what}: {p}")),
    );
    let lines = stderr.lines().count();
    if lines != usize::from(want >= 400) || stderr.contains("panicked") {
        fails.push(format!("{what}: {lines} log lines: {stderr:?}"));
    }
    fails
}

#[test]
fn control_characters_run_directly_as_cgi_and_fastcgi() {
    let d = direct("abuse-ctl-direct", GENEROUS)
        .config(control_config)
        .write();
    let process = FcgiProcess::start(&d.config_path);
    let mut tally = Tally::new("control characters run directly (CGI; FastCGI with NUL)");
    let mut fails = Vec::new();
    for &field in DIRECT {
        let mut got = Vec::new();
        let before = d.provider.calls();
        for (name, p) in HOSTILE.iter().chain([&NUL]) {
            // Line separators in REMOTE_ADDR: see the test below.
            if field == Field::RemoteAddr && p.contains(['\u{2028}', '\u{2029}']) {
                continue;
            }
            let want = field.expected(p);
            let request = spec(field, p.as_bytes());
            // An environment variable cannot hold NUL: FastCGI only.
            if *name != "NUL" {
                let calls = d.provider.calls();
                let out = run(&d, request.cgi());
                let what = format!("CGI, {} with {name}", field.name());
                fails.extend(check_direct(&what, want, &out.stdout, &out.stderr));
                if d.provider.calls() - calls != usize::from(want == 200) {
                    fails.push(format!("{what}: provider calls"));
                }
                got.push(out.answer.as_ref().map_or(0, |a| a.status));
            }
            let calls = d.provider.calls();
            let before_log = process.stderr().len();
            let answer = process.send(&request.fcgi());
            let stderr = process.stderr()[before_log..].to_string();
            let what = format!("FastCGI, {} with {name}", field.name());
            fails.extend(check_direct(&what, want, &answer.stdout, &stderr));
            if d.provider.calls() - calls != usize::from(want == 200) {
                fails.push(format!("{what}: provider calls"));
            }
            got.push(Response::parse_cgi(&answer.stdout).map_or(0, |a| a.status));
        }
        tally.add(field.name(), &got, d.provider.calls() - before, "");
    }

    // A link reaches the log when the provider call fails: quoted, its odd characters escaped.
    let dead = direct("abuse-ctl-dead", GENEROUS)
        .config(control_config)
        .config(|c| c["provider"]["url"] = json!("http://127.0.0.1:1/unrestrict"))
        .write();
    let link = "https://example.com/a\u{202e}b\u{200b}c\u{feff}d";
    let out = run(
        &dead,
        Cgi::new("GET", q(link)).header("Accept", "application/json"),
    );
    fails.extend(check_direct(
        "link with invisible characters, provider down",
        502,
        &out.stdout,
        &out.stderr,
    ));
    if out.stderr.contains(['\u{202e}', '\u{200b}', '\u{feff}']) {
        fails.push(format!(
            "raw invisible characters in the log: {:?}",
            out.stderr
        ));
    }
    tally.add(
        "link with U+202E U+200B U+FEFF, provider down",
        &[out.answer.as_ref().map_or(0, |a| a.status)],
        0,
        "logged with escapes",
    );
    tally.finish(&fails);
}

/// The Unicode line and paragraph separators (U+2028, U+2029), which log viewers and editors
/// show as line breaks, are escaped in log lines like the control characters. REMOTE_ADDR is
/// the request value that is written to the log as it came; Apache sets it, other front ends
/// may pass on what they were sent.
#[test]
fn unicode_line_separators_in_a_logged_value_are_escaped() {
    let d = direct("abuse-u2028", GENEROUS)
        .config(control_config)
        .write();
    let mut fails = Vec::new();
    for p in ["\u{2028}", "\u{2029}"] {
        let out = run(
            &d,
            Cgi::new("GET", q(VALID))
                .var(
                    "REMOTE_ADDR",
                    format!("192.0.2.1{p}resolve: error: forged line"),
                )
                .header("Accept", "application/json"),
        );
        fails.extend(check_direct(
            &format!(
                "REMOTE_ADDR with U+{:04X}",
                p.chars().next().map_or(0, u32::from)
            ),
            400,
            &out.stdout,
            &out.stderr,
        ));
    }
    assert!(fails.is_empty(), "{}", fails.join("\n\n"));
}

// ---------------------------------------------------------------------------------------------
// Oversized query strings.

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn oversized_query_strings() {
    let site = site("abuse-query", GENEROUS).start();
    let client = site.apache.client();
    let mut tally = Tally::for_site("oversized query strings", &site);
    let mut fails = Vec::new();
    let log_from = site.apache.log_len();
    let valid = q(VALID);
    // "GET " + target + " HTTP/1.1": a request line of exactly `len` bytes.
    let line_of = |len: usize| {
        let fixed = "GET /cgi-bin/resolve?".len() + valid.len() + "&pad=".len() + " HTTP/1.1".len();
        format!("/cgi-bin/resolve?{valid}&pad={}", "a".repeat(len - fixed))
    };
    let seven_k = 7 * 1024;
    let long_link = format!("https://example.com/{}", "a".repeat(seven_k));
    let cases: Vec<(&str, Request, u16, bool)> = vec![
        (
            "request line of 8191 bytes",
            Request::get(&line_of(8191)),
            200,
            true,
        ),
        (
            "request line of 8192 bytes",
            Request::get(&line_of(8192)),
            414,
            false,
        ),
        (
            "request line of 64 KiB",
            Request::get(&line_of(64 * 1024)),
            414,
            false,
        ),
        (
            "7 KiB query: link and padding",
            Request::get(&format!(
                "/cgi-bin/resolve?{valid}&pad={}",
                "a".repeat(seven_k)
            )),
            200,
            true,
        ),
        (
            "7 KiB link",
            Request::get(&format!("/cgi-bin/resolve?{}", q(&long_link))),
            400,
            true,
        ),
        (
            "7 KiB: 1792 parameters, then the link",
            Request::get(&format!("/cgi-bin/resolve?{}{valid}", "a=1&".repeat(1792))),
            200,
            true,
        ),
        (
            "7 KiB: the link parameter 170 times, each another link",
            Request::get(&format!(
                "/cgi-bin/resolve?{}",
                (0..170)
                    .map(|i| format!("{valid}{i}"))
                    .collect::<Vec<_>>()
                    .join("&")
            )),
            400,
            true,
        ),
        (
            "7 KiB: %ff escapes in another parameter",
            Request::get(&format!(
                "/cgi-bin/resolve?x={}&{valid}",
                "%ff".repeat(2400)
            )),
            200,
            true,
        ),
        (
            "7 KiB: %41 escapes making a 2420-byte link",
            Request::get(&format!(
                "/cgi-bin/resolve?link=https%3A%2F%2Fexample.com%2F{}",
                "%41".repeat(2400)
            )),
            400,
            true,
        ),
        (
            "HEAD with a 7 KiB query",
            Request::head(&format!(
                "/cgi-bin/resolve?{valid}&pad={}",
                "a".repeat(seven_k)
            )),
            200,
            true,
        ),
        (
            "POST form with a 7 KiB query",
            Request::post_form(
                &format!("/cgi-bin/resolve?pad={}", "a".repeat(seven_k)),
                valid.clone(),
            ),
            200,
            true,
        ),
    ];
    let mut refusals = 0;
    for (name, req, want, by_program) in cases {
        let paid = usize::from(want == 200 && req.method != "HEAD");
        let calls = site.provider.calls();
        let r = client.send(&req.header("Accept", "application/json"));
        let status = r.as_ref().map_or(0, |r| r.status);
        let from_program = r
            .as_ref()
            .ok()
            .and_then(|r| r.header("Cache-Control"))
            .is_some_and(|c| c.contains("no-store"));
        let new_calls = site.provider.calls() - calls;
        if status != want || from_program != by_program || new_calls != paid {
            fails.push(format!(
                "{name}: status {status} (from the program: {from_program}), {new_calls} provider calls; expected {want} from the {}, {paid} calls\n{}",
                if by_program { "program" } else { "server" },
                r.map(|r| r.everything()).unwrap_or_else(|e| e.to_string())
            ));
        }
        if paid == 1
            && site
                .provider
                .last_request()
                .and_then(|r| r.param("link"))
                .as_deref()
                != Some(VALID)
        {
            fails.push(format!("{name}: the provider was not asked for {VALID}"));
        }
        if from_program && status >= 400 {
            refusals += 1;
        }
        tally.add(
            name,
            &[status],
            new_calls,
            if by_program { "" } else { "by Apache" },
        );
    }
    let log = site.apache.log_since(log_from);
    fails.extend(log_problems(&log));
    if program_lines(&log) != refusals {
        fails.push(format!(
            "{} program log lines for {refusals} refusals:\n{log}",
            program_lines(&log)
        ));
    }
    tally.finish(&fails);
}

// ---------------------------------------------------------------------------------------------
// Half-sent, stalled and slow bodies.

/// Sends a form POST head declaring `declared` bytes, then `sent`; then shuts the writing side
/// (`half_close`) or waits for whatever comes.
fn partial_post(client: &HttpClient, declared: &str, sent: &[u8], half_close: bool) -> Exchange {
    partial_post_to(client, "/cgi-bin/resolve", declared, sent, half_close)
}

fn partial_post_to(
    client: &HttpClient,
    path: &str,
    declared: &str,
    sent: &[u8],
    half_close: bool,
) -> Exchange {
    let start = Instant::now();
    let mut s = client.connect().expect("connect to Apache");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAccept: application/json\r\nContent-Type: {FORM}\r\nContent-Length: {declared}\r\n\r\n"
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(sent);
    if half_close {
        let _ = s.shutdown(Shutdown::Write);
    }
    Exchange::read(s, start)
}

/// Sends a whole form in `pieces`, `gap` apart, until the server answers; `elapsed` is when
/// the answer began.
fn trickle(client: &HttpClient, body: &[u8], pieces: usize, gap: Duration) -> Exchange {
    let start = Instant::now();
    let mut s = client.connect().expect("connect to Apache");
    let mut reader = s.try_clone().expect("clone the connection");
    let (first_byte, answered) = std::sync::mpsc::channel();
    let read = std::thread::spawn(move || {
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if raw.is_empty() {
                        let _ = first_byte.send(start.elapsed());
                    }
                    raw.extend_from_slice(&buf[..n]);
                }
            }
        }
        raw
    });
    let head = format!(
        "POST /cgi-bin/resolve HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAccept: application/json\r\nContent-Type: {FORM}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    let mut elapsed = None;
    for (i, piece) in body.chunks(body.len().div_ceil(pieces)).enumerate() {
        if i > 0 {
            // Stop sending once the server has answered.
            if let Ok(at) = answered.recv_timeout(gap) {
                elapsed = Some(at);
                break;
            }
        }
        if s.write_all(piece).is_err() {
            break;
        }
    }
    let raw = read.join().expect("reader thread");
    let elapsed = elapsed
        .or_else(|| answered.try_recv().ok())
        .unwrap_or_else(|| start.elapsed());
    Exchange {
        response: Response::parse(&raw).ok(),
        raw,
        elapsed,
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

const TIMEOUT_SECS: u64 = 3;
/// `LimitRequestBody` of the /capped/ location.
const CAP_BYTES: u64 = 16384;

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn half_sent_and_stalled_bodies_end_at_apaches_timeout() {
    const LIMIT: usize = 3;
    let site = site("abuse-slow", LIMIT)
        .apache(|b| {
            // /capped/ is the program again, behind LimitRequestBody.
            let alias = match Mode::from_env() {
                Mode::Cgid => "ScriptAlias",
                Mode::Fcgid => "Alias",
            };
            b.conf(&format!(
                "Timeout {TIMEOUT_SECS}\n{alias} /capped/ \"@DIR@/cgi-bin/\"\n<Location /capped/>\n    LimitRequestBody {CAP_BYTES}\n</Location>"
            ))
        })
        .start();
    let client = patient_client(&site, "127.0.0.5");
    let mut tally = Tally::for_site(
        &format!("bodies under Timeout {TIMEOUT_SECS} (no mod_reqtimeout), limit {LIMIT}"),
        &site,
    );
    let mut fails = Vec::new();
    let valid = q(VALID);
    let bound = Duration::from_secs(TIMEOUT_SECS + 10);
    let started = Instant::now();
    let (stall_huge, stall_small, slow, half_huge, half_small, overflow, capped) =
        std::thread::scope(|s| {
            let stall_huge =
                s.spawn(|| partial_post(&client, "100000000", b"link=https%3A%2F%2F", false));
            let stall_small = s.spawn(|| partial_post(&client, "1000", b"link=https", false));
            // Six pieces a second apart: each wait shorter than Timeout, the whole longer.
            let slow = s.spawn(|| trickle(&client, valid.as_bytes(), 6, Duration::from_secs(1)));
            let half_huge = partial_post(&client, "100000000", b"link=https%3A%2F%2F", true);
            let half_small = partial_post(&client, "1000", b"link=https", true);
            let overflow =
                partial_post(&client, "99999999999999999999999", valid.as_bytes(), false);
            let capped = partial_post_to(
                &client,
                "/capped/resolve",
                "100000000",
                b"link=https%3A%2F%2F",
                false,
            );
            (
                stall_huge.join().expect("thread"),
                stall_small.join().expect("thread"),
                slow.join().expect("thread"),
                half_huge,
                half_small,
                overflow,
                capped,
            )
        });
    let all_done = started.elapsed();
    let mut row = |name: &str, ex: &Exchange, allowed: &[u16], within: Duration| {
        tally.add(
            name,
            &[ex.status()],
            0,
            &format!("after {}", secs(ex.elapsed)),
        );
        if !allowed.contains(&ex.status()) || ex.elapsed > within {
            fails.push(format!(
                "{name}: status {} after {:?}; expected one of {allowed:?} within {within:?}\n{}",
                ex.status(),
                ex.elapsed,
                ex.describe()
            ));
        }
    };
    // mod_cgid takes the whole body before it reads the program's answer, and answers 408 when
    // the client stops sending; mod_fcgid reads the body before it contacts the program and
    // answers 500.
    row(
        "100 MB declared, 19 bytes sent, stalled",
        &stall_huge,
        &[408, 413, 500],
        bound,
    );
    row(
        "1000 bytes declared, 10 sent, stalled",
        &stall_small,
        &[400, 408, 500],
        bound,
    );
    row(
        "100 MB declared, 19 sent, then end of input",
        &half_huge,
        &[400, 413, 500],
        bound,
    );
    row(
        "1000 declared, 10 sent, then end of input",
        &half_small,
        &[400, 500],
        bound,
    );
    row(
        "Content-Length 99999999999999999999999",
        &overflow,
        &[400, 413],
        bound,
    );
    // mod_cgid: Apache's 413 at once. mod_fcgid passes the request on without its body, and
    // the program finds no link (400).
    row(
        &format!("100 MB declared, stalled, LimitRequestBody {CAP_BYTES}"),
        &capped,
        &[400, 413],
        Duration::from_secs(2),
    );
    row(
        "whole form in 6 pieces 1 s apart",
        &slow,
        &[200],
        Duration::from_secs(20),
    );
    let capped_by = if capped.by_program() {
        "the program"
    } else {
        "Apache"
    };
    if (capped.status() == 413) == capped.by_program() {
        fails.push(format!(
            "LimitRequestBody: {} from {capped_by}",
            capped.status()
        ));
    }
    let capped_row = tally
        .rows
        .iter_mut()
        .find(|r| r.class.contains("LimitRequestBody"))
        .expect("row");
    capped_row.note = format!("{}, by {capped_by}", capped_row.note);
    let after_slow = site.provider.calls();
    tally.rows.last_mut().expect("row").calls = after_slow;
    if after_slow != 1 {
        fails.push(format!(
            "{after_slow} provider calls for the bodies: only the slow whole form may call"
        ));
    }
    // The refused and cut bodies took none of the client's quota: LIMIT - 1 left.
    let normal: Vec<u16> = (0..LIMIT)
        .map(|_| {
            client
                .send(&Request::post_form("/cgi-bin/resolve", valid.clone()))
                .map_or(0, |r| r.status)
        })
        .collect();
    let mut want = vec![200; LIMIT - 1];
    want.push(429);
    if normal != want {
        fails.push(format!(
            "after the cut bodies, the same client got {normal:?}: expected {want:?}"
        ));
    }
    tally.add(
        "then ordinary forms from the same address",
        &normal,
        site.provider.calls() - after_slow,
        "quota untouched by the cut bodies",
    );
    if site.provider.calls() != LIMIT {
        fails.push(format!(
            "{} provider calls in all, expected {LIMIT}",
            site.provider.calls()
        ));
    }
    let log = site.apache.log_since(0);
    fails.extend(log_problems(&log));
    if log.contains("panicked") {
        fails.push(format!("panic:\n{log}"));
    }
    tally.add("wall time of the seven at once", &[], 0, &secs(all_done));
    tally.finish(&fails);
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn slow_bodies_are_cut_by_mod_reqtimeout() {
    const LIMIT: usize = 2;
    const BODY_SECS: u64 = 2;
    let site = site("abuse-reqtimeout", LIMIT)
        .apache(|b| {
            b.module("reqtimeout").conf(&format!(
                "RequestReadTimeout header=20-40,MinRate=500 body={BODY_SECS},MinRate=500"
            ))
        })
        .start();
    let client = patient_client(&site, "127.0.0.6");
    let mut tally = Tally::for_site(
        &format!(
            "bodies under mod_reqtimeout body={BODY_SECS},MinRate=500 (Timeout 30), limit {LIMIT}"
        ),
        &site,
    );
    let mut fails = Vec::new();
    let valid = q(VALID);
    let (stall, slow) = std::thread::scope(|s| {
        let stall = s.spawn(|| partial_post(&client, "1000", b"link=https", false));
        let slow = trickle(&client, valid.as_bytes(), 6, Duration::from_secs(1));
        (stall.join().expect("thread"), slow)
    });
    let bound = Duration::from_secs(BODY_SECS + 8);
    for (name, ex) in [
        ("1000 bytes declared, 10 sent, stalled", &stall),
        ("whole form in 6 pieces 1 s apart", &slow),
    ] {
        tally.add(
            name,
            &[ex.status()],
            0,
            &format!("after {}", secs(ex.elapsed)),
        );
        if ![400, 408, 500].contains(&ex.status()) || ex.elapsed > bound {
            fails.push(format!(
                "{name}: status {} after {:?}; expected Apache to cut it (408, or 500 under mod_fcgid) within {bound:?}\n{}",
                ex.status(),
                ex.elapsed,
                ex.describe()
            ));
        }
    }
    if site.provider.calls() != 0 {
        fails.push(format!(
            "{} provider calls for cut bodies",
            site.provider.calls()
        ));
    }
    let normal: Vec<u16> = (0..=LIMIT)
        .map(|_| {
            client
                .send(&Request::post_form("/cgi-bin/resolve", valid.clone()))
                .map_or(0, |r| r.status)
        })
        .collect();
    let mut want = vec![200; LIMIT];
    want.push(429);
    if normal != want || site.provider.calls() != LIMIT {
        fails.push(format!(
            "then {normal:?} with {} provider calls: expected {want:?}",
            site.provider.calls()
        ));
    }
    tally.add(
        "then ordinary forms from the same address",
        &normal,
        site.provider.calls(),
        "quota untouched",
    );
    tally.finish(&fails);
}

// ---------------------------------------------------------------------------------------------
// Other sites' pages.

const SITE_LIMIT: usize = 20;

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Apache: cargo test --features servers"
)]
fn other_sites_pages_are_refused_and_their_refusals_cost_nothing() {
    let site = site("abuse-origin", SITE_LIMIT)
        .config(|c| c["allowed_origins"] = json!(["https://mysite.example"]))
        .start();
    let mut tally = Tally::for_site(
        &format!("allowed_origins [\"https://mysite.example\"], limit {SITE_LIMIT}"),
        &site,
    );
    let mut fails = Vec::new();
    let client = site.apache.client();
    let log_from = site.apache.log_len();
    let own = Some("https://mysite.example");
    let evil = Some("https://evil.example");
    let rows: Vec<(&str, Option<&str>, Option<&str>, u16)> = vec![
        ("Origin: the site", own, None, 200),
        (
            "Origin: the site, in capitals",
            Some("HTTPS://MYSITE.EXAMPLE"),
            None,
            200,
        ),
        (
            "Origin: the site, :443",
            Some("https://mysite.example:443"),
            None,
            200,
        ),
        (
            "Origin: the site, trailing slash",
            Some("https://mysite.example/"),
            None,
            200,
        ),
        (
            "Origin: user-info, then the site",
            Some("https://evil.example@mysite.example"),
            None,
            200,
        ),
        (
            "Origin: http:// instead of https://",
            Some("http://mysite.example"),
            None,
            403,
        ),
        (
            "Origin: another port",
            Some("https://mysite.example:8443"),
            None,
            403,
        ),
        (
            "Origin: www. subdomain (not listed)",
            Some("https://www.mysite.example"),
            None,
            403,
        ),
        (
            "Origin: the site's name as a prefix",
            Some("https://mysite.example.evil.example"),
            None,
            403,
        ),
        (
            "Origin: the site's name as a suffix",
            Some("https://evilmysite.example"),
            None,
            403,
        ),
        (
            "Origin: trailing dot",
            Some("https://mysite.example."),
            None,
            403,
        ),
        (
            "Origin: the site as user-info",
            Some("https://mysite.example@evil.example"),
            None,
            403,
        ),
        ("Origin: another site", evil, None, 403),
        (
            "Origin: null (sandboxed frame, file:)",
            Some("null"),
            None,
            403,
        ),
        ("Origin: empty", Some(""), None, 403),
        (
            "Origin: the site and another",
            Some("https://mysite.example, https://evil.example"),
            None,
            403,
        ),
        (
            "Origin: the site; Referer: another",
            own,
            Some("https://evil.example/page"),
            200,
        ),
        (
            "Origin: another; Referer: the site",
            evil,
            Some("https://mysite.example/"),
            403,
        ),
        (
            "Referer only: a page of the site",
            None,
            Some("https://mysite.example/tools/?x=1"),
            200,
        ),
        (
            "Referer only: the site's origin",
            None,
            Some("https://mysite.example/"),
            200,
        ),
        (
            "Referer only: another site",
            None,
            Some("https://evil.example/page.html"),
            403,
        ),
        (
            "Referer only: an app",
            None,
            Some("android-app://com.evil.app/"),
            403,
        ),
        (
            "Referer only: the site in the query",
            None,
            Some("https://evil.example/?https://mysite.example/"),
            403,
        ),
        (
            "neither, no Sec-Fetch-Site (programs, older browsers)",
            None,
            None,
            200,
        ),
    ];
    let mut refusals = 0;
    let before_all = site.provider.calls();
    for (i, (name, origin, referer, want)) in rows.iter().enumerate() {
        let mut headers: Vec<(&str, &[u8])> = vec![("Accept", b"application/json")];
        if let Some(o) = origin {
            headers.push(("Origin", o.as_bytes()));
        }
        if let Some(r) = referer {
            headers.push(("Referer", r.as_bytes()));
        }
        let calls = site.provider.calls();
        let ex = exchange(&client, &raw_get(target(i).as_bytes(), &headers));
        let new_calls = site.provider.calls() - calls;
        let code_ok = *want != 403 || ex.code() == "origin_not_allowed";
        if ex.status() != *want
            || !ex.by_program()
            || !code_ok
            || new_calls != usize::from(*want == 200)
        {
            fails.push(format!(
                "{name}: status {} ({}), {new_calls} provider calls; expected {want}\n{}",
                ex.status(),
                ex.code(),
                ex.describe()
            ));
        }
        if ex.status() == 403 {
            refusals += 1;
        }
        tally.add(name, &[ex.status()], new_calls, "");
    }
    // A form posted from another site's page, and HEAD.
    let post = exchange(
        &client,
        &Request::post_form("/cgi-bin/resolve", q(VALID))
            .header("Origin", "https://evil.example")
            .header("Accept", "application/json")
            .to_bytes("127.0.0.1"),
    );
    let head = exchange(
        &client,
        &Request::head(&target(900))
            .header("Origin", "https://evil.example")
            .to_bytes("127.0.0.1"),
    );
    for (name, ex) in [
        ("POST form from another site", &post),
        ("HEAD from another site", &head),
    ] {
        if ex.status() != 403 || !ex.by_program() {
            fails.push(format!("{name}: expected 403\n{}", ex.describe()));
        }
        refusals += usize::from(ex.status() == 403);
        tally.add(name, &[ex.status()], 0, "");
    }
    // What a modern browser sends for another site's <img> or link under Referrer-Policy:
    // no-referrer: no Origin, no Referer, only Fetch Metadata. Refused like another site's
    // Origin, before anything is counted or spent; a typed address (`none`) is not.
    for (i, (fetch_site, want)) in [("cross-site", 403u16), ("same-site", 403), ("none", 200)]
        .into_iter()
        .enumerate()
    {
        let calls = site.provider.calls();
        let ex = exchange(
            &client,
            &raw_get(
                target(901 + i).as_bytes(),
                &[
                    ("Accept", b"application/json"),
                    ("Sec-Fetch-Site", fetch_site.as_bytes()),
                    ("Sec-Fetch-Mode", b"no-cors"),
                    ("Sec-Fetch-Dest", b"image"),
                ],
            ),
        );
        let new_calls = site.provider.calls() - calls;
        let code_ok = want != 403 || ex.code() == "origin_not_allowed";
        if ex.status() != want
            || !ex.by_program()
            || !code_ok
            || new_calls != usize::from(want == 200)
        {
            fails.push(format!(
                "Sec-Fetch-Site: {fetch_site}, no Origin or Referer: status {} ({}), {new_calls} provider calls; expected {want}\n{}",
                ex.status(),
                ex.code(),
                ex.describe()
            ));
        }
        refusals += usize::from(ex.status() == 403);
        tally.add(
            &format!("Sec-Fetch-Site: {fetch_site}, no Origin or Referer"),
            &[ex.status()],
            new_calls,
            "",
        );
    }
    let admitted_rows = site.provider.calls() - before_all;

    // Refusals take nothing from the visitor's quota.
    let visitor = site.apache.client().bind_source("127.0.0.41");
    let mut refused = Vec::new();
    let class = "127.0.0.41 then from the site itself";
    fails.extend(tally.limited(class, SITE_LIMIT, &site.provider, || {
        refused = statuses(fire(10, 4, |i| {
            visitor.send(&Request::get(&target(1000 + i)).header("Origin", "https://evil.example"))
        }));
        statuses(fire(SITE_LIMIT + 1, 4, |i| {
            visitor
                .send(&Request::get(&target(1100 + i)).header("Origin", "https://mysite.example"))
        }))
    }));
    refusals += refused.iter().filter(|&&s| s == 403).count();
    tally.add("127.0.0.41: another site's page, 10 times", &refused, 0, "");
    if refused != vec![403; 10] {
        fails.push(format!("another site's page: {refused:?}"));
    }
    // The limit of the defence: a program copies the allowed Origin; the rate limit stops it.
    let script = site.apache.client().bind_source("127.0.0.42");
    let class = "127.0.0.42: a script sending the site's Origin";
    fails.extend(tally.limited(class, SITE_LIMIT, &site.provider, || {
        statuses(fire(SITE_LIMIT + 5, 4, |i| {
            script.send(&Request::get(&target(1200 + i)).header("Origin", "https://mysite.example"))
        }))
    }));

    let log = site.apache.log_since(log_from);
    fails.extend(log_problems(&log));
    let refused_lines = log
        .lines()
        .filter(|l| l.starts_with("resolve: ") && l.contains("refused a request from another site"))
        .count();
    if refused_lines != refusals || program_lines(&log) != refusals {
        fails.push(format!(
            "{refused_lines} refusal lines ({} program lines) for {refusals} refusals:\n{log}",
            program_lines(&log)
        ));
    }
    tally.add(
        "log lines \"refused a request from another site\"",
        &[],
        0,
        &format!("{refused_lines}; rows admitted: {admitted_rows}"),
    );
    tally.finish(&fails);
}
