//! Work run on a thread of its own and waited for up to a deadline: the lock the file store
//! waits out, the request body drained after the answer. A mutex and a condition variable, not
//! a channel: std's channels keep per-thread state that every process then sets up, and a CGI
//! process sets up everything it links on every request (docs/performance.md).

use std::io;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

/// Where the thread leaves its result.
struct Slot<T> {
    value: Mutex<Option<T>>,
    ready: Condvar,
}

/// Runs `work` on a new thread (with `stack` bytes of stack when given) and waits up to
/// `timeout` for what it returns. `Ok(None)`: the time ran out first (the thread goes on,
/// its result dropped when it ends); `Err`: no thread could be started.
pub fn run_for<T: Send + 'static>(
    timeout: Duration,
    stack: Option<usize>,
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<Option<T>> {
    let slot = Arc::new(Slot {
        value: Mutex::new(None),
        ready: Condvar::new(),
    });
    let theirs = Arc::clone(&slot);
    let mut builder = thread::Builder::new();
    if let Some(bytes) = stack {
        builder = builder.stack_size(bytes);
    }
    builder.spawn(move || {
        let value = work();
        *theirs.value.lock().unwrap_or_else(PoisonError::into_inner) = Some(value);
        theirs.ready.notify_one();
    })?;
    let deadline = Instant::now() + timeout;
    let mut value = slot.value.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if let Some(v) = value.take() {
            return Ok(Some(v));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        value = slot
            .ready
            .wait_timeout(value, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn the_result_comes_back_when_ready() {
        let got = run_for(Duration::from_secs(30), None, || 6 * 7).unwrap();
        assert_eq!(got, Some(42));
    }

    #[test]
    fn a_small_stack_is_enough_for_small_work() {
        let got = run_for(Duration::from_secs(30), Some(64 * 1024), || "done").unwrap();
        assert_eq!(got, Some("done"));
    }

    #[test]
    fn the_wait_ends_at_the_deadline_while_the_work_goes_on() {
        // The work waits for this test's word, so it cannot finish before the deadline.
        let (go, wait) = mpsc::channel::<()>();
        let (finished, seen) = mpsc::channel::<()>();
        let started = Instant::now();
        let got = run_for(Duration::from_millis(50), None, move || {
            let _ = wait.recv();
            let _ = finished.send(());
            1
        })
        .unwrap();
        assert_eq!(got, None);
        assert!(started.elapsed() >= Duration::from_millis(50));
        // The thread is still there and ends once told, its result dropped.
        go.send(()).unwrap();
        seen.recv_timeout(Duration::from_secs(30)).unwrap();
    }
}
