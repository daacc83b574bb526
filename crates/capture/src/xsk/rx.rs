//! Capture: the RX ring (consumer side, the poll thread) and the fill ring
//! (producer side, the writer thread).

use super::ring::{Cons, Prod, Ring};
use super::umem::Umem;
use super::{socket, XskFd, META_LEN};
use crate::desc::Desc;
use std::sync::Arc;

/// The RX ring, consumer side (the poll thread).
pub struct RxRing {
    ring: Ring<libc::xdp_desc, Cons>,
    umem: Arc<Umem>,
}

impl RxRing {
    /// Our end of `ring`, whose descriptors point into `umem`.
    pub(super) fn new(ring: Ring<libc::xdp_desc, Cons>, umem: Arc<Umem>) -> RxRing {
        RxRing { ring, umem }
    }

    /// Takes up to `max` received frames, appending them to `out`; returns how many.
    #[inline]
    pub fn take(&mut self, max: usize, out: &mut Vec<Desc>) -> usize {
        let (base, umem_len) = self.umem.area();
        let umem_len = umem_len as u64;
        let owner = self.umem.owner();
        self.ring.consume(max, |d| {
            let addr = d.addr;
            let end = addr + d.len as u64;
            // The kernel never hands out an address outside the UMEM; check
            // anyway so that a kernel bug cannot become a wild read here.
            assert!(
                addr >= META_LEN && end <= umem_len,
                "RX descriptor outside the UMEM"
            );
            // SAFETY: addr-16..addr lies inside the frame's headroom (addr >= 16,
            // in the UMEM), which the kernel filled before publishing; the frame
            // is ours from here on (module invariant), so we may also clear it:
            // when the XDP program could not reserve metadata for a frame
            // (meta_fail), the kernel copies none and these bytes would still
            // hold an earlier frame's stamps. Cleared, they read 0 ("no stamp":
            // the poll thread's clock stamps it instead).
            let (hw, tai) = unsafe {
                let m = base.add((addr - META_LEN) as usize).cast::<u64>();
                let v = (
                    std::ptr::read_unaligned(m),
                    std::ptr::read_unaligned(m.add(1)),
                );
                std::ptr::write_unaligned(m, 0);
                std::ptr::write_unaligned(m.add(1), 0);
                v
            };
            // The frame's first lines are not the metadata's: ask for them
            // now, so that its copy into a block, later in this batch, finds
            // them in this core's cache (the kernel wrote them on another
            // CPU). At 64 B that load was a third of the capture CPU (perf).
            #[cfg(target_arch = "x86_64")]
            {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                let p = base.wrapping_add(addr as usize) as *const i8;
                // SAFETY: a prefetch is a hint: it never faults and changes
                // no memory; [addr, end) lies inside the UMEM (checked
                // above). SSE is part of x86_64.
                unsafe {
                    _mm_prefetch::<_MM_HINT_T0>(p);
                    if d.len > 64 {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
                    }
                }
            }
            // SAFETY: `owner` is this UMEM's id; [addr, addr+len) was checked
            // to lie inside it, and the kernel handed the frame to us.
            out.push(unsafe { Desc::new(owner, addr, d.len, tai, hw) });
        })
    }

    /// Frames waiting in the ring.
    pub fn pending(&self) -> u32 {
        self.ring.available()
    }
}

/// The fill ring, producer side (the writer thread).
///
/// Sized at twice the UMEM's frame count: the kernel publishes its consumer
/// index lazily, so entries it has already taken may still look occupied.
/// Visible occupancy is at most the frames really in the ring (<= F) plus
/// the entries taken but not yet published (<= F), so 2F always has room.
/// Should it not (a kernel that behaves otherwise), the frames wait in
/// `backlog` and go in on the next call: never a panic on the data path.
pub struct FillRing {
    ring: Ring<u64, Prod>,
    /// The owner id of the UMEM whose frames this ring takes.
    owner: u32,
    /// The socket, for the wakeup: held, so it stays open while we use it.
    fd: Arc<XskFd>,
    backlog: Vec<u64>,
}

impl FillRing {
    /// Our end of `ring`, the fill ring of socket `fd`, which takes the
    /// frames of `umem`.
    pub(super) fn new(ring: Ring<u64, Prod>, fd: Arc<XskFd>, umem: &Umem) -> FillRing {
        FillRing {
            ring,
            owner: umem.owner(),
            fd,
            backlog: Vec::with_capacity(umem.frames() as usize),
        }
    }

    /// The frame address of `d`. Panics if `d` is not a frame of our UMEM
    /// (another queue's or another engine's).
    #[inline(always)]
    fn addr_of(owner: u32, d: Desc) -> u64 {
        assert!(d.owner() == owner, "Desc of another frame area");
        d.addr()
    }

    /// Gives frames back to the kernel. Never blocks (see the type's docs).
    #[inline]
    pub fn give(&mut self, descs: impl ExactSizeIterator<Item = Desc>) {
        let mut descs = descs;
        if descs.len() == 0 && self.backlog.is_empty() {
            return;
        }
        // Fill entries are frame-aligned in aligned-chunk mode; the kernel
        // masks the offset within the frame anyway. Waiting frames go first.
        let (owner, backlog) = (self.owner, &mut self.backlog);
        let put = self.ring.produce(|| {
            backlog
                .pop()
                .or_else(|| descs.next().map(|d| Self::addr_of(owner, d)))
        });
        // What did not fit waits for the next call.
        self.backlog.extend(descs.map(|d| Self::addr_of(owner, d)));
        if put == 0 {
            return;
        }
        self.ring.publish();
        if self.ring.needs_wakeup() {
            socket::wake_rx(self.fd.raw());
        }
    }

    /// Gives frames by address (at start, every frame of the UMEM).
    ///
    /// # Safety
    /// Every address is the start of a frame of this ring's UMEM that the
    /// caller owns (no token names it).
    pub(super) unsafe fn give_addrs(&mut self, addrs: impl ExactSizeIterator<Item = u64>) {
        let owner = self.owner;
        // SAFETY: the caller gives frame addresses of this UMEM (`owner`)
        // that it owns (this fn's contract); an empty frame names no bytes.
        self.give(addrs.map(|addr| unsafe { Desc::new(owner, addr, 0, 0, 0) }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::ring::synthetic;
    use super::*;
    use std::sync::atomic::Ordering;

    /// An fd standing in for the socket (the wakeup on it fails harmlessly).
    fn no_socket() -> Arc<XskFd> {
        let f = std::fs::File::open("/dev/null").unwrap();
        Arc::new(XskFd { fd: f.into() })
    }

    /// A fill ring in plain memory, with a "kernel" that lags in publishing
    /// its consumer index (what made the first version panic under load).
    #[test]
    fn fill_ring_never_overflows_when_the_consumer_lags() {
        let umem = Umem::new(8, 2048).unwrap();
        let (ring, k) = synthetic::ring::<u64, Prod>(8, 0);
        let mut fill = FillRing::new(ring, no_socket(), &umem);
        // SAFETY: frames of this UMEM, owned by the test, no bytes read.
        let d = |addr| unsafe { Desc::new(umem.owner(), addr, 0, 0, 0) };
        fill.give((0..8u32).map(|i| d(i as u64 * 2048)));
        assert_eq!(k.producer().load(Ordering::Relaxed), 8);
        // The kernel has taken frames and handed them back to us, but has
        // not published its consumer index yet: the ring looks full.
        fill.give((8..12u32).map(|i| d(i as u64 * 2048)));
        assert_eq!(
            k.producer().load(Ordering::Relaxed),
            8,
            "nothing written over live entries"
        );
        assert_eq!(fill.backlog.len(), 4);
        // It publishes: the waiting frames go in on the next call.
        k.consumer().store(6, Ordering::Release);
        fill.give(std::iter::empty());
        assert_eq!(k.producer().load(Ordering::Relaxed), 12);
        assert!(fill.backlog.is_empty());
        let mut entries: Vec<u64> = (8..12u32).map(|i| k.read(i)).collect();
        entries.sort();
        assert_eq!(entries, vec![8 * 2048, 9 * 2048, 10 * 2048, 11 * 2048]);
    }

    /// A UMEM with a frame of `payload` at `addr` and its metadata before
    /// it, as the kernel and the steering program leave it, and an RX ring
    /// with that frame's descriptor published.
    fn received(addr: u64, payload: &[u8], hw: u64, tai: u64) -> (RxRing, Arc<Umem>) {
        let umem = Arc::new(Umem::new(8, 2048).unwrap());
        let (base, len) = umem.area();
        assert!(addr >= META_LEN && addr as usize + payload.len() <= len);
        // SAFETY: [addr - 16, addr + payload.len()) lies inside the UMEM
        // (asserted), no other reference to it exists, single-threaded test.
        unsafe {
            let m = base.add((addr - META_LEN) as usize);
            m.cast::<u64>().write_unaligned(hw);
            m.add(8).cast::<u64>().write_unaligned(tai);
            std::ptr::copy_nonoverlapping(payload.as_ptr(), base.add(addr as usize), payload.len());
        }
        let (ring, k) = synthetic::ring::<libc::xdp_desc, Cons>(8, u32::MAX);
        k.write(
            u32::MAX,
            libc::xdp_desc {
                addr,
                len: payload.len() as u32,
                options: 0,
            },
        );
        k.producer().store(0, Ordering::Release);
        (RxRing::new(ring, umem.clone()), umem)
    }

    #[test]
    fn take_reads_the_metadata_and_stamps_the_owner() {
        let (mut rx, umem) = received(2048 + 256, b"hello", 7, 9);
        assert_eq!(rx.pending(), 1);
        let mut out = Vec::new();
        assert_eq!(rx.take(64, &mut out), 1);
        assert_eq!(rx.pending(), 0);
        let d = &out[0];
        use wiretape_timestamp::StampSlot;
        assert_eq!(
            (d.owner(), d.addr(), d.len()),
            (umem.owner(), 2048 + 256, 5)
        );
        assert_eq!((d.hw(), d.xdp_tai(), d.ts), (7, 9, 0));
        assert_eq!(umem.frame(d), b"hello");
        assert_eq!(rx.take(64, &mut out), 0);
        // The metadata was cleared: a later frame in this UMEM frame whose
        // metadata the kernel could not write reads "no stamp", not these.
        let (base, _) = umem.area();
        // SAFETY: the 16 bytes before the frame lie inside the UMEM; the test
        // owns the frame and nothing else reads it now.
        let m =
            unsafe { std::slice::from_raw_parts(base.add((2048 + 256 - META_LEN) as usize), 16) };
        assert!(m.iter().all(|&b| b == 0));
    }

    #[test]
    #[should_panic(expected = "RX descriptor outside the UMEM")]
    fn take_refuses_a_descriptor_outside_the_umem() {
        let (mut rx, _umem) = received(256, b"x", 0, 0);
        // Make the (already written) descriptor overrun the UMEM.
        let (ring, k) = synthetic::ring::<libc::xdp_desc, Cons>(8, 0);
        k.write(
            0,
            libc::xdp_desc {
                addr: 8 * 2048 - 4,
                len: 64,
                options: 0,
            },
        );
        k.producer().store(1, Ordering::Release);
        rx.ring = ring;
        rx.take(64, &mut Vec::new());
    }

    #[test]
    #[should_panic(expected = "Desc of another frame area")]
    fn umem_refuses_a_foreign_desc() {
        let (mut rx, _umem) = received(256, b"abc", 0, 0);
        let other = Umem::new(8, 2048).unwrap();
        let mut out = Vec::new();
        rx.take(64, &mut out);
        other.frame(&out[0]);
    }

    #[test]
    #[should_panic(expected = "Desc of another frame area")]
    fn fill_ring_refuses_a_foreign_desc() {
        let (mut rx, _umem) = received(256, b"abc", 0, 0);
        let other = Umem::new(8, 2048).unwrap();
        let (ring, _k) = synthetic::ring::<u64, Prod>(16, 0);
        let mut fill = FillRing::new(ring, no_socket(), &other);
        let mut out = Vec::new();
        rx.take(64, &mut out);
        fill.give(out.drain(..));
    }

    #[test]
    fn frames_go_back_to_their_own_fill_ring() {
        let (mut rx, umem) = received(2048 + 256, b"abc", 0, 0);
        let (ring, k) = synthetic::ring::<u64, Prod>(16, 0);
        let mut fill = FillRing::new(ring, no_socket(), &umem);
        let mut out = Vec::new();
        rx.take(64, &mut out);
        fill.give(out.drain(..));
        assert_eq!(k.producer().load(Ordering::Acquire), 1);
        assert_eq!(k.read(0), 2048 + 256);
    }
}
