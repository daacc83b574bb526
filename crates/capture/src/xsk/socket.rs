//! The socket: creation with its UMEM registered, setsockopt/getsockopt,
//! bind, statistics, the wakeup calls and poll. Every AF_XDP system call
//! except the ring mmap (in [`super::mmap`]) is here.

use super::umem::Umem;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
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
    /// RX descriptors the kernel found invalid.
    pub rx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty.
    pub rx_fill_ring_empty_descs: u64,
}

/// How a socket ended up bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindMode {
    /// The NIC writes into the UMEM (driver support needed).
    ZeroCopy,
    /// The kernel copies each frame into the UMEM.
    Copy,
}

/// The socket handle: kept by the engine for statistics after the rings have
/// moved to their threads.
pub struct XskFd {
    pub(super) fd: OwnedFd,
}

impl XskFd {
    /// The raw descriptor (valid while `self` lives).
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The kernel's drop counters (XDP_STATISTICS): one getsockopt.
    pub fn stats(&self) -> io::Result<XskStats> {
        let s = statistics(self.raw())?;
        Ok(XskStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
        })
    }

    /// The socket's pending error (`SO_ERROR`, cleared by reading it):
    /// `ENETDOWN` once the kernel unbound it from a device that went away.
    pub fn take_error(&self) -> Option<io::Error> {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `v`.
        let rc = unsafe {
            libc::getsockopt(
                self.raw(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (rc == 0 && v != 0).then(|| io::Error::from_raw_os_error(v))
    }

    /// Waits up to `timeout_ms` for received frames.
    pub fn wait_rx(&self, timeout_ms: i32) {
        poll(self.raw(), libc::POLLIN, timeout_ms);
    }
}

/// A fresh AF_XDP socket with a UMEM of `frames` x `frame_size` registered.
pub(super) fn with_umem(frames: u32, frame_size: u32) -> io::Result<(OwnedFd, Umem)> {
    assert!(
        frames.is_power_of_two(),
        "frame count must be a power of two"
    );
    // SAFETY: plain socket(2); the returned fd is owned right away.
    let raw = cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: raw is a fresh fd nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let umem = Umem::new(frames, frame_size)?;
    let (addr, len) = umem.area();
    let reg = libc::xdp_umem_reg {
        addr: addr as u64,
        len: len as u64,
        chunk_size: frame_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    // SAFETY: hands the kernel the UMEM's memory: a fresh mapping owned by
    // `umem`, registered with this one fresh socket only. From here on the
    // kernel writes a frame only after we give it through this socket's fill
    // ring, and reads one only after we post it on its TX ring (the ownership
    // protocol of the module docs), and it keeps the pages pinned until the
    // socket closes.
    unsafe { setopt(raw, libc::XDP_UMEM_REG, &reg)? };
    Ok((fd, umem))
}

/// Sets the entry count of one of the socket's rings (`XDP_RX_RING`,
/// `XDP_TX_RING`, `XDP_UMEM_FILL_RING`, `XDP_UMEM_COMPLETION_RING`).
pub(super) fn set_ring_size(raw: RawFd, opt: libc::c_int, entries: u32) -> io::Result<()> {
    debug_assert!(matches!(
        opt,
        libc::XDP_RX_RING
            | libc::XDP_TX_RING
            | libc::XDP_UMEM_FILL_RING
            | libc::XDP_UMEM_COMPLETION_RING
    ));
    // SAFETY: a ring size is a u32 and gives the kernel no access to our memory.
    unsafe { setopt(raw, opt, &entries) }
}

/// `XDP_MAX_TX_SKB_BUDGET` (Linux 6.17+; not yet in the libc crate): how
/// many TX descriptors one sendto hands to the driver in copy mode (the
/// kernel's default is 32; allowed 32..=TX ring size).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// Lets one sendto send up to `budget` frames in copy mode instead of the
/// kernel's 32 (fewer kicks per frame, and what is posted leaves at once).
/// Fails on kernels before 6.17 (ENOPROTOOPT) and outside 32..=TX ring size
/// (EACCES); callers treat that as "keep the default".
pub(super) fn set_tx_budget(raw: RawFd, budget: u32) -> io::Result<()> {
    // SAFETY: the budget is a u32 (the kernel checks optlen) and gives the
    // kernel no access to our memory.
    unsafe { setopt(raw, XDP_MAX_TX_SKB_BUDGET, &budget) }
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

/// Wakes the driver to refill from the fill ring (need_wakeup). Errors
/// (EAGAIN) are expected and harmless, so none is reported.
#[inline]
pub(super) fn wake_rx(raw: RawFd) {
    // SAFETY: a recvfrom with no buffer on our socket only wakes the
    // driver; it writes no memory.
    unsafe {
        libc::recvfrom(
            raw,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}

/// Kicks transmission of what the TX ring holds (a zero-length sendto).
#[inline]
pub(super) fn wake_tx(raw: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length sendto on our socket only kicks transmission;
    // it reads no memory.
    let rc = unsafe {
        libc::sendto(
            raw,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Waits up to `timeout_ms` for `events` on the socket.
pub(super) fn poll(raw: RawFd, events: libc::c_short, timeout_ms: i32) {
    let mut p = libc::pollfd {
        fd: raw,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, timeout_ms) };
}

/// setsockopt(SOL_XDP, opt) with a value of type `T`.
///
/// # Safety
///
/// `T` is the type the kernel expects for `opt`, and if the option hands
/// memory to the kernel (XDP_UMEM_REG), that memory follows the UMEM
/// ownership protocol of the module docs for as long as the socket lives.
unsafe fn setopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
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
