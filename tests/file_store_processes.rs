//! The file store under many real processes: counters that survive processes killed with
//! SIGKILL at random instants (its record format's crash argument), and a flood of 10,000
//! clients that keeps the data directory within its budget. Exact limits when many processes
//! race are in store_contract.rs, for every store.

mod support;

use std::net::Ipv6Addr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use resolve::core::clock::{FakeClock, SystemClock};
use resolve::core::rule::{Algorithm, KeyKind, Rule};
use resolve::store::Check;
use resolve::store::counters::Counters;
use resolve::store::file::FileStore;
use resolve::store::file::budget::Budget;
use resolve::store::upkeep::Upkeep;
use resolve::support::defaults;
use support::TempDir;
use support::cgi::bare_get;

fn write_config(dir: &Path, limit: u64) -> PathBuf {
    let path = dir.join("config.json");
    let config = serde_json::json!({
        "provider": {"kind": "echo"},
        "store": {"kind": "file", "dir": dir.join("data"), "sweep_one_in": 0},
        "rules": [{"name": "ip", "key": "ip", "limit": limit, "window_secs": 3600}],
    });
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// Starts the binary as a CGI program answering one GET from `addr`.
fn spawn_cgi(config: &Path, addr: &str) -> Child {
    spawn_method(config, "GET", addr)
}

/// Starts the binary as a CGI program answering one `method` request from `addr`.
fn spawn_method(config: &Path, method: &str, addr: &str) -> Child {
    bare_get(config, "link=https%3A%2F%2Fhost.example%2Ffile", addr)
        .env("REQUEST_METHOD", method)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start resolve")
}

fn status_of(stdout: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(stdout).ok()?;
    text.strip_prefix("Status: ")?.get(..3)?.parse().ok()
}

#[test]
fn killed_processes_never_lose_an_admitted_request() {
    let dir = TempDir::new("kill");
    dir.mkdir("data");
    let config = write_config(dir.path(), 1_000_000);
    let admitted = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(8);
    let threads: Vec<_> = (0..8u64)
        .map(|worker| {
            let (config, admitted, started, killed) = (
                config.clone(),
                admitted.clone(),
                started.clone(),
                killed.clone(),
            );
            std::thread::spawn(move || {
                let mut n = 0u64;
                while Instant::now() < deadline && n < 150 {
                    n += 1;
                    let mut child = spawn_cgi(&config, "192.0.2.7");
                    started.fetch_add(1, Ordering::SeqCst);
                    // Half the workers kill their process after a pseudo-random pause of up to
                    // about 3 ms, which lands anywhere from start-up to the file write.
                    if worker % 2 == 0 {
                        let pause = (n * 7919 + worker * 104_729) % 3000;
                        std::thread::sleep(Duration::from_micros(pause));
                        if child.kill().is_ok() {
                            killed.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    let out = child.wait_with_output().unwrap();
                    // Only an answer that arrived whole counts as admitted.
                    if status_of(&out.stdout) == Some(200) && out.stdout.ends_with(b"file\n") {
                        admitted.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let store = FileStore::new(dir.join("data"), SystemClock, Duration::from_secs(600));
    let counter = store
        .read("resolve:ip:192.0.2.7")
        .expect("the file stays readable")
        .expect("a counter was written");
    let (admitted, started, killed) = (
        admitted.load(Ordering::SeqCst),
        started.load(Ordering::SeqCst),
        killed.load(Ordering::SeqCst),
    );
    let interrupted = started - admitted;
    eprintln!(
        "started {started}, kill signals {killed}, interrupted {interrupted}, admitted {admitted}, counted {}",
        counter.count
    );
    assert!(
        interrupted > 50,
        "too few processes were interrupted ({interrupted}) for the test to mean anything"
    );
    assert!(
        counter.count as usize >= admitted,
        "lost counts: {} < {admitted}",
        counter.count
    );
    assert!(counter.count as usize <= started);
    // And the store still works for the next request.
    let out = spawn_cgi(&config, "192.0.2.7").wait_with_output().unwrap();
    assert_eq!(status_of(&out.stdout), Some(200));
}

/// One request's status and what the program wrote to its error log.
fn ask(config: &Path, method: &str, addr: &str) -> (Option<u16>, String) {
    let out = spawn_method(config, method, addr)
        .wait_with_output()
        .unwrap();
    (
        status_of(&out.stdout),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A site with one `ip` rule of 3 an hour and the data directory's budget set to `max_files`
/// and 16 MiB.
fn budget_config(dir: &Path, max_files: u64) -> PathBuf {
    let path = dir.join("config.json");
    let config = serde_json::json!({
        "provider": {"kind": "echo"},
        "store": {"kind": "file", "dir": dir.join("data"), "sweep_one_in": 0,
                  "max_files": max_files, "max_bytes": 16 * 1024 * 1024},
        "rules": [{"name": "ip", "key": "ip", "limit": 3, "window_secs": 3600}],
    });
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

#[test]
fn head_counts_against_the_limit_like_get() {
    let dir = TempDir::new("head");
    let config = budget_config(dir.path(), 3000);
    for (first, then) in [("HEAD", "GET"), ("GET", "HEAD")] {
        let addr = if first == "HEAD" {
            "192.0.2.10"
        } else {
            "192.0.2.11"
        };
        for n in 0..3 {
            assert_eq!(ask(&config, first, addr).0, Some(200), "{first} {n}");
        }
        assert_eq!(
            ask(&config, first, addr).0,
            Some(429),
            "{first} past the limit"
        );
        assert_eq!(
            ask(&config, then, addr).0,
            Some(429),
            "{then} after {first}"
        );
    }
}

/// The key of the flood's client `i` (the /64 `2001:db8:{i % 100}:{i / 100}::`).
fn own_key(i: u32) -> String {
    let (a, b) = ((i % 100) as u16, (i / 100) as u16);
    format!(
        "resolve:ip:{}/64",
        Ipv6Addr::new(0x2001, 0xdb8, a, b, 0, 0, 0, 0)
    )
}

/// 10,000 clients, each from its own IPv6 /64 in one of 100 /48s, one HEAD each: the data
/// directory stays within its budget (3,000 files, 16 MiB), the clients past it are counted by
/// their /48's folded key, never past the limit, a client counted before keeps its count, and
/// the folding is logged once.
#[test]
fn a_flood_of_10000_clients_keeps_the_data_directory_within_its_budget() {
    const CLIENTS: u32 = 10_000;
    const MAX_FILES: u64 = 3000;
    const MAX_BYTES: u64 = 16 * 1024 * 1024;
    let dir = TempDir::new("flood");
    let config = budget_config(dir.path(), MAX_FILES);
    let data = dir.join("data");
    let store = FileStore::new(&data, SystemClock, Duration::from_secs(600));
    // A client seen before the flood: 2 of its 3.
    let regular = "2001:db8:ffff:1::1";
    for _ in 0..2 {
        assert_eq!(ask(&config, "GET", regular).0, Some(200));
    }
    let addr = |i: u32| format!("2001:db8:{:x}:{:x}::1", i % 100, i / 100);
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (config, next) = (config.clone(), next.clone());
            std::thread::spawn(move || {
                let (mut admitted, mut logged) = (0u64, Vec::new());
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst) as u32;
                    if i >= CLIENTS {
                        return (admitted, logged);
                    }
                    let (status, stderr) = ask(&config, "HEAD", &addr(i));
                    match status {
                        Some(200) => admitted += 1,
                        Some(429) => {}
                        other => panic!("client {i}: {other:?} {stderr}"),
                    }
                    logged.extend(
                        stderr
                            .lines()
                            .filter(|l| l.contains("reached its budget"))
                            .map(str::to_owned),
                    );
                }
            })
        })
        .collect();
    let (mut admitted, mut logged) = (0u64, Vec::new());
    for w in workers {
        let (a, l) = w.join().unwrap();
        admitted += a;
        logged.extend(l);
    }

    // The budget held, in files (directories count against an inode quota too) and bytes.
    let entries = support::temp::entries_under(&data);
    let bytes: u64 = entries
        .iter()
        .filter_map(|p| std::fs::symlink_metadata(p).ok())
        .map(|m| (m.blocks() * 512).max(m.len()))
        .sum();
    eprintln!(
        "{CLIENTS} clients: {} entries, {bytes} bytes on disk, {admitted} admitted, folding \
         logged {} times",
        entries.len(),
        logged.len()
    );
    assert!(entries.len() as u64 <= MAX_FILES, "{} files", entries.len());
    assert!(bytes <= MAX_BYTES, "{bytes} bytes");
    assert_eq!(logged.len(), 1, "{logged:?}");

    // Every admitted request is counted once, by the client's own key or by a folded key (a
    // bucket its /48 shares with a few others), and none of them past the limit.
    let mut counted = 0u64;
    let mut own = 0;
    for i in 0..CLIENTS {
        if let Some(c) = store.read(&own_key(i)).unwrap() {
            assert!(c.count <= 3, "{}: {}", own_key(i), c.count);
            counted += u64::from(c.count);
            own += 1;
        }
    }
    let buckets = store.folded_counters().unwrap();
    for c in buckets.iter().flatten() {
        assert!(c.count <= 3, "a folded key: {}", c.count);
        counted += u64::from(c.count);
    }
    eprintln!("own keys {own}, folded keys {}", buckets.len());
    assert_eq!(counted, admitted, "admitted requests and counts");
    assert!(
        own < CLIENTS && !buckets.is_empty(),
        "nothing was folded: {own}, {}",
        buckets.len()
    );
    // The 100 /48s are spread over the buckets, never counted by one key for everyone.
    assert!(buckets.len() > 50, "{} folded keys", buckets.len());

    // A folded client asking again is refused at its network's limit, never given its own.
    let folded = (0..CLIENTS)
        .find(|i| store.read(&own_key(*i)).unwrap().is_none())
        .unwrap();
    let mut more = 0;
    for _ in 0..5 {
        if ask(&config, "HEAD", &addr(folded)).0 == Some(200) {
            more += 1;
        }
    }
    assert!(more <= 3, "{more} more for a folded client");

    // The client seen before keeps its count: one more, then refused.
    let before = store
        .read("resolve:ip:2001:db8:ffff:1::/64")
        .unwrap()
        .expect("its key is kept");
    assert_eq!(before.count, 2);
    assert_eq!(ask(&config, "HEAD", regular).0, Some(200));
    assert_eq!(ask(&config, "GET", regular).0, Some(429));
}

/// The starter's visitor limits (30 a minute, 300 a day) with the data directory's budget set
/// to `max_files` and the default 64 MiB.
fn starter_limits_config(dir: &Path, max_files: u64) -> PathBuf {
    let path = dir.join("config.json");
    let config = serde_json::json!({
        "provider": {"kind": "echo"},
        "store": {"kind": "file", "dir": dir.join("data"), "sweep_one_in": 0,
                  "max_files": max_files, "max_bytes": 64 * 1024 * 1024},
        "rules": [
            {"name": "ip", "key": "ip", "limit": 30, "window_secs": 60},
            {"name": "ip-day", "key": "ip", "limit": 300, "window_secs": 86400},
        ],
    });
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// The same rules as the program reads them from `starter_limits_config`.
fn starter_rules() -> Vec<Rule> {
    [("ip", 30, 60), ("ip-day", 300, 86_400)]
        .iter()
        .map(|&(name, limit, window)| {
            Rule::new(
                name,
                KeyKind::Ip,
                Algorithm::Fixed,
                limit,
                window,
                "resolve:{rule}:{ip}",
            )
            .unwrap()
        })
        .collect()
}

/// One request from `addr` decided by `store` as the program decides it: both rules at once.
fn admitted_by(store: &dyn Counters, rules: &[Rule], addr: &str) -> bool {
    let checks: Vec<Check<'_>> = rules
        .iter()
        .map(|rule| Check {
            rule,
            key: rule.key_for(addr),
        })
        .collect();
    store.decide(&checks).expect("decided").is_admit()
}

/// The address of new visitor `i` of a flood or a test: one per IPv4 /24, out of `base`.
fn visitor(base: u8, i: u32) -> String {
    format!("{base}.{}.{}.7", (i >> 8) & 0xff, i & 0xff)
}

/// Client `i` of group `base` in one IPv4 /24 of its own: its address, and its identity as the
/// rules count it (the same).
fn v4_client(base: u8, i: u32) -> (String, String) {
    let addr = visitor(base, i);
    (addr.clone(), addr)
}

/// Client `i` of group `base` in one IPv6 /48 of its own: its address, and its identity as the
/// rules count it (its /64).
fn v6_client(base: u8, i: u32) -> (String, String) {
    let net = |last| Ipv6Addr::new(0x2001, 0xd00 + u16::from(base), i as u16, 0, 0, 0, 0, last);
    (net(1).to_string(), format!("{}/64", net(0)))
}

/// One HEAD from each of `networks` networks (`client`: IPv4 /24s or IPv6 /48s) run as CGI (a flood of new clients past the data
/// directory's budget of `max_files`), then, on the same files with a clock moved by the test:
/// one folded address at 31 a minute for twelve minutes (enough to spend a day's 300), new
/// visitors arriving meanwhile, and new visitors a minute after it stopped. The directory
/// stays within its budget, and at least 99% of new visitors are admitted during the flood,
/// while the address spends its share, and after.
fn flood_then_one_folded_address(
    max_files: u64,
    networks: u32,
    client: fn(u8, u32) -> (String, String),
) {
    let dir = TempDir::new(&format!("flood-{max_files}"));
    let config = starter_limits_config(dir.path(), max_files);
    let data = dir.join("data");
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (config, next) = (config.clone(), next.clone());
            std::thread::spawn(move || {
                let mut admitted = 0u32;
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst) as u32;
                    if i >= networks {
                        return admitted;
                    }
                    let (status, stderr) = ask(&config, "HEAD", &client(10, i).0);
                    match status {
                        Some(200) => admitted += 1,
                        Some(429) => {}
                        other => panic!("client {i}: {other:?} {stderr}"),
                    }
                }
            })
        })
        .collect();
    let flood_admitted: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let flood_secs = started.elapsed().as_secs_f64();
    let entries = support::temp::entries_under(&data).len() as u64;

    // The rest on the same files, with the time moved by the test.
    let clock = Rc::new(FakeClock::at(support::system::now_ms() + 1000));
    let store =
        FileStore::new(&data, clock.clone(), Duration::from_secs(600)).with_budget(Budget {
            max_files,
            max_bytes: 64 * 1024 * 1024,
            ..Budget::default()
        });
    let rules = starter_rules();
    // A folded address: a new one whose own keys are not made (the directory is full).
    let mut attacker_admitted = 0u32;
    let attacker = (0..50)
        .map(|i| client(11, i).1)
        .find(|addr| {
            attacker_admitted = u32::from(admitted_by(&store, &rules, addr));
            store.read(&rules[0].key_for(addr)).unwrap().is_none()
        })
        .expect("new clients are folded past the budget");
    let (mut during, mut during_admitted) = (0u32, 0u32);
    let mut newcomer = 0u32;
    for _minute in 0..12 {
        for _ in 0..31 {
            if admitted_by(&store, &rules, &attacker) {
                attacker_admitted += 1;
            }
            // Three new visitors for each of the address's requests.
            for _ in 0..3 {
                during += 1;
                newcomer += 1;
                if admitted_by(&store, &rules, &client(12, newcomer).1) {
                    during_admitted += 1;
                }
            }
            clock.advance_ms(60_000 / 31);
        }
    }
    // A minute after the address stopped.
    clock.advance_ms(60_000);
    let after = 1000u32;
    let after_admitted = (0..after)
        .filter(|i| admitted_by(&store, &rules, &client(13, *i).1))
        .count() as u32;
    let entries_after = support::temp::entries_under(&data).len() as u64;
    let attacker_spent = !admitted_by(&store, &rules, &attacker);
    let share = |a: u32, n: u32| f64::from(a) * 100.0 / f64::from(n.max(1));
    eprintln!(
        "budget {max_files} files: {networks} networks in {flood_secs:.1} s, {flood_admitted} \
         admitted ({:.2}%), {entries} entries after the flood, {entries_after} at the end; the \
         folded address {attacker}: {attacker_admitted} of 372 admitted in 12 minutes; new \
         visitors meanwhile: {during_admitted} of {during} admitted ({:.2}%); a minute after it \
         stopped: {after_admitted} of {after} ({:.2}%)",
        share(flood_admitted, networks),
        share(during_admitted, during),
        share(after_admitted, after)
    );
    assert!(entries <= max_files && entries_after <= max_files);
    assert!(
        share(flood_admitted, networks) >= 99.0,
        "{flood_admitted} of {networks} admitted during the flood"
    );
    assert!(
        share(during_admitted, during) >= 99.0,
        "{during_admitted} of {during} new visitors admitted while the address spent its share"
    );
    assert!(
        share(after_admitted, after) >= 99.0,
        "{after_admitted} of {after} new visitors admitted a minute after it stopped"
    );
    // Folding stops as soon as there is room: once the minutes' keys have ended and a sweep
    // removed them, a new visitor gets a key of its own again.
    clock.advance_ms(11 * 60_000);
    let swept = store.sweep(None).unwrap();
    let fresh = client(14, 1).1;
    assert!(admitted_by(&store, &rules, &fresh));
    let own_again = store.read(&rules[0].key_for(&fresh)).unwrap().is_some();
    // And the folded keys end with their windows: a day on, a sweep removes them all.
    clock.advance_ms(86_400_000);
    store.sweep(None).unwrap();
    let folded_left = store.folded_counters().unwrap().len();
    eprintln!(
        "a sweep 11 minutes on removed {} keys; a new visitor then counted by its own key: \
         {own_again}; folded keys left a day on: {folded_left}",
        swept.removed
    );
    assert!(own_again, "still folded after the sweep found room");
    assert_eq!(folded_left, 0);
    // The folded address spent its folded key's day (with the few new visitors that share
    // it), and got no more than the day's limit.
    assert!(attacker_admitted <= 300, "{attacker_admitted}");
    assert!(attacker_spent, "the folded address is still admitted");
}

#[test]
fn a_flood_of_new_networks_never_shuts_out_new_visitors() {
    flood_then_one_folded_address(defaults::FILE_STORE_MAX_FILES, 3_500, v4_client);
}

#[test]
fn a_flood_of_new_ipv6_networks_never_shuts_out_new_visitors() {
    flood_then_one_folded_address(defaults::FILE_STORE_MAX_FILES, 3_500, v6_client);
}

#[test]
fn a_flood_past_a_small_budget_never_shuts_out_new_visitors() {
    flood_then_one_folded_address(3_000, 2_000, v4_client);
}

/// Three first-time visitors of one /24, refused only because the directory is full and the
/// folded key they share with a spender of their network is spent, are not blamed for it:
/// `auto_block` blocks none of them, nor their /24.
#[test]
fn refusals_by_a_shared_key_never_block_anyone() {
    let dir = TempDir::new("fold-auto-block");
    let path = dir.join("config.json");
    let config = serde_json::json!({
        "provider": {"kind": "echo"},
        "store": {"kind": "file", "dir": dir.join("data"), "sweep_one_in": 0,
                  "max_files": defaults::FILE_STORE_MIN_MAX_FILES,
                  "max_bytes": defaults::FILE_STORE_MIN_MAX_BYTES},
        "rules": [{"name": "ip", "key": "ip", "limit": 3, "window_secs": 3600}],
        "auto_block": {"refusals": 2, "window_secs": 3600, "block_secs": 3600},
    });
    std::fs::write(&path, config.to_string()).unwrap();
    // Fill the clients' share: one HEAD from each of 400 /24s.
    for i in 0..400 {
        assert_eq!(ask(&path, "HEAD", &visitor(10, i)).0, Some(200), "{i}");
    }
    let store = FileStore::new(dir.join("data"), SystemClock, Duration::from_secs(600));
    // One address of 11.0.0.0/24, folded, spends its folded key.
    let spender = "11.0.0.200";
    let mut spent = false;
    for _ in 0..4 {
        spent = ask(&path, "GET", spender).0 == Some(429);
    }
    assert!(spent, "the folded key was not spent");
    assert!(
        store
            .read(&format!("resolve:ip:{spender}"))
            .unwrap()
            .is_none(),
        "the spender has a key of its own: nothing was folded"
    );
    // Three first-time visitors of the same /24: refused by the shared key, three times each.
    let mut statuses = Vec::new();
    for visitor in ["11.0.0.1", "11.0.0.2", "11.0.0.3"] {
        for _ in 0..3 {
            statuses.push(ask(&path, "GET", visitor).0);
        }
    }
    let after = ask(&path, "GET", "11.0.0.4").0;
    eprintln!(
        "three first-time visitors refused by a shared key: {statuses:?}; a fourth: {after:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == Some(429)),
        "{statuses:?}: blocked for refusals that were not theirs"
    );
    assert_eq!(after, Some(429), "the /24 was blocked");
    // A client refused by its own key still is: one of the flood's, past its limit of 3.
    let own = visitor(10, 5);
    assert!(store.read(&format!("resolve:ip:{own}")).unwrap().is_some());
    let mine: Vec<Option<u16>> = (0..6).map(|_| ask(&path, "GET", &own).0).collect();
    eprintln!("a client over its own key's limit: {mine:?}");
    assert_eq!(mine.last(), Some(&Some(403)), "{mine:?}");
}

/// Past the data directory's budget, the dashboard's sign-in budgets still count each address
/// and network by their own keys: failures from twenty new networks never shut out a
/// brand-new address of another one, and its first wrong password is its first failure.
#[test]
fn sign_in_budgets_never_fold_into_another_network() {
    use resolve::admin::signin::{self, Budgets, Gate, Who};
    let dir = TempDir::new("fold-signin");
    let store = FileStore::new(dir.join("data"), SystemClock, Duration::from_secs(600))
        .with_budget(Budget {
            max_files: defaults::FILE_STORE_MIN_MAX_FILES,
            max_bytes: defaults::FILE_STORE_MIN_MAX_BYTES,
            ..Budget::default()
        });
    // Visitors fill the clients' share.
    let rule = Rule::new(
        "ip",
        KeyKind::Ip,
        Algorithm::Fixed,
        3,
        3600,
        "resolve:{rule}:{ip}",
    )
    .unwrap();
    for i in 0..600 {
        admitted_by(&store, std::slice::from_ref(&rule), &visitor(10, i));
    }
    assert!(
        store
            .read(&rule.key_for(&visitor(10, 599)))
            .unwrap()
            .is_none(),
        "the directory is not full"
    );
    let budgets = Budgets::default();
    let who = |addr: &str| Who::new(addr.parse().unwrap(), addr.to_owned(), None);
    // One wrong password from each of twenty new networks (the site's budget takes thirty).
    for i in 0..20 {
        let gate = signin::gate(&store, &budgets, &who(&visitor(12, i << 8))).unwrap();
        assert!(
            matches!(gate, Gate::Open { attempt: 1, .. }),
            "{i}: {gate:?}"
        );
    }
    // A brand-new address of another network: its own first failure.
    let gate = signin::gate(&store, &budgets, &who("13.0.0.7")).unwrap();
    eprintln!("a new address's first wrong password past the budget: {gate:?}");
    assert!(
        matches!(
            gate,
            Gate::Open {
                attempt: 1,
                limit: 5,
                ..
            }
        ),
        "{gate:?}"
    );
    // Its own address's and network's keys count it, nobody else's.
    for key in [
        "resolve:admin-signin:13.0.0.7",
        "resolve:admin-signin-net:13.0.0.0/24",
    ] {
        assert_eq!(store.read(key).unwrap().map(|c| c.count), Some(1), "{key}");
    }
    // They are never folded, so what bounds their files is the site's budget: attempts past
    // it leave no file behind (the 256 shard directories are the budget's already).
    let files = || {
        support::temp::entries_under(&dir.join("data"))
            .into_iter()
            .filter(|p| p.is_file())
            .count()
    };
    let before = files();
    let (mut open, mut shut) = (0, 0);
    for i in 0..100 {
        match signin::gate(&store, &budgets, &who(&visitor(14, i << 8))).unwrap() {
            Gate::Open { .. } => open += 1,
            Gate::Shut { .. } => shut += 1,
        }
    }
    let grown = files() - before;
    eprintln!("100 more networks: {open} counted, {shut} refused, {grown} more files");
    assert_eq!(open, 9, "the site's budget of 30");
    assert!(
        grown <= 2 * open,
        "{grown} files for {open} attempts counted"
    );
}
