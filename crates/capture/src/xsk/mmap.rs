//! The owned memory mapping under a UMEM or a ring: mapped by a constructor,
//! unmapped on drop. It hands out its address and length; what may be done
//! with the memory is the business of its one owner ([`super::umem::Umem`]
//! or [`super::ring::Ring`]).

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

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
    /// (`vm.nr_hugepages`), plain pages otherwise.
    ///
    /// Huge pages cut the capture thread's CPU per frame (measured on the
    /// rig during traffic: -13% at 1514 B, -20% at 64 B: frames spread over
    /// 16384 small pages per 64 MiB miss the TLB on almost every read).
    /// Transparent huge pages (MADV_HUGEPAGE) were measured too and are not
    /// used: on a VM that hands free memory back to its host (virtio free
    /// page reporting), every fresh 2 MiB page is faulted in from the host,
    /// which made an idle 4-queue start-up cost 0.8-0.9 s of CPU instead of
    /// 0.25 s. Reserved pages are paid for once, when they are reserved.
    pub(super) fn anon(len: usize) -> io::Result<Self> {
        let base = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        for flags in [base | libc::MAP_HUGETLB, base] {
            // SAFETY: a fresh anonymous mapping; no existing memory is affected.
            if let Ok(ptr) = unsafe { map_anon(len, flags) } {
                return Ok(Mmap { ptr, len });
            }
        }
        Err(io::Error::last_os_error())
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
