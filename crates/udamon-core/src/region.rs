//! Address ranges, regions and targets: the data DAMON keeps per monitored space.

use serde::{Deserialize, Serialize};

/// An address in a monitored space (virtual for vaddr, physical for paddr).
pub type Addr = u64;

/// A half-open address range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AddrRange {
    pub start: Addr,
    pub end: Addr,
}

impl AddrRange {
    pub const fn new(start: Addr, end: Addr) -> Self {
        Self { start, end }
    }

    /// Size of the range in bytes.
    pub const fn sz(&self) -> u64 {
        self.end - self.start
    }

    pub const fn contains(&self, addr: Addr) -> bool {
        self.start <= addr && addr < self.end
    }

    pub const fn intersects(&self, other: &AddrRange) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// A monitoring region: a range whose pages are assumed to share one access frequency.
///
/// `nr_accesses` counts positive samples in the current aggregation window,
/// `nr_accesses_bp` is the kernel's pseudo moving sum of the last window's
/// samples in basis points, `last_nr_accesses` the previous window's count, and
/// `age` the number of aggregation windows the frequency stayed similar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub ar: AddrRange,
    pub sampling_addr: Addr,
    pub nr_accesses: u32,
    pub nr_accesses_bp: u32,
    pub last_nr_accesses: u32,
    pub age: u32,
}

impl Region {
    /// A fresh region with all counters at zero.
    pub const fn new(start: Addr, end: Addr) -> Self {
        Self {
            ar: AddrRange::new(start, end),
            sampling_addr: start,
            nr_accesses: 0,
            nr_accesses_bp: 0,
            last_nr_accesses: 0,
            age: 0,
        }
    }

    pub const fn sz(&self) -> u64 {
        self.ar.sz()
    }
}

/// One monitoring target: a process (vaddr), or the physical space (paddr).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The pid for process targets, 0 for the physical space or a simulated one.
    pub pid: u32,
    /// Sorted, disjoint, aligned regions.
    pub regions: Vec<Region>,
}

impl Target {
    pub fn new(pid: u32) -> Self {
        Self {
            pid,
            regions: Vec::new(),
        }
    }

    /// Total bytes covered by the target's regions.
    pub fn sz_regions(&self) -> u64 {
        self.regions.iter().map(Region::sz).sum()
    }
}

/// Rounds `x` up to a multiple of `a` (a power of two).
pub const fn align_up(x: u64, a: u64) -> u64 {
    (x + a - 1) & !(a - 1)
}

/// Rounds `x` down to a multiple of `a` (a power of two).
pub const fn align_down(x: u64, a: u64) -> u64 {
    x & !(a - 1)
}
