//! Parser for the `damon:damon_aggregated` tracepoint's lines, e.g.
//! `kdamond.0-1234 [002] .... 5678.901234: damon_aggregated: target_id=0 nr_regions=3 4096-8192: 5 2`.

use udamon_core::RegionSnapshot;

/// One `damon_aggregated` event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggregatedEvent {
    /// The ftrace timestamp in microseconds, when the line has one.
    pub time_us: Option<u64>,
    pub target_id: u64,
    pub nr_regions: u32,
    pub region: RegionSnapshot,
}

/// Parses one line; `None` for lines of other events or malformed ones.
/// Old kernels (before about 5.17) print no age: it reads as 0.
pub fn parse_aggregated(line: &str) -> Option<AggregatedEvent> {
    let at = line.find("target_id=")?;
    let (head, body) = line.split_at(at);
    let time_us = head
        .split_whitespace()
        .filter_map(|w| w.strip_suffix(':'))
        .find_map(|w| {
            let (s, us) = w.split_once('.')?;
            Some(s.parse::<u64>().ok()? * 1_000_000 + us.parse::<u64>().ok()?)
        });
    let mut it = body.split_whitespace();
    let target_id = it.next()?.strip_prefix("target_id=")?.parse().ok()?;
    let nr_regions = it.next()?.strip_prefix("nr_regions=")?.parse().ok()?;
    let (s, e) = it.next()?.strip_suffix(':')?.split_once('-')?;
    let nr_accesses = it.next()?.parse().ok()?;
    let age = match it.next() {
        Some(a) => a.parse().ok()?,
        None => 0,
    };
    Some(AggregatedEvent {
        time_us,
        target_id,
        nr_regions,
        region: RegionSnapshot {
            start: s.parse().ok()?,
            end: e.parse().ok()?,
            nr_accesses,
            age,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sample_lines() {
        let l = "   kdamond.0-1234  [002] ....  5678.901234: damon_aggregated: target_id=0 nr_regions=3 140737488351232-140737488355328: 5 2";
        let e = parse_aggregated(l).unwrap();
        assert_eq!(e.time_us, Some(5_678_901_234));
        assert_eq!((e.target_id, e.nr_regions), (0, 3));
        assert_eq!(
            e.region,
            RegionSnapshot {
                start: 140737488351232,
                end: 140737488355328,
                nr_accesses: 5,
                age: 2
            }
        );
        let old = parse_aggregated("target_id=18446623 nr_regions=12 4096-8192: 0").unwrap();
        assert_eq!(
            (old.target_id, old.region.age, old.time_us),
            (18446623, 0, None)
        );
        assert_eq!(
            parse_aggregated("damos_before_apply: ctx_idx=0 scheme_idx=0"),
            None
        );
        assert_eq!(parse_aggregated("target_id=0 nr_regions=x 1-2: 3 4"), None);
    }
}
