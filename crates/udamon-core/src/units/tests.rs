use super::*;
use Fraction::{Floor, Refuse, Round};
use UnitErrorKind::*;

fn size_kind(s: &str, f: Fraction) -> Result<u64, UnitErrorKind> {
    parse_size(s, f).map_err(|e| e.kind)
}

fn us_kind(s: &str, bare: Option<TimeUnit>, f: Fraction) -> Result<u64, UnitErrorKind> {
    parse_duration(s, TimeUnit::Us, bare, f).map_err(|e| e.kind)
}

/// What the scheme files read (exact, bare numbers in bytes).
#[test]
fn sizes_of_scheme_files() {
    let cases: &[(&str, Result<u64, UnitErrorKind>)] = &[
        ("4096", Ok(4096)),
        ("4K", Ok(4096)),
        ("4k", Ok(4096)),
        ("4 KiB", Ok(4096)),
        ("2MB", Ok(2 << 20)),
        ("2M", Ok(2 << 20)),
        ("500M", Ok(500 << 20)),
        ("1.5G", Ok(3 << 29)),
        ("4.000 KiB", Ok(4096)),
        ("1,024", Ok(1024)),
        ("0x1000", Ok(4096)),
        ("0X1000", Ok(4096)),
        ("16E", Err(TooLarge)),
        ("15E", Ok(15 << 60)),
        ("1.3K", Err(NotWhole)),
        ("0.5B", Err(NotWhole)),
        ("4Q", Err(UnknownUnit("Q".into()))),
        ("K", Err(Syntax)),
        ("", Err(Syntax)),
        ("-4K", Err(Negative)),
        ("1..2K", Err(Syntax)),
        (",1", Err(Syntax)),
        ("1,", Err(Syntax)),
        ("0xfffffffffffffffff", Err(TooLarge)),
        ("0xg", Err(Syntax)),
        ("99999999999999999999999999999999999999999", Err(TooLarge)),
    ];
    for (s, want) in cases {
        assert_eq!(size_kind(s, Refuse), *want, "{s:?}");
    }
    assert_eq!(size_kind("1.333 MiB", Floor), Ok(1_397_751));
    assert_eq!(size_kind("1.333 MiB", Refuse), Err(NotWhole));
}

/// What the command line, service configs and specs read (rounded).
#[test]
fn sizes_of_the_command_line() {
    let ok = [
        ("4K", 4096),
        ("64M", 64 << 20),
        ("10T", 10 << 40),
        ("2MB", 2 << 20),
        ("1.5G", 3 << 29),
        ("4096", 4096),
        ("1GiB", 1 << 30),
        ("4iB", 4),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1.5e3K", 1_536_000),
        ("1e3B", 1000),
        ("+5", 5),
        ("-0", 0),
        (".5K", 512),
        ("5.", 5),
        ("0.5", 1),
        ("0.4", 0),
        ("1.3K", 1331),
        ("1e-400", 0),
        (" 4 K ", 4096),
        ("16383P", 16383 << 50),
    ];
    for (s, want) in ok {
        assert_eq!(size_kind(s, Round), Ok(want), "{s}");
    }
    for bad in [
        "", "x", "4Q", "-1M", "1e30T", ".", "1e", "16384P", "nanK", "4 K B",
    ] {
        let r = size_kind(bad, Round);
        // `1e` is one EiB now (the scheme files' E), not an error.
        if bad == "1e" {
            assert_eq!(r, Ok(1 << 60));
        } else {
            assert!(r.is_err(), "{bad}: {r:?}");
        }
    }
    let msg = |s: &str| parse_size(s, Round).unwrap_err().to_string();
    assert_eq!(
        msg("4Q"),
        "unknown unit \"Q\" in size \"4Q\" (expected K, M, G, T, P or E)"
    );
    assert_eq!(
        msg("x"),
        "unknown unit \"x\" in size \"x\" (expected K, M, G, T, P or E)"
    );
    assert_eq!(
        msg("K"),
        "\"K\" is not a size (expected a number with K, M, G or T)"
    );
    assert_eq!(msg("-1M"), "size \"-1M\" is out of range");
    assert_eq!(msg("1e30T"), "size \"1e30T\" is out of range");
    assert_eq!(
        parse_size("1.3K", Refuse).unwrap_err().to_string(),
        "size \"1.3K\" is not a whole number of bytes"
    );
}

#[test]
fn durations_of_the_command_line() {
    let ok = [
        ("5us", 5),
        ("100ms", 100_000),
        ("2s", 2_000_000),
        ("1.5s", 1_500_000),
        ("2m", 120_000_000),
        ("2min", 120_000_000),
        ("1h", 3_600_000_000),
        ("1.5us", 2),
        ("1.4us", 1),
        ("+5s", 5_000_000),
        ("-0s", 0),
        (".5s", 500_000),
        ("5 s", 5_000_000),
        ("1000000h", 3_600_000_000_000_000),
        // What only the scheme files took before.
        ("1d", 86_400_000_000),
        ("10µs", 10),
        ("2 m 30 s", 150_000_000),
        ("1,000ms", 1_000_000),
        ("1500ns", 2),
    ];
    for (s, want) in ok {
        assert_eq!(parse_duration_us(s, Round), Ok(want), "{s}");
    }
    let msg = |s: &str| parse_duration_us(s, Round).unwrap_err().to_string();
    assert_eq!(
        msg("2sx"),
        "unknown unit \"sx\" in duration \"2sx\" (expected us, ms, s, m or h)"
    );
    assert_eq!(
        msg("60q"),
        "unknown unit \"q\" in duration \"60q\" (expected us, ms, s, m or h)"
    );
    assert_eq!(
        msg("10"),
        "duration \"10\" has no unit (expected us, ms, s, m or h)"
    );
    assert_eq!(
        msg(""),
        "duration \"\" has no unit (expected us, ms, s, m or h)"
    );
    assert_eq!(
        msg("s"),
        "\"s\" is not a duration (expected a number and a unit, like 2s)"
    );
    assert_eq!(msg("-1s"), "duration \"-1s\" is out of range");
    assert_eq!(
        msg("99999999999999999999d"),
        "duration \"99999999999999999999d\" is out of range"
    );
    for bad in ["fast", "1e3s", "5 5s", "5s 5", "1.5.5s", "5S"] {
        assert!(parse_duration_us(bad, Round).is_err(), "{bad}");
    }
}

/// What the scheme files read (exact, a bare number in the field's unit).
#[test]
fn durations_of_scheme_files() {
    let us = |s: &str| us_kind(s, Some(TimeUnit::Us), Refuse);
    let cases: &[(&str, Result<u64, UnitErrorKind>)] = &[
        ("5s", Ok(5_000_000)),
        ("7 s", Ok(7_000_000)),
        ("100ms", Ok(100_000)),
        ("2m", Ok(120_000_000)),
        ("2min", Ok(120_000_000)),
        ("2sec", Ok(2_000_000)),
        ("1h", Ok(3_600_000_000)),
        ("1d", Ok(86_400_000_000)),
        ("10us", Ok(10)),
        ("10µs", Ok(10)),
        ("1.5s", Ok(1_500_000)),
        ("2 m 30 s", Ok(150_000_000)),
        ("0 ns", Ok(0)),
        ("1000ns", Ok(1)),
        ("1500ns", Err(NotWhole)),
        ("42", Ok(42)),
        ("5q", Err(UnknownUnit("q".into()))),
        ("5S", Err(UnknownUnit("S".into()))),
        ("s", Err(Syntax)),
        ("", Err(Syntax)),
        ("5 5s", Err(Syntax)),
        ("5s 5", Err(Syntax)),
        ("999999999999999999999d", Err(TooLarge)),
    ];
    for (s, want) in cases {
        assert_eq!(us(s), *want, "{s:?}");
    }
    let ms = |s: &str| parse_duration(s, TimeUnit::Ms, Some(TimeUnit::Ms), Refuse);
    assert_eq!(ms("5"), Ok(5));
    assert_eq!(ms("1s"), Ok(1000));
    assert_eq!(
        ms("1500us").unwrap_err().to_string(),
        "duration \"1500us\" is not a whole number of milliseconds"
    );
}

#[test]
fn addresses_and_ranges() {
    assert_eq!(parse_address("0x7f0000001000"), Ok(0x7f00_0000_1000));
    assert_eq!(parse_address(" 0xFF "), Ok(255));
    assert_eq!(parse_address("0x+ff"), Ok(255));
    assert_eq!(parse_address("0X10"), Ok(16));
    assert_eq!(parse_address("64M"), Ok(64 << 20));
    assert_eq!(parse_address("1.5K"), Ok(1536));
    assert_eq!(
        parse_address("0xzz").unwrap_err().to_string(),
        "\"0xzz\" is not a hex address"
    );
    assert_eq!(
        parse_address("0x10000000000000000")
            .unwrap_err()
            .to_string(),
        "\"0x10000000000000000\" is not a hex address"
    );
    assert_eq!(
        parse_address("4Q").unwrap_err().to_string(),
        "unknown unit \"Q\" in size \"4Q\" (expected K, M, G, T, P or E)"
    );
    assert_eq!(parse_address_range("0x1000-0x2000"), Ok((0x1000, 0x2000)));
    assert_eq!(parse_address_range("4K-1M"), Ok((4096, 1 << 20)));
    let msg = |s: &str| parse_address_range(s).unwrap_err().to_string();
    assert_eq!(msg("4K"), "4K: expected START-END");
    assert_eq!(msg("1M-4K"), "1M-4K: the start is not below the end");
    assert_eq!(msg("4K-4K"), "4K-4K: the start is not below the end");
    assert_eq!(msg("0xg-4K"), "\"0xg\" is not a hex address");
    let t = parse_range("1s-2s", |s| parse_duration_us(s, Round));
    assert_eq!(t, Ok((1_000_000, 2_000_000)));
}

#[test]
fn numbers() {
    for (s, want) in [("42", 42), ("1,024", 1024), ("500.000", 500), ("0x2a", 42)] {
        assert_eq!(parse_number(s, Refuse), Ok(want), "{s}");
    }
    for bad in ["1.5", "x", "", "1e3", "0x", "+5", "-0", "0x+2a"] {
        assert!(parse_number(bad, Refuse).is_err(), "{bad}");
    }
    assert_eq!(parse_number("1.5", Round), Ok(2));
}

#[test]
fn decimals() {
    let d = |s: &str| Decimal::parse(s, true);
    assert_eq!(d("12.5").unwrap().scaled(100, Refuse), Ok(1250));
    assert_eq!(d("0.001").unwrap().scaled(100, Refuse), Err(NotWhole));
    assert_eq!(d("2.5").unwrap().scaled(1, Round), Ok(3));
    assert_eq!(d("2.5").unwrap().scaled(1, Floor), Ok(2));
    assert_eq!(
        d("1.000000000000000000000000000000000000000000")
            .unwrap()
            .scaled(1, Refuse),
        Ok(1)
    );
    assert_eq!(d("5e-41").unwrap().scaled(1, Round), Ok(0));
    assert_eq!(d("5e-41").unwrap().scaled(1, Refuse), Err(NotWhole));
    assert_eq!(d("0e-41").unwrap().scaled(1, Refuse), Ok(0));
    // Divisor beyond u128: still exact.
    let big = d("340282366920938463463374607431768211455e-39").unwrap();
    assert_eq!(big.scaled(1, Round), Ok(0));
    assert_eq!(big.ratio(1, 10, Floor), Ok(0));
    let half = d("6e-1").unwrap();
    assert_eq!(half.ratio(1, u128::MAX, Round), Ok(0));
    assert!(d("1..2").is_err() && d(".").is_err() && d("").is_err() && d("1e").is_err());
    assert!(d("-").is_err() && d("+").is_err() && d("--1").is_err());
    assert_eq!(d("-1"), Err(Negative));
}

#[test]
fn exact_forms_read_back() {
    for v in [0, 1, 4095, 4096, 2 << 20, 3 << 29, u64::MAX, 15 << 60] {
        assert_eq!(parse_size(&fmt_size(v), Refuse), Ok(v), "{v}");
    }
    for us in [
        0,
        1,
        999,
        1000,
        100_000,
        120_000_000,
        3_600_000_000,
        u64::MAX - 1,
    ] {
        let s = fmt_time_us(us);
        assert_eq!(
            parse_duration(&s, TimeUnit::Us, Some(TimeUnit::Ns), Refuse),
            Ok(us),
            "{s}"
        );
    }
    assert_eq!(fmt_size(4096), "4K");
    assert_eq!(fmt_size(4097), "4097B");
    assert_eq!(fmt_size(0), "0B");
    assert_eq!(fmt_time_us(120_000_000), "2m");
    assert_eq!(fmt_time_us(3_600_000_000_000_000), "1000000h");
    assert_eq!(fmt_time_us(100_000), "100ms");
    assert_eq!(fmt_time_us(1_500), "1500us");
    assert_eq!(fmt_time_us(90_000_000), "90s");
    assert_eq!(fmt_time_us(0), "0s");
    assert_eq!(fmt_time(1500, TimeUnit::Ms), "1500ms");
    assert_eq!(fmt_time(60_000, TimeUnit::Ms), "1m");
    for s in ["2m", "5us", "1h", "7s"] {
        assert_eq!(fmt_time_us(parse_duration_us(s, Round).unwrap()), s);
    }
}

#[test]
fn approximate_forms() {
    assert_eq!(fmt_size_approx(128 << 20), "128M");
    assert_eq!(fmt_size_approx(4097), "4097B");
    assert_eq!(fmt_size_approx(12_289), "12.0K");
    assert_eq!(fmt_size_approx(0), "0B");
    assert_eq!(fmt_size_approx(3 << 29), "1536M");
    assert_eq!(fmt_time_us_approx(16_500_000), "16.5s");
    assert_eq!(fmt_time_us_approx(250_000), "250ms");
    assert_eq!(fmt_time_us_approx(120_000_000), "120s");
    assert_eq!(fmt_time_us_approx(7), "7us");
    assert_eq!(fmt_time_us_approx(0), "0s");
}

#[test]
fn human_sizes() {
    for (v, want) in [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (64 << 20, "64.0 MiB"),
        ((1 << 30) - 1, "1.0 GiB"),
        (3 << 39, "1.5 TiB"),
        (u64::MAX, "16.0 EiB"),
    ] {
        assert_eq!(fmt_bytes(v), want, "{v}");
    }
    let short = |v: u64| human_size(v.into(), Human::Short);
    assert_eq!(short(512), "512 B");
    assert_eq!(short(4096), "4.0 KiB");
    assert_eq!(short(128 << 20), "128 MiB");
    assert_eq!(short(3 << 29), "1.5 GiB");
    assert_eq!(short(u64::MAX), "16 EiB");
    let trimmed = |v: u128| human_size(v, Human::Trimmed);
    assert_eq!(trimmed(1 << 30), "1 GiB");
    assert_eq!(trimmed(512), "512 B");
    assert_eq!(trimmed(3 << 29), "1.5 GiB");
    assert_eq!(trimmed(u128::MAX), trimmed(u128::MAX)); // no panic
    assert!(trimmed(u128::from(u64::MAX)).ends_with("EiB"));
}

#[test]
fn time_units() {
    for u in TimeUnit::ALL {
        assert_eq!(TimeUnit::from_suffix(u.suffix()), Some(u));
    }
    assert_eq!(TimeUnit::from_suffix("µs"), Some(TimeUnit::Us));
    assert_eq!(TimeUnit::from_suffix("M"), None);
    assert_eq!(size_suffix("KiB"), Some(1024));
    assert_eq!(size_suffix("eb"), Some(1 << 60));
    assert_eq!(size_suffix("Q"), None);
}
