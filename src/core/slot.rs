//! Where a key lives in a Redis Cluster: its hash slot (CRC16 of the key, or of the text
//! between its first `{` and the next `}` when that is not empty, modulo 16384), as the
//! cluster specification defines it, and the key a cluster store writes so that the keys of
//! one client share a slot (the client's identity in braces: a hash tag).

/// How many slots a cluster has.
pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection: the one the
/// cluster specification names.
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: between the first `{` and the first `}` after it when
/// both are there with something between, else the whole key.
pub fn hashed_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The hash slot of `key`.
pub fn slot_of(key: &[u8]) -> u16 {
    crc16(hashed_part(key)) % SLOTS
}

/// The key a cluster store writes for `key`, made by a template whose text before the first
/// identity is `prefix`, for `identity`: the identity in braces, so that every key of that
/// identity (every rule of one client) hashes to one slot. A key without an identity (a
/// site-wide one, a key of resolve's own) is written as it is. Keys never hold braces
/// otherwise (templates allow none outside placeholders, identities none at all), so the
/// braces taken out give the key back.
pub fn tagged(key: &str, prefix_len: usize, identity: &str) -> String {
    let after = prefix_len + identity.len();
    match (
        key.get(..prefix_len),
        key.get(prefix_len..after),
        key.get(after..),
    ) {
        (Some(before), Some(id), Some(rest)) if id == identity && !identity.is_empty() => {
            format!("{before}{{{id}}}{rest}")
        }
        _ => key.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_the_specifications() {
        // The cluster specification's test vector.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_are_those_redis_gives() {
        // `CLUSTER KEYSLOT` on redis-server 7.
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"bar"), 5061);
        assert_eq!(slot_of(b"123456789"), 0x31C3, "below 16384 already");
    }

    #[test]
    fn a_hash_tag_is_hashed_alone() {
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        assert_eq!(slot_of(b"{user1000}.followers"), slot_of(b"user1000"));
        // The first `{` and the first `}` after it.
        assert_eq!(slot_of(b"foo{bar}{zap}"), slot_of(b"bar"));
        assert_eq!(slot_of(b"foo{{bar}}zap"), slot_of(b"{bar"));
        // Nothing between: the whole key.
        assert_eq!(hashed_part(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hashed_part(b"foo{bar"), b"foo{bar");
        assert_eq!(hashed_part(b"foo}bar{"), b"foo}bar{");
    }

    #[test]
    fn a_clients_keys_share_its_slot() {
        let a = tagged("resolve:ip:203.0.113.7", 11, "203.0.113.7");
        let b = tagged("resolve:day:203.0.113.7", 12, "203.0.113.7");
        assert_eq!(a, "resolve:ip:{203.0.113.7}");
        assert_eq!(b, "resolve:day:{203.0.113.7}");
        assert_eq!(slot_of(a.as_bytes()), slot_of(b.as_bytes()));
        assert_eq!(
            tagged("login:42:x", 6, "42"),
            "login:{42}:x",
            "text after the identity kept"
        );
        assert_eq!(a.replace(['{', '}'], ""), "resolve:ip:203.0.113.7");
        // No identity, or one that is not where the template puts it: as it is.
        assert_eq!(tagged("resolve:site:*", 13, ""), "resolve:site:*");
        assert_eq!(
            tagged("resolve:ip:1.2.3.4", 11, "9.9.9.9"),
            "resolve:ip:1.2.3.4"
        );
        assert_eq!(tagged("short", 11, "1.2.3.4"), "short");
    }
}
