//! The Redis store's Lua script against the Rust limiter. Random request sequences (seeded,
//! so that a failure replays) are decided step by step by the script on a real redis-server
//! and by the memory store (`limiter::decide_own_first` over a map, with `limiter::refunded`
//! for refunds); both must give the same decision: admitted or refused, by the same rule, with
//! the same Retry-After, the same remaining counts and resets, at the same time. Several rules
//! per request, any number of them the client's own (a refusal by those alone tells of them
//! only), fixed and sliding windows, a rule of bytes with sizes known before (decided) and
//! after (charged), refunds, rules that change algorithm, and time that
//! stands still, creeps, lands on window edges (one millisecond before, on, after), jumps
//! windows ahead and now and then goes back.
//!
//! Time: the script reads the server's clock (`TIME`). Here it runs with its exact text after
//! a prelude that shadows `redis` with a table whose `call('TIME')` answers the time passed as
//! the script's last argument, every other command going to the server; the script itself is
//! not changed. The times are a day ahead of the real clock and the windows last at least ten
//! minutes, so the expiries the script sets (on the server's real clock) never fire during
//! the run: what Redis holds is what the script decided, as it is in production, where the
//! expiry of a key is its window's end.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use resolve::core::clock::Clock;
use resolve::core::decision::Decision;
use resolve::core::limiter::State;
use resolve::core::rule::{Algorithm, KeyKind, Rule};
use resolve::store::Check;
use resolve::store::counters::Counters;
use resolve::store::memory::MemoryStore;
use resolve::store::redis::resp::{self, Connection, Reply, Target};
use resolve::store::redis::{REFUND_SCRIPT, SCRIPT, decision_from};

use crate::handles::rule;
use crate::stores::{TestClock, wall_ms};
use crate::support::Redis;
use crate::support::rng::Rng;

/// Runs before the script's text: `TIME` answers the last argument (milliseconds).
const PRELUDE: &str = r#"
local server = redis
local redis = setmetatable({
  call = function(command, ...)
    if command == 'TIME' then
      local ms = tonumber(ARGV[#ARGV])
      return {tostring(math.floor(ms / 1000)), tostring((ms % 1000) * 1000)}
    end
    return server.call(command, ...)
  end,
}, {__index = server})
"#;

/// Seeds of the runs, and steps per run.
const SEEDS: [u64; 3] = [0x5eed_0001, 0x0dd_ba11, 0xfee1_900d];
const STEPS: usize = 2500;

/// The rules requests are made of. Two share a name with another of the other algorithm: a
/// rule whose configuration changed, on the same key.
fn pool() -> Vec<Rule> {
    vec![
        rule("a", Algorithm::Fixed, 3, 600),
        rule("b", Algorithm::Sliding, 2, 900),
        rule("c", Algorithm::Fixed, 1, 1200),
        rule("d", Algorithm::Sliding, 4, 600),
        Rule {
            key: KeyKind::Global,
            key_template: resolve::config::default_key_template(KeyKind::Global),
            ..rule("g", Algorithm::Fixed, 6, 1800)
        },
        rule("s", Algorithm::Sliding, 5, 3600),
        // Bytes: 8 KiB of files in 20 minutes.
        Rule {
            unit: resolve::core::rule::Unit::Bytes,
            ..rule("k", Algorithm::Fixed, 8, 1200)
        },
        // Rarely used: `a` and `b` after a change of algorithm.
        rule("a", Algorithm::Sliding, 3, 600),
        rule("b", Algorithm::Fixed, 2, 900),
    ]
}
const FLIPPED: usize = 7;

/// The script's side: one connection, the script loaded with its prelude.
struct Script {
    conn: Connection,
    decide_sha: String,
    refund_sha: String,
}

impl Script {
    fn load(redis: &Redis) -> Script {
        let target = Target::Tcp {
            host: "127.0.0.1".to_owned(),
            port: redis.port(),
        };
        let conn = Connection::open(&target, Duration::from_secs(5), Duration::from_secs(10))
            .expect("connect to redis");
        let mut s = Script {
            conn,
            decide_sha: String::new(),
            refund_sha: String::new(),
        };
        s.decide_sha = s.script_load(&format!("{PRELUDE}{SCRIPT}"));
        s.refund_sha = s.script_load(REFUND_SCRIPT);
        s
    }

    fn run(&mut self, args: &[&[u8]]) -> Reply {
        let mut replies = self
            .conn
            .pipeline(&[resp::encode(args)])
            .expect("redis answers");
        replies.remove(0)
    }

    fn script_load(&mut self, text: &str) -> String {
        match self.run(&[b"SCRIPT", b"LOAD", text.as_bytes()]) {
            Reply::Bulk(Some(sha)) => String::from_utf8(sha).expect("a SHA-1"),
            other => panic!("SCRIPT LOAD: {other:?}"),
        }
    }

    /// The arguments `RedisStore::decide_sized` sends, then the time.
    fn decide(
        &mut self,
        checks: &[Check<'_>],
        own: usize,
        size: Option<u64>,
        now_ms: u64,
    ) -> Decision {
        let count = checks.len().to_string();
        let mut argv: Vec<String> = Vec::new();
        for c in checks {
            argv.push(match c.rule.algorithm {
                Algorithm::Fixed => "f".to_owned(),
                Algorithm::Sliding => "s".to_owned(),
            });
            argv.push(c.rule.limit.get().to_string());
            argv.push(c.rule.window_ms().to_string());
            argv.push(c.rule.unit.amount(size).to_string());
        }
        argv.push(own.to_string());
        argv.push(now_ms.to_string());
        let sha = self.decide_sha.clone();
        let mut args: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), count.as_bytes()];
        args.extend(checks.iter().map(|c| c.key.as_bytes()));
        args.extend(argv.iter().map(|a| a.as_bytes()));
        let reply = self.run(&args);
        decision_from(&reply, checks, own).unwrap_or_else(|e| panic!("the script: {e}: {reply:?}"))
    }

    /// The arguments `RedisStore::refund` sends: rules of requests only.
    fn refund(&mut self, checks: &[Check<'_>], at_ms: u64) {
        let changes = checks
            .iter()
            .filter(|c| c.rule.unit == resolve::core::rule::Unit::Requests)
            .map(|c| match c.rule.algorithm {
                Algorithm::Fixed => (c, "f".to_owned()),
                Algorithm::Sliding => (c, "s".to_owned()),
            });
        self.change(changes.collect(), at_ms);
    }

    /// The arguments `RedisStore::charge` sends: rules of bytes only.
    fn charge(&mut self, checks: &[Check<'_>], at_ms: u64, size: u64) {
        let changes = checks.iter().filter_map(|c| {
            let amount = match c.rule.unit {
                resolve::core::rule::Unit::Bytes => c.rule.unit.amount(Some(size)),
                resolve::core::rule::Unit::Requests => 0,
            };
            (amount > 0).then(|| (c, format!("+{amount}")))
        });
        self.change(changes.collect(), at_ms);
    }

    fn change(&mut self, changes: Vec<(&Check<'_>, String)>, at_ms: u64) {
        if changes.is_empty() {
            return;
        }
        let count = changes.len().to_string();
        let at = at_ms.to_string();
        let sha = self.refund_sha.clone();
        let mut args: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), count.as_bytes()];
        args.extend(changes.iter().map(|(c, _)| c.key.as_bytes()));
        args.push(at.as_bytes());
        args.extend(changes.iter().map(|(_, change)| change.as_bytes()));
        match self.run(&args) {
            Reply::Int(1) => {}
            other => panic!("the refund script: {other:?}"),
        }
    }

    /// What Redis holds for `key`, for failure messages.
    fn dump(&mut self, key: &str) -> String {
        let ty = match self.run(&[b"TYPE", key.as_bytes()]) {
            Reply::Simple(t) => t,
            other => panic!("TYPE: {other:?}"),
        };
        let content = match ty.as_str() {
            "hash" => self.run(&[b"HGETALL", key.as_bytes()]),
            "zset" => self.run(&[b"ZRANGE", key.as_bytes(), b"0", b"-1", b"WITHSCORES"]),
            _ => Reply::Array(Some(Vec::new())),
        };
        let Reply::Array(Some(items)) = content else {
            return format!("{ty} {content:?}");
        };
        let words: Vec<String> = items
            .iter()
            .map(|i| match i {
                Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
                other => format!("{other:?}"),
            })
            .collect();
        format!("{ty} [{}]", words.join(" "))
    }
}

/// What a run saw, to show that it reached what it is meant to test.
#[derive(Default, Debug)]
struct Seen {
    admitted: usize,
    refused_fixed: usize,
    refused_sliding: usize,
    /// Refused by the client's own rules alone, the others unread.
    refused_by_own_alone: usize,
    refunds: usize,
    /// Files charged after their answer; decisions with a size known before.
    charges: usize,
    sized: usize,
    refused_bytes: usize,
    on_an_edge: usize,
    backwards: usize,
}

/// The checks of the rules `picked` (indices in `rules`) for the client `who`.
fn checks_of<'a>(rules: &'a [Rule], picked: &[usize], who: &str) -> Vec<Check<'a>> {
    picked
        .iter()
        .map(|&i| Check {
            rule: &rules[i],
            key: rules[i].key_for(who),
        })
        .collect()
}

fn run(redis: &Redis, seed: u64) -> Seen {
    let mut script = Script::load(redis);
    match script.run(&[b"FLUSHALL"]) {
        Reply::Simple(ok) if ok == "OK" => {}
        other => panic!("FLUSHALL: {other:?}"),
    }
    let rules = pool();
    let start = wall_ms() + 86_400_000;
    let clock = TestClock::held_at(start);
    let reference = MemoryStore::new(clock.clone(), Duration::ZERO);
    let mut rng = Rng::new(seed);
    let mut seen = Seen::default();
    // The window of the rule that last wrote each key, to find its edges.
    let mut windows: HashMap<String, u64> = HashMap::new();
    // Admitted requests (rules, client, time), for refunds.
    let mut admitted: Vec<(Vec<usize>, &str, u64)> = Vec::new();
    let mut trace: Vec<String> = Vec::new();
    let clients = ["x", "y", "z"];
    let mut last: Option<(&str, Vec<usize>)> = None;
    for step in 0..STEPS {
        // Time.
        let now = clock.now_ms();
        let next = match rng.below(100) {
            // The same millisecond: requests at once.
            0..45 => now,
            // A little later.
            45..78 => now + 1 + rng.below(3000),
            // The nearest edge of a window or of a sliding record, 1 ms before, on or after it.
            78..94 => {
                let mut nearest: Option<u64> = None;
                for (key, window) in &windows {
                    let edges: Vec<u64> = match reference.state(key) {
                        Some(State::Fixed(Some(c))) => vec![c.end_ms()],
                        Some(State::Sliding(times)) => times.iter().map(|t| t + window).collect(),
                        _ => Vec::new(),
                    };
                    for e in edges.into_iter().filter(|e| *e > now) {
                        nearest = Some(nearest.map_or(e, |n| n.min(e)));
                    }
                }
                match nearest {
                    Some(edge) => {
                        seen.on_an_edge += 1;
                        (edge + rng.below(3)).saturating_sub(1).max(now)
                    }
                    None => now + 1 + rng.below(600_000),
                }
            }
            // Windows ahead.
            94..98 => now + 1 + rng.below(4 * 3_600_000),
            // Back: a clock set back a little.
            _ => {
                seen.backwards += 1;
                now.saturating_sub(1 + rng.below(3000)).max(start)
            }
        };
        clock.set(next);
        let now = next;

        if !admitted.is_empty() && rng.percent(12) {
            // A refund of an admitted request, now and then of a time just before one.
            // Mostly the latest admission, as a request refunds its own; else a recent one.
            let back = if rng.percent(50) {
                0
            } else {
                rng.below(admitted.len().min(40) as u64) as usize
            };
            let (picked, who, at) = admitted[admitted.len() - 1 - back].clone();
            let at = if rng.percent(20) {
                at.saturating_sub(1)
            } else {
                at
            };
            let checks = checks_of(&rules, &picked, who);
            // Not across a change of algorithm: the refund script expects a key of the rule's
            // own type (a request refunds what it was just admitted with).
            let changed = checks.iter().any(|c| {
                reference.state(&c.key).is_some_and(|s| match s {
                    State::Fixed(_) => c.rule.algorithm != Algorithm::Fixed,
                    State::Sliding(_) => c.rule.algorithm != Algorithm::Sliding,
                })
            });
            if changed {
                continue;
            }
            if rng.percent(50) {
                script.refund(&checks, at);
                reference
                    .refund(&checks, at)
                    .expect("the memory store refunds");
                seen.refunds += 1;
                trace.push(format!(
                    "{step}: at {}: refund {who} {picked:?} at {}",
                    now - start,
                    at - start
                ));
            } else {
                // A file's size, charged after its answer.
                let size = rng.below(6000);
                script.charge(&checks, at, size);
                reference
                    .charge(&checks, at, size)
                    .expect("the memory store charges");
                seen.charges += 1;
                trace.push(format!(
                    "{step}: at {}: charge {who} {picked:?} at {} {size} bytes",
                    now - start,
                    at - start
                ));
            }
            continue;
        }

        // A request: one client, one to three rules; often the same as the last one (a client
        // sending several at once).
        let (who, picked) = match &last {
            Some(same) if rng.percent(30) => same.clone(),
            _ => {
                let who = clients[rng.below(clients.len() as u64) as usize];
                let mut picked: Vec<usize> = Vec::new();
                for _ in 0..1 + rng.below(3) {
                    let mut i = rng.below(FLIPPED as u64) as usize;
                    if i < 2 && rng.percent(5) {
                        i += FLIPPED;
                    }
                    if !picked.iter().any(|&p| rules[p].name == rules[i].name) {
                        picked.push(i);
                    }
                }
                (who, picked)
            }
        };
        last = Some((who, picked.clone()));
        let checks = checks_of(&rules, &picked, who);
        // How many of the rules are the client's own, the rest the site's: any number.
        let own = rng.below(checks.len() as u64 + 1) as usize;
        // A file's size known before the paid call, now and then.
        let size = rng.percent(50).then(|| rng.below(5000));
        if size.is_some() {
            seen.sized += 1;
        }
        let expected = reference
            .decide_sized(&checks, own, size)
            .expect("the memory store decides");
        let got = script.decide(&checks, own, size, now);
        let line = format!(
            "{step}: at {}: {who} {:?} (own {own}, size {size:?}) -> {expected:?}",
            now - start,
            checks
                .iter()
                .map(|c| format!(
                    "{}/{}/{}/{}s",
                    c.key,
                    c.rule.algorithm.as_str(),
                    c.rule.limit,
                    c.rule.window_secs
                ))
                .collect::<Vec<_>>()
        );
        trace.push(line);
        if got != expected {
            let held: Vec<String> = checks
                .iter()
                .map(|c| {
                    format!(
                        "{}: rust {:?}, redis {}",
                        c.key,
                        reference.state(&c.key),
                        script.dump(&c.key)
                    )
                })
                .collect();
            let from = trace.len().saturating_sub(15);
            panic!(
                "seed {seed:#x}, step {step}: the script and the limiter differ\n\
                 script:  {got:?}\nlimiter: {expected:?}\nheld:\n  {}\nlast steps (times from the start):\n  {}",
                held.join("\n  "),
                trace[from..].join("\n  ")
            );
        }
        for c in &checks {
            windows.insert(c.key.clone(), c.rule.window_ms());
        }
        match &expected {
            Decision::Admit { at_ms, .. } => {
                seen.admitted += 1;
                admitted.push((picked, who, *at_ms));
            }
            Decision::Refuse { rule, statuses, .. } => {
                if statuses.len() < checks.len() {
                    seen.refused_by_own_alone += 1;
                }
                match checks[*rule].rule.algorithm {
                    Algorithm::Fixed => seen.refused_fixed += 1,
                    Algorithm::Sliding => seen.refused_sliding += 1,
                }
                if checks[*rule].rule.unit == resolve::core::rule::Unit::Bytes {
                    seen.refused_bytes += 1;
                }
            }
        }
    }
    seen
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Redis: cargo test --features servers"
)]
fn redis_script_decides_as_the_rust_limiter() {
    // The prelude can only stand in for the clock the script actually reads.
    assert_eq!(
        SCRIPT.matches("TIME").count(),
        1,
        "the script reads the time other than by redis.call('TIME'): update the prelude"
    );
    assert!(SCRIPT.contains("redis.call('TIME')"));
    let redis = Redis::builder("differential").start();
    // The script decides at the time given, not the server's.
    let mut script = Script::load(&redis);
    let r = rule("probe", Algorithm::Fixed, 1, 600);
    let checks = [Check {
        rule: &r,
        key: "resolve:probe:1".to_owned(),
    }];
    let at = wall_ms() + 123_456_789;
    match script.decide(&checks, 1, None, at) {
        Decision::Admit { at_ms, .. } => assert_eq!(at_ms, at, "the script's time"),
        other => panic!("{other:?}"),
    }
    let began = Instant::now();
    for seed in SEEDS {
        let seen = run(&redis, seed);
        eprintln!("seed {seed:#x}: {STEPS} steps alike: {seen:?}");
        assert!(
            seen.admitted > STEPS / 5
                && seen.refused_fixed > STEPS / 20
                && seen.refused_sliding > STEPS / 20
                && seen.refused_by_own_alone > STEPS / 50
                && seen.refunds > STEPS / 40
                && seen.charges > STEPS / 40
                && seen.sized > STEPS / 5
                && seen.refused_bytes > STEPS / 100
                && seen.on_an_edge > STEPS / 10
                && seen.backwards > 0,
            "seed {seed:#x}: the sequence did not reach every case: {seen:?}"
        );
    }
    eprintln!(
        "differential: {} steps in {:?}",
        SEEDS.len() * STEPS,
        began.elapsed()
    );
}
