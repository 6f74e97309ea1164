//! Text from outside made safe to show and log on one line.

/// `text` on one line: control characters (line breaks, tabs) as spaces, at most `max_chars`
/// characters, without the spaces at either end.
pub fn one_line(text: &str, max_chars: usize) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max_chars)
        .collect::<String>()
        .trim()
        .to_owned()
}

/// Whether `text` holds a control character (`char::is_control`: U+0000 to U+001F and U+007F
/// to U+009F), read as bytes: the configuration's long texts (a preset's advice) are checked at
/// every start, where decoding them character by character cost a CGI request 3% of its
/// instructions. In UTF-8 the first range and U+007F are single bytes, the second U+0080 to
/// U+009F is 0xC2 followed by 0x80 to 0x9F.
pub fn has_control(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        b < 0x20
            || b == 0x7f
            || (b == 0xc2 && bytes.get(i + 1).is_some_and(|n| (0x80..=0x9f).contains(n)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_control_is_any_char_is_control() {
        let mut texts: Vec<String> = (0..0x800u32)
            .filter_map(char::from_u32)
            .map(|c| format!("ab{c}\u{e9}"))
            .collect();
        texts.extend(
            [
                "",
                "plain",
                "caf\u{e9} \u{a0}",
                "\u{85}",
                "\u{2028}",
                "\u{1f600}",
            ]
            .map(String::from),
        );
        for text in &texts {
            assert_eq!(
                has_control(text),
                text.chars().any(char::is_control),
                "{text:?}"
            );
        }
    }
}
