//! The side file the preload library writes, and its reader.
//!
//! # Format (version 2; version 1 is read too)
//!
//! One file per process: `$UDAMON_ALLOC_OUT.PID` (`.PID.N`, N = 1, 2, ...,
//! when a program that ran before an exec in the same pid made the first).
//! Every integer is little-endian.
//!
//! The file header, 40 bytes:
//!
//! | offset | type | field |
//! |---|---|---|
//! | 0 | `[u8; 8]` | magic `UDAMONAS` |
//! | 8 | u32 | version: 2 (1 from an older library: no hints record) |
//! | 12 | u32 | header length, 40 |
//! | 16 | u32 | pid |
//! | 20 | u32 | reserved, 0 |
//! | 24 | u64 | threshold: allocations of at least this many bytes are all recorded |
//! | 32 | u64 | sample interval: the mean bytes between samples of smaller ones (0: all) |
//!
//! Then records, each an 8-byte header, `kind: u16, flags: u16, len: u32`,
//! followed by `len` bytes of payload:
//!
//! | kind | name | len | payload |
//! |---|---|---|---|
//! | 1 | alloc | 40 | time u64, addr u64, size u64, weight u64, stack id u32, tid u32 |
//! | 2 | free | 16 | time u64, addr u64 |
//! | 3 | stack | 8 + 8·depth | id u32, depth u32 (≤ 32 written, ≤ 64 read), return addresses u64 × depth, innermost first |
//! | 4 | maps | 8 + n | time u64, n bytes of `/proc/self/maps` text |
//! | 5 | counters | 32 | time u64, live-set full u64, stack-table full u64, maps truncated u64 |
//! | 6 | end | 8 | time u64 |
//! | 7 | hints | 96 | time u64, hints u32, state u32, then u64 each: allocations matched, matched with no whole page, symbols met, mlock calls ok, bytes locked, mbind calls ok, bytes bound, mlock failures, mbind failures; then u32 each: last mlock errno, last mbind errno (version 2 only) |
//!
//! Times are `CLOCK_MONOTONIC` nanoseconds. Flag bit 0 of an alloc or a free
//! marks a `realloc`: a realloc of a sampled object is a free of the old
//! address, and the new block is an allocation sampled like any other. No
//! other flag is defined.
//!
//! - **alloc**: `size` is the requested size; `weight` the bytes the sample
//!   stands for: `size` when `size ≥ threshold`, else the unbiased
//!   `size / (1 - exp(-size / interval))` (about `interval + size / 2`),
//!   since a Poisson sampler by bytes picks such an allocation with
//!   probability `1 - exp(-size / interval)`. Stack id 0 means no stack;
//!   any other id was defined by an earlier stack record. An allocation's id
//!   is its index among the file's alloc records.
//! - **free**: recorded only for addresses of sampled allocations, before the
//!   memory is really freed (so it precedes any reuse of the address).
//! - **stack**: written once per distinct stack, before its first use. The
//!   addresses are return addresses as `_Unwind_GetIP` gives them: subtract 1
//!   to symbolize the call.
//! - **maps**: when the file is opened (at start; a fork child at its first
//!   sample) and at exit. Symbolize stacks with the last maps text before
//!   the record that uses them, or the exit one.
//! - **counters**: entries that did not fit a fixed table: sampled objects
//!   whose frees cannot be tracked (the live set was full), stacks written
//!   again without deduplication (the stack table was full), maps texts cut
//!   at 64 MiB. The last record holds the totals.
//! - **end**: the process exited through `exit()`. A file whose last record
//!   is not `end` belongs to a process that was killed, called `_exit`, or
//!   exec'd (up to 100 ms of records then lost).
//! - **hints**: what the placement hints (`UDAMON_HINTS`, see the crate doc)
//!   did in this process so far; written only when hints were asked for:
//!   after the first maps, when the numbers changed (at most every 100 ms,
//!   with other records), and at exit. The last one holds the totals.
//!   `hints`: the hint lines read (at most 4096). `state`: bit 0, the hints
//!   file was refused (unreadable or malformed: no hints); bit 1, it had more
//!   than 4096 hints (the first ones apply). `allocations matched`: blocks a
//!   site hint matched, of which `no whole page` had no page wholly inside
//!   them (nothing done). `symbols met`: symbol hints applied to a loaded
//!   module (once per load). Calls and bytes count successful `mlock2` and
//!   `mbind` calls (the same pages twice count twice); a failure keeps its
//!   errno (`EPERM`/`ENOMEM`: `RLIMIT_MEMLOCK` without `CAP_IPC_LOCK`;
//!   `EINVAL` from `mbind`: no such node; `EFAULT`: a symbol outside its
//!   module's segments, not called); errno 0 when there was none. In a fork
//!   child the numbers start again at 0.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::Error;

/// The first 8 bytes of a side file.
pub const MAGIC: &[u8; 8] = b"UDAMONAS";
/// The format version the library writes; this reader reads it and
/// [`MIN_VERSION`].
pub const VERSION: u32 = 2;
/// The oldest version this reader reads.
pub const MIN_VERSION: u32 = 1;
const HEADER_LEN: u32 = 40;

const KIND_ALLOC: u16 = 1;
const KIND_FREE: u16 = 2;
const KIND_STACK: u16 = 3;
const KIND_MAPS: u16 = 4;
const KIND_COUNTERS: u16 = 5;
const KIND_END: u16 = 6;
const KIND_HINTS: u16 = 7;
const HINTS_LEN: u32 = 96;
const FLAG_REALLOC: u16 = 1;

// Caps, so that a hostile file cannot make the reader allocate without bound.
const MAX_DEPTH: u32 = 64;
const MAX_MAPS_LEN: u32 = 64 << 20;
const MAX_MAPS_BYTES: u64 = 1 << 30;
const MAX_MAPS: usize = 1 << 12;
const MAX_STACKS: usize = 1 << 24;
const MAX_ALLOCATIONS: usize = 1 << 27;
const MAX_FREES: usize = 1 << 27;

/// One process's side file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SideFile {
    /// The format version (1 or 2).
    pub version: u32,
    pub pid: u32,
    pub threshold: u64,
    pub sample_interval: u64,
    pub allocations: Vec<Allocation>,
    pub frees: Vec<Free>,
    /// Stack id -> return addresses, innermost first.
    pub stacks: HashMap<u32, Vec<u64>>,
    pub maps: Vec<Maps>,
    /// The last counters record's values (zero if there was none).
    pub counters: Counters,
    /// The last hints record's values: `None` if there was none (no hints
    /// were asked for, or a version 1 file).
    pub hints: Option<HintCounters>,
    /// The last record is an end record: the process exited normally.
    pub complete: bool,
    /// The offset of an incomplete last record (the writer was killed
    /// mid-write); everything before it was read.
    pub truncated: Option<u64>,
}

/// A sampled allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// The index among the file's allocations.
    pub id: u64,
    pub time_ns: u64,
    pub addr: u64,
    /// The requested size in bytes.
    pub size: u64,
    /// The bytes this sample stands for (see the module doc).
    pub weight: u64,
    pub tid: u32,
    /// 0: no stack.
    pub stack: u32,
    /// Made by realloc (or reallocarray) of an existing block.
    pub realloc: bool,
}

/// A free of a sampled allocation's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Free {
    pub time_ns: u64,
    pub addr: u64,
    /// The block was moved or resized by realloc.
    pub realloc: bool,
}

/// A copy of `/proc/self/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Maps {
    pub time_ns: u64,
    pub text: Vec<u8>,
}

/// Entries that did not fit the library's fixed tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Sampled allocations whose frees were not tracked.
    pub live_full: u64,
    /// Stacks written again without deduplication.
    pub stacks_full: u64,
    /// Maps texts cut short.
    pub maps_truncated: u64,
}

/// What the placement hints did in a process (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HintCounters {
    pub time_ns: u64,
    /// Hint lines read from the hints file (at most 4096).
    pub hints: u32,
    /// The hints file was refused (unreadable or malformed): no hints.
    pub refused: bool,
    /// The hints file had more than 4096 hints: the first ones applied.
    pub cut: bool,
    /// Allocations a site hint matched.
    pub matched: u64,
    /// Of those, the ones with no page wholly inside them.
    pub matched_no_page: u64,
    /// Symbol hints applied to a loaded module.
    pub symbols: u64,
    /// Successful `mlock2` calls and the bytes they covered.
    pub locks: u64,
    pub locked_bytes: u64,
    /// Successful `mbind` calls and the bytes they covered.
    pub binds: u64,
    pub bound_bytes: u64,
    pub lock_failures: u64,
    pub bind_failures: u64,
    /// The errno of the last failed `mlock2` (0: none).
    pub lock_errno: u32,
    /// The errno of the last failed `mbind` (0: none).
    pub bind_errno: u32,
}

/// Reads the side file at `path`.
pub fn read(path: impl AsRef<Path>) -> Result<SideFile, Error> {
    let path = path.as_ref();
    let file = File::open(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    parse(BufReader::with_capacity(1 << 16, file), path)
}

/// Reads a side file from `input`; `name` names it in errors.
pub fn parse(mut input: impl Read, name: &Path) -> Result<SideFile, Error> {
    let mut p = Parser {
        name,
        version: VERSION,
        offset: 0,
        maps_bytes: 0,
    };
    let mut header = [0u8; HEADER_LEN as usize];
    let got = p.fill(&mut input, &mut header)?;
    if got < 8 || &header[..8] != MAGIC {
        return Err(p.bad(0, "not a udamon allocation side file (wrong magic)"));
    }
    if got < header.len() {
        return Err(p.bad(got as u64, "the file header is cut short"));
    }
    let version = u32_at(&header, 8);
    if !(MIN_VERSION..=VERSION).contains(&version) {
        return Err(p.bad(
            8,
            format!("unsupported version {version} (this reader reads {MIN_VERSION} to {VERSION})"),
        ));
    }
    p.version = version;
    let header_len = u32_at(&header, 12);
    if header_len != HEADER_LEN {
        return Err(p.bad(12, format!("header length {header_len}, not {HEADER_LEN}")));
    }
    let mut side = SideFile {
        version,
        pid: u32_at(&header, 16),
        threshold: u64_at(&header, 24),
        sample_interval: u64_at(&header, 32),
        ..SideFile::default()
    };
    p.offset = HEADER_LEN as u64;
    loop {
        let at = p.offset;
        let mut rec = [0u8; 8];
        match p.fill(&mut input, &mut rec)? {
            0 => break,
            8 => {}
            _ => {
                side.truncated = Some(at);
                break;
            }
        }
        let kind = u16::from_le_bytes([rec[0], rec[1]]);
        let flags = u16::from_le_bytes([rec[2], rec[3]]);
        let len = u32_at(&rec, 4);
        p.check_record(at, kind, flags, len)?;
        let mut payload = Vec::new();
        // take() grows the buffer with the data actually there, never to a
        // length the file only claims.
        (&mut input)
            .take(u64::from(len))
            .read_to_end(&mut payload)
            .map_err(|e| p.io(e))?;
        if payload.len() < len as usize {
            side.truncated = Some(at);
            break;
        }
        p.offset += 8 + u64::from(len);
        side.complete = kind == KIND_END;
        p.record(&mut side, at, kind, flags, payload)?;
    }
    Ok(side)
}

struct Parser<'a> {
    name: &'a Path,
    version: u32,
    offset: u64,
    maps_bytes: u64,
}

impl Parser<'_> {
    fn bad(&self, offset: u64, what: impl Into<String>) -> Error {
        Error::Format {
            path: self.name.to_owned(),
            offset,
            what: what.into(),
        }
    }

    fn io(&self, source: io::Error) -> Error {
        Error::Io {
            path: self.name.to_owned(),
            source,
        }
    }

    /// Reads until `buf` is full or the input ends; returns the bytes read.
    fn fill(&self, input: &mut impl Read, buf: &mut [u8]) -> Result<usize, Error> {
        let mut n = 0;
        while n < buf.len() {
            match input.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io(e)),
            }
        }
        Ok(n)
    }

    /// Refuses a record header that no writer makes, before reading on.
    fn check_record(&self, at: u64, kind: u16, flags: u16, len: u32) -> Result<(), Error> {
        let ok_len = match kind {
            KIND_ALLOC => len == 40,
            KIND_FREE => len == 16,
            KIND_STACK => (8..=8 + 8 * MAX_DEPTH).contains(&len) && len.is_multiple_of(8),
            KIND_MAPS => (8..=8 + MAX_MAPS_LEN).contains(&len),
            KIND_COUNTERS => len == 32,
            KIND_END => len == 8,
            KIND_HINTS if self.version >= 2 => len == HINTS_LEN,
            _ => return Err(self.bad(at, format!("unknown record kind {kind}"))),
        };
        if !ok_len {
            return Err(self.bad(
                at,
                format!("record of kind {kind} with impossible length {len}"),
            ));
        }
        let allowed = if matches!(kind, KIND_ALLOC | KIND_FREE) {
            FLAG_REALLOC
        } else {
            0
        };
        if flags & !allowed != 0 {
            return Err(self.bad(
                at,
                format!("record of kind {kind} with unknown flags {flags:#x}"),
            ));
        }
        Ok(())
    }

    fn record(
        &mut self,
        side: &mut SideFile,
        at: u64,
        kind: u16,
        flags: u16,
        payload: Vec<u8>,
    ) -> Result<(), Error> {
        let b = &payload;
        match kind {
            KIND_ALLOC => {
                if side.allocations.len() >= MAX_ALLOCATIONS {
                    return Err(self.bad(at, "more allocations than this reader holds"));
                }
                let stack = u32_at(b, 32);
                if stack != 0 && !side.stacks.contains_key(&stack) {
                    return Err(self.bad(at, format!("allocation of undefined stack {stack}")));
                }
                side.allocations.push(Allocation {
                    id: side.allocations.len() as u64,
                    time_ns: u64_at(b, 0),
                    addr: u64_at(b, 8),
                    size: u64_at(b, 16),
                    weight: u64_at(b, 24),
                    stack,
                    tid: u32_at(b, 36),
                    realloc: flags & FLAG_REALLOC != 0,
                });
            }
            KIND_FREE => {
                if side.frees.len() >= MAX_FREES {
                    return Err(self.bad(at, "more frees than this reader holds"));
                }
                side.frees.push(Free {
                    time_ns: u64_at(b, 0),
                    addr: u64_at(b, 8),
                    realloc: flags & FLAG_REALLOC != 0,
                });
            }
            KIND_STACK => {
                let (id, depth) = (u32_at(b, 0), u32_at(b, 4));
                if u64::from(depth) * 8 + 8 != b.len() as u64 {
                    return Err(self.bad(
                        at,
                        format!("stack depth {depth} in a record of {} bytes", b.len()),
                    ));
                }
                if id == 0 || side.stacks.contains_key(&id) {
                    return Err(self.bad(at, format!("stack id {id} reused or reserved")));
                }
                if side.stacks.len() >= MAX_STACKS {
                    return Err(self.bad(at, "more stacks than this reader holds"));
                }
                let frames = b[8..].chunks_exact(8).map(|c| u64_at(c, 0)).collect();
                side.stacks.insert(id, frames);
            }
            KIND_MAPS => {
                self.maps_bytes += b.len() as u64;
                if side.maps.len() >= MAX_MAPS || self.maps_bytes > MAX_MAPS_BYTES {
                    return Err(self.bad(at, "more maps text than this reader holds"));
                }
                let time_ns = u64_at(b, 0);
                let mut text = payload;
                text.drain(..8);
                side.maps.push(Maps { time_ns, text });
            }
            KIND_COUNTERS => {
                side.counters = Counters {
                    live_full: u64_at(b, 8),
                    stacks_full: u64_at(b, 16),
                    maps_truncated: u64_at(b, 24),
                };
            }
            KIND_HINTS => {
                let state = u32_at(b, 12);
                if state & !3 != 0 {
                    return Err(self.bad(at, format!("hints record with unknown state {state:#x}")));
                }
                side.hints = Some(HintCounters {
                    time_ns: u64_at(b, 0),
                    hints: u32_at(b, 8),
                    refused: state & 1 != 0,
                    cut: state & 2 != 0,
                    matched: u64_at(b, 16),
                    matched_no_page: u64_at(b, 24),
                    symbols: u64_at(b, 32),
                    locks: u64_at(b, 40),
                    locked_bytes: u64_at(b, 48),
                    binds: u64_at(b, 56),
                    bound_bytes: u64_at(b, 64),
                    lock_failures: u64_at(b, 72),
                    bind_failures: u64_at(b, 80),
                    lock_errno: u32_at(b, 88),
                    bind_errno: u32_at(b, 92),
                });
            }
            _ => {} // KIND_END: `complete` is set by the caller
        }
        Ok(())
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Maps {
    /// The text, with any bytes that are not UTF-8 replaced.
    pub fn text_lossy(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.text)
    }
}

impl SideFile {
    /// The side files that `out` (the `UDAMON_ALLOC_OUT` given to `env`)
    /// names: `out.PID` and `out.PID.N`, sorted.
    pub fn paths(out: &Path) -> Result<Vec<PathBuf>, Error> {
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let base = out.file_name().unwrap_or_default().to_string_lossy();
        let prefix = format!("{base}.");
        let io = |source| Error::Io {
            path: dir.to_owned(),
            source,
        };
        let mut paths = Vec::new();
        for entry in dir.read_dir().map_err(io)? {
            let entry = entry.map_err(io)?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Some(rest) = name.strip_prefix(&prefix) else {
                continue;
            };
            let mut parts = rest.split('.');
            let digits = |s: Option<&str>| {
                s.is_some_and(|s| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            };
            let pid_ok = digits(parts.next());
            let rest: Vec<&str> = parts.collect();
            if pid_ok && (rest.is_empty() || (rest.len() == 1 && digits(Some(rest[0])))) {
                paths.push(entry.path());
            }
        }
        paths.sort();
        Ok(paths)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Vec<u8> {
        header_of(VERSION)
    }

    fn header_of(version: u32) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        for x in [version, HEADER_LEN, 4242, 0] {
            v.extend(x.to_le_bytes());
        }
        v.extend(65536u64.to_le_bytes());
        v.extend(524288u64.to_le_bytes());
        v
    }

    fn record(v: &mut Vec<u8>, kind: u16, flags: u16, words: &[u64], tail: &[u8]) {
        v.extend(kind.to_le_bytes());
        v.extend(flags.to_le_bytes());
        v.extend(((words.len() * 8 + tail.len()) as u32).to_le_bytes());
        words.iter().for_each(|w| v.extend(w.to_le_bytes()));
        v.extend(tail);
    }

    fn parse_bytes(v: &[u8]) -> Result<SideFile, Error> {
        parse(v, Path::new("test.side"))
    }

    #[test]
    fn reads_every_kind() {
        let mut v = header();
        record(
            &mut v,
            KIND_MAPS,
            0,
            &[5],
            b"00400000-00401000 r-xp 0 0:0 0 /bin/x\n",
        );
        record(
            &mut v,
            KIND_STACK,
            0,
            &[7 | 2 << 32, 0x401000, 0x401010],
            b"",
        );
        // stack 7, tid 99
        record(
            &mut v,
            KIND_ALLOC,
            0,
            &[10, 0x1000, 100, 524338, 7 | 99 << 32],
            b"",
        );
        record(
            &mut v,
            KIND_ALLOC,
            FLAG_REALLOC,
            &[11, 0x2000, 1 << 20, 1 << 20, 0],
            b"",
        );
        record(&mut v, KIND_FREE, FLAG_REALLOC, &[12, 0x1000], b"");
        record(&mut v, KIND_COUNTERS, 0, &[13, 1, 2, 3], b"");
        record(&mut v, KIND_END, 0, &[14], b"");
        let s = parse_bytes(&v).unwrap();
        assert_eq!(
            (s.pid, s.threshold, s.sample_interval),
            (4242, 65536, 524288)
        );
        assert_eq!(s.stacks[&7], vec![0x401000, 0x401010]);
        assert_eq!(
            s.allocations[0],
            Allocation {
                id: 0,
                time_ns: 10,
                addr: 0x1000,
                size: 100,
                weight: 524338,
                tid: 99,
                stack: 7,
                realloc: false
            }
        );
        assert!(s.allocations[1].realloc && s.allocations[1].id == 1);
        assert_eq!(
            s.frees,
            vec![Free {
                time_ns: 12,
                addr: 0x1000,
                realloc: true
            }]
        );
        assert_eq!(s.maps[0].time_ns, 5);
        assert!(s.maps[0].text_lossy().ends_with("/bin/x\n"));
        assert_eq!(
            s.counters,
            Counters {
                live_full: 1,
                stacks_full: 2,
                maps_truncated: 3
            }
        );
        assert!(s.complete && s.truncated.is_none());

        // Records after an end record (freed by later destructors): not complete.
        let mut w = v.clone();
        record(&mut w, KIND_FREE, 0, &[15, 0x2000], b"");
        let s = parse_bytes(&w).unwrap();
        assert!(!s.complete && s.frees.len() == 2);
    }

    fn hints_payload(state: u32) -> Vec<u8> {
        let mut tail = Vec::new();
        tail.extend(7u32.to_le_bytes()); // hints
        tail.extend(state.to_le_bytes());
        for x in [2u64, 1, 3, 4, 5 << 20, 0, 0, 1, 2] {
            tail.extend(x.to_le_bytes());
        }
        tail.extend(1u32.to_le_bytes()); // EPERM
        tail.extend(22u32.to_le_bytes()); // EINVAL
        tail
    }

    #[test]
    fn reads_the_hints_record_of_version_2() {
        let mut v = header();
        record(&mut v, KIND_HINTS, 0, &[20], &hints_payload(0));
        record(&mut v, KIND_HINTS, 0, &[30], &hints_payload(2));
        record(&mut v, KIND_END, 0, &[31], b"");
        let s = parse_bytes(&v).unwrap();
        assert_eq!(s.version, 2);
        assert_eq!(
            s.hints,
            Some(HintCounters {
                time_ns: 30,
                hints: 7,
                refused: false,
                cut: true,
                matched: 2,
                matched_no_page: 1,
                symbols: 3,
                locks: 4,
                locked_bytes: 5 << 20,
                binds: 0,
                bound_bytes: 0,
                lock_failures: 1,
                bind_failures: 2,
                lock_errno: 1,
                bind_errno: 22,
            })
        );
        assert!(s.complete);

        let mut w = header();
        record(&mut w, KIND_HINTS, 0, &[20], &hints_payload(4));
        let err = parse_bytes(&w).unwrap_err().to_string();
        assert!(err.contains("unknown state 0x4"), "{err}");
        let mut w = header();
        record(&mut w, KIND_HINTS, 0, &[20], &hints_payload(0)[8..]);
        let err = parse_bytes(&w).unwrap_err().to_string();
        assert!(err.contains("impossible length 88"), "{err}");
    }

    #[test]
    fn reads_version_1_without_hints() {
        let mut v = header_of(1);
        record(&mut v, KIND_STACK, 0, &[1 | 1 << 32, 0x401000], b"");
        record(
            &mut v,
            KIND_ALLOC,
            0,
            &[10, 0x1000, 100, 100, 1 | 9 << 32],
            b"",
        );
        record(&mut v, KIND_COUNTERS, 0, &[13, 0, 0, 0], b"");
        record(&mut v, KIND_END, 0, &[14], b"");
        let s = parse_bytes(&v).unwrap();
        assert_eq!((s.version, s.allocations.len(), s.hints), (1, 1, None));
        assert!(s.complete);
        // A version 1 file has no hints record.
        let mut v = header_of(1);
        record(&mut v, KIND_HINTS, 0, &[20], &hints_payload(0));
        let err = parse_bytes(&v).unwrap_err().to_string();
        assert!(err.contains("unknown record kind 7"), "{err}");
        for version in [0, 3] {
            let err = parse_bytes(&header_of(version)).unwrap_err().to_string();
            assert!(
                err.contains(&format!("unsupported version {version}")),
                "{err}"
            );
        }
    }

    #[test]
    fn a_claimed_length_past_the_end_is_a_truncation() {
        // A maps record that says 64 MiB in a file of a few bytes: the reader
        // neither allocates that much nor calls it garbage.
        let mut v = header();
        v.extend(KIND_MAPS.to_le_bytes());
        v.extend(0u16.to_le_bytes());
        v.extend((8 + MAX_MAPS_LEN).to_le_bytes());
        v.extend(b"0123456789");
        let s = parse_bytes(&v).unwrap();
        assert_eq!(s.truncated, Some(40));
        assert!(s.maps.is_empty());
    }

    #[test]
    fn refuses_inconsistent_records() {
        let cases: [(&[u64], u16, &str); 3] = [
            (&[1 | 3 << 32, 1], KIND_STACK, "depth 3"),
            (&[1 << 32, 1], KIND_STACK, "stack id 0"),
            (&[1], KIND_END, "unknown flags"),
        ];
        for (words, kind, what) in cases {
            let mut v = header();
            let flags = if kind == KIND_END { 4 } else { 0 };
            record(&mut v, kind, flags, words, b"");
            let err = parse_bytes(&v).unwrap_err().to_string();
            assert!(
                err.contains(what) && err.starts_with("test.side: at offset 40"),
                "{err}"
            );
        }
    }
}
