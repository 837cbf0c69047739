//! Scheme files: reads DAMOS schemes written by people into the model of
//! `udamon-core`, and writes them back in one normalised form.
//!
//! Role: this crate only turns text into [`Damos`] values and back. The
//! model ([`Damos`], [`AccessPattern`](udamon_core::schemes::AccessPattern),
//! quotas, watermarks, filters) comes from `udamon-core`, which applies the
//! schemes; the `udamon` binary calls [`parse_file`] for `--schemes FILE`,
//! prints [`Error`]s as they are (one line, exit code 2) and shows
//! [`describe`] lines and [`to_toml`] output to the user.
//!
//! Three ways to write schemes are read:
//!
//! - the one-line text form of the DAMON papers and patch sets
//!   (`4K max 0 0 5s max pageout`), every example of which parses;
//! - a structured form in TOML (`[[scheme]]` tables) or the same in JSON,
//!   for what a line cannot say: quotas and goals, watermarks, filters,
//!   apply interval, target node;
//! - damo's JSON scheme layout (`damo args damon --format json`, kdamonds
//!   dumps), where it maps onto the model.
//!
//! Sizes are powers of 1024 whatever their spelling, access frequencies are
//! percentages of the maximum access count, ages are times; errors point at
//! the line and column of the offending value. `docs/schemes.md` describes
//! every format, the unit rules and the damo mapping.
//!
//! ```
//! use udamon_scheme_file::{describe, parse, to_toml, Format};
//!
//! // the proactive reclamation scheme of the DAMON v24 evaluation
//! let schemes = parse("4K max 0 0 5s max pageout  # prcl\n", "prcl.txt", None)?;
//! assert_eq!(schemes[0].pattern.min_sz, 4096);
//! assert_eq!(schemes[0].pattern.min_age_us, 5_000_000);
//! assert_eq!(describe(&schemes[0]), "pageout regions of 4.0 KiB.. with access 0%..0% idle for 5s..");
//!
//! // the normalised form reads back to the same schemes
//! let toml = to_toml(&schemes);
//! assert!(toml.contains(r#"access_pattern = { sz = ["4K", "max"], freq = ["0%", "0%"], age = ["5s", "max"] }"#));
//! assert_eq!(parse(&toml, "prcl.toml", Some(Format::Toml))?, schemes);
//!
//! // errors name the place, the value and what would do
//! let err = parse("4Q max 0 0 5s max pageout", "prcl.txt", None).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     r#"schemes prcl.txt line 1, column 1: bad size "4Q" (expected a size like 4K, 2M, 2MB, min or max)"#
//! );
//! # Ok::<(), udamon_scheme_file::Error>(())
//! ```

use std::path::Path;

use udamon_core::schemes::Damos;

mod damo;
mod damo_out;
mod emit;
mod error;
mod fields;
mod reader;
mod structured;
mod text;
mod tree;
mod units;

pub use damo_out::NotForDamo;
pub use error::Error;

/// The ways a scheme file can be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// One scheme per line: `<min_sz> <max_sz> <min_freq> <max_freq> <min_age> <max_age> <action>`.
    Text,
    /// `[[scheme]]` tables.
    Toml,
    /// `{"schemes": [...]}`, a bare array of schemes, or a damo dump.
    Json,
}

/// Parses schemes written in `format`, or in the format [`detect`]ed.
/// `origin` names the source in errors (a file name, `--schemes`).
pub fn parse(src: &str, origin: &str, format: Option<Format>) -> Result<Vec<Damos>, Error> {
    let src = src.strip_prefix('\u{feff}').unwrap_or(src);
    let s = error::Src::new(src, origin);
    match format.unwrap_or_else(|| detect(src)) {
        Format::Text => text::parse(&s),
        Format::Toml => reader::Reader { src: s }.schemes(&tree::from_toml(&s)?),
        Format::Json => reader::Reader { src: s }.schemes(&tree::from_json(&s)?),
    }
}

/// Reads and parses a file: `.json` and `.toml` by their extension, any
/// other by [`detect`]. A file that cannot be read is a [`Error`] at
/// line 0.
pub fn parse_file(path: &Path) -> Result<Vec<Damos>, Error> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Error {
        origin: origin.clone(),
        line: 0,
        column: 0,
        token: String::new(),
        expected: String::new(),
        msg: format!("cannot read the file: {}", e.to_string().to_lowercase()),
    })?;
    let format = match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("json") => Some(Format::Json),
        Some("toml") => Some(Format::Toml),
        _ => None,
    };
    parse(&text, &origin, format)
}

/// Guesses the format from the first line that is not blank or a `#`
/// comment: `{`, or `[` not opening a TOML table header, is JSON; a TOML
/// table header (`[[scheme]]`, `[scheme.quota]`) is TOML; otherwise TOML if
/// any line has `key = value`, else the text form.
pub fn detect(src: &str) -> Format {
    let mut lines = src
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'));
    let Some(first) = lines.next() else {
        return Format::Text;
    };
    if first.starts_with('{') {
        return Format::Json;
    }
    if first.starts_with('[') {
        return if is_toml_header(first) {
            Format::Toml
        } else {
            Format::Json
        };
    }
    let assigns = |l: &str| l.split('#').next().unwrap_or("").contains('=');
    if assigns(first) || lines.any(|l| is_toml_header(l) || assigns(l)) {
        Format::Toml
    } else {
        Format::Text
    }
}

/// `[name]`, `[[name]]`, `[a.b]`, with an optional trailing comment.
fn is_toml_header(line: &str) -> bool {
    let line = line.split('#').next().unwrap_or("").trim_end();
    let inner = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]"));
    let inner = inner.or_else(|| line.strip_prefix('[').and_then(|l| l.strip_suffix(']')));
    inner.is_some_and(|n| {
        let n = n.trim();
        n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ' '))
    })
}

/// The normalised structured form as TOML: one `[[scheme]]` table per
/// scheme, defaults left out, sizes and times in the largest unit that is
/// exact. `parse(&to_toml(x), _, Some(Format::Toml))` gives `x` back for
/// every scheme `parse` accepts.
pub fn to_toml(schemes: &[Damos]) -> String {
    emit::to_toml(schemes)
}

/// The normalised structured form as JSON, `{"schemes": [...]}`, mirroring
/// [`to_toml`] key for key.
pub fn to_json(schemes: &[Damos]) -> serde_json::Value {
    emit::to_json(schemes)
}

/// The schemes in damo's JSON layout: the list `damo start --schemes
/// FILE` reads. Fails on what only udamon's engine does (`mlock`, the
/// `fast` tuner, the `rss_bp` and `refault_rate` goals).
pub fn to_damo(schemes: &[Damos]) -> Result<serde_json::Value, NotForDamo> {
    damo_out::to_damo(schemes)
}

/// One line for people, e.g. `pageout regions of 4.0 KiB.. with access
/// 0%..0% idle for 2m.. (quota 128 MiB per 1s)`.
pub fn describe(s: &Damos) -> String {
    emit::describe(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection() {
        let cases = [
            ("4K max 0 0 5s max pageout", Format::Text),
            ("# prcl\n\n4K max 0 0 5s max pageout", Format::Text),
            ("", Format::Text),
            ("{\"schemes\": []}", Format::Json),
            ("  [ {\"action\": \"stat\"} ]", Format::Json),
            ("[]", Format::Json),
            ("[[scheme]]\naction = \"stat\"", Format::Toml),
            ("# c\n[[scheme]] # first\naction = \"stat\"", Format::Toml),
            ("[scheme.quota]\nsize = \"1M\"", Format::Toml),
            ("scheme = [{ action = \"stat\" }]", Format::Toml),
        ];
        for (src, want) in cases {
            assert_eq!(detect(src), want, "{src:?}");
        }
    }
}
