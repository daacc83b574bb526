//! The owned memory mapping under a UMEM or a ring: mapped by a constructor,
//! unmapped on drop. It hands out its address and length; what may be done
//! with the memory is the business of its one owner ([`super::umem::Umem`]
//! or [`super::ring::Ring`]).

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// A huge page (x86-64, arm64 with 4 KiB base pages).
const HUGE: usize = 2 << 20;
/// madvise(2) advice (Linux 5.14; older kernels refuse it with EINVAL).
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// `mmap(NULL, len, PROT_READ|PROT_WRITE, flags, -1, 0)`.
///
/// # Safety
///
/// `flags` make an anonymous mapping (MAP_ANONYMOUS, and no MAP_FIXED), so
/// no existing memory is replaced; the caller owns the result and unmaps it.
unsafe fn map_anon(len: usize, flags: libc::c_int) -> io::Result<NonNull<u8>> {
    // SAFETY: anonymous and not fixed (the contract): a fresh range.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(NonNull::new(p.cast()).expect("mmap returned null"))
}

/// A mapping of `len` bytes at `ptr`, unmapped on drop.
pub(super) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; access to its contents is governed by
// the ring/frame ownership protocol in the module docs, not by this handle.
unsafe impl Send for Mmap {}
// SAFETY: as above.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Fresh private anonymous memory (a UMEM; a synthetic ring in tests),
    /// populated up front: huge pages where the kernel has them reserved
    /// (hugetlbfs), else transparent huge pages where the kernel gives them
    /// to regions that ask (`madvise` mode, the common default), else plain
    /// pages. Huge pages matter twice: populating 64 MiB of 4 KiB pages is
    /// 16384 faults at start-up (most of an idle recording's CPU, measured),
    /// and reading frames spread over that many pages misses the TLB on
    /// almost every frame.
    pub(super) fn anon(len: usize) -> io::Result<Self> {
        let base = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let p = unsafe { map_anon(len, base | libc::MAP_HUGETLB | libc::MAP_POPULATE) };
        if let Ok(ptr) = p {
            return Ok(Mmap { ptr, len });
        }
        if len >= HUGE {
            if let Ok(m) = Self::anon_thp(len) {
                return Ok(m);
            }
        }
        // SAFETY: as above.
        let ptr = unsafe { map_anon(len, base | libc::MAP_POPULATE)? };
        Ok(Mmap { ptr, len })
    }

    /// `len` bytes on a 2 MiB boundary, advised for transparent huge pages,
    /// then populated (so the kernel allocates 2 MiB folios where it can).
    fn anon_thp(len: usize) -> io::Result<Self> {
        let over = len + HUGE;
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let raw = unsafe { map_anon(over, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS)? };
        let start = raw.as_ptr() as usize;
        let aligned = start.next_multiple_of(HUGE);
        let head = aligned - start;
        let tail = over - head - len;
        // SAFETY: [start, start+over) is the mapping just made and nothing
        // refers to it yet; the head and tail cut here lie inside it and
        // outside [aligned, aligned+len), which is what we keep.
        unsafe {
            if head > 0 {
                libc::munmap(start as *mut libc::c_void, head);
            }
            if tail > 0 {
                libc::munmap((aligned + len) as *mut libc::c_void, tail);
            }
        }
        let m = Mmap {
            ptr: NonNull::new(aligned as *mut u8).expect("mmap returned null"),
            len,
        };
        // SAFETY: advice on our own fresh mapping; MADV_HUGEPAGE changes how
        // its pages are allocated, not their contents (all zero).
        unsafe { libc::madvise(m.ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE) };
        // SAFETY: as above; MADV_POPULATE_WRITE (Linux 5.14) faults every
        // page in writable, as MAP_POPULATE would have, contents unchanged.
        let rc = unsafe { libc::madvise(m.ptr.as_ptr().cast(), len, MADV_POPULATE_WRITE) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINVAL) {
                // ENOMEM and the like: dropping `m` unmaps it.
                return Err(e);
            }
            // An older kernel: touch each page instead (writing a zero over
            // a zero page changes nothing but makes it ours).
            for off in (0..len).step_by(4096) {
                // SAFETY: off < len, inside the mapping, which nothing else
                // refers to yet.
                unsafe { m.ptr.as_ptr().add(off).write_volatile(0) };
            }
        }
        Ok(m)
    }

    /// Maps `len` bytes of the ring socket `fd` has at page offset `pgoff`
    /// (one of the `XDP_*PGOFF_*` constants), shared with the kernel.
    ///
    /// # Safety
    ///
    /// `fd` is an AF_XDP socket and `pgoff` one of its configured rings (not
    /// some other file, whose shared pages another process could write or
    /// truncate under us), and the mapping is given to exactly one
    /// [`super::ring::Ring`]: that ring and the kernel are the only parties
    /// that touch the memory. (A `len` beyond the ring is refused by the
    /// kernel with EINVAL.)
    pub(super) unsafe fn shared(fd: RawFd, len: usize, pgoff: u64) -> io::Result<Self> {
        // SAFETY: a new mapping of the socket's ring (the caller's contract);
        // no existing memory of ours is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: NonNull::new(p.cast()).unwrap(),
            len,
        })
    }

    /// The first byte (page-aligned).
    #[inline(always)]
    pub(super) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what mmap returned. The owner (a Umem or a
        // Ring) drops it last, and every borrow of the memory borrows that
        // owner, so none is left.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
