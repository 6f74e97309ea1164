//! The file store under many real processes: counters that survive processes killed with
//! SIGKILL at random instants (its record format's crash argument). Exact limits when many
//! processes race are in store_contract.rs, for every store.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use resolve::core::clock::SystemClock;
use resolve::store::file::FileStore;
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
    bare_get(config, "link=https%3A%2F%2Fhost.example%2Ffile", addr)
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
