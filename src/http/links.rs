//! Several links in one request: the `links` field (one link a line) and `link` repeated, from
//! the form or the query string, blank lines and duplicates dropped, at most
//! `request.max_links`. Pure: each link is still checked, and counted, as a request of its own.

use crate::http::problem::{Kind, Problem};
use crate::net::form;

/// What the request carries, as far as links go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carried {
    /// One `link` field and no `links`: read as one link always was.
    Single,
    /// One link in all (the `links` field, or the same link repeated): answered as one link.
    One(Vec<u8>),
    /// Two links or more, each once, in the order first given (decoded, not yet checked).
    Several(Vec<Vec<u8>>),
}

/// The links of the form or query string `source`. Refused: a field that does not decode
/// (400 `bad_encoding`), nothing but blank lines (400 `missing_link`), more than `max` links
/// (400 `too_many_links`), and `link` repeated where one link a request is the rule (400
/// `repeated_link`).
pub fn carried(source: &[u8], max: u32) -> Result<Carried, Problem> {
    let lines = form::raw_values(source, "links");
    let singles = form::raw_values(source, "link");
    if lines.is_empty() && singles.len() <= 1 {
        return Ok(Carried::Single);
    }
    if max <= 1 && lines.is_empty() {
        return Err(Problem::new(
            400,
            Kind::RepeatedLink,
            "Send one link at a time.",
        ));
    }
    let mut links: Vec<Vec<u8>> = Vec::new();
    for raw in singles.iter().chain(&lines) {
        let decoded = form::decode(raw).map_err(|_| {
            Problem::new(
                400,
                Kind::BadEncoding,
                "The links are not properly encoded (a % must be followed by two hex digits).",
            )
        })?;
        for line in decoded.split(|&b| b == b'\n') {
            let link = line.trim_ascii();
            if link.is_empty() {
                continue;
            }
            if !links.iter().any(|l| l == link) {
                links.push(link.to_vec());
            }
        }
    }
    if links.len() > max as usize {
        return Err(Problem::new(
            400,
            Kind::TooManyLinks,
            format!(
                "Send at most {max} links at a time (this had {}); send the rest after.",
                links.len()
            ),
        )
        .log(format!(
            "{} links in one request (request.max_links is {max})",
            links.len()
        )));
    }
    match links.len() {
        0 => Err(Problem::new(400, Kind::MissingLink, "Paste a link first.")),
        1 => Ok(Carried::One(links.remove(0))),
        _ => Ok(Carried::Several(links)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn several(list: &[&str]) -> Carried {
        Carried::Several(list.iter().map(|l| l.as_bytes().to_vec()).collect())
    }

    #[test]
    fn one_link_field_is_read_as_before() {
        assert_eq!(
            carried(b"link=https%3A%2F%2Fe.x%2Fa", 20),
            Ok(Carried::Single)
        );
        assert_eq!(carried(b"", 20), Ok(Carried::Single));
    }

    #[test]
    fn lines_and_repeated_links_in_order_each_once() {
        let body = b"links=https%3A%2F%2Fe.x%2F1%0D%0A%0D%0Ahttps://e.x/2%0Ahttps://e.x/1%0A+";
        assert_eq!(
            carried(body, 20),
            Ok(several(&["https://e.x/1", "https://e.x/2"]))
        );
        assert_eq!(
            carried(
                b"link=https://e.x/a&link=https://e.x/b&link=https://e.x/a",
                20
            ),
            Ok(several(&["https://e.x/a", "https://e.x/b"]))
        );
        // Both fields: the `link` ones first.
        assert_eq!(
            carried(b"links=https://e.x/b&link=https://e.x/a", 20),
            Ok(several(&["https://e.x/a", "https://e.x/b"]))
        );
    }

    #[test]
    fn one_link_in_all_is_one_link() {
        assert_eq!(
            carried(b"links=https://e.x/a%0Ahttps://e.x/a", 20),
            Ok(Carried::One(b"https://e.x/a".to_vec()))
        );
        assert_eq!(
            carried(b"link=https://e.x/a&link=https://e.x/a", 20),
            Ok(Carried::One(b"https://e.x/a".to_vec()))
        );
    }

    #[test]
    fn refusals() {
        let code = |source: &[u8], max| carried(source, max).unwrap_err().code();
        assert_eq!(code(b"links=%0A+%0A", 20), "missing_link");
        assert_eq!(code(b"links=%zz", 20), "bad_encoding");
        assert_eq!(
            code(b"link=https://e.x/a&link=https://e.x/b", 1),
            "repeated_link"
        );
        let many: String = (0..21).map(|i| format!("https://e.x/{i}%0A")).collect();
        let p = carried(format!("links={many}").as_bytes(), 20).unwrap_err();
        assert_eq!((p.status, p.code()), (400, "too_many_links"));
        assert!(p.detail.contains("at most 20"), "{}", p.detail);
        // Duplicates do not count towards the limit.
        let same: String = (0..30)
            .map(|i| format!("https://e.x/{}%0A", i % 3))
            .collect();
        assert!(carried(format!("links={same}").as_bytes(), 3).is_ok());
    }
}
