//! The file engine's frame memory: one byte ring shared by the thread that
//! fills it (the poll thread) and the one that empties it (the writer), the
//! way a UMEM is shared with the kernel. All of the file engine's `unsafe`
//! is here.
//!
//! Ownership protocol (every block below relies on it):
//! 1. The filler reserves the next free bytes ([`ArenaFiller::reserve`]):
//!    bytes below the ring's `released` mark plus its size are never handed
//!    out twice, so nobody else reads or writes them.
//! 2. It writes the frame, then makes a [`Desc`] naming the bytes (absolute
//!    stream position and length) and hands the token to the writer thread
//!    over a channel (which orders the writes before the reads).
//! 3. The reader reads through `&Desc` ([`ArenaReader::frame`]) and, in the
//!    order the frames were reserved, releases them
//!    ([`ArenaReader::release`]), publishing the new `released` mark with
//!    Release ordering; the filler loads it with Acquire before reusing the
//!    bytes.
//!
//! Frames are released in the order they were made (the pipeline keeps
//! batches in order), so one mark is the whole free list.

use crate::Desc;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Alignment of every frame in the ring.
const ALIGN: u64 = 8;
/// Bytes before each frame: its length on the wire (u32) and padding.
pub(crate) const HEADROOM: u64 = 8;

struct Shared {
    buf: Box<[UnsafeCell<u8>]>,
    /// Stream position up to which the reader has given frames back.
    released: AtomicU64,
    owner: u32,
}

impl Shared {
    /// The first byte, with the provenance of the whole buffer.
    fn base(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.buf.as_ptr())
    }
}

// SAFETY: the bytes are shared between exactly one filler and one reader,
// which never touch the same bytes at the same time (module protocol); the
// mark is atomic.
unsafe impl Sync for Shared {}
// SAFETY: as above; the buffer is owned by the Arc.
unsafe impl Send for Shared {}

/// Makes a ring of `size` bytes (a power of two, at least 64 KiB).
pub(crate) fn arena(size: usize) -> (ArenaFiller, ArenaReader) {
    // A power of two: positions are taken modulo it with a mask.
    let size = size.next_power_of_two().max(64 << 10);
    let buf: Box<[UnsafeCell<u8>]> = (0..size).map(|_| UnsafeCell::new(0)).collect();
    let shared = Arc::new(Shared {
        buf,
        released: AtomicU64::new(0),
        owner: crate::desc::new_owner(),
    });
    (
        ArenaFiller {
            shared: shared.clone(),
            head: 0,
        },
        ArenaReader {
            shared,
            released: 0,
        },
    )
}

/// The filling side (one thread).
pub(crate) struct ArenaFiller {
    shared: Arc<Shared>,
    /// Stream position of the next free byte.
    head: u64,
}

impl ArenaFiller {
    /// Bytes in the ring.
    pub(crate) fn capacity(&self) -> usize {
        self.shared.buf.len()
    }

    /// Reserves room for a frame of `len` bytes, lets `fill` write it (and
    /// return its length on the wire) and returns its token; None when the
    /// ring has no room now (the reader has not given enough back).
    #[cfg(test)]
    pub(crate) fn push(
        &mut self,
        len: usize,
        tai: u64,
        fill: impl FnOnce(&mut [u8]) -> u32,
    ) -> Option<Desc> {
        match self.push_if(len, tai, |b| Some(fill(b))) {
            Pushed::Frame(d) => Some(d),
            Pushed::Skipped | Pushed::NoRoom | Pushed::TooBig => None,
        }
    }

    /// As [`push`](Self::push), but `fill` may refuse the frame once it has
    /// written it (None: e.g. a capture filter rejected it): then its room
    /// is not taken and the next push reuses it.
    pub(crate) fn push_if(
        &mut self,
        len: usize,
        tai: u64,
        fill: impl FnOnce(&mut [u8]) -> Option<u32>,
    ) -> Pushed {
        let size = self.shared.buf.len() as u64;
        let need = (HEADROOM + len as u64).div_ceil(ALIGN) * ALIGN;
        if need > size {
            return Pushed::TooBig;
        }
        // A frame never wraps: skip to the ring's start when it would.
        // size is a power of two (arena()): masks, not divisions (a 64-bit
        // `%` by a size unknown at compile time costs tens of cycles, three
        // times per frame).
        let mask = size - 1;
        let off = self.head & mask;
        let start = if off + need > size {
            self.head + (size - off)
        } else {
            self.head
        };
        let released = self.shared.released.load(Ordering::Acquire);
        // With nothing live (everything given back) any place is free: a
        // frame that must skip to the ring's start still fits.
        if released < self.head && start + need - released > size {
            return Pushed::NoRoom;
        }
        let at = (start & mask) as usize;
        // SAFETY: [at, at + need) lies inside the buffer (no wrap, checked
        // above) and is free: no token names it, as it lies within one ring
        // size of the reader's released mark, or nothing is live at all
        // (module protocol). The slice is the only reference to those bytes
        // while it lives.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(self.shared.base().add(at), need as usize) };
        let Some(wire) = fill(&mut dst[HEADROOM as usize..HEADROOM as usize + len]) else {
            // Not taken: head stays, the bytes stay free.
            return Pushed::Skipped;
        };
        dst[..4].copy_from_slice(&wire.to_ne_bytes());
        self.head = start + need;
        // SAFETY: the arena's own id; the bytes were reserved above for
        // this frame and the token takes them over (module protocol).
        Pushed::Frame(unsafe { Desc::new(self.shared.owner, start + HEADROOM, len as u32, tai, 0) })
    }
}

/// What [`ArenaFiller::push_if`] did.
pub(crate) enum Pushed {
    /// The frame is in the ring: its token.
    Frame(Desc),
    /// Written, then refused by the fill function: not in the ring.
    Skipped,
    /// No room now.
    NoRoom,
    /// Larger than the whole ring: it can never go in.
    TooBig,
}

/// The reading side (one thread).
pub(crate) struct ArenaReader {
    shared: Arc<Shared>,
    released: u64,
}

impl ArenaReader {
    #[inline(always)]
    fn check(&self, d: &Desc) -> (usize, usize) {
        assert_eq!(d.owner(), self.shared.owner, "a frame of another queue");
        let size = self.shared.buf.len() as u64;
        let at = d.addr() & (size - 1);
        assert!(
            at >= HEADROOM && at + d.len() as u64 <= size,
            "frame outside the arena"
        );
        (at as usize, d.len() as usize)
    }

    /// The bytes of a frame and its length on the wire (one check).
    #[inline]
    pub(crate) fn frame(&self, d: &Desc) -> (&[u8], u32) {
        let (at, len) = self.check(d);
        let h = at - HEADROOM as usize;
        // SAFETY: [h, at + len) is inside the buffer (checked: at >= HEADROOM)
        // and belongs to the holder of `d` (module protocol): the filler does
        // not write it until it is released, which needs `d` by value.
        let b = unsafe {
            std::slice::from_raw_parts(self.shared.base().add(h), len + HEADROOM as usize)
        };
        let wire = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        (&b[HEADROOM as usize..], wire)
    }

    /// Gives frames back, in the order they were made (checked exactly:
    /// each must start where the filler put the next frame after the last
    /// one given back, so a frame still held can never be overwritten).
    pub(crate) fn release(&mut self, descs: impl Iterator<Item = Desc>) {
        let size = self.shared.buf.len() as u64;
        for d in descs {
            self.check(&d);
            let start = d.addr() - HEADROOM;
            let need = (HEADROOM + d.len() as u64).div_ceil(ALIGN) * ALIGN;
            // Where the filler put it: right after the last frame, or at
            // the ring's start when it would not fit before the end.
            let off = self.released & (size - 1);
            let expected = if off + need > size {
                self.released + (size - off)
            } else {
                self.released
            };
            assert_eq!(start, expected, "frames given back out of order");
            self.released = start + need;
        }
        self.shared.released.store(self.released, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_wraps_and_refuses_when_full() {
        let (mut f, mut r) = arena(64 << 10);
        let mut held = std::collections::VecDeque::new();
        let mut k = 0u32;
        // Fill until refused, then release half, many times round the ring.
        for round in 0..50 {
            loop {
                let len = 60 + (k as usize * 37) % 1500;
                match f.push(len, 0, |b| {
                    b.fill(k as u8);
                    len as u32 + 4
                }) {
                    Some(d) => {
                        held.push_back((k, d));
                        k += 1;
                    }
                    None => break,
                }
            }
            assert!(!held.is_empty(), "round {round}: something fits");
            let n = held.len() / 2 + 1;
            let back: Vec<Desc> = held
                .drain(..n)
                .map(|(k, d)| {
                    let (f, wire) = r.frame(&d);
                    assert!(f.iter().all(|&b| b == k as u8), "frame {k}");
                    assert_eq!(f.len() as u32, d.len());
                    assert_eq!(wire, d.len() + 4);
                    d
                })
                .collect();
            r.release(back.into_iter());
        }
        assert!(k > 2000, "wrapped many times ({k} frames)");
        assert!(f.push(70 << 10, 0, |_| 0).is_none(), "larger than the ring");
    }

    #[test]
    fn skipped_frames_take_no_room() {
        let (mut f, mut r) = arena(64 << 10);
        let a = f.push(100, 0, |b| {
            b.fill(1);
            100
        });
        assert!(matches!(
            f.push_if(100, 0, |b| {
                b.fill(2);
                None
            }),
            Pushed::Skipped
        ));
        let Pushed::Frame(c) = f.push_if(100, 0, |b| {
            b.fill(3);
            Some(100)
        }) else {
            panic!("room for the third")
        };
        let a = a.unwrap();
        // The skipped frame's bytes were reused by the next one.
        assert_eq!(c.addr() - a.addr(), 112);
        assert!(r.frame(&c).0.iter().all(|&b| b == 3));
        r.release([a, c].into_iter());
    }

    #[test]
    #[should_panic(expected = "out of order")]
    fn giving_back_a_later_frame_first_is_refused() {
        let (mut f, mut r) = arena(64 << 10);
        let a = f.push(100, 0, |_| 100).unwrap();
        let b = f.push(100, 0, |_| 100).unwrap();
        r.release([b].into_iter());
        let _still_held = a;
    }

    #[test]
    fn an_empty_ring_takes_any_frame_that_fits_it() {
        let (mut f, mut r) = arena(64 << 10);
        // Move the head to the middle, give everything back.
        let d = f.push(30_000, 0, |_| 30_000).unwrap();
        r.release([d].into_iter());
        // 40 KB no longer fits before the end: it goes at the start.
        let d = f.push(40_000, 0, |b| {
            b.fill(9);
            40_000
        });
        let d = d.expect("an empty ring takes it");
        assert!(r.frame(&d).0.iter().all(|&b| b == 9));
        assert!(f.push(40_000, 0, |_| 1).is_none(), "now it is full");
        r.release([d].into_iter());
        assert!(f.push(40_000, 0, |_| 1).is_some());
        assert!(matches!(f.push_if(70_000, 0, |_| Some(1)), Pushed::TooBig));
    }

    #[test]
    #[should_panic(expected = "another queue")]
    fn foreign_tokens_are_refused() {
        let (mut f1, _r1) = arena(64 << 10);
        let (_f2, r2) = arena(64 << 10);
        let d = f1.push(100, 0, |_| 100).unwrap();
        let _ = r2.frame(&d);
    }
}
