//! The file store under test: a data directory the program's account may write, handles on a
//! clock the test holds, and locks held as a stuck process would.

use std::fs::{self, File};
use std::path::PathBuf;
use std::time::Duration;

use resolve::config::Config;
use resolve::core::rule::{Algorithm, Rule};
use resolve::store::Check;
use resolve::store::counters::Counters;
use resolve::store::file::FileStore;
use resolve::store::roles::Backend;
use serde_json::{Value, json};

use super::{
    SLACK, Slowable, Slowdown, StoreUnderTest, TestClock, Timeouts, policy_fields, wall_ms,
};
use crate::support::TempDir;

pub struct InFiles {
    dir: TempDir,
    data: PathBuf,
    clock: TestClock,
    /// Files of keys kept locked, as a stuck process would.
    held: Vec<File>,
}

impl InFiles {
    fn handle(&self) -> FileStore<TestClock> {
        FileStore::new(&self.data, self.clock.clone(), Duration::ZERO)
    }

    /// The key's file, created by a request through the site if it is not there yet.
    fn key_file(&self, key: &str) -> File {
        let path = self.handle().path_for(key);
        File::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
    }
}

impl StoreUnderTest for InFiles {
    fn start(label: &str) -> InFiles {
        let dir = TempDir::new(&format!("contract-{label}"));
        // Writable by the account Apache runs the program as.
        let data = dir.server_dir("data");
        InFiles {
            dir,
            data,
            clock: TestClock::held_at(wall_ms()),
            held: Vec::new(),
        }
    }

    fn name(&self) -> &'static str {
        "file"
    }

    fn keeps_sliding(&self) -> bool {
        let store = self.store_json("deny", Timeouts::Patient);
        let text = json!({
            "store": store,
            "rules": [{"name": "ip", "key": "ip", "algorithm": "sliding", "limit": 3, "window_secs": 60}],
        })
        .to_string();
        let refused = Config::from_json(&text, std::path::Path::new("/"))
            .expect_err("the configuration check lets a sliding rule use the file store");
        assert_eq!(refused.field, "rules[0].algorithm", "{refused}");
        assert!(
            refused
                .message
                .contains("the file store keeps fixed windows only"),
            "{refused}"
        );
        let rule = crate::handles::rule("ip", Algorithm::Sliding, 3, 60);
        let check = Check {
            rule: &rule,
            key: "resolve:ip:192.0.2.1".to_owned(),
        };
        let e = self
            .handle()
            .decide(&[check])
            .expect_err("the file store decided a sliding rule");
        assert!(
            e.detail
                .contains("sliding window, which the file store does not keep"),
            "{e}"
        );
        eprintln!("file store: sliding windows refused: {refused}");
        false
    }

    fn open(&self, _rules: &[Rule]) -> Box<dyn Backend> {
        Box::new(self.handle())
    }

    fn held_clock(&self) -> Option<&TestClock> {
        Some(&self.clock)
    }

    fn counted(&self, key: &str, algorithm: Algorithm) -> u64 {
        match algorithm {
            Algorithm::Fixed => self
                .handle()
                .read(key)
                .unwrap_or_else(|e| panic!("read {key}: {e}"))
                .map_or(0, |c| c.count.into()),
            Algorithm::Sliding => 0,
        }
    }

    fn holds(&self, key: &str) -> bool {
        self.handle().path_for(key).exists()
    }

    /// The lengths of the journal's files (on a day swept two days on, its totals alone). The
    /// blocks they take on disk are printed too: each small file takes at least one.
    fn journal_bytes(&self, _totals_only: bool) -> Option<u64> {
        let blocks: u64 = fs::read_dir(self.data.join("journal"))
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512)
                    .sum()
            })
            .unwrap_or(0);
        let bytes = self.handle().journal_bytes().expect("the journal's size");
        eprintln!("file store journal: {bytes} bytes in files, {blocks} bytes of disk blocks");
        Some(bytes)
    }

    /// The data directory goes away and a file takes its place, so that it cannot be made
    /// again (a mount that is gone): every request fails.
    fn kill(&mut self) {
        let away = self.dir.join("data.away");
        fs::rename(&self.data, &away).expect("move the data directory away");
        fs::write(&self.data, b"not a directory\n").expect("put a file in its place");
    }

    fn restart(&mut self) {
        fs::remove_file(&self.data).expect("remove the file in the directory's place");
        fs::rename(self.dir.join("data.away"), &self.data).expect("bring the directory back");
    }

    fn keeps_counts_across_restart(&self) -> bool {
        true
    }

    fn store_json(&self, policy: &str, timeouts: Timeouts) -> Value {
        let mut store = json!({
            "kind": "file",
            "dir": self.data,
            "lock_timeout_ms": timeouts.read_ms(),
        });
        policy_fields(&mut store, policy);
        store
    }

    fn place(&self) -> String {
        self.data.display().to_string()
    }

    fn failure_bound(&self, timeouts: Timeouts) -> Duration {
        Duration::from_millis(timeouts.read_ms()) + SLACK
    }
}

impl Slowable for InFiles {
    fn slow_store_json(&self, policy: &str) -> Value {
        self.store_json(policy, Timeouts::Short)
    }

    fn slow_place(&self) -> String {
        self.place()
    }

    fn slow_within_bounds(&mut self, keys: &[String]) -> Duration {
        let hold = Duration::from_millis(Timeouts::Short.read_ms() / 3);
        let files: Vec<File> = keys.iter().map(|k| self.key_file(k)).collect();
        for f in &files {
            f.lock().expect("lock a key's file");
        }
        std::thread::spawn(move || {
            std::thread::sleep(hold);
            drop(files);
        });
        hold
    }

    fn slowdowns(&self) -> Vec<Slowdown> {
        let timeout = Duration::from_millis(Timeouts::Short.read_ms());
        vec![Slowdown {
            name: "a key's file locked by a stuck process",
            hints: &["stayed locked", "store.lock_timeout_ms"],
            at_least: Some(timeout * 8 / 10),
            bound: timeout + SLACK,
        }]
    }

    fn slow_down(&mut self, _n: usize, keys: &[String]) {
        for k in keys {
            let f = self.key_file(k);
            f.lock().expect("lock a key's file");
            self.held.push(f);
        }
    }

    fn recover(&mut self) {
        self.held.clear();
    }
}
