//! The `resolve` binary: a CGI program when a web server starts it, a command otherwise.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    resolve::command::cli::main()
}
