//! Raw dump: a record as JSON lines.
//!
//! The first line is the header, `{"type":"header", ...}` with the header's
//! fields; then one line per entry in record order: snapshots as
//! `{"type":"snapshot","start_us":..,"end_us":..,"sample_us":..,"aggr_us":..,
//! "targets":[{"target_idx":..,"regions":[{"start":..,"end":..,"nr_accesses":..,"age":..}]}]}`
//! and JSON entries as `{"type":KIND,"value":VALUE}`. Addresses are decimal
//! integers, as JSON has no hex.

use std::io::{self, Write};

use serde::Serialize;
use udamon_core::Snapshot;

/// Writes the header line: `{"type":"header",` then the fields of
/// `header` (a struct or map) in their serialization order; anything else
/// is written as `{"type":"header","value":...}`.
pub fn write_header_line(w: &mut dyn Write, header: &impl Serialize) -> io::Result<()> {
    let text = serde_json::to_string(header).map_err(io::Error::from)?;
    match text.strip_prefix('{') {
        Some("}") => w.write_all(b"{\"type\":\"header\"}")?,
        Some(rest) => {
            w.write_all(b"{\"type\":\"header\",")?;
            w.write_all(rest.as_bytes())?;
        }
        None => {
            w.write_all(b"{\"type\":\"header\",\"value\":")?;
            w.write_all(text.as_bytes())?;
            w.write_all(b"}")?;
        }
    }
    w.write_all(b"\n")
}

/// Writes a JSON entry line: `{"type":kind,"value":value}`.
pub fn write_json_line(w: &mut dyn Write, kind: &str, value: &serde_json::Value) -> io::Result<()> {
    w.write_all(b"{\"type\":")?;
    serde_json::to_writer(&mut *w, kind).map_err(io::Error::from)?;
    w.write_all(b",\"value\":")?;
    serde_json::to_writer(&mut *w, value).map_err(io::Error::from)?;
    w.write_all(b"}\n")
}

/// Writes a snapshot line, formatting integers by hand into `buf` (reused
/// between calls) so a large record dumps at disk speed.
pub fn write_snapshot_line(w: &mut dyn Write, s: &Snapshot, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    buf.extend_from_slice(b"{\"type\":\"snapshot\",\"start_us\":");
    push_u64(buf, s.start_us);
    buf.extend_from_slice(b",\"end_us\":");
    push_u64(buf, s.end_us);
    buf.extend_from_slice(b",\"sample_us\":");
    push_u64(buf, s.sample_us);
    buf.extend_from_slice(b",\"aggr_us\":");
    push_u64(buf, s.aggr_us);
    buf.extend_from_slice(b",\"targets\":[");
    for (i, t) in s.targets.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"{\"target_idx\":");
        push_u64(buf, u64::from(t.target_idx));
        buf.extend_from_slice(b",\"regions\":[");
        for (k, r) in t.regions.iter().enumerate() {
            if k > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(b"{\"start\":");
            push_u64(buf, r.start);
            buf.extend_from_slice(b",\"end\":");
            push_u64(buf, r.end);
            buf.extend_from_slice(b",\"nr_accesses\":");
            push_u64(buf, u64::from(r.nr_accesses));
            buf.extend_from_slice(b",\"age\":");
            push_u64(buf, u64::from(r.age));
            buf.push(b'}');
        }
        buf.extend_from_slice(b"]}");
    }
    buf.extend_from_slice(b"]}\n");
    w.write_all(buf)
}

fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use udamon_core::{RegionSnapshot, TargetSnapshot};

    #[test]
    fn snapshot_line_is_the_serde_shape() {
        let s = Snapshot {
            start_us: 0,
            end_us: 100_000,
            sample_us: 5_000,
            aggr_us: 100_000,
            targets: vec![TargetSnapshot {
                target_idx: 3,
                regions: vec![
                    RegionSnapshot {
                        start: 4096,
                        end: u64::MAX,
                        nr_accesses: 20,
                        age: 7,
                    },
                    RegionSnapshot {
                        start: 0,
                        end: 10,
                        nr_accesses: 0,
                        age: 0,
                    },
                ],
            }],
        };
        let mut out = Vec::new();
        write_snapshot_line(&mut out, &s, &mut Vec::new()).unwrap();
        let got: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let mut want = serde_json::to_value(&s).unwrap();
        want.as_object_mut()
            .unwrap()
            .insert("type".into(), "snapshot".into());
        assert_eq!(got, want);
        assert!(out.ends_with(b"}\n"));

        let mut out = Vec::new();
        write_json_line(&mut out, "note", &serde_json::json!({"a": 1})).unwrap();
        assert_eq!(out, b"{\"type\":\"note\",\"value\":{\"a\":1}}\n");
        let mut out = Vec::new();
        write_header_line(&mut out, &serde_json::json!({"version": 1})).unwrap();
        assert_eq!(out, b"{\"type\":\"header\",\"version\":1}\n");
    }
}
