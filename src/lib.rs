//! resolve: a rate-limited gateway to paid link-resolver APIs, run as a CGI program.
//!
//! The layers, from the inside out:
//! - [`core`]: rules, the limiter's decision and the clock; pure, tested with a fake clock.
//! - [`http`]: reading a request and writing the answer; pure.
//! - [`provider`]: the paid API described as data, and the HTTPS call.
//! - [`store`]: where counters live (files, MySQL/MariaDB, Redis, memory), behind one trait.
//! - [`config`]: the configuration file, checked into a [`config::Config`].
//! - [`app`]: one request from start to answer; [`site`] what a running site holds;
//!   [`admin`] the owner's dashboard behind a password.
//! - [`gateway`]: CGI, FastCGI and `resolve serve`, each turning its transport into a request.
//! - [`cli`] and [`check`]: the command line and `resolve check`.
//! - Shared by all: [`defaults`] (every default, in one place), [`secret`] and [`log`] (values
//!   never shown, and the owner's log that masks them), [`show`] (how the effective
//!   configuration is written), [`random`] (sampling), [`hex`] (hex text of bytes).
//!
//! The library is the binary's, not a published API (`publish = false`): every layer is public
//! so that the integration tests, the benchmarks and the fuzz targets can drive it directly,
//! and `tests/layout.rs` keeps the layers honest (no import cycles; a core without I/O that
//! imports nothing from the rest).
// No unsafe code but two signal settings in `gateway::signals`, the allocator in
// `gateway::arena` and the CGI process's exit in `gateway::exit`, which allow it for
// themselves.
#![deny(unsafe_code)]

pub mod admin;
pub mod app;
pub mod blocks;
pub mod check;
pub mod cli;
pub mod config;
pub mod core;
pub mod defaults;
pub mod gateway;
pub mod hex;
pub mod http;
pub mod log;
pub mod provider;
pub mod random;
pub mod report;
pub mod secret;
pub mod show;
pub mod site;
pub mod stats;
pub mod store;
