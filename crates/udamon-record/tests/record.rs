//! Round trips, truncation at every byte, corruption, and errors.

#[path = "common/synth.rs"]
mod synth;

use std::ops::ControlFlow;

use udamon_core::{Attrs, RegionSnapshot, Snapshot, TargetSnapshot};
use udamon_record::{Entry, Error, Header, Reader, SimInfo, TargetInfo, Writer, MAGIC, VERSION};

fn header() -> Header {
    let mut h = Header::new("sim", Attrs::default());
    h.targets = vec![TargetInfo::new(0, "synthetic")];
    h.sim = Some(SimInfo {
        spec_toml: "[workload]\nkind = \"synth\"\n".into(),
        seed: 42,
        monitor: "adaptive".into(),
    });
    h.params = serde_json::json!({ "argv": ["udamon", "record", "--sim"] });
    h
}

fn synth_snapshots(n: usize, max_nr_regions: usize) -> Vec<Snapshot> {
    let p = synth::Params {
        max_nr_regions,
        active: 0.3,
        ..Default::default()
    };
    synth::Synth::new(p).take(n).collect()
}

/// A small but realistic record: 3 full frames of 8 snapshots, a partial
/// one, and JSON entries in between, without the frame index a closed
/// record ends with (as a run killed before it closed leaves it), so it is
/// scanned. Returns the bytes and the entries.
fn small_record() -> (Vec<u8>, Vec<Entry>) {
    small_record_with_index(false)
}

fn small_record_with_index(index: bool) -> (Vec<u8>, Vec<Entry>) {
    let snaps = synth_snapshots(28, 60);
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    w.set_index(index);
    w.set_frame_snapshots(8);
    let mut entries = Vec::new();
    for (i, s) in snaps.iter().enumerate() {
        w.push_snapshot(s).unwrap();
        entries.push(Entry::Snapshot(s.clone()));
        if i % 10 == 3 {
            let v = serde_json::json!({ "scheme": 0, "tried": i, "applied": i / 2 });
            w.push_json("scheme_stats", &v).unwrap();
            entries.push(Entry::Json {
                kind: "scheme_stats".into(),
                value: v,
            });
        }
    }
    (w.finish().unwrap(), entries)
}

fn all_entries(r: &Reader) -> Vec<Entry> {
    let mut v = Vec::new();
    r.for_each_entry(|e| {
        v.push(e.clone());
        ControlFlow::Continue(())
    })
    .unwrap();
    v
}

fn snapshots_of(entries: &[Entry]) -> Vec<Snapshot> {
    entries
        .iter()
        .filter_map(|e| match e {
            Entry::Snapshot(s) => Some(s.clone()),
            Entry::Json { .. } => None,
        })
        .collect()
}

/// Offset where the first frame starts (the end of the header).
fn header_end(r: &Reader) -> usize {
    r.frames()[0].offset as usize
}

#[test]
fn round_trip_with_summaries() {
    let (bytes, entries) = small_record();
    let r = Reader::from_bytes(bytes.clone()).unwrap();
    let mut want = header();
    want.version = VERSION;
    assert_eq!(r.header(), &want);
    assert!(r.tail().is_none());
    assert_eq!(all_entries(&r), entries);
    let snaps = snapshots_of(&entries);
    assert_eq!(r.snapshots().unwrap(), snaps);
    assert_eq!(r.nr_snapshots(), 28);

    // Frame summaries match the snapshots they hold.
    let counts: Vec<u32> = r.frames().iter().map(|f| f.nr_snapshots).collect();
    assert_eq!(counts, [8, 8, 8, 4]);
    let mut i = 0;
    let mut end = header_end(&r) as u64;
    for f in r.frames() {
        assert_eq!(f.offset, end, "frames are contiguous");
        end += f.len;
        let chunk = &snaps[i..i + f.nr_snapshots as usize];
        assert_eq!(f.first_start_us, chunk[0].start_us);
        assert_eq!(f.last_end_us, chunk.last().unwrap().end_us);
        let regions = || {
            chunk
                .iter()
                .flat_map(|s| &s.targets)
                .flat_map(|t| &t.regions)
        };
        assert_eq!(f.min_addr, regions().map(|r| r.start).min().unwrap());
        assert_eq!(f.max_addr, regions().map(|r| r.end).max().unwrap());
        i += f.nr_snapshots as usize;
    }
    assert_eq!(end, bytes.len() as u64);
    assert!(!r.uses_index());

    // Frames decode on their own, in any subset.
    let mut got = Vec::new();
    r.for_each_entry_in(2..3, |e| {
        got.push(e.clone());
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(snapshots_of(&got), snaps[16..24]);
}

#[test]
fn break_stops_the_walk() {
    let (bytes, _) = small_record();
    let r = Reader::from_bytes(bytes).unwrap();
    for stop_after in [1, 7, 8, 9, 20] {
        let mut n = 0;
        r.for_each_entry(|e| {
            if matches!(e, Entry::Snapshot(_)) {
                n += 1;
                if n == stop_after {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(n, stop_after);
    }
}

#[test]
fn truncation_at_every_byte() {
    let (bytes, entries) = small_record();
    let full = Reader::from_bytes(bytes.clone()).unwrap();
    let hend = header_end(&full);
    let frames = full.frames().to_vec();
    let snaps = snapshots_of(&entries);
    for cut in 0..=bytes.len() {
        let res = Reader::from_bytes(bytes[..cut].to_vec());
        if cut < hend {
            match res {
                Err(Error::Header(msg)) => assert!(!msg.is_empty()),
                other => {
                    panic!("cut at {cut} inside the header: want a header error, got {other:?}")
                }
            }
            continue;
        }
        let r = res.unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let complete = frames
            .iter()
            .take_while(|f| f.offset + f.len <= cut as u64)
            .count();
        assert_eq!(r.frames(), &frames[..complete], "cut at {cut}");
        let nr: usize = frames[..complete]
            .iter()
            .map(|f| f.nr_snapshots as usize)
            .sum();
        assert_eq!(r.snapshots().unwrap(), snaps[..nr], "cut at {cut}");
        let at_boundary = cut == hend || frames.iter().any(|f| f.offset + f.len == cut as u64);
        match r.tail() {
            None => assert!(at_boundary, "cut at {cut} inside a frame but no tail"),
            Some(t) => {
                assert!(
                    !at_boundary,
                    "cut at {cut} on a frame boundary but tail {t}"
                );
                assert_eq!(t.offset, frames[complete].offset);
                assert_eq!(t.frames_ok, complete);
                assert_eq!(t.snapshots_ok, nr as u64);
                let msg = t.to_string();
                assert!(
                    msg.starts_with(&format!(
                        "record is damaged at byte {}: frame {complete} ",
                        t.offset
                    )),
                    "{msg}"
                );
                assert!(msg.contains(&format!("{nr} snapshot")), "{msg}");
            }
        }
    }
}

#[test]
fn tail_message_names_the_cut() {
    let (bytes, _) = small_record();
    let full = Reader::from_bytes(bytes.clone()).unwrap();
    let f = full.frames()[2];
    let cut = (f.offset + 60 + 5) as usize;
    let r = Reader::from_bytes(bytes[..cut].to_vec()).unwrap();
    let t = r.tail().unwrap();
    assert_eq!(
        t.to_string(),
        format!(
            "record is damaged at byte {}: frame 2 declares {} bytes but only 5 remain (the 16 snapshots before it are readable)",
            f.offset,
            f.len - 60
        )
    );
    let cut = (f.offset + 10) as usize;
    let r = Reader::from_bytes(bytes[..cut].to_vec()).unwrap();
    assert_eq!(
        r.tail().unwrap().reason,
        "frame 2 is cut inside its header: only 10 of 60 bytes remain"
    );
}

/// A flipped byte anywhere in a frame loses that frame and no other:
/// reading resumes at the next frame, and the damage says how many
/// snapshots were lost (exactly, when the frame's header is intact).
#[test]
fn flipped_bytes_lose_their_frame_only() {
    let (bytes, entries) = small_record();
    let full = Reader::from_bytes(bytes.clone()).unwrap();
    let hend = header_end(&full);
    let frames = full.frames().to_vec();
    let snaps = snapshots_of(&entries);
    // Snapshots of each frame, in order.
    let mut per_frame = Vec::new();
    let mut at = 0;
    for f in &frames {
        per_frame.push(snaps[at..at + f.nr_snapshots as usize].to_vec());
        at += f.nr_snapshots as usize;
    }
    for pos in 0..bytes.len() {
        let mask = [0x01u8, 0x80, 0xff][pos % 3];
        let mut b = bytes.clone();
        b[pos] ^= mask;
        let res = Reader::from_bytes(b);
        if pos < hend {
            assert!(res.is_err(), "flip at {pos} in the header went unnoticed");
            continue;
        }
        let r = res.unwrap();
        let k = frames
            .iter()
            .position(|f| (pos as u64) < f.offset + f.len)
            .unwrap();
        let mut kept = frames.clone();
        kept.remove(k);
        assert_eq!(r.frames(), &kept[..], "flip at {pos}");
        let want: Vec<Snapshot> = per_frame
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != k)
            .flat_map(|(_, v)| v.clone())
            .collect();
        assert_eq!(r.snapshots().unwrap(), want, "flip at {pos}");
        let [d] = &r.damage()[..] else {
            panic!("flip at {pos}: {:?}", r.damage())
        };
        assert_eq!((d.offset, d.len), (frames[k].offset, frames[k].len));
        assert_eq!(d.frames_ok, k);
        let last = k + 1 == frames.len();
        assert_eq!(d.resumes_at.is_some(), !last, "flip at {pos}");
        assert_eq!(r.tail().is_some(), last);
        if pos >= frames[k].offset as usize + 60 {
            assert!(d.reason.contains("payload is damaged"), "{}", d.reason);
            assert_eq!(d.snapshots_lost, Some(u64::from(frames[k].nr_snapshots)));
            assert!(d.lost_exact);
        }
        if !last {
            let msg = d.to_string();
            assert!(msg.contains("snapshot"), "{msg}");
            assert!(
                msg.ends_with(&format!(
                    "reading resumes at byte {})",
                    frames[k + 1].offset
                )),
                "{msg}"
            );
        }
    }
}

/// Several damaged stretches, one spanning frames whose headers are gone:
/// every intact frame is read, and the lost snapshots are estimated from the
/// time the gap spans.
#[test]
fn reading_resumes_after_each_damaged_stretch() {
    let snaps = synth_snapshots(80, 40);
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    w.set_index(false);
    w.set_frame_snapshots(8);
    for s in &snaps {
        w.push_snapshot(s).unwrap();
    }
    let bytes = w.finish().unwrap();
    let full = Reader::from_bytes(bytes.clone()).unwrap();
    let f = full.frames().to_vec();
    assert_eq!(f.len(), 10);
    let mut b = bytes.clone();
    // Frame 2's header, and frames 5 to 7 wiped out together.
    b[f[2].offset as usize + 30] ^= 0x10;
    for x in &mut b[f[5].offset as usize..(f[7].offset + f[7].len) as usize] {
        *x = 0;
    }
    let r = Reader::from_bytes(b).unwrap();
    assert_eq!(r.frames().len(), 6);
    assert_eq!(r.nr_snapshots(), 48);
    let d = r.damage();
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(d[0].resumes_at, Some(f[3].offset));
    assert_eq!(d[1].offset, f[5].offset);
    assert_eq!(d[1].resumes_at, Some(f[8].offset));
    // Three frames of 8 snapshots of 100 ms each: estimated from the gap.
    assert_eq!(d[1].snapshots_lost, Some(24));
    assert!(!d[1].lost_exact);
    assert!(
        d[1].to_string().contains("about 24 snapshots lost"),
        "{}",
        d[1]
    );
    assert!(r.tail().is_none());
    let got = r.snapshots().unwrap();
    let want: Vec<Snapshot> = snaps[..16]
        .iter()
        .chain(&snaps[24..40])
        .chain(&snaps[64..])
        .cloned()
        .collect();
    assert_eq!(got, want);
}

/// A record opened from a file is read a frame at a time, with the same
/// result as one read into memory, damage included.
#[test]
fn a_file_reads_like_its_bytes() {
    let (mut bytes, _) = small_record();
    let f = Reader::from_bytes(bytes.clone()).unwrap().frames()[1];
    bytes[f.offset as usize + 70] ^= 0xff;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.udr");
    std::fs::write(&path, &bytes).unwrap();
    let a = Reader::open(&path).unwrap();
    let b = Reader::from_bytes(bytes).unwrap();
    assert_eq!(a.frames(), b.frames());
    assert_eq!(a.damage(), b.damage());
    assert_eq!(all_entries(&a), all_entries(&b));
}

#[test]
fn header_errors() {
    let (bytes, _) = small_record();
    let mut b = bytes.clone();
    b[..8].copy_from_slice(b"GIF89a\0\0");
    let e = Reader::from_bytes(b).unwrap_err();
    assert!(matches!(e, Error::NotARecord { .. }));
    assert_eq!(
        e.to_string(),
        "input is not a udamon record (magic \"GIF89a\\x00\\x00\", expected \"UDAMONR\\0\"); give a file written by udamon"
    );
    assert!(matches!(
        Reader::from_bytes(b"hello".to_vec()),
        Err(Error::NotARecord { .. })
    ));

    let mut b = bytes.clone();
    b[8..10].copy_from_slice(&7u16.to_le_bytes());
    let e = Reader::from_bytes(b).unwrap_err();
    assert!(matches!(e, Error::UnsupportedVersion(7)));
    assert!(e.to_string().contains("version 7"), "{e}");

    for cut in [0, 3, 8, 9, 12, 30] {
        let e = Reader::from_bytes(bytes[..cut].to_vec()).unwrap_err();
        assert!(matches!(e, Error::Header(_)), "cut at {cut}: {e}");
    }
    assert!(Reader::from_bytes(MAGIC.to_vec())
        .unwrap_err()
        .to_string()
        .contains("ends inside"));

    // Valid CRC but not a header.
    let json = br#"{"kind": 3}"#;
    let mut b = MAGIC.to_vec();
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&(json.len() as u32).to_le_bytes());
    b.extend_from_slice(&crc32fast::hash(json).to_le_bytes());
    b.extend_from_slice(json);
    let e = Reader::from_bytes(b).unwrap_err();
    assert!(e.to_string().contains("header JSON is invalid"), "{e}");
}

#[test]
fn files_and_paths() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.udr");
    let snaps = synth_snapshots(100, 60);
    let mut w = Writer::create(&path, &header()).unwrap();
    for s in &snaps {
        w.push_snapshot(s).unwrap();
    }
    w.flush_frame().unwrap();
    let written = w.bytes_written();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), written);
    w.push_json("summary", &serde_json::json!({"ok": true}))
        .unwrap();
    drop(w); // flushes the last frame
    let r = Reader::open(&path).unwrap();
    assert_eq!(r.snapshots().unwrap(), snaps);
    assert_eq!(r.frames().len(), 3);
    assert!(std::fs::metadata(&path).unwrap().len() > written);

    let missing = dir.path().join("missing.udr");
    let e = Reader::open(&missing).unwrap_err();
    assert!(matches!(e, Error::Io { .. }));
    assert!(e.to_string().contains("missing.udr"), "{e}");
    std::fs::write(&missing, b"#!/bin/sh\n").unwrap();
    let e = Reader::open(&missing).unwrap_err().to_string();
    assert!(e.contains("missing.udr is not a udamon record"), "{e}");
}

#[test]
fn invalid_snapshot_is_refused_and_writer_goes_on() {
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    let good = synth_snapshots(3, 60);
    w.push_snapshot(&good[0]).unwrap();
    let mut bad = good[1].clone();
    bad.targets[0].regions[2].end = bad.targets[0].regions[2].start - 4096;
    let e = w.push_snapshot(&bad).unwrap_err();
    assert!(matches!(e, Error::InvalidSnapshot(_)));
    assert!(e.to_string().contains("region 2 ends at"), "{e}");
    w.push_snapshot(&good[1]).unwrap();
    w.push_snapshot(&good[2]).unwrap();
    let r = Reader::from_bytes(w.finish().unwrap()).unwrap();
    assert_eq!(r.snapshots().unwrap(), good);
}

#[test]
fn odd_snapshots_round_trip() {
    let region = |start, end, nr_accesses, age| RegionSnapshot {
        start,
        end,
        nr_accesses,
        age,
    };
    let snaps = vec![
        Snapshot {
            start_us: 0,
            end_us: 0,
            sample_us: 0,
            aggr_us: 0,
            targets: vec![],
        },
        Snapshot {
            start_us: 7,
            end_us: 3,
            sample_us: u64::MAX,
            aggr_us: 1,
            targets: vec![
                TargetSnapshot {
                    target_idx: 3,
                    regions: vec![region(1, 2, 0, 0), region(0, 1, 9, 9)],
                },
                TargetSnapshot {
                    target_idx: 0,
                    regions: vec![],
                },
                TargetSnapshot {
                    target_idx: u32::MAX,
                    regions: vec![region(0, u64::MAX, u32::MAX, u32::MAX)],
                },
            ],
        },
        Snapshot {
            start_us: u64::MAX,
            end_us: u64::MAX,
            sample_us: 5,
            aggr_us: 100,
            targets: vec![TargetSnapshot {
                target_idx: 3,
                regions: vec![region(1, 5, 1, 0), region(4, 4, 0, 10)],
            }],
        },
    ];
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    for s in &snaps {
        w.push_snapshot(s).unwrap();
    }
    let r = Reader::from_bytes(w.finish().unwrap()).unwrap();
    assert_eq!(r.snapshots().unwrap(), snaps);
    // Frames without snapshots report an empty span.
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    w.push_json("note", &serde_json::json!("only json"))
        .unwrap();
    let r = Reader::from_bytes(w.finish().unwrap()).unwrap();
    let f = r.frames()[0];
    assert_eq!(
        (
            f.nr_snapshots,
            f.first_start_us,
            f.last_end_us,
            f.min_addr,
            f.max_addr
        ),
        (0, 0, 0, 0, 0)
    );
}

#[test]
fn many_frames_decode_in_order() {
    // Enough frames for the parallel decoder, with a json entry each frame.
    let snaps = synth_snapshots(400, 200);
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    w.set_frame_snapshots(5);
    for (i, s) in snaps.iter().enumerate() {
        w.push_snapshot(s).unwrap();
        if i % 5 == 2 {
            w.push_json("tick", &serde_json::json!(i)).unwrap();
        }
    }
    let r = Reader::from_bytes(w.finish().unwrap()).unwrap();
    assert_eq!(r.frames().len(), 80);
    let mut got = Vec::new();
    let mut ticks = Vec::new();
    r.for_each_entry(|e| {
        match e {
            Entry::Snapshot(s) => got.push(s.clone()),
            Entry::Json { value, .. } => ticks.push(value.as_u64().unwrap()),
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(got, snaps);
    assert_eq!(ticks, (0..80).map(|f| f * 5 + 2).collect::<Vec<_>>());
}

#[test]
fn a_panicking_callback_does_not_hang_the_decoders() {
    let snaps = synth_snapshots(200, 60);
    let mut w = Writer::new(Vec::new(), &header()).unwrap();
    w.set_frame_snapshots(2);
    for s in &snaps {
        w.push_snapshot(s).unwrap();
    }
    let r = Reader::from_bytes(w.finish().unwrap()).unwrap();
    let res = std::panic::catch_unwind(|| {
        let mut n = 0;
        let _ = r.for_each_snapshot(|_| {
            n += 1;
            assert!(n < 5, "callback gives up");
        });
    });
    assert!(res.is_err());
    assert_eq!(r.snapshots().unwrap(), snaps);
}

/// A closed record ends with its frame index: a reader opens it from its
/// last bytes, finds the frames a scan finds, and reads the same entries.
#[test]
fn a_closed_record_opens_from_its_index() {
    let (bytes, entries) = small_record_with_index(true);
    let (plain, _) = small_record();
    let r = Reader::from_bytes(bytes.clone()).unwrap();
    assert!(r.uses_index());
    let scanned = Reader::from_bytes_scanned(bytes.clone()).unwrap();
    assert!(!scanned.uses_index());
    let unindexed = Reader::from_bytes(plain.clone()).unwrap();
    assert!(!unindexed.uses_index());
    assert_eq!(r.frames(), scanned.frames());
    assert_eq!(r.frames(), unindexed.frames());
    assert_eq!(all_entries(&r), entries);
    assert_eq!(all_entries(&scanned), entries);
    assert!(r.damage().is_empty() && scanned.damage().is_empty());
    // The index is one frame after the others, to the end of the file.
    let last = r.frames().last().unwrap();
    assert_eq!(&bytes[..plain.len()], &plain[..]);
    assert_eq!(bytes[plain.len()..plain.len() + 4], *b"UDFR");
    assert_eq!(last.offset + last.len, plain.len() as u64);
    // Cut anywhere inside the index, the record is scanned: every frame is
    // there, and the cut index is the damaged tail.
    for cut in plain.len() + 1..bytes.len() {
        let r = Reader::from_bytes(bytes[..cut].to_vec()).unwrap();
        assert!(!r.uses_index(), "cut at {cut}");
        assert_eq!(r.frames(), unindexed.frames(), "cut at {cut}");
        assert_eq!(all_entries(&r), entries, "cut at {cut}");
        let t = r.tail().unwrap_or_else(|| panic!("cut at {cut}: no tail"));
        assert_eq!(t.offset, plain.len() as u64);
        assert_eq!(t.snapshots_ok, 28);
    }
}

/// A byte flipped anywhere in a closed record: opened from its index, the
/// damage is found when the frame is read, and after a full read the
/// snapshots and the damage are those a scan of the same bytes finds (a
/// flip in the index itself sends the reader to a scan).
#[test]
fn a_flip_in_an_indexed_record_is_found_when_read() {
    let (bytes, _) = small_record_with_index(true);
    let data_end = {
        let r = Reader::from_bytes(bytes.clone()).unwrap();
        let f = r.frames().last().unwrap();
        (f.offset + f.len) as usize
    };
    let hend = Reader::from_bytes(bytes.clone()).unwrap().frames()[0].offset as usize;
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    for pos in hend..bytes.len() {
        let mut b = bytes.clone();
        b[pos] ^= [0x01u8, 0x80, 0xff][pos % 3];
        let mut r = Reader::from_bytes(b.clone()).unwrap();
        let scanned = Reader::from_bytes_scanned(b).unwrap();
        assert_eq!(r.uses_index(), pos < data_end, "flip at {pos}");
        let sink = seen.clone();
        seen.lock().unwrap().clear();
        r.on_damage(move |d| sink.lock().unwrap().push(d.offset));
        if r.uses_index() {
            assert!(r.damage().is_empty(), "flip at {pos}: found before reading");
        }
        assert_eq!(
            r.snapshots().unwrap(),
            scanned.snapshots().unwrap(),
            "flip at {pos}"
        );
        let key = |d: &udamon_record::Damage| {
            (d.offset, d.len, d.frames_ok, d.snapshots_ok, d.resumes_at)
        };
        let (a, b) = (r.damage(), scanned.damage());
        assert_eq!(
            a.iter().map(key).collect::<Vec<_>>(),
            b.iter().map(key).collect::<Vec<_>>(),
            "flip at {pos}"
        );
        assert_eq!(a.len(), 1, "flip at {pos}");
        if r.uses_index() {
            // Reported once, though the frames were read twice.
            r.snapshots().unwrap();
            assert_eq!(*seen.lock().unwrap(), [a[0].offset], "flip at {pos}");
            assert_eq!(a[0].reason, b[0].reason, "flip at {pos}");
            assert!(a[0].lost_exact);
        }
    }
}
