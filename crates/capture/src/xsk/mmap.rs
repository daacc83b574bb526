//! The owned memory mapping under UMEMs and rings.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// An anonymous shared mapping, unmapped on drop.
pub(super) struct Mmap {
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
}

// SAFETY: the mapping is plain memory; access to its contents is governed by
// the ring/frame ownership protocol in the module docs, not by this handle.
unsafe impl Send for Mmap {}
// SAFETY: as above.
unsafe impl Sync for Mmap {}

impl Mmap {
    pub(super) fn anon(len: usize) -> io::Result<Self> {
        let base = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        // Huge pages where the kernel has them reserved; plain pages otherwise.
        for flags in [base | libc::MAP_HUGETLB, base] {
            // SAFETY: a fresh anonymous mapping; no existing memory is affected.
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
            if p != libc::MAP_FAILED {
                return Ok(Mmap {
                    ptr: NonNull::new(p.cast()).unwrap(),
                    len,
                });
            }
        }
        Err(io::Error::last_os_error())
    }

    pub(super) fn ring(fd: RawFd, len: usize, pgoff: u64) -> io::Result<Self> {
        // SAFETY: maps the socket's ring at the offset the kernel defines for
        // it; the length comes from the kernel's own mmap offsets + ring size.
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
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what mmap returned; all users hold an Arc to
        // this mapping, so none is left when it drops.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
