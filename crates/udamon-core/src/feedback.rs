//! The kernel's feedback-loop step (`damon_feed_loop_next_input`), shared by
//! monitoring-interval tuning and, later, DAMOS quota goals.

/// The score that means "goal met exactly", in basis points.
pub const GOAL_BP: u64 = 10_000;

/// Next input of a feedback loop whose goal is 10,000 bp, given the last
/// input and the score the last input achieved.
///
/// Under-achieving (score < goal) grows the input by `last * (goal - score)
/// / goal`; over-achieving shrinks it by the same rule, never under the
/// minimum input 10,000; a score of twice the goal or more drops straight to
/// the minimum.
pub fn next_input(last: u64, score: u64) -> u64 {
    const MIN_INPUT: u64 = 10_000;
    if score == GOAL_BP {
        return last;
    }
    if score >= 2 * GOAL_BP {
        return MIN_INPUT;
    }
    let diff = score.abs_diff(GOAL_BP);
    let comp = match last.checked_mul(diff) {
        Some(v) => v / GOAL_BP,
        None => last / GOAL_BP * diff,
    };
    if score > GOAL_BP {
        last.saturating_sub(comp).max(MIN_INPUT)
    } else {
        last.saturating_add(comp)
    }
}

#[cfg(test)]
mod tests {
    use super::next_input;

    #[test]
    fn table() {
        // (last, score) -> next
        let cases = [
            (100_000_000, 10_000, 100_000_000), // goal met: unchanged
            (100_000_000, 0, 200_000_000),      // nothing achieved: doubles
            (100_000_000, 5_000, 150_000_000),  // half achieved: x1.5
            (100_000_000, 15_000, 50_000_000),  // 1.5x over: halves... x(1 - 0.5)
            (100_000_000, 20_000, 10_000),      // 2x over: minimum
            (12_000, 19_000, 10_000),           // never under the minimum
            (u64::MAX, 0, u64::MAX),            // saturates
        ];
        for (last, score, want) in cases {
            assert_eq!(next_input(last, score), want, "next_input({last}, {score})");
        }
    }
}
