//! The password scrambles of MySQL's authentication methods (pure): `mysql_native_password`
//! (SHA-1) and `caching_sha2_password` (SHA-256). Neither sends the password itself; the full
//! authentication of `caching_sha2_password` does, and only over TLS or a Unix socket.

use sha1::Sha1;
use sha2::{Digest, Sha256};

pub const NATIVE: &str = "mysql_native_password";
pub const CACHING_SHA2: &str = "caching_sha2_password";

/// The answer to the server's `scramble` for `plugin`; None for a method this client does not
/// speak.
pub fn scramble(plugin: &str, password: &[u8], scramble: &[u8]) -> Option<Vec<u8>> {
    if password.is_empty() {
        return matches!(plugin, NATIVE | CACHING_SHA2).then(Vec::new);
    }
    match plugin {
        // SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password)))
        NATIVE => Some(answer::<Sha1>(password, scramble, Order::ScrambleFirst)),
        // SHA256(password) XOR SHA256(SHA256(SHA256(password)) + scramble)
        CACHING_SHA2 => Some(answer::<Sha256>(password, scramble, Order::ScrambleLast)),
        _ => None,
    }
}

/// Where the scramble goes in the second hash.
enum Order {
    ScrambleFirst,
    ScrambleLast,
}

/// H(password) XOR H(the scramble and H(H(password)), in `order`).
fn answer<H: Digest>(password: &[u8], scramble: &[u8], order: Order) -> Vec<u8> {
    let once = H::digest(password);
    let twice = H::digest(&once);
    let mut h = H::new();
    match order {
        Order::ScrambleFirst => {
            h.update(scramble);
            h.update(&twice);
        }
        Order::ScrambleLast => {
            h.update(&twice);
            h.update(scramble);
        }
    }
    xor(&once, &h.finalize())
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn native_matches_the_servers_stored_hash() {
        // The server keeps SHA1(SHA1(password)) (`*2470C0C0…` for "password") and checks
        // SHA1(reply XOR SHA1(scramble + stored)) = stored.
        let salt = b"abcdefghijklmnopqrst";
        let reply = scramble(NATIVE, b"password", salt).unwrap();
        let stored = Sha1::digest(Sha1::digest(b"password"));
        assert_eq!(
            hex(&stored).to_uppercase(),
            "2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"
        );
        let mut h = Sha1::new();
        h.update(salt);
        h.update(stored);
        let once = xor(&reply, &h.finalize());
        assert_eq!(Sha1::digest(once).as_slice(), stored.as_slice());
    }

    #[test]
    fn caching_sha2_is_checked_the_same_way() {
        let salt = b"01234567890123456789";
        let reply = scramble(CACHING_SHA2, b"secret", salt).unwrap();
        let stored = Sha256::digest(Sha256::digest(b"secret"));
        let mut h = Sha256::new();
        h.update(stored);
        h.update(salt);
        let once = xor(&reply, &h.finalize());
        assert_eq!(Sha256::digest(once).as_slice(), stored.as_slice());
        assert_eq!(reply.len(), 32);
    }

    #[test]
    fn empty_passwords_and_unknown_methods() {
        assert_eq!(scramble(NATIVE, b"", b"x"), Some(vec![]));
        assert_eq!(scramble("client_ed25519", b"p", b"x"), None);
    }
}
