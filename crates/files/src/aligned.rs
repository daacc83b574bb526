//! Page-aligned byte buffers (what O_DIRECT wants), in one small unsafe
//! module: each on its own heap allocation, or carved from a [`Slab`], one
//! mapping that a sink's blocks share (one registered buffer for io_uring;
//! reserved huge pages where there are: fewer TLB misses while frames are
//! copied in).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;
use std::sync::Arc;

/// Alignment of every buffer: a page, which satisfies O_DIRECT on any
/// filesystem with a block size up to 4 KiB.
pub const ALIGN: usize = 4096;

/// A zeroed, page-aligned, fixed-size buffer.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// None: its own heap allocation (freed on drop). Some: a part of this
    /// slab, which no other buffer covers (the slab is unmapped when its
    /// last part is dropped).
    slab: Option<Arc<Slab>>,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like a Box<[u8]>); no
// aliasing pointers exist, so moving it to another thread is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only give out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` bytes (rounded up to a whole page), zeroed.
    pub fn new(len: usize) -> Self {
        let len = len.max(ALIGN).div_ceil(ALIGN) * ALIGN;
        let layout = Layout::from_size_align(len, ALIGN).expect("buffer size overflows");
        // SAFETY: layout has a non-zero size (len >= ALIGN).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf {
            ptr,
            len,
            slab: None,
        }
    }

    /// Like [`AlignedBuf::new`], but on an anonymous mapping of its own
    /// whose pages come as they are first written (the kernel's zero
    /// pages until then), where `new` zeroes every page at once. For a
    /// buffer sized for the largest read of which most uses fill a page or
    /// two (a query's reader of each file: a selective query reads a few
    /// pages of each; zeroing its 1 MiB was half of such a query's CPU).
    /// Plain pages, never huge ones; [`AlignedBuf::new`] if the mapping
    /// cannot be made.
    pub(crate) fn lazy(len: usize) -> Self {
        let len = len.max(ALIGN).div_ceil(ALIGN) * ALIGN;
        match Slab::map(1, len, false, false) {
            Ok(mut c) => c.bufs.pop().expect("one buffer carved"),
            Err(_) => AlignedBuf::new(len),
        }
    }

    /// Its length in bytes (a whole number of pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a buffer holds a page at least.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes for as long
        // as self lives, and &self forbids concurrent mutation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Its bytes, to fill.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.slab.is_some() {
            // A part of a slab: the Arc (dropped with us) unmaps it last.
            return;
        }
        // SAFETY: allocated in new() with exactly this layout.
        unsafe {
            dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.len, ALIGN),
            )
        }
    }
}

/// A huge page (x86-64, arm64 with 4 KiB base pages).
const HUGE: usize = 2 << 20;

/// One anonymous mapping that [`Slab::carve`] cuts into buffers once: on
/// reserved huge pages (`vm.nr_hugepages`, populated at once) when its size
/// is a whole number of them and the kernel has enough, else on plain pages,
/// populated at once or, if the caller asks, as they are first written
/// (transparent huge pages are not asked for: see the UMEM's `Mmap::anon`
/// in the capture crate for why).
pub struct Slab {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the slab is plain memory; its bytes are only reached through the
// AlignedBufs carved from it, each of which owns its part exclusively.
unsafe impl Send for Slab {}
// SAFETY: as above (the slab itself gives no access to its bytes).
unsafe impl Sync for Slab {}

impl Slab {
    /// `n` zeroed buffers of `size` bytes (a multiple of [`ALIGN`]), back to
    /// back in one mapping (the first at its start), and the mapping's
    /// address range. `populate`: fault every page in now; else plain pages
    /// come as they are first written (huge pages are always populated).
    /// Err when the mapping cannot be made: then use [`AlignedBuf::new`].
    pub fn carve(n: usize, size: usize, populate: bool) -> std::io::Result<Carved> {
        Self::map(n, size, populate, true)
    }

    /// [`Slab::carve`], on huge pages only if `huge` allows them.
    fn map(n: usize, size: usize, populate: bool, huge: bool) -> std::io::Result<Carved> {
        assert!(
            size > 0 && size.is_multiple_of(ALIGN),
            "slab part size {size}"
        );
        let len = n.checked_mul(size).expect("slab size overflows");
        let base = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let plain = if populate {
            base | libc::MAP_POPULATE
        } else {
            base
        };
        // Huge pages only for a whole number of them.
        let tries: &[libc::c_int] = if huge && len.is_multiple_of(HUGE) {
            &[base | libc::MAP_POPULATE | libc::MAP_HUGETLB, plain]
        } else {
            &[plain]
        };
        let (mut raw, mut flags_used) = (libc::MAP_FAILED, 0);
        for &flags in tries {
            flags_used = flags;
            // SAFETY: a fresh anonymous private mapping (not MAP_FIXED): no
            // existing memory is affected.
            raw = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    flags,
                    -1,
                    0,
                )
            };
            if raw != libc::MAP_FAILED {
                break;
            }
        }
        if raw == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let slab = Arc::new(Slab {
            ptr: NonNull::new(raw.cast()).expect("mmap returned null"),
            len,
        });
        let bufs = (0..n)
            .map(|i| AlignedBuf {
                // SAFETY: i * size + size <= len: inside the mapping.
                ptr: unsafe { NonNull::new_unchecked(slab.ptr.as_ptr().add(i * size)) },
                len: size,
                slab: Some(slab.clone()),
            })
            .collect();
        Ok(Carved {
            bufs,
            base: raw as *const u8,
            len,
            populated: flags_used & libc::MAP_POPULATE != 0,
        })
    }
}

/// What [`Slab::carve`] made.
pub struct Carved {
    /// The buffers, in address order.
    pub bufs: Vec<AlignedBuf>,
    /// The mapping's start (to register it with io_uring, say).
    pub base: *const u8,
    /// The mapping's length in bytes.
    pub len: usize,
    /// Every page is in (else they come as the buffers are first written).
    pub populated: bool,
}

impl Drop for Slab {
    fn drop(&mut self) {
        // SAFETY: exactly the range kept in carve(); the last AlignedBuf
        // carved from it is gone (each holds an Arc), so nothing refers to it.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn aligned_and_rounded() {
        let mut b = AlignedBuf::new(5000);
        assert_eq!(b.len(), 8192);
        assert_eq!(b.as_slice().as_ptr() as usize % ALIGN, 0);
        b.as_mut_slice()[8191] = 7;
        assert_eq!(b.as_slice()[8191], 7);
        assert!(b.as_slice()[..8191].iter().all(|&x| x == 0));
    }

    #[test]
    fn slab_parts_are_disjoint_zeroed_and_outlive_each_other() {
        for populate in [true, false] {
            slab_parts(populate);
        }
    }

    fn slab_parts(populate: bool) {
        let c = Slab::carve(3, 2 * ALIGN, populate).unwrap();
        let (mut bufs, base, len) = (c.bufs, c.base, c.len);
        assert_eq!(c.populated, populate);
        assert_eq!(len, 6 * ALIGN);
        // Lazy: no page is in until a buffer is written.
        assert_eq!(resident(base, len), if populate { 6 } else { 0 });
        assert_eq!(base as usize % ALIGN, 0);
        for (i, b) in bufs.iter_mut().enumerate() {
            assert_eq!(b.len(), 2 * ALIGN);
            assert_eq!(
                b.as_slice().as_ptr() as usize,
                base as usize + i * 2 * ALIGN
            );
            assert!(b.as_slice().iter().all(|&x| x == 0));
            b.as_mut_slice().fill(i as u8 + 1);
        }
        assert_eq!(resident(base, len), 6);
        let last = bufs.pop().unwrap();
        drop(bufs);
        // The slab lives on with its last part.
        assert!(last.as_slice().iter().all(|&x| x == 3));
    }

    #[test]
    fn lazy_buffers_are_zeroed_and_fault_in_only_what_is_written() {
        // A multiple of a huge page: plain pages all the same, none in yet.
        for len in [5000, 2 << 20] {
            let mut b = AlignedBuf::lazy(len);
            let n = len.div_ceil(ALIGN) * ALIGN;
            assert_eq!(b.len(), n);
            let base = b.as_slice().as_ptr();
            assert_eq!(base as usize % ALIGN, 0);
            assert_eq!(resident(base, n), 0);
            b.as_mut_slice()[..ALIGN + 1].fill(9);
            assert_eq!(resident(base, n), 2);
            assert!(b.as_slice()[..ALIGN + 1].iter().all(|&x| x == 9));
            assert!(b.as_slice()[ALIGN + 1..].iter().all(|&x| x == 0));
        }
    }

    /// Pages of [base, base+len) in memory (mincore).
    fn resident(base: *const u8, len: usize) -> usize {
        let mut v = vec![0u8; len.div_ceil(ALIGN)];
        // SAFETY: [base, base+len) is a live mapping (the slab, held by the
        // caller's buffers); v has one byte per page of it.
        let r = unsafe { libc::mincore(base as *mut _, len, v.as_mut_ptr()) };
        assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
        v.iter().filter(|&&b| b & 1 != 0).count()
    }
}
