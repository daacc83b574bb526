//! AF_XDP sockets: UMEM, fill and RX rings (capture), TX and completion
//! rings ([`Tx`]: replay, gen). All ring and UMEM `unsafe` lives here.
//!
//! Ownership protocol of a UMEM frame (the invariant every block below relies on):
//! 1. At start every frame address is given to the kernel through the fill ring.
//! 2. The kernel writes a received frame into it and publishes a descriptor on
//!    the RX ring. [`RxRing::take`] turns that descriptor into a [`Desc`], a
//!    token that is neither `Clone` nor constructible outside this crate, and
//!    that carries its UMEM's owner id: whoever holds the `Desc` owns the
//!    frame, and the kernel does not touch it.
//! 3. [`Umem::frame`] reads the frame through `&Desc`; [`FillRing::give`]
//!    consumes the `Desc` and hands the frame back to the kernel. Both check
//!    the owner id (and panic on a `Desc` of another UMEM, or of another
//!    engine), so a frame is only ever read from, and given back to, the
//!    UMEM whose RX ring handed it out.
//!
//! So a frame is never read while the kernel may write it, and never given back twice.
//! Rings are single-producer/single-consumer: the RX ring's consumer is the
//! poll thread that owns [`RxRing`]; the fill ring's producer is the writer
//! thread that owns [`FillRing`]. The kernel is the other side of each.
//!
//! Module map: `mmap` (the owned mapping), `ring` (the one generic ring all
//! four rings are: index arithmetic, Acquire/Release), `umem` (the packet
//! area, frame access), `socket` (every AF_XDP system call but mmap), `rx`
//! ([`RxRing`], [`FillRing`]), `tx` ([`Tx`]: TX and completion rings). This
//! file opens a capture socket and puts the parts together.

mod mmap;
mod ring;
mod rx;
mod socket;
mod tx;
mod umem;

pub use crate::desc::Desc;
pub use rx::{FillRing, RxRing};
pub use socket::{BindMode, BusyPoll, BusyPollOptions, XskFd, XskStats};
pub use tx::{Tx, TxStats};
pub use umem::Umem;

use ring::Ring;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// Bytes of XDP metadata the steering program writes before each frame:
/// `struct wt_meta { u64 hw; u64 tai; }` (see bpf/steer.bpf.c).
pub const META_LEN: u64 = 16;

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
    /// The socket (statistics, wake-ups).
    pub fd: Arc<XskFd>,
    /// Its packet area.
    pub umem: Arc<Umem>,
    /// The RX ring (the poll thread's end).
    pub rx: RxRing,
    /// The fill ring (the writer thread's end).
    pub fill: FillRing,
    /// Zero-copy or copy, as bound.
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
    let (fd, umem) = socket::with_umem(cfg.frames, cfg.frame_size)?;
    let raw = fd.as_raw_fd();
    let n = cfg.frames;
    // Twice the frames: see FillRing's docs.
    let fill_size = n * 2;
    socket::set_ring_size(raw, libc::XDP_UMEM_FILL_RING, fill_size)?;
    // The kernel insists on a completion ring for a UMEM owner even when we never transmit.
    socket::set_ring_size(raw, libc::XDP_UMEM_COMPLETION_RING, 64)?;
    socket::set_ring_size(raw, libc::XDP_RX_RING, n)?;
    let off = socket::offsets(raw)?;
    // SAFETY: raw is the AF_XDP socket just given an RX ring of n xdp_desc
    // entries (we consume it), off its XDP_MMAP_OFFSETS; mapped once, here.
    let rx_ring = unsafe { Ring::map(raw, &off.rx, n, libc::XDP_PGOFF_RX_RING as u64)? };
    // SAFETY: as above, its fill ring of fill_size u64 entries (we produce).
    let fill_ring = unsafe { Ring::map(raw, &off.fr, fill_size, libc::XDP_UMEM_PGOFF_FILL_RING)? };

    let fd = Arc::new(XskFd { fd });
    let umem = Arc::new(umem);
    let rx = RxRing::new(rx_ring, umem.clone());
    let mut fill = FillRing::new(fill_ring, fd.clone(), &umem);
    // Every frame starts out with the kernel.
    // SAFETY: these are the starts of the UMEM's n frames, just created:
    // nothing else names them yet.
    unsafe { fill.give_addrs((0..n as usize).map(|i| i as u64 * cfg.frame_size as u64)) };

    bind_when_free(raw, ifindex, queue, mode)?;
    Ok(Xsk {
        fd,
        umem,
        rx,
        fill,
        mode,
    })
}

/// How long [`bind_when_free`] waits for a busy queue.
const BIND_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Binds, waiting up to [`BIND_WAIT`] while the queue is busy: the kernel
/// lets go of a closed socket's queue in deferred work, so a recorder (or
/// `replay`) started right after another one stopped (a restart, a
/// rotation script) would be refused for a few milliseconds, and on a
/// loaded machine for over a second (seen once in the suite: `replay`
/// refused after 1 s, two compilers beside it). A queue held by a live
/// socket stays busy and is reported after the wait.
pub(super) fn bind_when_free(
    raw: std::os::fd::RawFd,
    ifindex: u32,
    queue: u32,
    mode: BindMode,
) -> io::Result<()> {
    let deadline = std::time::Instant::now() + BIND_WAIT;
    loop {
        match socket::bind(raw, ifindex, queue, mode) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            r => return r,
        }
    }
}
