//! The HTTP surface, pure: reading a request (method, body, form, link, origin, client
//! identity, API key, wanted format) and writing the answer (status, headers, body in text,
//! HTML or JSON). No I/O: the gateways hand bytes in and write bytes out.

pub mod about;
pub mod allowance;
pub mod api_key;
pub mod footer;
pub mod identity;
pub mod link;
pub mod link_list;
pub mod links;
pub mod negotiate;
pub mod origin;
pub mod problem;
pub mod render;
pub mod request;
pub mod response;
