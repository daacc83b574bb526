//! Transmit: the TX ring (producer side) and the completion ring (consumer
//! side) of the socket `wiretape replay` and `wiretape gen` send through.

use super::ring::{Cons, Prod, Ring};
use super::socket;
use super::umem::Umem;
use super::BindMode;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// A transmit-only AF_XDP socket (copy mode on veth): its own UMEM, a TX
/// ring and a completion ring. Used by `wiretape replay` and `wiretape gen`.
///
/// Ownership protocol of a TX UMEM frame: a frame address is either in
/// `free` (ours: [`Tx::post_with`] may write it) or posted on the TX ring
/// (the kernel's, until its address comes back on the completion ring, when
/// [`Tx::reap`] returns it to `free`). So a frame is never written while
/// the kernel may read it.
pub struct Tx {
    fd: OwnedFd,
    umem: Umem,
    /// TX ring: our producer index is published by [`Tx::flush`].
    tx: Ring<libc::xdp_desc, Prod>,
    comp: Ring<u64, Cons>,
    /// Published producer index.
    tx_published: u32,
    free: Vec<u64>,
    /// Frames posted and not yet completed.
    pub outstanding: u32,
    /// Zero-copy or copy, as bound.
    pub mode: BindMode,
}

/// TX counters of a socket (XDP_STATISTICS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// TX descriptors the kernel refused (bad address or length).
    pub tx_invalid_descs: u64,
    /// Times the kernel found the TX ring empty when woken.
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
        let (fd, umem) = socket::with_umem(frames, frame_size)?;
        let raw = fd.as_raw_fd();
        // A UMEM owner must have both rings; the fill ring stays empty.
        socket::set_ring_size(raw, libc::XDP_UMEM_FILL_RING, 64)?;
        socket::set_ring_size(raw, libc::XDP_UMEM_COMPLETION_RING, frames)?;
        socket::set_ring_size(raw, libc::XDP_TX_RING, frames)?;
        let off = socket::offsets(raw)?;
        // SAFETY: raw is the AF_XDP socket just given a TX ring of `frames`
        // xdp_desc entries (we produce), off its XDP_MMAP_OFFSETS; mapped
        // once, here.
        let tx = unsafe { Ring::map(raw, &off.tx, frames, libc::XDP_PGOFF_TX_RING as u64)? };
        // SAFETY: as above, its completion ring of `frames` u64 entries (we
        // consume).
        let comp =
            unsafe { Ring::map(raw, &off.cr, frames, libc::XDP_UMEM_PGOFF_COMPLETION_RING)? };
        let mode = if zero_copy {
            BindMode::ZeroCopy
        } else {
            BindMode::Copy
        };
        super::bind_when_free(raw, ifindex, queue, mode)?;
        // Copy mode sends at most 32 frames per kick by default, so a
        // larger batch left the rest posted until a later kick and the
        // frames in flight grew to the whole UMEM (every frame cold in the
        // cache when written and when the kernel copies it). One kick may
        // send the whole ring where the kernel allows it (6.17+).
        let _ = socket::set_tx_budget(raw, frames);
        Ok(Tx {
            fd,
            umem,
            tx_published: tx.produced(),
            tx,
            comp,
            free: (0..frames as u64)
                .rev()
                .map(|i| i * frame_size as u64)
                .collect(),
            outstanding: 0,
            mode,
        })
    }

    /// Bytes per UMEM frame: the longest frame that can be posted.
    pub fn frame_size(&self) -> u32 {
        self.umem.frame_size()
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
        if len > self.umem.frame_size() as usize {
            return false;
        }
        let Some(addr) = self.free.pop() else {
            return false;
        };
        // SAFETY: addr is a free frame (the protocol above: not on the TX
        // ring, so the kernel does not read it); [addr, addr+len) lies inside
        // the UMEM since addr = k * frame_size < UMEM length and
        // len <= frame_size.
        fill(unsafe { self.umem.frame_mut(addr, len) });
        let d = libc::xdp_desc {
            addr,
            len: len as u32,
            options: 0,
        };
        // SAFETY: a slot is free: at most `frames` frames exist and the ring
        // has `frames` slots; each posted frame holds at most one slot until
        // it is completed (outstanding <= frames), so the ring cannot overflow.
        unsafe { self.tx.push_unchecked(d) };
        self.outstanding += 1;
        true
    }

    /// Publishes posted frames and wakes the kernel to send them. Returns
    /// Err only for errors other than "busy, try again" (EAGAIN, EBUSY,
    /// ENOBUFS: the device queue was full; the frames stay posted).
    ///
    /// In copy mode a kick sends at most the socket's TX budget (32 frames
    /// on kernels before 6.17, the whole ring after [`Tx::open`] raised it)
    /// and says EAGAIN when more is left: it is kicked again while the
    /// kernel keeps taking descriptors, so what is posted leaves now rather
    /// than piling up in the ring (a frame that waits goes cold in the cache).
    pub fn flush(&mut self) -> io::Result<()> {
        if self.tx.produced() != self.tx_published {
            self.tx.publish();
            self.tx_published = self.tx.produced();
        }
        if self.outstanding == 0 {
            return Ok(());
        }
        if !self.tx.needs_wakeup() && self.mode == BindMode::ZeroCopy {
            return Ok(());
        }
        let mut left = self.tx.unconsumed();
        loop {
            match socket::wake_tx(self.fd.as_raw_fd()) {
                Ok(()) => return Ok(()),
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                    | Some(libc::EINTR) => {}
                    _ => return Err(e),
                },
            }
            if self.mode == BindMode::ZeroCopy {
                return Ok(());
            }
            // Busy: again only while the kernel took something last time.
            let now = self.tx.unconsumed();
            if now == 0 || now >= left {
                return Ok(());
            }
            left = now;
        }
    }

    /// Takes completed frames back; returns how many were sent since the last call.
    #[inline]
    pub fn reap(&mut self) -> u32 {
        let frame_size = self.umem.frame_size() as u64;
        let free = &mut self.free;
        // Back to us: the kernel is done with each frame (the protocol above).
        let n = self
            .comp
            .consume(usize::MAX, |addr| free.push(addr - addr % frame_size)) as u32;
        if n > 0 {
            self.outstanding -= n;
        }
        n
    }

    /// Waits up to `timeout_ms` for the socket to take more (POLLOUT).
    pub fn wait(&self, timeout_ms: i32) {
        socket::poll(self.fd.as_raw_fd(), libc::POLLOUT, timeout_ms);
    }

    /// The kernel's TX counters (XDP_STATISTICS): one getsockopt.
    pub fn stats(&self) -> io::Result<TxStats> {
        let s = socket::statistics(self.fd.as_raw_fd())?;
        Ok(TxStats {
            tx_invalid_descs: s.tx_invalid_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }
}
