//! The `resolve` binary: a CGI program when a web server starts it, a command otherwise.
//!
//! The program starts at the C library's `main`, not at std's runtime start, which under CGI
//! runs at every request: std's start polls the three standard descriptors, sets SIGPIPE
//! aside, and maps and installs an alternate signal stack for a stack-overflow message (eleven
//! system calls, about 20 µs of a start; docs/performance.md). What of that the program needs,
//! `command::cli::main` does itself (`gateway::signals::at_start`). Reading the arguments from
//! `argv` is the one `unsafe` step here.
#![cfg_attr(not(test), no_main)]
#![deny(unsafe_code)]

#[cfg(not(test))]
#[allow(unsafe_code)]
// SAFETY: the C library calls this once, as `main`, with `argc` and `argv` as the kernel gave
// them; no other symbol of the program is named `main` (std's is not generated: `no_main`).
#[unsafe(no_mangle)]
extern "C" fn main(argc: std::ffi::c_int, argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    use std::os::unix::ffi::OsStrExt;
    let args = || {
        let count = usize::try_from(argc).unwrap_or(0);
        (1..count)
            .map(|i| {
                // SAFETY: the C standard guarantees `argv[0..argc]` are pointers to
                // NUL-terminated strings that live for the whole program, and `i < argc`.
                let arg = unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) };
                std::ffi::OsStr::from_bytes(arg.to_bytes()).to_owned()
            })
            .collect()
    };
    // `exit` flushes standard output, as returning from std's `main` would.
    std::process::exit(i32::from(resolve::command::cli::main(args)))
}
