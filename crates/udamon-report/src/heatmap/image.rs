//! The heatmap as a PNG or SVG image.
//!
//! Time runs along the x axis (seconds since the record's start), addresses
//! up the y axis (labelled in hex), as in the DAMON papers' figures. Cells
//! use the viridis map (dark purple cold, yellow hot), with a colour bar on
//! the right; never-monitored cells are light grey. A white line marks each
//! collapsed gap, labelled with the gap's size.
//!
//! Text is drawn with DejaVu Sans from the `dejavu` crate, registered with
//! plotters' `ab_glyph` backend, so no system font is needed.

use std::io::Write;
use std::ops::RangeInclusive;
use std::path::Path;
use std::sync::Once;

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use super::Heatmap;
use crate::color::rgb;
use crate::human::{fmt_addr, fmt_bytes};
use crate::Error;

/// Font family name the images use.
const FONT: &str = "sans-serif";

/// Image size and title. Every field maps to one command-line flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageOptions {
    /// Image width in pixels. Default: 1000.
    pub width: u32,
    /// Image height in pixels. Default: 700.
    pub height: u32,
    /// Title above the plot. Default: "udamon heatmap of target N".
    pub title: Option<String>,
}

impl Default for ImageOptions {
    fn default() -> Self {
        Self {
            width: 1000,
            height: 700,
            title: None,
        }
    }
}

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bundled fonts are valid; a failure would only mean text-less images.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, dejavu::sans::bold());
    });
}

/// The image widths drawn, in pixels.
pub const WIDTH_RANGE: RangeInclusive<u32> = 300..=20_000;
/// The image heights drawn, in pixels.
pub const HEIGHT_RANGE: RangeInclusive<u32> = 200..=20_000;

fn check(opts: &ImageOptions) -> Result<(), Error> {
    if !WIDTH_RANGE.contains(&opts.width) || !HEIGHT_RANGE.contains(&opts.height) {
        return Err(Error::InvalidOption(format!(
            "image size {}x{} is outside {}x{} .. {}x{}",
            opts.width,
            opts.height,
            WIDTH_RANGE.start(),
            HEIGHT_RANGE.start(),
            WIDTH_RANGE.end(),
            HEIGHT_RANGE.end()
        )));
    }
    Ok(())
}

impl Heatmap {
    /// Draws the heatmap into a PNG file at `path`, whatever its name
    /// (layout in docs/reports.md).
    pub fn write_png(&self, path: &Path, opts: &ImageOptions) -> Result<(), Error> {
        write_png(self, path, opts)
    }

    /// Writes the heatmap as an SVG document to `w`.
    pub fn write_svg(&self, w: &mut dyn Write, opts: &ImageOptions) -> Result<(), Error> {
        write_svg(self, w, opts)
    }
}

fn write_png(hm: &Heatmap, path: &Path, opts: &ImageOptions) -> Result<(), Error> {
    check(opts)?;
    register_fonts();
    let (w, h) = (opts.width, opts.height);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        draw(&root, hm, opts).map_err(|e| Error::Plot(e.to_string()))?;
        root.present().map_err(|e| Error::Plot(e.to_string()))?;
    }
    // Encoded here so that a failed write reads as an I/O error; PNG
    // whatever the name (the caller may write a temporary file first).
    image::save_buffer_with_format(
        path,
        &rgb,
        w,
        h,
        image::ColorType::Rgb8,
        image::ImageFormat::Png,
    )
    .map_err(|e| match e {
        image::ImageError::IoError(io) => Error::Io(io),
        e => Error::Plot(e.to_string()),
    })
}

fn write_svg(hm: &Heatmap, w: &mut dyn Write, opts: &ImageOptions) -> Result<(), Error> {
    check(opts)?;
    register_fonts();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (opts.width, opts.height)).into_drawing_area();
        draw(&root, hm, opts).map_err(|e| Error::Plot(e.to_string()))?;
        root.present().map_err(|e| Error::Plot(e.to_string()))?;
    }
    w.write_all(svg.as_bytes())?;
    Ok(())
}

type DrawResult<E> = Result<(), DrawingAreaErrorKind<E>>;

/// The colour of a frequency, quantized to 1/128 steps (invisible, and it
/// lets runs of near-equal cells merge into one rectangle, keeping SVGs small).
fn color(freq: f64) -> RGBColor {
    let (r, g, b) = rgb((freq * 128.0).round() / 128.0);
    RGBColor(r, g, b)
}

const UNMONITORED: RGBColor = RGBColor(225, 225, 225);
/// Width of the colour bar's area, labels included.
const BAR_WIDTH: u32 = 120;

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    hm: &Heatmap,
    opts: &ImageOptions,
) -> DrawResult<DB::ErrorType> {
    root.fill(&WHITE)?;
    let title = opts
        .title
        .clone()
        .unwrap_or_else(|| format!("udamon heatmap of target {}", hm.target_idx));
    let root = root.titled(&title, (FONT, 22).into_font().style(FontStyle::Bold))?;
    let (w, _) = root.dim_in_pixel();
    let (main, bar) = root.split_horizontally(w.saturating_sub(BAR_WIDTH));

    let (t0, t1) = (hm.start_us as f64 / 1e6, hm.end_us as f64 / 1e6);
    let len = hm.axis_bytes as f64;
    let x_label_area = 50;
    let mut chart = ChartBuilder::on(&main)
        .margin_left(10)
        .margin_right(15)
        .margin_top(10)
        .margin_bottom(10)
        .x_label_area_size(x_label_area)
        .y_label_area_size(130)
        .build_cartesian_2d(t0..t1, 0f64..len)?;
    let span = t1 - t0;
    let decimals = if span >= 100.0 {
        0
    } else if span >= 10.0 {
        1
    } else {
        2
    };
    let window = match hm.window {
        super::AddressWindow::Active => "active window",
        super::AddressWindow::All => "all monitored",
        super::AddressWindow::Given => "given range",
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("time (s)")
        .y_desc(format!(
            "address ({window}, {} shown)",
            fmt_bytes(hm.axis_bytes)
        ))
        .x_labels(10)
        .y_labels(8)
        .x_label_formatter(&|x| format!("{x:.decimals$}"))
        .y_label_formatter(&|y| fmt_addr(hm.addr_at(y.max(0.0) as u64) & !0xfff))
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .draw()?;

    chart.plotting_area().fill(&UNMONITORED)?;
    let rects = cell_rects(hm, (t0, t1), len);
    chart.draw_series(rects)?;

    draw_gaps(&root, &mut chart, hm, (t0, t1))?;

    // Colour bar, aligned with the plot vertically.
    draw_colour_bar(&bar, x_label_area)
}

/// The cells as rectangles, a run of cells of one colour in a row as one,
/// never-monitored cells left out.
fn cell_rects(hm: &Heatmap, (t0, t1): (f64, f64), len: f64) -> Vec<Rectangle<(f64, f64)>> {
    let tw = (t1 - t0) / hm.time_bins as f64;
    let bw = len / hm.addr_bins as f64;
    let mut rects = Vec::new();
    for t in 0..hm.time_bins {
        let (x0, x1) = (t0 + t as f64 * tw, t0 + (t + 1) as f64 * tw);
        let row = hm.row(t);
        let mut a = 0;
        while a < row.len() {
            if row[a].is_nan() {
                a += 1;
                continue;
            }
            let c = color(row[a]);
            let mut b = a + 1;
            while b < row.len() && !row[b].is_nan() && color(row[b]) == c {
                b += 1;
            }
            rects.push(Rectangle::new(
                [(x0, a as f64 * bw), (x1, b as f64 * bw)],
                c.filled(),
            ));
            a = b;
        }
    }
    rects
}

/// A white line at each collapsed gap, with a tag giving the gap's size.
fn draw_gaps<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    hm: &Heatmap,
    (t0, t1): (f64, f64),
) -> DrawResult<DB::ErrorType> {
    for g in hm.segments.iter().skip(1) {
        let y = g.axis_offset as f64;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(t0, y), (t1, y)],
            WHITE.stroke_width(2),
        )))?;
        let label = format!("gap {}", fmt_bytes(g.gap_before));
        let style = (FONT, 12).into_font().color(&BLACK);
        let (px, py) = chart.backend_coord(&(t0, y));
        let (tw_px, th_px) = root.estimate_text_size(&label, &style)?;
        let (ox, oy) = root.get_base_pixel();
        // A white tag just above the line, at its left end.
        let (x0, y1) = (px - ox + 3, py - oy - 2);
        let (x1, y0) = (x0 + tw_px as i32 + 8, y1 - th_px as i32 - 8);
        root.draw(&Rectangle::new([(x0, y0), (x1, y1)], WHITE.filled()))?;
        root.draw_text(&label, &style, (x0 + 4, y0 + 3))?;
    }
    Ok(())
}

/// The colour bar and its label, aligned with the plot vertically (the
/// plot's x label area is `x_label_area`).
fn draw_colour_bar<DB: DrawingBackend>(
    bar: &DrawingArea<DB, Shift>,
    x_label_area: i32,
) -> DrawResult<DB::ErrorType> {
    let mut cb = ChartBuilder::on(bar)
        .margin_top(10)
        .margin_bottom(10)
        .margin_right(10)
        .x_label_area_size(x_label_area)
        .right_y_label_area_size(50)
        .build_cartesian_2d(0f64..1f64, 0f64..1f64)?;
    cb.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(6)
        .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .label_style((FONT, 13))
        .draw()?;
    const STEPS: usize = 100;
    cb.draw_series((0..STEPS).map(|i| {
        let (y0, y1) = (i as f64 / STEPS as f64, (i + 1) as f64 / STEPS as f64);
        Rectangle::new([(0.0, y0), (1.0, y1)], color((y0 + y1) / 2.0).filled())
    }))?;
    let style = (FONT, 13).into_font().color(&BLACK);
    let (_, bh_px) = bar.dim_in_pixel();
    // Centred under the bar (the bar spans the area less the right labels).
    let centre = (BAR_WIDTH as i32 - 10 - 50) / 2;
    for (k, text) in ["access", "frequency"].into_iter().enumerate() {
        let (tw_px, th_px) = bar.estimate_text_size(text, &style)?;
        let y = bh_px as i32 - x_label_area + 2 + k as i32 * (th_px as i32 + 3);
        bar.draw_text(text, &style, ((centre - tw_px as i32 / 2).max(2), y))?;
    }
    Ok(())
}
