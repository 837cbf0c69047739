//! Runs a C program under the preload library and reads its side files back.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::time::Instant;

use udamon_preload::{
    env, install, read, write_hints, Error, HintAction, HintLine, HintTarget, Options, SideFile,
};

mod common;
use common::{compile, hex, run};

const PROGRAM: &str = include_str!("alloc_test.c");
const BENCH: &str = include_str!("bench.c");
const MIB: u64 = 1 << 20;

/// What the program printed.
#[derive(Default)]
struct Printed {
    pid: u32,
    fns: Vec<(u64, String)>,
    big: Vec<(u64, u64)>,
    freed: Vec<u64>,
    realloc: (u64, u64, u64),
    child: u32,
    child_big: (u64, u64),
}

fn parse_stdout(text: &str) -> Printed {
    let mut p = Printed::default();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["pid", pid] => p.pid = pid.parse().unwrap(),
            ["fn", name, addr] => p.fns.push((hex(addr), name.to_owned())),
            ["big", addr, size] => p.big.push((hex(addr), size.parse().unwrap())),
            ["freed", addr] => p.freed.push(hex(addr)),
            ["realloc", old, new, size] => p.realloc = (hex(old), hex(new), size.parse().unwrap()),
            ["child", pid] => p.child = pid.parse().unwrap(),
            ["childbig", addr, size] => p.child_big = (hex(addr), size.parse().unwrap()),
            _ => {}
        }
    }
    p.fns.sort();
    p
}

/// The program's site of an allocation: the function of the program the
/// innermost frame (malloc's return address) falls in, if it is in the
/// program's text.
fn site<'a>(
    side: &SideFile,
    text: &[(u64, u64)],
    fns: &'a [(u64, String)],
    stack: u32,
) -> Option<&'a str> {
    let ret = *side.stacks.get(&stack)?.first()?;
    if !text.iter().any(|(lo, hi)| (lo..hi).contains(&&ret)) {
        return None;
    }
    let (_, name) = fns.iter().rev().find(|(start, _)| *start < ret)?;
    Some(name)
}

/// The executable mappings of `exe` in a maps text.
fn text_ranges(side: &SideFile, exe: &Path) -> Vec<(u64, u64)> {
    let maps = side.maps.first().expect("a maps text");
    let exe = exe.to_string_lossy();
    maps.text_lossy()
        .lines()
        .filter_map(|line| {
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.len() < 6 || !w[1].contains('x') || w[5] != exe {
                return None;
            }
            let (lo, hi) = w[0].split_once('-')?;
            Some((hex(lo), hex(hi)))
        })
        .collect()
}

fn assert_stacks_in_program(side: &SideFile, exe: &Path) {
    let text = text_ranges(side, exe);
    assert!(!text.is_empty(), "no text mapping of {}", exe.display());
    for (id, frames) in &side.stacks {
        assert!(
            frames
                .iter()
                .any(|f| text.iter().any(|(lo, hi)| (lo..hi).contains(&f))),
            "stack {id} {frames:x?} has no frame in the program's text {text:x?}"
        );
    }
}

#[test]
fn sampled_sites_frees_threads_and_fork() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(PROGRAM, dir.path(), "alloc_test");
    let lib = install(dir.path()).unwrap();
    let out_dir = dir.path().join("side");
    fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("alloc");
    // A 64 KiB interval: 160 samples expected at site C, a ~8% deviation.
    let opts = Options {
        threshold: 64 << 10,
        sample_interval: 64 << 10,
        ..Options::default()
    };
    let r = run(&exe, &[], &env(&lib, Some(&out), &opts));
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert!(r.stdout.ends_with("done\n"));
    let p = parse_stdout(&r.stdout);

    let paths = SideFile::paths(&out).unwrap();
    let parent_path = out_dir.join(format!("alloc.{}", p.pid));
    let child_path = out_dir.join(format!("alloc.{}", p.child));
    assert_eq!(paths, {
        let mut v = vec![parent_path.clone(), child_path.clone()];
        v.sort();
        v
    });
    let side = read(&parent_path).unwrap();
    assert_eq!(side.pid, p.pid);
    assert_eq!((side.threshold, side.sample_interval), (64 << 10, 64 << 10));
    assert!(side.complete && side.truncated.is_none());
    assert_eq!(side.counters, Default::default());
    assert_eq!(side.version, 2);
    assert_eq!(side.hints, None, "no hints were asked for");
    assert_eq!(side.maps.len(), 2, "maps at start and at exit");

    // Every big allocation, with its exact size and weight.
    for &(addr, size) in &p.big {
        assert!(
            side.allocations
                .iter()
                .any(|a| a.addr == addr && a.size == size && a.weight == size),
            "big allocation {addr:#x} of {size} missing"
        );
    }
    let text = text_ranges(&side, &exe);
    let by_site = |name: &str| -> Vec<_> {
        side.allocations
            .iter()
            .filter(|a| site(&side, &text, &p.fns, a.stack) == Some(name))
            .collect()
    };
    let a = by_site("site_a");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].size, MIB);

    // Site C: 10 MiB in 4 KiB pieces, estimated from the samples' weights.
    let c = by_site("site_c");
    assert!(c.iter().all(|a| a.size == 4096 && a.weight > 4096));
    let estimate = c.iter().map(|a| a.weight).sum::<u64>() as f64;
    let ratio = estimate / (10 * MIB) as f64;
    println!(
        "{} samples, {} stacks; site C: {} samples, estimate {ratio:.3} of its bytes",
        side.allocations.len(),
        side.stacks.len(),
        c.len()
    );
    assert!(
        (0.67..1.5).contains(&ratio),
        "site C estimated at {ratio:.2} of its bytes ({} samples)",
        c.len()
    );

    // Frees: each sampled site C block, and every big block the program freed.
    let freed_after = |addr: u64, time: u64| {
        side.frees
            .iter()
            .any(|f| f.addr == addr && f.time_ns >= time)
    };
    for a in &c {
        assert!(freed_after(a.addr, a.time_ns), "no free of {:#x}", a.addr);
    }
    for addr in &p.freed {
        assert!(freed_after(*addr, 0), "no free of {addr:#x}");
    }
    // The realloc: the old block freed as a move, the new one a sample.
    let (old, new, size) = p.realloc;
    assert!(side.frees.iter().any(|f| f.addr == old && f.realloc));
    assert!(side
        .allocations
        .iter()
        .any(|a| a.addr == new && a.size == size && a.realloc));

    // Threads: their big blocks carry their own thread ids.
    let tids: HashSet<u32> = by_site("site_d")
        .iter()
        .filter(|a| a.size == 256 << 10)
        .map(|a| a.tid)
        .collect();
    assert_eq!(tids.len(), 4, "{tids:?}");
    assert!(!tids.contains(&p.pid));
    assert!(side.allocations.iter().any(|a| a.tid == p.pid));

    // Every stack was taken through the program's code.
    assert_stacks_in_program(&side, &exe);
    let ids: HashSet<u32> = side.allocations.iter().map(|a| a.stack).collect();
    assert!(!ids.contains(&0));
    assert_eq!(
        ids.len(),
        side.stacks.len(),
        "each stack written once, for a use"
    );

    // The child's own file.
    let child = read(&child_path).unwrap();
    assert_eq!(child.pid, p.child);
    assert!(child.complete && child.truncated.is_none());
    let (addr, size) = p.child_big;
    assert!(child
        .allocations
        .iter()
        .any(|a| a.addr == addr && a.size == size && a.tid == p.child));
    assert!(child.frees.iter().any(|f| f.addr == addr));
    assert!(!child.maps.is_empty());
    assert_stacks_in_program(&child, &exe);

    truncated_files_read_up_to_the_cut(&parent_path, &side, dir.path());
    garbage_is_refused(&parent_path, dir.path());
}

fn truncated_files_read_up_to_the_cut(path: &Path, full: &SideFile, dir: &Path) {
    let bytes = fs::read(path).unwrap();
    let cut_path = dir.join("cut");
    let mut cuts = vec![40, 45, bytes.len() - 1, bytes.len() - 9];
    cuts.extend((1..16).map(|k| bytes.len() * k / 16));
    for cut in cuts {
        fs::write(&cut_path, &bytes[..cut]).unwrap();
        let side = read(&cut_path).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert!(!side.complete);
        if let Some(at) = side.truncated {
            assert!(at < cut as u64);
        }
        assert!(side.allocations.len() <= full.allocations.len());
        assert_eq!(side.allocations, full.allocations[..side.allocations.len()]);
        assert_eq!(side.frees, full.frees[..side.frees.len()]);
    }
    fs::write(&cut_path, &bytes[..bytes.len() - 1]).unwrap();
    let side = read(&cut_path).unwrap();
    assert!(side.truncated.is_some());
    assert_eq!(side.allocations, full.allocations);
}

fn garbage_is_refused(path: &Path, dir: &Path) {
    let bytes = fs::read(path).unwrap();
    let bad = dir.join("bad");
    let check = |content: &[u8], offset: u64, what: &str| {
        fs::write(&bad, content).unwrap();
        match read(&bad) {
            Err(e @ Error::Format { offset: at, .. }) => {
                let msg = e.to_string();
                assert_eq!(at, offset, "{msg}");
                assert!(
                    msg.contains(what) && msg.contains(&*bad.to_string_lossy()),
                    "{msg}"
                );
            }
            other => panic!("{what}: {other:?}"),
        }
    };
    check(b"#!/bin/sh\necho this is not a side file\n", 0, "magic");
    check(b"", 0, "magic");
    let mut v = bytes.clone();
    v[8] = 3;
    check(&v, 8, "version 3");
    check(&bytes[..30], 30, "cut short");
    // A record that claims more than any writer makes, and an unknown kind.
    let mut v = bytes[..40].to_vec();
    v.extend([4, 0, 0, 0, 0xf0, 0xff, 0xff, 0xff]);
    check(&v, 40, "impossible length");
    let mut v = bytes[..40].to_vec();
    v.extend([77, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    check(&v, 40, "unknown record kind 77");
    // An allocation naming a stack never written.
    let mut v = bytes[..40].to_vec();
    v.extend([1, 0, 0, 0, 40, 0, 0, 0]);
    v.extend([0; 32]);
    v.extend(9u32.to_le_bytes());
    v.extend(1u32.to_le_bytes());
    check(&v, 40, "undefined stack 9");
}

#[test]
fn without_out_the_library_passes_through() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(PROGRAM, dir.path(), "alloc_test");
    let lib = install(dir.path()).unwrap();
    let out = dir.path().join("side");
    let vars = env(&lib, None, &Options::default());
    assert!(vars
        .iter()
        .any(|(k, v)| k == "UDAMON_ALLOC_OUT" && v.is_empty()));
    let r = run(&exe, &[], &vars);
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert!(
        r.stdout.ends_with("done\n") && r.stderr.is_empty(),
        "{}",
        r.stderr
    );
    assert!(SideFile::paths(&out).unwrap().is_empty());
}

#[test]
fn an_output_that_cannot_be_created_turns_sampling_off() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(PROGRAM, dir.path(), "alloc_test");
    let lib = install(dir.path()).unwrap();
    let out = dir.path().join("missing-dir").join("alloc");
    let r = run(&exe, &[], &env(&lib, Some(&out), &Options::default()));
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert!(r.stdout.ends_with("done\n"));
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    assert!(
        lines[0].starts_with("udamon-preload: cannot create"),
        "{}",
        r.stderr
    );
}

/// The cost of the library on a malloc-bound loop: `cargo test -p
/// udamon-preload --release -- --ignored --nocapture overhead`.
#[test]
#[ignore]
fn overhead() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(BENCH, dir.path(), "bench");
    let lib = install(dir.path()).unwrap();
    let out = dir.path().join("alloc");
    let all = env(&lib, Some(&out), &Options::default());
    let preload_only: Vec<_> = all
        .iter()
        .filter(|(k, _)| k == "LD_PRELOAD")
        .cloned()
        .collect();
    // A site hint in the program that no allocation passes through: the
    // hint path's cost without its mlock calls.
    let hints = dir.path().join("hints");
    write_hints(
        &hints,
        &[HintLine {
            build_id: None,
            file: "bench".into(),
            target: HintTarget::Site { vaddr: 1 },
            action: HintAction::Mlock,
        }],
    )
    .unwrap();
    let hinted = |hint_min| {
        let opts = Options {
            hints: Some(hints.clone()),
            hint_min,
            ..Options::default()
        };
        env(&lib, None, &opts)
    };
    let (hints_small, hints_all) = (hinted(4096), hinted(1));
    let n = "20000000";
    let names = [
        "plain",
        "preload, off",
        "hints, no allocation big enough",
        "hints, every allocation checked",
        "sampling",
    ];
    let mut times = HashMap::new();
    for (name, vars) in
        names
            .into_iter()
            .zip([&vec![], &preload_only, &hints_small, &hints_all, &all])
    {
        let mut best = f64::MAX;
        for _ in 0..3 {
            for p in SideFile::paths(&out).unwrap() {
                fs::remove_file(p).unwrap();
            }
            let t = Instant::now();
            let r = run(&exe, &[n], vars);
            assert!(r.status.success(), "{}", r.stderr);
            best = best.min(t.elapsed().as_secs_f64());
        }
        times.insert(name, best);
    }
    let samples: usize = SideFile::paths(&out)
        .unwrap()
        .iter()
        .map(|p| read(p).unwrap().allocations.len())
        .sum();
    let plain = times["plain"];
    println!("{n} malloc/free pairs: plain {plain:.3} s");
    for name in &names[1..] {
        println!("{name}: {:.3} s, {:.2}x", times[name], times[name] / plain);
    }
    println!("samples in the last run: {samples}");
}
