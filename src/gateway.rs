//! How requests reach the program: a CGI process per request, a FastCGI process answering many,
//! or `resolve serve` on this machine. Each gateway turns its transport into the same request
//! and writes the same answer.

pub mod arena;
pub mod cgi;
pub mod exit;
pub mod fastcgi;
pub mod replay;
pub mod serve;
pub mod signals;
