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

    /// Asks the kernel to busy poll this socket's NAPI from our recvfrom
    /// calls: `SO_PREFER_BUSY_POLL` 1, `SO_BUSY_POLL` `bp.usecs`,
    /// `SO_BUSY_POLL_BUDGET` `bp.budget`, in that order. The error names the
    /// option the kernel refused (raising them needs CAP_NET_ADMIN).
    pub fn set_busy_poll(&self, bp: BusyPoll) -> Result<(), (&'static str, io::Error)> {
        let raw = self.raw();
        for (name, opt, v) in [
            ("SO_PREFER_BUSY_POLL", SO_PREFER_BUSY_POLL, 1),
            ("SO_BUSY_POLL", SO_BUSY_POLL, bp.usecs as libc::c_int),
            (
                "SO_BUSY_POLL_BUDGET",
                SO_BUSY_POLL_BUDGET,
                bp.budget as libc::c_int,
            ),
        ] {
            set_sol_socket(raw, opt, v).map_err(|e| (name, e))?;
        }
        Ok(())
    }

    /// The busy-poll options as the kernel holds them (getsockopt): what
    /// [`XskFd::set_busy_poll`] set, or off by default. The kernel reports
    /// no `SO_BUSY_POLL_BUDGET` (it has no getsockopt for it: ENOPROTOOPT);
    /// a kernel that does is read too.
    pub fn busy_poll_options(&self) -> io::Result<BusyPollOptions> {
        let raw = self.raw();
        Ok(BusyPollOptions {
            prefer: get_sol_socket(raw, SO_PREFER_BUSY_POLL)? != 0,
            usecs: get_sol_socket(raw, SO_BUSY_POLL)? as u32,
            budget: get_sol_socket(raw, SO_BUSY_POLL_BUDGET)
                .ok()
                .map(|b| b as u32),
        })
    }

    /// The id of the NAPI context that delivered the socket's frames
    /// (`SO_INCOMING_NAPI_ID`): 0 until a frame came through a driver
    /// whose receive queue has one. Busy polling runs that NAPI; with 0 it
    /// has nothing to run.
    pub fn napi_id(&self) -> io::Result<u32> {
        get_sol_socket(self.raw(), SO_INCOMING_NAPI_ID).map(|v| v as u32)
    }

    /// One busy-poll round: a zero-length non-blocking recvfrom, which,
    /// with the busy-poll options set and the socket's NAPI known, runs the
    /// driver's NAPI poll (up to the budget) in the caller's context. Once
    /// per poll round, never per frame. Errors are harmless (none reported).
    #[inline]
    pub fn busy_poll(&self) {
        wake_rx(self.raw());
    }
}

/// Busy polling of a socket (`--busy-poll`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyPoll {
    /// `SO_BUSY_POLL`: microseconds. AF_XDP only busy polls on non-blocking
    /// calls (one NAPI poll per recvfrom), so for the kernel it only has to
    /// be non-zero; the poll thread uses it as how long it keeps polling a
    /// dry ring before it falls back to sleeping.
    pub usecs: u32,
    /// `SO_BUSY_POLL_BUDGET`: most frames one NAPI poll brings in (1..=65535).
    pub budget: u16,
}

/// The busy-poll socket options read back ([`XskFd::busy_poll_options`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyPollOptions {
    /// `SO_PREFER_BUSY_POLL`.
    pub prefer: bool,
    /// `SO_BUSY_POLL`, microseconds.
    pub usecs: u32,
    /// `SO_BUSY_POLL_BUDGET`, where the kernel reports it (Linux 6.18
    /// does not).
    pub budget: Option<u32>,
}

// The asm-generic numbers (x86_64, aarch64, riscv64, ...), from
// include/uapi/asm-generic/socket.h.
const SO_BUSY_POLL: libc::c_int = 46;
const SO_INCOMING_NAPI_ID: libc::c_int = 56;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// setsockopt(SOL_SOCKET, opt) with an int.
fn set_sol_socket(raw: RawFd, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its exact size; these
    // options only read the int.
    cvt(unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// getsockopt(SOL_SOCKET, opt) of an int.
fn get_sol_socket(raw: RawFd, opt: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`.
    cvt(unsafe {
        libc::getsockopt(
            raw,
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
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
