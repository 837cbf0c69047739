//! The estimated score curve: a least-squares polynomial over the samples,
//! and its peaks.
//!
//! The knob's range `[x_lo, x_hi]` is mapped to `u in [-1, 1]`
//! (`u = 2 (x - x_lo) / (x_hi - x_lo) - 1`) so the Vandermonde matrix stays
//! well conditioned, and the polynomial `sum c_k u^k` is solved by SVD least
//! squares (nalgebra). Peaks are where the derivative changes sign from
//! positive to negative on a dense grid (refined by bisection), plus either
//! end of the range when the curve rises toward it.

use nalgebra::{DMatrix, DVector};
use serde::Serialize;

use crate::error::{Error, Result};

/// A fitted polynomial in the normalised coordinate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fit {
    pub degree: usize,
    /// `c_0 .. c_degree` of `sum c_k u^k`.
    pub coeffs: Vec<f64>,
    /// The range mapped to `u = -1` and `u = 1`.
    pub x_lo: f64,
    pub x_hi: f64,
    /// Root mean square of the residuals at the samples.
    pub rmse: f64,
}

/// A local maximum of the fitted curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Peak {
    pub x: f64,
    /// The fitted score there.
    pub y: f64,
}

/// The DAOS degree rule: `nr_samples / 3`, and at most one less than the
/// number of distinct sample positions.
pub fn degree_for(nr_samples: usize, distinct_x: usize) -> usize {
    (nr_samples / 3).min(distinct_x.saturating_sub(1))
}

impl Fit {
    /// Normalised coordinate of `x`.
    pub fn to_u(&self, x: f64) -> f64 {
        let span = self.x_hi - self.x_lo;
        if span == 0.0 {
            0.0
        } else {
            2.0 * (x - self.x_lo) / span - 1.0
        }
    }

    fn x_of_u(&self, u: f64) -> f64 {
        self.x_lo + (u + 1.0) / 2.0 * (self.x_hi - self.x_lo)
    }

    fn eval_u(&self, u: f64) -> f64 {
        self.coeffs.iter().rev().fold(0.0, |acc, c| acc * u + c)
    }

    /// d/du of the polynomial.
    fn deriv_u(&self, u: f64) -> f64 {
        self.coeffs
            .iter()
            .enumerate()
            .skip(1)
            .rev()
            .fold(0.0, |acc, (k, c)| acc * u + k as f64 * c)
    }

    /// The fitted score at `x`.
    pub fn eval(&self, x: f64) -> f64 {
        self.eval_u(self.to_u(x))
    }

    /// The slope at `x`, per unit of `x`.
    pub fn slope(&self, x: f64) -> f64 {
        let span = self.x_hi - self.x_lo;
        if span == 0.0 {
            0.0
        } else {
            self.deriv_u(self.to_u(x)) * 2.0 / span
        }
    }

    /// Local maxima over the range from the derivative's sign changes on a
    /// grid of `grid` points, plus the ends where the curve rises toward
    /// them; the highest first. A flat curve has no peak.
    pub fn peaks(&self, grid: usize) -> Vec<Peak> {
        let grid = grid.max(2);
        let us: Vec<f64> = (0..grid)
            .map(|i| -1.0 + 2.0 * i as f64 / (grid - 1) as f64)
            .collect();
        let d: Vec<f64> = us.iter().map(|&u| self.deriv_u(u)).collect();
        let scale = self
            .coeffs
            .iter()
            .skip(1)
            .map(|c| c.abs())
            .fold(0.0, f64::max);
        let eps = scale * 1e-12;
        let mut out: Vec<f64> = Vec::new();
        if scale == 0.0 {
            return Vec::new();
        }
        if d[0] < -eps {
            out.push(-1.0);
        }
        for i in 0..grid - 1 {
            if d[i] > eps && d[i + 1] <= eps {
                // Bisect d = 0 within [u_i, u_{i+1}].
                let (mut a, mut b) = (us[i], us[i + 1]);
                for _ in 0..60 {
                    let m = 0.5 * (a + b);
                    if self.deriv_u(m) > 0.0 {
                        a = m;
                    } else {
                        b = m;
                    }
                }
                out.push(0.5 * (a + b));
            }
        }
        if d[grid - 1] > eps {
            out.push(1.0);
        }
        let mut peaks: Vec<Peak> = out
            .into_iter()
            .map(|u| Peak {
                x: self.x_of_u(u),
                y: self.eval_u(u),
            })
            .collect();
        peaks.sort_by(|a, b| b.y.total_cmp(&a.y).then(a.x.total_cmp(&b.x)));
        peaks.dedup_by(|a, b| (a.x - b.x).abs() <= 1e-9 * (self.x_hi - self.x_lo).abs());
        peaks
    }
}

/// Least-squares polynomial of `degree` through `(xs, ys)`, normalising
/// `[x_lo, x_hi]` to `[-1, 1]`.
pub fn polyfit(xs: &[f64], ys: &[f64], degree: usize, x_lo: f64, x_hi: f64) -> Result<Fit> {
    if xs.len() != ys.len() || xs.is_empty() {
        return Err(Error::Run(format!(
            "cannot fit {} scores at {} positions",
            ys.len(),
            xs.len()
        )));
    }
    let mut fit = Fit {
        degree,
        coeffs: vec![0.0; degree + 1],
        x_lo,
        x_hi,
        rmse: 0.0,
    };
    let a = DMatrix::from_fn(xs.len(), degree + 1, |i, k| fit.to_u(xs[i]).powi(k as i32));
    let b = DVector::from_column_slice(ys);
    let svd = a.svd(true, true);
    let c = svd
        .solve(&b, 1e-12)
        .map_err(|e| Error::Run(format!("polynomial fit failed: {e}")))?;
    fit.coeffs = c.iter().copied().collect();
    let sse: f64 = xs
        .iter()
        .zip(ys)
        .map(|(&x, &y)| (fit.eval(x) - y).powi(2))
        .sum();
    fit.rmse = (sse / xs.len() as f64).sqrt();
    Ok(fit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_a_known_polynomial() {
        // y = 3 - 2x + 0.5x^2 - 0.01x^3 over x in 0..60 (seconds), 10 samples.
        let f = |x: f64| 3.0 - 2.0 * x + 0.5 * x * x - 0.01 * x * x * x;
        let xs: Vec<f64> = [5.0, 17.0, 23.0, 36.0, 47.0, 55.0, 13.0, 15.0, 18.0, 19.0].to_vec();
        let ys: Vec<f64> = xs.iter().map(|&x| f(x)).collect();
        let fit = polyfit(&xs, &ys, 3, 0.0, 60.0).unwrap();
        for x in [0.0, 7.5, 30.0, 42.0, 60.0] {
            assert!(
                (fit.eval(x) - f(x)).abs() < 1e-6 * f(x).abs().max(1.0),
                "{x}: {}",
                fit.eval(x)
            );
        }
        assert!(fit.rmse < 1e-8);
        // the same with microsecond x: normalisation keeps it conditioned
        let xs_us: Vec<f64> = xs.iter().map(|x| x * 1e6).collect();
        let fit = polyfit(&xs_us, &ys, 3, 0.0, 60e6).unwrap();
        assert!((fit.eval(42e6) - f(42.0)).abs() < 1e-6 * f(42.0).abs());
        assert!((fit.slope(10e6) - (-2.0 + 10.0 - 0.03 * 100.0) / 1e6).abs() < 1e-12);
    }

    #[test]
    fn least_squares_through_noise() {
        // a line through symmetric noise: the noise cancels
        let xs = [0.0, 0.0, 1.0, 1.0, 2.0, 2.0];
        let ys = [1.1, 0.9, 3.1, 2.9, 5.1, 4.9];
        let fit = polyfit(&xs, &ys, 1, 0.0, 2.0).unwrap();
        assert!((fit.eval(0.0) - 1.0).abs() < 1e-12 && (fit.eval(2.0) - 5.0).abs() < 1e-12);
        assert!((fit.rmse - 0.1).abs() < 1e-12);
        assert_eq!(degree_for(10, 10), 3);
        assert_eq!(degree_for(10, 2), 1);
        assert_eq!(degree_for(2, 2), 0);
    }

    fn fit_of(coeffs: &[f64], lo: f64, hi: f64) -> Fit {
        Fit {
            degree: coeffs.len() - 1,
            coeffs: coeffs.to_vec(),
            x_lo: lo,
            x_hi: hi,
            rmse: 0.0,
        }
    }

    #[test]
    fn peaks_of_known_curves() {
        // -(u - 0.2)^2: one interior peak at u = 0.2, i.e. x = 36 over 0..60
        let f = fit_of(&[-0.04, 0.4, -1.0], 0.0, 60.0);
        let p = f.peaks(1001);
        assert_eq!(p.len(), 1);
        assert!(
            (p[0].x - 36.0).abs() < 1e-9 && p[0].y.abs() < 1e-12,
            "{p:?}"
        );
        // increasing: the upper end; decreasing: the lower end
        assert_eq!(
            fit_of(&[0.0, 1.0], 0.0, 60.0).peaks(101),
            vec![Peak { x: 60.0, y: 1.0 }]
        );
        assert_eq!(
            fit_of(&[0.0, -1.0], 0.0, 60.0).peaks(101),
            vec![Peak { x: 0.0, y: 1.0 }]
        );
        // u^3 - u: a local max at u = -1/sqrt(3) (0.385) and the upper end (0)
        let f = fit_of(&[0.0, -1.0, 0.0, 1.0], -1.0, 1.0);
        let p = f.peaks(1001);
        assert_eq!(p.len(), 2, "{p:?}");
        let m = -1.0 / 3f64.sqrt();
        assert!((p[0].x - m).abs() < 1e-9, "{p:?}");
        assert!((p[0].y - (m * m * m - m)).abs() < 1e-12);
        assert_eq!(p[1].x, 1.0);
        // the lower end is a minimum here (the curve rises away from it): not a peak
        assert!(p.iter().all(|q| q.x != -1.0));
        // two humps, the right one higher: -(u^2 - 0.25)^2 + 0.1u
        let f = fit_of(&[-0.0625, 0.1, 0.5, 0.0, -1.0], 0.0, 100.0);
        let p = f.peaks(2001);
        assert_eq!(p.len(), 2);
        assert!(p[0].x > 50.0 && p[1].x < 50.0 && p[0].y > p[1].y, "{p:?}");
        // flat: no peak
        assert!(fit_of(&[2.0], 0.0, 1.0).peaks(11).is_empty());
    }
}
