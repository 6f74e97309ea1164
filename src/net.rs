//! The network's plain values, parsed strictly and shared by every layer above: URLs, address
//! ranges (CIDR) and sets of them, the CDN's published ranges, form (percent) encoding, and
//! the lookup of a host an outgoing call goes to.

pub mod addr_set;
pub mod cdn;
pub mod cidr;
pub mod form;
pub mod lookup;
pub mod url;
