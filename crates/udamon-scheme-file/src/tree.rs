//! A document tree that remembers where each key and value starts, built from
//! TOML (the `toml` crate's spanned parser) or JSON (`serde_json` checks the
//! syntax, then a small reader here records positions), so the structured
//! readers can point at the exact value they reject in either format.

use crate::error::{Error, Src};

#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// Byte offset of the value's first character.
    pub pos: usize,
    pub v: V,
}

#[derive(Clone, Debug)]
pub(crate) enum V {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Arr(Vec<Node>),
    /// Entries in document order: key, key position, value.
    Obj(Vec<(String, usize, Node)>),
}

impl Node {
    /// The value as written, for error messages.
    pub fn token(&self) -> String {
        match &self.v {
            V::Null => "null".into(),
            V::Bool(b) => b.to_string(),
            V::Int(i) => i.to_string(),
            V::Float(f) => f.to_string(),
            V::Str(s) => s.clone(),
            V::Arr(_) => "[...]".into(),
            V::Obj(_) => "{...}".into(),
        }
    }

    /// The text a unit parser reads: strings as they are, numbers in
    /// decimal. None for other kinds.
    pub fn scalar_text(&self) -> Option<String> {
        match &self.v {
            V::Str(s) => Some(s.clone()),
            V::Int(i) => Some(i.to_string()),
            // Display of f64 never uses an exponent
            V::Float(f) if f.is_finite() => Some(f.to_string()),
            _ => None,
        }
    }

    pub fn entries(&self) -> Option<&[(String, usize, Node)]> {
        match &self.v {
            V::Obj(e) => Some(e),
            _ => None,
        }
    }

    /// The first of `keys` present in this object.
    pub fn get(&self, keys: &[&str]) -> Option<&Node> {
        let entries = self.entries()?;
        keys.iter().find_map(|k| {
            entries
                .iter()
                .find(|(name, _, _)| name == k)
                .map(|(_, _, n)| n)
        })
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(&[key]).is_some()
    }
}

pub(crate) fn from_toml(src: &Src) -> Result<Node, Error> {
    match toml::de::DeTable::parse(src.text) {
        Ok(t) => {
            let pos = t.span().start;
            Ok(Node {
                pos,
                v: toml_table(t.get_ref()),
            })
        }
        Err(e) => {
            let pos = e.span().map_or(0, |s| s.start);
            let token = e
                .span()
                .and_then(|s| src.text.get(s.start..s.end.min(s.start + 40)))
                .unwrap_or("")
                .to_string();
            let msg = e.message().trim().replace('\n', "; ");
            Err(src.err(pos, token, format!("invalid toml: {msg}"), ""))
        }
    }
}

fn toml_table(t: &toml::de::DeTable) -> V {
    let mut entries: Vec<(String, usize, Node)> = t
        .iter()
        .map(|(k, v)| (k.get_ref().to_string(), k.span().start, toml_node(v)))
        .collect();
    entries.sort_by_key(|(_, pos, _)| *pos);
    V::Obj(entries)
}

fn toml_node(v: &toml::Spanned<toml::de::DeValue>) -> Node {
    use toml::de::DeValue;
    let v_ = match v.get_ref() {
        DeValue::String(s) => V::Str(s.to_string()),
        DeValue::Integer(i) => {
            let text = i.as_str().replace('_', "");
            match i128::from_str_radix(&text, i.radix()) {
                Ok(n) => V::Int(n),
                Err(_) => V::Str(i.to_string()),
            }
        }
        DeValue::Float(f) => V::Float(f.as_str().replace('_', "").parse().unwrap_or(f64::NAN)),
        DeValue::Boolean(b) => V::Bool(*b),
        DeValue::Datetime(d) => V::Str(d.to_string()),
        DeValue::Array(a) => V::Arr(a.iter().map(toml_node).collect()),
        DeValue::Table(t) => toml_table(t),
    };
    Node {
        pos: v.span().start,
        v: v_,
    }
}

pub(crate) fn from_json(src: &Src) -> Result<Node, Error> {
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(src.text) {
        let full = e.to_string();
        let msg = match full.rfind(" at line ") {
            Some(i) => &full[..i],
            None => &full,
        };
        let token = src
            .text
            .lines()
            .nth(e.line().saturating_sub(1))
            .and_then(|l| {
                l.chars()
                    .nth(e.column().saturating_sub(1))
                    .map(|c| c.to_string())
            });
        return Err(src.err_at(
            e.line(),
            e.column(),
            token.unwrap_or_default(),
            format!("invalid json: {msg}"),
            "",
        ));
    }
    let mut r = JsonReader {
        s: src.text,
        i: 0,
        depth: 0,
    };
    r.ws();
    match r.value() {
        Some(n) => Ok(n),
        // serde_json accepted it, so this is not expected; still no panic
        None => Err(src.err(r.i, "", "invalid json", "")),
    }
}

/// Reads JSON that serde_json has already accepted, keeping positions.
struct JsonReader<'a> {
    s: &'a str,
    i: usize,
    depth: usize,
}

impl JsonReader<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek()? == b).then(|| self.i += 1)
    }

    fn value(&mut self) -> Option<Node> {
        self.ws();
        let pos = self.i;
        let v = match self.peek()? {
            b'{' => {
                self.depth += 1;
                if self.depth > 256 {
                    return None;
                }
                self.i += 1;
                let mut entries = Vec::new();
                self.ws();
                if self.peek()? == b'}' {
                    self.i += 1;
                } else {
                    loop {
                        self.ws();
                        let kpos = self.i;
                        let key = self.string()?;
                        self.eat(b':')?;
                        let val = self.value()?;
                        entries.push((key, kpos, val));
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b'}' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                self.depth -= 1;
                V::Obj(entries)
            }
            b'[' => {
                self.depth += 1;
                if self.depth > 256 {
                    return None;
                }
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.peek()? == b']' {
                    self.i += 1;
                } else {
                    loop {
                        items.push(self.value()?);
                        self.ws();
                        match self.peek()? {
                            b',' => self.i += 1,
                            b']' => {
                                self.i += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                self.depth -= 1;
                V::Arr(items)
            }
            b'"' => V::Str(self.string()?),
            b't' => self.literal("true", V::Bool(true))?,
            b'f' => self.literal("false", V::Bool(false))?,
            b'n' => self.literal("null", V::Null)?,
            _ => self.number()?,
        };
        Some(Node { pos, v })
    }

    fn literal(&mut self, word: &str, v: V) -> Option<V> {
        self.s[self.i..].starts_with(word).then(|| {
            self.i += word.len();
            v
        })
    }

    fn number(&mut self) -> Option<V> {
        let start = self.i;
        while matches!(
            self.peek(),
            Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
        ) {
            self.i += 1;
        }
        let text = &self.s[start..self.i];
        if text.is_empty() {
            return None;
        }
        if text.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
            if let Ok(n) = text.parse::<i128>() {
                return Some(V::Int(n));
            }
            // beyond i128: keep the digits, the unit parsers say "too large"
            return Some(V::Str(text.to_string()));
        }
        text.parse::<f64>().ok().map(V::Float)
    }

    fn string(&mut self) -> Option<String> {
        if self.peek()? != b'"' {
            return None;
        }
        self.i += 1;
        let mut out = String::new();
        loop {
            let rest = &self.s[self.i..];
            let stop = rest.find(['"', '\\'])?;
            out.push_str(&rest[..stop]);
            self.i += stop;
            if self.peek()? == b'"' {
                self.i += 1;
                return Some(out);
            }
            self.i += 1;
            let esc = self.peek()?;
            self.i += 1;
            match esc {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'/' => out.push('/'),
                b'b' => out.push('\u{8}'),
                b'f' => out.push('\u{c}'),
                b'n' => out.push('\n'),
                b'r' => out.push('\r'),
                b't' => out.push('\t'),
                b'u' => {
                    let hi = self.hex4()?;
                    let c = if (0xd800..0xdc00).contains(&hi) && self.s[self.i..].starts_with("\\u")
                    {
                        self.i += 2;
                        let lo = self.hex4()?;
                        char::from_u32(
                            0x10000 + ((hi - 0xd800) << 10) + (lo.wrapping_sub(0xdc00) & 0x3ff),
                        )
                    } else {
                        char::from_u32(hi)
                    };
                    out.push(c.unwrap_or('\u{fffd}'));
                }
                _ => return None,
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        self.i += 4;
        u32::from_str_radix(h, 16).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_positions_and_values() {
        let text = "{\"a\": [1, -2, 3.5, \"x\\u00e9\\ud83d\\ude00\"],\n \"b\": {\"c\": null, \"d\": true}}";
        let src = Src::new(text, "t");
        let n = from_json(&src).unwrap();
        let a = n.get(&["a"]).unwrap();
        assert_eq!(a.pos, 6);
        let V::Arr(items) = &a.v else { panic!() };
        assert!(matches!(items[1].v, V::Int(-2)));
        assert!(matches!(items[2].v, V::Float(f) if f == 3.5));
        assert!(matches!(&items[3].v, V::Str(s) if s == "xé😀"));
        let b = n.get(&["b"]).unwrap();
        assert_eq!(src.line_col(b.pos), (2, 7));
        assert!(matches!(b.get(&["c"]).unwrap().v, V::Null));
        let big = from_json(&Src::new("[18446744073709551615, 1e3]", "t")).unwrap();
        let V::Arr(items) = &big.v else { panic!() };
        assert!(matches!(items[0].v, V::Int(n) if n == i128::from(u64::MAX)));
        assert_eq!(items[1].scalar_text().as_deref(), Some("1000"));
    }

    #[test]
    fn json_syntax_errors_come_from_serde_json() {
        let src = Src::new("{\n  \"a\": ,\n}", "t.json");
        let e = from_json(&src).unwrap_err();
        assert_eq!((e.line, e.column), (2, 8));
        assert_eq!(e.msg, "invalid json: expected value");
        assert_eq!(e.token, ",");
    }

    #[test]
    fn toml_entries_in_document_order() {
        let src = Src::new("b = 1\na = \"x\"\n[t]\nz = 0x10\n", "t");
        let n = from_toml(&src).unwrap();
        let keys: Vec<_> = n
            .entries()
            .unwrap()
            .iter()
            .map(|(k, _, _)| k.as_str())
            .collect();
        assert_eq!(keys, ["b", "a", "t"]);
        let z = n.get(&["t"]).unwrap().get(&["z"]).unwrap();
        assert!(matches!(z.v, V::Int(16)));
        assert_eq!(src.line_col(z.pos), (4, 5));
    }
}
