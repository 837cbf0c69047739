//! The one error type, and the source wrapper that turns byte offsets into
//! line and column.

/// A scheme file could not be read or understood.
///
/// `line` and `column` are 1-based (columns count characters); both are 0
/// when the file could not be read at all. `token` is the offending text as
/// written (empty at the end of a line), `expected` says what would have been
/// accepted (may be empty), `msg` what is wrong.
///
/// Displayed on one line, lowercase, without a trailing period:
/// `schemes prcl.txt line 3, column 17: bad size "4Q" (expected a size like 4K, 2M, 2MB, min or max)`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("schemes {origin}{}: {msg}{}", position(.line, .column), expected_suffix(.expected))]
pub struct Error {
    pub origin: String,
    pub line: usize,
    pub column: usize,
    pub token: String,
    pub expected: String,
    pub msg: String,
}

impl Error {
    /// A scheme file is the user's input: always bad input (also when it
    /// cannot be read: the path given is wrong).
    pub fn kind(&self) -> udamon_core::ErrorKind {
        udamon_core::ErrorKind::Usage
    }
}

fn position(line: &usize, column: &usize) -> String {
    if *line == 0 {
        String::new()
    } else {
        format!(" line {line}, column {column}")
    }
}

fn expected_suffix(expected: &str) -> String {
    if expected.is_empty() {
        String::new()
    } else {
        format!(" (expected {expected})")
    }
}

/// `"4Q"`, with control characters and quotes escaped so the message stays
/// on one line.
pub(crate) fn quote(token: &str) -> String {
    format!("\"{}\"", token.escape_debug())
}

/// The text being parsed and its name, to build errors from byte offsets.
#[derive(Clone, Copy)]
pub(crate) struct Src<'a> {
    pub text: &'a str,
    pub origin: &'a str,
}

impl<'a> Src<'a> {
    pub fn new(text: &'a str, origin: &'a str) -> Self {
        Self { text, origin }
    }

    /// 1-based line and character column of a byte offset (clamped to the
    /// text, moved back to a character boundary).
    pub fn line_col(&self, pos: usize) -> (usize, usize) {
        let mut pos = pos.min(self.text.len());
        while !self.text.is_char_boundary(pos) {
            pos -= 1;
        }
        let before = &self.text[..pos];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        (line, column)
    }

    pub fn err(
        &self,
        pos: usize,
        token: impl Into<String>,
        msg: impl Into<String>,
        expected: impl Into<String>,
    ) -> Error {
        let (line, column) = self.line_col(pos);
        self.err_at(line, column, token, msg, expected)
    }

    pub fn err_at(
        &self,
        line: usize,
        column: usize,
        token: impl Into<String>,
        msg: impl Into<String>,
        expected: impl Into<String>,
    ) -> Error {
        Error {
            origin: self.origin.to_string(),
            line,
            column,
            token: token.into(),
            expected: expected.into(),
            msg: msg.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let s = Src::new("ab\nçd e\n", "x");
        assert_eq!(s.line_col(0), (1, 1));
        assert_eq!(s.line_col(3), (2, 1));
        // 'ç' is two bytes: "d" is at byte 5, column 2
        assert_eq!(s.line_col(5), (2, 2));
        // inside 'ç' moves back to its start
        assert_eq!(s.line_col(4), (2, 1));
        assert_eq!(s.line_col(999), (3, 1));
    }

    #[test]
    fn display_shape() {
        let e = Error {
            origin: "prcl.txt".into(),
            line: 3,
            column: 17,
            token: "4Q".into(),
            expected: "a size like 4K, 2M, 2MB, min or max".into(),
            msg: "bad size \"4Q\"".into(),
        };
        assert_eq!(
            e.to_string(),
            "schemes prcl.txt line 3, column 17: bad size \"4Q\" (expected a size like 4K, 2M, 2MB, min or max)"
        );
        let e = Error {
            line: 0,
            column: 0,
            expected: String::new(),
            msg: "cannot read".into(),
            ..e
        };
        assert_eq!(e.to_string(), "schemes prcl.txt: cannot read");
    }
}
