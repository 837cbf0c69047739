//! Many positioned reads or writes of one file in one round of system
//! calls.
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
//! file ends, [`write_many`] writes each buffer whole.

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

/// Reads each `(offset, buffer)` of `file` until the buffer is full or the
/// file ends; returns the bytes read into each. The first error ends the
/// batch.
pub fn read_many(file: &File, reqs: &mut [(u64, &mut [u8])]) -> io::Result<Vec<usize>> {
    let mut done = vec![0usize; reqs.len()];
    if reqs.is_empty() {
        return Ok(done);
    }
    match on_ring(reqs.len(), |ring| submit_reads(ring, file, reqs, &mut done)) {
        Some(Ok(())) => {
            // A short read that is not the end of the file (a proc file
            // may hand out less than asked) is finished here.
            for (i, (off, buf)) in reqs.iter_mut().enumerate() {
                let n = done[i];
                if n > 0 && n < buf.len() {
                    done[i] = n + read_full_at(file, &mut buf[n..], *off + n as u64)?;
                }
            }
            Ok(done)
        }
        Some(Err(e)) => Err(e),
        None => {
            for (i, (off, buf)) in reqs.iter_mut().enumerate() {
                done[i] = read_full_at(file, buf, *off)?;
            }
            Ok(done)
        }
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

fn submit_reads(
    ring: &mut IoUring,
    file: &File,
    reqs: &mut [(u64, &mut [u8])],
    done: &mut [usize],
) -> io::Result<()> {
    let fd = types::Fd(file.as_raw_fd());
    let mut first_err = None;
    for (c, chunk) in reqs.chunks_mut(RING_ENTRIES as usize).enumerate() {
        let base = c * RING_ENTRIES as usize;
        for (j, (off, buf)) in chunk.iter_mut().enumerate() {
            let sqe = opcode::Read::new(fd, buf.as_mut_ptr(), buf.len() as u32)
                .offset(*off)
                .build()
                .flags(squeue::Flags::ASYNC)
                .user_data((base + j) as u64);
            // SAFETY: the buffer outlives the request: every request is
            // waited for below before this function returns.
            unsafe { ring.submission().push(&sqe) }.expect("chunk fits the ring");
        }
        wait_all(ring, chunk.len(), |i, res| match res {
            r if r >= 0 => done[i] = r as usize,
            r if r == -libc::EINTR || r == -libc::EAGAIN => {
                // Redone synchronously below (a rare case).
                done[i] = usize::MAX;
            }
            r => {
                first_err.get_or_insert(io::Error::from_raw_os_error(-r));
            }
        })?;
        for (j, (off, buf)) in chunk.iter_mut().enumerate() {
            if done[base + j] == usize::MAX {
                done[base + j] = read_full_at(file, buf, *off)?;
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

fn submit_writes(ring: &mut IoUring, file: &File, reqs: &[(u64, &[u8])]) -> io::Result<()> {
    let fd = types::Fd(file.as_raw_fd());
    let mut first_err = None;
    for (c, chunk) in reqs.chunks(RING_ENTRIES as usize).enumerate() {
        let base = c * RING_ENTRIES as usize;
        let mut redo = Vec::new();
        for (j, (off, buf)) in chunk.iter().enumerate() {
            let sqe = opcode::Write::new(fd, buf.as_ptr(), buf.len() as u32)
                .offset(*off)
                .build()
                .flags(squeue::Flags::ASYNC)
                .user_data((base + j) as u64);
            // SAFETY: as for reads: waited for before returning.
            unsafe { ring.submission().push(&sqe) }.expect("chunk fits the ring");
        }
        wait_all(ring, chunk.len(), |i, res| {
            let len = reqs[i].1.len();
            match res {
                r if r >= 0 && r as usize == len => {}
                // Short, interrupted or would-block: written whole below.
                r if r >= 0 || r == -libc::EINTR || r == -libc::EAGAIN => redo.push(i),
                r => {
                    first_err.get_or_insert(io::Error::from_raw_os_error(-r));
                }
            }
        })?;
        for i in redo {
            let (off, buf) = reqs[i];
            file.write_all_at(buf, off)?;
        }
    }
    first_err.map_or(Ok(()), Err)
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

    #[test]
    fn errors_are_reported() {
        let (_d, f) = file_with(b"x");
        let ro = File::open(_d.path().join("f")).unwrap();
        let e = write_many(&ro, &[(0, b"y")]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF));
        drop(f);
    }
}
