//! Shared harness for the integration tests: temp dirs, a real Apache, a provider stand-in, an HTTP client and a direct CGI runner.
#![allow(dead_code, unused_imports)]

pub mod apache;
pub mod cgi;
pub mod client;
pub mod config;
pub mod provider;
pub mod system;
pub mod temp;
pub mod urlenc;

pub use apache::{Apache, ApacheBuilder};
pub use cgi::{Cgi, CgiAnswer, CgiOutput, StdinMode};
pub use client::{HttpClient, Request, Response, fire};
pub use provider::{Provider, RecordedRequest, Reply};
pub use system::{ServerUser, binary, is_root, server_user};
pub use temp::TempDir;
