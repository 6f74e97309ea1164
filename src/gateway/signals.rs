//! The one signal setting the program makes: SIGXFSZ ignored, so that a write past the file
//! size limit (RLIMIT_FSIZE, which some hosts set) fails with `EFBIG` and is handled as a store
//! failure (answered by `store.on_error`, logged) instead of killing the process before it
//! answers. Changing a signal's disposition has no safe interface in std, so this module is the
//! crate's only `unsafe` code.
#![allow(unsafe_code)]

/// Ignores SIGXFSZ for this process. Cheap (one `rt_sigaction`); call it first thing.
pub fn ignore_file_size_signal() {
    // SAFETY: `signal` with SIG_IGN installs no handler, so no code of ours ever runs in signal
    // context; it only changes what the kernel does when the signal arrives. It is called
    // before any thread is started, and the previous disposition (returned) is not needed.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}
