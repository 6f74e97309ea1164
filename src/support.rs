//! Helpers every layer may use, which use nothing above them: every default in one place,
//! values never shown and the owner's log that masks them, how the effective configuration is
//! written, HTML escaping, password hashes, sampling and hex text.

pub mod defaults;
pub mod hex;
pub mod html;
pub mod log;
pub mod password;
pub mod random;
pub mod secret;
pub mod show;
#[cfg(test)]
pub mod temp;
pub mod text;
