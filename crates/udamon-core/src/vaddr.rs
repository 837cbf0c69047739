//! Initial regions of a virtual address space: the "three regions" rule.
//!
//! A process's mappings usually look like this, with two huge unmapped gaps:
//!
//! ```text
//!   [code heap]   <---- gap 1 ---->   [mmap area]   <---- gap 2 ---->   [stack]
//!   |---- R0 ----|                    |---- R1 ----|                    |- R2 -|
//! ```
//!
//! Monitoring the gaps would waste regions on memory that cannot be accessed,
//! so DAMON covers everything mapped except the two biggest gaps, as three
//! ranges, and then cuts those evenly into about `min_nr_regions` regions.

use crate::region::{align_down, align_up, AddrRange, Region};

/// One line of a `/proc/PID/maps` text, as the kernel prints it:
/// `start-end perms offset dev inode [path]`, numbers in hex but the
/// inode, the path joined back from the words left (it may hold spaces).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsLine<'a> {
    pub range: AddrRange,
    pub perms: &'a str,
    pub offset: u64,
    /// `major:minor`.
    pub dev: &'a str,
    pub inode: u64,
    /// The file, a pseudo-name (`[heap]`), or empty for anonymous memory.
    pub path: String,
}

/// Parses one line of a maps text; `None` when it is not one (too few
/// fields, a bad number, an end before its start).
pub fn parse_maps_line(line: &str) -> Option<MapsLine<'_>> {
    let mut it = line.split_whitespace();
    let (range, perms, offset) = (it.next()?, it.next()?, it.next()?);
    let (dev, inode) = (it.next()?, it.next()?.parse().ok()?);
    let path = it.collect::<Vec<_>>().join(" ");
    let (s, e) = range.split_once('-')?;
    let hex = |x: &str| u64::from_str_radix(x, 16).ok();
    let (start, end) = (hex(s)?, hex(e)?);
    (start <= end).then_some(())?;
    Some(MapsLine {
        range: AddrRange::new(start, end),
        perms,
        offset: hex(offset)?,
        dev,
        inode,
        path,
    })
}

/// The ranges to monitor for a space with these mappings (sorted, disjoint):
/// all of it but the two biggest gaps.
///
/// The kernel gives a target no region when its mappings have fewer than two
/// gaps. udamon instead excludes the gaps there are (one range per group of
/// mappings), so that a simulated space of one or two objects still works;
/// with two or more gaps the result equals the kernel's.
pub fn monitoring_ranges(mappings: &[AddrRange], min_sz: u64) -> Vec<AddrRange> {
    let (Some(first), Some(last)) = (mappings.first(), mappings.last()) else {
        return Vec::new();
    };
    // The two biggest gaps; on equal sizes the earlier gap wins, as in the kernel.
    let mut big: [Option<AddrRange>; 2] = [None, None];
    for pair in mappings.windows(2) {
        let gap = AddrRange::new(pair[0].end, pair[1].start);
        if gap.sz() == 0 {
            continue;
        }
        let sz = |g: &Option<AddrRange>| g.map_or(0, |g| g.sz());
        if gap.sz() > sz(&big[0]) {
            big[1] = big[0];
            big[0] = Some(gap);
        } else if gap.sz() > sz(&big[1]) {
            big[1] = Some(gap);
        }
    }
    let mut gaps: Vec<AddrRange> = big.into_iter().flatten().collect();
    gaps.sort();
    let mut ranges = Vec::with_capacity(3);
    let mut start = first.start;
    for g in gaps {
        ranges.push(AddrRange::new(
            align_up(start, min_sz),
            align_up(g.start, min_sz),
        ));
        start = g.end;
    }
    ranges.push(AddrRange::new(
        align_up(start, min_sz),
        align_up(last.end, min_sz),
    ));
    ranges.retain(|r| r.sz() > 0);
    ranges
}

/// Cuts `ranges` evenly into about `nr_regions` regions (the kernel's
/// `__damon_va_init_regions`): each range gets `size / (total / nr_regions)`
/// pieces of equal, aligned size, the last piece taking the remainder.
pub fn even_regions(ranges: &[AddrRange], nr_regions: u32, min_sz: u64) -> Vec<Region> {
    let total: u64 = ranges.iter().map(AddrRange::sz).sum();
    let sz = (total / u64::from(nr_regions.max(1))).max(min_sz);
    let mut regions = Vec::new();
    for r in ranges {
        let nr_pieces = r.sz() / sz;
        let piece = r
            .sz()
            .checked_div(nr_pieces)
            .map_or(0, |p| align_down(p, min_sz));
        if piece == 0 {
            regions.push(Region::new(r.start, r.end));
            continue;
        }
        let mut start = r.start;
        for i in 0..nr_pieces {
            let end = if i + 1 == nr_pieces {
                r.end
            } else {
                start + piece
            };
            regions.push(Region::new(start, end));
            start = end;
        }
    }
    regions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_maps_line_is_read_whole_and_a_broken_one_refused() {
        let m = parse_maps_line("7f00-7f80 r-xp 00001000 fe:01 1311    /usr/lib/a b.so").unwrap();
        assert_eq!(m.range, AddrRange::new(0x7f00, 0x7f80));
        assert_eq!(
            (m.perms, m.offset, m.dev, m.inode),
            ("r-xp", 0x1000, "fe:01", 1311)
        );
        assert_eq!(m.path, "/usr/lib/a b.so");
        let anon = parse_maps_line("1000-2000 rw-p 00000000 00:00 0").unwrap();
        assert_eq!(anon.path, "");
        for bad in [
            "",
            "1000-2000 rw-p 0 00:00",
            "2000-1000 rw-p 0 00:00 0",
            "1000-2000 rw-p 0 00:00 x",
        ] {
            assert_eq!(parse_maps_line(bad), None, "{bad}");
        }
    }

    fn ar(s: u64, e: u64) -> AddrRange {
        AddrRange::new(s, e)
    }

    #[test]
    fn three_regions_exclude_two_biggest_gaps() {
        //  0   10  20                  100 110              200  210
        //  [A--)[B--)   gap 80          [C--)  gap 90        [D--)
        // biggest gaps: [110,200) and [20,100)
        let maps = [ar(0, 10), ar(10, 20), ar(100, 110), ar(200, 210)];
        assert_eq!(
            monitoring_ranges(&maps, 1),
            vec![ar(0, 20), ar(100, 110), ar(200, 210)]
        );
    }

    #[test]
    fn small_gaps_stay_inside_ranges() {
        //  0  10 12 20    50 60      100 110
        //  [A-) [B--)  g30 [C-)  g40  [D--)
        // gap [10,12) is the smallest, so it stays inside R0
        let maps = [ar(0, 10), ar(12, 20), ar(50, 60), ar(100, 110)];
        assert_eq!(
            monitoring_ranges(&maps, 1),
            vec![ar(0, 20), ar(50, 60), ar(100, 110)]
        );
    }

    #[test]
    fn fewer_gaps_than_two() {
        assert_eq!(monitoring_ranges(&[ar(0, 10)], 1), vec![ar(0, 10)]);
        assert_eq!(
            monitoring_ranges(&[ar(0, 10), ar(20, 30)], 1),
            vec![ar(0, 10), ar(20, 30)]
        );
        assert_eq!(monitoring_ranges(&[], 1), vec![]);
    }

    #[test]
    fn ranges_are_aligned_up() {
        let maps = [
            ar(4097, 8192),
            ar(100_000, 200_000),
            ar(1 << 20, (1 << 20) + 5),
        ];
        for r in monitoring_ranges(&maps, 4096) {
            assert_eq!(r.start % 4096, 0);
            assert_eq!(r.end % 4096, 0);
        }
    }

    #[test]
    fn even_split() {
        // total 100, 10 regions -> sz 10: R0 (40) in 4, R1 (35) in 3 (last 15), R2 (25) in 2
        let rs = even_regions(&[ar(0, 40), ar(100, 135), ar(200, 225)], 10, 1);
        let got: Vec<(u64, u64)> = rs.iter().map(|r| (r.ar.start, r.ar.end)).collect();
        assert_eq!(
            got,
            vec![
                (0, 10),
                (10, 20),
                (20, 30),
                (30, 40),
                (100, 111),
                (111, 122),
                (122, 135),
                (200, 212),
                (212, 225),
            ]
        );
        // a range smaller than one piece stays whole
        let rs = even_regions(&[ar(0, 1000), ar(2000, 2001)], 10, 1);
        assert_eq!(rs.last().unwrap().ar, ar(2000, 2001));
    }
}
