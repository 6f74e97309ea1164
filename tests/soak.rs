//! Soak: minutes of mixed load (RESOLVE_SOAK_SECS per store, 20 by default, 600 for the long run) from thousands of 127.0.0.0/8 client addresses through Apache's mod_fcgid, on the file, MySQL and Redis stores: no 5xx, exact limits in every window, flat FastCGI memory, storage bounded by the sweep or the expiry.
//!
//! Each test starts Apache in FastCGI mode, the store, and a keep-alive provider stand-in that
//! echoes each link it is asked for (so every paid call names the client and request it served).
//! Worker threads lease client addresses and play episodes on them, one episode per address at a
//! time, each starting once the address's last window has surely ended:
//! - a burst: more than the limit, three at a time, GETs, POSTs and HEADs, with bad input mixed in;
//! - a steady client: a few requests spaced so that no window can hold more than the limit,
//!   sometimes asking again for a link it had (answered from the cache), with bad input mixed in.
//!
//! Every answer is checked as it arrives (status, `RateLimit` fields, the body naming its own
//! link, the content type asked for); after the run every episode is checked against the fixed
//! window algorithm using the `RateLimit` remaining count (`r`) of each admitted answer and only
//! bounds on when each request could have been decided (between sending it and reading its
//! answer), so the checks are exact where the order is known and never depend on timing luck.
//! The provider's record must be exactly the admitted non-HEAD requests not answered from cache.
//! A sampler reads the RSS of every FastCGI process and counts the store's entries every two
//! seconds.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::client::par_map;
use support::config::{TOKEN, rule};
use support::redis::{Resp, Via};
use support::rng::Rng;
use support::system::{command, output_text, processes_of};
use support::temp::files_under;
use support::urlenc::{encode, link_param};
use support::{MariaDb, Mode, Provider, Redis, Reply, Request, Response, Site};

/// Seconds of load per store unless RESOLVE_SOAK_SECS says otherwise.
const DEFAULT_SECS: u64 = 20;
/// The one rule: LIMIT requests per WINDOW_SECS per address.
const LIMIT: u32 = 5;
const WINDOW_SECS: u64 = 3;
/// Stores drop a key this long after its window ended.
const GRACE_SECS: u64 = 1;
/// A resolved link is answered from the cache this long.
const CACHE_TTL_SECS: u64 = 4;
/// One request in this many sweeps (file and MySQL stores).
const SWEEP_ONE_IN: u64 = 4;
/// Threads that play episodes.
const WORKERS: usize = 12;
/// Requests of one burst in flight at once.
const BURST_CONCURRENCY: usize = 3;
/// Client addresses: 127.10.0.1 to 127.(10 + POOL / 62500)...
const POOL: usize = 30_000;
/// Time between the requests of a steady client, measured from the previous answer: more than
/// WINDOW / (LIMIT - 1), so no window ever holds more than LIMIT - 1 of them.
const STEADY_GAP: Duration = Duration::from_millis(WINDOW_SECS * 1000 / (LIMIT as u64 - 1) + 100);
/// How often RSS and storage are sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// Allowance for the store's clock (Redis TIME, MySQL NOW(3), the file store's SystemTime) being
/// read a little apart from this process's Instant, and for millisecond rounding.
const EPS_US: u64 = 50_000;
/// How long a store may keep an entry past its end (plus the grace) before it counts as kept
/// too long: a file-store sweep visits random shards within its budget, Redis expires lazily.
const SWEEP_LAG_SECS: u64 = 15;
/// Entries allowed beyond the computed bound (claims of requests in flight, rounding).
const STORAGE_SLACK: u64 = 2 * (WORKERS * BURST_CONCURRENCY) as u64 + 16;
/// RSS a FastCGI process may gain between the end of warm-up and the end of the run: the larger
/// of this and a quarter of its size after warm-up.
const RSS_GROWTH_KIB: u64 = 2048;

fn soak_secs() -> u64 {
    match std::env::var("RESOLVE_SOAK_SECS") {
        Err(_) => DEFAULT_SECS,
        Ok(s) => s
            .trim()
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or_else(|| panic!("RESOLVE_SOAK_SECS={s:?}: give a number of seconds")),
    }
}

/// The address of client `i`: 127.10.0.1, 127.10.0.2, ... (250 per third byte).
fn client_ip(i: usize) -> String {
    let third = i / 250;
    format!("127.{}.{}.{}", 10 + third / 250, third % 250, i % 250 + 1)
}

fn link(client: usize, episode: usize, n: usize) -> String {
    format!("https://example.com/soak/{client}/{episode}/{n}")
}

/// What the echo stand-in answers for a link.
fn download_for(link: &str) -> String {
    match link.strip_prefix("https://example.com/") {
        Some(rest) => format!("https://cdn.test/{rest}"),
        None => "https://cdn.test/other".to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// The provider stand-in: keep-alive HTTP/1.1, answers each link with itself on cdn.test.

fn echo_provider() -> Provider {
    Provider::builder()
        .keep_alive()
        .reply(Reply::with(|call| {
            let link = call.param("link").unwrap_or_default();
            Reply::ok(json!({"download": download_for(&link), "filename": "f.bin"}))
        }))
        .start()
}

// ---------------------------------------------------------------------------------------------
// Requests and what each must get

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Get,
    Post,
    Head,
    /// A GET for a link this client had resolved earlier in the episode (a cache hit, or a
    /// paid miss when the entry is gone).
    Again,
    /// `link=ftp://...`: 400 bad_link.
    BadLink,
    /// No link at all: 400 missing_link.
    NoLink,
    /// `links=` with more links than `request.max_links` (20): 400 too_many_links.
    TooManyLinks,
    /// PUT: 405.
    Put,
}

impl Kind {
    /// Counted by the limiter (answered 200 or 429).
    fn counted(self) -> bool {
        matches!(self, Kind::Get | Kind::Post | Kind::Head | Kind::Again)
    }

    /// Counted and, when admitted, asks the provider (unless cached).
    fn may_pay(self) -> bool {
        matches!(self, Kind::Get | Kind::Post | Kind::Again)
    }

    fn expected_refusal(self) -> u16 {
        match self {
            Kind::Put => 405,
            _ => 400,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Accept {
    Json,
    Html,
    Any,
}

impl Accept {
    fn header(self) -> &'static str {
        match self {
            Accept::Json => "application/json",
            Accept::Html => "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8",
            Accept::Any => "*/*",
        }
    }

    fn pick(rng: &mut Rng) -> Accept {
        [Accept::Json, Accept::Html, Accept::Any][rng.below(3) as usize]
    }
}

/// One request of an episode and what came back.
#[derive(Clone, Debug)]
struct Shot {
    kind: Kind,
    accept: Accept,
    /// The link it carried (for `Again`, the earlier request's).
    link: String,
    /// Microseconds since the start of the test: written, answered.
    sent_us: u64,
    recv_us: u64,
    /// 0 when no answer came.
    status: u16,
    /// For an admitted request, its number in its window (`limit - r`).
    count: Option<u32>,
    cache_hit: bool,
}

impl Shot {
    fn admitted(&self) -> bool {
        self.kind.counted() && self.status == 200
    }

    fn refused(&self) -> bool {
        self.kind.counted() && self.status == 429
    }

    fn paid(&self) -> bool {
        self.admitted() && self.kind.may_pay() && !self.cache_hit
    }
}

#[derive(Clone, Debug)]
struct Episode {
    id: usize,
    client: usize,
    burst: bool,
    start_us: u64,
    end_us: u64,
    shots: Vec<Shot>,
}

fn build(kind: Kind, accept: Accept, link: &str) -> Request {
    let target = format!("/cgi-bin/resolve?{}", link_param(link));
    let req = match kind {
        Kind::Get | Kind::Again => Request::get(&target),
        Kind::Head => Request::head(&target),
        Kind::Post => Request::post_form("/cgi-bin/resolve", link_param(link)),
        Kind::BadLink => Request::get(&format!(
            "/cgi-bin/resolve?link={}",
            encode("ftp://example.com/x")
        )),
        Kind::NoLink => Request::get("/cgi-bin/resolve?nothing=here"),
        Kind::TooManyLinks => {
            let many: Vec<String> = (0..21).map(|i| format!("{link}/{i}")).collect();
            Request::get(&format!(
                "/cgi-bin/resolve?links={}",
                encode(&many.join("\n"))
            ))
        }
        Kind::Put => Request::new("PUT", &target),
    };
    req.header("Accept", accept.header())
}

/// `r=` of the `RateLimit` header.
fn remaining(r: &Response) -> Option<u32> {
    r.header("RateLimit")?
        .split(';')
        .find_map(|p| p.trim().strip_prefix("r="))
        .and_then(|v| v.parse().ok())
}

/// Checks one answer; returns the admitted request's number in its window and whether it came
/// from the cache, or what is wrong.
fn examine(
    kind: Kind,
    accept: Accept,
    link: &str,
    r: &Response,
) -> Result<(Option<u32>, bool), String> {
    let ctype = r.header("Content-Type").unwrap_or_default().to_string();
    let type_ok = |json_type: &str| match accept {
        Accept::Json => ctype.starts_with(json_type),
        Accept::Html => ctype.starts_with("text/html"),
        Accept::Any => ctype.starts_with("text/plain"),
    };
    if !kind.counted() {
        if r.status != kind.expected_refusal() {
            return Err(format!("{kind:?} answered {}", r.status));
        }
        if r.header("RateLimit").is_some() {
            return Err(format!("{kind:?} went through the limiter"));
        }
        return Ok((None, false));
    }
    match r.status {
        200 => {
            let left = remaining(r).ok_or("200 without RateLimit r=")?;
            if left >= LIMIT {
                return Err(format!("200 with r={left}: more left than the limit"));
            }
            if r.header("Retry-After").is_some() {
                return Err("200 with Retry-After".to_string());
            }
            if kind == Kind::Head {
                if !r.body.is_empty() {
                    return Err("HEAD answered with a body".to_string());
                }
                return Ok((Some(LIMIT - left), false));
            }
            let want = download_for(link);
            if !r.text().contains(&want) {
                return Err(format!("200 does not carry its own link's answer {want}"));
            }
            if !type_ok("application/json") {
                return Err(format!(
                    "200 for Accept {accept:?} has Content-Type {ctype:?}"
                ));
            }
            let hit = match r.header("X-Resolve-Cache") {
                Some("hit") => true,
                Some("miss") => false,
                other => return Err(format!("200 with X-Resolve-Cache {other:?}")),
            };
            if hit && kind != Kind::Again {
                return Err("a link never asked before came from the cache".to_string());
            }
            Ok((Some(LIMIT - left), hit))
        }
        429 => {
            if remaining(r) != Some(0) {
                return Err("429 without RateLimit r=0".to_string());
            }
            let wait: u64 = r
                .header("Retry-After")
                .and_then(|v| v.parse().ok())
                .ok_or("429 without a numeric Retry-After")?;
            if !(1..=WINDOW_SECS).contains(&wait) {
                return Err(format!("429 with Retry-After {wait}"));
            }
            if kind != Kind::Head && !type_ok("application/problem+json") {
                return Err(format!(
                    "429 for Accept {accept:?} has Content-Type {ctype:?}"
                ));
            }
            Ok((None, false))
        }
        other => Err(format!("{kind:?} answered {other}")),
    }
}

// ---------------------------------------------------------------------------------------------
// The load

struct Load {
    apache_addr: SocketAddr,
    t0: Instant,
    until: Instant,
    /// Per client: busy, and the time (us) after which its last window has surely ended.
    clients: Mutex<Vec<(bool, u64)>>,
    episodes: Mutex<Vec<Episode>>,
    next_episode: AtomicUsize,
    statuses: Mutex<BTreeMap<u16, u64>>,
    /// Answers that broke the contract as they arrived (the first 40 kept).
    problems: Mutex<Vec<String>>,
    problem_count: AtomicU64,
}

impl Load {
    fn now_us(&self) -> u64 {
        self.t0.elapsed().as_micros() as u64
    }

    fn problem(&self, p: String) {
        self.problem_count.fetch_add(1, Ordering::SeqCst);
        let mut list = self.problems.lock().unwrap();
        if list.len() < 40 {
            list.push(p);
        }
    }

    /// A free client whose last window has ended, marked busy.
    fn lease(&self, rng: &mut Rng) -> Option<usize> {
        let now = self.now_us();
        let mut clients = self.clients.lock().unwrap();
        for _ in 0..50 {
            let i = rng.below(POOL as u64) as usize;
            let (busy, free_after) = clients[i];
            if !busy && free_after <= now {
                clients[i].0 = true;
                return Some(i);
            }
        }
        None
    }

    fn release(&self, client: usize, free_after: u64) {
        self.clients.lock().unwrap()[client] = (false, free_after);
    }

    fn shoot(&self, client: usize, kind: Kind, accept: Accept, link: &str) -> Shot {
        let http = support::HttpClient::new(self.apache_addr)
            .bind_source(&client_ip(client))
            .timeout(Duration::from_secs(60));
        let req = build(kind, accept, link);
        let sent_us = self.now_us();
        let answer = http.send(&req);
        let recv_us = self.now_us();
        let mut shot = Shot {
            kind,
            accept,
            link: link.to_string(),
            sent_us,
            recv_us,
            status: 0,
            count: None,
            cache_hit: false,
        };
        match answer {
            Err(e) => self.problem(format!("{} {kind:?}: no answer: {e}", client_ip(client))),
            Ok(r) => {
                shot.status = r.status;
                match examine(kind, accept, link, &r) {
                    Ok((count, hit)) => {
                        shot.count = count;
                        shot.cache_hit = hit;
                    }
                    Err(why) => self.problem(format!(
                        "{} {kind:?} {link}: {why}\n{}",
                        client_ip(client),
                        r.everything()
                    )),
                }
            }
        }
        *self
            .statuses
            .lock()
            .unwrap()
            .entry(shot.status)
            .or_default() += 1;
        shot
    }

    fn worker(&self, seed: u64) {
        let mut rng = Rng::new(seed);
        while Instant::now() < self.until {
            let Some(client) = self.lease(&mut rng) else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            let id = self.next_episode.fetch_add(1, Ordering::SeqCst);
            let burst = rng.percent(50);
            let start_us = self.now_us();
            let shots = if burst {
                self.burst(client, id, &mut rng)
            } else {
                self.steady(client, id, &mut rng)
            };
            let end_us = self.now_us();
            // The latest window opened in this episode ends within WINDOW of the answer that
            // opened it; an episode with a lost answer leaves room for one more window.
            let lost = shots.iter().any(|s| s.status == 0);
            let free_after = shots
                .iter()
                .filter(|s| s.admitted() && s.count == Some(1))
                .map(|s| s.recv_us + WINDOW_SECS * 1_000_000 + 2 * EPS_US)
                .max()
                .unwrap_or(end_us)
                .max(if lost {
                    end_us + WINDOW_SECS * 1_000_000 + 1_000_000
                } else {
                    end_us
                });
            self.episodes.lock().unwrap().push(Episode {
                id,
                client,
                burst,
                start_us,
                end_us,
                shots,
            });
            self.release(client, free_after);
        }
    }

    /// More than the limit at once (BURST_CONCURRENCY in flight), bad input mixed in.
    fn burst(&self, client: usize, episode: usize, rng: &mut Rng) -> Vec<Shot> {
        let counted = LIMIT as usize + 1 + rng.below(5) as usize;
        let bad = rng.below(3) as usize;
        let mut plan: Vec<(Kind, Accept, String)> = Vec::new();
        for n in 0..counted + bad {
            let kind = if n >= counted {
                [Kind::BadLink, Kind::NoLink, Kind::TooManyLinks, Kind::Put][rng.below(4) as usize]
            } else {
                match rng.below(100) {
                    0..45 => Kind::Get,
                    45..80 => Kind::Post,
                    _ => Kind::Head,
                }
            };
            plan.push((kind, Accept::pick(rng), link(client, episode, n)));
        }
        // Bad input anywhere in the burst.
        for i in (1..plan.len()).rev() {
            plan.swap(i, rng.below(i as u64 + 1) as usize);
        }
        par_map(plan.len(), BURST_CONCURRENCY, |i| {
            let (kind, accept, link) = &plan[i];
            self.shoot(client, *kind, *accept, link)
        })
    }

    /// A few requests, one at a time, STEADY_GAP apart: never over the limit.
    fn steady(&self, client: usize, episode: usize, rng: &mut Rng) -> Vec<Shot> {
        let counted = 2 + rng.below(6) as usize;
        let mut shots: Vec<Shot> = Vec::new();
        let mut resolved: Vec<String> = Vec::new();
        for n in 0..counted {
            if n > 0 {
                std::thread::sleep(STEADY_GAP);
            }
            if rng.percent(15) {
                let kind = [Kind::BadLink, Kind::NoLink, Kind::TooManyLinks, Kind::Put]
                    [rng.below(4) as usize];
                shots.push(self.shoot(
                    client,
                    kind,
                    Accept::pick(rng),
                    &link(client, episode, 900 + n),
                ));
            }
            let kind = match rng.below(100) {
                0..20 if !resolved.is_empty() => Kind::Again,
                0..45 => Kind::Get,
                45..85 => Kind::Post,
                _ => Kind::Head,
            };
            let l = if kind == Kind::Again {
                resolved[rng.below(resolved.len() as u64) as usize].clone()
            } else {
                link(client, episode, n)
            };
            let shot = self.shoot(client, kind, Accept::pick(rng), &l);
            if shot.admitted() && kind != Kind::Head {
                resolved.push(l);
            }
            shots.push(shot);
        }
        shots
    }
}

// ---------------------------------------------------------------------------------------------
// Checking the episodes after the run

#[derive(Default)]
struct Verdict {
    problems: Vec<String>,
    windows: u64,
    /// Windows in which a request was refused: each admitted exactly LIMIT.
    full_windows: u64,
    /// Requests that could belong to two windows (a burst longer than a window): not used for the
    /// per-window checks.
    ambiguous: u64,
    max_paid: u32,
    /// Per link: how many paid calls the answers account for.
    expected_paid: BTreeMap<String, u64>,
    cache_hits: u64,
}

fn us(t: u64) -> String {
    format!("{:.3} s", t as f64 / 1e6)
}

fn describe(ep: &Episode) -> String {
    let mut shots: Vec<&Shot> = ep.shots.iter().collect();
    shots.sort_by_key(|s| s.sent_us);
    let mut out = format!(
        "episode {} ({}, client {}):",
        ep.id,
        if ep.burst { "burst" } else { "steady" },
        client_ip(ep.client)
    );
    for s in shots {
        out.push_str(&format!(
            "\n  {:?} ({:?}) sent {} answered {} -> {} count {:?}{}",
            s.kind,
            s.accept,
            us(s.sent_us),
            us(s.recv_us),
            s.status,
            s.count,
            if s.cache_hit { " (cache)" } else { "" }
        ));
    }
    out
}

fn verify(episodes: &[Episode]) -> Verdict {
    let mut v = Verdict::default();
    let w = WINDOW_SECS * 1_000_000;
    for ep in episodes {
        let mut bad = Vec::new();
        for s in ep.shots.iter().filter(|s| s.paid()) {
            *v.expected_paid.entry(s.link.clone()).or_default() += 1;
        }
        v.cache_hits += ep.shots.iter().filter(|s| s.cache_hit).count() as u64;
        if !ep.burst && ep.shots.iter().any(Shot::refused) {
            bad.push("a steady client, never over the limit, was refused".to_string());
        }
        // Window openers (count 1): of any two, one was decided a whole window after the other,
        // in one order or the other (a request sent first may be decided last).
        let mut openers: Vec<&Shot> = ep
            .shots
            .iter()
            .filter(|s| s.admitted() && s.count == Some(1))
            .collect();
        openers.sort_by_key(|s| s.sent_us);
        for (i, a) in openers.iter().enumerate() {
            for b in &openers[i + 1..] {
                let a_first = b.recv_us + EPS_US >= a.sent_us + w;
                let b_first = a.recv_us + EPS_US >= b.sent_us + w;
                if !a_first && !b_first {
                    bad.push(format!(
                        "two windows opened less than {WINDOW_SECS} s apart (sent {} and {})",
                        us(a.sent_us),
                        us(b.sent_us)
                    ));
                }
            }
        }
        let counted: Vec<&Shot> = ep
            .shots
            .iter()
            .filter(|s| s.admitted() || s.refused())
            .collect();
        // Which window each counted request was decided in: an opener o is possible when o was
        // decided no later than it and it was decided before o's window ended.
        let mut assigned: Vec<Vec<&Shot>> = vec![Vec::new(); openers.len()];
        let mut tainted = vec![false; openers.len()];
        for s in &counted {
            let candidates: Vec<usize> = (0..openers.len())
                .filter(|&k| {
                    openers[k].sent_us <= s.recv_us + EPS_US
                        && s.sent_us < openers[k].recv_us + w + EPS_US
                })
                .collect();
            match candidates.as_slice() {
                [] => bad.push(format!(
                    "{:?} sent {} answered {} (count {:?}) is in no window",
                    s.kind,
                    us(s.sent_us),
                    s.status,
                    s.count
                )),
                [k] => assigned[*k].push(s),
                many => {
                    v.ambiguous += 1;
                    for k in many {
                        tainted[*k] = true;
                    }
                }
            }
        }
        for (k, members) in assigned.iter().enumerate() {
            v.windows += 1;
            let mut counts: Vec<u32> = members.iter().filter_map(|s| s.count).collect();
            counts.sort_unstable();
            let admitted = counts.len() as u32;
            let paid = members.iter().filter(|s| s.paid()).count() as u32;
            v.max_paid = v.max_paid.max(paid);
            if paid > LIMIT {
                bad.push(format!("{paid} paid calls in one window"));
            }
            let refusals: Vec<&&Shot> = members.iter().filter(|s| s.refused()).collect();
            if tainted[k] {
                continue;
            }
            // Each admitted request has its own number, 1, 2, ... with none missing.
            if counts != (1..=admitted).collect::<Vec<_>>() {
                bad.push(format!("window {k}: admitted requests numbered {counts:?}"));
            }
            if !refusals.is_empty() {
                v.full_windows += 1;
                if admitted != LIMIT {
                    bad.push(format!(
                        "window {k}: refused after admitting {admitted}, not the limit {LIMIT}"
                    ));
                }
                let last = members.iter().find(|s| s.count == Some(LIMIT));
                for r in &refusals {
                    if last.is_some_and(|l| l.sent_us > r.recv_us + EPS_US) {
                        bad.push(format!(
                            "window {k}: refused (answered {}) before the limit was reached",
                            us(r.recv_us)
                        ));
                    }
                }
            }
        }
        // A burst that ended within one window from its start is all in one window.
        if ep.burst {
            let start = ep.shots.iter().map(|s| s.sent_us).min().unwrap_or(0);
            let end = ep.shots.iter().map(|s| s.recv_us).max().unwrap_or(0);
            let n = counted.len() as u32;
            let admitted = counted.iter().filter(|s| s.admitted()).count() as u32;
            if end + EPS_US < start + w && admitted != n.min(LIMIT) {
                bad.push(format!(
                    "a burst of {n} within one window had {admitted} admitted, not {}",
                    n.min(LIMIT)
                ));
            }
        }
        if !bad.is_empty() {
            v.problems
                .push(format!("{}\n  {}", describe(ep), bad.join("\n  ")));
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Memory and storage samples

/// Per process id: (microseconds since the start, VmRSS in KiB) samples.
type RssSamples = BTreeMap<u32, Vec<(u64, u64)>>;

/// VmRSS of `pid` in KiB.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// What the store holds at one moment.
#[derive(Clone, Copy, Debug, Default)]
struct Storage {
    /// Rate-limit keys (files, rows, Redis keys).
    counters: u64,
    /// Cached answers and claims.
    cache: u64,
    /// The usage journal's files or keys (a few per hour, whatever the traffic).
    journal: u64,
    /// Anything else (the events table, damaged files, unknown keys).
    other: u64,
    /// Redis keys without an expiry.
    no_ttl: u64,
}

#[derive(Clone, Copy, Debug)]
struct StorageSample {
    t_us: u64,
    s: Storage,
}

/// Counter files, cache files and anything else under the file store's directory.
fn file_storage(dir: &Path) -> Storage {
    let mut s = Storage::default();
    for path in files_under(dir) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // The journal's files, and its spool's (one a second, moved into the journal by the
        // next second's first request).
        let in_journal = path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|p| p == "journal" || p == resolve::support::defaults::JOURNAL_SPOOL_DIR);
        if in_journal || name == resolve::support::defaults::FILE_STORE_COUNT_FILE {
            // The journal's files, and the store's count of its shards' entries.
            s.journal += 1;
        } else if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
            s.counters += 1;
        } else if name.ends_with(".cache") {
            s.cache += 1;
        } else {
            s.other += 1;
        }
    }
    s
}

fn mysql_storage(db: &MariaDb) -> Storage {
    let d = db.database();
    let out = db.root_sql(&format!(
        "SELECT (SELECT COUNT(*) FROM `{d}`.rate_counters), (SELECT COUNT(*) FROM `{d}`.rate_cache), \
         (SELECT COUNT(*) FROM `{d}`.rate_events)"
    ));
    let n: Vec<u64> = out
        .split_whitespace()
        .map(|x| x.parse().unwrap_or_else(|_| panic!("row counts: {out:?}")))
        .collect();
    assert_eq!(n.len(), 3, "row counts: {out:?}");
    Storage {
        counters: n[0],
        cache: n[1],
        other: n[2],
        // Rows, not files: their size for a busy day is asserted by the store contract.
        journal: 0,
        no_ttl: 0,
    }
}

fn redis_storage(redis: &Redis) -> Storage {
    let mut s = Storage::default();
    let mut conn = redis.connect(Via::Tcp).expect("connect to redis");
    let mut cursor = "0".to_string();
    loop {
        let reply = conn.cmd(&["SCAN", &cursor, "COUNT", "1000"]).expect("SCAN");
        let Resp::Array(Some(parts)) = reply else {
            panic!("SCAN answered {reply}");
        };
        cursor = parts[0].as_text().expect("SCAN cursor");
        let Resp::Array(Some(keys)) = &parts[1] else {
            panic!("SCAN keys: {}", parts[1]);
        };
        for key in keys {
            let key = key.as_text().expect("key name");
            let ttl = conn.cmd(&["PTTL", &key]).expect("PTTL");
            if ttl == Resp::Int(-2) {
                continue; // expired between SCAN and PTTL
            }
            if ttl == Resp::Int(-1) {
                s.no_ttl += 1;
            }
            if key.starts_with("resolve:journal:") {
                s.journal += 1;
                // Only the trimmed notes list lives without an expiry.
                if ttl == Resp::Int(-1) && key == "resolve:journal:notes" {
                    s.no_ttl -= 1;
                }
            } else if key.starts_with("resolve:ip:") {
                s.counters += 1;
            } else if key.starts_with("resolve:cache:") {
                s.cache += 1;
            } else {
                s.other += 1;
            }
        }
        if cursor == "0" {
            return s;
        }
    }
}

/// Samples RSS of every FastCGI process and the store every SAMPLE_EVERY until `stop`.
fn sample(
    t0: Instant,
    stop: &AtomicBool,
    cgi_bin: &Path,
    storage: &(dyn Fn() -> Storage + Sync),
) -> (RssSamples, Vec<StorageSample>) {
    let mut rss: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
    let mut stored = Vec::new();
    loop {
        let done = stop.load(Ordering::SeqCst);
        let t_us = t0.elapsed().as_micros() as u64;
        for pid in processes_of(cgi_bin) {
            if let Some(kib) = rss_kib(pid) {
                rss.entry(pid).or_default().push((t_us, kib));
            }
        }
        let s = storage();
        stored.push(StorageSample { t_us, s });
        if stored.len() % 30 == 0 {
            let kib: Vec<u64> = rss.values().filter_map(|v| v.last()).map(|x| x.1).collect();
            eprintln!(
                "  {:>4.0} s: {} processes, RSS KiB {:?}; store {s:?}",
                t_us as f64 / 1e6,
                kib.len(),
                kib
            );
        }
        if done {
            return (rss, stored);
        }
        let until = Instant::now() + SAMPLE_EVERY;
        while Instant::now() < until && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One soak run

struct Figures {
    store: &'static str,
    secs: f64,
    requests: u64,
    statuses: BTreeMap<u16, u64>,
    paid: u64,
    max_paid: u32,
    full_windows: u64,
    windows: u64,
    ambiguous: u64,
    cache_hits: u64,
    rss: String,
    storage: String,
    episodes: usize,
    clients: usize,
}

impl Figures {
    fn row(&self) -> String {
        let statuses: Vec<String> = self
            .statuses
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        format!(
            "| {} | {:.0} | {} | {:.1} | {} | {} | {} / {LIMIT} | {} of {} ({} ambiguous) | {} | {} | {} |",
            self.store,
            self.secs,
            self.requests,
            self.requests as f64 / self.secs,
            statuses.join(" "),
            self.paid,
            self.max_paid,
            self.full_windows,
            self.windows,
            self.ambiguous,
            self.cache_hits,
            self.rss,
            self.storage,
        )
    }
}

const TABLE_HEAD: &str = "| store | s | requests | req/s | statuses | paid calls | max paid per client-window / limit | windows filled (refusals seen) | cache hits | RSS KiB warm→last (max), processes | storage max (bound): counters, cache, other |\n|---|---|---|---|---|---|---|---|---|---|---|";

/// Runs the soak against `site`, with `storage` reading the store. Panics with every problem
/// found, after printing the figures.
fn soak(store: &'static str, site: &Site, storage: &(dyn Fn() -> Storage + Sync)) {
    let secs = soak_secs();
    let (apache, provider) = (&site.apache, &site.provider);
    apache.settle_log();
    let log_mark = apache.error_log().len();
    let cgi_bin = apache.dir().join("cgi-bin");
    let t0 = Instant::now();
    let load = Load {
        apache_addr: apache.addr(),
        t0,
        until: t0 + Duration::from_secs(secs),
        clients: Mutex::new(vec![(false, 0); POOL]),
        episodes: Mutex::new(Vec::new()),
        next_episode: AtomicUsize::new(0),
        statuses: Mutex::new(BTreeMap::new()),
        problems: Mutex::new(Vec::new()),
        problem_count: AtomicU64::new(0),
    };
    eprintln!("soak {store}: {secs} s of load, {WORKERS} workers, FastCGI");
    let stop = AtomicBool::new(false);
    let (rss, stored) = std::thread::scope(|s| {
        let sampler = s.spawn(|| sample(t0, &stop, &cgi_bin, storage));
        let workers: Vec<_> = (0..WORKERS)
            .map(|i| {
                let load = &load;
                s.spawn(move || load.worker(i as u64 + 1 + t0.elapsed().as_nanos() as u64))
            })
            .collect();
        for w in workers {
            w.join().expect("worker");
        }
        stop.store(true, Ordering::SeqCst);
        sampler.join().expect("sampler")
    });
    let elapsed = t0.elapsed().as_secs_f64();
    let mut failures: Vec<String> = Vec::new();

    // Answers as they arrived.
    let statuses = load.statuses.lock().unwrap().clone();
    let requests: u64 = statuses.values().sum();
    let server_errors: u64 = statuses
        .iter()
        .filter(|(k, _)| **k >= 500)
        .map(|(_, v)| v)
        .sum();
    if server_errors > 0 {
        failures.push(format!("{server_errors} answers were 5xx: {statuses:?}"));
    }
    let n = load.problem_count.load(Ordering::SeqCst);
    if n > 0 {
        failures.push(format!(
            "{n} answers broke the contract; the first:\n{}",
            load.problems.lock().unwrap().join("\n---\n")
        ));
    }

    // Exact limits, window by window.
    let episodes = load.episodes.lock().unwrap().clone();
    let v = verify(&episodes);
    if !v.problems.is_empty() {
        failures.push(format!(
            "{} episodes broke the limits; the first:\n{}",
            v.problems.len(),
            v.problems
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
    // Every paid call is an admitted request's, and every admitted request paid once.
    let mut asked: BTreeMap<String, u64> = BTreeMap::new();
    let links: Vec<String> = provider
        .requests()
        .iter()
        .map(|call| call.param("link").unwrap_or_default())
        .collect();
    for l in &links {
        *asked.entry(l.clone()).or_default() += 1;
    }
    if asked != v.expected_paid {
        let mut diff = Vec::new();
        for (l, n) in &asked {
            let want = v.expected_paid.get(l).copied().unwrap_or(0);
            if *n != want {
                diff.push(format!(
                    "{l}: provider asked {n} times, answers account for {want}"
                ));
            }
        }
        for (l, want) in &v.expected_paid {
            if !asked.contains_key(l) {
                diff.push(format!(
                    "{l}: provider asked 0 times, answers account for {want}"
                ));
            }
        }
        failures.push(format!(
            "paid calls do not match the admitted requests ({} differences):\n{}",
            diff.len(),
            diff.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
        ));
    }
    let bearer = format!("Bearer {TOKEN}");
    let bad_auth = provider
        .requests()
        .iter()
        .filter(|call| call.header("Authorization") != Some(bearer.as_str()))
        .count();
    if bad_auth > 0 {
        failures.push(format!("{bad_auth} provider calls without the token"));
    }
    // The load did what it is for.
    if v.full_windows == 0 || !statuses.contains_key(&200) || !statuses.contains_key(&400) {
        failures.push(format!(
            "the load never filled a window, or never got 200 or 400: {statuses:?}"
        ));
    }

    let (rss_text, memory_failures) = check_memory(&rss, secs);
    failures.extend(memory_failures);
    let (storage_text, storage_failures, clients) = check_storage(&stored, &episodes);
    failures.extend(storage_failures);

    // The log: no store or provider failure, nothing from mod_fcgid going wrong.
    apache.settle_log();
    let log = apache.error_log();
    let log = log.get(log_mark..).unwrap_or_default();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("resolve: error: ")
                || l.contains("sweep failed")
                || l.contains("mod_fcgid: error")
                || l.contains("panicked")
        })
        .collect();
    if !errors.is_empty() {
        failures.push(format!(
            "{} error lines in the error_log; the first:\n{}",
            errors.len(),
            errors
                .iter()
                .take(10)
                .copied()
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }

    let figures = Figures {
        store,
        secs: elapsed,
        requests,
        statuses,
        paid: links.len() as u64,
        max_paid: v.max_paid,
        full_windows: v.full_windows,
        windows: v.windows,
        ambiguous: v.ambiguous,
        cache_hits: v.cache_hits,
        rss: rss_text,
        storage: storage_text,
        episodes: episodes.len(),
        clients,
    };
    eprintln!(
        "soak {store}: {} episodes, {} clients; RSS samples per pid: {:?}",
        figures.episodes,
        figures.clients,
        rss.iter()
            .map(|(pid, s)| (*pid, s.first().map(|x| x.1), s.last().map(|x| x.1), s.len()))
            .collect::<Vec<_>>()
    );
    eprintln!("{TABLE_HEAD}\n{}", figures.row());
    if let Ok(path) = std::env::var("RESOLVE_SOAK_REPORT") {
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("open {path}: {e}"));
        writeln!(f, "{}", figures.row()).expect("write the report");
    }
    assert!(
        failures.is_empty(),
        "soak {store}:\n{}",
        failures.join("\n\n")
    );
}

/// Each FastCGI process that lived through warm-up: its RSS at the end against its RSS after
/// warm-up. Returns the figures and the failures.
fn check_memory(rss: &RssSamples, secs: u64) -> (String, Vec<String>) {
    let mut failures = Vec::new();
    let warm_us = (secs * 1_000_000 / 5).max(5_000_000);
    let mut checked = 0;
    let mut worst: Option<(u32, u64, u64, u64)> = None; // pid, warm, last, max
    let mut max_any = 0;
    for (pid, samples) in rss {
        max_any = max_any.max(samples.iter().map(|x| x.1).max().unwrap_or(0));
        // A process mod_fcgid started ahead of need sits at its idle size until its first
        // request: its life, for warming up, starts at that request (the RSS leaving the idle
        // size), not at its start.
        let idle = samples[0].1;
        let first_t = samples
            .iter()
            .find(|(_, kib)| *kib > idle + RSS_GROWTH_KIB)
            .map_or(samples[0].0, |(t, _)| *t);
        // After the run's warm-up, and after half of it in this process's own working life.
        let Some(at) = samples
            .iter()
            .position(|(t, _)| *t >= warm_us.max(first_t + warm_us / 2))
        else {
            continue;
        };
        if at + 1 >= samples.len() {
            continue;
        }
        checked += 1;
        let warm = samples[at].1;
        let last = samples.last().expect("samples").1;
        let max = samples.iter().map(|x| x.1).max().unwrap_or(0);
        if worst.is_none_or(|(_, w, l, _)| last.saturating_sub(warm) > l.saturating_sub(w)) {
            worst = Some((*pid, warm, last, max));
        }
        if last > warm + RSS_GROWTH_KIB.max(warm / 4) {
            failures.push(format!(
                "FastCGI process {pid} grew from {warm} KiB after warm-up to {last} KiB: {samples:?}"
            ));
        }
    }
    if checked == 0 {
        failures.push(format!(
            "no FastCGI process lived long enough to be measured: {rss:?}"
        ));
    }
    let text = match worst {
        Some((pid, warm, last, max)) => format!(
            "{warm}→{last} ({max}; any {max_any}), {} pids ({checked} measured; most growth: pid {pid})",
            rss.len()
        ),
        None => format!("none measured, {} pids", rss.len()),
    };
    (text, failures)
}

/// Every storage sample against what the episodes around it can have left: the clients of the
/// last windows and the answers of the last cache periods, each kept at most GRACE_SECS +
/// SWEEP_LAG_SECS longer. Something must have been removed by the end. Returns the figures, the
/// failures and the number of clients counted.
fn check_storage(stored: &[StorageSample], episodes: &[Episode]) -> (String, Vec<String>, usize) {
    let mut failures = Vec::new();
    let span = |secs: u64| (secs + GRACE_SECS + SWEEP_LAG_SECS) * 1_000_000;
    let mut max = Storage::default();
    let mut bound_at_max = (0, 0);
    for sample in stored {
        let t = sample.t_us;
        let recent = |span_us: u64| {
            episodes
                .iter()
                .filter(move |e| e.end_us + span_us >= t && e.start_us <= t)
        };
        let clients: BTreeSet<usize> = recent(span(WINDOW_SECS)).map(|e| e.client).collect();
        let counter_bound = clients.len() as u64 + STORAGE_SLACK;
        let cache_bound = recent(span(CACHE_TTL_SECS))
            .map(|e| e.shots.iter().filter(|s| s.kind.may_pay()).count() as u64)
            .sum::<u64>()
            + STORAGE_SLACK;
        let s = sample.s;
        if s.counters > max.counters {
            bound_at_max.0 = counter_bound;
        }
        if s.cache > max.cache {
            bound_at_max.1 = cache_bound;
        }
        max.counters = max.counters.max(s.counters);
        max.cache = max.cache.max(s.cache);
        max.other = max.other.max(s.other);
        max.journal = max.journal.max(s.journal);
        if s.journal > JOURNAL_BOUND {
            failures.push(format!(
                "at {}: the usage journal holds {} files or keys (bound {JOURNAL_BOUND})",
                us(t),
                s.journal
            ));
        }
        max.no_ttl = max.no_ttl.max(s.no_ttl);
        if s.counters > counter_bound || s.cache > cache_bound {
            failures.push(format!(
                "at {}: the store holds {} counters (bound {counter_bound}) and {} cache entries (bound {cache_bound})",
                us(t),
                s.counters,
                s.cache
            ));
        }
        if s.other > 0 || s.no_ttl > 0 {
            failures.push(format!(
                "at {}: the store holds {} unexpected entries and {} keys without expiry",
                us(t),
                s.other,
                s.no_ttl
            ));
        }
    }
    let clients_counted: BTreeSet<usize> = episodes
        .iter()
        .filter(|e| e.shots.iter().any(Shot::admitted))
        .map(|e| e.client)
        .collect();
    let last = stored.last().map(|x| x.s).unwrap_or_default();
    if stored.len() < 2 || last.counters >= clients_counted.len() as u64 {
        failures.push(format!(
            "nothing was ever removed: {} counters at the end for {} clients counted ({} samples)",
            last.counters,
            clients_counted.len(),
            stored.len()
        ));
    }
    let text = format!(
        "{} ({}), {} ({}), {}, journal {}; at the end {}, {}; {} clients in all",
        max.counters,
        bound_at_max.0,
        max.cache,
        bound_at_max.1,
        max.other,
        max.journal,
        last.counters,
        last.cache,
        clients_counted.len()
    );
    (text, failures, clients_counted.len())
}

/// Files (16 client shards an hour, the notes) or Redis keys (two an hour, the notes) of the
/// usage journal over a soak of at most a few hours.
const JOURNAL_BOUND: u64 = 16 * 4 + 1;

/// A soak site under mod_fcgid: the echo stand-in, the store section as `store` makes it
/// (from the file store's), and the configuration every soak site shares.
fn soak_site(name: &str, store: impl FnOnce(&mut Value) + 'static) -> Site {
    Site::builder(&format!("soak-{name}"))
        .mode(Mode::Fcgid)
        .provider(echo_provider())
        .rules(vec![rule("ip", "ip", LIMIT as u64, WINDOW_SECS)])
        .config(|cfg| {
            store(&mut cfg["store"]);
            cfg["store"]["on_error"] = json!("deny");
            cfg["store"]["sweep_grace_secs"] = json!(GRACE_SECS);
            cfg["cache"] = json!({"ttl_secs": CACHE_TTL_SECS});
        })
        .start()
}

#[test]
fn soak_file_store() {
    let site = soak_site("file", |store| store["sweep_one_in"] = json!(SWEEP_ONE_IN));
    soak("file", &site, &|| file_storage(&site.data));
}

#[test]
fn soak_mysql_store() {
    let db = MariaDb::builder("soak").start();
    let section = json!({
        "kind": "mysql", "host": "127.0.0.1", "port": db.port(), "user": db.user(),
        "password": db.password(), "database": db.database(), "sweep_one_in": SWEEP_ONE_IN,
    });
    let site = soak_site("mysql", |store| *store = section);
    create_tables(&site.config_path);
    soak("mysql", &site, &|| mysql_storage(&db));
}

#[test]
fn soak_redis_store() {
    let redis = Redis::builder("soak").start();
    let section = json!({"kind": "redis", "host": "127.0.0.1", "port": redis.port()});
    let site = soak_site("redis", |store| *store = section);
    soak("redis", &site, &|| redis_storage(&redis));
}

/// `resolve check`, which creates the tables, so that counting rows works from the start.
fn create_tables(config_path: &Path) {
    let out = command(&[
        "check",
        "--config",
        config_path.to_str().expect("utf-8 path"),
    ])
    .output()
    .expect("run resolve check");
    let text = output_text(&out);
    assert!(out.status.success(), "resolve check:\n{text}");
}
