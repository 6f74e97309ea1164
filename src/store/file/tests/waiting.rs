//! A request that opened a counter file and waits for its lock while the holder removes the
//! file (a sweep's removal, a damaged file moved aside): it counts in a new file at the path.

use super::*;

/// How many of this process's descriptors are open on `path`.
fn open_descriptors(path: &Path) -> usize {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target == path)
        .count()
}

/// A request that opened a counter file and waits for its lock while the holder removes it
/// (`remove`: a sweep's removal, or a damaged file moved aside) counts in a new file at the
/// path, never in the removed inode, where its count would be lost.
fn a_file_removed_under_a_waiting_request(name: &str, remove: fn(&Path)) {
    let key = Counted::new(name, "resolve:ip:192.0.2.7", 5_000);
    let path = key.store.path_for(key.key);
    let before = fs::read(&path).unwrap();
    let holder = key.hold();
    // The request, as another process would make it: a store of its own on the directory.
    let data = path.parent().unwrap().parent().unwrap().to_owned();
    let (rule, name) = (key.rule.clone(), key.key);
    std::thread::scope(|scope| {
        let waiting = scope.spawn(move || {
            let store = store_in(&data).with_lock_timeout(Duration::from_secs(5));
            decide_one(&store, &rule, name).map(|d| d.is_admit())
        });
        // Removed only once the request has the file open (the holder's descriptor and its
        // own, and a copy of it once a helper thread waits for the lock).
        let deadline = Instant::now() + Duration::from_secs(10);
        while open_descriptors(&path) < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(
            open_descriptors(&path) >= 2,
            "the request never opened the file"
        );
        remove(&path);
        drop(holder);
        assert!(waiting.join().unwrap().unwrap());
    });
    let counted = key
        .store
        .read(key.key)
        .unwrap()
        .expect("a new file at the path");
    assert_eq!(counted.count, 1, "counted in a new file, from nothing");
    let aside = path.with_extension("damaged");
    if let Ok(copy) = fs::read(&aside) {
        assert_eq!(copy, before, "the copy moved aside is left as it was");
    }
}

#[test]
fn a_request_waiting_on_a_file_a_sweep_removes_counts_in_a_new_one() {
    a_file_removed_under_a_waiting_request("removed-waiting", |path| {
        fs::remove_file(path).unwrap();
    });
}

#[test]
fn a_request_waiting_on_a_file_moved_aside_counts_in_a_new_one() {
    a_file_removed_under_a_waiting_request("aside-waiting", |path| {
        let aside = safe_open::move_aside(path);
        assert!(aside.exists() && !path.exists());
    });
}
