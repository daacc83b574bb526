//! The UMEM: the packet area shared with the kernel, and reading or writing
//! a frame in it under the ownership protocol of the module docs.

use super::mmap::Mmap;
use crate::desc::{self, Desc};
use std::io;

/// The packet buffer area shared with the kernel.
pub struct Umem {
    map: Mmap,
    /// This UMEM's owner id, stamped into every Desc its RX ring makes.
    owner: u32,
    frame_size: u32,
    frames: u32,
}

impl Umem {
    /// `frames` frames of `frame_size` bytes of fresh memory, not yet
    /// registered with a socket (see `socket::with_umem`).
    pub(super) fn new(frames: u32, frame_size: u32) -> io::Result<Umem> {
        Ok(Umem {
            map: Mmap::anon(frames as usize * frame_size as usize)?,
            owner: desc::new_owner(),
            frame_size,
            frames,
        })
    }

    /// Bytes per frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Frames in the area.
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// The id stamped into the Descs of this UMEM's frames.
    #[inline(always)]
    pub(super) fn owner(&self) -> u32 {
        self.owner
    }

    /// The address and length of the whole area (for XDP_UMEM_REG, and the
    /// RX ring's bounds check).
    #[inline(always)]
    pub(super) fn area(&self) -> (*mut u8, usize) {
        (self.map.as_ptr(), self.map.len())
    }

    /// The bytes of a received frame. Panics if `d` is not a frame of this
    /// UMEM (another queue's or another engine's).
    #[inline(always)]
    pub fn frame(&self, d: &Desc) -> &[u8] {
        assert!(d.owner() == self.owner, "Desc of another frame area");
        // Descs with our owner id come only from our RxRing::take, which
        // checked the bounds (the crate contract of Desc::new).
        // SAFETY: [addr, addr+len) lies inside the mapping (checked in take),
        // and the frame is owned by the holder of `d` (module invariant), so
        // the kernel does not write it while this borrow lives.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(d.addr() as usize), d.len() as usize)
        }
    }

    /// The `len` bytes at `addr`, to write a frame to transmit.
    ///
    /// # Safety
    ///
    /// `[addr, addr + len)` lies inside the UMEM, and the frame is ours: not
    /// posted on a TX ring (or given on a fill ring), so the kernel neither
    /// reads nor writes it while the borrow lives.
    #[inline(always)]
    pub(super) unsafe fn frame_mut(&mut self, addr: u64, len: usize) -> &mut [u8] {
        // SAFETY: in bounds and not the kernel's (the caller's contract);
        // `&mut self` rules out any other borrow of the area from our side.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr().add(addr as usize), len) }
    }
}
