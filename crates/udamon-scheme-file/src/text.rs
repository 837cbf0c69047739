//! The one-line text form of the DAMON papers and patch sets:
//!
//! ```text
//! <min_sz> <max_sz> <min_freq> <max_freq> <min_age> <max_age> <action>
//! <min_sz> <max_sz> <min_freq> <max_freq> <duration> <action>      (older)
//! ```
//!
//! Fields are separated by blanks; `#` starts a comment. A bare number
//! followed by a word that is only a unit (`7 s`, `4 K`, `5 %`) is one
//! field, as the DAOS paper prints `7 s`, and so are more such pairs in
//! decreasing time units, as damo prints `2 m 30 s`.

use udamon_core::schemes::{AccessPattern, Damos};

use crate::error::{quote, Error, Src};
use crate::fields::{self, Problem, TimeUnit};
use crate::units::{self, Side};

pub(crate) const FIELDS_EXPECTED: &str = "7 fields <min_sz> <max_sz> <min_freq> <max_freq> \
     <min_age> <max_age> <action>, or 6 without <max_age>";

#[derive(Clone, Copy)]
struct Token<'a> {
    /// Byte offset in the whole source.
    pos: usize,
    text: &'a str,
}

pub(crate) fn parse(src: &Src) -> Result<Vec<Damos>, Error> {
    let mut schemes = Vec::new();
    let mut line_start = 0;
    for line in src.text.split_inclusive('\n') {
        if let Some(s) = parse_line(src, line_start, line)? {
            schemes.push(s);
        }
        line_start += line.len();
    }
    Ok(schemes)
}

fn tokens<'a>(src: &Src<'a>, line_start: usize, content: &'a str) -> Vec<Token<'a>> {
    let mut raw: Vec<Token<'a>> = Vec::new();
    let mut start = None;
    for (i, c) in content
        .char_indices()
        .chain(std::iter::once((content.len(), ' ')))
    {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                raw.push(Token {
                    pos: line_start + s,
                    text: &content[s..i],
                });
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    let mut merged: Vec<Token<'a>> = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let t = raw[i];
        if units::is_bare_number(t.text)
            && raw.get(i + 1).is_some_and(|u| units::is_unit_word(u.text))
        {
            // More pairs in decreasing time units make one time, as damo
            // writes it: `2 m 30 s`.
            let mut last = i + 1;
            while let [n, u, ..] = &raw[last + 1..] {
                let smaller = match (units::time_unit(raw[last].text), units::time_unit(u.text)) {
                    (Some(prev), Some(next)) => next < prev,
                    _ => false,
                };
                if !(smaller && units::is_bare_number(n.text) && units::is_unit_word(u.text)) {
                    break;
                }
                last += 2;
            }
            let end = raw[last].pos + raw[last].text.len();
            merged.push(Token {
                pos: t.pos,
                text: &src.text[t.pos..end],
            });
            i = last + 1;
        } else {
            merged.push(t);
            i += 1;
        }
    }
    merged
}

fn parse_line(src: &Src, line_start: usize, line: &str) -> Result<Option<Damos>, Error> {
    let content = line.split('#').next().unwrap_or("");
    let toks = tokens(src, line_start, content);
    let fail = |t: Token, p: Problem| src.err(t.pos, t.text, p.msg, p.expected);
    match toks.len() {
        0 => return Ok(None),
        6 | 7 => {}
        n if n < 6 => {
            let end = line_start + content.trim_end().len();
            return Err(src.err(end, "", format!("too few fields ({n})"), FIELDS_EXPECTED));
        }
        8 if toks[0].text.chars().all(|c| c.is_ascii_digit()) => {
            let msg = format!(
                "too many fields (8); is {} a listing line number?",
                quote(toks[0].text)
            );
            return Err(fail(toks[0], Problem::new(msg, FIELDS_EXPECTED)));
        }
        n => {
            return Err(fail(
                toks[7],
                Problem::new(format!("too many fields ({n})"), FIELDS_EXPECTED),
            ))
        }
    }
    let age = |t: Token, side| {
        fields::time(t.text, Some(side), "age", TimeUnit::Us).map_err(|p| fail(t, p))
    };
    let pattern = AccessPattern {
        min_sz: fields::size(toks[0].text, Some(Side::Lower), "size")
            .map_err(|p| fail(toks[0], p))?,
        max_sz: fields::size(toks[1].text, Some(Side::Upper), "size")
            .map_err(|p| fail(toks[1], p))?,
        min_freq_bp: fields::freq(toks[2].text, Some(Side::Lower)).map_err(|p| fail(toks[2], p))?,
        max_freq_bp: fields::freq(toks[3].text, Some(Side::Upper)).map_err(|p| fail(toks[3], p))?,
        min_age_us: age(toks[4], Side::Lower)?,
        max_age_us: if toks.len() == 7 {
            age(toks[5], Side::Upper)?
        } else {
            u64::MAX
        },
    };
    let act = toks[toks.len() - 1];
    let action = fields::action(act.text).map_err(|p| fail(act, p))?;
    if let Err((i, p)) = fields::check_pattern(&pattern) {
        return Err(fail(toks[2 * i + 1], p));
    }
    Ok(Some(Damos::new(pattern, action)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(line: &str) -> Vec<(usize, String)> {
        let src = Src::new(line, "t");
        tokens(&src, 0, line)
            .iter()
            .map(|t| (t.pos, t.text.to_string()))
            .collect()
    }

    #[test]
    fn tokens_merge_split_units() {
        // 0         1         2         3
        // 0123456789012345678901234567890123
        // 2M max min min 7 s max nohugepage
        assert_eq!(
            toks("2M max min min 7 s max nohugepage"),
            [
                (0, "2M"),
                (3, "max"),
                (7, "min"),
                (11, "min"),
                (15, "7 s"),
                (19, "max"),
                (23, "nohugepage")
            ]
            .map(|(p, s)| (p, s.to_string()))
        );
        assert_eq!(
            toks("4 K\t80 %"),
            [(0, "4 K".to_string()), (4, "80 %".to_string())]
        );
        // a placeholder after a number is not a unit
        assert_eq!(toks("5 min").len(), 2);
        // damo's compound times are one field, in decreasing units only
        assert_eq!(
            toks("4K max 0 0 2 m 30 s max pageout")[4],
            (11, "2 m 30 s".to_string())
        );
        assert_eq!(toks("1 h 2 m 3 s 4 ms").len(), 1);
        assert_eq!(toks("30 s 2 m").len(), 2);
        assert_eq!(toks("2 m 30 K").len(), 2);
        assert!(toks("   ").is_empty());
    }

    #[test]
    fn damo_compound_time_reads_as_one_age() {
        let line = "4K max 0 0 2 m 30 s max pageout\n";
        let s = crate::parse(line, "t", Some(crate::Format::Text)).unwrap();
        assert_eq!(s[0].pattern.min_age_us, 150_000_000);
        assert_eq!(s[0].pattern.max_age_us, u64::MAX);
    }
}
