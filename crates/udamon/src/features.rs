//! What this machine offers udamon, probed read-only under a root path (so
//! tests can build a fake `/proc` and `/sys`). Nothing here ever writes: in
//! particular nothing under `sys/kernel/mm/damon` is written, whatever its
//! state.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct Feature {
    pub name: &'static str,
    pub available: bool,
    /// What was found, or what is missing and what provides it.
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct Kdamond {
    pub index: u32,
    pub state: String,
    pub pid: Option<u32>,
}

#[derive(Debug, Serialize)]
pub struct Features {
    pub kernel: String,
    pub features: Vec<Feature>,
    /// kdamonds that exist and that udamon did not create: udamon never
    /// touches them.
    pub foreign_kdamonds: Vec<Kdamond>,
}

fn read(root: &Path, p: &str) -> Option<String> {
    fs::read_to_string(root.join(p.trim_start_matches('/')))
        .ok()
        .map(|s| s.trim().to_string())
}

fn exists(root: &Path, p: &str) -> bool {
    root.join(p.trim_start_matches('/')).exists()
}

/// The kernel's build options: /boot/config-RELEASE as distributions install
/// it, else the kernel's own /proc/config.gz.
fn kernel_config(root: &Path, release: &str) -> Option<String> {
    use std::io::Read;
    if let Some(c) = read(root, &format!("/boot/config-{release}")) {
        return Some(c);
    }
    let gz = fs::File::open(root.join("proc/config.gz")).ok()?;
    let mut s = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

fn config_has(cfg: &Option<String>, opt: &str) -> Option<bool> {
    let cfg = cfg.as_ref()?;
    Some(
        cfg.lines()
            .any(|l| l == format!("{opt}=y") || l == format!("{opt}=m")),
    )
}

/// Probes the machine under `root` ("/" for the real one).
pub fn probe(root: &Path) -> Features {
    let kernel = read(root, "/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into());
    let cfg = kernel_config(root, &kernel);
    let mut f = Vec::new();

    // Kernel DAMON through sysfs.
    let damon = "/sys/kernel/mm/damon/admin";
    let has_sysfs = exists(root, damon);
    f.push(Feature {
        name: "kernel_damon_sysfs",
        available: has_sysfs,
        detail: if has_sysfs {
            format!("{damon} present")
        } else {
            "no /sys/kernel/mm/damon/admin (needs Linux 5.18+ with CONFIG_DAMON_SYSFS)".into()
        },
    });
    for (name, opt, what) in [
        (
            "kernel_damon_vaddr",
            "CONFIG_DAMON_VADDR",
            "virtual address monitoring of processes",
        ),
        (
            "kernel_damon_paddr",
            "CONFIG_DAMON_PADDR",
            "physical address monitoring",
        ),
    ] {
        let (available, detail) = match config_has(&cfg, opt) {
            Some(true) => (has_sysfs, format!("{opt} is set ({what})")),
            Some(false) => (false, format!("{opt} is not set in this kernel ({what} needs it)")),
            None => (false, format!("unknown: no kernel config at /boot/config-{kernel} or /proc/config.gz to check {opt}")),
        };
        f.push(Feature {
            name,
            available,
            detail,
        });
    }

    // kdamonds someone else runs.
    let mut foreign = Vec::new();
    if let Some(n) =
        read(root, &format!("{damon}/kdamonds/nr_kdamonds")).and_then(|s| s.parse::<u32>().ok())
    {
        for i in 0..n {
            let dir = format!("{damon}/kdamonds/{i}");
            foreign.push(Kdamond {
                index: i,
                state: read(root, &format!("{dir}/state")).unwrap_or_else(|| "unknown".into()),
                pid: read(root, &format!("{dir}/pid")).and_then(|s| s.parse().ok()),
            });
        }
    }

    let idle = "/sys/kernel/mm/page_idle/bitmap";
    let has_idle = exists(root, idle);
    f.push(Feature {
        name: "idle_page_bitmap",
        available: has_idle,
        detail: if has_idle {
            format!("{idle} present")
        } else {
            "no /sys/kernel/mm/page_idle/bitmap (needs CONFIG_IDLE_PAGE_TRACKING)".into()
        },
    });

    let pfn = pagemap_pfn_visible(root);
    f.push(Feature {
        name: "pagemap_pfn",
        available: pfn == Some(true),
        detail: match pfn {
            Some(true) => "/proc/self/pagemap shows page frame numbers".into(),
            Some(false) => {
                "/proc/self/pagemap hides page frame numbers (run as root or with CAP_SYS_ADMIN)"
                    .into()
            }
            None => "/proc/self/pagemap is not readable".into(),
        },
    });

    let sd = config_has(&cfg, "CONFIG_MEM_SOFT_DIRTY");
    f.push(Feature {
        name: "soft_dirty",
        available: sd == Some(true),
        detail: match sd {
            Some(true) => "CONFIG_MEM_SOFT_DIRTY is set (write-only monitoring)".into(),
            Some(false) => "CONFIG_MEM_SOFT_DIRTY is not set in this kernel".into(),
            None => {
                format!("unknown: no kernel config at /boot/config-{kernel} or /proc/config.gz")
            }
        },
    });

    let thp = read(root, "/sys/kernel/mm/transparent_hugepage/enabled");
    f.push(Feature {
        name: "transparent_hugepage",
        available: thp.is_some(),
        detail: thp.map_or(
            "no /sys/kernel/mm/transparent_hugepage (needs CONFIG_TRANSPARENT_HUGEPAGE)".into(),
            |m| format!("mode {m}"),
        ),
    });
    let psi = exists(root, "/proc/pressure/memory");
    f.push(Feature {
        name: "psi",
        available: psi,
        detail: if psi {
            "/proc/pressure/memory present".into()
        } else {
            "no /proc/pressure/memory (needs CONFIG_PSI)".into()
        },
    });
    let nodes = read(root, "/sys/devices/system/node/online");
    f.push(Feature {
        name: "numa",
        available: nodes.is_some(),
        detail: nodes.map_or(
            "no NUMA information in /sys/devices/system/node".into(),
            |n| format!("online nodes {n}"),
        ),
    });
    let swaps = read(root, "/proc/swaps").map(|s| s.lines().count().saturating_sub(1));
    f.push(Feature {
        name: "swap",
        available: swaps.unwrap_or(0) > 0,
        detail: format!("{} swap device(s)", swaps.unwrap_or(0)),
    });
    let cg2 = exists(root, "/sys/fs/cgroup/cgroup.controllers");
    f.push(Feature {
        name: "cgroup_v2",
        available: cg2,
        detail: if cg2 {
            "unified hierarchy at /sys/fs/cgroup".into()
        } else {
            "/sys/fs/cgroup is not a cgroup v2 mount".into()
        },
    });

    Features {
        kernel,
        features: f,
        foreign_kdamonds: foreign,
    }
}

/// Reads this process's pagemap entry for a page it just wrote.
fn pagemap_pfn_visible(root: &Path) -> Option<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let page = vec![1u8; 8192];
    let addr = page.as_ptr() as u64;
    let path: PathBuf = root.join("proc/self/pagemap");
    let mut file = fs::File::open(path).ok()?;
    file.seek(SeekFrom::Start(addr / 4096 * 8)).ok()?;
    let mut buf = [0u8; 8];
    file.read_exact(&mut buf).ok()?;
    std::hint::black_box(&page);
    let entry = u64::from_le_bytes(buf);
    let present = entry >> 63 & 1 == 1;
    Some(present && entry & ((1 << 55) - 1) != 0)
}

#[cfg(test)]
impl Features {
    pub fn get(&self, name: &str) -> Option<&Feature> {
        self.features.iter().find(|f| f.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, p: &str, s: &str) {
        let path = root.join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, s).unwrap();
    }

    #[test]
    fn fake_tree_with_busy_kdamond() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "proc/sys/kernel/osrelease", "6.12.0-test\n");
        write(
            root,
            "boot/config-6.12.0-test",
            "CONFIG_DAMON_VADDR=y\n# CONFIG_DAMON_PADDR is not set\nCONFIG_MEM_SOFT_DIRTY=y\n",
        );
        write(
            root,
            "sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds",
            "1\n",
        );
        write(root, "sys/kernel/mm/damon/admin/kdamonds/0/state", "on\n");
        write(root, "sys/kernel/mm/damon/admin/kdamonds/0/pid", "4242\n");
        let before = snapshot_tree(root);
        let f = probe(root);
        assert_eq!(f.kernel, "6.12.0-test");
        assert!(f.get("kernel_damon_sysfs").unwrap().available);
        assert!(f.get("kernel_damon_vaddr").unwrap().available);
        assert!(!f.get("kernel_damon_paddr").unwrap().available);
        assert!(f.get("soft_dirty").unwrap().available);
        assert!(!f.get("idle_page_bitmap").unwrap().available);
        assert_eq!(f.foreign_kdamonds.len(), 1);
        assert_eq!(f.foreign_kdamonds[0].pid, Some(4242));
        assert_eq!(f.foreign_kdamonds[0].state, "on");
        // Probing wrote nothing: every file has its old content and no file appeared.
        assert_eq!(snapshot_tree(root), before);
    }

    fn snapshot_tree(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push((p.clone(), fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    }
}
