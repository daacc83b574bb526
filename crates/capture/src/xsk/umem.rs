//! The UMEM: the packet area shared with the kernel, and reading or writing
//! a frame in it under the ownership protocol of the module docs.

use super::mmap::Mmap;
use std::io;

/// The packet buffer area shared with the kernel.
pub struct Umem {
    map: Mmap,
    frame_size: u32,
    frames: u32,
}

impl Umem {
    /// `frames` frames of `frame_size` bytes of fresh memory, not yet
    /// registered with a socket (see `socket::with_umem`).
    pub(super) fn new(frames: u32, frame_size: u32) -> io::Result<Umem> {
        Ok(Umem {
            map: Mmap::anon(frames as usize * frame_size as usize)?,
            frame_size,
            frames,
        })
    }

    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// The address and length of the whole area (for XDP_UMEM_REG, and the
    /// RX ring's bounds check).
    #[inline(always)]
    pub(super) fn area(&self) -> (*mut u8, usize) {
        (self.map.as_ptr(), self.map.len())
    }

    /// The bytes of a received frame.
    #[inline(always)]
    pub fn frame(&self, d: &Desc) -> &[u8] {
        // Desc values come only from RxRing::take, which checked the bounds.
        // SAFETY: [addr, addr+len) lies inside the mapping (checked in take),
        // and the frame is owned by the holder of `d` (module invariant), so
        // the kernel does not write it while this borrow lives.
        unsafe {
            std::slice::from_raw_parts(self.map.as_ptr().add(d.addr as usize), d.len as usize)
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

/// A received frame, owned until given back with [`super::FillRing::give`].
#[derive(Debug)]
pub struct Desc {
    pub(super) addr: u64,
    pub(super) len: u32,
    /// The steering program's TAI stamp (0 when it had none).
    pub(super) tai: u64,
    /// The NIC's stamp (0 when it gave none).
    pub(super) hw: u64,
    /// The frame's timestamp (UTC ns), set by the poll thread's stamper.
    pub ts: u64,
}

impl Desc {
    pub fn len(&self) -> u32 {
        self.len
    }

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
