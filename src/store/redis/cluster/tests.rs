//! The cluster client's pure parts: routing by key, transactions as units, redirections read,
//! the slot map read from `CLUSTER SLOTS`.
use super::*;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(Some(s.as_bytes().to_vec()))
}

#[test]
fn commands_are_routed_by_their_first_key() {
    assert_eq!(key_of(&resp::encode(&[b"GET", b"k"])), Some(b"k".to_vec()));
    assert_eq!(
        key_of(&resp::encode(&[b"EVALSHA", b"abc", b"2", b"a", b"b", b"1"])),
        Some(b"a".to_vec())
    );
    assert_eq!(key_of(&resp::encode(&[b"EVAL", b"return 1", b"0"])), None);
    assert_eq!(key_of(&resp::encode(&[b"TIME"])), None);
    assert_eq!(key_of(&resp::encode(&[b"MULTI"])), None);
}

#[test]
fn a_transaction_is_one_unit() {
    let c = |args: &[&[u8]]| resp::encode(args);
    let got = units(&[
        c(&[b"TIME"]),
        c(&[b"MULTI"]),
        c(&[b"HINCRBY", b"resolve:journal:totals:{7}", b"x", b"1"]),
        c(&[b"HINCRBY", b"resolve:journal:clients:{7}", b"y", b"1"]),
        c(&[b"EXEC"]),
        c(&[b"GET", b"k"]),
    ]);
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].slot, None);
    assert_eq!(got[1].commands.len(), 4);
    assert_eq!(got[1].slot, Some(slot_of(b"7")));
    assert_eq!(got[2].slot, Some(slot_of(b"k")));
}

#[test]
fn redirections_are_read() {
    let e = |s: &str| Reply::Error(s.into());
    assert_eq!(
        outcome(&[e("MOVED 3999 127.0.0.1:6381")]),
        Outcome::Moved(3999, "127.0.0.1:6381".into())
    );
    assert_eq!(
        outcome(&[
            Reply::Simple("OK".into()),
            e("ASK 3999 127.0.0.1:6381"),
            e("EXECABORT x")
        ]),
        Outcome::Ask("127.0.0.1:6381".into())
    );
    assert!(matches!(
        outcome(&[e("CLUSTERDOWN The cluster is down")]),
        Outcome::Again(_)
    ));
    assert_eq!(outcome(&[e("NOSCRIPT No matching script")]), Outcome::Done);
    assert_eq!(outcome(&[e("MOVED 99999 h:1")]), Outcome::Done);
}

#[test]
fn the_map_is_read_from_cluster_slots() {
    let node = |h: &str, p: i64| Reply::Array(Some(vec![bulk(h), Reply::Int(p), bulk("id")]));
    let reply = Reply::Array(Some(vec![
        Reply::Array(Some(vec![
            Reply::Int(0),
            Reply::Int(5460),
            node("127.0.0.1", 7000),
            node("127.0.0.1", 7004),
        ])),
        Reply::Array(Some(vec![
            Reply::Int(5461),
            Reply::Int(10922),
            node("", 7001),
        ])),
        Reply::Array(Some(vec![
            Reply::Int(10923),
            Reply::Int(16383),
            node("::1", 7002),
        ])),
    ]));
    assert_eq!(
        slot_ranges(&reply, "10.0.0.9:7001").unwrap(),
        [
            (0, 5460, "127.0.0.1:7000".into()),
            (5461, 10922, "10.0.0.9:7001".into()),
            (10923, 16383, "[::1]:7002".into()),
        ]
    );
    let mut cluster = Cluster::new(
        vec!["10.0.0.9:7001".into()],
        None,
        None,
        Duration::from_secs(1),
        Duration::from_secs(1),
        None,
    );
    assert!(cluster.learn(&reply, "10.0.0.9:7001"));
    assert_eq!(cluster.master(0), Some("127.0.0.1:7000"));
    assert_eq!(cluster.master(16383), Some("[::1]:7002"));
    assert_eq!(
        cluster.masters()[0],
        ("127.0.0.1:7000".into(), "0-5460".into(), 5461)
    );
    assert_eq!(
        target_of("[::1]:7002", None),
        Some(Target::Tcp {
            host: "::1".into(),
            port: 7002
        })
    );
    // Over TLS when the configured target is: every node, with the same CA file.
    let ca = Some(std::path::PathBuf::from("/etc/ca.pem"));
    assert_eq!(
        target_of("node-2.cache.example:6380", Some(&ca)),
        Some(Target::Tls {
            host: "node-2.cache.example".into(),
            port: 6380,
            ca_file: ca.clone()
        })
    );
    assert!(
        slot_ranges(
            &Reply::Error("ERR This instance has cluster support disabled".into()),
            "x"
        )
        .is_none()
    );
}
