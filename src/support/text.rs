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
