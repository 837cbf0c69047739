//! [`KdamondSet`]: several kdamonds created at once by one udamon process,
//! for sessions that need different monitoring attributes (a kdamond has
//! one context, and a context one set of intervals and region bounds).
//!
//! The kernel changes `nr_kdamonds` only while none of the kdamonds runs
//! (it answers EBUSY otherwise), so the set is made whole before any of
//! its kdamonds is turned on, and it cannot grow while one runs. Each
//! session takes a [`Slot`], drives that kdamond (`kdamonds/I`) with a
//! [`KdamonDriver::in_set`](crate::KdamonDriver::in_set), and gives the
//! slot back when it ends: the kdamond is turned off and stays, for the
//! next session. [`KdamondSet::remove`] removes them all.
//!
//! The set is created only where no kdamond exists, and claimed
//! ([`crate::claim::SetClaim`]): a udamon that dies leaves kdamonds a later
//! udamon can prove its own; nothing is written where another tool's
//! kdamond is.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::claim::SetClaim;
use crate::{admin_dir, Error, FsIo, Sysfs};

/// Kdamonds `0..nr` of this process.
#[derive(Debug)]
pub struct KdamondSet {
    root: PathBuf,
    nr: usize,
    taken: Mutex<Vec<bool>>,
}

/// One kdamond of a set, taken by one session; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    set: Arc<KdamondSet>,
    index: usize,
}

impl Slot {
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn set(&self) -> &KdamondSet {
        &self.set
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut t) = self.set.taken.lock() {
            t[self.index] = false;
        }
    }
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn io_read(io: &mut dyn Sysfs, p: &Path) -> Option<String> {
    io.read(p).ok().map(|s| s.trim().to_string())
}

impl KdamondSet {
    /// Creates `nr` kdamonds under `root` (writes `nr_kdamonds`), where
    /// there is none, and claims them for this process, whose start time
    /// is `start` (no claim without it). Refuses, writing nothing, where a
    /// kdamond exists; if another tool's kdamond appears between the read
    /// and the write (sysfs has no compare-and-swap), the kdamonds are
    /// taken only if each is fresh (off, no context), and left otherwise.
    pub fn create(root: &Path, nr: usize, start: Option<u64>) -> Result<Arc<KdamondSet>, Error> {
        Self::create_with_io(root, nr, start, &mut FsIo)
    }

    /// [`create`](Self::create) with its file operations through `io`.
    pub fn create_with_io(
        root: &Path,
        nr: usize,
        start: Option<u64>,
        io: &mut dyn Sysfs,
    ) -> Result<Arc<KdamondSet>, Error> {
        let admin = admin_dir(root);
        let nr_path = admin.join("kdamonds/nr_kdamonds");
        let foreign = |io: &mut dyn Sysfs, i: usize| {
            let d = admin.join(format!("kdamonds/{i}"));
            Error::Foreign {
                state: io_read(io, &d.join("state")).unwrap_or_else(|| "?".into()),
                pid: io_read(io, &d.join("pid")).unwrap_or_else(|| "?".into()),
                path: d,
            }
        };
        let now = io_read(io, &nr_path).ok_or_else(|| Error::Missing {
            path: nr_path.clone(),
            feature: "kernel DAMON's sysfs interface".into(),
            needs: "Linux 5.18+ with CONFIG_DAMON_SYSFS",
        })?;
        if now != "0" {
            return Err(foreign(io, 0));
        }
        let nr = nr.max(1);
        io.write(&nr_path, &nr.to_string())
            .map_err(|source| Error::Write {
                path: nr_path.clone(),
                value: nr.to_string(),
                source,
            })?;
        for i in 0..nr {
            let d = admin.join(format!("kdamonds/{i}"));
            let fresh = io_read(io, &d.join("state")).as_deref() == Some("off")
                && io_read(io, &d.join("contexts/nr_contexts")).as_deref() == Some("0");
            if !fresh {
                return Err(foreign(io, i));
            }
        }
        if let Some(udamon_start) = start {
            let _ = SetClaim {
                udamon_pid: std::process::id(),
                udamon_start,
                nr_kdamonds: nr,
            }
            .write(root);
        }
        Ok(Arc::new(KdamondSet {
            root: root.to_path_buf(),
            nr,
            taken: Mutex::new(vec![false; nr]),
        }))
    }

    /// How many kdamonds the set has.
    pub fn nr(&self) -> usize {
        self.nr
    }

    /// How many are not taken.
    pub fn free(&self) -> usize {
        self.taken
            .lock()
            .map_or(0, |t| t.iter().filter(|&&x| !x).count())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The first kdamond no session holds, if any.
    pub fn take(self: &Arc<Self>) -> Option<Slot> {
        let mut t = self.taken.lock().ok()?;
        let index = t.iter().position(|&x| !x)?;
        t[index] = true;
        Some(Slot {
            set: Arc::clone(self),
            index,
        })
    }

    /// Whether `nr_kdamonds` still says the set's size: anything else is
    /// someone else's doing, and the set's kdamonds are not touched.
    pub fn intact(&self) -> bool {
        read(&admin_dir(&self.root).join("kdamonds/nr_kdamonds")) == Some(self.nr.to_string())
    }

    /// Turns every kdamond of the set off and removes them all
    /// (`nr_kdamonds` 0), with the set's claim; for the end of the
    /// process that created them. Does nothing when `nr_kdamonds` no
    /// longer says the set's size.
    pub fn remove(&self) -> Result<(), Error> {
        if !self.intact() {
            return Ok(());
        }
        crate::claim::remove_all(&self.root, self.nr).map_err(|(path, value, source)| {
            Error::Write {
                path,
                value: value.into(),
                source,
            }
        })
    }
}
