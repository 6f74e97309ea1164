//! Mistakes that text editors and word processors put into JSON, named for what they are at
//! the place they are: a byte order mark at the start, curly quotes where JSON needs straight
//! ones, and a comma after the last item. Looked for only once the JSON parser has failed, so
//! a valid file is never second-guessed; pure, it reads the text and never fails.

use crate::config::error::{ConfigError, err};

/// Quotes a word processor or a phone keyboard writes instead of `"`.
const CURLY_QUOTES: [char; 8] = [
    '\u{201C}', '\u{201D}', '\u{201E}', '\u{201F}', '\u{2018}', '\u{2019}', '\u{00AB}', '\u{00BB}',
];

/// The editor mistake behind a parse error at `line` and `column` (1-based, as the parser
/// says), if there is one.
pub fn mistake(text: &str, line: usize, column: usize) -> Option<ConfigError> {
    if text.starts_with('\u{FEFF}') {
        return Some(at(
            1,
            1,
            "the file starts with a byte order mark (BOM), which JSON does not allow: save it \
             as UTF-8 without BOM (in Notepad: Save as, Encoding \"UTF-8\", not \"UTF-8 with \
             BOM\"), or copy its text into cPanel's File Manager editor and save it there",
        ));
    }
    if let Some((l, c, q)) = curly_quote(text, line) {
        return Some(at(
            l,
            c,
            &format!(
                "a curly quote {q} where JSON needs a straight double quote \" (a word \
                 processor or a phone keyboard writes them): write every name and text \
                 between straight quotes, \"like this\""
            ),
        ));
    }
    if let Some((l, c)) = trailing_comma(text, line, column) {
        return Some(at(
            l,
            c,
            "a comma after the last item of a list or object, which JSON does not allow: \
             remove this comma",
        ));
    }
    None
}

fn at(line: usize, column: usize, message: &str) -> ConfigError {
    err(format!("line {line} column {column}"), message)
}

/// The first curly quote outside a JSON string, at or before the parser's line; failing that,
/// the first on that line that closes something, before a `:`, `,`, `}` or `]` (a name opened
/// with `"` and closed with `”` hides the rest of the line inside a string, while `Ann’s` in a
/// text is the owner's own).
fn curly_quote(text: &str, error_line: usize) -> Option<(usize, usize, char)> {
    let mut in_string = false;
    let mut escaped = false;
    for (line_no, line) in text.split('\n').enumerate().map(|(i, l)| (i + 1, l)) {
        if line_no > error_line {
            break;
        }
        for (col, ch) in line.chars().enumerate() {
            if in_string {
                match ch {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => in_string = false,
                    _ => {}
                }
            } else if ch == '"' {
                in_string = true;
            } else if CURLY_QUOTES.contains(&ch) {
                return Some((line_no, col + 1, ch));
            }
        }
    }
    let line = text.split('\n').nth(error_line.checked_sub(1)?)?;
    let chars: Vec<char> = line.chars().collect();
    (0..chars.len()).find_map(|i| {
        let closes = chars[i + 1..]
            .iter()
            .find(|c| !c.is_whitespace())
            .is_none_or(|c| matches!(c, ':' | ',' | '}' | ']'));
        (CURLY_QUOTES.contains(&chars[i]) && closes).then_some((error_line, i + 1, chars[i]))
    })
}

/// Where the comma is when the parser stopped at a `}` or `]` that follows one: the parser
/// names the closing bracket, often a line later.
fn trailing_comma(text: &str, line: usize, column: usize) -> Option<(usize, usize)> {
    let offset = offset_of(text, line, column)?;
    let rest = text[offset..].trim_start();
    let before = text[..offset].trim_end();
    let closes = rest.starts_with(['}', ']']) || before.ends_with(['}', ']']);
    let before = before.strip_suffix(['}', ']']).unwrap_or(before).trim_end();
    if !closes || !before.ends_with(',') {
        return None;
    }
    let comma = before.len() - 1;
    let head = &text[..comma];
    let l = head.matches('\n').count() + 1;
    let c = head.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    Some((l, c))
}

/// The byte offset of a 1-based line and column (the parser's column counts bytes; 0 is the
/// line's start).
fn offset_of(text: &str, line: usize, column: usize) -> Option<usize> {
    let mut start = 0;
    for _ in 1..line {
        start += text[start..].find('\n')? + 1;
    }
    let end = text[start..].find('\n').map_or(text.len(), |n| start + n);
    let mut at = (start + column.saturating_sub(1)).min(end);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    /// The message a configuration's text gets, as the log shows it.
    fn said(text: &str) -> String {
        Config::from_json(text, Path::new("/home/u/resolve"))
            .unwrap_err()
            .to_string()
    }

    /// The message for `text` names the place of the mistake first, `at` ("line L column C"),
    /// then says each of `words`.
    fn assert_named(text: &str, at: &str, words: &[&str]) {
        let m = said(text);
        assert!(m.starts_with(&format!("{at}: ")), "{m}");
        for w in words {
            assert!(m.contains(w), "{w:?} in {m}");
        }
    }

    #[test]
    fn a_byte_order_mark_is_named_at_the_start() {
        assert_named(
            "\u{FEFF}{\"provider\": {\"kind\": \"echo\"}}\n",
            "line 1 column 1",
            &["byte order mark (BOM)", "UTF-8 without BOM"],
        );
    }

    #[test]
    fn curly_quotes_are_named_where_they_are() {
        assert_named(
            "{\n  \"provider\": {\"kind\": \u{201C}echo\u{201D}}\n}\n",
            "line 2 column 24",
            &["curly quote \u{201C}"],
        );
        // A name opened straight and closed curly.
        assert_named(
            "{\n  \"provider\u{201D}: {\"kind\": \"echo\"}\n}\n",
            "line 2 column 12",
            &["curly quote \u{201D}"],
        );
        // Single curly quotes, and a whole file of them.
        assert_named("{\u{2018}provider\u{2019}: {}}", "line 1 column 2", &[]);
    }

    #[test]
    fn curly_quotes_inside_a_text_are_the_owners_own() {
        let c = Config::from_json(
            "{\"page\": {\"site_name\": \"Ann\u{2019}s \u{201C}links\u{201D}\"}}",
            Path::new("/home/u/resolve"),
        );
        assert!(c.is_ok(), "{c:?}");
        // And do not hide another mistake.
        for text in [
            "{\"page\": {\"site_name\": \"\u{201C}x\u{201D}\"}, \"rules\": 3 4}",
            "{\"page\": {\"site_name\": \"Ann\u{2019}s\"}, \"rules\": 3}",
        ] {
            let m = said(text);
            assert!(!m.contains("curly"), "{m}");
        }
    }

    #[test]
    fn a_trailing_comma_is_named_on_its_own_line() {
        assert_named(
            "{\n  \"provider\": {\"kind\": \"echo\"},\n  \"rules\": [\n    {\"name\": \"ip\", \"key\": \"ip\", \"limit\": 5, \"window_secs\": 60},\n  ]\n}\n",
            "line 4 column 63",
            &["comma after the last item"],
        );
        assert_named(
            "{\n  \"provider\": {\"kind\": \"echo\"},\n}\n",
            "line 2 column 31",
            &[],
        );
    }

    #[test]
    fn other_syntax_errors_keep_the_parsers_words() {
        for text in [
            "{\"rules\": [\n}\n",
            "{\"a\" 1}",
            "",
            "{,}",
            "[1,,2]",
            "\u{201C}",
        ] {
            let m = said(text);
            assert!(!m.contains("comma after the last"), "{text:?}: {m}");
        }
        assert!(said("\u{201C}").contains("curly"));
        // Nothing panics on text cut anywhere.
        let text = "\u{FEFF}{\n \"a\u{201D}: [1,\n ],\u{2019} }";
        for end in (0..=text.len()).filter(|&i| text.is_char_boundary(i)) {
            for line in 0..5 {
                for column in 0..12 {
                    let _ = mistake(&text[..end], line, column);
                }
            }
        }
    }
}
