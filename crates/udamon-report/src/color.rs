//! The colour map shared by every heatmap renderer: dark purple for cold,
//! through blue and green, to bright yellow for hot (viridis).

/// Viridis at 9 evenly spaced stops, interpolated linearly in between.
const VIRIDIS: [(u8, u8, u8); 9] = [
    (68, 1, 84),
    (71, 44, 122),
    (59, 81, 139),
    (44, 113, 142),
    (33, 144, 141),
    (39, 173, 129),
    (92, 200, 99),
    (170, 220, 50),
    (253, 231, 37),
];

/// RGB colour of an access frequency in `0..=1` (clamped).
pub fn rgb(freq: f64) -> (u8, u8, u8) {
    let x = if freq.is_nan() {
        0.0
    } else {
        freq.clamp(0.0, 1.0)
    } * (VIRIDIS.len() - 1) as f64;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let t = x - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |p: u8, q: u8| (f64::from(p) + (f64::from(q) - f64::from(p)) * t).round() as u8;
    (mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Number of levels of the text heatmap.
pub const LEVELS: u8 = 10;

/// Text level of an access frequency: 0 for no access at all, otherwise
/// `1 + floor(freq * 9)` capped at 9, so any access shows as at least 1 and
/// 9 means at least 8/9 of the samples saw an access.
pub fn level(freq: f64) -> u8 {
    if freq.is_nan() || freq <= 0.0 {
        0
    } else {
        (1 + (freq * 9.0).floor() as u8).min(LEVELS - 1)
    }
}

/// The xterm 256-colour palette entries closest to viridis for each level.
pub const ANSI_256: [u8; LEVELS as usize] = [53, 54, 61, 24, 30, 36, 35, 113, 148, 226];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_ends() {
        assert_eq!(level(0.0), 0);
        assert_eq!(level(1e-6), 1);
        assert_eq!(level(0.5), 5);
        assert_eq!(level(8.0 / 9.0), 9);
        assert_eq!(level(1.0), 9);
        assert_eq!(rgb(0.0), VIRIDIS[0]);
        assert_eq!(rgb(1.0), VIRIDIS[8]);
        assert_eq!(rgb(2.0), VIRIDIS[8]);
    }
}
