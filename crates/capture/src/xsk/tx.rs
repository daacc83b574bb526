//! TX and completion rings: the transmit socket of replay and gen.

use super::*;
use std::os::fd::OwnedFd;

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
