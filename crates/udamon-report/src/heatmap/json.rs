//! The heatmap as JSON.

use std::io::Write;

use serde::Serialize;

use super::{AddressWindow, Heatmap, Segment};
use crate::Error;

/// Rounds a cell to 4 decimals (plenty for a colour, and stable output).
fn round4(v: f64) -> f64 {
    (v * 1e4).round() / 1e4
}

#[derive(Serialize)]
struct Json<'a> {
    report: &'static str,
    target_idx: u32,
    record_start_us: u64,
    start_us: u64,
    end_us: u64,
    time_bins: usize,
    time_bin_us: f64,
    addr_bins: usize,
    addr_bin_bytes: f64,
    axis_bytes: u64,
    monitored_bytes: u64,
    window: AddressWindow,
    access_share: Option<f64>,
    nr_snapshots: usize,
    segments: &'a [Segment],
    cells: Vec<Vec<Option<f64>>>,
}

impl Heatmap {
    /// Writes the heatmap as one JSON object on one line (keys in
    /// docs/reports.md): `cells` is a list of rows, one per time bin, of
    /// access frequencies in `0..=1` rounded to 4 decimals, or `null` for
    /// cells no region ever covered.
    pub fn write_json(&self, w: &mut dyn Write) -> Result<(), Error> {
        let j = Json {
            report: "heatmap",
            target_idx: self.target_idx,
            record_start_us: self.record_start_us,
            start_us: self.start_us,
            end_us: self.end_us,
            time_bins: self.time_bins,
            time_bin_us: round4(self.time_bin_us()),
            addr_bins: self.addr_bins,
            addr_bin_bytes: round4(self.addr_bin_bytes()),
            axis_bytes: self.axis_bytes,
            monitored_bytes: self.monitored_bytes,
            window: self.window,
            access_share: self.access_share.map(round4),
            nr_snapshots: self.nr_snapshots,
            segments: &self.segments,
            cells: (0..self.time_bins)
                .map(|t| {
                    self.row(t)
                        .iter()
                        .map(|&v| (!v.is_nan()).then(|| round4(v)))
                        .collect()
                })
                .collect(),
        };
        serde_json::to_writer(&mut *w, &j).map_err(std::io::Error::from)?;
        writeln!(w)?;
        Ok(())
    }
}
