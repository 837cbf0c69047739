//! Driver tests over a fake sysfs tree in a tempdir, never the real /sys.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use udamon_core::schemes::{
    AccessPattern, Action, Damos, DamosStats, Dest, Filter, FilterKind, GoalMetric, QuotaGoal,
    WatermarkMetric, Watermarks,
};
use udamon_core::{AddrRange, Attrs, Monitor, RegionSnapshot};

use crate::{admin_dir, Error, FsIo, KTarget, KdamonConfig, KdamonDriver, OpsKind, Sysfs};

type Log = Rc<RefCell<Vec<(String, String)>>>;

/// A tiny fake kernel: after a write to `nr_*` it creates the numbered
/// directories the real kernel would; it answers `update_schemes_tried_regions`
/// with canned regions and keeps `state` reading on/off.
struct FakeKernel {
    admin: PathBuf,
    /// Entry names this "kernel version" lacks.
    omit: Vec<&'static str>,
    avail_operations: &'static str,
    tried: Vec<(u64, u64, u32, u32)>,
    /// The intervals `update_tuned_intervals` writes back; `None`: a
    /// kernel before 6.15, which rejects the command with EINVAL.
    tuned: Option<(u64, u64)>,
    log: Log,
}

const KDAMOND: &[&str] = &[
    "state=off",
    "pid=",
    "refresh_ms=0",
    "contexts/nr_contexts=0",
];
const CONTEXT: &[&str] = &[
    "pause=N",
    "operations=vaddr",
    "monitoring_attrs/intervals/sample_us=5000",
    "monitoring_attrs/intervals/aggr_us=100000",
    "monitoring_attrs/intervals/update_us=60000000",
    "monitoring_attrs/intervals/intervals_goal/access_bp=0",
    "monitoring_attrs/intervals/intervals_goal/aggrs=0",
    "monitoring_attrs/intervals/intervals_goal/min_sample_us=0",
    "monitoring_attrs/intervals/intervals_goal/max_sample_us=0",
    "monitoring_attrs/nr_regions/min=10",
    "monitoring_attrs/nr_regions/max=1000",
    "targets/nr_targets=0",
    "schemes/nr_schemes=0",
];
const TARGET: &[&str] = &["pid_target=0", "regions/nr_regions=0"];
const REGION: &[&str] = &["start=0", "end=0"];
const SCHEME: &[&str] = &[
    "action=stat",
    "target_nid=-1",
    "apply_interval_us=0",
    "access_pattern/sz/min=0",
    "access_pattern/sz/max=0",
    "access_pattern/nr_accesses/min=0",
    "access_pattern/nr_accesses/max=0",
    "access_pattern/age/min=0",
    "access_pattern/age/max=0",
    "quotas/ms=0",
    "quotas/bytes=0",
    "quotas/reset_interval_ms=0",
    "quotas/effective_bytes=0",
    "quotas/goal_tuner=consist",
    "quotas/weights/sz_permil=0",
    "quotas/weights/nr_accesses_permil=0",
    "quotas/weights/age_permil=0",
    "quotas/goals/nr_goals=0",
    "quotas/fail_charge_num=0",
    "quotas/fail_charge_denom=0",
    "dests/nr_dests=0",
    "watermarks/metric=none",
    "watermarks/interval_us=0",
    "watermarks/high=0",
    "watermarks/mid=0",
    "watermarks/low=0",
    "filters/nr_filters=0",
    "core_filters/nr_filters=0",
    "ops_filters/nr_filters=0",
    "stats/nr_tried=0",
    "stats/sz_tried=0",
    "stats/nr_applied=0",
    "stats/sz_applied=0",
    "stats/qt_exceeds=0",
    "stats/sz_ops_filter_passed=0",
    "stats/nr_snapshots=0",
    "stats/max_nr_snapshots=0",
    "tried_regions/total_bytes=0",
];
const DEST: &[&str] = &["id=0", "weight=0"];
const GOAL: &[&str] = &[
    "target_metric=user_input",
    "target_value=0",
    "current_value=0",
    "nid=0",
    "path=",
];
const FILTER: &[&str] = &[
    "type=anon",
    "matching=N",
    "allow=N",
    "memcg_path=",
    "addr_start=0",
    "addr_end=0",
    "damon_target_idx=0",
    "min=0",
    "max=0",
];

impl FakeKernel {
    fn new(root: &Path) -> (Self, Log) {
        let admin = admin_dir(root);
        std::fs::create_dir_all(admin.join("kdamonds")).unwrap();
        std::fs::write(admin.join("kdamonds/nr_kdamonds"), "0\n").unwrap();
        Self::attach(root)
    }

    /// Another view of the fake kernel under `root` (another driver's),
    /// with a log of its own.
    fn attach(root: &Path) -> (Self, Log) {
        let log = Log::default();
        let admin = admin_dir(root);
        let k = Self {
            admin,
            omit: Vec::new(),
            avail_operations: "vaddr\nfvaddr\npaddr\n",
            tried: Vec::new(),
            tuned: None,
            log: log.clone(),
        };
        (k, log)
    }

    fn populate(&self, dir: &Path, template: &[&str]) {
        for entry in template {
            let (rel, val) = entry.split_once('=').unwrap();
            if rel.split('/').any(|c| self.omit.contains(&c)) {
                continue;
            }
            let p = dir.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{val}\n")).unwrap();
        }
    }

    fn set_children(&self, parent: &Path, n: usize, template: &[&str]) {
        for e in std::fs::read_dir(parent).unwrap() {
            let e = e.unwrap();
            if e.file_name().to_string_lossy().parse::<u64>().is_ok() {
                std::fs::remove_dir_all(e.path()).unwrap();
            }
        }
        for i in 0..n {
            let d = parent.join(i.to_string());
            std::fs::create_dir(&d).unwrap();
            self.populate(&d, template);
            if std::ptr::eq(template, CONTEXT) && !self.omit.contains(&"avail_operations") {
                std::fs::write(d.join("avail_operations"), self.avail_operations).unwrap();
            }
        }
    }
}

impl Sysfs for FakeKernel {
    fn read(&mut self, path: &Path) -> io::Result<String> {
        FsIo.read(path)
    }

    fn write(&mut self, path: &Path, value: &str) -> io::Result<()> {
        if path.ends_with("state") && value == "update_tuned_intervals" && self.tuned.is_none() {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        FsIo.write(path, value)?;
        let rel = path
            .strip_prefix(&self.admin)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        self.log.borrow_mut().push((rel, value.to_string()));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let parent = path.parent().unwrap();
        if let Some(kind) = name.strip_prefix("nr_") {
            let n: usize = value
                .trim()
                .parse()
                .map_err(|_| io::ErrorKind::InvalidInput)?;
            let template = match kind {
                "kdamonds" => KDAMOND,
                "contexts" => CONTEXT,
                "targets" => TARGET,
                "regions" => REGION,
                "schemes" => SCHEME,
                "goals" => GOAL,
                "filters" => FILTER,
                "dests" => DEST,
                _ => return Ok(()),
            };
            self.set_children(parent, n, template);
        } else if name == "state" {
            if value == "update_schemes_tried_regions" {
                let schemes = parent.join("contexts/0/schemes");
                for e in std::fs::read_dir(&schemes).unwrap() {
                    let tr = e.unwrap().path().join("tried_regions");
                    if !tr.is_dir() {
                        continue;
                    }
                    self.set_children(&tr, 0, &[]);
                    for (i, (s, e, nr, age)) in self.tried.iter().enumerate() {
                        let d = tr.join(i.to_string());
                        std::fs::create_dir(&d).unwrap();
                        for (f, v) in [("start", s), ("end", e)] {
                            std::fs::write(d.join(f), format!("{v}\n")).unwrap();
                        }
                        for (f, v) in [("nr_accesses", nr), ("age", age)] {
                            std::fs::write(d.join(f), format!("{v}\n")).unwrap();
                        }
                    }
                }
            }
            if let ("update_tuned_intervals", Some((sample, aggr))) = (value, self.tuned) {
                let iv = parent.join("contexts/0/monitoring_attrs/intervals");
                std::fs::write(iv.join("sample_us"), format!("{sample}\n")).unwrap();
                std::fs::write(iv.join("aggr_us"), format!("{aggr}\n")).unwrap();
            }
            if value != "off" {
                std::fs::write(path, "on\n").unwrap();
            }
        }
        Ok(())
    }

    fn exists(&mut self, path: &Path) -> bool {
        FsIo.exists(path)
    }

    fn list(&mut self, dir: &Path) -> io::Result<Vec<String>> {
        FsIo.list(dir)
    }
}

fn config(schemes: Vec<Damos>) -> KdamonConfig {
    KdamonConfig {
        ops: OpsKind::Vaddr,
        targets: vec![KTarget {
            pid: Some(1234),
            regions: vec![],
            obsolete: false,
        }],
        attrs: Attrs::default(),
        schemes,
        snapshots: true,
    }
}

/// damo's prcl-like scheme: page out regions of at least 4 KiB not accessed
/// for 5 s, 10 ms / 128 MiB per second, weighted by age, under pressure.
fn prcl() -> Damos {
    let mut s = Damos::new(
        AccessPattern {
            min_sz: 4096,
            max_sz: u64::MAX,
            min_freq_bp: 0,
            max_freq_bp: 0,
            min_age_us: 5_000_000,
            max_age_us: u64::MAX,
        },
        Action::Pageout,
    );
    s.quota.ms = 10;
    s.quota.sz = 128 << 20;
    s.quota.reset_interval_ms = 1000;
    s.quota.weights.nr_accesses = 3;
    s.quota.weights.age = 7;
    s.quota.goals.push(QuotaGoal {
        metric: GoalMetric::SomeMemPsiUs,
        target_value: 1000,
        current_value: 0,
        nid: 0,
        path: None,
    });
    s.watermarks = Watermarks {
        metric: WatermarkMetric::FreeMemRate,
        interval_us: 5_000_000,
        high: 500,
        mid: 400,
        low: 200,
    };
    s.filters.push(Filter {
        kind: FilterKind::Anon,
        matching: false,
        allow: false,
    });
    s.filters.push(Filter {
        kind: FilterKind::Addr {
            start: 0x1000,
            end: 0x2000,
        },
        matching: true,
        allow: true,
    });
    s
}

fn writes_under(log: &Log, prefix: &str) -> Vec<(String, String)> {
    log.borrow()
        .iter()
        .filter_map(|(p, v)| Some((p.strip_prefix(prefix)?.to_string(), v.clone())))
        .collect()
}

fn pairs(t: &[(&str, &str)]) -> Vec<(String, String)> {
    t.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn prcl_scheme_translates_to_exact_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    let ctx = "kdamonds/0/contexts/0/";
    let head: Vec<_> = log.borrow().iter().take(13).cloned().collect();
    assert_eq!(
        head,
        pairs(&[
            ("kdamonds/nr_kdamonds", "1"),
            ("kdamonds/0/refresh_ms", "1000"),
            ("kdamonds/0/contexts/nr_contexts", "1"),
            ("kdamonds/0/contexts/0/operations", "vaddr"),
            (
                "kdamonds/0/contexts/0/monitoring_attrs/intervals/sample_us",
                "5000"
            ),
            (
                "kdamonds/0/contexts/0/monitoring_attrs/intervals/aggr_us",
                "100000"
            ),
            (
                "kdamonds/0/contexts/0/monitoring_attrs/intervals/update_us",
                "1000000"
            ),
            (
                "kdamonds/0/contexts/0/monitoring_attrs/nr_regions/min",
                "10"
            ),
            (
                "kdamonds/0/contexts/0/monitoring_attrs/nr_regions/max",
                "1000"
            ),
            ("kdamonds/0/contexts/0/targets/nr_targets", "1"),
            ("kdamonds/0/contexts/0/targets/0/pid_target", "1234"),
            ("kdamonds/0/contexts/0/targets/0/regions/nr_regions", "0"),
            ("kdamonds/0/contexts/0/schemes/nr_schemes", "2"),
        ])
    );
    let max = u64::MAX.to_string();
    let umax = u32::MAX.to_string();
    let want: Vec<(&str, &str)> = vec![
        ("action", "pageout"),
        ("access_pattern/sz/min", "4096"),
        ("access_pattern/sz/max", &max),
        ("access_pattern/nr_accesses/min", "0"),
        ("access_pattern/nr_accesses/max", "0"),
        ("access_pattern/age/min", "50"),
        ("access_pattern/age/max", &umax),
        ("quotas/ms", "10"),
        ("quotas/bytes", "134217728"),
        ("quotas/reset_interval_ms", "1000"),
        ("quotas/weights/sz_permil", "0"),
        ("quotas/weights/nr_accesses_permil", "3"),
        ("quotas/weights/age_permil", "7"),
        ("quotas/goals/nr_goals", "1"),
        ("quotas/goals/0/target_metric", "some_mem_psi_us"),
        ("quotas/goals/0/target_value", "1000"),
        ("watermarks/metric", "free_mem_rate"),
        ("watermarks/interval_us", "5000000"),
        ("watermarks/high", "500"),
        ("watermarks/mid", "400"),
        ("watermarks/low", "200"),
        ("core_filters/nr_filters", "1"),
        ("core_filters/0/type", "addr"),
        ("core_filters/0/addr_start", "4096"),
        ("core_filters/0/addr_end", "8192"),
        ("core_filters/0/matching", "Y"),
        ("core_filters/0/allow", "Y"),
        ("ops_filters/nr_filters", "1"),
        ("ops_filters/0/type", "anon"),
        ("ops_filters/0/matching", "N"),
    ];
    assert_eq!(
        writes_under(&log, &format!("{ctx}schemes/0/")),
        pairs(&want)
    );
    // The snapshot scheme: stat, matching everything.
    let snap = writes_under(&log, &format!("{ctx}schemes/1/"));
    assert_eq!(snap[0], pairs(&[("action", "stat")])[0]);
    assert!(snap.contains(&pairs(&[("access_pattern/nr_accesses/max", &umax)])[0]));
    assert_eq!(
        log.borrow().last().unwrap(),
        &pairs(&[("kdamonds/0/state", "on")])[0]
    );
}

#[test]
fn legacy_filters_dir_without_core_and_ops_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, log) = FakeKernel::new(dir.path());
    fake.omit = vec!["core_filters", "ops_filters"];
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    let w = writes_under(&log, "kdamonds/0/contexts/0/schemes/0/filters/");
    assert_eq!(w[0], pairs(&[("nr_filters", "2")])[0]);
    assert_eq!(w[1], pairs(&[("0/type", "anon")])[0]);
    assert_eq!(w[3], pairs(&[("1/type", "addr")])[0]);
}

/// Every entry's bytes and mtime under `root`.
fn tree_snapshot(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, std::time::SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let md = e.metadata().unwrap();
            if md.is_dir() {
                stack.push(e.path());
                out.insert(e.path(), (Vec::new(), md.modified().unwrap()));
            } else {
                out.insert(
                    e.path(),
                    (std::fs::read(e.path()).unwrap(), md.modified().unwrap()),
                );
            }
        }
    }
    out
}

#[test]
fn refuses_a_busy_tree_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let k = admin_dir(dir.path()).join("kdamonds");
    std::fs::create_dir_all(k.join("0/contexts/0")).unwrap();
    std::fs::write(k.join("nr_kdamonds"), "1\n").unwrap();
    std::fs::write(k.join("0/state"), "on\n").unwrap();
    std::fs::write(k.join("0/pid"), "4321\n").unwrap();
    std::fs::write(k.join("0/contexts/nr_contexts"), "1\n").unwrap();
    let before = tree_snapshot(dir.path());
    {
        let mut d = KdamonDriver::new(dir.path().into(), config(vec![prcl()]));
        let e = d.start().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Foreign { .. }), "{msg}");
        assert!(msg.contains(&k.join("0").display().to_string()), "{msg}");
        assert!(
            msg.contains("never takes over another user's kdamond"),
            "{msg}"
        );
        assert!(msg.contains("4321"), "{msg}");
        assert!(d.next_snapshot().is_err());
        assert!(d.stats().is_err());
        assert!(d.state_command("off").is_err());
        assert!(
            Monitor::commit(&mut d, Attrs::default()).is_ok(),
            "not running: attrs only stored"
        );
        d.stop().unwrap();
    } // Drop must not write either.
    assert_eq!(tree_snapshot(dir.path()), before);
}

/// The scheme features of Linux 6.17 to 7.2, each in its file.
fn newer() -> Damos {
    let mut s = Damos::new(AccessPattern::default(), Action::MigrateHot);
    s.dests = vec![Dest { node: 0, weight: 3 }, Dest { node: 2, weight: 1 }];
    s.max_nr_snapshots = 40;
    s.quota.sz = 1 << 30;
    s.quota.reset_interval_ms = 1000;
    s.quota.fail_charge_num = 1;
    s.quota.fail_charge_denom = 4;
    s.quota.goals.push(QuotaGoal {
        nid: 1,
        path: Some("/workload".into()),
        ..QuotaGoal::new(GoalMetric::NodeMemcgUsedBp, 3000)
    });
    s.quota
        .goals
        .push(QuotaGoal::new(GoalMetric::InactiveMemBp, 4000));
    s
}

#[test]
fn newer_kernel_features_are_written_where_the_kernel_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![newer()]), Box::new(fake));
    d.start().unwrap();
    let w = writes_under(&log, "kdamonds/0/contexts/0/schemes/0/");
    for want in [
        ("dests/nr_dests", "2"),
        ("dests/0/id", "0"),
        ("dests/0/weight", "3"),
        ("dests/1/id", "2"),
        ("dests/1/weight", "1"),
        ("stats/max_nr_snapshots", "40"),
        ("quotas/fail_charge_num", "1"),
        ("quotas/fail_charge_denom", "4"),
        ("quotas/goals/0/target_metric", "node_memcg_used_bp"),
        ("quotas/goals/0/nid", "1"),
        ("quotas/goals/0/path", "/workload"),
        ("quotas/goals/1/target_metric", "inactive_mem_bp"),
    ] {
        assert!(
            w.contains(&(want.0.to_string(), want.1.to_string())),
            "{want:?} not in {w:?}"
        );
    }
    // The nid of a goal that has none and the dests of a scheme without
    // them are left alone, so older kernels take the rest.
    assert!(!w
        .iter()
        .any(|(p, _)| p == "quotas/goals/1/nid" || p == "quotas/goals/1/path"));
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    let w = writes_under(&log, "kdamonds/0/contexts/0/schemes/0/");
    assert!(
        !w.iter().any(|(p, _)| p.starts_with("dests")
            || p.contains("fail_charge")
            || p.ends_with("max_nr_snapshots")),
        "{w:?}"
    );
}

#[test]
fn node_eligible_goals_need_the_physical_space() {
    let mut s = Damos::new(AccessPattern::default(), Action::MigrateHot);
    s.target_nid = Some(1);
    s.quota
        .goals
        .push(QuotaGoal::new(GoalMetric::NodeEligibleMemBp, 5000));
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![s.clone()]), Box::new(fake));
    let e = d.start().unwrap_err();
    assert!(matches!(e, Error::NoKernelEquivalent { .. }), "{e}");
    assert!(e.to_string().contains("paddr only (Linux 7.2+)"), "{e}");
    assert!(log.borrow().is_empty(), "refused before any write");
}

#[test]
fn missing_features_are_named_and_the_kdamond_removed() {
    let cases: &[(&[&str], Damos, &str)] = &[
        (
            &["tried_regions"],
            Damos::new(AccessPattern::default(), Action::Stat),
            "tried_regions needs Linux 6.2+",
        ),
        (
            &["apply_interval_us"],
            Damos {
                apply_interval_us: 1_000_000,
                ..Damos::new(AccessPattern::default(), Action::Cold)
            },
            "apply_interval_us needs Linux 6.7+",
        ),
        (&["goals"], prcl(), "goals needs Linux 6.8+"),
        (&["dests"], newer(), "dests needs Linux 6.17+"),
        (&["path"], newer(), "path needs Linux 6.19+"),
        (
            &["max_nr_snapshots"],
            newer(),
            "max_nr_snapshots needs Linux 7.0+",
        ),
        (
            &["fail_charge_num"],
            newer(),
            "fail_charge_num needs Linux 7.2+",
        ),
    ];
    for (omit, scheme, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (mut fake, _log) = FakeKernel::new(dir.path());
        fake.omit = omit.to_vec();
        let mut d = KdamonDriver::with_io(
            dir.path().into(),
            config(vec![scheme.clone()]),
            Box::new(fake),
        );
        let e = d.start().unwrap_err();
        assert!(matches!(e, Error::Missing { .. }), "{e}");
        assert!(e.to_string().contains(want), "{e} lacks {want}");
        let nr =
            std::fs::read_to_string(admin_dir(dir.path()).join("kdamonds/nr_kdamonds")).unwrap();
        assert_eq!(nr, "0", "the half-built kdamond is removed");
    }
}

#[test]
fn missing_operations_and_sysfs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, _log) = FakeKernel::new(dir.path());
    fake.avail_operations = "vaddr\nfvaddr\n";
    let mut cfg = config(vec![]);
    cfg.ops = OpsKind::Paddr;
    cfg.targets = vec![KTarget {
        pid: None,
        regions: vec![AddrRange::new(1 << 32, 2 << 32)],
        obsolete: false,
    }];
    let mut d = KdamonDriver::with_io(dir.path().into(), cfg, Box::new(fake));
    let e = d.start().unwrap_err().to_string();
    assert!(
        e.contains("paddr is not built in") && e.contains("CONFIG_DAMON_PADDR"),
        "{e}"
    );

    let empty = tempfile::tempdir().unwrap();
    let mut d = KdamonDriver::new(empty.path().into(), config(vec![]));
    let e = d.start().unwrap_err().to_string();
    assert!(
        e.contains("nr_kdamonds needs Linux 5.18+ with CONFIG_DAMON_SYSFS"),
        "{e}"
    );
    assert!(!admin_dir(empty.path()).exists(), "nothing created");
}

#[test]
fn untranslatable_scheme_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mlock = Damos::new(AccessPattern::default(), Action::Mlock);
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![mlock]), Box::new(fake));
    let e = d.start().unwrap_err();
    assert!(
        e.to_string()
            .contains("mlock has no kernel DAMON equivalent"),
        "{e}"
    );
    assert!(log.borrow().is_empty());
    // udamon's own goal tuner, likewise.
    let mut fast = prcl();
    fast.quota.goal_tuner = udamon_core::schemes::GoalTuner::Fast;
    let (fake, log) = FakeKernel::new(dir.path());
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![fast]), Box::new(fake));
    let e = d.start().unwrap_err();
    assert!(e.to_string().contains("goal tuner fast"), "{e}");
    assert!(log.borrow().is_empty());
}

#[test]
fn stats_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, log) = FakeKernel::new(dir.path());
    fake.omit = vec!["sz_ops_filter_passed", "refresh_ms"];
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    let st = admin_dir(dir.path()).join("kdamonds/0/contexts/0/schemes/0/stats");
    for (f, v) in [
        ("nr_tried", 7),
        ("sz_tried", 8192),
        ("nr_applied", 3),
        ("sz_applied", 4096),
        ("qt_exceeds", 2),
        ("nr_snapshots", 5),
    ] {
        std::fs::write(st.join(f), format!("{v}\n")).unwrap();
    }
    let stats = d.stats().unwrap();
    assert_eq!(
        stats,
        vec![DamosStats {
            nr_tried: 7,
            sz_tried: 8192,
            nr_applied: 3,
            sz_applied: 4096,
            sz_ops_filter_passed: 0,
            qt_exceeds: 2,
            nr_snapshots: 5,
        }]
    );
    assert_eq!(log.borrow().last().unwrap().1, "update_schemes_stats");
    d.stop().unwrap();

    // Linux 6.17+: the kernel keeps the files current (refresh_ms), and no
    // command takes DAMON's sysfs lock.
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    let st = admin_dir(dir.path()).join("kdamonds/0/contexts/0/schemes/0/stats");
    std::fs::write(st.join("nr_tried"), "9\n").unwrap();
    log.borrow_mut().clear();
    assert_eq!(d.stats().unwrap()[0].nr_tried, 9);
    assert!(log.borrow().is_empty(), "{:?}", log.borrow());
}

#[test]
fn tried_regions_become_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, log) = FakeKernel::new(dir.path());
    fake.tried = vec![
        (4096, 8192, 3, 1),
        (8192, 16384, 0, 9),
        (1 << 20, 2 << 20, 20, 0),
        (4096, 12288, 5, 5),
    ];
    let mut cfg = config(vec![]);
    cfg.targets.push(KTarget {
        pid: Some(99),
        regions: vec![],
        obsolete: false,
    });
    let mut d = KdamonDriver::with_io(dir.path().into(), cfg, Box::new(fake));
    let s = d.next_snapshot().unwrap().unwrap();
    assert_eq!((s.sample_us, s.aggr_us, s.start_us), (5000, 100_000, 0));
    assert_eq!(s.targets.len(), 2);
    assert_eq!(s.targets[0].regions.len(), 3);
    assert_eq!(
        s.targets[1].regions,
        vec![RegionSnapshot {
            start: 4096,
            end: 12288,
            nr_accesses: 5,
            age: 5
        }]
    );
    assert_eq!(
        log.borrow().last().unwrap().1,
        "update_schemes_tried_regions"
    );
    let s2 = d.next_snapshot().unwrap().unwrap();
    assert_eq!(s2.start_us, s.end_us);

    // Attribute commit rewrites intervals and kernel-unit patterns, then commits.
    let a = Attrs {
        aggr_us: 200_000,
        ..Attrs::default()
    };
    Monitor::commit(&mut d, a).unwrap();
    assert_eq!(d.attrs(), a);
    let tail: Vec<_> = log.borrow().iter().rev().take(1).cloned().collect();
    assert_eq!(tail[0].1, "commit");
    assert!(log.borrow().contains(
        &pairs(&[(
            "kdamonds/0/contexts/0/monitoring_attrs/intervals/aggr_us",
            "200000"
        )])[0]
    ));
    let bad = Attrs {
        min_nr_regions: 1,
        ..a
    };
    assert!(Monitor::commit(&mut d, bad).is_err());
    assert_eq!(d.attrs(), a, "a bad commit changes nothing");

    // The kernel turned the kdamond off (targets gone): no more snapshots.
    std::fs::write(admin_dir(dir.path()).join("kdamonds/0/state"), "off\n").unwrap();
    assert_eq!(d.next_snapshot().unwrap(), None);
    d.stop().unwrap();
    let l = log.borrow();
    assert_eq!(
        l.last().unwrap(),
        &pairs(&[("kdamonds/nr_kdamonds", "0")])[0]
    );
}

/// The effective quota, the last pass's tried bytes and the goals' current
/// values come from the kernel, refreshed first; a kernel without the files
/// gives `None` (shown as n/a), never a made-up figure.
#[test]
fn scheme_extras_read_back_or_are_absent() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, log) = FakeKernel::new(dir.path());
    fake.omit = vec!["refresh_ms"];
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    let s = admin_dir(dir.path()).join("kdamonds/0/contexts/0/schemes/0");
    std::fs::write(s.join("quotas/effective_bytes"), "131072\n").unwrap();
    std::fs::create_dir_all(s.join("tried_regions")).unwrap();
    std::fs::write(s.join("tried_regions/total_bytes"), "65536\n").unwrap();
    let nr_goals = prcl().quota.goals.len();
    for g in 0..nr_goals {
        std::fs::write(s.join(format!("quotas/goals/{g}/current_value")), "42\n").unwrap();
    }
    let x = d.scheme_extras().unwrap();
    assert_eq!(x[0].effective_bytes, Some(131_072));
    assert_eq!(x[0].tried_bytes, Some(65_536));
    assert_eq!(x[0].goal_values, Some(vec![42; nr_goals]));
    let cmds: Vec<String> = log
        .borrow()
        .iter()
        .filter(|(p, _)| p.ends_with("state"))
        .map(|(_, v)| v.clone())
        .collect();
    assert!(
        cmds.contains(&"update_schemes_effective_quotas".to_string()),
        "{cmds:?}"
    );
    assert!(
        cmds.contains(&"update_schemes_tried_bytes".to_string()),
        "{cmds:?}"
    );
    d.stop().unwrap();

    // An older kernel: neither file.
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, _) = FakeKernel::new(dir.path());
    fake.omit = vec!["effective_bytes"];
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    let s = admin_dir(dir.path()).join("kdamonds/0/contexts/0/schemes/0");
    std::fs::remove_file(s.join("tried_regions/total_bytes")).unwrap();
    let x = d.scheme_extras().unwrap();
    assert_eq!((x[0].effective_bytes, x[0].tried_bytes), (None, None));
}

/// Another tool creates its kdamond between udamon's check and its write
/// of `nr_kdamonds`: what udamon finds is not a fresh kdamond, so it takes
/// nothing, configures nothing and removes nothing.
#[test]
fn a_kdamond_created_in_the_race_is_left_alone() {
    struct Racer(FakeKernel, PathBuf);
    impl Sysfs for Racer {
        fn read(&mut self, p: &Path) -> io::Result<String> {
            self.0.read(p)
        }
        fn write(&mut self, p: &Path, v: &str) -> io::Result<()> {
            self.0.write(p, v)?;
            if p.ends_with("kdamonds/nr_kdamonds") && v == "1" {
                // The other tool's configuration, written meanwhile.
                let k = self.1.join("kdamonds/0");
                std::fs::write(k.join("contexts/nr_contexts"), "1\n")?;
                std::fs::write(k.join("state"), "on\n")?;
            }
            Ok(())
        }
        fn exists(&mut self, p: &Path) -> bool {
            self.0.exists(p)
        }
        fn list(&mut self, d: &Path) -> io::Result<Vec<String>> {
            self.0.list(d)
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let racer = Racer(fake, admin_dir(dir.path()));
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(racer));
    let e = d.start().unwrap_err();
    assert!(matches!(e, Error::Foreign { .. }), "{e}");
    d.stop().unwrap();
    drop(d);
    let writes: Vec<String> = log
        .borrow()
        .iter()
        .map(|(p, v)| format!("{p}={v}"))
        .collect();
    assert_eq!(writes, ["kdamonds/nr_kdamonds=1"], "{writes:?}");
}

/// The writes logged since `from`.
fn since(log: &Log, from: usize) -> Vec<(String, String)> {
    log.borrow()[from..].to_vec()
}

/// Online reconfiguration: the new access pattern is written in kernel
/// units and `commit` ends it, on the same kdamond (no `on`, no new
/// kdamond, same pid); the claim follows the new intervals.
#[test]
fn commit_reconfigures_the_running_kdamond() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.claim_as(Some(77));
    d.start().unwrap();
    let k = admin_dir(dir.path()).join("kdamonds/0");
    std::fs::write(k.join("pid"), "4242\n").unwrap();
    assert_eq!(d.kdamond_pid(), Some(4242));

    let from = log.borrow().len();
    let mut s = prcl();
    s.pattern.min_age_us = 20_000_000;
    let attrs = Attrs {
        aggr_us: 200_000,
        ..Attrs::default()
    };
    let targets = vec![KTarget {
        pid: Some(1234),
        regions: vec![],
        obsolete: false,
    }];
    d.commit(attrs, targets.clone(), vec![s.clone()]).unwrap();
    let w = since(&log, from);
    let ctx = "kdamonds/0/contexts/0/";
    // 20 s at 200 ms per aggregation: 100 aggregation intervals.
    assert!(
        w.contains(&pairs(&[(&format!("{ctx}schemes/0/access_pattern/age/min"), "100")])[0]),
        "{w:?}"
    );
    assert!(w.contains(&pairs(&[(&format!("{ctx}targets/0/regions/nr_regions"), "0")])[0]));
    assert!(w.contains(&pairs(&[(&format!("{ctx}schemes/nr_schemes"), "2")])[0]));
    // Every file of the recreated scheme directories is written again.
    assert!(w.contains(&pairs(&[(&format!("{ctx}schemes/0/action"), "pageout")])[0]));
    assert!(w.contains(&pairs(&[(&format!("{ctx}schemes/1/action"), "stat")])[0]));
    assert_eq!(
        w.last().unwrap(),
        &pairs(&[("kdamonds/0/state", "commit")])[0]
    );
    assert!(
        !w.iter()
            .any(|(p, v)| p == "kdamonds/nr_kdamonds" || v == "on"),
        "{w:?}"
    );
    assert_eq!(d.kdamond_pid(), Some(4242));
    assert_eq!(d.attrs(), attrs);
    let claim = crate::claim::Claim::read(dir.path()).unwrap();
    assert_eq!((claim.aggr_us, claim.kdamond_pid), (200_000, Some(4242)));
    d.stop().unwrap();
    assert_eq!(d.kdamond_pid(), None);
}

/// A bad new configuration is refused before the first write: the running
/// kdamond, its files and the driver's config stay as they were.
#[test]
fn commit_of_a_bad_config_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    let targets = config(vec![]).targets;
    let before = tree_snapshot(dir.path());
    let from = log.borrow().len();

    let mlock = Damos::new(AccessPattern::default(), Action::Mlock);
    let e = d
        .commit(Attrs::default(), targets.clone(), vec![prcl(), mlock])
        .unwrap_err();
    assert!(matches!(e, Error::NoKernelEquivalent { .. }), "{e}");
    let bad = Attrs {
        min_nr_regions: 1,
        ..Attrs::default()
    };
    let e = d.commit(bad, targets, vec![prcl()]).unwrap_err();
    assert!(matches!(e, Error::Attrs(_)), "{e}");

    assert_eq!(since(&log, from), vec![]);
    assert_eq!(tree_snapshot(dir.path()), before);
    assert_eq!(d.attrs(), Attrs::default());
    assert_eq!(d.stats().unwrap().len(), 1);
}

#[test]
fn commit_before_start_is_not_started() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let cfg = config(vec![prcl()]);
    let mut d = KdamonDriver::with_io(dir.path().into(), cfg.clone(), Box::new(fake));
    let e = d
        .commit(cfg.attrs, cfg.targets.clone(), cfg.schemes.clone())
        .unwrap_err();
    assert!(matches!(e, Error::NotStarted), "{e}");
    assert!(matches!(
        d.tuned_intervals().unwrap_err(),
        Error::NotStarted
    ));
    assert_eq!(d.kdamond_pid(), None);
    // After a stop, too.
    d.start().unwrap();
    d.stop().unwrap();
    let from = log.borrow().len();
    let e = d.commit(cfg.attrs, cfg.targets, cfg.schemes).unwrap_err();
    assert!(matches!(e, Error::NotStarted), "{e}");
    assert_eq!(since(&log, from), vec![]);
}

/// After a commit with another number of schemes, statistics, extras and
/// snapshots follow the new schemes (the snapshot scheme moved up).
#[test]
fn commit_changes_the_schemes_stats_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, _log) = FakeKernel::new(dir.path());
    fake.tried = vec![(4096, 8192, 3, 1)];
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    assert_eq!(d.stats().unwrap().len(), 1);

    let cold = Damos::new(AccessPattern::default(), Action::Cold);
    let targets = config(vec![]).targets;
    d.commit(Attrs::default(), targets.clone(), vec![prcl(), cold])
        .unwrap();
    let schemes = admin_dir(dir.path()).join("kdamonds/0/contexts/0/schemes");
    assert_eq!(
        std::fs::read_to_string(schemes.join("nr_schemes")).unwrap(),
        "3"
    );
    std::fs::write(schemes.join("1/stats/nr_applied"), "9\n").unwrap();
    let stats = d.stats().unwrap();
    assert_eq!(stats.len(), 2);
    assert_eq!(stats[1].nr_applied, 9);
    assert_eq!(d.scheme_extras().unwrap().len(), 2);
    let snap = d.next_snapshot().unwrap().unwrap();
    assert_eq!(snap.targets[0].regions.len(), 1);

    d.commit(Attrs::default(), targets, vec![]).unwrap();
    assert_eq!(d.stats().unwrap(), vec![]);
    assert!(d.next_snapshot().unwrap().is_some());
}

fn tuning_attrs() -> Attrs {
    let mut a = Attrs::default();
    a.intervals_goal.access_bp = 400;
    a.intervals_goal.aggrs = 3;
    a.intervals_goal.min_sample_us = 5_000;
    a.intervals_goal.max_sample_us = 10_000_000;
    a
}

#[test]
fn tuned_intervals_only_when_tuning_and_supported() {
    // Tuning off: nothing asked of the kernel.
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![]), Box::new(fake));
    d.start().unwrap();
    let from = log.borrow().len();
    assert_eq!(d.tuned_intervals().unwrap(), None);
    assert_eq!(since(&log, from), vec![]);
    d.stop().unwrap();

    // Tuning on, but the kernel does not know update_tuned_intervals.
    let dir = tempfile::tempdir().unwrap();
    let (fake, _) = FakeKernel::new(dir.path());
    let mut cfg = config(vec![]);
    cfg.attrs = tuning_attrs();
    let mut d = KdamonDriver::with_io(dir.path().into(), cfg.clone(), Box::new(fake));
    d.start().unwrap();
    assert_eq!(d.tuned_intervals().unwrap(), None);
    d.stop().unwrap();

    // Tuning on and the kernel reports its tuned intervals.
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, log) = FakeKernel::new(dir.path());
    fake.tuned = Some((2_500, 50_000));
    let mut d = KdamonDriver::with_io(dir.path().into(), cfg.clone(), Box::new(fake));
    d.start().unwrap();
    assert_eq!(d.tuned_intervals().unwrap(), Some((2_500, 50_000)));
    assert_eq!(
        log.borrow().last().unwrap(),
        &pairs(&[("kdamonds/0/state", "update_tuned_intervals")])[0]
    );
    assert_eq!(d.attrs(), cfg.attrs, "the driver's attributes stay");

    // A commit turning tuning off writes aggrs 0 over the running goal.
    let from = log.borrow().len();
    d.commit(Attrs::default(), cfg.targets.clone(), vec![])
        .unwrap();
    assert!(since(&log, from).contains(
        &pairs(&[(
            "kdamonds/0/contexts/0/monitoring_attrs/intervals/intervals_goal/aggrs",
            "0"
        )])[0]
    ));
    assert_eq!(d.tuned_intervals().unwrap(), None);
}

/// Without the intervals_goal directory (before 6.15) there is nothing
/// to tune.
#[test]
fn tuned_intervals_none_without_intervals_goal() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, log) = FakeKernel::new(dir.path());
    fake.tuned = Some((2_500, 50_000));
    let mut cfg = config(vec![]);
    cfg.attrs = tuning_attrs();
    let mut d = KdamonDriver::with_io(dir.path().into(), cfg, Box::new(fake));
    d.start().unwrap();
    let goal = admin_dir(dir.path())
        .join("kdamonds/0/contexts/0/monitoring_attrs/intervals/intervals_goal");
    std::fs::remove_dir_all(goal).unwrap();
    let from = log.borrow().len();
    assert_eq!(d.tuned_intervals().unwrap(), None);
    assert_eq!(since(&log, from), vec![]);
}

/// The kernel refuses the `commit` (say, a target's pid is gone): the
/// kdamond goes on with its old configuration, and so do the driver and
/// the files it reads.
#[test]
fn a_refused_commit_keeps_the_old_config() {
    struct Refuser(FakeKernel);
    impl Sysfs for Refuser {
        fn read(&mut self, p: &Path) -> io::Result<String> {
            self.0.read(p)
        }
        fn write(&mut self, p: &Path, v: &str) -> io::Result<()> {
            if p.ends_with("state") && v == "commit" {
                return Err(io::ErrorKind::InvalidInput.into());
            }
            self.0.write(p, v)
        }
        fn exists(&mut self, p: &Path) -> bool {
            self.0.exists(p)
        }
        fn list(&mut self, d: &Path) -> io::Result<Vec<String>> {
            self.0.list(d)
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (fake, _log) = FakeKernel::new(dir.path());
    let cfg = config(vec![prcl()]);
    let mut d = KdamonDriver::with_io(dir.path().into(), cfg.clone(), Box::new(Refuser(fake)));
    d.start().unwrap();
    let cold = Damos::new(AccessPattern::default(), Action::Cold);
    let attrs = Attrs {
        aggr_us: 200_000,
        ..Attrs::default()
    };
    let e = d
        .commit(attrs, cfg.targets.clone(), vec![prcl(), cold])
        .unwrap_err();
    assert!(matches!(e, Error::Write { .. }), "{e}");
    assert_eq!(d.attrs(), cfg.attrs);
    assert_eq!(d.stats().unwrap().len(), 1);
    let ctx = admin_dir(dir.path()).join("kdamonds/0/contexts/0");
    let read = |rel: &str| std::fs::read_to_string(ctx.join(rel)).unwrap();
    assert_eq!(
        read("schemes/nr_schemes"),
        "2",
        "the old files written back"
    );
    assert_eq!(read("monitoring_attrs/intervals/aggr_us"), "100000");
}

#[test]
fn pause_and_resume_keep_the_kdamond() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut cfg = config(vec![prcl()]);
    cfg.snapshots = true;
    let mut d = KdamonDriver::with_io(dir.path().into(), cfg, Box::new(fake));
    assert!(!d.can_pause(), "no kdamond yet");
    assert!(matches!(d.set_paused(true), Err(Error::NotStarted)));
    d.start().unwrap();
    assert!(d.can_pause());
    log.borrow_mut().clear();
    d.set_paused(true).unwrap();
    assert!(d.is_paused());
    assert_eq!(
        *log.borrow(),
        pairs(&[
            ("kdamonds/0/contexts/0/pause", "Y"),
            ("kdamonds/0/state", "commit")
        ])
    );
    // Tried regions would wait for an apply that never comes.
    assert!(matches!(d.take_snapshot(), Err(Error::Paused)));
    // A commit while paused leaves the pause file alone: still paused.
    d.commit(Attrs::default(), vec![], vec![prcl()]).unwrap();
    assert!(!log
        .borrow()
        .iter()
        .skip(2)
        .any(|(p, _)| p.ends_with("pause")));
    log.borrow_mut().clear();
    d.set_paused(false).unwrap();
    assert_eq!(
        log.borrow()[0],
        ("kdamonds/0/contexts/0/pause".into(), "N".into())
    );
    assert!(!d.is_paused());
    assert_eq!(
        std::fs::read_to_string(admin_dir(dir.path()).join("kdamonds/nr_kdamonds")).unwrap(),
        "1",
        "the same kdamond all along"
    );
}

#[test]
fn pause_needs_linux_7_2() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, log) = FakeKernel::new(dir.path());
    fake.omit = vec!["pause"];
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
    d.start().unwrap();
    assert!(!d.can_pause());
    log.borrow_mut().clear();
    let e = d.set_paused(true).unwrap_err();
    assert!(e.to_string().contains("pause needs Linux 7.2+"), "{e}");
    assert!(log.borrow().is_empty(), "nothing written");
    assert!(!d.is_paused());
}

#[test]
fn the_kernel_refreshes_our_figures_where_it_can() {
    for omit in [vec![], vec!["refresh_ms"]] {
        let dir = tempfile::tempdir().unwrap();
        let (mut fake, log) = FakeKernel::new(dir.path());
        fake.omit = omit.clone();
        let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![prcl()]), Box::new(fake));
        d.start().unwrap();
        let wrote = log
            .borrow()
            .iter()
            .any(|(p, v)| p == "kdamonds/0/refresh_ms" && v == "1000");
        assert_eq!(wrote, omit.is_empty(), "{omit:?}");
    }
}

/// With refresh_ms the effective quota needs no command, and the tried
/// bytes are not asked for while a scheme stops at max_nr_snapshots: the
/// walk the command waits for would never come, and the command would hold
/// DAMON's sysfs lock.
#[test]
fn scheme_extras_take_no_lock_for_ever() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, log) = FakeKernel::new(dir.path());
    let mut stops = prcl();
    stops.max_nr_snapshots = 5;
    let mut d = KdamonDriver::with_io(dir.path().into(), config(vec![stops]), Box::new(fake));
    d.start().unwrap();
    let s = admin_dir(dir.path()).join("kdamonds/0/contexts/0/schemes/0");
    std::fs::write(s.join("quotas/effective_bytes"), "4096\n").unwrap();
    log.borrow_mut().clear();
    let x = d.scheme_extras().unwrap();
    assert_eq!(x[0].effective_bytes, Some(4096));
    assert_eq!(x[0].tried_bytes, None);
    assert!(
        !log.borrow().iter().any(|(p, _)| p.ends_with("state")),
        "{:?}",
        log.borrow()
    );
}

/// A set of two kdamonds for two sessions with different attributes: one
/// `nr_kdamonds` write for both, each driver configures and runs only its
/// own kdamond, each is claimed; a stopped session turns its kdamond off
/// and gives it back, and the set's removal removes them all.
#[test]
fn a_set_runs_two_kdamonds_with_their_own_attributes() {
    use crate::claim::{self, Verdict};
    use crate::KdamondSet;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (mut fake, log) = FakeKernel::new(root);
    let set = KdamondSet::create_with_io(root, 2, Some(77), &mut fake).unwrap();
    let admin = admin_dir(root);
    let read = |p: &str| {
        std::fs::read_to_string(admin.join(p))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(read("kdamonds/nr_kdamonds"), "2");
    assert_eq!(
        log.borrow().as_slice(),
        &pairs(&[("kdamonds/nr_kdamonds", "2")]),
        "one write makes the set"
    );
    let (slow, fast) = (set.take().unwrap(), set.take().unwrap());
    assert!(set.take().is_none(), "a third session gets no kdamond");
    assert_eq!((slow.index(), fast.index(), set.free()), (0, 1, 0));
    let mut a = config(vec![]);
    a.attrs.sample_us = 20_000;
    a.attrs.aggr_us = 1_000_000;
    let mut b = config(vec![prcl()]);
    b.targets[0].pid = Some(5678);
    let (io_a, log_a) = FakeKernel::attach(root);
    let (io_b, log_b) = FakeKernel::attach(root);
    let mut da = KdamonDriver::in_set_with_io(slow, a, Box::new(io_a));
    let mut db = KdamonDriver::in_set_with_io(fast, b, Box::new(io_b));
    da.claim_as(Some(77));
    db.claim_as(Some(77));
    da.start().unwrap();
    db.start().unwrap();
    // each driver wrote only its own kdamond, and never nr_kdamonds
    for (l, k) in [(&log_a, "kdamonds/0/"), (&log_b, "kdamonds/1/")] {
        let l = l.borrow();
        assert!(l.iter().all(|(p, _)| p.starts_with(k)), "{l:?}");
    }
    let iv = "contexts/0/monitoring_attrs/intervals/sample_us";
    assert_eq!(read(&format!("kdamonds/0/{iv}")), "20000");
    assert_eq!(read(&format!("kdamonds/1/{iv}")), "5000");
    assert_eq!(read("kdamonds/1/contexts/0/targets/0/pid_target"), "5678");
    assert_eq!(
        (read("kdamonds/0/state"), read("kdamonds/1/state")),
        ("on".into(), "on".into())
    );
    let c1 = claim::Claim::read_index(root, 1).unwrap();
    assert_eq!((c1.index, c1.target_pids.clone()), (1, vec![5678]));
    assert_eq!(claim::SetClaim::read(root).unwrap().nr_kdamonds, 2);
    let me = std::process::id();
    assert!(matches!(
        claim::judge(root, &|p| (p == me).then_some(77)),
        Verdict::Running(_)
    ));

    // one session ends: its kdamond is off and free again, the other runs
    da.stop().unwrap();
    drop(da);
    assert_eq!(
        (read("kdamonds/0/state"), read("kdamonds/nr_kdamonds")),
        ("off".into(), "2".into())
    );
    assert_eq!(read("kdamonds/1/state"), "on");
    assert!(claim::Claim::read_index(root, 0).is_none());
    assert_eq!(set.free(), 1);
    assert_eq!(set.take().map(|s| s.index()), Some(0));

    // someone else's kdamond where the set was: the driver refuses
    std::fs::write(admin.join("kdamonds/nr_kdamonds"), "3\n").unwrap();
    assert!(matches!(
        db.state_command("commit"),
        Err(Error::Foreign { .. })
    ));
    std::fs::write(admin.join("kdamonds/nr_kdamonds"), "2\n").unwrap();
    db.stop().unwrap();
    drop(db);
    set.remove().unwrap();
    assert_eq!(read("kdamonds/nr_kdamonds"), "0");
    assert!(claim::SetClaim::read(root).is_none());
    assert_eq!(claim::judge(root, &|_| None), Verdict::NoClaim);
}

/// A set is made only where no kdamond exists; where one does, nothing
/// is written.
#[test]
fn a_set_is_not_made_over_a_foreign_kdamond() {
    let dir = tempfile::tempdir().unwrap();
    let (mut fake, _) = FakeKernel::new(dir.path());
    fake.write(&admin_dir(dir.path()).join("kdamonds/nr_kdamonds"), "1")
        .unwrap();
    let (mut fake, log) = FakeKernel::attach(dir.path());
    let err = crate::KdamondSet::create_with_io(dir.path(), 2, Some(77), &mut fake).unwrap_err();
    assert!(matches!(err, Error::Foreign { .. }), "{err}");
    assert!(log.borrow().is_empty());
}

/// The kdamonds of a udamon service that died: the one that ran has its
/// claim, the other is off; the set is provably udamon's and cleaned up
/// whole. One that runs without a claim makes the set not provable.
#[test]
fn a_dead_services_set_is_cleaned_up_whole() {
    use crate::claim::{self, Verdict};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (mut fake, _) = FakeKernel::new(root);
    let set = crate::KdamondSet::create_with_io(root, 2, Some(77), &mut fake).unwrap();
    let (io, _) = FakeKernel::attach(root);
    let mut d = KdamonDriver::in_set_with_io(set.take().unwrap(), config(vec![]), Box::new(io));
    d.claim_as(Some(77));
    std::fs::write(admin_dir(root).join("kdamonds/0/pid"), "900\n").unwrap();
    d.start().unwrap();
    assert_eq!(claim::Claim::read(root).unwrap().kdamond_pid, Some(900));
    // the service dies: nothing is stopped
    std::mem::forget(d);
    std::mem::forget(set);
    let admin = admin_dir(root);
    let gone = |_| None;
    assert!(matches!(claim::judge(root, &gone), Verdict::Leftover(_)));
    // kdamond 1 turned on by someone: not provable, left alone
    std::fs::write(admin.join("kdamonds/1/state"), "on\n").unwrap();
    assert!(
        matches!(claim::judge(root, &gone), Verdict::Stale(_, why) if why.contains("kdamond 1")),
    );
    assert!(claim::clean_up(root, &gone).is_err());
    std::fs::write(admin.join("kdamonds/1/state"), "off\n").unwrap();
    claim::clean_up(root, &gone).unwrap();
    let read = |p: &str| {
        std::fs::read_to_string(admin.join(p))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(
        (read("kdamonds/nr_kdamonds"), read("kdamonds/0/state")),
        ("0".into(), "off".into())
    );
    assert_eq!(claim::judge(root, &gone), Verdict::NoClaim);
}
