//! Socket calls: socket, setsockopt/getsockopt, bind, statistics, poll.

use super::mmap::Mmap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

pub(super) fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
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
    pub(super) fd: OwnedFd,
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

/// Steps every AF_XDP socket takes, RX or TX.
pub(super) mod sock {
    use super::*;

    /// A fresh AF_XDP socket with a UMEM of `frames` x `frame_size` registered.
    pub(in crate::xsk) fn with_umem(frames: u32, frame_size: u32) -> io::Result<(OwnedFd, Mmap)> {
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
    pub(in crate::xsk) fn offsets(raw: RawFd) -> io::Result<libc::xdp_mmap_offsets> {
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
    pub(in crate::xsk) fn map_ring(
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
    pub(in crate::xsk) fn bind(
        raw: RawFd,
        ifindex: u32,
        queue: u32,
        mode: BindMode,
    ) -> io::Result<()> {
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
    pub(in crate::xsk) fn statistics(raw: RawFd) -> io::Result<libc::xdp_statistics> {
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

pub(super) fn setopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
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
