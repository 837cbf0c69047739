//! Fuzzes `udamon_scheme_file::parse` in each format. The first byte picks
//! the format (0: detect, 1: text, 2: TOML, 3: JSON, modulo 4, so the ASCII
//! digits of the seed corpus read naturally); the rest is the file.
//!
//! Beyond "no panic": whatever parses must read back unchanged from the
//! normalised TOML and JSON forms.

#![no_main]

use libfuzzer_sys::fuzz_target;
use udamon_scheme_file::{parse, to_json, to_toml, Format};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(src) = std::str::from_utf8(rest) else {
        return;
    };
    let format = match selector % 4 {
        0 => None,
        1 => Some(Format::Text),
        2 => Some(Format::Toml),
        _ => Some(Format::Json),
    };
    match parse(src, "fuzz", format) {
        Ok(schemes) => {
            let toml = to_toml(&schemes);
            assert_eq!(
                parse(&toml, "fuzz.toml", Some(Format::Toml)).as_ref(),
                Ok(&schemes),
                "{toml}"
            );
            let json = to_json(&schemes).to_string();
            assert_eq!(
                parse(&json, "fuzz.json", Some(Format::Json)).as_ref(),
                Ok(&schemes),
                "{json}"
            );
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "{e}"),
    }
});
