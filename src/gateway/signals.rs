//! What the program sets up before anything else, the crate's only `unsafe` code besides the
//! CGI arena and exit: changing a signal's disposition and polling a descriptor have no safe
//! interface in std, and the program starts without std's runtime start (`main.rs`), which
//! would otherwise do the first two.
//! - Standard input, output and error open: one the parent closed is opened on /dev/null, so
//!   that no file the program opens later takes its number (a counter file written as if it
//!   were the error log).
//! - SIGPIPE ignored, so that an answer written to a client gone away fails with `EPIPE` and
//!   the request's accounting (the journal's entry, the store's writes) still happens.
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

/// The settings above, first thing at every start: three system calls (a `poll` and two
/// `rt_sigaction`), and an `open` for each standard descriptor found closed.
pub fn at_start() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `poll` reads and writes only the three `pollfd` given, which live on this stack
    // frame for the call; a timeout of 0 returns at once.
    let polled = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) };
    if polled > 0 {
        for closed in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
            // Opened on the lowest free number, which is the closed one (the others below it
            // are open): kept open for the life of the process.
            if let Ok(null) = std::fs::OpenOptions::new()
                .read(closed.fd == 0)
                .write(closed.fd != 0)
                .open("/dev/null")
            {
                let _kept = std::os::fd::IntoRawFd::into_raw_fd(null);
            }
        }
    }
    // SAFETY: `signal` with SIG_IGN installs no handler, so no code of ours ever runs in signal
    // context; it only changes what the kernel does when the signal arrives. It is called
    // before any thread is started, and the previous dispositions are not needed.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
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
