//! Connecting and working within a time budget: the client library's own handshake has no
//! overall bound, so it runs on a helper thread that is given up on when the budget runs out.

use std::time::Duration;

use mysql::{Conn, Opts};

use crate::store::mysql::errors::Failed;

/// Opens a connection within `budget`. The driver bounds each read of the handshake by the
/// read timeout but not the handshake as a whole, so a server that trickles its greeting could
/// hold the request far beyond its bound: the handshake runs on a helper thread and is given
/// up when the budget runs out.
pub(crate) fn connect_within(opts: Opts, budget: Duration) -> Result<Conn, Failed> {
    match within(budget, move || Conn::new(opts)) {
        Some(result) => Ok(result?),
        None => Err(Failed::OutOfTime),
    }
}

/// Runs `work` on a helper thread and waits for it at most `budget`: None when it did not end
/// in time. The helper is not stopped: it ends when `work` does (a handshake, when its socket
/// times out or completes), and what it made is then dropped. Should no thread be available
/// (a process limit), `work` runs here, unbounded. A panic in `work` is the caller's.
pub(crate) fn within<T, F>(budget: Duration, work: F) -> Option<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Clone + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new()
        .name("resolve-connect".to_owned())
        .spawn({
            let work = work.clone();
            move || {
                let _ = tx.send(work());
            }
        });
    let Ok(helper) = spawned else {
        return Some(work());
    };
    match rx.recv_timeout(budget) {
        Ok(v) => Some(v),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match helper.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => None,
        },
    }
}
