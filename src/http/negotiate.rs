//! Which body format a client gets, from its `Accept` header: JSON for programs, HTML for
//! browsers, plain text for everything else.

/// The formats an answer can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Html,
    Json,
}

const TYPES: [(Format, &str, &str); 4] = [
    (Format::Json, "application", "json"),
    (Format::Json, "application", "problem+json"),
    (Format::Html, "text", "html"),
    (Format::Text, "text", "plain"),
];

/// Picks the format the client prefers. Ties go to the type the client named outright; a
/// client that names nothing we make (`*/*`, or no header) gets plain text.
pub fn from_accept(accept: Option<&[u8]>) -> Format {
    let Some(accept) = accept else {
        return Format::Text;
    };
    let accept = String::from_utf8_lossy(accept);
    // (q in thousandths, specificity) per format, from the most specific matching range.
    let mut best: [(u16, u8); 3] = [(0, 0); 3];
    let mut seen: [u8; 3] = [0; 3];
    for range in accept.split(',').take(32) {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let Some((ty, sub)) = media.split_once('/') else {
            continue;
        };
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").or(p.trim().strip_prefix("Q=")))
            .next()
            .map_or(1000, parse_q);
        for (format, t, s) in TYPES {
            let specificity = match (ty, sub) {
                (a, b) if a == t && b == s => 2,
                (a, "*") if a == t => 1,
                ("*", "*") => 0,
                _ => continue,
            };
            let i = format as usize;
            if specificity + 1 > seen[i] || (specificity + 1 == seen[i] && q > best[i].0) {
                seen[i] = specificity + 1;
                best[i] = (q, specificity);
            }
        }
    }
    let rank = |f: Format| {
        let (q, spec) = best[f as usize];
        // Among equals, programs asking for JSON beside other types get JSON; a wildcard alone
        // means plain text.
        let preference = match (f, spec) {
            (Format::Text, 0) => 3,
            (Format::Json, _) => 2,
            (Format::Html, _) => 1,
            (Format::Text, _) => 0,
        };
        (q, spec, preference)
    };
    let winner = [Format::Json, Format::Html, Format::Text]
        .into_iter()
        .max_by_key(|f| rank(*f))
        .unwrap_or(Format::Text);
    if best[winner as usize].0 == 0 {
        Format::Text
    } else {
        winner
    }
}

fn parse_q(s: &str) -> u16 {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    match int {
        "1" => 1000,
        "0" => {
            let digits: String = frac.chars().take(3).collect();
            if digits.is_empty() {
                return 0;
            }
            if !digits.bytes().all(|b| b.is_ascii_digit()) {
                return 0;
            }
            let scale = [100, 10, 1][digits.len() - 1];
            digits.parse::<u16>().map_or(0, |v| v * scale)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(accept: &str) -> Format {
        from_accept(Some(accept.as_bytes()))
    }

    #[test]
    fn common_clients() {
        assert_eq!(from_accept(None), Format::Text);
        assert_eq!(f("*/*"), Format::Text, "curl");
        assert_eq!(f(""), Format::Text);
        assert_eq!(
            f("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
            Format::Html,
            "a browser"
        );
        assert_eq!(
            f("application/json, text/plain, */*"),
            Format::Json,
            "axios"
        );
        let (json, text) = (Format::Json, Format::Text);
        for (accept, format) in [
            ("application/json", json),
            ("application/problem+json", json),
            ("text/plain", text),
            ("Application/JSON", json),
        ] {
            assert_eq!(f(accept), format, "{accept}");
        }
    }

    #[test]
    fn quality_values_decide() {
        use Format::{Html, Json, Text};
        let decided = [
            ("application/json;q=0.5, text/html", Html),
            ("text/html;q=0.1, application/json", Json),
            ("application/json;q=0", Text),
            ("text/plain;q=0.9, application/json;q=0.8", Text),
            ("application/json;q=0.001", Json),
        ];
        for (accept, format) in decided {
            assert_eq!(f(accept), format, "{accept}");
        }
    }

    #[test]
    fn garbage_is_harmless() {
        for junk in [
            ";;;",
            ",,,",
            "q=1",
            "a/b/c",
            "\u{0}/\u{0}",
            "text/html;q=2",
            "*/json",
        ] {
            let _ = f(junk);
        }
        assert_eq!(from_accept(Some(b"\xff\xfe/\xff")), Format::Text);
        assert_eq!(f("text/html;q=abc"), Format::Text);
    }
}
