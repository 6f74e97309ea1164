//! What only a Redis Cluster does, through the real program under three Apaches sharing the
//! cluster: exactness with requests spread over the three web servers; a master killed in the
//! middle of a burst (the store's policy holds while the replica takes over, and is logged;
//! limits are exact again after); `resolve check` naming the nodes and slots. The figures are
//! printed for docs/scaling.md.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use resolve::core::slot::slot_of;
use serde_json::{Value, json};

use crate::sites::{Reply, Site, asked_links, rule};
use crate::stores::{InRedisCluster, StoreUnderTest, Timeouts};

/// Requests in flight at once.
const AT_ONCE: usize = 32;

/// `n` requests from `source`, `AT_ONCE` at a time, spread in turn over `sites`.
fn in_batches(sites: &[&Site], n: usize, source: &str) -> (Vec<Reply>, Duration) {
    let sources = vec![source.to_owned(); n];
    from_sources(sites, &sources)
}

/// A request from each of `sources`, `AT_ONCE` at a time, spread in turn over `sites`.
fn from_sources(sites: &[&Site], sources: &[String]) -> (Vec<Reply>, Duration) {
    let n = sources.len();
    let began = Instant::now();
    let mut replies = Vec::with_capacity(n);
    let mut sent = 0;
    while sent < n {
        let batch = AT_ONCE.min(n - sent);
        let got: Vec<Reply> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..batch)
                .map(|i| {
                    let site = sites[(sent + i) % sites.len()];
                    let source = &sources[sent + i];
                    s.spawn(move || site.ask(source))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("request thread"))
                .collect()
        });
        replies.extend(got);
        sent += batch;
    }
    (replies, began.elapsed())
}

/// Replies admitted by the limiter (200 with its headers), refused by it (429), and answered
/// by the store's failure policy (503 without its headers, or 200 without them).
fn tally(replies: &[Reply]) -> (usize, usize, usize) {
    let admitted = replies
        .iter()
        .filter(|r| r.status == 200 && r.limited())
        .count();
    let refused = replies.iter().filter(|r| r.status == 429).count();
    let policy = replies
        .iter()
        .filter(|r| !r.limited() && (r.status == 503 || r.status == 200))
        .count();
    (admitted, refused, policy)
}

fn three_sites(sut: &InRedisCluster, label: &str, store: Value, limit: u64) -> [Site; 3] {
    [0, 1, 2].map(|i| {
        Site::start(
            sut,
            &format!("cluster-{label}-{i}"),
            store.clone(),
            vec![rule("ip", "fixed", limit, 600)],
        )
    })
}

fn calls(sites: &[Site; 3]) -> usize {
    sites.iter().map(|s| asked_links(&s.provider).len()).sum()
}

/// 300 requests from one address, 32 at a time, spread over three Apaches on one cluster,
/// with a limit of 30: exactly 30 admitted and 30 paid calls; then the 429 path's pace and
/// the connections a refused request opens; and `resolve check` names every master and its
/// slots.
/// The most connections a refused request opens: one to the first seed (asked for the slot
/// map), then one to each master holding a key it reads (the client's keys, the block list),
/// which the cluster's slots may put on two masters other than the seed's in a given run.
const CONNECTIONS_PER_REFUSAL: u64 = 3;

pub fn exact_over_three_web_servers(sut: &mut InRedisCluster) {
    let store = sut.store_json("deny", Timeouts::Patient);
    let sites = three_sites(sut, "exact", store, 30);
    let refs: Vec<&Site> = sites.iter().collect();
    let source = "127.0.0.31";
    let (replies, took) = in_batches(&refs, 300, source);
    let (admitted, refused, policy) = tally(&replies);
    eprintln!(
        "cluster: 300 requests, {AT_ONCE} at a time over 3 Apaches, in {} ms: {admitted} admitted, {refused} refused, {policy} by the policy; {} provider calls",
        took.as_millis(),
        calls(&sites)
    );
    assert_eq!((admitted, refused, policy), (30, 270, 0));
    assert_eq!(calls(&sites), 30, "provider calls");
    assert_eq!(
        sut.counted(
            &format!("resolve:ip:{source}"),
            resolve::core::rule::Algorithm::Fixed
        ),
        30
    );
    // The stored key carries the client in braces: one slot for the client's keys.
    assert_eq!(
        sut.cluster
            .stored_name(&format!("resolve:ip:{source}"))
            .as_deref(),
        Some("resolve:ip:{127.0.0.31}")
    );
    // The refused path: its pace, and the connections each request opens.
    let before = sut.cluster.stat_sum("total_connections_received", &[]);
    let (replies, took) = in_batches(&refs, 320, source);
    let after = sut.cluster.stat_sum("total_connections_received", &[]);
    assert_eq!(tally(&replies), (0, 320, 0));
    // The stat reads themselves open one connection per node.
    let opened = after - before - 6;
    eprintln!(
        "cluster: 320 refused requests in {} ms ({:.0} per second over 3 Apaches); {opened} connections to the cluster, {:.2} per request",
        took.as_millis(),
        320.0 / took.as_secs_f64(),
        opened as f64 / 320.0
    );
    assert!(
        opened <= CONNECTIONS_PER_REFUSAL * 320,
        "{opened} connections for 320 refused requests (at most {CONNECTIONS_PER_REFUSAL} each)"
    );
    // A client whose slot is not on the first seed: the seed, then its master (and the block
    // list's, where the slots put it on another).
    let other = (32..250)
        .map(|n| format!("127.0.0.{n}"))
        .find(|s| sut.cluster.master_of(slot_of(s.as_bytes()), &[]) != 0)
        .expect("a client of another master");
    let (first, _) = in_batches(&refs, 64, &other);
    assert_eq!(tally(&first).0, 30);
    let before = sut.cluster.stat_sum("total_connections_received", &[]);
    let (replies, _) = in_batches(&refs, 320, &other);
    let after = sut.cluster.stat_sum("total_connections_received", &[]);
    assert_eq!(tally(&replies), (0, 320, 0));
    let opened = after - before - 6;
    eprintln!(
        "cluster: a client of another master than the first seed: {opened} connections for 320 refused requests, {:.2} per request",
        opened as f64 / 320.0
    );
    assert!(
        opened <= CONNECTIONS_PER_REFUSAL * 320,
        "{opened} connections for 320 refused requests (at most {CONNECTIONS_PER_REFUSAL} each)"
    );
    // The same on one Redis on this machine, the same three Apaches, for comparison.
    let single = crate::support::Redis::builder("single")
        .password(sut.cluster.password())
        .start();
    let mut one = sut.store_json("deny", Timeouts::Patient);
    let fields = one.as_object_mut().expect("an object");
    fields.remove("cluster_nodes");
    fields.insert("host".into(), json!("127.0.0.1"));
    fields.insert("port".into(), json!(single.port()));
    for site in &sites {
        site.configure(one.clone(), vec![rule("ip", "fixed", 30, 600)]);
    }
    let (first, _) = in_batches(&refs, 64, source);
    assert_eq!(tally(&first).0, 30);
    let (replies, single_took) = in_batches(&refs, 320, source);
    assert_eq!(tally(&replies), (0, 320, 0));
    eprintln!(
        "single redis: 320 refused requests in {} ms ({:.0} per second over 3 Apaches); the cluster's pace is {:.0}% of it",
        single_took.as_millis(),
        320.0 / single_took.as_secs_f64(),
        100.0 * single_took.as_secs_f64() / took.as_secs_f64()
    );
    let store = sut.store_json("deny", Timeouts::Patient);
    for site in &sites {
        site.configure(store.clone(), vec![rule("ip", "fixed", 30, 600)]);
    }
    let (code, text) = sites[0].check();
    assert_eq!(code, 0, "resolve check:\n{text}");
    assert!(text.contains("cluster_state ok"), "{text}");
    assert!(text.contains("16384 of 16384 slots"), "{text}");
    let masters = text
        .lines()
        .find_map(|l| l.split_once("masters:"))
        .map_or("", |(_, m)| m);
    assert_eq!(
        masters.matches(" slots ").count(),
        3,
        "three masters named:\n{text}"
    );
    eprintln!("cluster: resolve check says:\n{text}");
}

/// A burst from `source` over the three sites while the master of its slot is killed: the
/// replies with when each was sent, the time from the kill to a settled cluster, and the
/// index of the killed node.
fn burst_through_a_failover(
    sut: &InRedisCluster,
    sites: &[Site; 3],
    source: &str,
    dead: &[usize],
) -> (Vec<Reply>, Instant, Duration, usize) {
    let refs: Vec<&Site> = sites.iter().collect();
    let slot = slot_of(source.as_bytes());
    let master = sut.cluster.master_of(slot, dead);
    let mut gone = dead.to_vec();
    gone.push(master);
    let stop = AtomicBool::new(false);
    let replies = Mutex::new(Vec::new());
    let killed_at = Mutex::new(None);
    let settled = Mutex::new(Duration::ZERO);
    /// Ends the burst however the test's side ends (a failed assertion too).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                let (got, _) = in_batches(&refs, AT_ONCE, source);
                replies.lock().expect("replies").extend(got);
            }
        });
        let _stop = Stop(&stop);
        std::thread::sleep(Duration::from_millis(700));
        let at = Instant::now();
        // SIGKILL, in the middle of the burst.
        let pid = sut.cluster.nodes[master].pid().expect("the master runs");
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        *killed_at.lock().expect("kill time") = Some(at);
        sut.cluster.wait_settled(&gone);
        *settled.lock().expect("settled") = at.elapsed();
        // A moment more of burst on the new master.
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::SeqCst);
    });
    let at = killed_at.into_inner().expect("kill time").expect("killed");
    (
        replies.into_inner().expect("replies"),
        at,
        settled.into_inner().expect("settled"),
        master,
    )
}

/// The master holding a client's slot is killed (SIGKILL) in the middle of a burst, under
/// each policy in turn (a master of another slot each time, so that each failover has a
/// replica to promote): while the replica takes over, `on_error` answers (503 when failing
/// closed, admitted when failing open) and each such answer is logged; once the cluster says
/// `cluster_state:ok` with the new master, a fresh burst of 300 (32 at a time) admits exactly
/// what the limit leaves, and a new client exactly 30.
pub fn failover_keeps_the_policy_then_exact(sut: &mut InRedisCluster) {
    let mut dead: Vec<usize> = Vec::new();
    // Sources whose slots have different masters.
    let mut sources: Vec<String> = Vec::new();
    let mut masters: Vec<usize> = Vec::new();
    for n in 40..250 {
        let source = format!("127.0.0.{n}");
        let m = sut.cluster.master_of(slot_of(source.as_bytes()), &dead);
        if !masters.contains(&m) {
            masters.push(m);
            sources.push(source);
        }
        if sources.len() == 2 {
            break;
        }
    }
    for (policy, source) in [("deny", &sources[0]), ("allow", &sources[1])] {
        // Short timeouts, so that a request gives up within the switch and the policy shows.
        let mut store = sut.store_json(policy, Timeouts::Short);
        store["connect_timeout_ms"] = json!(300);
        store["read_timeout_ms"] = json!(300);
        let sites = three_sites(sut, &format!("failover-{policy}"), store, 30);
        let marks: Vec<usize> = sites.iter().map(Site::log_mark).collect();
        let (replies, killed_at, settled, master) =
            burst_through_a_failover(sut, &sites, source, &dead);
        dead.push(master);
        let before: Vec<&Reply> = replies.iter().filter(|r| r.sent < killed_at).collect();
        let (admitted, refused, policy_answers) = tally(&replies);
        let admitted_before = before
            .iter()
            .filter(|r| r.status == 200 && r.limited())
            .count();
        let first_policy = replies
            .iter()
            .filter(|r| !r.limited() && (r.status == 503 || r.status == 200))
            .map(|r| r.sent.saturating_duration_since(killed_at))
            .min();
        let last_policy = replies
            .iter()
            .filter(|r| !r.limited() && (r.status == 503 || r.status == 200))
            .map(|r| (r.sent + r.wall).saturating_duration_since(killed_at))
            .max();
        let lines: Vec<String> = sites
            .iter()
            .zip(&marks)
            .flat_map(|(s, m)| s.lines_since(*m))
            .collect();
        let phrase = if policy == "allow" {
            "store failed, answering anyway (store.on_error is allow)"
        } else {
            "store failed, refusing (store.on_error is deny)"
        };
        let logged = lines.iter().filter(|l| l.contains(phrase)).count();
        eprintln!(
            "cluster failover ({policy}): {} requests, {admitted} admitted by the limiter ({admitted_before} before the kill), {refused} refused, {policy_answers} answered by the policy (first {first_policy:?}, last ended {last_policy:?} after the kill), {logged} policy lines logged; cluster settled {} ms after the kill",
            replies.len(),
            settled.as_millis()
        );
        for r in replies.iter().filter(|r| !r.limited()) {
            if policy == "deny" {
                assert_eq!(r.status, 503, "{}", r.everything);
            } else {
                assert_eq!(r.status, 200, "{}", r.everything);
            }
        }
        assert!(
            policy_answers > 0,
            "no request met the switch: the burst did not overlap it"
        );
        assert!(
            logged >= policy_answers,
            "{logged} lines for {policy_answers} answers"
        );
        assert!(admitted <= 30, "{admitted} admitted past the limit of 30");
        // Exact again: what the new master holds, and the limit's rest, to the request.
        let key = format!("resolve:ip:{source}");
        let held = sut.counted(&key, resolve::core::rule::Algorithm::Fixed) as usize;
        let refs: Vec<&Site> = sites.iter().collect();
        let calls_before = calls(&sites);
        let (after, _) = in_batches(&refs, 300, source);
        let (a, _, p) = tally(&after);
        eprintln!(
            "cluster failover ({policy}): the new master held {held} of the {admitted} admitted; after it, 300 more admitted {a}"
        );
        assert_eq!(p, 0, "the policy answered after the switch");
        assert_eq!(a, 30 - held, "exact after the switch");
        assert_eq!(calls(&sites) - calls_before, a);
        let fresh = format!("127.0.1.{}", 10 + dead.len());
        let (after, _) = in_batches(&refs, 300, &fresh);
        assert_eq!(tally(&after), (30, 270, 0), "a new client after the switch");
    }
}

/// A slot moving between masters under a handle that learnt the map before: while it moves,
/// the old master answers `ASK` for a key already moved and the handle sends `ASKING` and
/// the script to the new one; once moved, the old master answers `MOVED` and the handle
/// learns the map again. The count carries on across both, counted once each time.
pub fn moved_and_ask_are_followed(sut: &mut InRedisCluster) {
    use crate::support::redis::{Resp, Via};
    use resolve::store::Check;
    let rules = [crate::handles::rule(
        "ip",
        resolve::core::rule::Algorithm::Fixed,
        100,
        600,
    )];
    let store = sut.open(&rules);
    let who = "203.0.113.9";
    let checks = [Check {
        rule: &rules[0],
        key: rules[0].key_for(who),
    }];
    let remaining = |what: &str| match store.decide(&checks) {
        Ok(resolve::core::decision::Decision::Admit { statuses, .. }) => statuses[0].remaining,
        other => panic!("{what}: {other:?}"),
    };
    assert_eq!(remaining("before the move"), 99);
    let key = "resolve:ip:{203.0.113.9}";
    let slot = sut.cluster.keyslot(key);
    let from = sut.cluster.master_of(slot, &[]);
    let to = (0..sut.cluster.nodes.len())
        .find(|&i| {
            i != from
                && sut.cluster.nodes[i]
                    .cmd(&["ROLE"])
                    .to_string()
                    .starts_with("1) \"master\"")
        })
        .expect("another master");
    let id = |i: usize| {
        sut.cluster.nodes[i]
            .cmd(&["CLUSTER", "MYID"])
            .as_text()
            .expect("an id")
    };
    let (from_id, to_id) = (id(from), id(to));
    let s = slot.to_string();
    let on = |i: usize, args: &[&str]| {
        let reply = sut.cluster.nodes[i].cmd(args);
        assert!(!reply.is_error(), "{args:?}: {reply}");
        reply
    };
    on(to, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]);
    on(from, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]);
    let port = sut.cluster.nodes[to].port().to_string();
    let password = sut.cluster.password().to_owned();
    on(
        from,
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            "5000",
            "AUTH",
            &password,
            "KEYS",
            key,
        ],
    );
    // The handle still sends the key's script to the old master: ASK, then ASKING there.
    assert_eq!(remaining("while the slot moves (ASK)"), 98);
    let mut conn = sut.cluster.nodes[to].connect(Via::Tcp).expect("connect");
    conn.cmd(&["ASKING"]).expect("ASKING");
    assert_eq!(
        conn.cmd(&["HGET", key, "c"]).expect("HGET"),
        Resp::Bulk(Some(b"2".to_vec())),
        "counted on the new master"
    );
    for i in 0..sut.cluster.nodes.len() {
        let _ = sut.cluster.nodes[i].cmd(&["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
    }
    // The old master now answers MOVED: the handle learns the map again.
    assert_eq!(remaining("after the move (MOVED)"), 97);
    assert_eq!(remaining("with the map learnt"), 96);
    let mut conn = sut.cluster.nodes[to].connect(Via::Tcp).expect("connect");
    assert_eq!(
        conn.cmd(&["HGET", key, "c"]).expect("HGET"),
        Resp::Bulk(Some(b"4".to_vec()))
    );
}

/// A site-wide limit in its own slot, beside each client's own keys in theirs: 300 requests
/// from 30 clients (10 each, within their own limit of 20), 32 at a time over the three
/// Apaches, against a site-wide limit of 30: exactly 30 admitted and paid, each client's
/// count given back when the site's step refused it.
pub fn site_wide_limit_exact_across_slots(sut: &mut InRedisCluster) {
    let store = sut.store_json("deny", Timeouts::Patient);
    let rules = vec![
        rule("ip", "fixed", 20, 600),
        json!({"name": "site", "key": "global", "limit": 30, "window_secs": 600}),
    ];
    let sites = [0, 1, 2].map(|i| {
        Site::start(
            sut,
            &format!("cluster-site-{i}"),
            store.clone(),
            rules.clone(),
        )
    });
    let refs: Vec<&Site> = sites.iter().collect();
    let sources: Vec<String> = (0..300)
        .map(|i| format!("127.0.3.{}", 10 + i % 30))
        .collect();
    let (replies, took) = from_sources(&refs, &sources);
    let (admitted, refused, policy) = tally(&replies);
    eprintln!(
        "cluster: a site-wide limit of 30, 300 requests from 30 clients in {} ms: {admitted} admitted, {refused} refused, {policy} by the policy",
        took.as_millis()
    );
    assert_eq!((admitted, refused, policy), (30, 270, 0));
    assert_eq!(calls(&sites), 30, "provider calls");
    assert_eq!(
        sut.counted("resolve:site:*", resolve::core::rule::Algorithm::Fixed),
        30
    );
    // Each client counts only what the site admitted of it: the refused ones were given back.
    let own: u64 = (0..30)
        .map(|i| {
            sut.counted(
                &format!("resolve:ip:127.0.3.{}", 10 + i),
                resolve::core::rule::Algorithm::Fixed,
            )
        })
        .sum();
    assert_eq!(own, 30, "the clients' counts after the refunds");
}
