//! AF_XDP sockets: UMEM, fill and RX rings (capture), TX and completion
//! rings ([`Tx`]: replay, gen). All ring and UMEM `unsafe` lives here.
//!
//! Ownership protocol of a UMEM frame (the invariant every block below relies on):
//! 1. At start every frame address is given to the kernel through the fill ring.
//! 2. The kernel writes a received frame into it and publishes a descriptor on
//!    the RX ring. [`RxRing::take`] turns that descriptor into a [`Desc`], a
//!    token that is neither `Clone` nor constructible outside this module: whoever
//!    holds the `Desc` owns the frame, and the kernel does not touch it.
//! 3. [`Umem::frame`] reads the frame through `&Desc`; [`FillRing::give`]
//!    consumes the `Desc` and hands the frame back to the kernel.
//!
//! So a frame is never read while the kernel may write it, and never given back twice.
//! Rings are single-producer/single-consumer: the RX ring's consumer is the
//! poll thread that owns [`RxRing`]; the fill ring's producer is the writer
//! thread that owns [`FillRing`]. The kernel is the other side of each.

mod mmap;
mod socket;
mod tx;

pub use socket::{BindMode, XskFd, XskStats};
pub use tx::{Tx, TxStats};

use mmap::Mmap;
use socket::{setopt, sock};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Bytes of XDP metadata the steering program writes before each frame:
/// `struct wt_meta { u64 hw; u64 tai; }` (see bpf/steer.bpf.c).
pub const META_LEN: u64 = 16;

/// The packet buffer area shared with the kernel.
pub struct Umem {
    map: Mmap,
    frame_size: u32,
    frames: u32,
}

impl Umem {
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// The bytes of a received frame.
    #[inline(always)]
    pub fn frame(&self, d: &Desc) -> &[u8] {
        // Desc values come only from RxRing::take, which checked the bounds.
        // SAFETY: [addr, addr+len) lies inside the mapping (checked in take),
        // and the frame is owned by the holder of `d` (module invariant), so
        // the kernel does not write it while this borrow lives.
        unsafe {
            std::slice::from_raw_parts(self.map.ptr.as_ptr().add(d.addr as usize), d.len as usize)
        }
    }
}

/// A received frame, owned until given back with [`FillRing::give`].
#[derive(Debug)]
pub struct Desc {
    addr: u64,
    len: u32,
    /// The steering program's TAI stamp (0 when it had none).
    tai: u64,
    /// The NIC's stamp (0 when it gave none).
    hw: u64,
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

/// Pointers into one mapped ring.
struct RingPtrs {
    _map: Arc<Mmap>,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut u8,
    mask: u32,
    size: u32,
}

// SAFETY: the pointers point into the Arc'd mapping kept alive by `_map`;
// each ring end is used by one thread at a time (module docs).
unsafe impl Send for RingPtrs {}

impl RingPtrs {
    fn new(map: Arc<Mmap>, off: &libc::xdp_ring_offset, size: u32) -> Self {
        let base = map.ptr.as_ptr();
        // SAFETY: offsets come from XDP_MMAP_OFFSETS for this ring and lie
        // within the mapping of length off.desc + size * entry.
        unsafe {
            RingPtrs {
                producer: base.add(off.producer as usize).cast(),
                consumer: base.add(off.consumer as usize).cast(),
                flags: base.add(off.flags as usize).cast(),
                descs: base.add(off.desc as usize),
                mask: size - 1,
                size,
                _map: map,
            }
        }
    }
    #[inline(always)]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points to the ring's u32 producer index, valid while _map lives.
        unsafe { &*self.producer }
    }
    #[inline(always)]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above, the consumer index.
        unsafe { &*self.consumer }
    }
    #[inline(always)]
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as above, the flags word.
        unsafe { &*self.flags }
    }
}

/// The RX ring, consumer side (the poll thread).
pub struct RxRing {
    ring: RingPtrs,
    umem: Arc<Umem>,
    cached_cons: u32,
}

impl RxRing {
    /// Takes up to `max` received frames, appending them to `out`; returns how many.
    #[inline]
    pub fn take(&mut self, max: usize, out: &mut Vec<Desc>) -> usize {
        let prod = self.ring.producer().load(Ordering::Acquire);
        let avail = prod.wrapping_sub(self.cached_cons) as usize;
        let n = avail.min(max);
        let umem_len = self.umem.map.len as u64;
        let base = self.umem.map.ptr.as_ptr();
        for i in 0..n as u32 {
            let idx = (self.cached_cons.wrapping_add(i) & self.ring.mask) as usize;
            // SAFETY: idx < size; entries are xdp_desc, published by the kernel
            // before the producer index we loaded with Acquire.
            let d = unsafe { std::ptr::read(self.ring.descs.cast::<libc::xdp_desc>().add(idx)) };
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
            // is ours from here on (module invariant).
            let (hw, tai) = unsafe {
                let m = base.add((addr - META_LEN) as usize).cast::<u64>();
                (
                    std::ptr::read_unaligned(m),
                    std::ptr::read_unaligned(m.add(1)),
                )
            };
            out.push(Desc {
                addr,
                len: d.len,
                tai,
                hw,
                ts: 0,
            });
        }
        if n > 0 {
            self.cached_cons = self.cached_cons.wrapping_add(n as u32);
            // Descriptors are copied out: release the ring slots to the kernel.
            self.ring
                .consumer()
                .store(self.cached_cons, Ordering::Release);
        }
        n
    }

    /// Frames waiting in the ring.
    pub fn pending(&self) -> u32 {
        self.ring
            .producer()
            .load(Ordering::Acquire)
            .wrapping_sub(self.cached_cons)
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
    ring: RingPtrs,
    cached_prod: u32,
    fd: RawFd,
    backlog: Vec<u64>,
}

impl FillRing {
    /// Gives frames back to the kernel. Never blocks (see the type's docs).
    #[inline]
    pub fn give(&mut self, descs: impl ExactSizeIterator<Item = Desc>) {
        let n = descs.len() as u32;
        if n == 0 && self.backlog.is_empty() {
            return;
        }
        let cons = self.ring.consumer().load(Ordering::Acquire);
        let mut room = self.ring.size - self.cached_prod.wrapping_sub(cons);
        let mut put = 0u32;
        let place = |addr: u64, put: &mut u32| {
            let idx = (self.cached_prod.wrapping_add(*put) & self.ring.mask) as usize;
            // Fill entries are frame-aligned in aligned-chunk mode; the kernel
            // masks the offset within the frame anyway.
            // SAFETY: idx < size, and the slot is free: `room` counts the
            // free slots from the consumer index loaded above.
            unsafe { self.ring.descs.cast::<u64>().add(idx).write(addr) };
            *put += 1;
        };
        while room > 0 {
            let Some(a) = self.backlog.pop() else { break };
            place(a, &mut put);
            room -= 1;
        }
        for d in descs {
            if room > 0 {
                place(d.addr, &mut put);
                room -= 1;
            } else {
                self.backlog.push(d.addr);
            }
        }
        if put == 0 {
            return;
        }
        self.cached_prod = self.cached_prod.wrapping_add(put);
        self.ring
            .producer()
            .store(self.cached_prod, Ordering::Release);
        if self.ring.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0 {
            // SAFETY: a recvfrom with no buffer on our socket only wakes the
            // driver; errors (EAGAIN) are expected and harmless.
            unsafe {
                libc::recvfrom(
                    self.fd,
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    fn give_addrs(&mut self, addrs: impl ExactSizeIterator<Item = u64>) {
        self.give(addrs.map(|addr| Desc {
            addr,
            len: 0,
            tai: 0,
            hw: 0,
            ts: 0,
        }))
    }
}

/// Socket options.
#[derive(Clone, Copy, Debug)]
pub struct XskConfig {
    /// Frames in the UMEM (a power of two); also the size of the fill and RX rings.
    pub frames: u32,
    /// Bytes per frame: 2048 or 4096.
    pub frame_size: u32,
    /// Try zero-copy first (and fall back to copy mode).
    pub zero_copy: Option<bool>,
}

/// A bound AF_XDP socket, split into its parts.
pub struct Xsk {
    pub fd: Arc<XskFd>,
    pub umem: Arc<Umem>,
    pub rx: RxRing,
    pub fill: FillRing,
    pub mode: BindMode,
}

/// Opens a socket on `ifindex`/`queue`: zero-copy first unless told
/// otherwise, copy mode if the driver refuses (veth always does).
pub fn open(ifindex: u32, queue: u32, cfg: &XskConfig) -> io::Result<(Xsk, Option<io::Error>)> {
    match cfg.zero_copy {
        Some(true) => open_mode(ifindex, queue, cfg, BindMode::ZeroCopy).map(|x| (x, None)),
        Some(false) => open_mode(ifindex, queue, cfg, BindMode::Copy).map(|x| (x, None)),
        None => match open_mode(ifindex, queue, cfg, BindMode::ZeroCopy) {
            Ok(x) => Ok((x, None)),
            Err(zc)
                if matches!(
                    zc.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) | Some(libc::EPROTONOSUPPORT)
                ) =>
            {
                open_mode(ifindex, queue, cfg, BindMode::Copy).map(|x| (x, Some(zc)))
            }
            Err(e) => Err(e),
        },
    }
}

fn open_mode(ifindex: u32, queue: u32, cfg: &XskConfig, mode: BindMode) -> io::Result<Xsk> {
    let (fd, umem_map) = sock::with_umem(cfg.frames, cfg.frame_size)?;
    let raw = fd.as_raw_fd();
    let n = cfg.frames;
    // Twice the frames: see FillRing's docs.
    let fill_size = n * 2;
    setopt(raw, libc::XDP_UMEM_FILL_RING, &fill_size)?;
    // The kernel insists on a completion ring for a UMEM owner even when we never transmit.
    let one: u32 = 64;
    setopt(raw, libc::XDP_UMEM_COMPLETION_RING, &one)?;
    setopt(raw, libc::XDP_RX_RING, &n)?;
    let off = sock::offsets(raw)?;
    let rx_map = sock::map_ring(
        raw,
        off.rx.desc,
        n,
        std::mem::size_of::<libc::xdp_desc>(),
        libc::XDP_PGOFF_RX_RING as u64,
    )?;
    let fill_map = sock::map_ring(
        raw,
        off.fr.desc,
        fill_size,
        8,
        libc::XDP_UMEM_PGOFF_FILL_RING,
    )?;

    let umem = Arc::new(Umem {
        map: umem_map,
        frame_size: cfg.frame_size,
        frames: cfg.frames,
    });
    let rx = RxRing {
        ring: RingPtrs::new(rx_map, &off.rx, n),
        umem: umem.clone(),
        cached_cons: 0,
    };
    let mut fill = FillRing {
        ring: RingPtrs::new(fill_map, &off.fr, fill_size),
        cached_prod: 0,
        fd: raw,
        backlog: Vec::with_capacity(n as usize),
    };
    // Every frame starts out with the kernel.
    fill.give_addrs((0..n as usize).map(|i| i as u64 * cfg.frame_size as u64));

    sock::bind(raw, ifindex, queue, mode)?;
    Ok(Xsk {
        fd: Arc::new(XskFd { fd }),
        umem,
        rx,
        fill,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fill ring in plain memory, with a "kernel" that lags in publishing
    /// its consumer index (what made the first version panic under load).
    #[test]
    fn fill_ring_never_overflows_when_the_consumer_lags() {
        let size = 8u32;
        let map = Arc::new(Mmap::anon(4096).unwrap());
        let off = libc::xdp_ring_offset {
            producer: 0,
            consumer: 64,
            flags: 128,
            desc: 192,
        };
        let mut fill = FillRing {
            ring: RingPtrs::new(map.clone(), &off, size),
            cached_prod: 0,
            fd: -1,
            backlog: Vec::new(),
        };
        let d = |addr| Desc {
            addr,
            len: 0,
            tai: 0,
            hw: 0,
            ts: 0,
        };
        fill.give((0..8u32).map(|i| d(i as u64 * 2048)));
        assert_eq!(fill.ring.producer().load(Ordering::Relaxed), 8);
        // The kernel has taken frames and handed them back to us, but has
        // not published its consumer index yet: the ring looks full.
        fill.give((8..12u32).map(|i| d(i as u64 * 2048)));
        assert_eq!(
            fill.ring.producer().load(Ordering::Relaxed),
            8,
            "nothing written over live entries"
        );
        assert_eq!(fill.backlog.len(), 4);
        // It publishes: the waiting frames go in on the next call.
        fill.ring.consumer().store(6, Ordering::Release);
        fill.give(std::iter::empty());
        assert_eq!(fill.ring.producer().load(Ordering::Relaxed), 12);
        assert!(fill.backlog.is_empty());
        // SAFETY (test): reads the entries just written, inside the mapping.
        let entries: Vec<u64> = (8..12u32)
            .map(|i| unsafe { *fill.ring.descs.cast::<u64>().add((i & 7) as usize) })
            .collect();
        let mut sorted = entries.clone();
        sorted.sort();
        assert_eq!(sorted, vec![8 * 2048, 9 * 2048, 10 * 2048, 11 * 2048]);
    }
}
