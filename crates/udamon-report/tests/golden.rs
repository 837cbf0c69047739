//! Golden tests: every report format over the checked-in record
//! `tests/data/golden.udr` (see `tests/common/golden.rs`).
//!
//! Re-generate the record: `cargo run -p udamon-report --example make_golden`.
//! Accept changed outputs: `INSTA_UPDATE=always cargo test -p udamon-report --test golden`
//! (or `cargo insta review` where cargo-insta is installed).

#[path = "common/golden.rs"]
mod golden;

use std::path::{Path, PathBuf};

use udamon_record::Reader;
use udamon_report::{
    heatmap, hot, wss, HeatmapFormat, HeatmapOptions, HotOptions, ImageOptions, WssOptions,
};

fn record() -> Reader {
    let path: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/golden.udr");
    Reader::open(&path).expect(
        "the golden record; re-generate with `cargo run -p udamon-report --example make_golden`",
    )
}

fn text(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut out = Vec::new();
    f(&mut out);
    String::from_utf8(out).unwrap()
}

/// JSON output, pretty-printed for readable diffs (after checking it is
/// one line).
fn json(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let s = text(f);
    assert_eq!(s.lines().count(), 1, "one JSON document per line");
    let v: serde_json::Value = serde_json::from_str(&s).unwrap();
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn record_matches_its_generator() {
    let r = record();
    assert!(r.tail().is_none());
    assert_eq!(
        r.snapshots().unwrap(),
        golden::snapshots(),
        "re-generate the record with the make_golden example"
    );
    assert_eq!(r.header(), &golden::header());
}

#[test]
fn heatmap_text() {
    let r = record();
    let hm = heatmap::build(&r, &HeatmapOptions::default(), HeatmapFormat::Text).unwrap();
    insta::assert_snapshot!("heatmap_text", text(|w| hm.write_text(w, false).unwrap()));
    let opts = HeatmapOptions {
        all: true,
        time_bins: Some(25),
        ..Default::default()
    };
    let hm = heatmap::build(&r, &opts, HeatmapFormat::Text).unwrap();
    insta::assert_snapshot!(
        "heatmap_text_all",
        text(|w| hm.write_text(w, false).unwrap())
    );
    let opts = HeatmapOptions {
        target: Some(1),
        time_bins: Some(5),
        addr_bins: Some(20),
        ..Default::default()
    };
    let hm = heatmap::build(&r, &opts, HeatmapFormat::Text).unwrap();
    insta::assert_snapshot!(
        "heatmap_text_color",
        text(|w| hm.write_text(w, true).unwrap())
    );
}

#[test]
fn heatmap_json() {
    let r = record();
    let opts = HeatmapOptions {
        time_bins: Some(10),
        addr_bins: Some(12),
        ..Default::default()
    };
    let hm = heatmap::build(&r, &opts, HeatmapFormat::Json).unwrap();
    insta::assert_snapshot!("heatmap_json", json(|w| hm.write_json(w).unwrap()));
}

#[test]
fn heatmap_images() {
    let r = record();
    let hm = heatmap::build(&r, &HeatmapOptions::default(), HeatmapFormat::Png).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("heatmap.png");
    hm.write_png(&png, &ImageOptions::default()).unwrap();
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    if let Ok(dir) = std::env::var("UDAMON_REPORT_PNG_DIR") {
        std::fs::copy(&png, Path::new(&dir).join("golden-heatmap.png")).unwrap();
    }
    let svg = text(|w| {
        hm.write_svg(
            w,
            &ImageOptions {
                title: Some("golden".into()),
                ..Default::default()
            },
        )
        .unwrap()
    });
    assert!(
        svg.starts_with("<svg") && svg.contains("golden") && svg.contains("time (s)"),
        "{}",
        &svg[..200]
    );
}

#[test]
fn wss_reports() {
    let r = record();
    let w = wss::build(&r, &WssOptions::default()).unwrap();
    insta::assert_snapshot!("wss_text", text(|o| w.write_text(o, false).unwrap()));
    insta::assert_snapshot!("wss_json", json(|o| w.write_json(o).unwrap()));
    let opts = WssOptions {
        acc_thres: 2,
        skip: 40,
        target: Some(0),
        ..Default::default()
    };
    let w = wss::build(&r, &opts).unwrap();
    insta::assert_snapshot!("wss_text_series", text(|o| w.write_text(o, true).unwrap()));
}

#[test]
fn hot_reports() {
    let r = record();
    let h = hot::build(&r, &HotOptions::default()).unwrap();
    insta::assert_snapshot!("hot_text", text(|w| h.write_text(w).unwrap()));
    insta::assert_snapshot!("hot_json", json(|w| h.write_json(w).unwrap()));
    let h = hot::build(
        &r,
        &HotOptions {
            at_us: Some(1_234_567),
            top: 3,
            ..Default::default()
        },
    )
    .unwrap();
    insta::assert_snapshot!("hot_text_at", text(|w| h.write_text(w).unwrap()));
    let opts = HotOptions {
        aggregate: true,
        time_range: Some((1_000_000, 3_000_000)),
        ..Default::default()
    };
    let h = hot::build(&r, &opts).unwrap();
    insta::assert_snapshot!("hot_aggregate_text", text(|w| h.write_text(w).unwrap()));
    insta::assert_snapshot!("hot_aggregate_json", json(|w| h.write_json(w).unwrap()));
}

#[test]
fn raw_json_lines() {
    let r = record();
    let out = text(|w| udamon_report::write_raw(&r, w).unwrap());
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2 + golden::NR_SNAPSHOTS as usize);
    assert_eq!(lines[0]["type"], "header");
    assert_eq!(lines[1]["type"], "snapshot");
    assert_eq!(lines.last().unwrap()["type"], "summary");
    insta::assert_snapshot!("raw", out);
}

#[test]
fn svg_stays_small() {
    let r = record();
    let hm = heatmap::build(&r, &HeatmapOptions::default(), HeatmapFormat::Svg).unwrap();
    let svg = text(|w| hm.write_svg(w, &ImageOptions::default()).unwrap());
    eprintln!("svg: {} bytes", svg.len());
    assert!(svg.len() < 4 << 20, "{} bytes", svg.len());
}

#[test]
fn html_page() {
    use udamon_report::html::{self, HtmlOptions};
    let r = record();
    let small = HtmlOptions {
        time_bins: Some(10),
        addr_bins: Some(12),
        ..Default::default()
    };
    let page = html::build(&r, &small).unwrap();
    // The page holds the reports' own models.
    let hm_opts = HeatmapOptions {
        time_bins: Some(10),
        addr_bins: Some(12),
        ..Default::default()
    };
    let hm = heatmap::build(&r, &hm_opts, HeatmapFormat::Json).unwrap();
    assert_eq!(page.heatmap, hm);
    assert_eq!(page.wss, wss::build(&r, &WssOptions::default()).unwrap());
    let hot_opts = HotOptions {
        aggregate: true,
        ..Default::default()
    };
    assert_eq!(page.hot, hot::build(&r, &hot_opts).unwrap());
    assert!(page.schemes.is_none());
    insta::assert_snapshot!(
        "html_data",
        serde_json::to_string_pretty(&html::page_data(&page)).unwrap()
    );
    let out = text(|w| html::write_html(w, &page, "golden </script>", "golden.udr").unwrap());
    assert!(out.contains("<h1>golden &lt;/script&gt;</h1>"));
    assert_eq!(
        out.matches("</script>").count(),
        2,
        "the data ends only its element"
    );

    // A part: times still count from the record's start, and only the
    // range's addresses make the working set.
    let part = HtmlOptions {
        time_range: Some((1_000_000, 3_000_000)),
        address_range: Some((golden::MMAP, golden::MMAP + 8 * golden::MIB)),
        ..small
    };
    let page = html::build(&r, &part).unwrap();
    assert_eq!(
        (page.heatmap.start_us, page.heatmap.end_us),
        (1_000_000, 3_000_000)
    );
    let want: Vec<(u64, u64)> = golden::snapshots()[10..30]
        .iter()
        .map(|s| {
            let wss = s
                .targets
                .iter()
                .flat_map(|t| &t.regions)
                .filter(|x| x.nr_accesses > 0)
                .map(|x| {
                    x.end
                        .min(golden::MMAP + 8 * golden::MIB)
                        .saturating_sub(x.start.max(golden::MMAP))
                })
                .sum();
            (s.end_us, wss)
        })
        .collect();
    let got: Vec<(u64, u64)> = page
        .wss
        .series
        .iter()
        .map(|p| (p.end_us, p.wss_bytes))
        .collect();
    assert_eq!(got, want);
    let udamon_report::Hot::Aggregate(a) = &page.hot else {
        panic!("{:?}", page.hot)
    };
    assert_eq!(
        (a.start_us, a.end_us, a.nr_snapshots),
        (1_000_000, 3_000_000, 20)
    );
    assert!(a
        .ranges
        .iter()
        .all(|x| x.start >= golden::MMAP && x.end <= golden::MMAP + 8 * golden::MIB));
}
