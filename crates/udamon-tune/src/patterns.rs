//! The six score-curve patterns of the DAOS paper's Figure 3, for a score
//! curve ordered by increasing aggressiveness (for `min_age`: decreasing
//! value). The first point is the least aggressive one, close to "no
//! schemes" (score 0).

use serde::Serialize;

/// One of Figure 3's patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Pattern {
    /// 1: the score increases with aggressiveness (memory efficiency dominates).
    Increases,
    /// 2: increases, then decreases, but stays better than no action.
    RisesThenFallsAbove,
    /// 3: increases, then decreases to no better than no action.
    RisesThenFallsBelow,
    /// 4: the score decreases with aggressiveness (performance dominates).
    Decreases,
    /// 5: decreases, then increases, but stays worse than no action.
    FallsThenRisesBelow,
    /// 6: decreases, then increases to better than no action.
    FallsThenRisesAbove,
}

impl Pattern {
    /// The paper's number (1-6).
    pub fn number(self) -> u8 {
        match self {
            Pattern::Increases => 1,
            Pattern::RisesThenFallsAbove => 2,
            Pattern::RisesThenFallsBelow => 3,
            Pattern::Decreases => 4,
            Pattern::FallsThenRisesBelow => 5,
            Pattern::FallsThenRisesAbove => 6,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Pattern::Increases => "increases",
            Pattern::RisesThenFallsAbove => "rises, falls, stays above none",
            Pattern::RisesThenFallsBelow => "rises, falls below none",
            Pattern::Decreases => "decreases",
            Pattern::FallsThenRisesBelow => "falls, rises, stays below none",
            Pattern::FallsThenRisesAbove => "falls, rises above none",
        }
    }
}

/// Classifies a score curve given from the least to the most aggressive
/// setting. Differences below `max(0.002, 3% of the largest |score|)` are
/// treated as flat; `None` for a flat curve or one that fits no pattern.
pub fn classify(scores: &[f64]) -> Option<Pattern> {
    let last = *scores.last()?;
    let big = scores.iter().fold(0.0f64, |m, s| m.max(s.abs()));
    let tol = (0.03 * big).max(0.002);
    let (mut ip, mut it) = (0, 0);
    for (i, &s) in scores.iter().enumerate() {
        if s > scores[ip] {
            ip = i;
        }
        if s < scores[it] {
            it = i;
        }
    }
    let (peak, trough) = (scores[ip], scores[it]);
    if peak > tol {
        if trough < -tol && it < ip && last >= peak - tol {
            return Some(Pattern::FallsThenRisesAbove);
        }
        if last >= peak - tol {
            return (trough >= -tol).then_some(Pattern::Increases);
        }
        return Some(if last > tol {
            Pattern::RisesThenFallsAbove
        } else {
            Pattern::RisesThenFallsBelow
        });
    }
    if trough < -tol {
        return Some(if last <= trough + tol {
            Pattern::Decreases
        } else {
            Pattern::FallsThenRisesBelow
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_six_shapes() {
        let c = |v: &[f64]| classify(v).map(|p| p.number());
        assert_eq!(c(&[0.0, 0.1, 0.2, 0.3, 0.4]), Some(1));
        assert_eq!(c(&[0.0, 0.2, 0.3, 0.2, 0.1]), Some(2));
        assert_eq!(c(&[0.0, 0.2, 0.3, 0.1, -0.3]), Some(3));
        assert_eq!(c(&[0.0, -0.1, -0.2, -0.3]), Some(4));
        assert_eq!(c(&[0.0, -0.3, -0.2, -0.1]), Some(5));
        assert_eq!(c(&[0.0, -0.02, 0.1, 0.2]), Some(6));
        assert_eq!(c(&[0.0, 0.0005, -0.001]), None);
        assert_eq!(c(&[]), None);
        assert_eq!(
            Pattern::FallsThenRisesAbove.describe(),
            "falls, rises above none"
        );
    }
}
