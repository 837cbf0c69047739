//! Many positioned reads and writes, of one file or several, in one round
//! of system calls.
//!
//! The idle path checks one page per region per sample: a pagemap entry, a
//! page-flags word and an idle-bitmap word, each at its own offset, so done
//! one `pread`/`pwrite` at a time a sample costs about four system calls per
//! region (and under an emulator the entry and exit of a system call cost
//! more than the kernel's work behind it). Here a round of requests goes to
//! the kernel through one io_uring: one `io_uring_enter` submits every
//! request and waits for all of them. `/proc` and sysfs files do not
//! support non-blocking reads, so the kernel runs the requests in its
//! io-wq worker threads, which belong to this process: their CPU time is
//! counted as udamon's.
//!
//! Where io_uring is missing (kernels before 5.1, `kernel.io_uring_disabled`,
//! a seccomp filter, `UDAMON_IO_URING=0` in the environment) the same
//! requests are made one system call each, as before. The results are the
//! same either way: [`run`] gives each request's own result (a read fills
//! its buffer until it is full or the file ends, a write writes its buffer
//! whole); [`read_many`] and [`write_many`] are rounds of one file that
//! fail on the first error.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use io_uring::{opcode, squeue, types, IoUring};

use crate::pagemap::read_full_at;

/// Submission queue entries: requests beyond this go in further rounds.
const RING_ENTRIES: u32 = 256;

/// Batches smaller than this are made one system call each: a round
/// through io_uring costs a switch to a kernel worker thread and back,
/// more than a few system calls.
const MIN_RING_BATCH: usize = 4;

/// How batches reach the kernel on this thread.
enum Engine {
    Untried,
    Ring(Box<IoUring>),
    Sync,
}

thread_local! {
    // One ring per thread: the engine's sampling loop runs on one thread,
    // and a ring is not shared between threads.
    static ENGINE: RefCell<Engine> = const { RefCell::new(Engine::Untried) };
}

/// Runs `f` on this thread's ring (set up on first use) when there is one
/// and a batch of `n` requests is worth a round through it; `None` when
/// the requests are to be made one call each.
fn on_ring<T>(n: usize, f: impl FnOnce(&mut IoUring) -> T) -> Option<T> {
    ENGINE.with(|e| {
        let mut e = e.borrow_mut();
        if matches!(*e, Engine::Untried) {
            let disabled = std::env::var("UDAMON_IO_URING").is_ok_and(|v| v == "0");
            *e = match (!disabled).then(|| IoUring::new(RING_ENTRIES)) {
                Some(Ok(ring)) => Engine::Ring(Box::new(ring)),
                _ => Engine::Sync,
            };
        }
        match &mut *e {
            Engine::Ring(ring) if n >= MIN_RING_BATCH => Some(f(ring)),
            _ => None,
        }
    })
}

/// One request of a round: a positioned read or write of some file.
pub struct Req<'a> {
    pub file: &'a File,
    pub off: u64,
    pub op: Op<'a>,
}

/// What a [`Req`] does: read into the buffer until it is full or the file
/// ends, or write the buffer whole.
pub enum Op<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

impl<'a> Req<'a> {
    pub fn read(file: &'a File, off: u64, buf: &'a mut [u8]) -> Self {
        Self {
            file,
            off,
            op: Op::Read(buf),
        }
    }

    pub fn write(file: &'a File, off: u64, buf: &'a [u8]) -> Self {
        Self {
            file,
            off,
            op: Op::Write(buf),
        }
    }

    fn len(&self) -> usize {
        match &self.op {
            Op::Read(b) => b.len(),
            Op::Write(b) => b.len(),
        }
    }

    /// The request made with plain system calls.
    fn sync(&mut self) -> io::Result<usize> {
        match &mut self.op {
            Op::Read(b) => read_full_at(self.file, b, self.off),
            Op::Write(b) => self.file.write_all_at(b, self.off).map(|()| b.len()),
        }
    }
}

/// Makes every request in one round, whatever files they are of, and
/// returns each one's result: the bytes read (until the buffer is full or
/// the file ends) or written (all of them), or its error. The requests of a
/// round may run in any order, so none may depend on another.
pub fn run(reqs: &mut [Req<'_>]) -> Vec<io::Result<usize>> {
    if let Some(out) = on_ring(reqs.len(), |ring| submit(ring, reqs)) {
        return out;
    }
    reqs.iter_mut().map(Req::sync).collect()
}

/// The first error of a round, or the bytes of each request.
fn all_or_first_error(got: Vec<io::Result<usize>>) -> io::Result<Vec<usize>> {
    got.into_iter().collect()
}

/// Reads each `(offset, buffer)` of `file` until the buffer is full or the
/// file ends; returns the bytes read into each. The first error fails the
/// batch.
pub fn read_many(file: &File, reqs: &mut [(u64, &mut [u8])]) -> io::Result<Vec<usize>> {
    let mut round: Vec<Req<'_>> = reqs
        .iter_mut()
        .map(|(off, buf)| Req::read(file, *off, buf))
        .collect();
    all_or_first_error(run(&mut round))
}

/// Writes each `(offset, buffer)` to `file` whole. The first error fails
/// the batch.
pub fn write_many(file: &File, reqs: &[(u64, &[u8])]) -> io::Result<()> {
    let mut round: Vec<Req<'_>> = reqs
        .iter()
        .map(|(off, buf)| Req::write(file, *off, buf))
        .collect();
    all_or_first_error(run(&mut round)).map(drop)
}

/// One round through the ring (in chunks of the ring's size); requests
/// the ring left short, interrupted or would-block are finished with
/// plain system calls.
fn submit(ring: &mut IoUring, reqs: &mut [Req<'_>]) -> Vec<io::Result<usize>> {
    let mut out: Vec<io::Result<usize>> = Vec::with_capacity(reqs.len());
    for chunk in reqs.chunks_mut(RING_ENTRIES as usize) {
        let mut res: Vec<Option<i32>> = vec![None; chunk.len()];
        for (j, r) in chunk.iter_mut().enumerate() {
            let fd = types::Fd(r.file.as_raw_fd());
            let sqe = match &mut r.op {
                Op::Read(b) => opcode::Read::new(fd, b.as_mut_ptr(), b.len() as u32)
                    .offset(r.off)
                    .build(),
                Op::Write(b) => opcode::Write::new(fd, b.as_ptr(), b.len() as u32)
                    .offset(r.off)
                    .build(),
            }
            // Sent straight to the kernel's workers: these files cannot be
            // read without blocking, and polling them spins.
            .flags(squeue::Flags::ASYNC)
            .user_data(j as u64);
            // SAFETY: the buffers outlive the requests: every request is
            // waited for below (or drained on error) before returning.
            unsafe { ring.submission().push(&sqe) }.expect("chunk fits the ring");
        }
        if let Err(e) = wait_all(ring, chunk.len(), |i, r| res[i] = Some(r)) {
            out.extend(
                chunk
                    .iter()
                    .map(|_| Err(io::Error::new(e.kind(), e.to_string()))),
            );
            continue;
        }
        for (r, res) in chunk.iter_mut().zip(res) {
            let res = res.expect("every request completed");
            let len = r.len();
            out.push(match (&mut r.op, res) {
                (_, e) if e == -libc::EINTR || e == -libc::EAGAIN => r.sync(),
                (_, e) if e < 0 => Err(io::Error::from_raw_os_error(-e)),
                // A proc file may hand out less than asked: finish the read.
                (Op::Read(b), n) if n > 0 && (n as usize) < len => {
                    let n = n as usize;
                    read_full_at(r.file, &mut b[n..], r.off + n as u64).map(|m| n + m)
                }
                (Op::Read(_), n) => Ok(n as usize),
                (Op::Write(_), n) if n as usize == len => Ok(len),
                (Op::Write(_), _) => r.sync(),
            });
        }
    }
    out
}

/// Submits what is queued and reaps `n` completions, handing each
/// (request index, result) to `each`.
fn wait_all(ring: &mut IoUring, n: usize, mut each: impl FnMut(usize, i32)) -> io::Result<()> {
    let mut reaped = 0;
    while reaped < n {
        match ring.submit_and_wait(n - reaped) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                // Requests already in the kernel still point at our
                // buffers: wait for them before giving up.
                drain(ring, n - reaped);
                return Err(e);
            }
        }
        for cqe in ring.completion() {
            each(cqe.user_data() as usize, cqe.result());
            reaped += 1;
        }
    }
    Ok(())
}

/// Waits for `n` outstanding completions, discarding them.
fn drain(ring: &mut IoUring, mut n: usize) {
    let mut tries = 0;
    while n > 0 && tries < 1000 {
        let _ = ring.submitter().submit_and_wait(1);
        n = n.saturating_sub(ring.completion().count());
        tries += 1;
    }
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

    /// One round of reads and writes of two files, one request failing in
    /// the middle: it fails alone.
    fn check_a_mixed_round() {
        let data: Vec<u8> = (0..100u8).collect();
        let (d, f) = file_with(&data);
        let ro = File::open(d.path().join("f")).unwrap();
        let (_d2, g) = file_with(&[0u8; 64]);
        let mut a = [0u8; 4];
        let mut b = [0u8; 8];
        let mut past = [0u8; 8];
        let mut round = vec![
            Req::read(&f, 10, &mut a),
            Req::write(&g, 8, b"abcdefgh"),
            Req::write(&ro, 0, b"x"),
            Req::read(&f, 96, &mut b),
            Req::read(&f, 200, &mut past),
            Req::write(&g, 40, b"zz"),
        ];
        let got = run(&mut round);
        drop(round);
        let got: Vec<Result<usize, i32>> = got
            .into_iter()
            .map(|r| r.map_err(|e| e.raw_os_error().unwrap()))
            .collect();
        assert_eq!(
            got,
            vec![Ok(4), Ok(8), Err(libc::EBADF), Ok(4), Ok(0), Ok(2)]
        );
        assert_eq!(a, [10, 11, 12, 13]);
        assert_eq!(&b[..4], &[96, 97, 98, 99]);
        let mut w = [0u8; 64];
        g.read_exact_at(&mut w, 0).unwrap();
        assert_eq!(&w[8..16], b"abcdefgh");
        assert_eq!(&w[40..42], b"zz");
    }

    #[test]
    fn a_round_mixes_files_and_a_failure_stays_its_own() {
        check_a_mixed_round();
        std::thread::spawn(|| {
            ENGINE.with(|e| *e.borrow_mut() = Engine::Sync);
            check_a_mixed_round();
        })
        .join()
        .unwrap();
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
