//! wiretape's capture engines.
//!
//! `afxdp` (this crate's [`Capture`]): the XDP program in `bpf/steer.bpf.c`
//! redirects each RX queue into its own AF_XDP socket and stamps each frame
//! with the kernel's TAI time in the XDP metadata. Per queue, a poll thread
//! (pinned) takes descriptors from the RX ring in batches, converts stamps to
//! UTC and hands the batch, not copies, to a writer thread. The writer passes
//! each frame to a [`FrameSink`] (which copies it once, into a block) and then
//! gives the frame back to the kernel through the fill ring. So the UMEM bounds
//! what is in flight: when the writer falls behind, the fill ring runs dry and
//! the kernel counts the drops, which [`Capture::stop`] reports exactly.
//!
//! Module map: `xsk` (all ring/UMEM unsafe), `bpf` (program, attach FFI),
//! `tx` (the safe transmit loop of `replay` and `gen`: pacing, sources),
//! `sys` (namespaces, affinity, ethtool, AF_PACKET), `engine` (safe threads),
//! `testbed` (veth pairs in private namespaces and a frame generator, for the
//! demo, tests and benches).

pub mod bpf;
mod desc;
mod engine;
pub mod sys;
pub mod testbed;
pub mod tx;
pub mod xsk;

pub use bpf::{QueueCounters, XdpMode};
pub use desc::Desc;
pub use engine::{
    Capture, CaptureConfig, CaptureReport, Drops, FrameSink, QueueReport, QueueSnapshot,
    SinkReport, Snapshot, StartInfo, StopReason,
};
pub use xsk::{BindMode, XskStats};

/// Errors of the capture layer. Each message names the thing and the fix.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("no such interface '{0}' in this network namespace (list interfaces with `ip link`)")]
    NoSuchInterface(String),
    #[error("permission denied {0}: run as root, or give wiretape CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW and CAP_IPC_LOCK")]
    Permission(String),
    #[error("interface {ifname} already has an XDP program attached (id {id}, '{name}', {mode} mode): detach it with `ip link set dev {ifname} xdp off` (or stop the tool that owns it) and try again")]
    AlreadyAttached {
        ifname: String,
        id: u32,
        name: String,
        mode: &'static str,
    },
    #[error("cannot attach XDP to {ifname} in {mode} mode: {source} (try --xdp-mode generic)")]
    Attach {
        ifname: String,
        mode: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("interface {ifname} has no RX queue {queue}: it has {count} (0..{last}); see `ethtool -l {ifname}`")]
    NoSuchQueue {
        ifname: String,
        queue: u32,
        count: u32,
        last: u32,
    },
    #[error("cannot open the AF_XDP socket for {ifname} queue {queue}: {source}{hint}")]
    Socket {
        ifname: String,
        queue: u32,
        #[source]
        source: std::io::Error,
        hint: &'static str,
    },
    #[error("XDP program: {0}")]
    Bpf(String),
    #[error("output: {0}")]
    Sink(String),
    #[error("invalid setting: {0}")]
    Config(String),
}
