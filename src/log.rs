//! The owner's log: one line per event on standard error, which Apache writes to its error_log.
//! Every line is made safe on the way out: secrets masked, control characters escaped, bounded.

use std::cell::RefCell;
use std::io::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The owner must act (credentials refused, store failing).
    Error,
    /// Something was refused or degraded.
    Warn,
    /// Worth knowing.
    Notice,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Notice => "notice",
        }
    }
}

/// Where log lines go.
pub trait Log {
    fn line(&self, level: Level, message: &str);
}

/// Longest line written, in bytes; the rest is cut.
const MAX_LINE: usize = 1000;

/// Characters that are not controls to Rust but act like them where a log is read: the line and
/// paragraph separators (shown as line breaks, so they could forge a line) and the direction
/// marks, embeddings, overrides and isolates (which reorder what is shown, so they could hide or
/// fake a value).
fn acts_like_control(c: char) -> bool {
    matches!(
        c,
        '\u{2028}'..='\u{2029}'
            | '\u{200e}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
            | '\u{061c}'
    )
}

/// Makes one log line: `resolve: LEVEL: message`, with `secrets` replaced by `***`, control
/// characters (and those that act like them) escaped and the length bounded.
pub fn format_line(level: Level, message: &str, secrets: &[String]) -> String {
    let mut masked = message.to_owned();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        masked = masked.replace(s.as_str(), "***");
    }
    let mut out = format!("resolve: {}: ", level.as_str());
    for c in masked.chars() {
        if out.len() >= MAX_LINE {
            out.push_str("...");
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push(' '),
            c if c.is_control() || acts_like_control(c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('\n');
    out
}

/// Writes to standard error.
#[derive(Debug, Default)]
pub struct StderrLog {
    secrets: Vec<String>,
}

impl StderrLog {
    pub fn new(secrets: Vec<String>) -> StderrLog {
        StderrLog { secrets }
    }
}

impl Log for StderrLog {
    fn line(&self, level: Level, message: &str) {
        let line = format_line(level, message, &self.secrets);
        // One write per line, so lines of concurrent processes do not interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// Keeps lines in memory, for tests.
#[derive(Debug, Default)]
pub struct MemoryLog {
    pub lines: RefCell<Vec<String>>,
    pub secrets: Vec<String>,
}

impl Log for MemoryLog {
    fn line(&self, level: Level, message: &str) {
        self.lines
            .borrow_mut()
            .push(format_line(level, message, &self.secrets));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_safe() {
        let line = format_line(
            Level::Warn,
            "bad link \"a\r\nresolve: error: forged\u{1b}[31m\" token=abc123 again abc123",
            &["abc123".to_owned(), String::new()],
        );
        assert_eq!(
            line,
            "resolve: warn: bad link \"a\\r\\nresolve: error: forged\\u{1b}[31m\" token=*** again ***\n"
        );
        let long = format_line(Level::Notice, &"x".repeat(5000), &[]);
        assert!(long.len() < MAX_LINE + 10);
        assert_eq!(long.matches('\n').count(), 1);
    }

    #[test]
    fn unicode_separators_and_direction_controls_are_escaped() {
        for (c, escaped) in [
            ('\u{2028}', "\\u{2028}"),
            ('\u{2029}', "\\u{2029}"),
            ('\u{200e}', "\\u{200e}"),
            ('\u{200f}', "\\u{200f}"),
            ('\u{061c}', "\\u{61c}"),
            ('\u{202a}', "\\u{202a}"),
            ('\u{202b}', "\\u{202b}"),
            ('\u{202c}', "\\u{202c}"),
            ('\u{202d}', "\\u{202d}"),
            ('\u{202e}', "\\u{202e}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2067}', "\\u{2067}"),
            ('\u{2068}', "\\u{2068}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{85}', "\\u{85}"),
        ] {
            let line = format_line(
                Level::Warn,
                &format!("192.0.2.1{c}resolve: error: forged"),
                &[],
            );
            assert_eq!(
                line,
                format!("resolve: warn: 192.0.2.1{escaped}resolve: error: forged\n"),
                "U+{:04X}",
                u32::from(c)
            );
            assert!(!line.contains(c));
        }
    }

    #[test]
    fn other_text_is_kept() {
        // Neighbours of the escaped ranges, letters of right-to-left scripts, emoji.
        let text = "\u{2027}\u{202f}\u{2065}\u{206a}\u{200d} שלום مرحبا é 🙂";
        assert_eq!(
            format_line(Level::Notice, text, &[]),
            format!("resolve: notice: {text}\n")
        );
    }
}
