//! wiretape's capture engines: where frames come from.
//!
//! Every engine sits behind one seam ([`Engine`]): it hands out its RX
//! queues, each as a receive half that yields batches of [`Desc`] tokens
//! and a frame half that reads their bytes and takes them back, and counts
//! what it saw and dropped. The pipeline crate runs the halves on its
//! threads; capture knows nothing of files or the pipeline.
//!
//! Module map:
//! - `engine`: the seam ([`Engine`], [`RxQueue`], [`FrameStore`], [`StartInfo`]).
//! - `afxdp`: the AF_XDP engine ([`AfXdp`]): XDP steering + one socket per queue.
//! - `file`: the file engine ([`FileEngine`]): a capture file as one queue, no root.
//! - `multi`: several engines as one ([`MultiEngine`]): a run over several
//!   interfaces, queues numbered run-wide.
//! - `netmap`: the netmap engine (cargo feature `netmap`; [`NetmapConfig`]
//!   in every build): one `/dev/netmap` descriptor per RX ring, the ring
//!   walked in place; all of its `unsafe` in `netmap/ring.rs` and
//!   `netmap/sys.rs`.
//! - `packet`: the TPACKET_V3 engine ([`Packet`]): one AF_PACKET socket
//!   and ring of blocks per queue, at most one per CPU (fanout by queue),
//!   walked in place; for
//!   devices whose AF_XDP sockets only copy; all of its `unsafe` in
//!   `packet/ring.rs`.
//! - `xsk`: AF_XDP sockets, UMEM and rings: all of their `unsafe`.
//! - `arena`: the file engine's frame ring: all of its `unsafe`.
//! - `mapped`: a capture file mapped read-only, which the file engine reads
//!   plain pcap in place from: all of that `unsafe`.
//! - `bpf`: the steering program (load, attach, counters; one FFI call).
//! - `bpflog`: libbpf's log routed through wiretape's (kept, folded into
//!   errors, printed with `-v`).
//! - `xdpfilter`: the capture filter in the XDP program (a tail call into a
//!   generated program; its docs say why), [`CaptureFilter`].
//! - `tx`: the paced transmit loop of `replay` and `gen`.
//! - `frames`: known test frames (sequence, flow, send time).
//! - `link`: link events of the recorded interface (netlink): removed, down.
//! - `sys`: small OS calls (interface, queues, affinity, capabilities).
//! - `cpulist`: CPU and queue lists as written (`0,1,4-6`), CPUs checked
//!   against those the process may run on.
#![deny(unsafe_code)]

pub mod afxdp;
#[allow(unsafe_code)]
mod arena;
#[allow(unsafe_code)]
pub mod bpf;
pub mod bpflog;
pub mod cpulist;
pub mod cutoff;
#[allow(unsafe_code)]
mod desc;
mod engine;
pub mod file;
pub mod frames;
#[allow(unsafe_code)]
pub mod link;
#[allow(unsafe_code)]
mod mapped;
mod multi;
pub mod netmap;
pub mod packet;
#[allow(unsafe_code)]
pub mod sys;
pub mod tx;
pub mod xdpfilter;
#[allow(unsafe_code)]
pub mod xsk;

pub use afxdp::{AfXdp, CaptureConfig};
pub use bpf::{QueueCounters, XdpCutoff, XdpMode};
pub use desc::Desc;
pub use engine::{Engine, EngineCounters, EngineQueue, FrameStore, LaidOutRun, RxQueue, StartInfo};
pub use file::{FileConfig, FileEngine, PcapInPlace, RecordHead, RecordSource};
pub use link::{LinkMonitor, LinkStatus};
pub use multi::MultiEngine;
pub use netmap::NetmapConfig;
pub use packet::{Packet, PacketConfig};
pub use xdpfilter::CaptureFilter;
pub use xsk::{BindMode, BusyPoll, XskStats};

/// Errors of the capture layer. Each message names the thing and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureError {
    /// The interface does not exist here.
    #[error("no such interface '{0}' in this network namespace (list interfaces with `ip link`)")]
    NoSuchInterface(String),
    /// Missing rights.
    #[error("permission denied {0}: run as root, or give wiretape CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW and CAP_IPC_LOCK")]
    Permission(String),
    /// Another XDP program is attached.
    #[error("interface {ifname} already has an XDP program attached (id {id}, '{name}', {mode} mode): detach it with `ip link set dev {ifname} xdp off` (or stop the tool that owns it) and try again")]
    AlreadyAttached {
        /// The interface.
        ifname: String,
        /// The program's id.
        id: u32,
        /// The program's name.
        name: String,
        /// native, generic or offload.
        mode: &'static str,
    },
    /// The kernel refused the attach.
    #[error("cannot attach XDP to {ifname} in {mode} mode: {source} (try the generic XDP mode)")]
    Attach {
        /// The interface.
        ifname: String,
        /// The mode tried.
        mode: &'static str,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// A queue the interface lacks.
    #[error("interface {ifname} has no RX queue {queue}: it has {count} (0..{last}); see `ethtool -l {ifname}`")]
    NoSuchQueue {
        /// The interface.
        ifname: String,
        /// The queue asked for.
        queue: u32,
        /// Queues it has.
        count: u32,
        /// The last one.
        last: u32,
    },
    /// An AF_XDP socket could not be opened.
    #[error("cannot open the AF_XDP socket for {ifname} queue {queue}: {source}{hint}")]
    Socket {
        /// The interface.
        ifname: String,
        /// The queue.
        queue: u32,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
        /// What to do about it.
        hint: &'static str,
    },
    /// Loading or using the XDP program failed.
    #[error("XDP program: {0}")]
    Bpf(String),
    /// The capture filter's classic program cannot be translated to eBPF
    /// (the message names the instruction).
    #[error("filter expression '{expr}' cannot run in the XDP program: {source}")]
    FilterTranslate {
        /// The expression.
        expr: String,
        /// What the translator refused.
        #[source]
        source: wiretape_filter::ebpf::TranslateError,
    },
    /// The kernel's verifier refused the generated filter program.
    #[error("filter expression '{expr}': the kernel's verifier refused the XDP filter program ({insns} eBPF instructions){hint}; the verifier's last lines: {log}")]
    FilterRefused {
        /// The expression.
        expr: String,
        /// Length of the program.
        insns: usize,
        /// The last lines of the verifier's log, joined by ` | `.
        log: String,
        /// What may help.
        hint: &'static str,
    },
    /// A capture filter on an interface whose frames are not Ethernet.
    #[error("interface {ifname} is not Ethernet (link type ARPHRD {arphrd}): capture filters need Ethernet frames")]
    FilterLinkType {
        /// The interface.
        ifname: String,
        /// Its `/sys/class/net/IF/type`.
        arphrd: u32,
    },
    /// The kernel refused a busy-poll socket option.
    #[error("busy polling: the kernel refused {option} on the AF_XDP socket of {ifname} queue {queue}: {source} (it needs CAP_NET_ADMIN and a kernel with CONFIG_NET_RX_BUSY_POLL, 5.11 or later; or record without busy polling)")]
    BusyPoll {
        /// The interface.
        ifname: String,
        /// The queue.
        queue: u32,
        /// The socket option refused (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET).
        option: &'static str,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
    },
    /// A setting is out of range.
    #[error("invalid setting: {0}")]
    Config(String),
    /// The netmap engine in a build without the `netmap` feature.
    #[error("the netmap engine: this wiretape was built without netmap support: rebuild it with `cargo build --release --features netmap` (or record with the afxdp engine)")]
    NetmapNotBuilt,
    /// The netmap kernel module is not loaded.
    #[error("/dev/netmap does not exist: the netmap kernel module is not loaded (build it from https://github.com/luigirizzo/netmap and load it with `insmod netmap.ko`), or record with the afxdp engine")]
    NetmapMissing,
    /// netmap refused to bind a ring.
    #[error("cannot put {ifname} RX ring {queue} in netmap mode: {source}{hint}")]
    NetmapRegister {
        /// The interface.
        ifname: String,
        /// The ring.
        queue: u32,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
        /// What to do about it.
        hint: &'static str,
    },
    /// The region netmap mapped does not hold the ring where it said.
    #[error("the netmap region of {ifname} is not laid out as netmap API 14 lays it out ({what}): is the netmap module of another version?")]
    NetmapLayout {
        /// The interface.
        ifname: String,
        /// What did not fit.
        what: String,
    },
    /// An AF_PACKET socket of the TPACKET_V3 engine could not be set up.
    #[error(
        "cannot set up the AF_PACKET socket of {ifname} queue {queue} ({what}): {source}{hint}"
    )]
    PacketSocket {
        /// The interface.
        ifname: String,
        /// The queue.
        queue: u32,
        /// The step that failed (socket, PACKET_RX_RING, bind, ...).
        what: String,
        /// The kernel's answer.
        #[source]
        source: std::io::Error,
        /// What to do about it.
        hint: &'static str,
    },
    /// A thread could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(#[source] std::io::Error),
}
