//! resolve: a rate-limited gateway to paid link-resolver APIs, run as a CGI program.
//!
//! The core (rules, the limiter, request parsing, answers) is pure and tested with a fake clock;
//! the edges (CGI, files, the provider's HTTP API) are thin adapters behind small traits.
// No unsafe code but one call in `signals`, which allows it for itself.
#![deny(unsafe_code)]

pub mod api_key;
pub mod app;
pub mod cache;
pub mod cgi;
pub mod check;
pub mod cli;
pub mod clock;
pub mod config;
pub mod decision;
pub mod defaults;
pub mod fastcgi;
pub mod file_store;
pub mod form;
pub mod http_provider;
pub mod identity;
pub mod limiter;
pub mod link;
pub mod locate;
pub mod log;
pub mod memory_store;
pub mod mysql_store;
pub mod negotiate;
pub mod origin;
pub mod presets;
pub mod problem;
pub mod provider;
pub mod provider_config;
pub mod random;
pub mod record;
pub mod redis_store;
pub mod render;
pub mod request;
pub mod resp;
pub mod response;
pub mod rule;
pub mod secret;
pub mod serve;
pub mod signals;
pub mod store;
pub mod stores;
