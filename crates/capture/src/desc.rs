//! The frame token shared by every capture engine.

/// A received frame, owned by whoever holds this token until it is given
/// back to the engine it came from. Neither `Clone` nor constructible outside
/// this crate; each engine checks that a token is its own (`owner`) before
/// it reads or recycles the frame, so a token of another queue cannot alias
/// memory the kernel (or another engine) may be writing.
#[derive(Debug)]
pub struct Desc {
    owner: u32,
    len: u32,
    addr: u64,
    /// The steering program's TAI stamp (0 when it had none).
    tai: u64,
    /// The NIC's stamp (0 when it gave none).
    hw: u64,
    /// The frame's timestamp (UTC ns), set by the engine or the stamper.
    pub ts: u64,
}

impl Desc {
    #[inline(always)]
    pub(crate) fn new(owner: u32, addr: u64, len: u32, tai: u64, hw: u64) -> Desc {
        Desc {
            owner,
            len,
            addr,
            tai,
            hw,
            ts: 0,
        }
    }

    #[inline(always)]
    pub(crate) fn addr(&self) -> u64 {
        self.addr
    }

    #[inline(always)]
    pub(crate) fn owner(&self) -> u32 {
        self.owner
    }

    /// Captured bytes.
    #[inline(always)]
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

/// A new owner id for an engine's frame memory (a UMEM, an arena).
pub(crate) fn new_owner() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn stays_small() {
        assert!(std::mem::size_of::<super::Desc>() <= 40);
    }
}
