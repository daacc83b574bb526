//! What every fuzz target shares: a global allocator that counts, so that
//! a target asserts no single allocation went beyond a record's size bound
//! (`wiretape_storage::fuzz::RECORD_ALLOC_BOUND`) plus what the input
//! itself could fill. (libFuzzer's `-malloc_limit_mb` checks the same from
//! outside, coarser.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, remembering the largest single request.
pub struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the
// counter is only read and written atomically.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LARGEST.fetch_max(new, Ordering::Relaxed);
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(p, l, new) }
    }
}

/// Runs `body` on `data` and panics if any single allocation during it
/// was above the bound: `RECORD_ALLOC_BOUND` (256 KiB) plus twice the
/// input's length, plus 1 MiB for the readers' fixed buffers (a 1 MiB
/// BufReader is the largest of those).
pub fn bounded(data: &[u8], body: fn(&[u8])) {
    LARGEST.store(0, Ordering::Relaxed);
    body(data);
    let largest = LARGEST.load(Ordering::Relaxed);
    let bound = wiretape_storage::fuzz::RECORD_ALLOC_BOUND + 2 * data.len() + (1 << 20);
    assert!(
        largest <= bound,
        "one allocation of {largest} bytes for a {}-byte input (bound {bound})",
        data.len()
    );
}
