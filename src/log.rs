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

/// Makes one log line: `resolve: LEVEL: message`, with `secrets` replaced by `***`, control
/// characters escaped and the length bounded.
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
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
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
}
