//! The heatmap for a terminal.
//!
//! One row per time bin, time going down (as damo prints it, so a long
//! record scrolls instead of overflowing the terminal width), one column
//! per address bin, lower addresses on the left. A `|` column marks a
//! collapsed gap between segments. Cells are the levels of
//! [`crate::color::level`]: with colour, 256-colour ANSI background blocks
//! of the viridis map; without, the digits `0`-`9`. Blank cells were never
//! monitored.

use std::io::Write;

use super::{AddressWindow, Heatmap};
use crate::color::{level, ANSI_256, LEVELS};
use crate::human::{fmt_addr, fmt_bytes, fmt_us};
use crate::Error;

/// Columns between candidate intermediate address labels (placed left to
/// right where they fit).
const TICK_EVERY: usize = 4;

impl Heatmap {
    /// Writes the heatmap for a terminal (layout in the module docs of
    /// `heatmap::text`, or docs/reports.md). `color` turns on ANSI
    /// 256-colour cells; the caller decides, e.g. from whether stdout is a
    /// terminal.
    pub fn write_text(&self, w: &mut dyn Write, color: bool) -> Result<(), Error> {
        write_text(self, w, color)
    }
}

fn write_text(hm: &Heatmap, w: &mut dyn Write, color: bool) -> Result<(), Error> {
    let tw = hm.time_bin_us();
    let bw = hm.addr_bin_bytes();
    write_header(hm, w, tw, bw)?;

    let (seps, pos) = columns(hm, bw);

    let decimals = time_decimals(tw);
    let labels: Vec<String> = (0..hm.time_bins)
        .map(|t| secs_label(hm.start_us as f64 + t as f64 * tw, decimals))
        .collect();
    let lw = labels.iter().map(String::len).max().unwrap_or(0);
    let indent = " ".repeat(lw + 1);

    // Address labels and ruler.
    let (line, ruler) = address_axis(hm, bw, &seps, &pos);
    writeln!(w, "{indent}{}", line.iter().collect::<String>().trim_end())?;
    writeln!(w, "{indent}{}", ruler.iter().collect::<String>())?;

    write_rows(hm, w, &labels, &seps, color)?;

    // Legend.
    write_legend(hm, w, color)
}

/// The two header lines: the target and time span, the address span.
fn write_header(hm: &Heatmap, w: &mut dyn Write, tw: f64, bw: f64) -> Result<(), Error> {
    writeln!(
        w,
        "# heatmap of target {}: time {} .. {} since record start, {} per row",
        hm.target_idx,
        secs_label(hm.start_us as f64, 2),
        secs_label(hm.end_us as f64, 2),
        fmt_us(tw.round() as u64),
    )?;
    let window = match hm.window {
        AddressWindow::Active => match hm.access_share {
            Some(s) => format!("active window with {:.1}% of accesses", s * 100.0),
            None => "no accesses, whole range".to_string(),
        },
        AddressWindow::All => "all monitored spans".to_string(),
        AddressWindow::Given => "given address range".to_string(),
    };
    writeln!(
        w,
        "# address: {} shown of {} monitored, {} per column ({window})",
        fmt_bytes(hm.axis_bytes),
        fmt_bytes(hm.monitored_bytes),
        fmt_bytes(bw.round() as u64),
    )?;
    Ok(())
}

/// Where the address bins are printed: the separator columns before each
/// bin (and the end), and each bin's printed position (and the end's).
fn columns(hm: &Heatmap, bw: f64) -> (Vec<usize>, Vec<usize>) {
    // Separator columns: a collapsed gap goes before the bin its boundary
    // falls nearest to.
    let mut seps = vec![0usize; hm.addr_bins + 1];
    for g in hm.segments.iter().skip(1) {
        let col = ((g.axis_offset as f64 / bw).round() as usize).min(hm.addr_bins);
        seps[col] += 1;
    }
    // Printed position of each bin (and of the end).
    let mut pos = Vec::with_capacity(hm.addr_bins + 1);
    let mut p = 0;
    for (c, &n) in seps.iter().enumerate() {
        p += n;
        pos.push(p + c);
    }
    (seps, pos)
}

/// The address labels line and the ruler under it: the segments' starts,
/// the last one's end, intermediate addresses where they fit.
fn address_axis(hm: &Heatmap, bw: f64, seps: &[usize], pos: &[usize]) -> (Vec<char>, Vec<char>) {
    let width = pos[hm.addr_bins];
    let mut line = vec![' '; width];
    let mut ruler: Vec<char> = vec!['-'; width];
    for (c, &n) in seps.iter().enumerate() {
        for k in 0..n {
            ruler[pos[c] - n + k] = '|';
        }
    }
    let mut placed: Vec<(usize, usize)> = Vec::new();
    let mut place =
        |line: &mut Vec<char>, ruler: &mut Vec<char>, at: usize, text: &str, right: bool| {
            let len = text.len();
            let start = if right {
                (at + 1).saturating_sub(len)
            } else {
                at
            };
            let end = start + len;
            if end > width || placed.iter().any(|&(s, e)| start < e + 1 && s < end + 1) {
                return;
            }
            line[start..end]
                .iter_mut()
                .zip(text.chars())
                .for_each(|(c, t)| *c = t);
            ruler[at] = '+';
            placed.push((start, end));
        };
    let col_of =
        |off: u64| ((off as f64 / bw).round() as usize).min(hm.addr_bins.saturating_sub(1));
    for g in &hm.segments {
        place(
            &mut line,
            &mut ruler,
            pos[col_of(g.axis_offset)],
            &fmt_addr(g.addr_start),
            false,
        );
    }
    if let Some(last) = hm.segments.last() {
        place(
            &mut line,
            &mut ruler,
            width - 1,
            &fmt_addr(last.addr_end),
            true,
        );
    }
    for c in (TICK_EVERY..hm.addr_bins).step_by(TICK_EVERY) {
        let addr = hm.addr_at((c as f64 * bw).round() as u64);
        place(
            &mut line,
            &mut ruler,
            pos[c],
            &fmt_addr(addr & !0xfff),
            false,
        );
    }
    (line, ruler)
}

/// A row per time bin: its label, then its cells.
fn write_rows(
    hm: &Heatmap,
    w: &mut dyn Write,
    labels: &[String],
    seps: &[usize],
    color: bool,
) -> Result<(), Error> {
    let lw = labels.iter().map(String::len).max().unwrap_or(0);
    let mut out = String::new();
    for (t, label) in labels.iter().enumerate() {
        out.clear();
        out.push_str(&format!("{label:>lw$} "));
        let mut cur: Option<u8> = None;
        for (a, &v) in hm.row(t).iter().enumerate() {
            if seps[a] > 0 {
                reset(&mut out, &mut cur, color);
                out.push_str(&"|".repeat(seps[a]));
            }
            if v.is_nan() {
                reset(&mut out, &mut cur, color);
                out.push(' ');
            } else if color {
                let c = ANSI_256[level(v) as usize];
                if cur != Some(c) {
                    out.push_str(&format!("\x1b[48;5;{c}m"));
                    cur = Some(c);
                }
                out.push(' ');
            } else {
                out.push(char::from(b'0' + level(v)));
            }
        }
        reset(&mut out, &mut cur, color);
        out.push_str(&"|".repeat(seps[hm.addr_bins]));
        writeln!(w, "{}", out.trim_end())?;
    }
    Ok(())
}

/// The legend, then the segments.
fn write_legend(hm: &Heatmap, w: &mut dyn Write, color: bool) -> Result<(), Error> {
    let mut legend = String::from("# legend: ");
    for l in 0..LEVELS {
        if color {
            legend.push_str(&format!("\x1b[48;5;{}m{l}\x1b[0m", ANSI_256[l as usize]));
        } else {
            legend.push(char::from(b'0' + l));
        }
    }
    legend.push_str(" = access frequency: 0 none, n in ((n-1)/9, n/9], blank = not monitored, | = collapsed gap");
    writeln!(w, "{legend}")?;
    for (i, g) in hm.segments.iter().enumerate() {
        let gap = if i > 0 {
            format!(" after a {} gap", fmt_bytes(g.gap_before))
        } else {
            String::new()
        };
        writeln!(
            w,
            "# segment {}: {}..{} ({}){gap}",
            i + 1,
            fmt_addr(g.addr_start),
            fmt_addr(g.addr_end),
            fmt_bytes(g.len())
        )?;
    }
    Ok(())
}

fn reset(out: &mut String, cur: &mut Option<u8>, color: bool) {
    if color && cur.take().is_some() {
        out.push_str("\x1b[0m");
    }
}

/// Decimals that tell consecutive time bins of `tw` microseconds apart.
fn time_decimals(tw: f64) -> usize {
    let s = tw / 1e6;
    if s <= 0.0 {
        return 3;
    }
    ((-s.log10()).ceil() + 1.0).clamp(0.0, 6.0) as usize
}

fn secs_label(us: f64, decimals: usize) -> String {
    format!("{} s", crate::human::secs(us, decimals))
}
