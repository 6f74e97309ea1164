//! Tests of the Redis store, without a server or with a stand-in.

use super::*;
use crate::core::rule::{KeyKind, Rule};

#[test]
fn script_answers_become_decisions() {
    let rule = Rule::new(
        "ip",
        KeyKind::Ip,
        Algorithm::Fixed,
        30,
        60,
        crate::support::defaults::KEY_TEMPLATE_IP,
    )
    .unwrap();
    let checks = [Check {
        rule: &rule,
        key: "k".into(),
    }];
    let ints = |v: &[i64]| Reply::Array(Some(v.iter().map(|i| Reply::Int(*i)).collect()));
    assert_eq!(
        decision_from(&ints(&[1, 0, 0, 5, 3, 59_001]), &checks, 1).unwrap(),
        Decision::Admit {
            statuses: vec![RuleStatus {
                remaining: 27,
                reset_ms: 59_001,
                shared: false
            }],
            at_ms: 5
        }
    );
    assert_eq!(
        decision_from(&ints(&[0, 1, 41_500, 5, 30, 41_500]), &checks, 1).unwrap(),
        Decision::Refuse {
            rule: 0,
            wait_ms: 41_500,
            statuses: vec![RuleStatus {
                remaining: 0,
                reset_ms: 41_500,
                shared: false
            }]
        }
    );
    let odd = |reply: &Reply| decision_from(reply, &checks, 1).unwrap_err().to_string();
    assert_eq!(
        odd(&ints(&[0, 2, 1, 5, 30, 1])),
        "the script named no refusing rule"
    );
    assert_eq!(
        odd(&ints(&[1, 0, 0])),
        "the script answered 3 numbers for 1 keys"
    );
    assert_eq!(
        odd(&Reply::Simple("OK".into())),
        "the script answered Simple(\"OK\")"
    );
    assert_eq!(
        odd(&Reply::Array(Some(vec![Reply::Simple("x".into())]))),
        "the script answered Simple(\"x\") among numbers"
    );
}

#[test]
fn odd_replies_say_what_the_server_answered() {
    let e = journal::committed(&Reply::Array(Some(vec![
        Reply::Simple("OK".into()),
        Reply::Error("ERR wrong".into()),
    ])))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "a command of the transaction failed: ERR wrong"
    );
    assert!(std::error::Error::source(&e).is_none());
    assert_eq!(
        journal::ms_from_time(&Reply::Int(3)).unwrap_err(),
        OddReply("TIME answered Int(3)".into())
    );
    assert_eq!(
        journal::pairs(&Reply::Array(Some(vec![
            Reply::Bulk(Some(b"f".to_vec())),
            Reply::Bulk(Some(b"x".to_vec())),
        ])))
        .unwrap_err()
        .to_string(),
        "a count that is not a number"
    );
}

#[test]
fn a_refusal_by_the_clients_own_keys_tells_of_them_alone() {
    let rule = |name, key| {
        let template = match key {
            KeyKind::Ip => crate::support::defaults::KEY_TEMPLATE_IP,
            _ => crate::support::defaults::KEY_TEMPLATE_GLOBAL,
        };
        Rule::new(name, key, Algorithm::Fixed, 30, 60, template).unwrap()
    };
    let (ip, day) = (rule("ip", KeyKind::Ip), rule("day", KeyKind::Global));
    let checks = [
        Check {
            rule: &ip,
            key: "k".into(),
        },
        Check {
            rule: &day,
            key: "d".into(),
        },
    ];
    let ints = |v: &[i64]| Reply::Array(Some(v.iter().map(|i| Reply::Int(*i)).collect()));
    // Refused by the client's own key, the site's unread: one pair.
    let own = decision_from(&ints(&[0, 1, 41_500, 5, 30, 41_500]), &checks, 1).unwrap();
    assert_eq!(
        own,
        Decision::Refuse {
            rule: 0,
            wait_ms: 41_500,
            statuses: vec![RuleStatus {
                remaining: 0,
                reset_ms: 41_500,
                shared: false
            }]
        }
    );
    // Refused by the site's key: every pair, as before.
    let site = [0, 2, 9_000, 5, 3, 41_500, 30, 9_000];
    let d = decision_from(&ints(&site), &checks, 1).unwrap();
    assert_eq!(d.statuses().len(), 2);
    // One pair is a refusal by the client's keys only, never an admission or another's.
    assert!(decision_from(&ints(&[1, 0, 0, 5, 3, 41_500]), &checks, 1).is_err());
    assert!(decision_from(&ints(&[0, 2, 9_000, 5, 3, 41_500]), &checks, 1).is_err());
    assert!(decision_from(&ints(&[0, 1, 41_500, 5, 30, 41_500]), &checks, 2).is_err());
}

/// A store at `port` on loopback, with the settings a checked `"store": {"kind": "redis",
/// "host": "127.0.0.1", "port": PORT, "connect_timeout_ms": 1000, "read_timeout_ms": 200}`
/// section gives.
fn store_at(port: u16) -> RedisStore {
    RedisStore::new(crate::store::redis::settings::RedisSettings {
        target: crate::store::redis::resp::Target::Tcp {
            host: "127.0.0.1".into(),
            port,
        },
        username: None,
        password: None,
        db: 0,
        connect_timeout: Duration::from_millis(1000),
        read_timeout: Duration::from_millis(200),
        cluster_nodes: Vec::new(),
    })
}

#[test]
fn timeouts_name_the_setting_that_bounds_them() {
    let s = store_at(6379);
    let connect = io::Error::new(io::ErrorKind::TimedOut, "no connection within 1000 ms");
    assert_eq!(
        s.io_error(&connect, Phase::Connect).detail,
        "redis store at 127.0.0.1:6379: no connection within 1000 ms (timed out: see store.connect_timeout_ms)"
    );
    for kind in [io::ErrorKind::WouldBlock, io::ErrorKind::TimedOut] {
        let read = s.io_error(&io::Error::new(kind, "x"), Phase::Exchange);
        assert!(
            read.detail
                .ends_with(" (timed out: see store.read_timeout_ms)"),
            "{}",
            read.detail
        );
    }
    let refused = s.io_error(
        &io::Error::from(io::ErrorKind::ConnectionRefused),
        Phase::Connect,
    );
    assert!(refused.detail.ends_with(" (is the server running?)"));
    let garbage = io::Error::new(io::ErrorKind::InvalidData, "unknown reply type");
    assert_eq!(
        s.io_error(&garbage, Phase::Exchange).detail,
        "redis store at 127.0.0.1:6379: the server sent something that is not the Redis protocol (unknown reply type)"
    );
}

#[test]
fn a_reply_without_its_line_end_is_a_read_timeout() {
    let (target, server) = resp::answering(b"garbage without a line end");
    let resp::Target::Tcp { port, .. } = target else {
        unreachable!("a loopback port")
    };
    let s = store_at(port);
    let e = s.call(resp::encode(&[b"PING"])).unwrap_err();
    assert_eq!(
        e.detail,
        format!(
            "redis store at 127.0.0.1:{port}: no complete reply within 200 ms (timed out: see store.read_timeout_ms)"
        )
    );
    assert!(!e.detail.contains("os error"));
    drop(s);
    server.join().unwrap();
}

#[test]
fn the_script_at_a_given_time_differs_only_by_its_clock() {
    use sha1::Digest;
    let at = script_at();
    assert_ne!(at, SCRIPT, "the clock lines were found and replaced");
    assert!(!at.contains("redis.call('TIME')"));
    assert_eq!(
        SCRIPT.replacen(SCRIPT_CLOCK, "", 1),
        at.replacen(SCRIPT_GIVEN_CLOCK, "", 1)
    );
    let sha = crate::support::hex::lower(&sha1::Sha1::digest(at.as_bytes()));
    assert_eq!(sha, SCRIPT_AT_SHA1);
    let sha = crate::support::hex::lower(&sha1::Sha1::digest(SCRIPT.as_bytes()));
    assert_eq!(sha, SCRIPT_SHA1);
}

#[test]
fn a_clusters_steps_take_the_clients_keys_together_and_the_sites_in_order() {
    use crate::core::rule::{KeyKind, Rule};
    let ip = Rule::new(
        "ip",
        KeyKind::Ip,
        Algorithm::Fixed,
        30,
        60,
        "resolve:{rule}:{ip}",
    )
    .unwrap();
    let day = Rule::new(
        "day",
        KeyKind::Ip,
        Algorithm::Fixed,
        300,
        86_400,
        "resolve:{rule}:{ip}",
    )
    .unwrap();
    let spend = Rule::new(
        "spend",
        KeyKind::Global,
        Algorithm::Fixed,
        5000,
        86_400,
        "resolve:{rule}:*",
    )
    .unwrap();
    let rate = Rule::new(
        "rate",
        KeyKind::Global,
        Algorithm::Fixed,
        10,
        1,
        "resolve:{rule}:*",
    )
    .unwrap();
    let checks = [
        Check {
            rule: &ip,
            key: ip.key_for("203.0.113.7"),
        },
        Check {
            rule: &day,
            key: day.key_for("203.0.113.7"),
        },
        Check {
            rule: &spend,
            key: spend.key_for(""),
        },
        Check {
            rule: &rate,
            key: rate.key_for(""),
        },
    ];
    let keys: Vec<_> = checks.iter().map(super::steps::cluster_key).collect();
    assert_eq!(keys[0], "resolve:ip:{203.0.113.7}");
    assert_eq!(keys[1], "resolve:day:{203.0.113.7}");
    assert_eq!(keys[2], "resolve:spend:*");
    let steps = super::steps::cluster_steps(&keys, 2);
    assert_eq!(steps[0], [0, 1], "the client's keys in one step, first");
    let mut site: Vec<_> = steps[1..]
        .iter()
        .map(|s| slot::slot_of(keys[s[0]].as_bytes()))
        .collect();
    assert_eq!(steps.len(), 3);
    let sorted = {
        let mut s = site.clone();
        s.sort();
        s
    };
    assert_eq!(site, sorted, "the site's keys in the order of their slots");
    site.dedup();
    assert_eq!(site.len(), 2);
}
