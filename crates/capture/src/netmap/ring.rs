//! All of the netmap engine's `unsafe` memory access: the shared region, our
//! end of an RX ring (the poll thread), the buffers (the writer thread), and
//! the kernel's end of a synthetic ring (tests and benches).
//!
//! The region is one mapping laid out by the kernel (`netmap_mem2.c`): the
//! `netmap_if` pool, then the ring pool, then the buffer pool. A descriptor's
//! `netmap_if` is at the offset `NETMAP_REQ_REGISTER` returns; its
//! `ring_ofs[]` give each bound ring's offset from the `netmap_if`; a ring's
//! `buf_ofs` gives the buffer pool's offset from the ring; buffer `i` is at
//! `ring + buf_ofs + i * nr_buf_size` (`NETMAP_IF`, `NETMAP_RXRING`,
//! `NETMAP_BUF` of `netmap_user.h`). Every offset read from the region is
//! checked against the mapping before it is used.
//!
//! Ownership protocol of an RX ring (netmap(4); every block below relies on it):
//! 1. Slots and buffers in `[head, tail)` belong to user space, the others
//!    to the kernel. The kernel writes a frame into a slot's buffer, sets the
//!    slot's `len`/`flags`, then moves `tail` past it (in a real kernel during
//!    our `NIOCRXSYNC`/`poll`; a synthetic kernel stores `tail` with Release,
//!    and we load it with Acquire).
//! 2. [`RxRing::desc`] turns a user-owned slot into a [`Desc`] (owner id of
//!    the ring; buffer index, slot and the number of slots skipped since the
//!    previous token in `addr`), after checking the buffer lies inside the
//!    mapping. The token goes to the writer thread, which
//!    reads the bytes through [`Buffers::frame`].
//! 3. The writer gives tokens back in order (checked exactly: each token's
//!    slot must be the one after the last given back plus its skip, so a
//!    token given back early panics instead of freeing an earlier, still
//!    held, slot); the poll thread then moves `head` (and `cur`) past their slots ([`RxRing::publish`], Release):
//!    only then may the kernel reuse the slot and its buffer. So a buffer is
//!    never written while a token names it.
//!
//! One [`RxRing`] per ring (the engine opens each ring once), one
//! [`KernelRing`] per synthetic ring ([`build_synthetic`] makes each once).

use super::layout::*;
use crate::desc::{self, Desc};
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::sync::Arc;

/// A mapping of the shared region, unmapped on drop.
pub(crate) struct Region {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the region is plain shared memory; who may touch which bytes is
// governed by the ring protocol of the module docs, not by this handle.
unsafe impl Send for Region {}
// SAFETY: as above; shared accesses to words both sides write are atomic.
unsafe impl Sync for Region {}

impl Region {
    /// Maps the `len` bytes of the netmap region of `fd` (`nr_memsize`).
    ///
    /// # Safety
    /// `fd` is a `/dev/netmap` descriptor registered to a port whose region
    /// is `len` bytes: its pages are shared with the kernel only, which
    /// follows the ring protocol.
    pub(crate) unsafe fn map(fd: RawFd, len: usize) -> io::Result<Region> {
        // SAFETY: a new shared mapping of the netmap device (the caller's
        // contract); no existing memory is affected. Not populated: the
        // region can be hundreds of MiB and is faulted in as used.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Region {
            ptr: NonNull::new(p.cast()).expect("mmap returned NULL"),
            len,
        })
    }

    /// Fresh zeroed shared memory of `len` bytes (page-aligned): a
    /// synthetic region.
    fn anon(len: usize) -> io::Result<Region> {
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Region {
            ptr: NonNull::new(p.cast()).expect("mmap returned NULL"),
            len,
        })
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether `[off, off + size)` lies in the mapping, `off` aligned to `align`.
    fn fits(&self, off: usize, size: usize, align: usize) -> bool {
        off.is_multiple_of(align) && off.checked_add(size).is_some_and(|e| e <= self.len)
    }

    /// The u32 at `off`, accessed atomically (None: outside or misaligned).
    fn u32_at(&self, off: usize) -> Option<&AtomicU32> {
        if !self.fits(off, 4, 4) {
            return None;
        }
        // SAFETY: inside the mapping and 4-aligned (checked; the mapping is
        // page-aligned); the mapping lives as long as &self. Words both
        // sides write are only accessed atomically.
        Some(unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicU32>() })
    }

    /// The i64 at `off`, accessed atomically (None: outside or misaligned).
    fn i64_at(&self, off: usize) -> Option<&AtomicI64> {
        if !self.fits(off, 8, 8) {
            return None;
        }
        // SAFETY: as in u32_at, 8-aligned.
        Some(unsafe { &*self.ptr.as_ptr().add(off).cast::<AtomicI64>() })
    }

    fn u16_at(&self, off: usize) -> Option<u16> {
        // The u32 holding it (little- or big-endian alike: take its bytes).
        let word = self.u32_at(off & !3)?.load(Ordering::Relaxed).to_ne_bytes();
        let i = off & 3;
        (i <= 2).then(|| u16::from_ne_bytes([word[i], word[i + 1]]))
    }

    fn load_u32(&self, off: usize) -> Option<u32> {
        self.u32_at(off).map(|a| a.load(Ordering::Relaxed))
    }

    fn load_i64(&self, off: usize) -> Option<i64> {
        self.i64_at(off).map(|a| a.load(Ordering::Relaxed))
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what mmap returned; every user of the memory
        // (ring ends, buffer readers) holds an Arc<Region>, so none is left.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Why a region does not hold a usable RX ring where it should.
#[derive(Debug)]
pub(crate) struct BadLayout(pub(crate) String);

/// What [`RxRing::open`] found in the region.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingInfo {
    /// Slots in the ring.
    pub(crate) slots: u32,
    /// Bytes per buffer.
    pub(crate) buf_size: u32,
    /// The interface's NIC RX rings (`ni_rx_rings`; read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) rx_rings: u32,
}

/// The buffers of one RX ring, as the writer thread reads them: bounds
/// fixed at open, tokens checked by owner id.
#[derive(Clone)]
pub(crate) struct Buffers {
    region: Arc<Region>,
    /// Offset of buffer 0 in the region.
    base: usize,
    size: u32,
    /// Buffers that lie wholly inside the mapping: indices below this.
    count: u32,
    /// This ring's owner id, stamped into its tokens.
    owner: u32,
}

impl Buffers {
    /// The owner id of this ring's tokens.
    #[inline(always)]
    pub(crate) fn owner(&self) -> u32 {
        self.owner
    }

    /// The bytes of a frame handed out by this ring. Panics for a token of
    /// another ring or engine.
    #[inline(always)]
    pub(crate) fn frame(&self, d: &Desc) -> &[u8] {
        assert!(d.owner() == self.owner, "Desc of another frame area");
        let idx = d.addr() as u32;
        // Tokens with our owner id come only from RxRing::desc, which
        // checked idx < count and len <= size (the crate contract of
        // Desc::new), so this stays inside the mapping.
        debug_assert!(idx < self.count && d.len() <= self.size);
        let off = self.base + idx as usize * self.size as usize;
        // SAFETY: [off, off + len) lies inside the mapping (checked when the
        // token was made), and the holder of `d` owns the buffer: the kernel
        // does not write it until the token is given back and head passes
        // its slot (module protocol).
        unsafe { std::slice::from_raw_parts(self.region.ptr.as_ptr().add(off), d.len() as usize) }
    }

    /// The bytes of buffer `idx` (`len` of them), None when they are not
    /// inside the mapping.
    #[inline(always)]
    fn bytes(&self, idx: u32, len: u32) -> Option<&[u8]> {
        if idx >= self.count || len > self.size {
            return None;
        }
        let off = self.base + idx as usize * self.size as usize;
        // SAFETY: inside the mapping (checked); the caller reads only the
        // buffers of user-owned slots (see RxRing::frame).
        Some(unsafe { std::slice::from_raw_parts(self.region.ptr.as_ptr().add(off), len as usize) })
    }
}

/// A slot as read: buffer index, length, flags.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slot {
    pub(crate) buf_idx: u32,
    pub(crate) len: u32,
    pub(crate) flags: u16,
}

/// Our end of one RX ring (the poll thread).
pub(crate) struct RxRing {
    region: Arc<Region>,
    /// Offset of the `netmap_ring`.
    ring: usize,
    slots: u32,
    bufs: Buffers,
}

impl RxRing {
    /// Our end of NIC RX ring `index` of the descriptor whose `netmap_if`
    /// is at `nifp` in `region`, after checking every offset on the way. Asks
    /// the kernel to stamp each sync (`NR_TIMESTAMP`).
    ///
    /// # Safety
    /// `region` is the region of a descriptor bound to that ring (the kernel
    /// or a synthetic kernel is the other end and follows the ring protocol),
    /// and this is the only `RxRing` over that ring.
    pub(crate) unsafe fn open(
        region: Arc<Region>,
        nifp: usize,
        index: u32,
    ) -> Result<(RxRing, RingInfo), BadLayout> {
        let bad = |what: &str| BadLayout(format!("ring {index}: {what}"));
        let r = &region;
        let field = |off: usize| {
            r.load_u32(nifp + off)
                .ok_or_else(|| bad("netmap_if outside the region"))
        };
        let (tx, htx, rx) = (
            field(IF_TX_RINGS)?,
            field(IF_HOST_TX_RINGS)?,
            field(IF_RX_RINGS)?,
        );
        if index >= rx {
            return Err(bad(&format!("the port has {rx} RX rings")));
        }
        // NETMAP_RXRING(nifp, index)
        let slot_of_ofs = (tx as usize + htx as usize + index as usize) * 8;
        let ofs = r
            .load_i64(nifp + IF_RING_OFS + slot_of_ofs)
            .ok_or_else(|| bad("ring_ofs outside the region"))?;
        if ofs == 0 {
            return Err(bad("not bound to this descriptor (ring_ofs is 0)"));
        }
        let ring = (nifp as i64)
            .checked_add(ofs)
            .filter(|&o| o >= 0 && r.fits(o as usize, RING_SLOTS, 128))
            .ok_or_else(|| bad("netmap_ring outside the region"))? as usize;
        let slots = r.load_u32(ring + RING_NUM_SLOTS).unwrap_or(0);
        let buf_size = r.load_u32(ring + RING_BUF_SIZE).unwrap_or(0);
        // A token packs the slot number in 16 bits (netmap rings have at
        // most 8176 slots: 32 pages of ring pool object).
        if !(2..=0xffff).contains(&slots) || !r.fits(ring + RING_SLOTS, slots as usize * 16, 8) {
            return Err(bad(&format!("{slots} slots do not fit the region")));
        }
        if r.u16_at(ring + RING_DIR) != Some(1) {
            return Err(bad("not an RX ring"));
        }
        if !(64..=65536).contains(&buf_size) {
            return Err(bad(&format!("buffer size {buf_size}")));
        }
        let buf_ofs = r.load_i64(ring + RING_BUF_OFS).unwrap_or(i64::MIN);
        let base = (ring as i64)
            .checked_add(buf_ofs)
            .filter(|&b| b >= 0 && (b as usize) < r.len())
            .ok_or_else(|| bad("buffer pool outside the region"))? as usize;
        let count = ((r.len() - base) / buf_size as usize).min(u32::MAX as usize) as u32;
        for (what, off) in [("head", RING_HEAD), ("cur", RING_CUR), ("tail", RING_TAIL)] {
            if r.load_u32(ring + off).is_none_or(|v| v >= slots) {
                return Err(bad(&format!("{what} outside the ring")));
            }
        }
        let flags = r
            .u32_at(ring + RING_FLAGS)
            .expect("checked with the header");
        flags.fetch_or(NR_TIMESTAMP, Ordering::Relaxed);
        let bufs = Buffers {
            region: region.clone(),
            base,
            size: buf_size,
            count,
            owner: desc::new_owner(),
        };
        let info = RingInfo {
            slots,
            buf_size,
            rx_rings: rx,
        };
        Ok((
            RxRing {
                region,
                ring,
                slots,
                bufs,
            },
            info,
        ))
    }

    /// Slots in the ring.
    #[inline(always)]
    pub(crate) fn slots(&self) -> u32 {
        self.slots
    }

    /// The ring's buffers, for the writer thread.
    pub(crate) fn buffers(&self) -> Buffers {
        self.bufs.clone()
    }

    #[inline(always)]
    fn word(&self, off: usize) -> &AtomicU32 {
        self.region
            .u32_at(self.ring + off)
            .expect("checked at open")
    }

    /// `head`, `cur` and `tail` as the ring has them now.
    pub(crate) fn pointers(&self) -> (u32, u32, u32) {
        (
            self.word(RING_HEAD).load(Ordering::Relaxed),
            self.word(RING_CUR).load(Ordering::Relaxed),
            self.word(RING_TAIL).load(Ordering::Acquire),
        )
    }

    /// The kernel's `tail`: slots before it (from `head`) are ours, with
    /// their frames written (Acquire).
    #[inline(always)]
    pub(crate) fn tail(&self) -> u32 {
        self.word(RING_TAIL).load(Ordering::Acquire)
    }

    /// Gives the slots before `head` back to the kernel and sets the wakeup
    /// point `cur` (`head <= cur <= tail`). `cur` first, as netmap's own
    /// CSB writer does, so `head` is never seen ahead of `cur`.
    #[inline(always)]
    pub(crate) fn publish(&self, head: u32, cur: u32) {
        debug_assert!(head < self.slots && cur < self.slots);
        self.word(RING_CUR).store(cur, Ordering::Release);
        self.word(RING_HEAD).store(head, Ordering::Release);
    }

    /// `ring->ts`, the time of the last sync, in ns since the epoch (0 when
    /// the kernel did not stamp it).
    #[inline(always)]
    pub(crate) fn ts_ns(&self) -> u64 {
        let sec = self.region.load_i64(self.ring + RING_TS).unwrap_or(0);
        let usec = self.region.load_i64(self.ring + RING_TS + 8).unwrap_or(0);
        if sec <= 0 || !(0..1_000_000).contains(&usec) {
            return 0;
        }
        sec as u64 * 1_000_000_000 + usec as u64 * 1000
    }

    /// Slot `i` (< slots), which must be ours (between `head` and `tail`).
    #[inline(always)]
    pub(crate) fn slot(&self, i: u32) -> Slot {
        assert!(i < self.slots, "slot index outside the ring");
        let off = self.ring + RING_SLOTS + i as usize * 16;
        // SAFETY: the slot lies inside the mapping (checked at open: slots *
        // 16 bytes from RING_SLOTS) and is 8-aligned; it is ours (the
        // caller's contract: before tail), so the kernel wrote it before
        // publishing tail, which we loaded with Acquire, and does not write
        // it while it is ours.
        let s = unsafe {
            self.region
                .ptr
                .as_ptr()
                .add(off)
                .cast::<NetmapSlot>()
                .read()
        };
        Slot {
            buf_idx: s.buf_idx,
            len: s.len as u32,
            flags: s.flags,
        }
    }

    /// The bytes of a slot that is ours (to run a filter on it before it
    /// becomes a token); None when its buffer is not inside the mapping.
    #[inline(always)]
    pub(crate) fn frame(&self, s: Slot) -> Option<&[u8]> {
        self.bufs.bytes(s.buf_idx, s.len)
    }

    /// The token for slot `i` (ours, holding `s`), `skip` slots after the
    /// slot of the token handed out before it (slots skipped in between:
    /// filtered, fragmented, bad); None when its buffer is not inside the
    /// mapping or it is empty (a kernel bug: counted, never read).
    #[inline(always)]
    pub(crate) fn desc(&self, i: u32, s: Slot, skip: u32) -> Option<Desc> {
        if s.buf_idx >= self.bufs.count || s.len > self.bufs.size || s.len == 0 {
            return None;
        }
        debug_assert!(i < self.slots && skip < self.slots);
        let addr = (skip as u64) << 48 | (i as u64) << 32 | s.buf_idx as u64;
        // SAFETY: our owner id; the buffer lies inside the mapping (checked
        // above) and is ours until the token is given back (module protocol).
        Some(unsafe { Desc::new(self.bufs.owner, addr, s.len, 0, 0) })
    }
}

/// The slot a token came from.
#[inline(always)]
pub(crate) fn slot_of(d: &Desc) -> u32 {
    (d.addr() >> 32) as u32 & 0xffff
}

/// Slots skipped between the token handed out before `d` and `d`.
#[inline(always)]
pub(crate) fn skip_of(d: &Desc) -> u32 {
    (d.addr() >> 48) as u32
}

/// How [`build_synthetic`] lays a region out.
#[derive(Clone, Debug)]
pub struct SyntheticSpec {
    /// The interface name written into each `netmap_if`.
    pub name: String,
    /// NIC RX rings (one descriptor, `netmap_if` and ring each).
    pub rings: u32,
    /// Slots per ring (any number >= 2, as netmap allows).
    pub slots: u32,
    /// Bytes per buffer (netmap's default is 2048).
    pub buf_size: u32,
}

/// Size of one `netmap_if` object in the kernel's default if pool.
const IF_OBJ: usize = 1024;
const PAGE: usize = 4096;

fn round_up(v: usize, to: usize) -> usize {
    v.div_ceil(to) * to
}

/// One ring of a synthetic region: our end (opened through the same checks
/// as a real ring), what it holds, and the kernel's end.
pub(crate) type SyntheticRing = (RxRing, RingInfo, KernelRing);

/// Lays out a region as `netmap_mem2.c` does: an if pool (one 1 KiB
/// `netmap_if` per descriptor), a ring pool (one ring per object, page-
/// rounded), a buffer pool (buffers 0 and 1 reserved, as the kernel keeps
/// them). `ring_ofs` is relative to each `netmap_if` (0 for rings the
/// descriptor is not bound to), `buf_ofs` relative to each ring. Each ring's
/// slots get buffers in reverse order, so that reading by slot number
/// instead of `buf_idx` would read the wrong frame. Each ring is opened
/// once, here, on both ends.
pub(crate) fn build_synthetic(spec: &SyntheticSpec) -> io::Result<Vec<SyntheticRing>> {
    let (rings, slots, bsize) = (
        spec.rings as usize,
        spec.slots as usize,
        spec.buf_size as usize,
    );
    assert!(rings >= 1 && (2..=0xffff).contains(&slots) && (64..=65536).contains(&bsize));
    let (tx, htx, hrx) = (rings, 1usize, 1usize);
    let n_ofs = tx + htx + rings + hrx;
    assert!(
        IF_RING_OFS + n_ofs * 8 <= IF_OBJ,
        "too many rings for one netmap_if"
    );
    let if_total = round_up(rings * IF_OBJ, PAGE);
    let ring_obj = round_up(RING_SLOTS + slots * 16, PAGE);
    let ring_total = rings * ring_obj;
    let nbufs = 2 + rings * slots;
    let len = round_up(if_total + ring_total + nbufs * bsize, PAGE);
    let region = Arc::new(Region::anon(len)?);
    let buf_pool = if_total + ring_total;
    let base = region.ptr.as_ptr();
    let mut out = Vec::new();
    for q in 0..rings {
        let nifp = q * IF_OBJ;
        let ring = if_total + q * ring_obj;
        // SAFETY: fresh memory of `len` bytes that nothing else uses yet;
        // every write below is inside it (nifp + IF_OBJ <= if_total, ring +
        // ring_obj <= buf_pool <= len) and aligned for its type.
        unsafe {
            let w32 = |off: usize, v: u32| base.add(off).cast::<u32>().write(v);
            let w64 = |off: usize, v: i64| base.add(off).cast::<i64>().write(v);
            let name = spec.name.as_bytes();
            let n = name.len().min(15);
            std::ptr::copy_nonoverlapping(name.as_ptr(), base.add(nifp + IF_NAME), n);
            w32(nifp + 16, NETMAP_API as u32);
            w32(nifp + IF_TX_RINGS, tx as u32);
            w32(nifp + IF_RX_RINGS, rings as u32);
            w32(nifp + IF_HOST_TX_RINGS, htx as u32);
            w32(nifp + IF_HOST_RX_RINGS, hrx as u32);
            for k in 0..n_ofs {
                let ofs = if k == tx + htx + q {
                    ring as i64 - nifp as i64
                } else {
                    0
                };
                w64(nifp + IF_RING_OFS + k * 8, ofs);
            }
            w64(ring + RING_BUF_OFS, buf_pool as i64 - ring as i64);
            w32(ring + RING_NUM_SLOTS, slots as u32);
            w32(ring + RING_BUF_SIZE, bsize as u32);
            // ringid (u16) and dir (u16) share a word.
            w32(
                ring + RING_RINGID,
                u32::from_ne_bytes({
                    let mut b = [0u8; 4];
                    b[..2].copy_from_slice(&(q as u16).to_ne_bytes());
                    b[2..].copy_from_slice(&1u16.to_ne_bytes());
                    b
                }),
            );
            for i in 0..slots {
                let s = NetmapSlot {
                    buf_idx: (2 + q * slots + (slots - 1 - i)) as u32,
                    len: 0,
                    flags: 0,
                    ptr: 0,
                };
                base.add(ring + RING_SLOTS + i * 16)
                    .cast::<NetmapSlot>()
                    .write(s);
            }
        }
        let bufs = (0..slots)
            .map(|i| (2 + q * slots + (slots - 1 - i)) as u32)
            .collect();
        let kernel = KernelRing {
            region: region.clone(),
            ring,
            slots: slots as u32,
            buf_base: buf_pool,
            buf_size: bsize as u32,
            bufs,
            hwtail: 0,
        };
        // SAFETY: the other end is `kernel`, which follows the protocol, and
        // this is the only RxRing over ring q.
        let (rx, info) = unsafe { RxRing::open(region.clone(), nifp, q as u32) }
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
        out.push((rx, info, kernel));
    }
    Ok(out)
}

/// The kernel's end of one synthetic RX ring: what a test or bench plays.
/// It fills the slots the user gave back (`[tail, head - 1)`, as netmap
/// leaves one slot empty), writes frames into their buffers, and publishes
/// them by moving `tail` (Release); it reads `head` with Acquire.
pub struct KernelRing {
    region: Arc<Region>,
    ring: usize,
    slots: u32,
    buf_base: usize,
    buf_size: u32,
    /// Each slot's buffer, as the kernel knows it (a slot's `buf_idx` is
    /// rewritten from here on every fill).
    bufs: Vec<u32>,
    /// The next slot to fill (ahead of the published tail until `publish`).
    hwtail: u32,
}

impl KernelRing {
    fn word(&self, off: usize) -> &AtomicU32 {
        self.region
            .u32_at(self.ring + off)
            .expect("inside the region")
    }

    /// Slots in the ring.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Bytes per buffer.
    pub fn buf_size(&self) -> u32 {
        self.buf_size
    }

    /// The user's `head` (Acquire: the buffers before it are read).
    pub fn head(&self) -> u32 {
        self.word(RING_HEAD).load(Ordering::Acquire)
    }

    /// The user's `cur`.
    pub fn cur(&self) -> u32 {
        self.word(RING_CUR).load(Ordering::Acquire)
    }

    /// The published `tail`.
    pub fn tail(&self) -> u32 {
        self.word(RING_TAIL).load(Ordering::Relaxed)
    }

    /// Slots the kernel may fill now.
    pub fn room(&self) -> u32 {
        let head = self.head();
        (head + self.slots - 1 - self.hwtail) % self.slots
    }

    /// Filled, not yet published.
    pub fn unpublished(&self) -> u32 {
        (self.hwtail + self.slots - self.tail()) % self.slots
    }

    /// Writes `frame` into the next free slot (flags: `more` sets
    /// `NS_MOREFRAG`); false when there is no room. Not visible to the user
    /// until [`KernelRing::publish`]. Panics if `frame` is larger than a buffer.
    pub fn push(&mut self, frame: &[u8], more: bool) -> bool {
        assert!(frame.len() <= self.buf_size as usize && frame.len() <= u16::MAX as usize);
        if self.room() == 0 {
            return false;
        }
        let i = self.hwtail;
        let idx = self.bufs[i as usize];
        let off = self.buf_base + idx as usize * self.buf_size as usize;
        assert!(off + self.buf_size as usize <= self.region.len());
        // SAFETY: slot i is the kernel's: room() > 0 means i is in
        // [tail, head - 1), which the user gave back (it loaded nothing of
        // it since: head was loaded with Acquire after the user's reads).
        // Its buffer `idx` belongs to slot i alone (each slot has its own
        // buffer, from `bufs`), inside the mapping (asserted).
        unsafe {
            let base = self.region.ptr.as_ptr();
            std::ptr::copy_nonoverlapping(frame.as_ptr(), base.add(off), frame.len());
            let s = NetmapSlot {
                buf_idx: idx,
                len: frame.len() as u16,
                flags: if more { NS_MOREFRAG } else { 0 },
                ptr: 0,
            };
            base.add(self.ring + RING_SLOTS + i as usize * 16)
                .cast::<NetmapSlot>()
                .write(s);
        }
        self.hwtail = (i + 1) % self.slots;
        true
    }

    /// Hands every free slot over with its own buffer as it is (`len`
    /// bytes, not written: what a NIC wrote there before), then publishes
    /// them; returns how many. For benches that measure the walk, not a copy.
    pub fn refill(&mut self, len: u16) -> u32 {
        assert!(len as u32 <= self.buf_size);
        let room = self.room();
        let mut i = self.hwtail;
        for _ in 0..room {
            let s = NetmapSlot {
                buf_idx: self.bufs[i as usize],
                len,
                flags: 0,
                ptr: 0,
            };
            // SAFETY: slot i is the kernel's (room counts the slots in
            // [tail, head - 1), as in push); only the slot is written, with
            // its own buffer.
            unsafe {
                self.region
                    .ptr
                    .as_ptr()
                    .add(self.ring + RING_SLOTS + i as usize * 16)
                    .cast::<NetmapSlot>()
                    .write(s);
            }
            i = if i + 1 == self.slots { 0 } else { i + 1 };
        }
        self.hwtail = i;
        self.publish();
        room
    }

    /// Puts a descriptor as a buggy kernel might into the next free slot:
    /// any buffer index and length, no bytes written. False when there is
    /// no room. (The next fill of this slot restores its own buffer.)
    pub fn push_descriptor(&mut self, buf_idx: u32, len: u16) -> bool {
        if self.room() == 0 {
            return false;
        }
        let i = self.hwtail;
        // SAFETY: slot i is the kernel's (as in push); only the slot is
        // written, no buffer.
        unsafe {
            self.region
                .ptr
                .as_ptr()
                .add(self.ring + RING_SLOTS + i as usize * 16)
                .cast::<NetmapSlot>()
                .write(NetmapSlot {
                    buf_idx,
                    len,
                    flags: 0,
                    ptr: 0,
                });
        }
        self.hwtail = (i + 1) % self.slots;
        true
    }

    /// Makes every slot filled so far visible to the user (`tail`, Release).
    pub fn publish(&mut self) {
        self.word(RING_TAIL).store(self.hwtail, Ordering::Release);
    }

    /// A handle that sets `ring->ts`, as the kernel does on each sync.
    pub fn stamp_handle(&self) -> RingStamp {
        RingStamp {
            region: self.region.clone(),
            ts: self.ring + RING_TS,
        }
    }

    /// Whether the user asked for `NR_TIMESTAMP`.
    pub fn timestamps_asked(&self) -> bool {
        self.word(RING_FLAGS).load(Ordering::Relaxed) & NR_TIMESTAMP != 0
    }
}

/// Sets `ring->ts` of one synthetic ring (see [`KernelRing::stamp_handle`]).
#[derive(Clone)]
pub struct RingStamp {
    region: Arc<Region>,
    ts: usize,
}

impl RingStamp {
    /// Stores `ns` (since the epoch) as the kernel's `microtime` would:
    /// seconds and microseconds.
    pub fn set_ns(&self, ns: u64) {
        let sec = self.region.i64_at(self.ts).expect("inside the region");
        let usec = self.region.i64_at(self.ts + 8).expect("inside the region");
        sec.store((ns / 1_000_000_000) as i64, Ordering::Relaxed);
        usec.store((ns % 1_000_000_000 / 1000) as i64, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rings: u32, slots: u32) -> SyntheticSpec {
        SyntheticSpec {
            name: "syn0".into(),
            rings,
            slots,
            buf_size: 2048,
        }
    }

    /// Where ring `q`'s netmap_if is (the if pool starts the region).
    fn nifp(q: usize) -> usize {
        q * IF_OBJ
    }

    #[test]
    fn synthetic_layout_reads_back_through_the_macros() {
        let rings = build_synthetic(&spec(3, 100)).unwrap();
        for (q, (ring, info, k)) in rings.iter().enumerate() {
            assert_eq!((info.slots, info.buf_size, info.rx_rings), (100, 2048, 3));
            assert_eq!(ring.pointers(), (0, 0, 0));
            assert!(k.timestamps_asked(), "open asked for NR_TIMESTAMP");
            // Only its own ring is bound to each netmap_if.
            for other in (0..3).filter(|&o| o != q as u32) {
                // SAFETY: open fails before making anything (ring_ofs is 0).
                let e = unsafe { RxRing::open(ring.region.clone(), nifp(q), other) };
                assert!(e.err().unwrap().0.contains("not bound"));
            }
        }
    }

    #[test]
    fn a_ring_outside_the_region_is_refused() {
        let rings = build_synthetic(&spec(1, 16)).unwrap();
        let region = rings[0].0.region.clone();
        // Corrupt ring_ofs of RX ring 0 (after 1 NIC and 1 host TX ring).
        let ofs = region.i64_at(IF_RING_OFS + 2 * 8).unwrap();
        let good = ofs.load(Ordering::Relaxed);
        ofs.store(1 << 40, Ordering::Relaxed);
        // SAFETY: open fails before making anything.
        let e = unsafe { RxRing::open(region.clone(), 0, 0) }.err().unwrap();
        assert!(e.0.contains("outside"), "{}", e.0);
        ofs.store(good + 8, Ordering::Relaxed);
        // SAFETY: as above (misaligned ring).
        assert!(unsafe { RxRing::open(region.clone(), 0, 0) }.is_err());
        ofs.store(good, Ordering::Relaxed);
        // A TX ring where the RX ring should be.
        let dir = region.u32_at(good as usize + RING_RINGID).unwrap();
        let word = dir.load(Ordering::Relaxed);
        dir.store(0, Ordering::Relaxed);
        // SAFETY: as above.
        let e = unsafe { RxRing::open(region.clone(), 0, 0) }.err().unwrap();
        assert!(e.0.contains("not an RX ring"), "{}", e.0);
        dir.store(word, Ordering::Relaxed);
    }

    #[test]
    fn descriptors_outside_the_buffer_pool_make_no_token() {
        let mut rings = build_synthetic(&spec(1, 8)).unwrap();
        let (ring, _, k) = &mut rings[0];
        assert!(k.push_descriptor(u32::MAX, 60));
        assert!(k.push_descriptor(2, 4000)); // longer than a buffer
        assert!(k.push_descriptor(2, 0));
        assert!(k.push(b"hello", false));
        k.publish();
        assert_eq!(ring.tail(), 4);
        for i in 0..3 {
            let sl = ring.slot(i);
            assert!(ring.desc(i, sl, 0).is_none(), "slot {i}");
        }
        assert!(ring.frame(ring.slot(0)).is_none());
        assert!(ring.frame(ring.slot(1)).is_none());
        let sl = ring.slot(3);
        let d = ring.desc(3, sl, 3).unwrap();
        assert_eq!(skip_of(&d), 3);
        assert_eq!(slot_of(&d), 3);
        assert_eq!(ring.buffers().frame(&d), b"hello");
        // Slot 3 holds buffer 2 + (8 - 1 - 3): the reversed assignment.
        assert_eq!(sl.buf_idx, 6);
    }

    #[test]
    #[should_panic(expected = "another frame area")]
    fn buffers_refuse_a_token_of_another_ring() {
        let mut rings = build_synthetic(&spec(2, 8)).unwrap();
        rings[0].2.push(b"x", false);
        rings[0].2.publish();
        let r0 = &rings[0].0;
        let d = r0.desc(0, r0.slot(0), 0).unwrap();
        rings[1].0.buffers().frame(&d);
    }

    #[test]
    fn ring_ts_reads_as_microseconds() {
        let rings = build_synthetic(&spec(1, 8)).unwrap();
        let (ring, _, k) = &rings[0];
        assert_eq!(ring.ts_ns(), 0);
        k.stamp_handle().set_ns(1_700_000_000_123_456_789);
        assert_eq!(ring.ts_ns(), 1_700_000_000_123_456_000);
    }
}
