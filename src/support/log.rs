//! The owner's log: one line per event on standard error, which Apache writes to its error_log.
//! Every line is made safe on the way out: secrets masked, control characters escaped, bounded.
//! Each carries, after its message, the time (UTC, by the program's own clock: mod_cgid adds
//! none) and the configuration file the process read: a [`Context`] each log holds, given by
//! whoever builds it (the gateway or command that located the configuration); nothing here is
//! kept for the whole process.

use std::cell::RefCell;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

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
    let mut out = format!("resolve: {}: ", level.as_str());
    push_safe(&mut out, &masked(message, secrets), MAX_LINE);
    out.push('\n');
    out
}

/// [`format_line`] with the line's context after the message, in brackets: the time and the
/// configuration file. The message is cut to leave room for it; the context is made safe too.
pub fn format_line_in(level: Level, message: &str, context: &str, secrets: &[String]) -> String {
    let mut out = format!("resolve: {}: ", level.as_str());
    let room = MAX_LINE.saturating_sub(context.len().min(MAX_LINE / 2));
    push_safe(&mut out, &masked(message, secrets), room);
    out.push_str(" [");
    let limit = out.len() + MAX_LINE / 2;
    push_safe(&mut out, &masked(context, secrets), limit);
    out.push_str("]\n");
    out
}

fn masked(text: &str, secrets: &[String]) -> String {
    let mut masked = text.to_owned();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        masked = masked.replace(s.as_str(), "***");
    }
    masked
}

/// Appends `text` to `out`, control characters escaped, until `out` is `limit` bytes long.
fn push_safe(out: &mut String, text: &str, limit: usize) {
    for c in text.chars() {
        if out.len() >= limit {
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
}

/// What a line carries after its message: the time, written by the function the program
/// gives (the calendar is in a layer above this one), and the configuration file read, once
/// the gateway or command has located it. Held by each log, never by the process.
#[derive(Debug, Clone)]
pub struct Context {
    time: fn(u64) -> String,
    configuration: Option<Arc<str>>,
}

impl Default for Context {
    /// The time as seconds, and no configuration named.
    fn default() -> Context {
        Context::new(seconds_since_1970)
    }
}

fn seconds_since_1970(ms: u64) -> String {
    format!("{} s since 1970 UTC", ms / 1000)
}

impl Context {
    /// Lines whose time `time` writes (milliseconds since 1970 to UTC text).
    pub fn new(time: fn(u64) -> String) -> Context {
        Context {
            time,
            configuration: None,
        }
    }

    /// The same, naming the configuration file the lines were written under.
    pub fn naming(self, described: String) -> Context {
        Context {
            configuration: Some(described.into()),
            ..self
        }
    }

    /// The context of a line written at `ms`: the time, and the configuration file when known.
    pub fn at(&self, ms: u64) -> String {
        let time = (self.time)(ms);
        match &self.configuration {
            Some(file) => format!("{time}; configuration {file}"),
            None => time,
        }
    }

    /// The context of a line written now.
    fn now(&self) -> String {
        let ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        self.at(ms)
    }
}

/// Writes to standard error, each line with its [`Context`].
#[derive(Debug, Default, Clone)]
pub struct StderrLog {
    context: Context,
    /// The secrets to mask, as the configuration holds them.
    secrets: Vec<String>,
    /// Every form of them ([`crate::support::secret::all_forms`]), made at the first line: most CGI
    /// requests log nothing.
    forms: OnceLock<Vec<String>>,
}

impl StderrLog {
    /// A log whose lines carry `context`, masking nothing.
    pub fn new(context: Context) -> StderrLog {
        StderrLog {
            context,
            secrets: Vec::new(),
            forms: OnceLock::new(),
        }
    }

    /// The same log, masking `secrets` in every form.
    pub fn masking(self, secrets: Vec<String>) -> StderrLog {
        StderrLog {
            secrets,
            forms: OnceLock::new(),
            ..self
        }
    }

    /// What its lines carry after their message.
    pub fn context(&self) -> &Context {
        &self.context
    }
}

impl Log for StderrLog {
    fn line(&self, level: Level, message: &str) {
        let forms = self
            .forms
            .get_or_init(|| crate::support::secret::all_forms(&self.secrets));
        let line = format_line_in(level, message, &self.context.now(), forms);
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

/// True when nothing was logged under `stamp` within `interval`: the caller logs, and the stamp
/// (a file's modification time) moves to now. Every process shares the stamp, so a problem
/// that every request meets is logged once per interval, not once per request. When the stamp
/// cannot be kept (no directory, no write access, not a regular file), the answer is true: a
/// line too many beats a line lost.
pub fn once_in(stamp: &Path, interval: Duration) -> bool {
    stamp_says(stamp, interval).unwrap_or(true)
}

/// [`once_in`] for a stamp in the data directory, which is made (mode 700, one level only)
/// when it is not there yet: a MySQL or Redis store's data directory is made on first use.
/// Nothing is made for other stamps (beside a configuration file that is missing, say).
pub fn once_in_data_dir(stamp: &Path, interval: Duration) -> bool {
    match stamp_says(stamp, interval) {
        Ok(answer) => answer,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            use std::os::unix::fs::DirBuilderExt;
            if let Some(dir) = stamp.parent() {
                // Another process may make it first: either way it is there now.
                let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
            }
            stamp_says(stamp, interval).unwrap_or(true)
        }
        Err(_) => true,
    }
}

/// [`once_in`] where the stamp's directory exists; the error when it could not be opened.
fn stamp_says(stamp: &Path, interval: Duration) -> std::io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let open = |create: bool| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(create)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(stamp)
    };
    let file = match open(true) {
        // The first time: its time stamp is now.
        Ok(_) => return Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => open(false)?,
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => {}
        // Another process is deciding right now: it logs, if anyone does.
        Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
        Err(_) => return Ok(true),
    }
    let now = SystemTime::now();
    let age = file
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|at| now.duration_since(at).ok());
    match age {
        Some(age) if age < interval => Ok(false),
        _ => {
            let _ = file.set_modified(now);
            Ok(true)
        }
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
    fn the_context_follows_the_message_and_is_made_safe_too() {
        let line = format_line_in(
            Level::Error,
            "store failed: tok1",
            "2026-12-03T08:00:00Z; configuration /home/u/resolve/config.json\nforged tok1",
            &["tok1".to_owned()],
        );
        assert_eq!(
            line,
            "resolve: error: store failed: *** [2026-12-03T08:00:00Z; configuration \
             /home/u/resolve/config.json\\nforged ***]\n"
        );
        // A long message is cut before the context, which is always there.
        let long = format_line_in(Level::Notice, &"x".repeat(5000), "the time", &[]);
        assert!(long.ends_with("... [the time]\n"), "{long}");
        assert!(long.len() < MAX_LINE + 30);
    }

    #[test]
    fn the_context_is_the_time_as_written_and_the_configuration_named() {
        fn iso(ms: u64) -> String {
            format!("T{ms}Z")
        }
        assert_eq!(Context::default().at(1_500), "1 s since 1970 UTC");
        assert_eq!(Context::new(iso).at(1_500), "T1500Z");
        let named = Context::new(iso).naming("/home/u/resolve/config.json".to_owned());
        assert_eq!(
            named.at(7),
            "T7Z; configuration /home/u/resolve/config.json"
        );
        // Each log holds its own: another log's context is not this one's.
        let log = StderrLog::new(named.clone()).masking(vec!["tok1".to_owned()]);
        assert_eq!(log.context().at(7), named.at(7));
        assert_eq!(StderrLog::default().context().at(7), "0 s since 1970 UTC");
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

    #[test]
    fn once_in_an_interval_across_calls() {
        let dir = std::env::temp_dir().join(format!("resolve-once-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stamp = dir.join("stamp");
        let _ = std::fs::remove_file(&stamp);
        let minute = Duration::from_secs(60);
        assert!(once_in(&stamp, minute), "the first time");
        assert!(!once_in(&stamp, minute), "again at once");
        assert!(!once_in(&stamp, minute));
        // A minute later (the stamp moved back), once more, and then not again.
        let file = std::fs::File::options().write(true).open(&stamp).unwrap();
        file.set_modified(SystemTime::now() - Duration::from_secs(61))
            .unwrap();
        assert!(once_in(&stamp, minute));
        assert!(!once_in(&stamp, minute));
        // A directory that is not there yet (a MySQL or Redis store's data directory) is
        // made: once, then not again.
        let missing = dir.join("missing");
        assert!(once_in(&missing.join("stamp"), minute));
        assert!(
            once_in(&missing.join("stamp"), minute),
            "not made for a plain stamp"
        );
        assert!(!missing.exists());
        assert!(
            once_in_data_dir(&missing.join("stamp"), minute),
            "the first time"
        );
        assert!(!once_in_data_dir(&missing.join("stamp"), minute));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&missing).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // No place to keep a stamp (two levels missing; a file where the directory should
        // be): every time.
        for stamp in [dir.join("a/b/stamp"), stamp.join("stamp")] {
            assert!(once_in_data_dir(&stamp, minute), "{}", stamp.display());
            assert!(once_in_data_dir(&stamp, minute), "{}", stamp.display());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
