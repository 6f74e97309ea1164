//! The program's signal settings, the crate's only `unsafe` code besides the CGI arena:
//! changing a signal's disposition has no safe interface in std.
//! - SIGXFSZ ignored, so that a write past the file size limit (RLIMIT_FSIZE, which some hosts
//!   set) fails with `EFBIG` and is handled as a store failure (answered by `store.on_error`,
//!   logged) instead of killing the process before it answers.
//! - In FastCGI mode, SIGTERM (how mod_fcgid retires a process, and how Apache stops) asks the
//!   process to stop once the request it is answering is answered and what it holds is
//!   written, instead of killing it on the spot.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the SIGTERM handler.
static STOP_ASKED: AtomicBool = AtomicBool::new(false);

/// Ignores SIGXFSZ for this process. Cheap (one `rt_sigaction`); call it first thing.
pub fn ignore_file_size_signal() {
    // SAFETY: `signal` with SIG_IGN installs no handler, so no code of ours ever runs in signal
    // context; it only changes what the kernel does when the signal arrives. It is called
    // before any thread is started, and the previous disposition (returned) is not needed.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

extern "C" fn on_stop(_signal: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP_ASKED.store(true, Ordering::SeqCst);
}

/// From now on SIGTERM sets a flag ([`stop_asked`]) instead of ending the process. Calls in
/// progress are restarted (SA_RESTART), except those the kernel never restarts, such as an
/// accept with a receive timeout, which is what the FastCGI loop waits in.
pub fn on_stop_finish_first() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe. The struct is
    // zeroed (a valid `sigaction`: empty mask, no flags) before its fields are set, and the
    // previous disposition is not needed.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_stop as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

/// Whether SIGTERM has arrived since [`on_stop_finish_first`].
pub fn stop_asked() -> bool {
    STOP_ASKED.load(Ordering::SeqCst)
}
