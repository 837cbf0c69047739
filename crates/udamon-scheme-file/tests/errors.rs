//! Bad inputs and the exact one-line message each gives.

use udamon_scheme_file::{parse, parse_file, Format};

const FIELDS: &str = "7 fields <min_sz> <max_sz> <min_freq> <max_freq> <min_age> <max_age> <action>, or 6 without <max_age>";
const TIME: &str = "a time like 100ms, 5s, 2m or 1h, min or max";

#[rustfmt::skip]
fn cases() -> Vec<(&'static str, Option<Format>, &'static str, String)> {
    let t = Some(Format::Text);
    let toml = Some(Format::Toml);
    let json = Some(Format::Json);
    vec![
        // the text form
        ("prcl.txt", t, "# prcl\n# page out idle memory\n4K              4Q 0 0 5s max pageout\n",
         r#"schemes prcl.txt line 3, column 17: bad size "4Q" (expected a size like 4K, 2M, 2MB, min or max)"#.into()),
        ("a.txt", t, "4K max 0 0 5s max pageout now",
         format!(r#"schemes a.txt line 1, column 27: too many fields (8) (expected {FIELDS})"#)),
        ("a.txt", t, "4 min max min min 2m max page_out",
         format!(r#"schemes a.txt line 1, column 1: too many fields (8); is "4" a listing line number? (expected {FIELDS})"#)),
        ("a.txt", t, "\n4K max 0 0 pageout   # too short",
         format!(r#"schemes a.txt line 2, column 19: too few fields (5) (expected {FIELDS})"#)),
        ("a.txt", t, "4K max 0 0 5s pageout stat",
         format!(r#"schemes a.txt line 1, column 15: bad age "pageout" (expected {TIME})"#)),
        ("a.txt", t, "4K max 0 0 5x max pageout",
         format!(r#"schemes a.txt line 1, column 12: bad age "5x" (expected {TIME})"#)),
        ("a.txt", t, "4K max 0 0 1.5us max pageout",
         format!(r#"schemes a.txt line 1, column 12: age "1.5us" is not a whole number of microseconds (expected {TIME})"#)),
        ("a.txt", t, "2M 4K 0 0 5s max pageout",
         r#"schemes a.txt line 1, column 4: max size 4K is below min size 2M (expected a max at least the min)"#.into()),
        ("a.txt", t, "4K max 50 10 5s max pageout",
         r#"schemes a.txt line 1, column 11: max frequency 10% is below min frequency 50% (expected a max at least the min)"#.into()),
        ("a.txt", t, "4K max 0 0 5m 1m pageout",
         r#"schemes a.txt line 1, column 15: max age 1m is below min age 5m (expected a max at least the min)"#.into()),
        ("a.txt", t, "4K max 0 150% 5s max pageout",
         r#"schemes a.txt line 1, column 10: frequency "150%" is above 100% (expected 0 to 100 percent)"#.into()),
        ("a.txt", t, "4K max 0 5x 5s max pageout",
         r#"schemes a.txt line 1, column 10: bad frequency "5x" (expected an access frequency in percent of the maximum like 5, 5% or 12.5%, min or max)"#.into()),
        ("a.txt", t, "4K max 0 0.001 5s max pageout",
         r#"schemes a.txt line 1, column 10: frequency "0.001" is finer than 0.01% (expected a percentage with at most two decimals)"#.into()),
        ("a.txt", t, "1.3K max 0 0 5s max pageout",
         r#"schemes a.txt line 1, column 1: size "1.3K" is not a whole number of bytes (expected a size like 4K, 1.5M or 4096)"#.into()),
        ("a.txt", t, "16E max 0 0 5s max pageout",
         r#"schemes a.txt line 1, column 1: size "16E" is too large (expected at most 16 EiB minus one byte, or max)"#.into()),
        ("a.txt", t, "4K max 0 0 5s max pagout",
         r#"schemes a.txt line 1, column 19: unknown action "pagout" (expected one of willneed, cold, pageout, hugepage, nohugepage, collapse, lru_prio, lru_deprio, migrate_hot, migrate_cold, stat, mlock)"#.into()),
        // TOML
        ("a.toml", toml, "[[scheme]]\naction = \"pageout\"\nsizes = 1\n",
         r#"schemes a.toml line 3, column 1: unknown key "sizes" in scheme (expected one of action, access_pattern, apply_interval, quota, watermarks, filters, target_nid, dests, max_nr_snapshots)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"pageout\"\naccess_pattern = { sz = [\"4Q\", \"max\"] }\n",
         r#"schemes a.toml line 3, column 26: bad size "4Q" (expected a size like 4K, 2M, 2MB, min or max)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"paegout\"\n",
         r#"schemes a.toml line 2, column 10: unknown action "paegout" (expected one of willneed, cold, pageout, hugepage, nohugepage, collapse, lru_prio, lru_deprio, migrate_hot, migrate_cold, stat, mlock)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"stat\"\naccess_pattern = { age = \"5s\" }\n",
         r#"schemes a.toml line 3, column 26: age must be a [min, max] pair, not "5s" (expected two values like ["4K", "max"])"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"pageout\"\n[scheme.quota]\ntime = \"500us\"\n",
         r#"schemes a.toml line 4, column 8: quota time "500us" is not a whole number of milliseconds (expected a time like 100ms, 5s, 2m or 1h, min or max)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"pageout\"\n[scheme.watermarks]\nmetric = \"free_mem_rate\"\nhigh = 500\nmid = 600\nlow = 200\n",
         r#"schemes a.toml line 6, column 7: mid watermark 600 is above high watermark 500 (expected low <= mid <= high, in per-mille)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"stat\"\n[[scheme.filters]]\ntype = \"addr\"\nstart = \"0x2000\"\nend = \"0x1000\"\n",
         r#"schemes a.toml line 6, column 7: addr filter end 0x1000 is not above its start 0x2000 (expected start < end)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"stat\"\n[[scheme.filters]]\ntype = \"young\"\npath = \"/a\"\n",
         r#"schemes a.toml line 5, column 1: unknown key "path" in young filter (expected one of type, matching, allow)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"stat\"\n[[scheme.quota.goals]]\nmetric = \"free_bp\"\ntarget = 10\n",
         r#"schemes a.toml line 4, column 10: unknown goal metric "free_bp" (expected one of user_input, some_mem_psi_us, node_mem_used_bp, node_mem_free_bp, node_memcg_used_bp, node_memcg_free_bp, active_mem_bp, inactive_mem_bp, node_eligible_mem_bp, rss_bp, refault_rate)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"stat\"\n[[scheme.quota.goals]]\nmetric = \"node_memcg_used_bp\"\ntarget = \"30%\"\n",
         r#"schemes a.toml line 3, column 1: goal metric node_memcg_used_bp needs a memory cgroup (expected path = "/workload" (from the cgroup mount))"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"stat\"\n[[scheme.quota.goals]]\nmetric = \"active_mem_bp\"\ntarget = \"30%\"\npath = \"/a\"\n",
         r#"schemes a.toml line 6, column 8: goal metric active_mem_bp takes no memory cgroup (expected path only with node_memcg_used_bp or node_memcg_free_bp)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"migrate_hot\"\ndests = [{ node = 0, weight = 3 }, { node = 0, weight = 1 }]\n",
         r#"schemes a.toml line 3, column 36: node 0 is a destination twice (expected each node once in dests)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"migrate_hot\"\ndests = [{ node = 0, weight = 0 }]\n",
         r#"schemes a.toml line 3, column 9: every dest weight is 0: nothing would be migrated (expected at least one weight above 0)"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = \"pageout\"\n[scheme.quota]\nsize = \"1G\"\nfail_charge = \"1/0\"\n",
         r#"schemes a.toml line 5, column 15: bad fail charge ratio "1/0" (expected num/denom with denom above 0, e.g. "1/4" (a failed region charges a quarter of its size))"#.into()),
        ("a.toml", toml, "[[scheme]]\naction = pageout\n",
         r#"schemes a.toml line 2, column 10: invalid toml: string values must be quoted, expected literal string"#.into()),
        // JSON
        ("a.json", json, "{\"schemes\": [}",
         r#"schemes a.json line 1, column 14: invalid json: expected value"#.into()),
        ("a.json", json, "{\"schemes\": [{\"action\": \"stat\", \"filters\": [{\"type\": \"file\"}]}]}",
         r#"schemes a.json line 1, column 54: unknown filter type "file" (expected one of addr, target, anon, young, memcg, hugepage_size, unmapped, active)"#.into()),
        ("a.json", json, "[{\"access_pattern\": {}}]",
         r#"schemes a.json line 1, column 2: scheme has no "action" (expected a key "action")"#.into()),
        // damo's JSON
        ("damo.json", json, "{\"kdamonds\": [{\"contexts\": [{\"schemes\": [{\"action\": \"pageout\",\n \"access_pattern\": {\"sz_bytes\": {\"min\": 4096, \"max\": \"max\"}, \"nr_accesses\": {\"min\": \"0 samples\", \"max\": \"0 samples\"}}}]}]}]}",
         r#"schemes damo.json line 2, column 85: damo access frequency "0 samples" is in samples (expected percent ("5 %" or {"percent": 5}): samples depend on the monitoring intervals)"#.into()),
        ("damo.json", json, "[{\"action\": \"stat\", \"quotas\": {\"time_ms\": 0, \"fail_charge_num\": 1}}]",
         r#"schemes damo.json line 1, column 65: cannot import damo key "fail_charge_num": it needs fail_charge_denom above 0 (the kernel ignores it otherwise)"#.into()),
        ("damo.json", json, "[{\"action\": \"stat\", \"quotas\": {\"goals\": [{\"metric\": \"active_mem_bp\", \"complement\": true, \"target_value\": 5000}]}}]",
         r#"schemes damo.json line 1, column 84: cannot import damo key "complement": a complemented goal metric is not in the kernels udamon drives"#.into()),
    ]
}

#[test]
fn bad_inputs_give_exact_messages() {
    let mut failures = Vec::new();
    for (origin, format, src, want) in cases() {
        match parse(src, origin, format) {
            Ok(s) => failures.push(format!("{src:?} parsed: {s:?}")),
            Err(e) if e.to_string() != want => {
                failures.push(format!("{src:?}\n  got:  {e}\n  want: {want}"))
            }
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(cases().len() >= 15);
}

#[test]
fn error_fields_carry_token_and_expectation() {
    let e = parse("4K max 0 0 5s max pagout", "a.txt", None).unwrap_err();
    assert_eq!((e.line, e.column), (1, 19));
    assert_eq!(e.token, "pagout");
    assert!(e.expected.starts_with("one of willneed"));
    assert_eq!(e.msg, r#"unknown action "pagout""#);
}

#[test]
fn unreadable_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing.txt");
    let e = parse_file(&path).unwrap_err();
    assert_eq!((e.line, e.column), (0, 0));
    assert_eq!(
        e.to_string(),
        format!(
            "schemes {}: cannot read the file: no such file or directory (os error 2)",
            path.display()
        )
    );
}
