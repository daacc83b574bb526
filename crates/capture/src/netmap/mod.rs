//! The netmap engine (cargo feature `netmap`): each RX ring of an interface
//! bound to its own `/dev/netmap` descriptor (`NR_REG_ONE_NIC`, RX only,
//! exclusive), the shared region mapped, and the ring walked as netmap(4)
//! says: the slots from `head` to `tail` are ours; each slot names a buffer
//! (`ring + buf_ofs + buf_idx * nr_buf_size`) that is handed to the pipeline
//! as a [`crate::Desc`] without a copy; once the writer has copied a batch and given
//! it back (in order), the poll thread moves `head` and `cur` past those
//! slots, and `NIOCRXSYNC` hands them to the kernel and fetches new frames
//! (`poll` waits for them). So the ring bounds what is in flight, as the UMEM
//! does for AF_XDP: size it with `--netmap-slots` or `ethtool -G`.
//!
//! Struct layouts: our own `#[repr(C)]` copies of `sys/net/netmap.h` (API
//! 14), pinned by layout tests, not the `netmap_sys` crate (API 11, missing
//! fields, wrong slot offset, unmaintained; see `layout.rs`). All raw memory
//! access is in `ring.rs`, the system calls in `sys.rs`; this file is safe.
//!
//! Timestamps: netmap stamps a whole ring sync (`ring->ts`, a `timeval`,
//! with `NR_TIMESTAMP`), which is the batch problem of the seed thesis. With
//! `--ts batch` every frame of a sync gets `ring->ts`; `udts`/`wdts` spread
//! the gap between two syncs' stamps over the sync's frames (uniformly / by
//! size); `hybrid` (the default) does `wdts` while the ring is saturated and
//! stamps at the poller otherwise; `kpt` stamps each frame at the poller
//! (TSC). `hw` and `xdp` need the XDP program and are refused.
//!
//! What is proven without the kernel module: the ring walk, the buffer
//! arithmetic, slot return and the timestamps run against a synthetic
//! region laid out as `netmap_mem2.c` lays it out (`synthetic`), with a
//! thread playing the kernel. What is not: the `NIOCCTRL` registration, the
//! mapping of a real region and `NIOCRXSYNC`/`poll` against a real driver
//! (`sys.rs`), which follow netmap's headers and source but have never run.

#[cfg(feature = "netmap")]
mod layout;
#[cfg(feature = "netmap")]
#[allow(unsafe_code)]
mod ring;
#[cfg(feature = "netmap")]
#[allow(unsafe_code)]
mod sys;

#[cfg(feature = "netmap")]
mod engine;
#[cfg(feature = "netmap")]
pub use engine::*;

use crate::CaptureFilter;

/// Whether this build has the netmap engine (cargo feature `netmap`).
pub const BUILT: bool = cfg!(feature = "netmap");

/// Settings of the netmap engine (defined in every build, so that a build
/// without the feature can say so when asked for it).
#[derive(Clone, Debug)]
pub struct NetmapConfig {
    /// The interface.
    pub ifname: String,
    /// RX rings (queues) to capture; None = all.
    pub queues: Option<Vec<u32>>,
    /// CPUs for the poll threads (queue i on cpus[i % len]); None = the
    /// process's allowed CPUs in turn.
    pub cpus: Option<Vec<usize>>,
    /// CPUs for the writer threads; None = not pinned.
    pub writer_cpus: Option<Vec<usize>>,
    /// Slots per RX ring to ask netmap for (the driver may round or refuse
    /// it); None = the driver's current ring size.
    pub slots: Option<u32>,
    /// The capture filter (compiled for Ethernet), run on each frame in user
    /// space with the classic evaluator; None: every frame.
    pub filter: Option<CaptureFilter>,
}

impl NetmapConfig {
    /// The defaults, on `ifname`.
    pub fn new(ifname: impl Into<String>) -> Self {
        NetmapConfig {
            ifname: ifname.into(),
            queues: None,
            cpus: None,
            writer_cpus: None,
            slots: None,
            filter: None,
        }
    }
}
