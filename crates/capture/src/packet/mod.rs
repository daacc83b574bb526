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
//! - One socket per queue, or fewer: by default no more sockets (and poll
//!   threads) than CPUs the poll threads may use, as a thread per queue
//!   beyond that gains nothing and every socket more costs the kernel's
//!   fanout on each frame, a block timer and a thread's wakeups. With
//!   several sockets they join one fanout group of type
//!   `PACKET_FANOUT_QM`, in order, so socket n gets the frames the driver
//!   recorded as received on the queues q with q mod sockets = n (queue n
//!   when there is a socket per queue); one socket joins no group. A
//!   socket sees the whole interface, so `--queues` must name all of them.
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
//! - Laid out in place ([`PacketConfig::in_place`], pcapng files): with 2
//!   bytes of `PACKET_RESERVE` every Ethernet frame starts on a 4-byte
//!   boundary, and the poll thread turns a block into a run of pcapng
//!   blocks where it lies: an Enhanced Packet Block's head written just
//!   before each frame (its trailing length after the frame), filler blocks
//!   of a local-use type (readers skip them) over everything else (block
//!   header, frame headers, filtered frames, the tail up to a page). Tokens
//!   of such frames name the frame's first byte, not its header (which a
//!   filler may cover by then). The writer hands the run
//!   ([`crate::LaidOutRun`], when its last frame reaches it) to storage,
//!   which writes it with O_DIRECT as it lies, or copies it while the disk
//!   is behind (`wiretape_storage::sink::BlockSink::set_direct_backlog`);
//!   the block goes back to the kernel only once the run is dropped
//!   (written, or copied). A block that cannot be
//!   laid out (`Ring::can_lay_out`, checked over its headers first)
//!   is walked and copied as before.
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
    /// ... for blocks whose frames take at least this many ring bytes on
    /// average (header and padding included): smaller frames are copied,
    /// which costs less CPU and disk there (see [`LAY_OUT_MIN_SLOT`]).
    pub in_place_min_slot: u32,
    /// Sockets (and poll threads) reading the interface's RX queues: None
    /// = one per queue, at most one per CPU the poll threads may use
    /// ([`PacketConfig::cpus`], else the allowed ones); at most the queues.
    pub sockets: Option<u32>,
}

/// The mean ring slot (a frame's header, padding and bytes) from which a
/// block is laid out in place rather than copied. Measured on the veth rig
/// (process CPU during 2 M frames at 300 kpps, laid out / copied): 1514 B
/// frames 40-41 / 51-72 ticks, 1024 B 32-41 / 57-59, 512 B 41-48 / 25-28,
/// 256 B 31 / 27-31: laying out pays from about 1 KB frames (a slot of
/// 1104 B); 768 B of slot is a frame of about 680 B.
pub const LAY_OUT_MIN_SLOT: u32 = 768;

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
            in_place_min_slot: LAY_OUT_MIN_SLOT,
            sockets: None,
        }
    }

    /// The ring's sizes checked on their own (no interface asked): the
    /// block a power of two from 4 KiB to 64 MiB, 2 to 65536 blocks, a
    /// block timer of 1 to 60000 ms. Err: the one line naming the flag.
    pub fn check_sizes(&self) -> Result<(), crate::CaptureError> {
        let bs = self.block_size;
        if !bs.is_power_of_two() || !(4096..=(64 << 20)).contains(&bs) {
            return Err(crate::CaptureError::Config(format!(
                "--packet-block-kib {}: a block must be a power of two between 4 KiB and 64 MiB",
                bs / 1024
            )));
        }
        if !(2..=65536).contains(&self.blocks) {
            return Err(crate::CaptureError::Config(format!(
                "--packet-blocks {}: a ring needs between 2 and 65536 blocks",
                self.blocks
            )));
        }
        if !(1..=60_000).contains(&self.retire_ms) {
            return Err(crate::CaptureError::Config(format!(
                "--packet-retire-ms {}: a block's timer takes 1 to 60000 ms",
                self.retire_ms
            )));
        }
        Ok(())
    }

    /// `--queues` and `--packet-sockets` checked against the interface
    /// (cheap: two reads of sysfs, nothing opened), so that a recording
    /// refuses them before it creates anything. Ok: the RX queues the
    /// interface has (every one is recorded). Err: the one line naming the
    /// flag, its value, what the interface has and the fix.
    pub fn check_interface(&self) -> Result<u32, crate::CaptureError> {
        let ifname = &self.ifname;
        if crate::sys::ifindex(ifname).is_none() {
            return Err(crate::CaptureError::NoSuchInterface(ifname.clone()));
        }
        let count = crate::sys::rx_queue_count(ifname).unwrap_or(1).max(1);
        if let Some(list) = self.queues.as_deref() {
            let mut asked = list.to_vec();
            asked.sort_unstable();
            asked.dedup();
            if asked != (0..count).collect::<Vec<_>>() {
                let shown = asked
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",");
                return Err(crate::CaptureError::Config(format!(
                    "--queues {shown}: --engine packet records every queue of {ifname} (it has {count}: 0-{last}; an AF_PACKET \
                     socket sees the whole interface): leave --queues out, or use --engine afxdp to record some queues only",
                    last = count - 1
                )));
            }
        }
        if let Some(n) = self.sockets {
            if n == 0 || n > count {
                return Err(crate::CaptureError::Config(format!(
                    "--packet-sockets {n}: {ifname} has {count} RX queue(s); give 1 to {count} sockets (or leave it out: one per queue, at most one per CPU)"
                )));
            }
        }
        Ok(count)
    }
}
