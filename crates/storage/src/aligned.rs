//! Page-aligned byte buffers (what O_DIRECT wants), in one small unsafe module.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// Alignment of every buffer: a page, which satisfies O_DIRECT on any
/// filesystem with a block size up to 4 KiB.
pub(crate) const ALIGN: usize = 4096;

/// A zeroed, page-aligned, fixed-size heap buffer.
pub(crate) struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like a Box<[u8]>); no
// aliasing pointers exist, so moving it to another thread is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only give out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` bytes (rounded up to a whole page), zeroed. Crate
    /// only: outside code gets buffers inside [`crate::Block`]s.
    pub(crate) fn new(len: usize) -> Self {
        let len = len.max(ALIGN).div_ceil(ALIGN) * ALIGN;
        let layout = Layout::from_size_align(len, ALIGN).expect("buffer size overflows");
        // SAFETY: layout has a non-zero size (len >= ALIGN).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes for as long
        // as self lives, and &self forbids concurrent mutation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in new() with exactly this layout.
        unsafe {
            dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.len, ALIGN),
            )
        }
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
}
