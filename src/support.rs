//! Helpers every layer may use, which use nothing above them: every default in one place,
//! values never shown and the owner's log that masks them, how the effective configuration is
//! written, HTML escaping, password hashes, private files written once, sampling, hex text and
//! the problems logged recently, work waited for on a thread of its own.

pub mod decimal;
pub mod defaults;
pub mod hex;
pub mod html;
pub mod log;
pub mod password;
pub mod private_file;
pub mod random;
pub mod recent;
pub mod secret;
pub mod show;
pub mod siphash;
#[cfg(test)]
pub mod temp;
pub mod text;
pub mod waited;
