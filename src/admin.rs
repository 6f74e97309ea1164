//! The owner's dashboard at `/cgi-bin/resolve/admin` (PATH_INFO `/admin`), on only when
//! `admin.password_hash` is set. The parts: [`password`] (Argon2id), [`server_key`] (the secret
//! in the data directory), [`token`] (the signing key and tags), [`session`] (what the cookies
//! and tokens hold), [`cookies`] (the headers), [`signin`] (the lock-out).

pub mod cookies;
pub mod password;
pub mod server_key;
pub mod session;
pub mod signin;
pub mod token;
