//! FastCGI mode: the responder role of FastCGI 1.0, as mod_fcgid speaks it. The web server
//! starts the program with a listening socket as standard input (spec section 2.2) and sends each
//! request as records on a connection to it; the process answers one request after another,
//! with the same code and the same bytes as CGI mode: the CGI answer travels in FCGI_STDOUT
//! records and the server reads its headers as it reads a CGI program's. What CGI mode rebuilds
//! for every request is kept: the configuration (read again only when its file changes, so an
//! edit applies to the next request as it does under CGI), the store with its connection, and the
//! provider's HTTP agent with its idle connections.
//!
//! Own implementation: the FastCGI crates on crates.io do not fit. `fastcgi` (last release 2018)
//! parses with `unsafe` transmutes over libc; `outer_cgi` brings threads, channels and its own
//! signal handlers; `gfcgi` has no licence; the maintained ones (`tokio-fastcgi` and others) are
//! async. The responder role without multiplexing is small: records, name-value pairs, and one
//! request at a time per connection, which is all mod_fcgid sends.
//!
//! Robustness: [`protocol::parse_record`] and [`protocol::parse_pairs`] are pure and total (any bytes give a value,
//! "need more", or an error, never a panic), and every buffer is bounded. A connection that sends
//! malformed records is closed with one log line; the process goes on with the next connection.
//! Unknown management records get FCGI_UNKNOWN_TYPE, FCGI_GET_VALUES is answered, a second
//! request on a busy connection gets FCGI_CANT_MPX_CONN, other roles FCGI_UNKNOWN_ROLE.
//!
//! Stopping: after `fastcgi.max_requests` requests the process shuts its Unix socket for new
//! connections (mod_fcgid, refused, turns to another process), answers the connections already
//! waiting, and exits; the web server starts a fresh one when it needs one. No request is lost
//! on the way (tests/fastcgi.rs renews processes under load).
//! SIGTERM (how mod_fcgid retires a process) keeps its default action, ending the process at
//! once: the program installs no signal handler (a handler needs `unsafe` code and would have
//! nothing to save). mod_fcgid sends it to idle
//! processes (idle timeout, lifetime, request count), which wait in `accept` with nothing begun.
//! Only at server shutdown, or past `FcgidBusyTimeout`, can a busy process be ended mid-request,
//! exactly as a CGI process would be: the stores are made for that (the file store writes the
//! counter before admitting; a database transaction that did not commit is rolled back), so a
//! request is counted or not but never half-counted, and its answer is written with a single

pub mod connection;
pub mod process;
pub mod protocol;
