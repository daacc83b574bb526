//! The file engine's mapped input: a capture file mapped read-only, so that
//! its records' bytes are handed to the writer where they lie (no `read()`,
//! no copy into the ring). All of the `unsafe` of reading in place is here.
//!
//! Invariants (every block below relies on them):
//! 1. The mapping covers exactly `len` bytes (the file's length when it was
//!    mapped), read-only and private: nothing in this process writes it. It
//!    lives as long as the [`MappedFile`] (the reading half and the frame
//!    half of the queue share it by `Arc`), and every slice of it borrows
//!    that [`MappedFile`].
//! 2. A [`Desc`] carrying this mapping's owner id is made only by
//!    [`MappedFile::desc`], which checks that its bytes lie inside the
//!    mapping.
//!
//! What the mapping cannot promise: another process may change the file
//! while it is read. A write shows up as changed bytes in the frames copied
//! (every length is read once into a local and checked against the
//! mapping's fixed length, so no access goes outside it); a truncation makes
//! the pages past the new end unreadable, and touching one ends the process
//! with SIGBUS, as for any program that maps its input. The `read()` path
//! (`FileConfig::in_place` false) sees a truncation as a file cut short.

use crate::Desc;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// A whole file mapped read-only, unmapped on drop.
pub(crate) struct MappedFile {
    ptr: NonNull<u8>,
    len: usize,
    owner: u32,
}

// SAFETY: the mapping is read-only memory (invariant 1): sharing it between
// the reading and the frame half of a queue is sharing `&[u8]`.
unsafe impl Send for MappedFile {}
// SAFETY: as above.
unsafe impl Sync for MappedFile {}

impl MappedFile {
    /// Maps the whole of `file` (its length now) for reading, and asks the
    /// kernel for sequential read-ahead on it. Fails for an empty file.
    pub(crate) fn map(file: &File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::FileTooLarge))?;
        if len == 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        // SAFETY: a new private read-only mapping of an open file; no memory
        // of ours is affected. What the file's other writers may do to it is
        // in the module docs.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let m = MappedFile {
            ptr: NonNull::new(p.cast()).expect("mmap returned a null mapping"),
            len,
            owner: crate::desc::new_owner(),
        };
        // A hint: read-ahead from a disk, pages dropped sooner behind us.
        m.advise(0, len, libc::MADV_SEQUENTIAL);
        Ok(m)
    }

    /// `madvise(advice)` on `[from, from + len)` clipped to the mapping
    /// (page-aligned down); a refused hint is ignored.
    fn advise(&self, from: usize, len: usize, advice: libc::c_int) {
        let from = from.min(self.len) & !(page_size() - 1);
        let end = from.saturating_add(len).min(self.len);
        if end <= from {
            return;
        }
        // SAFETY: the range lies inside our mapping (clipped above) and its
        // start is page-aligned. None of these hints changes what the
        // memory reads as: sequential and populate-read only steer the
        // kernel's paging; dontneed drops the page table entries of a
        // private mapping we never wrote, so the next read maps the file's
        // page again, with the same bytes.
        unsafe { libc::madvise(self.ptr.as_ptr().add(from).cast(), end - from, advice) };
    }

    /// Maps the pages of `[from, from + len)` now (one call for the range,
    /// instead of a page fault every 16 pages as the reader walks it), and
    /// starts reading them from a disk. A kernel without
    /// `MADV_POPULATE_READ` (before 5.14) faults them in as they are read.
    pub(crate) fn prefault(&self, from: usize, len: usize) {
        self.advise(from, len, libc::MADV_POPULATE_READ);
    }

    /// Lets the pages of `[from, from + len)` go: the kernel unmaps them
    /// (reading them again maps them again, with the same bytes). For
    /// frames already copied, so that a long file read in place keeps a
    /// few windows mapped, not all of it.
    pub(crate) fn release(&self, from: usize, len: usize) {
        self.advise(from, len, libc::MADV_DONTNEED);
    }

    /// The file's bytes.
    #[inline(always)]
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: ptr/len are the mapping's, readable for as long as `self`
        // lives (invariant 1); the slice borrows `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Asks the CPU to bring the cache line holding byte `at` into its L2
    /// cache ahead of its use; nothing past the mapping's end.
    #[inline(always)]
    pub(crate) fn prefetch_l2(&self, at: usize) {
        #[cfg(target_arch = "x86_64")]
        self.prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(at);
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    /// As [`MappedFile::prefetch_l2`], into the L1 cache (for a use soon).
    #[inline(always)]
    pub(crate) fn prefetch_l1(&self, at: usize) {
        #[cfg(target_arch = "x86_64")]
        self.prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at);
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn prefetch<const HINT: i32>(&self, at: usize) {
        if at < self.len {
            // SAFETY: a prefetch is a hint: it neither faults nor changes
            // memory (and the address lies inside the mapping anyway).
            unsafe { std::arch::x86_64::_mm_prefetch::<HINT>(self.ptr.as_ptr().add(at).cast()) };
        }
    }

    /// Whether `d` names bytes of this mapping.
    #[inline(always)]
    pub(crate) fn owns(&self, d: &Desc) -> bool {
        d.owner() == self.owner
    }

    /// The token of the frame at `[at, at + len)`, stamped `ts`. Panics
    /// when those bytes are not inside the mapping.
    #[inline(always)]
    pub(crate) fn desc(&self, at: usize, len: u32, ts: u64) -> Desc {
        assert!(
            at.checked_add(len as usize).is_some_and(|e| e <= self.len),
            "frame outside the mapped file"
        );
        // SAFETY: the mapping's own owner id; the bytes lie inside it
        // (checked) and are never written (invariant 1), so the token may
        // name them for as long as it likes.
        let mut d = unsafe { Desc::new(self.owner, at as u64, len, 0, 0) };
        d.ts = ts;
        d
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what mmap returned; every slice of it
        // borrows `self` (invariant 1), so none is left.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn maps_a_file_and_names_its_frames() {
        let p = std::env::temp_dir().join(format!("wt-mapped-{}", std::process::id()));
        let mut f = File::create(&p).unwrap();
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        f.write_all(&data).unwrap();
        drop(f);
        let f = File::open(&p).unwrap();
        let m = MappedFile::map(&f).unwrap();
        std::fs::remove_file(&p).unwrap(); // the mapping keeps it
        assert_eq!(m.len(), 10_000);
        assert_eq!(m.bytes(), &data[..]);
        m.prefault(5000, 1 << 20); // clipped to the mapping
        let d = m.desc(9000, 1000, 7);
        assert!(m.owns(&d));
        assert_eq!((d.addr(), d.len(), d.ts), (9000, 1000, 7));
        let other = MappedFile::map(&f).unwrap();
        assert!(!other.owns(&d));
    }

    #[test]
    #[should_panic(expected = "outside the mapped file")]
    fn a_frame_past_the_end_is_refused() {
        let p = std::env::temp_dir().join(format!("wt-mapped-end-{}", std::process::id()));
        std::fs::write(&p, [1u8; 100]).unwrap();
        let f = File::open(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        let m = MappedFile::map(&f).unwrap();
        let _ = m.desc(50, 51, 0);
    }

    #[test]
    fn an_empty_file_is_not_mapped() {
        let p = std::env::temp_dir().join(format!("wt-mapped-empty-{}", std::process::id()));
        std::fs::write(&p, []).unwrap();
        let f = File::open(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        assert!(MappedFile::map(&f).is_err());
    }
}
