//! Ending a CGI process once its answer is written, without the runtime's teardown.
//!
//! Returning from `main` (or `std::process::exit`) runs std's clean-up, whose only work left
//! in a CGI process is taking down the stack-overflow handler's alternate stack: a
//! `sigaltstack` and a `munmap` of a mapping the kernel removes with the process anyway: 2 of
//! a refused request's 57 to 98 system calls (with the smallest configuration and with
//! deploy.sh's starter), and about 5% of its CPU time when measured with and without. std has
//! no safe way to skip it, so this module allows `unsafe` for its one call.
#![allow(unsafe_code)]

/// Ends the process now with `code`. Standard output must be flushed and everything that
/// writes on drop (the store's held entries, files) dropped before: nothing runs after this.
pub fn now(code: i32) -> ! {
    // SAFETY: `_exit` takes no pointer and touches no memory of the program; it cannot return.
    // Skipping destructors is sound (leaking is safe), and the caller has written and flushed
    // everything the request produced.
    unsafe { libc::_exit(code) }
}
