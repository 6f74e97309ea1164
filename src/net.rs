//! The network's plain values, parsed strictly and shared by every layer above: URLs, address
//! ranges (CIDR) and sets of them, the CDN's published ranges, and form (percent) encoding.

pub mod addr_set;
pub mod cdn;
pub mod cidr;
pub mod form;
pub mod url;
