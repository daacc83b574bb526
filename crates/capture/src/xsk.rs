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

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Bytes of XDP metadata the steering program writes before each frame:
/// `struct wt_meta { u64 hw; u64 tai; }` (see bpf/steer.bpf.c).
pub const META_LEN: u64 = 16;

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// An anonymous shared mapping, unmapped on drop.
struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory; access to its contents is governed by
// the ring/frame ownership protocol in the module docs, not by this handle.
unsafe impl Send for Mmap {}
// SAFETY: as above.
unsafe impl Sync for Mmap {}

impl Mmap {
    fn anon(len: usize) -> io::Result<Self> {
        let base = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        // Huge pages where the kernel has them reserved; plain pages otherwise.
        for flags in [base | libc::MAP_HUGETLB, base] {
            // SAFETY: a fresh anonymous mapping; no existing memory is affected.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    flags,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                return Ok(Mmap {
                    ptr: NonNull::new(p.cast()).unwrap(),
                    len,
                });
            }
        }
        Err(io::Error::last_os_error())
    }

    fn ring(fd: RawFd, len: usize, pgoff: u64) -> io::Result<Self> {
        // SAFETY: maps the socket's ring at the offset the kernel defines for
        // it; the length comes from the kernel's own mmap offsets + ring size.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap {
            ptr: NonNull::new(p.cast()).unwrap(),
            len,
        })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what mmap returned; all users hold an Arc to
        // this mapping, so none is left when it drops.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The packet buffer area shared with the kernel.
pub struct Umem {
    /// Tags the descriptors of this UMEM (see [`Desc`]).
    owner: u32,
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
        // Desc values of this UMEM come only from RxRing::take, which
        // checked the bounds; a Desc of another engine is refused here.
        assert_eq!(d.owner(), self.owner, "a frame of another queue");
        // SAFETY: [addr, addr+len) lies inside the mapping (checked in take),
        // and the frame is owned by the holder of `d` (module invariant), so
        // the kernel does not write it while this borrow lives.
        unsafe {
            std::slice::from_raw_parts(self.map.ptr.as_ptr().add(d.addr() as usize), d.len() as usize)
        }
    }
}

pub use crate::desc::Desc;

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
            out.push(Desc::new(self.umem.owner, addr, d.len, tai, hw));
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
    owner: u32,
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
            // Only frames of this UMEM go back to its kernel ring.
            assert_eq!(d.owner(), self.owner, "a frame of another queue");
            if room > 0 {
                place(d.addr(), &mut put);
                room -= 1;
            } else {
                self.backlog.push(d.addr());
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
        let owner = self.owner;
        self.give(addrs.map(|addr| Desc::new(owner, addr, 0, 0, 0)))
    }
}

/// Kernel drop counters of one socket (XDP_STATISTICS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Frames dropped because no fill-ring buffer was available or the frame
    /// did not fit a UMEM frame.
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
}

/// How a socket ended up bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindMode {
    ZeroCopy,
    Copy,
}

/// The socket handle: kept by the engine for statistics after the rings have
/// moved to their threads.
pub struct XskFd {
    fd: OwnedFd,
}

impl XskFd {
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn stats(&self) -> io::Result<XskStats> {
        let s = sock::statistics(self.raw())?;
        Ok(XskStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
        })
    }

    /// Waits up to `timeout_ms` for received frames.
    pub fn wait_rx(&self, timeout_ms: i32) {
        let mut p = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, timeout_ms) };
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

/// Steps every AF_XDP socket takes, RX or TX.
mod sock {
    use super::*;

    /// A fresh AF_XDP socket with a UMEM of `frames` x `frame_size` registered.
    pub(super) fn with_umem(frames: u32, frame_size: u32) -> io::Result<(OwnedFd, Mmap)> {
        assert!(
            frames.is_power_of_two(),
            "frame count must be a power of two"
        );
        // SAFETY: plain socket(2); the returned fd is owned right away.
        let raw =
            cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: raw is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = frames as usize * frame_size as usize;
        let umem = Mmap::anon(len)?;
        let reg = libc::xdp_umem_reg {
            addr: umem.ptr.as_ptr() as u64,
            len: len as u64,
            chunk_size: frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setopt(raw, libc::XDP_UMEM_REG, &reg)?;
        Ok((fd, umem))
    }

    /// Where the kernel put each ring in the socket's mmap space.
    pub(super) fn offsets(raw: RawFd) -> io::Result<libc::xdp_mmap_offsets> {
        // SAFETY: plain data, zero is valid.
        let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
        let mut olen = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most olen bytes into off.
        cvt(unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_MMAP_OFFSETS,
                (&mut off as *mut libc::xdp_mmap_offsets).cast(),
                &mut olen,
            )
        })?;
        Ok(off)
    }

    /// Maps a ring of `entries` entries of `entry` bytes whose descriptors
    /// start at `desc` in the mapping at page offset `pgoff`.
    pub(super) fn map_ring(
        raw: RawFd,
        desc: u64,
        entries: u32,
        entry: usize,
        pgoff: u64,
    ) -> io::Result<Arc<Mmap>> {
        Ok(Arc::new(Mmap::ring(
            raw,
            desc as usize + entries as usize * entry,
            pgoff,
        )?))
    }

    /// Binds to `ifindex`/`queue` in `mode`, with need_wakeup.
    pub(super) fn bind(raw: RawFd, ifindex: u32, queue: u32, mode: BindMode) -> io::Result<()> {
        let flags = libc::XDP_USE_NEED_WAKEUP
            | match mode {
                BindMode::ZeroCopy => libc::XDP_ZEROCOPY,
                BindMode::Copy => libc::XDP_COPY,
            };
        let sa = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: bind with a valid sockaddr_xdp and its size.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sa as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        })
        .map(|_| ())
    }

    /// The socket's XDP_STATISTICS.
    pub(super) fn statistics(raw: RawFd) -> io::Result<libc::xdp_statistics> {
        // SAFETY: xdp_statistics is plain data (all-zero is valid).
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `s`.
        cvt(unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut s as *mut libc::xdp_statistics).cast(),
                &mut len,
            )
        })?;
        Ok(s)
    }
}

fn setopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: passes a pointer to a live T and its exact size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
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
        owner: crate::desc::new_owner(),
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
        owner: umem.owner,
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

/// A transmit-only AF_XDP socket (copy mode on veth): its own UMEM, a TX
/// ring and a completion ring. Used by `wiretape replay` and `wiretape gen`.
///
/// Ownership protocol of a TX UMEM frame: a frame address is either in
/// `free` (ours: [`Tx::frame_mut`] may write it) or posted on the TX ring
/// (the kernel's, until its address comes back on the completion ring, when
/// [`Tx::reap`] returns it to `free`). So a frame is never written while
/// the kernel may read it.
pub struct Tx {
    fd: OwnedFd,
    umem: Mmap,
    frame_size: u32,
    tx: RingPtrs,
    comp: RingPtrs,
    /// TX ring: our producer index (published by [`Tx::flush`]).
    tx_prod: u32,
    /// Published producer index.
    tx_published: u32,
    comp_cons: u32,
    free: Vec<u64>,
    /// Frames posted and not yet completed.
    pub outstanding: u32,
    pub mode: BindMode,
}

/// TX counters of a socket (XDP_STATISTICS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    pub tx_invalid_descs: u64,
    pub tx_ring_empty_descs: u64,
}

impl Tx {
    /// Opens a TX socket on `ifindex`/`queue` with `frames` UMEM frames of
    /// `frame_size` bytes (copy mode; zero-copy when `zero_copy` and the
    /// driver has it).
    pub fn open(
        ifindex: u32,
        queue: u32,
        frames: u32,
        frame_size: u32,
        zero_copy: bool,
    ) -> io::Result<Tx> {
        let (fd, umem) = sock::with_umem(frames, frame_size)?;
        let raw = fd.as_raw_fd();
        // A UMEM owner must have both rings; the fill ring stays empty.
        let small: u32 = 64;
        setopt(raw, libc::XDP_UMEM_FILL_RING, &small)?;
        setopt(raw, libc::XDP_UMEM_COMPLETION_RING, &frames)?;
        setopt(raw, libc::XDP_TX_RING, &frames)?;
        let off = sock::offsets(raw)?;
        let tx_map = sock::map_ring(
            raw,
            off.tx.desc,
            frames,
            std::mem::size_of::<libc::xdp_desc>(),
            libc::XDP_PGOFF_TX_RING as u64,
        )?;
        let comp_map = sock::map_ring(
            raw,
            off.cr.desc,
            frames,
            8,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        )?;
        let mode = if zero_copy {
            BindMode::ZeroCopy
        } else {
            BindMode::Copy
        };
        sock::bind(raw, ifindex, queue, mode)?;
        Ok(Tx {
            fd,
            umem,
            frame_size,
            tx: RingPtrs::new(tx_map, &off.tx, frames),
            comp: RingPtrs::new(comp_map, &off.cr, frames),
            tx_prod: 0,
            tx_published: 0,
            comp_cons: 0,
            free: (0..frames as u64)
                .rev()
                .map(|i| i * frame_size as u64)
                .collect(),
            outstanding: 0,
            mode,
        })
    }

    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Free frames (ours to fill).
    pub fn free_frames(&self) -> usize {
        self.free.len()
    }

    /// Copies `frame` into a free UMEM frame and posts it on the TX ring
    /// (visible to the kernel at the next [`Tx::flush`]). False when no
    /// frame is free (reap first) or `frame` is longer than a UMEM frame.
    #[inline]
    pub fn post(&mut self, frame: &[u8]) -> bool {
        self.post_with(frame.len(), |dst| dst.copy_from_slice(frame))
    }

    /// Posts a frame of `len` bytes written by `fill` into the UMEM frame.
    #[inline]
    pub fn post_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> bool {
        if len > self.frame_size as usize {
            return false;
        }
        let Some(addr) = self.free.pop() else {
            return false;
        };
        // SAFETY: addr is a free frame (module protocol: not on the TX ring,
        // so the kernel does not read it); [addr, addr+len) lies inside the
        // UMEM since addr = k * frame_size < UMEM length and len <= frame_size.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(self.umem.ptr.as_ptr().add(addr as usize), len)
        };
        fill(dst);
        let idx = (self.tx_prod & self.tx.mask) as usize;
        let d = libc::xdp_desc {
            addr,
            len: len as u32,
            options: 0,
        };
        // SAFETY: idx < size, and the slot is free: at most `frames` frames
        // exist, and each posted one holds one slot until completed, so the
        // ring (sized `frames`) cannot overflow.
        unsafe { self.tx.descs.cast::<libc::xdp_desc>().add(idx).write(d) };
        self.tx_prod = self.tx_prod.wrapping_add(1);
        self.outstanding += 1;
        true
    }

    /// Publishes posted frames and wakes the kernel to send them. Returns
    /// Err only for errors other than "busy, try again" (EAGAIN, EBUSY,
    /// ENOBUFS: the device queue was full; the frames stay posted).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.tx_prod != self.tx_published {
            self.tx.producer().store(self.tx_prod, Ordering::Release);
            self.tx_published = self.tx_prod;
        }
        if self.outstanding == 0 {
            return Ok(());
        }
        if self.tx.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP == 0
            && self.mode == BindMode::ZeroCopy
        {
            return Ok(());
        }
        // SAFETY: a zero-length sendto on our socket only kicks transmission.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                | Some(libc::EINTR) => {}
                _ => return Err(e),
            }
        }
        Ok(())
    }

    /// Takes completed frames back; returns how many were sent since the last call.
    #[inline]
    pub fn reap(&mut self) -> u32 {
        let prod = self.comp.producer().load(Ordering::Acquire);
        let n = prod.wrapping_sub(self.comp_cons);
        for i in 0..n {
            let idx = (self.comp_cons.wrapping_add(i) & self.comp.mask) as usize;
            // SAFETY: idx < size; the entry was published before the producer
            // index loaded with Acquire.
            let addr = unsafe { self.comp.descs.cast::<u64>().add(idx).read() };
            // Back to us: the kernel is done with the frame (module protocol).
            self.free.push(addr - addr % self.frame_size as u64);
        }
        if n > 0 {
            self.comp_cons = self.comp_cons.wrapping_add(n);
            self.comp
                .consumer()
                .store(self.comp_cons, Ordering::Release);
            self.outstanding -= n;
        }
        n
    }

    /// Waits up to `timeout_ms` for the socket to take more (POLLOUT).
    pub fn wait(&self, timeout_ms: i32) {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, timeout_ms) };
    }

    pub fn stats(&self) -> io::Result<TxStats> {
        let s = sock::statistics(self.fd.as_raw_fd())?;
        Ok(TxStats {
            tx_invalid_descs: s.tx_invalid_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }
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
            owner: 7,
            cached_prod: 0,
            fd: -1,
            backlog: Vec::new(),
        };
        let d = |addr| Desc::new(7, addr, 0, 0, 0);
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
