//! Many positioned reads or writes of one file (reads: of several files)
//! in one round of system calls.
//!
//! The idle path checks one page per region per sample: a pagemap entry, a
//! page-flags word and an idle-bitmap word, each at its own offset, so done
//! one `pread`/`pwrite` at a time a sample costs about four system calls per
//! region (and under an emulator the entry and exit of a system call cost
//! more than the kernel's work behind it). Here a batch of requests goes to
//! the kernel through one io_uring: one `io_uring_enter` submits every
//! request and waits for all of them. `/proc` and sysfs files do not
//! support non-blocking reads, so the kernel runs the requests in its
//! io-wq worker threads, which belong to this process: their CPU time is
//! counted as udamon's.
//!
//! Where io_uring is missing (kernels before 5.1, `kernel.io_uring_disabled`,
//! a seccomp filter, `UDAMON_IO_URING=0` in the environment) the same
//! requests are made one system call each, as before. The results are the
//! same either way: [`read_many`] fills each buffer until it is full or the
//! file ends, [`write_many`] writes each buffer whole. [`read_many_files`]
//! reads from several files in one round (a sample's pagemap entries of
//! every target), with a result per request: one file's failure leaves the
//! others' reads as they are.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};

use io_uring::{opcode, squeue, types, IoUring};

/// Submission queue entries: requests beyond this go in further rounds.
const RING_ENTRIES: u32 = 256;

/// Batches smaller than this are made one system call each: a round
/// through io_uring costs a switch to a kernel worker thread and back,
/// more than a few system calls.
const MIN_RING_BATCH: usize = 4;

/// `user_data` of a cancel request: the bit above any request's index
/// (a request's `user_data` is its index in the round).
const CANCEL: u64 = 1 << 63;

/// Failed `io_uring_enter` calls in a row after which a round that is
/// being settled is given up (its buffers leaked, the ring dropped).
const MAX_SETTLE_FAILURES: u32 = 16;

/// Passes through the settling loop after which it gives up all the same
/// (a request that never completes and that no cancel finds).
const MAX_SETTLE_PASSES: u32 = 10_000;

/// Bytes of round buffers leaked because the kernel might still have used
/// them (a ring that could not be settled).
static LEAKED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// How batches reach the kernel on this thread.
enum Engine {
    Untried,
    Ring(Box<Ring>),
    Sync,
}

/// A ring and whether it can still be used.
///
/// **No request outlives its buffer.** A request points at memory the
/// round owns (a bounce buffer, copied from or to the caller's buffers
/// once every request of the round has completed), never at the caller's.
/// A round ends only when the completion of every request it queued has
/// been reaped, counted by `user_data`. When `io_uring_enter` fails, the
/// round cancels what is still in flight (`IORING_OP_ASYNC_CANCEL`, one per
/// request) and waits for every completion, its cancels' included. If even
/// that fails (`MAX_SETTLE_FAILURES` failed calls in a row), the round's
/// buffer is leaked rather than freed, the ring is marked broken and
/// dropped (closing it makes the kernel cancel what is left; anything it
/// still writes lands in the leaked buffer), and the thread makes its
/// requests one system call each from then on.
struct Ring {
    uring: IoUring,
    /// Set when a round could not be settled: the ring must not be used
    /// again (requests may be in flight, or queued and not yet taken).
    broken: bool,
    #[cfg(test)]
    fault: Fault,
}

/// Failures injected into `io_uring_enter` (tests only).
#[cfg(test)]
#[derive(Clone, Copy, Default)]
struct Fault {
    /// The next this many calls fail with `EIO`...
    fail: u32,
    /// ... and the first this many of those still submit what is queued
    /// first (without waiting): requests are then in flight.
    submit_first: u32,
}

thread_local! {
    // One ring per thread: the engine's sampling loop runs on one thread,
    // and a ring is not shared between threads.
    static ENGINE: RefCell<Engine> = const { RefCell::new(Engine::Untried) };
}

/// Runs `f` on this thread's ring (set up on first use) when there is one
/// and a batch of `n` requests is worth a round through it; `None` when
/// the requests are to be made one call each. A ring `f` leaves broken is
/// dropped: this thread then makes its requests one call each.
fn on_ring<T>(n: usize, f: impl FnOnce(&mut Ring) -> T) -> Option<T> {
    ENGINE.with(|e| {
        let mut e = e.borrow_mut();
        if matches!(*e, Engine::Untried) {
            let disabled = std::env::var("UDAMON_IO_URING").is_ok_and(|v| v == "0");
            *e = match (!disabled).then(|| IoUring::new(RING_ENTRIES)) {
                Some(Ok(uring)) => Engine::Ring(Box::new(Ring {
                    uring,
                    broken: false,
                    #[cfg(test)]
                    fault: Fault::default(),
                })),
                _ => Engine::Sync,
            };
        }
        match &mut *e {
            Engine::Ring(ring) if n >= MIN_RING_BATCH => {
                let out = f(ring);
                if ring.broken {
                    *e = Engine::Sync;
                }
                Some(out)
            }
            _ => None,
        }
    })
}

/// Reads each `(offset, buffer)` of `file` until the buffer is full or the
/// file ends; returns the bytes read into each, or the first error (in the
/// order of the requests). [`read_many_files`] with one file.
pub fn read_many(file: &File, reqs: &mut [(u64, &mut [u8])]) -> io::Result<Vec<usize>> {
    let mut all: Vec<(&File, u64, &mut [u8])> = reqs
        .iter_mut()
        .map(|(off, buf)| (file, *off, &mut **buf))
        .collect();
    read_many_files(&mut all).into_iter().collect()
}

/// Reads each `(file, offset, buffer)` until the buffer is full or its file
/// ends, the requests of every file in one round; returns the bytes read
/// into each buffer, or the error of that request. A request that fails
/// (say, of a process that went away) leaves the others' results as they
/// are; only a failure of io_uring itself fails every request of the
/// round not yet completed (and of the rounds after it, not made).
pub fn read_many_files(reqs: &mut [(&File, u64, &mut [u8])]) -> Vec<io::Result<usize>> {
    if reqs.is_empty() {
        return Vec::new();
    }
    match on_ring(reqs.len(), |ring| submit_reads(ring, reqs)) {
        Some(mut got) => {
            // A short read that is not the end of the file (a proc file
            // may hand out less than asked) is finished here.
            for ((file, off, buf), r) in reqs.iter_mut().zip(got.iter_mut()) {
                if let Ok(n) = *r {
                    if n > 0 && n < buf.len() {
                        *r = read_full_at(file, &mut buf[n..], *off + n as u64).map(|m| n + m);
                    }
                }
            }
            got
        }
        None => reqs
            .iter_mut()
            .map(|(file, off, buf)| read_full_at(file, buf, *off))
            .collect(),
    }
}

/// Writes each `(offset, buffer)` to `file` whole. The first error ends
/// the batch.
pub fn write_many(file: &File, reqs: &[(u64, &[u8])]) -> io::Result<()> {
    if reqs.is_empty() {
        return Ok(());
    }
    match on_ring(reqs.len(), |ring| submit_writes(ring, file, reqs)) {
        Some(r) => r,
        None => reqs
            .iter()
            .try_for_each(|(off, buf)| file.write_all_at(buf, *off)),
    }
}

/// The memory of one round's requests, one buffer after the other. Freed
/// only once the round is settled; leaked otherwise.
struct Bounce {
    buf: Box<[u8]>,
}

impl Bounce {
    fn new(len: usize) -> Bounce {
        Bounce {
            buf: vec![0u8; len].into_boxed_slice(),
        }
    }

    /// Never frees the memory: the kernel may still read or write it.
    fn leak(self) {
        LEAKED_BYTES.fetch_add(self.buf.len(), Ordering::Relaxed);
        std::mem::forget(self.buf);
    }
}

/// The same error again, for each request a failed round fails.
fn same_error(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// One result per request, in order.
fn submit_reads(ring: &mut Ring, reqs: &mut [(&File, u64, &mut [u8])]) -> Vec<io::Result<usize>> {
    let nr = reqs.len();
    let mut got: Vec<io::Result<usize>> = Vec::with_capacity(nr);
    for chunk in reqs.chunks_mut(RING_ENTRIES as usize) {
        let mut bounce = Bounce::new(chunk.iter().map(|(_, _, b)| b.len()).sum());
        let mem = bounce.buf.as_mut_ptr();
        let mut at = 0;
        for (j, (file, off, buf)) in chunk.iter().enumerate() {
            // SAFETY: `at + buf.len()` is within the bounce buffer.
            let ptr = unsafe { mem.add(at) };
            let sqe = opcode::Read::new(types::Fd(file.as_raw_fd()), ptr, buf.len() as u32)
                .offset(*off)
                .build()
                .flags(squeue::Flags::ASYNC)
                .user_data(j as u64);
            // SAFETY: the request points into the round's bounce buffer,
            // which is freed only once every request of the round has
            // completed, and leaked otherwise.
            unsafe { ring.uring.submission().push(&sqe) }.expect("chunk fits the ring");
            at += buf.len();
        }
        let mut res = vec![0i32; chunk.len()];
        if let Err(e) = ring.round(chunk.len(), |i, r| res[i] = r) {
            if ring.broken {
                bounce.leak();
            }
            // The caller's buffers of this round are left as they were:
            // its requests, and those of the rounds not made, fail alike.
            let copies: Vec<_> = (got.len() + 1..nr).map(|_| Err(same_error(&e))).collect();
            got.push(Err(e));
            got.extend(copies);
            return got;
        }
        let mut at = 0;
        for (j, (file, off, buf)) in chunk.iter_mut().enumerate() {
            got.push(match res[j] {
                r if r >= 0 => {
                    let n = (r as usize).min(buf.len());
                    buf[..n].copy_from_slice(&bounce.buf[at..at + n]);
                    Ok(n)
                }
                // Interrupted or would-block: redone synchronously (rare).
                r if r == -libc::EINTR || r == -libc::EAGAIN => read_full_at(file, buf, *off),
                r => Err(io::Error::from_raw_os_error(-r)),
            });
            at += buf.len();
        }
    }
    got
}

fn submit_writes(ring: &mut Ring, file: &File, reqs: &[(u64, &[u8])]) -> io::Result<()> {
    let fd = types::Fd(file.as_raw_fd());
    let mut first_err = None;
    for chunk in reqs.chunks(RING_ENTRIES as usize) {
        let mut bounce = Bounce::new(chunk.iter().map(|(_, b)| b.len()).sum());
        let mut at = 0;
        for (_, buf) in chunk {
            bounce.buf[at..at + buf.len()].copy_from_slice(buf);
            at += buf.len();
        }
        let mem = bounce.buf.as_mut_ptr();
        let mut at = 0;
        for (j, (off, buf)) in chunk.iter().enumerate() {
            // SAFETY: `at + buf.len()` is within the bounce buffer.
            let ptr = unsafe { mem.add(at) };
            let sqe = opcode::Write::new(fd, ptr, buf.len() as u32)
                .offset(*off)
                .build()
                .flags(squeue::Flags::ASYNC)
                .user_data(j as u64);
            // SAFETY: as for reads: the bounce buffer outlives the request.
            unsafe { ring.uring.submission().push(&sqe) }.expect("chunk fits the ring");
            at += buf.len();
        }
        let mut redo = Vec::new();
        let r = ring.round(chunk.len(), |i, res| {
            let len = chunk[i].1.len();
            match res {
                r if r >= 0 && r as usize == len => {}
                // Short, interrupted or would-block: written whole below.
                r if r >= 0 || r == -libc::EINTR || r == -libc::EAGAIN => redo.push(i),
                r => {
                    first_err.get_or_insert(io::Error::from_raw_os_error(-r));
                }
            }
        });
        if let Err(e) = r {
            if ring.broken {
                bounce.leak();
            }
            return Err(e);
        }
        for i in redo {
            let (off, buf) = chunk[i];
            file.write_all_at(buf, off)?;
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Requests of a round not yet completed, and cancels not yet completed.
struct Outstanding {
    /// Per request: still waiting for its completion.
    pending: Vec<bool>,
    left: usize,
    /// Per request: a cancel for it is in flight.
    cancelling: Vec<bool>,
    cancels: usize,
}

impl Ring {
    /// `io_uring_enter`: submits what is queued and waits for `want`
    /// completions.
    fn enter(&mut self, want: usize) -> io::Result<usize> {
        #[cfg(test)]
        if self.fault.fail > 0 {
            self.fault.fail -= 1;
            if self.fault.submit_first > 0 {
                self.fault.submit_first -= 1;
                self.uring.submit()?;
            }
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        self.uring.submit_and_wait(want)
    }

    /// Submits the `n` requests queued (`user_data` 0 to n - 1) and reaps
    /// the completion of each, handing `(index, result)` to `each`.
    ///
    /// On an error of `io_uring_enter`, returns it only once the round is
    /// settled: what is in flight is cancelled and every completion reaped.
    /// If that cannot be done, the ring is marked broken (the caller then
    /// leaks the round's buffer) before the error is returned.
    fn round(&mut self, n: usize, mut each: impl FnMut(usize, i32)) -> io::Result<()> {
        let mut out = Outstanding {
            pending: vec![true; n],
            left: n,
            cancelling: vec![false; n],
            cancels: 0,
        };
        while out.left > 0 {
            match self.enter(out.left) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if !self.settle(&mut out, &mut each) {
                        self.broken = true;
                    }
                    return Err(e);
                }
            }
            self.reap(&mut out, &mut each);
        }
        Ok(())
    }

    /// Hands each completion in the queue to `each` (requests) or counts it
    /// (cancels).
    fn reap(&mut self, out: &mut Outstanding, each: &mut impl FnMut(usize, i32)) {
        for cqe in self.uring.completion() {
            let ud = cqe.user_data();
            let i = (ud & !CANCEL) as usize;
            if ud & CANCEL != 0 {
                out.cancels = out.cancels.saturating_sub(1);
                // Not found (it completed meanwhile, or the kernel had not
                // taken it from the queue yet): asked again while it is
                // still pending. Found (0, or -EALREADY when it is running
                // and was told to stop): its own completion is awaited.
                if cqe.result() == -libc::ENOENT {
                    if let Some(c) = out.cancelling.get_mut(i) {
                        *c = false;
                    }
                }
            } else if out.pending.get(i).copied().unwrap_or(false) {
                out.pending[i] = false;
                out.left -= 1;
                each(i, cqe.result());
            }
        }
    }

    /// Cancels the round's requests still in flight and waits until every
    /// one of them, and every cancel, has completed; `false` when that
    /// cannot be done (the kernel may still use the round's buffers).
    fn settle(&mut self, out: &mut Outstanding, each: &mut impl FnMut(usize, i32)) -> bool {
        let mut failures = 0;
        for _ in 0..MAX_SETTLE_PASSES {
            self.reap(out, each);
            if out.left == 0 && out.cancels == 0 {
                return self.uring.submission().is_empty();
            }
            for i in 0..out.pending.len() {
                if !out.pending[i] || out.cancelling[i] {
                    continue;
                }
                let sqe = opcode::AsyncCancel::new(i as u64)
                    .build()
                    .user_data(CANCEL | i as u64);
                // SAFETY: a cancel request points at no memory.
                if unsafe { self.uring.submission().push(&sqe) }.is_err() {
                    break; // The queue is full: the rest on the next pass.
                }
                out.cancelling[i] = true;
                out.cancels += 1;
            }
            match self.enter(1) {
                Ok(_) => failures = 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    failures += 1;
                    if failures >= MAX_SETTLE_FAILURES {
                        self.reap(out, each);
                        return out.left == 0
                            && out.cancels == 0
                            && self.uring.submission().is_empty();
                    }
                }
            }
        }
        false
    }
}

/// `pread` until `buf` is full or end of file; returns the bytes read.
pub(crate) fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(bytes: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, bytes).unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        (dir, f)
    }

    fn check_reads_and_writes() {
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let (_d, f) = file_with(&data);
        // More requests than the ring holds, some past the end, one short.
        let offs: Vec<u64> = (0..600u64).map(|i| (i * 17) % 10_100).collect();
        let mut bufs: Vec<[u8; 8]> = vec![[0; 8]; offs.len()];
        let mut reqs: Vec<(u64, &mut [u8])> = offs
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&o, b)| (o, &mut b[..]))
            .collect();
        let got = read_many(&f, &mut reqs).unwrap();
        for (i, &o) in offs.iter().enumerate() {
            let want = data.len().saturating_sub(o as usize).min(8);
            assert_eq!(got[i], want, "offset {o}");
            let o = (o as usize).min(data.len());
            assert_eq!(&bufs[i][..want], &data[o..o + want]);
        }
        let words: Vec<[u8; 8]> = (0..300u64).map(|i| (i * 3).to_ne_bytes()).collect();
        let reqs: Vec<(u64, &[u8])> = words
            .iter()
            .enumerate()
            .map(|(i, w)| (i as u64 * 16, &w[..]))
            .collect();
        write_many(&f, &reqs).unwrap();
        for (i, w) in words.iter().enumerate() {
            let mut b = [0u8; 8];
            f.read_exact_at(&mut b, i as u64 * 16).unwrap();
            assert_eq!(&b, w);
        }
    }

    #[test]
    fn batches_read_and_write_like_single_calls() {
        // Whichever engine this machine gives (io_uring or one call each).
        check_reads_and_writes();
    }

    #[test]
    fn the_fallback_gives_the_same_results() {
        std::thread::spawn(|| {
            ENGINE.with(|e| *e.borrow_mut() = Engine::Sync);
            check_reads_and_writes();
        })
        .join()
        .unwrap();
    }

    /// Runs `f` on a new thread whose ring fails as `fault` says; `None`
    /// where this machine has no io_uring.
    fn on_faulty_ring(fault: Fault, f: impl FnOnce() + Send + 'static) -> Option<()> {
        std::thread::spawn(move || {
            let uring = IoUring::new(RING_ENTRIES).ok()?;
            ENGINE.with(|e| {
                *e.borrow_mut() = Engine::Ring(Box::new(Ring {
                    uring,
                    broken: false,
                    fault,
                }))
            });
            f();
            Some(())
        })
        .join()
        .unwrap()
    }

    fn engine_is_ring() -> bool {
        ENGINE.with(|e| matches!(*e.borrow(), Engine::Ring(_)))
    }

    /// Whether this thread's ring has nothing in flight and no completion
    /// left unreaped: a no-op queued with `IOSQE_IO_DRAIN` starts only once
    /// every request before it has completed, and is then the only
    /// completion. (Gives up after 5 s, only when something is in flight.)
    fn ring_is_idle() -> bool {
        ENGINE.with(|e| {
            let mut e = e.borrow_mut();
            let Engine::Ring(r) = &mut *e else {
                return true;
            };
            let nop = opcode::Nop::new()
                .build()
                .flags(squeue::Flags::IO_DRAIN)
                .user_data(42);
            // SAFETY: a no-op points at no memory.
            unsafe { r.uring.submission().push(&nop) }.unwrap();
            let ts = types::Timespec::new().sec(5);
            let args = types::SubmitArgs::new().timespec(&ts);
            match r.uring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIME) => return false,
                Err(e) => panic!("io_uring_enter: {e}"),
            }
            let got: Vec<u64> = r.uring.completion().map(|c| c.user_data()).collect();
            got == [42]
        })
    }

    /// A pipe: reads of it block until something is written.
    fn pipe() -> (File, File) {
        use std::os::fd::FromRawFd;
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two fds, which the Files then own.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
    }

    /// Four 4-byte reads of `rd` in one batch, which the faulty ring fails
    /// with EIO; the caller's buffers as the batch left them.
    fn failed_reads(rd: &File) -> [[u8; 4]; 4] {
        let mut bufs = [[0u8; 4]; 4];
        let mut reqs: Vec<(u64, &mut [u8])> = bufs.iter_mut().map(|b| (0, &mut b[..])).collect();
        let e = read_many(rd, &mut reqs).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO));
        drop(reqs);
        bufs
    }

    /// A failed `io_uring_enter` while reads are in flight (blocked on an
    /// empty pipe): the batch returns only once every read was cancelled
    /// and its completion reaped, so none is left to take what is written
    /// later, and the ring stays in use. (The old code returned after
    /// 1,000 tries whatever was still in flight.)
    #[test]
    fn a_failed_submit_cancels_and_waits_for_every_request() {
        let fault = Fault {
            fail: 1,
            submit_first: 1,
        };
        let ran = on_faulty_ring(fault, || {
            use std::io::{Read, Write};
            let (rd, mut wr) = pipe();
            let bufs = failed_reads(&rd);
            assert_eq!(bufs, [[0u8; 4]; 4]);
            assert!(engine_is_ring(), "a settled ring is kept");
            assert!(ring_is_idle(), "a request outlived the batch");
            // Nothing reads the pipe any more: the bytes stay there.
            wr.write_all(b"abcd").unwrap();
            // SAFETY: fcntl on an fd we own.
            unsafe { libc::fcntl(rd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
            let mut got = [0u8; 4];
            (&rd)
                .read_exact(&mut got)
                .expect("the bytes written are all there");
            assert_eq!(&got, b"abcd");
            // And the ring still serves batches.
            check_reads_and_writes();
            assert!(engine_is_ring());
        });
        if ran.is_none() {
            eprintln!("skipped: no io_uring here");
        }
    }

    /// A ring that cannot be settled (every later call fails) is dropped,
    /// the round's buffer leaked rather than freed: what the kernel still
    /// reads lands there, never in the caller's buffers. The thread goes on
    /// one call each.
    #[test]
    fn a_ring_that_cannot_be_settled_is_dropped_and_its_buffers_leaked() {
        let fault = Fault {
            fail: u32::MAX,
            submit_first: 1,
        };
        let ran = on_faulty_ring(fault, || {
            use std::io::Write;
            let (rd, mut wr) = pipe();
            let before = LEAKED_BYTES.load(Ordering::Relaxed);
            let bufs = failed_reads(&rd);
            assert!(LEAKED_BYTES.load(Ordering::Relaxed) >= before + 16);
            assert!(!engine_is_ring(), "a broken ring is dropped");
            wr.write_all(b"abcdefghijklmnop").unwrap();
            drop(wr);
            assert_eq!(bufs, [[0u8; 4]; 4]);
            check_reads_and_writes();
        });
        if ran.is_none() {
            eprintln!("skipped: no io_uring here");
        }
    }

    /// Three files read in one batch, their requests interleaved: more than
    /// the ring holds, some past the end of their file; a fourth file open
    /// for writing only fails each of its requests (EBADF) and leaves the
    /// others' results as they are.
    fn check_reads_of_several_files() {
        let data: Vec<Vec<u8>> = (0..3u8)
            .map(|k| {
                (0..=255u8)
                    .map(|b| b ^ (k * 85))
                    .cycle()
                    .take(3000 + 1000 * k as usize)
                    .collect()
            })
            .collect();
        let files: Vec<_> = data.iter().map(|d| file_with(d)).collect();
        let wo = std::fs::OpenOptions::new()
            .write(true)
            .open(files[0].0.path().join("f"))
            .unwrap();
        // (file: 0..3, or 3 for the write-only one; offset)
        let plan: Vec<(usize, u64)> = (0..700u64)
            .map(|i| ((i % 4) as usize, (i * 13) % 5200))
            .collect();
        let mut bufs: Vec<[u8; 8]> = vec![[0xee; 8]; plan.len()];
        let mut reqs: Vec<(&File, u64, &mut [u8])> = plan
            .iter()
            .zip(bufs.iter_mut())
            .map(|(&(k, o), b)| (if k < 3 { &files[k].1 } else { &wo }, o, &mut b[..]))
            .collect();
        let got = read_many_files(&mut reqs);
        drop(reqs);
        assert_eq!(got.len(), plan.len());
        for (i, (&(k, o), r)) in plan.iter().zip(&got).enumerate() {
            if k == 3 {
                let e = r.as_ref().unwrap_err();
                assert_eq!(e.raw_os_error(), Some(libc::EBADF), "request {i}");
                assert_eq!(bufs[i], [0xee; 8], "a failed read leaves its buffer");
                continue;
            }
            let d = &data[k];
            let want = d.len().saturating_sub(o as usize).min(8);
            assert_eq!(
                *r.as_ref().unwrap(),
                want,
                "request {i}: file {k} offset {o}"
            );
            let o = (o as usize).min(d.len());
            assert_eq!(&bufs[i][..want], &d[o..o + want], "request {i}");
        }
        // And read_many reports the failure of one file's batch.
        let mut b = [[0u8; 8]; 5];
        let mut reqs: Vec<(u64, &mut [u8])> = b.iter_mut().map(|b| (0, &mut b[..])).collect();
        let e = read_many(&wo, &mut reqs).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        assert!(read_many_files(&mut []).is_empty());
    }

    #[test]
    fn several_files_are_read_in_one_batch_each_request_on_its_own() {
        check_reads_of_several_files();
        if std::env::var("UDAMON_IO_URING").is_err() && IoUring::new(8).is_ok() {
            assert!(engine_is_ring(), "the batch went through the ring");
        }
    }

    #[test]
    fn several_files_read_alike_without_the_ring() {
        std::thread::spawn(|| {
            ENGINE.with(|e| *e.borrow_mut() = Engine::Sync);
            check_reads_of_several_files();
        })
        .join()
        .unwrap();
    }

    /// A round that io_uring itself fails fails every request of it (the
    /// buffers untouched), whichever file it reads; the ring, settled, then
    /// serves the next batch.
    #[test]
    fn a_failed_round_fails_each_of_its_requests() {
        let fault = Fault {
            fail: 1,
            submit_first: 0,
        };
        let ran = on_faulty_ring(fault, || {
            let (_d1, f1) = file_with(b"abcdefgh");
            let (_d2, f2) = file_with(b"ijklmnop");
            let mut bufs = [[0u8; 4]; 6];
            let mut reqs: Vec<(&File, u64, &mut [u8])> = bufs
                .iter_mut()
                .enumerate()
                .map(|(i, b)| {
                    (
                        if i % 2 == 0 { &f1 } else { &f2 },
                        (i % 3) as u64,
                        &mut b[..],
                    )
                })
                .collect();
            let got = read_many_files(&mut reqs);
            drop(reqs);
            assert_eq!(got.len(), 6);
            for r in &got {
                assert_eq!(r.as_ref().unwrap_err().raw_os_error(), Some(libc::EIO));
            }
            assert_eq!(bufs, [[0u8; 4]; 6]);
            assert!(engine_is_ring());
            assert!(ring_is_idle(), "a request outlived the batch");
            check_reads_of_several_files();
        });
        if ran.is_none() {
            eprintln!("skipped: no io_uring here");
        }
    }

    #[test]
    fn errors_are_reported() {
        let (_d, f) = file_with(b"x");
        let ro = File::open(_d.path().join("f")).unwrap();
        let e = write_many(&ro, &[(0, b"y")]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        drop(f);
    }
}
