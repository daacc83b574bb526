//! The frame token shared by every capture engine (AF_XDP; later a file
//! engine, netmap): a [`Desc`] names one received frame in one engine's frame
//! area, and whoever holds it owns the frame until it is given back.
//!
//! Each frame area (an AF_XDP UMEM, ...) draws a process-unique owner id from
//! [`new_owner`] when it is created, and stamps it into every `Desc` it hands
//! out; the area's read and give-back paths check it, so a `Desc` can only
//! be used with the area it came from (never another queue's or another
//! engine's), in safe code.

use std::sync::atomic::{AtomicU32, Ordering};

/// The next owner id; 0 is never handed out.
static NEXT_OWNER: AtomicU32 = AtomicU32::new(1);

/// A fresh owner id, unique in the process, for a new frame area. Every
/// engine draws its ids here, so ids of different engines never collide.
pub(crate) fn new_owner() -> u32 {
    NEXT_OWNER
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
        .expect("frame area owner ids exhausted")
}

/// A received frame, owned until given back to the engine it came from
/// (for AF_XDP: [`crate::xsk::FillRing::give`]). Neither `Clone` nor
/// constructible outside this crate.
#[derive(Debug)]
pub struct Desc {
    /// The id of the frame area `addr` is in (see [`new_owner`]).
    owner: u32,
    len: u32,
    addr: u64,
    /// The steering program's TAI stamp (0 when it had none).
    tai: u64,
    /// The NIC's stamp (0 when it gave none).
    hw: u64,
    /// The frame's timestamp (UTC ns), set by the poll thread's stamper.
    pub ts: u64,
}

impl Desc {
    /// The frame of `len` bytes at `addr` in the frame area `owner`, with
    /// its stamps (0 when none); `ts` starts at 0.
    ///
    /// # Safety
    /// `owner` is an id the caller drew for its own frame area, and
    /// `[addr, addr + len)` is a frame inside that area which the caller
    /// owns and hands over to the token: the area's read path trusts
    /// `addr`/`len` of a `Desc` that carries its id.
    #[inline(always)]
    pub(crate) unsafe fn new(owner: u32, addr: u64, len: u32, tai: u64, hw: u64) -> Desc {
        Desc {
            owner,
            len,
            addr,
            tai,
            hw,
            ts: 0,
        }
    }

    /// Where the frame is in its area.
    #[inline(always)]
    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    /// The id of the frame area the frame is in.
    #[inline(always)]
    pub(crate) fn owner(&self) -> u32 {
        self.owner
    }

    /// Captured bytes.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the frame has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl wiretape_timestamp::StampSlot for Desc {
    #[inline(always)]
    fn frame_len(&self) -> u32 {
        self.len
    }
    #[inline(always)]
    fn xdp_tai(&self) -> u64 {
        self.tai
    }
    #[inline(always)]
    fn hw(&self) -> u64 {
        self.hw
    }
    #[inline(always)]
    fn set_ts(&mut self, ns: u64) {
        self.ts = ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Descs travel in batches through channels: keep them small.
    #[test]
    fn desc_is_at_most_40_bytes() {
        assert!(std::mem::size_of::<Desc>() <= 40);
    }

    #[test]
    fn owner_ids_are_unique_and_never_0() {
        let a = new_owner();
        let b = new_owner();
        assert_ne!(a, 0);
        assert_ne!(a, b);
    }
}
