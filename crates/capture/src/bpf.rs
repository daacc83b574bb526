//! The steering XDP program: load, register sockets, attach through a bpf_link,
//! read counters. The one FFI call libbpf-rs does not wrap with flags
//! (`bpf_link_create` with a native/generic mode) is here, documented.

use crate::xdpfilter::{tail_program, CaptureFilter, FilterMaps};
use crate::CaptureError;
use libbpf_rs::libbpf_sys;
use libbpf_rs::{MapCore, MapFlags, Object, ObjectBuilder};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use wiretape_filter::kernel::{LoadOptions, XdpProgram};

static STEER_OBJ: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/steer.bpf.o"));

/// Highest queue count the program's maps hold.
pub const MAX_QUEUES: u32 = 256;

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (fastest); veth supports it.
    Native,
    /// In the generic skb path (any device, slower).
    Generic,
}

impl XdpMode {
    /// `native` or `generic`, as the command line takes it and reports print it.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
    fn flags(self) -> u32 {
        match self {
            XdpMode::Native => libbpf_sys::XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => libbpf_sys::XDP_FLAGS_SKB_MODE,
        }
    }
}

/// Per-queue counters of the steering program (summed over CPUs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueCounters {
    /// Frames on a captured queue: redirect to its socket attempted.
    pub seen: u64,
    /// Frames on a queue without a socket, left to the stack.
    pub passed: u64,
    /// Frames without a metadata timestamp.
    pub meta_fail: u64,
    /// Bytes of the seen frames.
    pub bytes: u64,
    /// Frames the NIC stamped (hw program only).
    pub hw: u64,
    /// Seen frames the capture filter rejected (left to the stack).
    pub filtered: u64,
    /// Seen frames the filter kept and the cutoff dropped.
    pub cutoff: u64,
    /// Their bytes.
    pub cutoff_bytes: u64,
    /// Connections the cutoff added to its table.
    pub cutoff_inserts: u64,
}

/// The per-connection cutoff in the XDP program (`--cutoff SIZE
/// --cutoff-flows N`; the rule is [`crate::cutoff`]'s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpCutoff {
    /// SIZE: bytes kept per connection.
    pub size: u64,
    /// The LRU table's capacity (connections).
    pub flows: u32,
}

/// Refuses an interface that already has an XDP program (naming it), so
/// that nothing of ours is opened or loaded for it.
pub fn refuse_attached(ifindex: u32, ifname: &str) -> Result<(), CaptureError> {
    match attached_program(ifindex) {
        Some(p) => Err(CaptureError::AlreadyAttached {
            ifname: ifname.into(),
            id: p.id,
            name: p.name,
            mode: p.mode,
        }),
        None => Ok(()),
    }
}

/// Whether interface `ifindex`'s driver offers AF_XDP zero-copy sockets
/// (`NETDEV_XDP_ACT_XSK_ZEROCOPY` in the XDP features the kernel reports
/// through the netdev netlink family, 6.3 and later). None when the kernel
/// cannot say (older kernel, no such interface).
pub fn xsk_zero_copy(ifindex: u32) -> Option<bool> {
    const NETDEV_XDP_ACT_XSK_ZEROCOPY: u64 = 1 << 3;
    // SAFETY: plain data; `sz` tells libbpf how much of it we know.
    let mut q: libbpf_sys::bpf_xdp_query_opts = unsafe { std::mem::zeroed() };
    q.sz = std::mem::size_of::<libbpf_sys::bpf_xdp_query_opts>() as _;
    // SAFETY: q is a live, sized opts struct that libbpf fills in.
    if unsafe { libbpf_sys::bpf_xdp_query(ifindex as i32, 0, &mut q) } != 0 {
        return None;
    }
    // A kernel without the netdev family (before 6.3) leaves the features
    // at 0, as a kernel that has it does for a driver without native XDP.
    if q.feature_flags == 0 && !kernel_at_least(6, 3) {
        return None;
    }
    Some(q.feature_flags & NETDEV_XDP_ACT_XSK_ZEROCOPY != 0)
}

/// Whether the running kernel is `major.minor` or later (/proc/sys/kernel/osrelease).
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = r
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// What XDP program `ifindex` has attached, if any (a netlink query; needs
/// no program of ours).
pub fn attached_program(ifindex: u32) -> Option<AttachedProgram> {
    // SAFETY: plain data; `sz` tells libbpf how much of it we know.
    let mut q: libbpf_sys::bpf_xdp_query_opts = unsafe { std::mem::zeroed() };
    q.sz = std::mem::size_of::<libbpf_sys::bpf_xdp_query_opts>() as _;
    // SAFETY: q is a live, sized opts struct that libbpf fills in.
    if unsafe { libbpf_sys::bpf_xdp_query(ifindex as i32, 0, &mut q) } != 0 {
        return None;
    }
    let (id, mode) = [
        (q.drv_prog_id, "native"),
        (q.skb_prog_id, "generic"),
        (q.hw_prog_id, "offloaded"),
        (q.prog_id, "unknown"),
    ]
    .into_iter()
    .find(|(id, _)| *id != 0)?;
    let name = libbpf_rs::query::ProgInfoIter::default()
        .find(|p| p.id == id)
        .map(|p| p.name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "?".into());
    Some(AttachedProgram { id, name, mode })
}

/// The loaded program and its maps.
pub struct SteerProgram {
    // Declared before `obj`: the filter program goes first (the program
    // array holds its own reference anyway).
    filter: Option<XdpProgram>,
    obj: Object,
    prog: &'static str,
    cutoff: Option<XdpCutoff>,
    /// Bound to one device and asking the NIC for receive stamps.
    pub hw: bool,
}

/// An attached program; dropping it detaches (closing the link fd). A crash
/// closes the fd too, so wiretape never leaves its program on an interface.
pub struct XdpLink {
    _fd: OwnedFd,
    /// The mode it was attached in.
    pub mode: XdpMode,
}

/// What is attached to an interface already.
#[derive(Clone, Debug)]
pub struct AttachedProgram {
    /// The kernel's program id (as `bpftool prog show` lists it).
    pub id: u32,
    /// The program's name; `?` when it could not be looked up by id.
    pub name: String,
    /// How it is attached: `native`, `generic`, `offloaded` or `unknown`.
    pub mode: &'static str,
}

impl SteerProgram {
    /// The plain program (any device, native or generic mode).
    pub fn load() -> Result<Self, CaptureError> {
        Self::load_with(None, None)
    }

    /// The device-bound program that reads NIC timestamps on `ifindex`
    /// (native mode only; fails where the driver lacks the metadata kfunc).
    pub fn load_hw(ifindex: u32) -> Result<Self, CaptureError> {
        Self::load_with(Some(ifindex), None)
    }

    /// The plain program (`hw_ifindex` None) or the device-bound one, with
    /// the per-connection cutoff on when `cutoff` is given: its program
    /// `wiretape_cutoff` goes into the tail-call slot 1, which the steering
    /// program calls without a filter and the filter's accept path calls
    /// with one ([`install_filter`](Self::install_filter)).
    pub fn load_with(
        hw_ifindex: Option<u32>,
        cutoff: Option<XdpCutoff>,
    ) -> Result<Self, CaptureError> {
        let mut open = ObjectBuilder::default()
            .open_memory(STEER_OBJ)
            .map_err(|e| CaptureError::Bpf(format!("opening the steering program: {e}")))?;
        let prog = if hw_ifindex.is_some() {
            "wiretape_steer_hw"
        } else {
            "wiretape_steer"
        };
        // The cutoff's table holds one entry when it is off: an LRU map is
        // preallocated (112 bytes per entry on 6.18).
        let flows = cutoff.map_or(1, |c| c.flows.max(1));
        for mut m in open.maps_mut() {
            if m.name() == "cutoff_flows" {
                m.set_max_entries(flows).map_err(|e| {
                    CaptureError::Bpf(format!("sizing the cutoff's table ({flows} flows): {e}"))
                })?;
            }
        }
        for mut p in open.progs_mut() {
            if p.name() == "wiretape_cutoff" {
                // An ordinary program even under the device-bound one: the
                // kernel refuses device-bound programs in program arrays.
                p.set_autoload(cutoff.is_some());
            } else if p.name() != prog {
                p.set_autoload(false);
            } else if let Some(ifindex) = hw_ifindex {
                p.set_ifindex(ifindex);
                p.set_flags(libbpf_sys::BPF_F_XDP_DEV_BOUND_ONLY);
            }
        }
        crate::bpflog::install();
        crate::bpflog::clear();
        let obj = open.load().map_err(|e| {
            let s = e.to_string();
            if s.contains("Operation not permitted") || s.contains("EPERM") {
                CaptureError::Permission("loading the XDP program (CAP_BPF)".into())
            } else {
                // libbpf's log (the verifier's last words) says why.
                let why = crate::bpflog::reason(2);
                let why = if why.is_empty() {
                    why
                } else {
                    format!(" ({why})")
                };
                CaptureError::Bpf(format!("loading the steering program: {s}{why}"))
            }
        })?;
        let me = SteerProgram {
            filter: None,
            obj,
            prog,
            cutoff,
            hw: hw_ifindex.is_some(),
        };
        if let Some(c) = cutoff {
            me.map("cutoff_size")
                .update(&0u32.to_ne_bytes(), &c.size.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| CaptureError::Bpf(format!("setting the cutoff's size: {e}")))?;
            let fd = me
                .obj
                .progs()
                .find(|p| p.name() == "wiretape_cutoff")
                .expect("steer.bpf.o has the cutoff program")
                .as_fd()
                .as_raw_fd();
            me.map("filter_prog")
                .update(
                    &1u32.to_ne_bytes(),
                    &(fd as u32).to_ne_bytes(),
                    MapFlags::ANY,
                )
                .map_err(|e| {
                    CaptureError::Bpf(format!(
                        "installing the cutoff program as the steering program's tail call: {e}"
                    ))
                })?;
        }
        Ok(me)
    }

    /// The cutoff this program applies, if any.
    pub fn cutoff(&self) -> Option<XdpCutoff> {
        self.cutoff
    }

    /// Connections in the cutoff's table now (one syscall per entry: for
    /// the end of a run, not a progress line).
    pub fn cutoff_flows_present(&self) -> u64 {
        self.map("cutoff_flows").keys().count() as u64
    }

    /// Loads the capture filter's program (see [`crate::xdpfilter`]) and
    /// puts it into the steering program's tail-call slot: from then on
    /// only the frames it accepts are redirected, the others are counted in
    /// `filtered` and passed to the stack. Before [`attach`](Self::attach),
    /// so that a refused filter leaves nothing attached.
    pub fn install_filter(&mut self, f: &CaptureFilter) -> Result<(), CaptureError> {
        let maps = FilterMaps {
            xsks: self.map("xsks").as_fd().as_raw_fd(),
            qstats: self.map("qstats").as_fd().as_raw_fd(),
            cutoff: self
                .cutoff
                .map(|_| self.map("filter_prog").as_fd().as_raw_fd()),
        };
        let insns =
            tail_program(&f.program, maps).map_err(|source| CaptureError::FilterTranslate {
                expr: f.expr.clone(),
                source,
            })?;
        self.install_insns(&f.expr, &insns, f.needs_perfmon())
    }

    /// Loads `insns` as the tail-call target and installs it.
    pub(crate) fn install_insns(
        &mut self,
        expr: &str,
        insns: &[wiretape_filter::ebpf::EbpfInsn],
        needs_perfmon: bool,
    ) -> Result<(), CaptureError> {
        let expected_attach_type = self
            .obj
            .progs()
            .find(|p| p.name() == self.prog)
            .expect("steer.bpf.o has the program")
            .attach_type() as u32;
        let opts = LoadOptions {
            name: "wt_filter".into(),
            expected_attach_type,
            ..Default::default()
        };
        let prog = XdpProgram::load_with(insns, &opts).map_err(|e| {
            let lines = e.verifier_tail(6).unwrap_or_else(|| vec![e.to_string()]);
            CaptureError::FilterRefused {
                expr: expr.to_string(),
                insns: insns.len(),
                log: lines.join(" | "),
                hint: if needs_perfmon {
                    " (the expression reads the frame length: loading it needs CAP_PERFMON)"
                } else {
                    ""
                },
            }
        })?;
        self.map("filter_prog")
            .update(
                &0u32.to_ne_bytes(),
                &(prog.as_fd().as_raw_fd() as u32).to_ne_bytes(),
                MapFlags::ANY,
            )
            .map_err(|e| {
                CaptureError::Bpf(format!(
                    "installing the filter program as the steering program's tail call: {e}"
                ))
            })?;
        self.filter = Some(prog);
        Ok(())
    }

    /// The installed filter program (for `BPF_PROG_TEST_RUN` in tests and
    /// benches).
    pub fn filter_program(&self) -> Option<&XdpProgram> {
        self.filter.as_ref()
    }

    /// Runs the loaded steering program `repeat` times on `frame` with
    /// `BPF_PROG_TEST_RUN`, as if it arrived on `ifindex` queue `queue`
    /// (nothing is attached; a redirect is only reported as
    /// `XDP_REDIRECT`). Returns the return value and the kernel's mean time
    /// per run. For tests and benches of the program as loaded.
    pub fn test_run(
        &mut self,
        frame: &[u8],
        ifindex: u32,
        queue: u32,
        repeat: u32,
    ) -> Result<(u32, std::time::Duration), CaptureError> {
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex,
        // rx_queue_index, egress_ifindex. data = 0 (no metadata given);
        // data_end = the frame's length, or newer kernels (6.18) take
        // data_end as the linear part's length and put the rest in frags.
        let mut ctx = [0u8; 24];
        let len = u32::try_from(frame.len())
            .map_err(|_| CaptureError::Bpf("test frame too large".into()))?;
        ctx[4..8].copy_from_slice(&len.to_ne_bytes());
        ctx[12..16].copy_from_slice(&ifindex.to_ne_bytes());
        ctx[16..20].copy_from_slice(&queue.to_ne_bytes());
        let input = libbpf_rs::ProgramInput {
            data_in: Some(frame),
            context_in: Some(&mut ctx),
            repeat,
            ..Default::default()
        };
        let name = self.prog;
        let out = self
            .obj
            .progs_mut()
            .find(|p| p.name() == name)
            .expect("steer.bpf.o has the program")
            .test_run(input)
            .map_err(|e| CaptureError::Bpf(format!("BPF_PROG_TEST_RUN: {e}")))?;
        Ok((out.return_value, out.duration))
    }

    fn map(&self, name: &str) -> libbpf_rs::Map<'_> {
        self.obj
            .maps()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("steer.bpf.o has no map {name}"))
    }

    fn prog_fd(&self) -> RawFd {
        self.obj
            .progs()
            .find(|p| p.name() == self.prog)
            .expect("steer.bpf.o has the program")
            .as_fd()
            .as_raw_fd()
    }

    /// Sends frames of `queue` to the socket `fd`.
    pub fn register(&self, queue: u32, fd: RawFd) -> Result<(), CaptureError> {
        self.map("xsks")
            .update(
                &queue.to_ne_bytes(),
                &(fd as u32).to_ne_bytes(),
                MapFlags::ANY,
            )
            .map_err(|e| CaptureError::Bpf(format!("registering the socket of queue {queue}: {e}")))
    }

    /// The counters of one queue.
    pub fn counters(&self, queue: u32) -> QueueCounters {
        let vals = self
            .map("qstats")
            .lookup_percpu(&queue.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .unwrap_or_default();
        let mut c = QueueCounters::default();
        for v in vals {
            let f = |i: usize| u64::from_ne_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
            c.seen += f(0);
            c.passed += f(1);
            c.meta_fail += f(2);
            c.bytes += f(3);
            c.hw += f(4);
            c.filtered += f(5);
            c.cutoff += f(6);
            c.cutoff_bytes += f(7);
            c.cutoff_inserts += f(8);
        }
        c
    }

    /// Attaches through a bpf_link in `mode`.
    pub fn attach(
        &self,
        ifindex: u32,
        ifname: &str,
        mode: XdpMode,
    ) -> Result<XdpLink, CaptureError> {
        // SAFETY: bpf_link_create_opts is plain data; all-zero is its default.
        let mut opts: libbpf_sys::bpf_link_create_opts = unsafe { std::mem::zeroed() };
        opts.sz = std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _;
        opts.flags = mode.flags();
        // SAFETY: valid program fd, ifindex as target (BPF_XDP), opts points
        // to a live, sized struct. Returns a new fd we own, or -errno.
        let rc = unsafe {
            libbpf_sys::bpf_link_create(self.prog_fd(), ifindex as i32, libbpf_sys::BPF_XDP, &opts)
        };
        if rc < 0 {
            let err = std::io::Error::from_raw_os_error(-rc);
            return Err(match -rc {
                // Attached by someone else since the check before start.
                libc::EBUSY | libc::EEXIST => match refuse_attached(ifindex, ifname) {
                    Err(e) => e,
                    Ok(()) => CaptureError::Attach {
                        ifname: ifname.into(),
                        mode: mode.name(),
                        source: err,
                    },
                },
                libc::EPERM | libc::EACCES => {
                    CaptureError::Permission(format!("attaching XDP to {ifname}"))
                }
                _ => CaptureError::Attach {
                    ifname: ifname.into(),
                    mode: mode.name(),
                    source: err,
                },
            });
        }
        // SAFETY: rc is a fresh fd returned to us by the kernel.
        let fd = unsafe { OwnedFd::from_raw_fd(rc) };
        Ok(XdpLink { _fd: fd, mode })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiretape_filter::ebpf::{eop::*, EbpfInsn};

    /// A program the verifier refuses is reported with the verifier's own
    /// last words, and nothing is installed.
    #[test]
    fn a_refused_filter_program_names_the_verifier_reason() {
        if !crate::sys::is_root() {
            eprintln!("note: not root: skipped");
            return;
        }
        let mut prog = SteerProgram::load().unwrap();
        // A packet load without the bounds check.
        let bad = [
            EbpfInsn::new(LDX | MEM | W, 2, 1, 0, 0),
            EbpfInsn::new(LDX | MEM | B, 0, 2, 0, 0),
            EbpfInsn::new(JMP | EXIT, 0, 0, 0, 0),
        ];
        let e = prog.install_insns("unchecked", &bad, false).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, CaptureError::FilterRefused { .. }), "{msg}");
        assert!(
            msg.contains("verifier refused") && msg.contains("invalid access to packet"),
            "{msg}"
        );
        assert!(prog.filter_program().is_none());
    }
}
