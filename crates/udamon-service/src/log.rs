//! Structured logs: one logfmt line per event on stderr
//! (`ts=... level=info job=db msg="..."`), which journald stores as it is.

use std::sync::atomic::{AtomicU8, Ordering};

/// How much is logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        [Level::Error, Level::Warn, Level::Info, Level::Debug]
            .into_iter()
            .find(|l| l.name() == s)
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

pub fn set_level(l: Level) {
    LEVEL.store(l as u8, Ordering::Relaxed);
}

pub fn enabled(l: Level) -> bool {
    l as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// A value as logfmt writes it: bare when it has no blank, quote, `=` or
/// control character; otherwise quoted, with `\\`, `"`, newlines, tabs and
/// every other control character escaped, so that no value (a monitored
/// program's path, a config's error) can end the line or forge another.
fn quote(v: &str) -> String {
    let plain = !v.is_empty()
        && !v.contains(|c: char| c.is_whitespace() || c.is_control() || c == '"' || c == '=');
    if plain {
        return v.to_string();
    }
    let mut out = String::with_capacity(v.len() + 2);
    out.push('"');
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The UTC time as RFC 3339 (seconds, with milliseconds).
fn now_rfc3339() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Logs `msg` with `fields` (key, value) at `level`.
pub fn log(level: Level, job: Option<&str>, msg: &str, fields: &[(&str, String)]) {
    if !enabled(level) {
        return;
    }
    let mut line = format!("ts={} level={}", now_rfc3339(), level.name());
    if let Some(j) = job {
        line.push_str(&format!(" job={}", quote(j)));
    }
    line.push_str(&format!(" msg={}", quote(msg)));
    for (k, v) in fields {
        line.push_str(&format!(" {k}={}", quote(v)));
    }
    eprintln!("{line}");
}

pub fn info(job: Option<&str>, msg: &str) {
    log(Level::Info, job, msg, &[]);
}

pub fn warn(job: Option<&str>, msg: &str) {
    log(Level::Warn, job, msg, &[]);
}

pub fn error(job: Option<&str>, msg: &str) {
    log(Level::Error, job, msg, &[]);
}

pub fn debug(job: Option<&str>, msg: &str) {
    log(Level::Debug, job, msg, &[]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_only_when_needed() {
        assert_eq!(quote("db"), "db");
        assert_eq!(quote("a b"), "\"a b\"");
        assert_eq!(quote("say \"x\""), "\"say \\\"x\\\"\"");
        assert_eq!(quote(""), "\"\"");
    }

    #[test]
    fn no_value_can_end_the_line_or_forge_a_field() {
        let forged = "x\nts=2026-01-01T00:00:00.000Z level=info msg=forged";
        let q = quote(forged);
        assert!(!q.contains('\n'), "{q}");
        assert_eq!(
            q,
            "\"x\\nts=2026-01-01T00:00:00.000Z level=info msg=forged\""
        );
        assert_eq!(quote("a\rb"), "\"a\\rb\"");
        assert_eq!(quote("bell\u{7}"), "\"bell\\u{0007}\"");
        assert_eq!(quote("esc\u{1b}[31m"), "\"esc\\u{001b}[31m\"");
        assert_eq!(quote("back\\slash x"), "\"back\\\\slash x\"");
        for v in ["a\u{0}b", "\u{85}next", "tab\there"] {
            assert!(!quote(v).chars().any(char::is_control), "{v:?}");
        }
    }

    #[test]
    fn the_time_is_rfc3339() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'), "{t}");
    }
}
