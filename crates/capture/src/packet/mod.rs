//! The TPACKET_V3 engine (`--engine packet`): each recorded RX queue of an
//! interface read through its own AF_PACKET socket with a `PACKET_RX_RING`
//! of `TPACKET_V3` blocks, as stenotype and libpcap read theirs.
//!
//! Why a second engine for interfaces: AF_XDP pays off where the driver
//! gives zero-copy sockets; on a device that only offers copy mode (veth,
//! every driver without XSK zero-copy) a frame is copied by the kernel
//! twice before we see it (veth's skb to XDP buffer when the skb lacks
//! headroom, then the AF_XDP copy into the UMEM), on the sender's CPU.
//! AF_PACKET copies it once, into a ring block. `benches/results/` has the
//! measurements (`kernel-cost-*`).
//!
//! How it runs:
//! - One socket per queue; with several queues they join one fanout group
//!   of type `PACKET_FANOUT_QM`, in queue order, so socket n gets the
//!   frames the driver recorded as received on queue n. A socket sees the
//!   whole interface, so `--queues` must name all of them.
//! - Nothing arrives before every socket is set up: each socket is opened
//!   behind a classic filter that takes nothing (the gate), bound, joined
//!   to the group, and only then are the gates opened; `stop` closes them
//!   again, so no frame arrives after it and none is counted twice.
//! - The poll thread walks a block the kernel handed over in place: each
//!   frame becomes a [`crate::Desc`] naming its header in the ring, stamped
//!   with the kernel's per-frame stamp (the NIC's where it gives one,
//!   `PACKET_TIMESTAMP`); a VLAN tag the kernel took off is put back in
//!   place as libpcap does (16 bytes moved, not the frame). A block goes
//!   back to the kernel once the writer gave back every frame taken from
//!   it, so the ring bounds what is in flight, as the UMEM does for AF_XDP.
//! - The capture filter runs in user space on each frame (the classic
//!   evaluator; frames it rejects are counted in `filtered`, exactly); the
//!   per-connection cutoff is not applied by this engine (refused).
//! - Accounting: `seen` = frames walked + frames the kernel dropped because
//!   no block was free (`PACKET_STATISTICS` `tp_drops`, counted as
//!   `rx_ring_full`).
//!
//! All raw memory access and system calls are in `ring.rs`; `engine.rs` is safe.

mod engine;
#[allow(unsafe_code)]
mod ring;

pub use engine::{Packet, PacketFrames, PacketRx};

use crate::CaptureFilter;

/// Settings of the TPACKET_V3 engine.
#[derive(Clone, Debug)]
pub struct PacketConfig {
    /// The interface.
    pub ifname: String,
    /// RX queues to record; None = all (the only choice: a socket sees the
    /// whole interface; a list must name every queue).
    pub queues: Option<Vec<u32>>,
    /// CPUs for the poll threads (queue i on cpus[i % len]); None = the
    /// process's allowed CPUs in turn.
    pub cpus: Option<Vec<usize>>,
    /// CPUs for the writer threads; None = not pinned.
    pub writer_cpus: Option<Vec<usize>>,
    /// Bytes per ring block (a power of two, a multiple of the page size).
    pub block_size: u32,
    /// Blocks per queue's ring.
    pub blocks: u32,
    /// A block is handed over at the latest this many ms after its first
    /// frame (`tp_retire_blk_tov`): a quiet link still reaches the disk.
    pub retire_ms: u32,
    /// The capture filter (compiled for Ethernet), run on each frame in user
    /// space with the classic evaluator; None: every frame.
    pub filter: Option<CaptureFilter>,
    /// Lay each ring block out in place as a run of pcapng blocks (an
    /// Enhanced Packet Block written just before each frame, fillers over
    /// the rest) that the writer puts in a pcapng file as it lies, without
    /// copying a frame. Needs the kernel's stamps; a block that cannot be
    /// laid out (a frame off a 4-byte boundary) is copied as before.
    pub in_place: bool,
}

impl PacketConfig {
    /// The defaults, on `ifname`: 64 blocks of 1 MiB per queue, 8 ms.
    pub fn new(ifname: impl Into<String>) -> Self {
        PacketConfig {
            ifname: ifname.into(),
            queues: None,
            cpus: None,
            writer_cpus: None,
            block_size: 1 << 20,
            blocks: 64,
            retire_ms: 8,
            filter: None,
            in_place: false,
        }
    }
}
