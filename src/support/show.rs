//! How checked values are written out for `resolve check`: times in milliseconds, lists of
//! pairs as objects, values with a text form as that text. Secrets need nothing here: a
//! [`Secret`](crate::support::secret::Secret) serialises as the mask, whatever holds it.

use std::fmt::Display;
use std::time::Duration;

use serde::Serializer;
use serde::ser::SerializeMap;

/// A duration as whole milliseconds.
pub fn ms<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A duration as whole seconds.
pub fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

/// `[(name, value)]` as `{"name": value}`, in order.
pub fn pairs<S: Serializer, K: Display, V: serde::Serialize>(
    list: &[(K, V)],
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(list.len()))?;
    for (k, v) in list {
        map.serialize_entry(&k.to_string(), v)?;
    }
    map.end()
}

/// Anything with a text form, as that text.
pub fn text<S: Serializer, T: Display>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// A list of things with a text form, as a list of texts.
pub fn texts<S: Serializer, T: Display>(list: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(ToString::to_string))
}
