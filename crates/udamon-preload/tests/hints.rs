//! Runs a C program with placement hints: a site hint and a symbol hint that
//! lock memory, a node hint the machine may not have, bad hints files, and
//! more hints than the library reads.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use object::{Object, ObjectSymbol};
use udamon_preload::{
    env, install, read, write_hints, HintAction, HintCounters, HintLine, HintTarget, Options,
    SideFile, MAX_HINTS,
};

mod common;
use common::{compile, compile_with, hex, run, Run};

const PROGRAM: &str = include_str!("hints_test.c");
const LIBRARY: &str = include_str!("hints_lib.c");
const ALLOC_TEST: &str = include_str!("alloc_test.c");
const EXE: &str = "hints_test";
const EINVAL: u32 = 22;

/// The test program, what its ELF file says, and where its site is.
struct Fixture {
    dir: tempfile::TempDir,
    exe: PathBuf,
    lib: PathBuf,
    build_id: String,
    /// `hot_table`: (vaddr, size).
    table: (u64, u64),
    /// The return addresses into `site_hot` and `site_cold`, as the program
    /// prints them (load-bias relative).
    hot_site: u64,
    cold_site: u64,
}

/// An ELF file's build-id (hex) and symbols (name -> (vaddr, size)).
fn elf_info(path: &Path) -> (String, HashMap<String, (u64, u64)>) {
    let data = fs::read(path).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let build_id = elf
        .build_id()
        .unwrap()
        .expect("the compiler gives the file a build-id")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    let symbols = elf
        .symbols()
        .filter_map(|s| Some((s.name().ok()?.to_owned(), (s.address(), s.size()))))
        .collect();
    (build_id, symbols)
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile(PROGRAM, dir.path(), EXE);
    let lib = install(dir.path()).unwrap();
    let (build_id, symbols) = elf_info(&exe);
    let table = symbols["hot_table"];
    assert_eq!(table.1, 3 << 20);
    // A first run, without the library, for the sites' addresses.
    let p = parse(&run(&exe, &[], &[]));
    let (hot_site, cold_site) = (p.sites["hot"], p.sites["cold"]);
    // Each lies in its function (a return address, past the call).
    for (site, name) in [(hot_site, "site_hot"), (cold_site, "site_cold")] {
        let (start, size) = symbols[name];
        assert!(
            (start + 1..start + size).contains(&site),
            "{name} at {start:#x}+{size}: site {site:#x}"
        );
    }
    Fixture {
        dir,
        exe,
        lib,
        build_id,
        table,
        hot_site,
        cold_site,
    }
}

/// What the program printed.
#[derive(Default, Debug)]
struct Printed {
    sites: HashMap<String, u64>,
    /// Name -> (page range bytes, Locked bytes).
    locked: HashMap<String, (u64, u64)>,
    vmlck_kb: u64,
    done: bool,
}

fn parse(r: &Run) -> Printed {
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    let mut p = Printed::default();
    let mut ranges = HashMap::new();
    for line in r.stdout.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["site", name, addr] => {
                p.sites.insert(name.to_owned(), hex(addr));
            }
            ["range", name, lo, hi] => {
                ranges.insert(name.to_owned(), hex(hi) - hex(lo));
            }
            ["locked", name, kb] => {
                let kb: u64 = kb.parse().unwrap();
                p.locked.insert(name.to_owned(), (ranges[name], kb << 10));
            }
            ["vmlck", kb] => p.vmlck_kb = kb.parse().unwrap(),
            ["done"] => p.done = true,
            _ => {}
        }
    }
    assert!(p.done, "{}", r.stdout);
    p
}

impl Fixture {
    fn hints_path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn site(&self, vaddr: u64, action: HintAction) -> HintLine {
        HintLine {
            build_id: None,
            file: EXE.into(),
            target: HintTarget::Site { vaddr },
            action,
        }
    }

    fn symbol(&self, action: HintAction) -> HintLine {
        HintLine {
            build_id: Some(self.build_id.clone()),
            file: "not-its-name".into(), // the build-id decides
            target: HintTarget::Symbol {
                vaddr: self.table.0,
                size: self.table.1,
            },
            action,
        }
    }

    /// Runs the program with the hints file `hints`, sampling into `out`
    /// if given, and the verbose line on.
    fn run(&self, hints: &Path, out: Option<&Path>) -> Run {
        self.run_with(hints, out, &[])
    }

    fn run_with(&self, hints: &Path, out: Option<&Path>, args: &[&str]) -> Run {
        let opts = Options {
            hints: Some(hints.to_owned()),
            hints_verbose: true,
            ..Options::default()
        };
        run(&self.exe, args, &env(&self.lib, out, &opts))
    }
}

/// The verbose line's numbers: "mlock A ok B bytes, C failed" and the same
/// for mbind.
fn verbose(stderr: &str) -> (String, [u64; 3], [u64; 3]) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("udamon-preload: hints (pid "))
        .unwrap_or_else(|| panic!("no hints line on stderr: {stderr}"))
        .to_owned();
    let numbers = |what: &str| -> [u64; 3] {
        let rest = &line[line.find(what).unwrap() + what.len()..];
        let w: Vec<&str> = rest.split_whitespace().collect();
        // "A ok B bytes, C failed"
        [
            w[0].parse().unwrap(),
            w[2].parse().unwrap(),
            w[4].parse().unwrap(),
        ]
    };
    let (lock, bind) = (numbers("; mlock "), numbers("; mbind "));
    (line, lock, bind)
}

fn only_side_file(out: &Path) -> SideFile {
    let paths = SideFile::paths(out).unwrap();
    assert_eq!(paths.len(), 1, "{paths:?}");
    let side = read(&paths[0]).unwrap();
    assert!(side.complete && side.version == 2);
    side
}

#[test]
fn mlock_hints_lock_the_hot_site_and_the_global() {
    let f = fixture();
    let hints = f.hints_path("hints");
    write_hints(
        &hints,
        &[
            f.site(f.hot_site, HintAction::Mlock),
            f.symbol(HintAction::Mlock),
        ],
    )
    .unwrap();
    let out = f.dir.path().join("alloc");
    // With sampling, and with hints alone.
    for sampling in [true, false] {
        let r = f.run(&hints, sampling.then_some(out.as_path()));
        let p = parse(&r);
        let (line, lock, bind) = verbose(&r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        if lock[2] > 0 {
            panic!(
                "mlock2 failed ({line}): EPERM or ENOMEM means this user may not lock \
                 memory (RLIMIT_MEMLOCK without CAP_IPC_LOCK); run the tests as root or \
                 raise `ulimit -l`"
            );
        }
        assert_eq!(p.sites["hot"], f.hot_site, "the program moved");
        // The hinted site's two blocks (a mapped one and one from the heap)
        // and the global are locked, page for page; the other site's is not.
        for name in ["hot", "hot2", "table"] {
            let (range, locked) = p.locked[name];
            assert!(range > 0);
            assert_eq!(locked, range, "{name}: {:?}\n{}", p.locked, r.stdout);
        }
        assert_eq!(p.locked["cold"].1, 0, "{:?}", p.locked);
        let want: u64 = ["hot", "hot2", "table"]
            .iter()
            .map(|n| p.locked[*n].0)
            .sum();
        assert!(p.vmlck_kb << 10 >= want, "VmLck {} kB", p.vmlck_kb);
        assert_eq!(lock, [3, want, 0], "{line}");
        assert_eq!(bind, [0, 0, 0], "{line}");
        assert!(line.contains(": 2 read; 2 allocations matched, 0 with no whole page; 1 symbols;"));
        if sampling {
            let side = only_side_file(&out);
            assert_eq!(
                side.hints,
                Some(HintCounters {
                    time_ns: side.hints.unwrap().time_ns,
                    hints: 2,
                    matched: 2,
                    symbols: 1,
                    locks: 3,
                    locked_bytes: want,
                    ..HintCounters::default()
                })
            );
            // Sampling went on as usual: the 2 MiB blocks are there.
            assert_eq!(
                side.allocations
                    .iter()
                    .filter(|a| a.size == 2 << 20)
                    .count(),
                2
            );
            for p in SideFile::paths(&out).unwrap() {
                fs::remove_file(p).unwrap();
            }
        } else {
            assert!(SideFile::paths(&out).unwrap().is_empty());
        }
    }
}

#[test]
fn a_node_hint_the_machine_may_not_have_is_counted() {
    let f = fixture();
    let hints = f.hints_path("hints");
    write_hints(
        &hints,
        &[
            f.site(f.hot_site, HintAction::Node(1)),
            f.symbol(HintAction::Node(1)),
        ],
    )
    .unwrap();
    let out = f.dir.path().join("alloc");
    let r = f.run(&hints, Some(&out));
    let p = parse(&r);
    let (line, lock, bind) = verbose(&r.stderr);
    assert_eq!(lock, [0, 0, 0], "{line}");
    assert!(p.locked.values().all(|(_, l)| *l == 0), "{:?}", p.locked);
    let side = only_side_file(&out);
    let h = side.hints.unwrap();
    assert_eq!((h.matched, h.symbols, h.locks), (2, 1, 0));
    if Path::new("/sys/devices/system/node/node1").exists() {
        assert_eq!(bind[0], 3, "{line}");
        assert_eq!((h.binds, h.bind_failures), (3, 0));
    } else {
        // One node: mbind refuses node 1 with EINVAL; the program runs on.
        assert_eq!(bind, [0, 0, 3], "{line}");
        assert!(line.ends_with("3 failed (last EINVAL 22)"), "{line}");
        assert_eq!((h.binds, h.bind_failures, h.bind_errno), (0, 3, EINVAL));
    }
}

#[test]
fn a_bad_hints_file_is_refused_with_one_line() {
    let f = fixture();
    let site = format!("site - {EXE} {:x} mlock", f.hot_site);
    let cases = [
        (
            format!("udamon-hints 1\n# a comment\n{site} extra\n"),
            "line 3: a site has 5 fields",
        ),
        (
            format!("udamon-hints 1\n\n{site}\nsite - {EXE} zz mlock\n"),
            "line 4: a vaddr is a hex number",
        ),
        (
            format!("udamon-hints 1\n{site}\nsymbol - {EXE} 10 0 mlock\n"),
            "line 3: a size",
        ),
        (
            format!("udamon-hints 1\n{site}  \n"),
            "line 2: an empty field",
        ),
        (
            format!("udamon-hints 1\nsite - {EXE} 10 node=1024\n"),
            "line 2: an action",
        ),
        (
            format!("udamon-hints 1\nsite abc {EXE} 10 mlock\n"),
            "line 2: a build-id",
        ),
        (format!("{site}\n"), "line 1: the first line is not"),
        (
            format!("udamon-hints 2\n{site}\n"),
            "line 1: unsupported version",
        ),
        ("# nothing\n".to_owned(), "no 'udamon-hints 1' line"),
    ];
    let out = f.dir.path().join("alloc");
    let path = f.hints_path("bad");
    for (i, (text, what)) in cases.iter().enumerate() {
        fs::write(&path, text).unwrap();
        // The first case with sampling: the record says the file was refused.
        let sampling = i == 0;
        let r = f.run(&path, sampling.then_some(out.as_path()));
        let p = parse(&r);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{text:?}: {}", r.stderr);
        let want = format!("udamon-preload: the hints file {}", path.display());
        assert!(
            lines[0].starts_with(&want)
                && lines[0].contains(what)
                && lines[0].ends_with("; placement hints are off"),
            "{text:?}: {}",
            lines[0]
        );
        assert_eq!(p.vmlck_kb, 0);
        if sampling {
            let h = only_side_file(&out).hints.unwrap();
            assert!(h.refused && h.hints == 0 && h.locks == 0, "{h:?}");
            for p in SideFile::paths(&out).unwrap() {
                fs::remove_file(p).unwrap();
            }
        }
    }
    // A file that is not there.
    let missing = f.hints_path("missing");
    let r = f.run(&missing, None);
    parse(&r);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&*missing.to_string_lossy())
            && r.stderr.contains("cannot open it: No such file"),
        "{}",
        r.stderr
    );
}

#[test]
fn only_the_first_4096_hints_are_read() {
    let f = fixture();
    // 4096 hints for a program that is not running, then the hot site's:
    // it is one too many.
    let mut hints: Vec<HintLine> = (0..MAX_HINTS as u64)
        .map(|i| HintLine {
            file: "other-program".into(),
            ..f.site(0x1000 + i, HintAction::Mlock)
        })
        .collect();
    hints.push(f.site(f.hot_site, HintAction::Mlock));
    let path = f.hints_path("many");
    write_hints(&path, &hints).unwrap();
    let r = f.run(&path, None);
    let p = parse(&r);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stderr);
    assert!(
        lines[0].contains("more than 4096 hints in")
            && lines[0].ends_with("only the first 4096 are applied"),
        "{}",
        lines[0]
    );
    let (line, lock, _) = verbose(&r.stderr);
    assert!(
        line.contains(": 4096 read; 0 allocations matched"),
        "{line}"
    );
    assert_eq!(lock, [0, 0, 0]);
    assert_eq!(p.locked["hot"].1, 0);

    // The cold site by build-id among them: it is read, and applied.
    hints.truncate(MAX_HINTS - 1);
    hints.push(HintLine {
        build_id: Some(f.build_id.clone()),
        ..f.site(f.cold_site, HintAction::Mlock)
    });
    write_hints(&path, &hints).unwrap();
    let r = f.run(&path, None);
    let p = parse(&r);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    let (line, lock, _) = verbose(&r.stderr);
    assert!(
        line.contains(": 4096 read; 1 allocations matched"),
        "{line}"
    );
    assert_eq!(lock[0], 1, "{line}");
    assert_eq!(p.locked["cold"].1, p.locked["cold"].0);
    assert_eq!(p.locked["hot"].1, 0);
}

#[test]
fn a_library_loaded_later_gets_its_hints() {
    let f = fixture();
    let so = compile_with(LIBRARY, f.dir.path(), "libhinted.so", &["-shared", "-fPIC"]);
    let so_arg = so.to_str().unwrap();
    let (build_id, symbols) = elf_info(&so);
    let (vaddr, size) = symbols["lib_table"];
    assert_eq!(size, 1 << 20);
    // A first run for the library's site.
    let site = parse(&run(&f.exe, &[so_arg], &[])).sites["lib"];
    let (start, len) = symbols["lib_alloc"];
    assert!((start + 1..start + len).contains(&site), "{site:#x}");
    let hints = f.hints_path("hints");
    write_hints(
        &hints,
        &[
            HintLine {
                build_id: None,
                file: "libhinted.so".into(),
                target: HintTarget::Site { vaddr: site },
                action: HintAction::Mlock,
            },
            HintLine {
                build_id: Some(build_id),
                file: "libhinted.so".into(),
                target: HintTarget::Symbol { vaddr, size },
                action: HintAction::Mlock,
            },
        ],
    )
    .unwrap();
    let out = f.dir.path().join("alloc");
    let r = f.run_with(&hints, Some(&out), &[so_arg]);
    let p = parse(&r);
    let (line, lock, _) = verbose(&r.stderr);
    assert_eq!(lock[2], 0, "mlock2 failed (EPERM: not root?): {line}");
    assert_eq!(p.sites["lib"], site);
    for name in ["libblock", "libtable"] {
        let (range, locked) = p.locked[name];
        assert!(range > 0 && locked == range, "{name}: {:?}", p.locked);
    }
    for name in ["hot", "hot2", "cold", "table"] {
        assert_eq!(p.locked[name].1, 0, "{name}: {:?}", p.locked);
    }
    assert!(
        line.contains(": 2 read; 1 allocations matched, 0 with no whole page; 1 symbols;"),
        "{line}"
    );
    let h = only_side_file(&out).hints.unwrap();
    assert_eq!((h.matched, h.symbols, h.locks), (1, 1, 2), "{h:?}");
}

#[test]
fn hints_with_threads_fork_and_sampling() {
    // Every allocation through the hint path (a minimum of 1 byte) in a
    // program with threads and a fork child, sampled at the same time.
    let f = fixture();
    let exe = compile(ALLOC_TEST, f.dir.path(), "alloc_test");
    let hints = f.hints_path("hints");
    write_hints(
        &hints,
        &[HintLine {
            build_id: None,
            file: "alloc_test".into(),
            target: HintTarget::Site { vaddr: 1 },
            action: HintAction::Mlock,
        }],
    )
    .unwrap();
    let out = f.dir.path().join("alloc");
    let opts = Options {
        hints: Some(hints),
        hint_min: 1,
        hints_verbose: true,
        ..Options::default()
    };
    let r = run(&exe, &[], &env(&f.lib, Some(&out), &opts));
    assert!(r.status.success(), "{:?}\n{}", r.status, r.stderr);
    assert!(r.stdout.ends_with("done\n"));
    // One line per process: the parent's and the fork child's.
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stderr);
    assert_ne!(lines[0], lines[1]);
    for line in &lines {
        assert!(
            line.contains(": 1 read; 0 allocations matched") && line.ends_with("0 failed"),
            "{line}"
        );
    }
    let paths = SideFile::paths(&out).unwrap();
    assert_eq!(paths.len(), 2);
    for path in paths {
        let side = read(&path).unwrap();
        assert!(side.complete && !side.allocations.is_empty());
        let h = side.hints.unwrap();
        assert_eq!((h.hints, h.matched, h.locks, h.lock_failures), (1, 0, 0, 0));
    }
}
