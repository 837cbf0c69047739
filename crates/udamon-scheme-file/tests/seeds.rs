//! Every scheme line printed in the seed documents (the DAMON patch set
//! appendix, the v24 evaluation, the DAOS paper), verbatim, and what it
//! means. The DAOS listings number their lines ("4 min max ..."); those
//! listing numbers are not part of the scheme and are left out here, but the
//! DAOS paper's split unit ("7 s") is kept as printed.

use udamon_core::schemes::{AccessPattern, Action, Damos};
use udamon_scheme_file::{parse, Format};

const K: u64 = 1 << 10;
const M: u64 = 1 << 20;
const MAX: u64 = u64::MAX;
const S: u64 = 1_000_000;

fn scheme(sz: (u64, u64), freq_pct: (u32, u32), age_us: (u64, u64), action: Action) -> Damos {
    Damos::new(
        AccessPattern {
            min_sz: sz.0,
            max_sz: sz.1,
            min_freq_bp: freq_pct.0 * 100,
            max_freq_bp: freq_pct.1 * 100,
            min_age_us: age_us.0,
            max_age_us: age_us.1,
        },
        action,
    )
}

#[rustfmt::skip]
fn seed_lines() -> Vec<(&'static str, &'static str, Damos)> {
    use Action::*;
    vec![
        // damon-patchset-appendix.txt, the six-field plan:
        // "<min/max size> <min/max frequency (0-99)> <duration> <action>"
        ("appendix", "na 500M 90 99 100ms mlock", scheme((0, 500 * M), (90, 99), (100_000, MAX), Mlock)),
        ("appendix", "na na 80 90 100ms madv_willneed", scheme((0, MAX), (80, 90), (100_000, MAX), Willneed)),
        ("appendix", "na na 10 20 100ms madv_cold", scheme((0, MAX), (10, 20), (100_000, MAX), Cold)),
        ("appendix", "na na 0 10 100ms madv_pageout", scheme((0, MAX), (0, 10), (100_000, MAX), Pageout)),
        ("appendix", "2M na 90 99 100ms madv_hugepage", scheme((2 * M, MAX), (90, 99), (100_000, MAX), Hugepage)),
        ("appendix", "2M na 0 25 100ms madv_nohugepage", scheme((2 * M, MAX), (0, 25), (100_000, MAX), Nohugepage)),
        // damon-patchset-appendix.txt, the evaluation's ethp and prcl:
        // "<min/max size> <min/max frequency (0-100)> <min/max age> <action>"
        ("appendix", "2M null    5 null    null null    hugepage", scheme((2 * M, MAX), (5, 100), (0, MAX), Hugepage)),
        ("appendix", "2M null    null 5    1s null      nohugepage", scheme((2 * M, MAX), (0, 5), (S, MAX), Nohugepage)),
        ("appendix", "4K null    null 5    5s null      pageout", scheme((4 * K, MAX), (0, 5), (5 * S, MAX), Pageout)),
        // damon-v24-evaluation.txt
        ("v24", "min     max     5       max     min     max     hugepage", scheme((0, MAX), (5, 100), (0, MAX), Hugepage)),
        ("v24", "2M      max     min     min     7s      max     nohugepage", scheme((2 * M, MAX), (0, 0), (7 * S, MAX), Nohugepage)),
        ("v24", "4K      max     0       0       5s     max     pageout", scheme((4 * K, MAX), (0, 0), (5 * S, MAX), Pageout)),
        // daos-paper.txt, listing 1 (lines 4, 8, 12)
        ("daos", "min max min min 2m max page_out", scheme((0, MAX), (0, 0), (120 * S, MAX), Pageout)),
        ("daos", "2MB max 80% max 1m max thp", scheme((2 * M, MAX), (80, 100), (60 * S, MAX), Hugepage)),
        ("daos", "min max min 5% 1m max nothp", scheme((0, MAX), (0, 5), (60 * S, MAX), Nohugepage)),
        // daos-paper.txt, listing 3 (lines 2, 3, 5)
        ("daos", "min max 5 max min max hugepage", scheme((0, MAX), (5, 100), (0, MAX), Hugepage)),
        ("daos", "2M max min min 7 s max nohugepage", scheme((2 * M, MAX), (0, 0), (7 * S, MAX), Nohugepage)),
        ("daos", "4K max min min 5 s max pageout", scheme((4 * K, MAX), (0, 0), (5 * S, MAX), Pageout)),
    ]
}

#[test]
fn every_seed_line_parses_to_its_meaning() {
    for (doc, line, want) in seed_lines() {
        for format in [None, Some(Format::Text)] {
            let got = parse(line, doc, format).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert_eq!(got, vec![want.clone()], "{doc}: {line:?}");
        }
    }
}

#[test]
fn seed_blocks_parse_with_their_comments() {
    // damon-v24-evaluation.txt, as printed
    let v24 = "\
# format: <min/max size> <min/max frequency (0-100)> <min/max age> <action>
# ethp: Use huge pages if a region shows >=5% access rate, use regular
# pages if a region >=2MB shows 0 access rate for >=7 seconds
min     max     5       max     min     max     hugepage
2M      max     min     min     7s      max     nohugepage

# prcl: If a region >=4KB shows 0 access rate for >=5 seconds, page out.
4K      max     0       0       5s     max     pageout
";
    let got = parse(v24, "v24", None).unwrap();
    let want: Vec<Damos> = seed_lines()
        .into_iter()
        .filter(|(d, _, _)| *d == "v24")
        .map(|(_, _, s)| s)
        .collect();
    assert_eq!(got, want);

    // damon-patchset-appendix.txt, indented as printed
    let appendix = "
    # format is: <min/max size> <min/max frequency (0-99)> <duration> <action>

    # if a region of a size keeps a very high access frequency for more than
    # 100ms, lock the region in the main memory (call mlock()). But, if the
    # region is larger than 500 MiB, skip it.
    na 500M 90 99 100ms mlock

    # if a region keeps a high access frequency for more than 100ms, put the
    # region on the head of the LRU list (call madvise() with MADV_WILLNEED).
    na na 80 90 100ms madv_willneed
";
    let got = parse(appendix, "appendix", None).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].action, Action::Mlock);
}

#[test]
fn daos_listing_numbers_are_pointed_out() {
    let e = parse("4 min max min min 2m max page_out", "daos", None).unwrap_err();
    assert_eq!((e.line, e.column, e.token.as_str()), (1, 1, "4"));
    assert!(e.msg.contains("listing line number"), "{e}");
}

/// Finds the scheme lines in the seed documents themselves (when
/// `shared/seeds` sits beside the workspace) and checks each is in the
/// table above and parses, so a seed added later is not missed.
#[test]
fn seed_documents_have_no_other_scheme_lines() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/seeds");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("no seeds at {}: skipped", dir.display());
        return;
    };
    let actions = [
        "pageout",
        "page_out",
        "hugepage",
        "thp",
        "nohugepage",
        "nothp",
        "willneed",
        "cold",
        "stat",
        "mlock",
        "madv_pageout",
        "madv_hugepage",
        "madv_nohugepage",
        "madv_willneed",
        "madv_cold",
        "lru_prio",
        "lru_deprio",
        "migrate_hot",
        "migrate_cold",
        "collapse",
    ];
    let known: Vec<&str> = seed_lines().iter().map(|(_, l, _)| *l).collect();
    let mut found = 0;
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() < 6 || words.len() > 9 || !actions.contains(words.last().unwrap()) {
                continue;
            }
            let first_is_bound = |w: &str| {
                w.starts_with(|c: char| c.is_ascii_digit())
                    || ["min", "max", "na", "null"].contains(&w)
            };
            if !first_is_bound(words[0]) || line.trim_start().starts_with('#') {
                continue;
            }
            // a DAOS listing number in front
            let body = match words[0].parse::<u32>() {
                Ok(_) if parse(line, "seed", Some(Format::Text)).is_err() => {
                    line.trim_start()[words[0].len()..].trim()
                }
                _ => line.trim(),
            };
            assert!(
                known.contains(&body),
                "seed line not in the table: {body:?}"
            );
            parse(body, "seed", Some(Format::Text)).unwrap_or_else(|e| panic!("{e}"));
            found += 1;
        }
    }
    assert!(found >= 18, "found only {found} seed scheme lines");
}

#[test]
fn seed_lines_described() {
    let want = [
        "mlock regions of 0 B..500 MiB with access 90%..99% for 100ms..",
        "willneed regions of any size with access 80%..90% for 100ms..",
        "cold regions of any size with access 10%..20% for 100ms..",
        "pageout regions of any size with access 0%..10% for 100ms..",
        "hugepage regions of 2.0 MiB.. with access 90%..99% for 100ms..",
        "nohugepage regions of 2.0 MiB.. with access 0%..25% for 100ms..",
        "hugepage regions of 2.0 MiB.. with access 5%..",
        "nohugepage regions of 2.0 MiB.. with access 0%..5% for 1s..",
        "pageout regions of 4.0 KiB.. with access 0%..5% for 5s..",
        "hugepage regions of any size with access 5%..",
        "nohugepage regions of 2.0 MiB.. with access 0%..0% idle for 7s..",
        "pageout regions of 4.0 KiB.. with access 0%..0% idle for 5s..",
        "pageout regions of any size with access 0%..0% idle for 2m..",
        "hugepage regions of 2.0 MiB.. with access 80%.. for 1m..",
        "nohugepage regions of any size with access 0%..5% for 1m..",
        "hugepage regions of any size with access 5%..",
        "nohugepage regions of 2.0 MiB.. with access 0%..0% idle for 7s..",
        "pageout regions of 4.0 KiB.. with access 0%..0% idle for 5s..",
    ];
    let got: Vec<String> = seed_lines()
        .iter()
        .map(|(_, _, s)| udamon_scheme_file::describe(s))
        .collect();
    assert_eq!(got, want);

    let mut prcl = seed_lines()[12].2.clone();
    prcl.pattern.min_sz = 4096;
    prcl.quota.sz = 128 << 20;
    prcl.quota.reset_interval_ms = 1000;
    assert_eq!(
        udamon_scheme_file::describe(&prcl),
        "pageout regions of 4.0 KiB.. with access 0%..0% idle for 2m.. (quota 128 MiB per 1s)"
    );
}

/// The repository's example scheme files parse.
#[test]
fn repository_examples_parse() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/schemes");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    for entry in entries.flatten() {
        let schemes =
            udamon_scheme_file::parse_file(&entry.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!schemes.is_empty(), "{}", entry.path().display());
    }
}
