//! Under CGI, a client its rules refused is refused again from the data directory's `refusals`
//! file for up to a second: with a store on a server, without a connection to it; with the
//! file store, without its records. The store is asked again after that, and nothing
//! remembered admits anyone.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::config::rule;
use support::urlenc::link_param;
use support::{Cgi, MariaDb, Redis, Setup};

/// One address, 5 requests an hour, 20 CGI requests one after another: 5 admitted, then 15
/// refused, the refusals taking two connections a second at most (the refusal that asks the
/// server each time the memory's second ends, and the request that moves the journal's spool
/// to the server once a second) where each took its own before; the provider called 5 times.
/// Another address is still decided by the server.
fn refusals_take_no_connection(label: &str, store: Value, connections: &dyn Fn() -> u64) {
    let setup = Setup::builder(label)
        .store(store)
        .rules(vec![rule("ip", "ip", 5, 3600)])
        .write();
    let ask = |i: usize, addr: &str| {
        let out = setup.run(
            Cgi::new("GET", link_param(&format!("https://example.com/file/{i}")))
                .var("REMOTE_ADDR", addr),
        );
        assert!(out.stderr.is_empty(), "{}", out.describe());
        out.answer().status
    };
    let admitted: Vec<u16> = (0..5).map(|i| ask(i, "192.0.2.7")).collect();
    assert_eq!(admitted, [200; 5]);
    let before = connections();
    let started = Instant::now();
    let refused: Vec<u16> = (5..20).map(|i| ask(i, "192.0.2.7")).collect();
    let seconds = started.elapsed().as_secs();
    // The count asked for is a connection of its own.
    let taken = connections() - before - 1;
    assert_eq!(refused, [429; 15]);
    assert!(
        taken <= 2 * (seconds + 1),
        "15 refusals in {seconds} s took {taken} connections"
    );
    eprintln!("{label}: 15 refusals in {seconds} s took {taken} connections");
    assert_eq!(setup.provider.calls(), 5);
    // Another client is not refused by the first one's memory.
    assert_eq!(ask(20, "192.0.2.8"), 200);
    let file = setup.dir.path().join("ratelimit").join("refusals");
    let mode = std::fs::metadata(&file)
        .expect("the refusals file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{}", file.display());
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs Redis: cargo test --features servers"
)]
fn redis_refusals_under_cgi_take_no_connection() {
    let redis = Redis::start();
    refusals_take_no_connection(
        "refusals-redis",
        json!({"kind": "redis", "url": redis.url()}),
        &|| redis.connections_received(),
    );
}

#[test]
#[cfg_attr(
    not(feature = "servers"),
    ignore = "needs MariaDB: cargo test --features servers"
)]
fn mariadb_refusals_under_cgi_take_no_connection() {
    let db = MariaDb::start();
    refusals_take_no_connection(
        "refusals-mariadb",
        json!({"kind": "mysql", "url": db.url()}),
        &|| db.connections(),
    );
}

/// The file store: a client refused, then every record of the store removed (as if its counts
/// were gone): within the second the client is still refused, from the `refusals` file; once
/// the second is over, the store decides again (and, its counts gone, admits). A run too slow
/// to ask again within the second shows nothing about the memory, and says so.
#[test]
fn file_store_refusals_under_cgi_are_answered_without_its_records() {
    let setup = Setup::builder("refusals-file")
        .rules(vec![rule("ip", "ip", 1, 3600)])
        .write();
    let ask = |i: usize| {
        let out = setup.run(
            Cgi::new("GET", link_param(&format!("https://example.com/file/{i}")))
                .var("REMOTE_ADDR", "192.0.2.7"),
        );
        assert!(out.stderr.is_empty(), "{}", out.describe());
        out.answer().status
    };
    assert_eq!(ask(0), 200);
    let refused_at = Instant::now();
    assert_eq!(ask(1), 429);
    let file = setup.data.join("refusals");
    let mode = std::fs::metadata(&file)
        .expect("the refusals file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // The shards (two hex digits) hold the records.
    for entry in std::fs::read_dir(&setup.data).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
            std::fs::remove_dir_all(entry.path()).unwrap();
        }
    }
    let again = ask(2);
    let within = refused_at.elapsed() < Duration::from_millis(1000);
    assert!(
        again == 429 || !within,
        "asked again within the second, the record gone: {again}"
    );
    if !within {
        eprintln!("the run was too slow to ask within the second: the memory was not seen");
    }
    std::thread::sleep(Duration::from_millis(1000).saturating_sub(refused_at.elapsed()));
    assert_eq!(ask(3), 200, "the store decides again after the second");
    assert_eq!(setup.provider.calls(), 2);
}
