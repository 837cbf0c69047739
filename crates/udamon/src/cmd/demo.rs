//! `udamon demo`: the built-in workload, recorded and reported end to end.

use std::io::{self, BufWriter, Write};

use anyhow::Result;
use udamon_cli::DemoArgs;
use udamon_report::{fmt_bytes, fmt_us};
use udamon_report::{heatmap, wss, HeatmapFormat, HeatmapOptions, ImageOptions, WssOptions};
use udamon_session::sim::SimRun;
use udamon_sim::{AccuracyAcc, AccuracyOptions, Workload, DEMO_SPEC};

use crate::inputs::{open_record, sim_model, title};
use crate::output::{print_accuracy, run_sim};

pub fn run(a: DemoArgs) -> Result<()> {
    crate::output::prepare("--output", &a.output, &[], &[&a.image])?;
    crate::output::check_output("--image", &a.image, &[], &[&a.output])?;
    let run = SimRun {
        seed: Some(a.seed),
        ..SimRun::new(DEMO_SPEC, "demo")
    };
    let s = run_sim(&run, Some(&a.output), None)?;
    let reader = open_record(&a.output)?;
    let mut out = BufWriter::new(io::stdout().lock());
    writeln!(
        out,
        "udamon demo: eight 64 MiB objects touched one after another, a small hot area in a cold 1 GiB mapping"
    )?;
    writeln!(
        out,
        "{:.0}s simulated in {:.2}s, {} snapshots, {:.0} regions on average",
        s.simulated_s, s.elapsed_s, s.snapshots, s.avg_nr_regions
    )?;
    writeln!(
        out,
        "(a region is an address range taken to be accessed evenly: every sampling interval, \
         5 ms, one page of each region is checked; its nr_accesses counts the checks that found \
         it accessed in one aggregation window, 100 ms, so 0 to 20; a snapshot is every \
         region's nr_accesses at the end of a window)\n"
    )?;
    let hm = heatmap::build(&reader, &HeatmapOptions::default(), HeatmapFormat::Text)?;
    hm.write_text(&mut out, a.color.enabled())?;
    writeln!(out)?;
    look_for(&mut out, &a.output.display().to_string())?;
    writeln!(out)?;
    let w = wss::build(&reader, &WssOptions::default())?;
    w.write_text(&mut out, false)?;
    writeln!(out)?;
    out.flush()?;
    drop(out);

    let (model, _) = sim_model(&reader, &a.output)?;
    let mut acc = AccuracyAcc::new(AccuracyOptions::default());
    reader.for_each_snapshot(|snap| acc.push(&model, snap))?;
    print_accuracy(&acc.finish(), "adaptive");

    let image = ImageOptions {
        title: Some(title(&reader, &a.output)),
        ..ImageOptions::default()
    };
    let ext = a.image.extension().and_then(|e| e.to_str()).unwrap_or("");
    let format = if ext == "svg" {
        HeatmapFormat::Svg
    } else {
        HeatmapFormat::Png
    };
    let img_hm = heatmap::build(&reader, &HeatmapOptions::default(), format)?;
    crate::output::write_image(&img_hm, format, &image, &a.image)?;
    println!("\nwrote {} and {}", a.output.display(), a.image.display());
    println!(
        "next: udamon report heatmap {} --all, udamon report hot {}",
        a.output.display(),
        a.output.display()
    );
    Ok(())
}

/// What the newcomer should see in the heatmap above, from the demo's own
/// spec: the objects hot in turn, and the small always-hot area that one
/// text column is too wide to show clearly.
fn look_for(out: &mut impl Write, record: &str) -> Result<()> {
    let w = Workload::from_toml(DEMO_SPEC, "demo")?;
    let obj = |n: &str| w.objects.iter().find(|o| o.name == n);
    let (Some(first), Some(cold)) = (obj("obj0"), obj("cold")) else {
        return Ok(());
    };
    let always_hot = w.phases[0].accesses.iter().map(|a| a.range).find(|r| {
        cold.range.start <= r.start
            && r.end <= cold.range.end
            && w.phases
                .iter()
                .all(|p| p.accesses.iter().any(|a| a.range == *r))
    });
    writeln!(out, "what to look for:")?;
    writeln!(
        out,
        "  the staircase in the first segment: obj0..obj7 ({} each, from {:#x}) hot one after \
         another, {} each",
        fmt_bytes(first.range.sz()),
        first.range.start,
        fmt_us(w.phases[0].duration_us)
    )?;
    if let Some(r) = always_hot {
        let pad = 3 * r.sz();
        writeln!(
            out,
            "  the always-hot {} at {:#x}, inside the cold {} mapping: the faint column in the \
             second segment (a column averages it with much cold memory); zoom in with\n    \
             udamon report heatmap {record} --address-range {:#x}-{:#x}",
            fmt_bytes(r.sz()),
            r.start,
            fmt_bytes(cold.range.sz()),
            r.start.saturating_sub(pad),
            r.end + pad
        )?;
    }
    Ok(())
}
