//! The trace's binary form: the pages of tracefs's per-CPU
//! `trace_pipe_raw` files, read by the layout tracefs describes
//! (`events/header_page`, and each event's `format`). Reading them spares
//! the kernel from printing every region's `damon_aggregated` line as text
//! for `trace_pipe`, which was most of what udamon cost on kernel DAMON.
//!
//! A page is a header (a timestamp, then the length of its data with two
//! flags above it) and records, each behind a 32-bit word: the low 5 bits
//! its type or length in words, the high 27 the time since the record
//! before it. Types 29, 30 and 31 are padding, a time extension and an
//! absolute time; 0 means the length is in the next word; 1-28 are the
//! length of the data in 4-byte words.

use std::collections::HashMap;

use udamon_core::schemes::DamosStats;
use udamon_core::RegionSnapshot;

use crate::event::{AggregatedEvent, SchemeStatEvent};

/// Where a field of an event's record is: offset and size in bytes.
type Field = (usize, usize);

/// One event's record layout, from its `format` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub id: u16,
    fields: HashMap<String, Field>,
}

impl EventFormat {
    /// Parses a `format` file: its `ID:` line and `field:` lines, as
    /// `field:unsigned long start; offset:24; size:8; signed:0;`.
    pub fn parse(text: &str) -> Option<EventFormat> {
        let mut id = None;
        let mut fields = HashMap::new();
        for line in text.lines() {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("ID:") {
                id = v.trim().parse().ok();
                continue;
            }
            let Some(rest) = line.strip_prefix("field:") else {
                continue;
            };
            let mut parts = rest.split(';').map(str::trim);
            let decl = parts.next()?;
            // The name is the declaration's last word, without `[N]`.
            let name = decl.rsplit(' ').next()?.split('[').next()?.to_string();
            let mut offset = None;
            let mut size = None;
            for p in parts {
                if let Some(v) = p.strip_prefix("offset:") {
                    offset = v.parse().ok();
                } else if let Some(v) = p.strip_prefix("size:") {
                    size = v.parse().ok();
                }
            }
            fields.insert(name, (offset?, size?));
        }
        Some(EventFormat { id: id?, fields })
    }

    fn field(&self, name: &str) -> Option<Field> {
        self.fields.get(name).copied()
    }
}

/// A little-endian unsigned integer of 1, 2, 4 or 8 bytes.
fn uint(b: &[u8]) -> Option<u64> {
    Some(match b.len() {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_le_bytes(b.try_into().ok()?)),
        4 => u64::from(u32::from_le_bytes(b.try_into().ok()?)),
        8 => u64::from_le_bytes(b.try_into().ok()?),
        _ => return None,
    })
}

/// A page header's layout, from `events/header_page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageFormat {
    timestamp: Field,
    commit: Field,
    data: usize,
}

impl PageFormat {
    pub fn parse(text: &str) -> Option<PageFormat> {
        // The same `field:` lines as an event's format.
        let f = EventFormat::parse(&format!("ID: 0\n{text}"))?;
        let timestamp = f.field("timestamp")?;
        let commit = f.field("commit")?;
        let data = f.field("data")?.0;
        (timestamp.1 == 8 && matches!(commit.1, 4 | 8) && data >= 8).then_some(PageFormat {
            timestamp,
            commit,
            data,
        })
    }
}

/// The fields of `damon_aggregated` udamon reads, in this order.
const AGG: [&str; 8] = [
    "common_type",
    "common_pid",
    "target_id",
    "nr_regions",
    "start",
    "end",
    "nr_accesses",
    "age",
];
/// The fields of the schemes' statistics event udamon reads.
const STAT: [&str; 11] = [
    "common_type",
    "common_pid",
    "context_idx",
    "scheme_idx",
    "nr_tried",
    "sz_tried",
    "nr_applied",
    "sz_applied",
    "sz_ops_filter_passed",
    "qt_exceeds",
    "nr_snapshots",
];

/// The events udamon reads, and how they are laid out: each field looked
/// up once, not at every record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub page: PageFormat,
    pub aggregated: EventFormat,
    pub scheme_stat: Option<EventFormat>,
    /// Bytes of a sub-buffer (a page unless `buffer_subbuf_size_kb` says
    /// more).
    page_len: usize,
    agg: [Option<Field>; AGG.len()],
    stat: [Option<Field>; STAT.len()],
}

impl Layout {
    pub fn new(
        page: PageFormat,
        aggregated: EventFormat,
        scheme_stat: Option<EventFormat>,
        page_len: usize,
    ) -> Layout {
        let agg = AGG.map(|n| aggregated.field(n));
        let stat = STAT.map(|n| scheme_stat.as_ref().and_then(|f| f.field(n)));
        Layout {
            page,
            aggregated,
            scheme_stat,
            page_len,
            agg,
            stat,
        }
    }

    pub fn page_len(&self) -> usize {
        self.page_len
    }

    /// Whether the formats hold every field udamon reads (else the text
    /// pipe is read instead); `age` may be missing (kernels before about
    /// 5.17).
    pub fn usable(&self) -> bool {
        self.agg[..7].iter().all(Option::is_some)
            && (self.scheme_stat.is_none() || self.stat.iter().all(Option::is_some))
    }
}

/// Field `i` of a record, from its place in `at`.
fn get(rec: &[u8], at: &[Option<Field>], i: usize) -> Option<u64> {
    let (off, size) = at.get(i).copied().flatten()?;
    uint(rec.get(off..off.checked_add(size)?)?)
}

/// One event of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawEvent {
    Aggregated(AggregatedEvent),
    SchemeStat(SchemeStatEvent),
}

/// The length flags above a page's data length.
const COMMIT_LEN_MASK: u64 = (1 << 27) - 1;
/// The time bits of a record's header word.
const TS_SHIFT: u32 = 27;

/// What a page held: its events with their trace times (ns), and whether
/// the kernel says events were lost before it.
#[derive(Debug, Default)]
pub struct Page {
    pub events: Vec<(u64, RawEvent)>,
    pub missed: bool,
}

/// Reads one page (`buf`, as one read of `trace_pipe_raw` returned it).
/// Records of other events are skipped; a malformed page ends where it
/// stops making sense.
pub fn parse_page(buf: &[u8], layout: &Layout, out: &mut Page) {
    let p = &layout.page;
    let field = |f: Field| buf.get(f.0..f.0 + f.1).and_then(uint);
    let (Some(mut ts), Some(commit)) = (field(p.timestamp), field(p.commit)) else {
        return;
    };
    out.missed |= commit & (3 << 30) != 0;
    let end = (p.data + (commit & COMMIT_LEN_MASK) as usize).min(buf.len());
    let mut pos = p.data;
    let word = |at: usize| {
        buf.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    while pos + 4 <= end {
        let Some(head) = word(pos) else { break };
        let type_len = head & 0x1f;
        let delta = u64::from(head >> 5);
        match type_len {
            29 => {
                // Padding: to the end of the page, or as long as it says.
                if delta == 0 {
                    break;
                }
                let Some(len) = word(pos + 4) else { break };
                pos += 4 + len as usize;
            }
            30 | 31 => {
                let Some(hi) = word(pos + 4) else { break };
                let t = (u64::from(hi) << TS_SHIFT) + delta;
                ts = if type_len == 30 {
                    ts.wrapping_add(t)
                } else {
                    t
                };
                pos += 8;
            }
            _ => {
                let (data, len) = if type_len == 0 {
                    let Some(len) = word(pos + 4) else { break };
                    (pos + 8, (len as usize).saturating_sub(4))
                } else {
                    (pos + 4, type_len as usize * 4)
                };
                ts = ts.wrapping_add(delta);
                let Some(rec) = buf.get(data..data + len) else {
                    break;
                };
                if let Some(ev) = event(rec, layout) {
                    out.events.push((ts, ev));
                }
                // Records are 4-byte aligned.
                pos = (data + len + 3) & !3;
            }
        }
    }
}

/// The event a record holds, if it is one udamon reads.
fn event(rec: &[u8], layout: &Layout) -> Option<RawEvent> {
    let kind = get(rec, &layout.agg, 0)? as u16;
    if kind == layout.aggregated.id {
        let f = |i| get(rec, &layout.agg, i);
        return Some(RawEvent::Aggregated(AggregatedEvent {
            time_us: None,
            pid: f(1).map(|p| p as u32),
            target_id: f(2)?,
            nr_regions: f(3)? as u32,
            region: RegionSnapshot {
                start: f(4)?,
                end: f(5)?,
                nr_accesses: f(6)? as u32,
                // Kernels before about 5.17 have no age.
                age: f(7).unwrap_or(0) as u32,
            },
        }));
    }
    if layout.scheme_stat.as_ref()?.id != kind {
        return None;
    }
    let f = |i| get(rec, &layout.stat, i);
    Some(RawEvent::SchemeStat(SchemeStatEvent {
        pid: f(1).map(|p| p as u32),
        ctx_idx: f(2)? as u32,
        scheme_idx: f(3)? as u32,
        stats: DamosStats {
            nr_tried: f(4)?,
            sz_tried: f(5)?,
            nr_applied: f(6)?,
            sz_applied: f(7)?,
            sz_ops_filter_passed: f(8)?,
            qt_exceeds: f(9)?,
            nr_snapshots: f(10)?,
        },
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;
";

    pub const AGGREGATED: &str = "name: damon_aggregated
ID: 1234
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long target_id;\toffset:8;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_regions;\toffset:16;\tsize:4;\tsigned:0;
\tfield:unsigned long start;\toffset:24;\tsize:8;\tsigned:0;
\tfield:unsigned long end;\toffset:32;\tsize:8;\tsigned:0;
\tfield:unsigned int nr_accesses;\toffset:40;\tsize:4;\tsigned:0;
\tfield:unsigned int age;\toffset:44;\tsize:4;\tsigned:0;

print fmt: \"target_id=%lu nr_regions=%u %lu-%lu: %u %u\", ...
";

    /// One `damon_aggregated` record as the kernel lays it out.
    pub fn aggregated_record(pid: u32, target: u64, nr: u32, r: (u64, u64, u32, u32)) -> Vec<u8> {
        let mut b = vec![0u8; 48];
        b[0..2].copy_from_slice(&1234u16.to_le_bytes());
        b[4..8].copy_from_slice(&pid.to_le_bytes());
        b[8..16].copy_from_slice(&target.to_le_bytes());
        b[16..20].copy_from_slice(&nr.to_le_bytes());
        b[24..32].copy_from_slice(&r.0.to_le_bytes());
        b[32..40].copy_from_slice(&r.1.to_le_bytes());
        b[40..44].copy_from_slice(&r.2.to_le_bytes());
        b[44..48].copy_from_slice(&r.3.to_le_bytes());
        b
    }

    /// A page of records: (time delta, record); a delta past 27 bits gets
    /// a time extension before it, `None` a padding record.
    pub fn page(ts: u64, recs: &[(u64, Option<Vec<u8>>)], flags: u64) -> Vec<u8> {
        let mut data = Vec::new();
        let word = |d: &mut Vec<u8>, w: u32| d.extend_from_slice(&w.to_le_bytes());
        for (delta, rec) in recs {
            let mut delta = *delta;
            if delta >= 1 << 27 {
                word(&mut data, 30 | (((delta & ((1 << 27) - 1)) as u32) << 5));
                word(&mut data, (delta >> 27) as u32);
                delta = 0;
            }
            match rec {
                None => {
                    // 12 bytes in all: the kernel's length leaves out the
                    // header word.
                    word(&mut data, 29 | (1 << 5));
                    word(&mut data, 8);
                    word(&mut data, 0);
                }
                Some(r) if r.len() <= 28 * 4 => {
                    word(&mut data, (r.len() / 4) as u32 | ((delta as u32) << 5));
                    data.extend_from_slice(r);
                }
                Some(r) => {
                    word(&mut data, (delta as u32) << 5);
                    word(&mut data, r.len() as u32 + 4);
                    data.extend_from_slice(r);
                }
            }
        }
        let mut p = Vec::new();
        p.extend_from_slice(&ts.to_le_bytes());
        p.extend_from_slice(&(data.len() as u64 | flags).to_le_bytes());
        p.extend_from_slice(&data);
        p.resize(4096, 0);
        p
    }

    pub fn layout() -> Layout {
        Layout::new(
            PageFormat::parse(HEADER_PAGE).unwrap(),
            EventFormat::parse(AGGREGATED).unwrap(),
            None,
            4096,
        )
    }

    #[test]
    fn formats_parse() {
        let l = layout();
        assert!(l.usable());
        assert_eq!(l.aggregated.id, 1234);
        assert_eq!(l.aggregated.field("start"), Some((24, 8)));
        assert_eq!(l.page.data, 16);
        // Without the fields udamon reads, the text pipe it is.
        let no_end = Layout::new(
            l.page,
            EventFormat::parse(&AGGREGATED.replace("long end;", "long stop;")).unwrap(),
            None,
            4096,
        );
        assert!(!no_end.usable());
        // Without age (old kernels): usable, every age 0.
        let no_age = Layout::new(
            l.page,
            EventFormat::parse(&AGGREGATED.replace("int age;", "int other;")).unwrap(),
            None,
            4096,
        );
        assert!(no_age.usable());
    }

    #[test]
    fn the_formats_linux_7_3_gives_are_usable() {
        let l = Layout::new(
            PageFormat::parse(include_str!("../testdata/tracefs-7.3/header_page")).unwrap(),
            EventFormat::parse(include_str!(
                "../testdata/tracefs-7.3/damon_aggregated.format"
            ))
            .unwrap(),
            Some(
                EventFormat::parse(include_str!(
                    "../testdata/tracefs-7.3/damos_stat_after_apply_interval.format"
                ))
                .unwrap(),
            ),
            4096,
        );
        assert!(l.usable(), "{l:?}");
        assert_eq!(l.page, layout().page);
        assert_eq!(l.aggregated.fields, layout().aggregated.fields);
    }

    #[test]
    fn a_page_gives_its_events_in_order_with_their_times() {
        let l = layout();
        let r = |t, s| aggregated_record(77, t, 2, (s, s + 4096, 3, 9));
        let p = page(
            1_000_000,
            &[
                (10, Some(r(0, 0x1000))),
                (0, None),
                (5, Some(r(0, 0x2000))),
                // A jump of more than 27 bits of nanoseconds.
                (1 << 30, Some(r(1, 0x3000))),
                // A record of another event.
                (1, Some(vec![9, 9, 0, 0, 0, 0, 0, 0])),
            ],
            0,
        );
        let mut out = Page::default();
        parse_page(&p, &l, &mut out);
        assert!(!out.missed);
        let got: Vec<(u64, u64, u64)> = out
            .events
            .iter()
            .map(|(t, e)| match e {
                RawEvent::Aggregated(a) => (*t, a.target_id, a.region.start),
                RawEvent::SchemeStat(_) => unreachable!(),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (1_000_010, 0, 0x1000),
                (1_000_015, 0, 0x2000),
                (1_000_015 + (1 << 30), 1, 0x3000)
            ]
        );
        let RawEvent::Aggregated(a) = out.events[0].1 else {
            unreachable!()
        };
        assert_eq!(
            (a.pid, a.nr_regions, a.region.nr_accesses, a.region.age),
            (Some(77), 2, 3, 9)
        );
        // Lost events are flagged.
        let mut lost = Page::default();
        parse_page(&page(0, &[(1, Some(r(0, 0)))], 1 << 31), &l, &mut lost);
        assert!(lost.missed && lost.events.len() == 1);
    }

    #[test]
    fn garbage_pages_give_nothing_and_do_not_panic() {
        let l = layout();
        let mut out = Page::default();
        for len in [0, 3, 15, 16, 17, 100, 4096] {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
            parse_page(&junk, &l, &mut out);
        }
        // A commit longer than the page is cut at the page.
        let mut p = page(
            0,
            &[(1, Some(aggregated_record(1, 0, 1, (0, 4096, 0, 0))))],
            0,
        );
        p[8..16].copy_from_slice(&(1u64 << 26).to_le_bytes());
        parse_page(&p, &l, &mut out);
        // Records of a length word of 0 or past the page end the page.
        let mut q = vec![0u8; 32];
        q[8] = 16;
        parse_page(&q, &l, &mut out);
        assert!(out.events.len() <= 1);
    }
}
