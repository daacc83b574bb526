//! The preflight (`wiretape record ... --check`): everything a recording of
//! a [`RecordConfig`] would check or trip on, without recording: the
//! interface and its queues, the CPUs (as parsed), the rights (each
//! capability, the locked-memory limit), an XDP program already attached,
//! the capture filter (compiled by libpcap, then the steering program and
//! the filter program loaded into the kernel, so the verifier has its say,
//! and dropped: nothing is attached), the output directory (writable, or
//! creatable), O_DIRECT, free space, the metrics address. [`preflight`]
//! returns what it checked, or the first problem as the error a real run
//! would meet. The rights checks a recording makes before it starts are
//! here too ([`check_rights`], [`check_basic_rights`]), and what it is
//! worth telling before a busy-polling one ([`busy_poll_undeferred`]).

use crate::{Input, RecordConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use wiretape_capture::sys::{self, MissingCap};
use wiretape_capture::{CaptureConfig, CaptureError, CaptureFilter};
use wiretape_filter::FilterError;
use wiretape_storage::{IoMode, StorageError};

/// What the preflight checked, when everything passed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Preflight {
    /// Each thing checked, as a short phrase (`interface eth0 (driver ...)`,
    /// `rights (root)`, `directory /data (O_DIRECT, ...)`), in order.
    pub passed: Vec<String>,
}

/// Why a recording could not start (the first problem found).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PreflightError {
    /// The capture filter does not compile (libpcap's message).
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// The capture engine's side: queues, link type, an XDP program
    /// already attached, the verifier.
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// The output directory or the input file.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The same interface twice.
    #[error("interface {0} is given twice: give each interface once")]
    Twice(String),
    /// No such interface here.
    #[error("no such interface '{0}' in this network namespace (list interfaces with `ip link`)")]
    NoSuchInterface(String),
    /// /dev/netmap cannot be opened.
    #[error(
        "cannot open /dev/netmap ({0}): is the netmap module loaded, and may this user open it?"
    )]
    Netmap(std::io::Error),
    /// Capabilities an AF_XDP recording needs and lacks.
    #[error(
        "missing {} {}: run as root, or grant CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW and \
         CAP_IPC_LOCK (`setcap cap_net_admin,cap_bpf,cap_net_raw,cap_ipc_lock+ep $(command -v wiretape)`, \
         or AmbientCapabilities= in its systemd unit)",
        if .0.len() == 1 { "capability" } else { "capabilities" },
        .0.iter().map(|m| format!("{} ({})", m.name, m.why)).collect::<Vec<_>>().join(", ")
    )]
    Rights(Vec<MissingCap>),
    /// Capabilities sending and the smaller tools need and lack.
    #[error(
        "not root and missing capabilities: run as root (sudo), or grant them once with \
         `setcap cap_net_admin,cap_bpf,cap_net_raw,cap_ipc_lock+ep $(command -v wiretape)`"
    )]
    BasicRights(Vec<MissingCap>),
    /// O_DIRECT asked for, on a filesystem that refuses it.
    #[error("output directory {} is on a filesystem that refuses O_DIRECT: use the auto or buffered I/O mode", .0.display())]
    NoDirect(PathBuf),
    /// Less free space than the blocks the writers keep in flight.
    #[error(
        "output directory {}: only {} free, less than the {} its {queues} queue(s) write at once: free space or choose another output directory",
        dir.display(), crate::summary::bytes_h(*free), crate::summary::bytes_h(*need)
    )]
    Space {
        /// The output directory.
        dir: PathBuf,
        /// Its free bytes.
        free: u64,
        /// What the writers need at once.
        need: u64,
        /// The queues recorded.
        queues: u64,
    },
    /// A volume (output directory) given twice, by the same path or two
    /// paths to one directory.
    #[error("volume {} is given twice (as {}): give each volume once", .given.display(), .first.display())]
    VolumeTwice {
        /// The later path.
        given: PathBuf,
        /// The earlier path to the same directory.
        first: PathBuf,
    },
    /// A volume inside another (one volume's files would be the other's too).
    #[error(
        "volume {} is inside volume {}: volumes must not nest (give separate directories, normally one per disk)",
        .inner.display(), .outer.display()
    )]
    VolumesNest {
        /// The volume inside.
        inner: PathBuf,
        /// The volume it is in.
        outer: PathBuf,
    },
    /// An output directory to be made whose parent does not exist, where
    /// making the whole path was not asked for (a typo, most often).
    #[error(
        "output directory {}: its parent {} does not exist (a typo?): give an existing path, or have the whole path created",
        .dir.display(), .parent.display()
    )]
    NoParent {
        /// The output directory as given.
        dir: PathBuf,
        /// Its parent, which does not exist.
        parent: PathBuf,
    },
    /// A queue asked for that the interface lacks (a veth has one).
    #[error(
        "interface {ifname} has no RX queue {queue}: it has {count} ({}): name queues below {count}, or record them all (`ethtool -l {ifname}` lists them)",
        queue_range(*count)
    )]
    NoQueue {
        /// The interface.
        ifname: String,
        /// The first queue asked for that it lacks.
        queue: u32,
        /// Its RX queues (at least 1).
        count: u32,
        /// The queues asked for, in order.
        asked: Vec<u32>,
    },
    /// The capture file to read is missing, a directory, empty or
    /// unreadable (what its bytes are is the reader's to say).
    #[error("cannot read {}: {problem}", .path.display())]
    InputFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: InputProblem,
    },
    /// The metrics address cannot be listened on.
    #[error("cannot listen on {addr} for the metrics endpoint: {source}")]
    MetricsAddress {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What is wrong with a capture file given as input
/// ([`PreflightError::InputFile`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputProblem {
    /// It does not exist.
    #[error("no such file (give a pcap or pcapng file)")]
    Missing,
    /// It is a directory.
    #[error("a directory (give a pcap or pcapng file)")]
    Directory,
    /// It has no bytes.
    #[error("it is empty, not a pcap or pcapng file (give a capture file)")]
    Empty,
    /// It cannot be opened or read.
    #[error(transparent)]
    Unreadable(std::io::Error),
}

/// A capture file to read has bytes in it: else what is wrong (missing, a
/// directory, empty, unreadable).
pub fn check_input_file(path: &Path) -> Result<(), PreflightError> {
    use std::io::Read;
    let problem = if !path.exists() {
        InputProblem::Missing
    } else if path.is_dir() {
        InputProblem::Directory
    } else {
        let mut first = [0u8; 1];
        match std::fs::File::open(path).and_then(|mut f| f.read(&mut first)) {
            Ok(0) => InputProblem::Empty,
            Ok(_) => return Ok(()),
            Err(e) => InputProblem::Unreadable(e),
        }
    };
    Err(PreflightError::InputFile {
        path: path.to_owned(),
        problem,
    })
}

/// The cheap checks a recording of `config` makes first, so that bad
/// input fails before anything is created or attached: each interface
/// exists, a capture file has bytes ([`check_input_file`]), the rights of
/// an AF_XDP recording ([`check_rights`]; the packet engine's sockets say
/// what they lack themselves, netmap needs only /dev/netmap).
pub fn check_start(config: &RecordConfig) -> Result<(), PreflightError> {
    let names: Vec<&str> = match &config.input {
        Input::Interface(c) => vec![&c.ifname],
        Input::Interfaces(l) => l.iter().map(|c| c.ifname.as_str()).collect(),
        Input::Packet(l) => l.iter().map(|c| c.ifname.as_str()).collect(),
        Input::Netmap(c) => vec![&c.ifname],
        Input::File(f) => return check_input_file(&f.path),
    };
    if let Some(n) = names.iter().find(|n| sys::ifindex(n).is_none()) {
        return Err(PreflightError::NoSuchInterface(n.to_string()));
    }
    let perfmon = filter_needs_perfmon(config.filter.as_deref(), config.storage.snaplen);
    match &config.input {
        Input::Interface(c) => check_rights(locked_bytes(c), perfmon),
        Input::Interfaces(list) => check_rights(list.iter().map(locked_bytes).sum(), perfmon),
        _ => Ok(()),
    }
}

/// An interface a busy-polling recording reads whose interrupts take the
/// receive work back between polls (its `napi_defer_hard_irqs` or
/// `gro_flush_timeout` is 0), so that busy polling saves less than it
/// could. Its text says so and how to change it (as root).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Undeferred {
    /// The interface.
    pub ifname: String,
    /// The recording's busy-poll time per poll, in microseconds.
    pub usecs: u32,
    /// Its `napi_defer_hard_irqs`.
    pub defer_hard_irqs: u64,
    /// Its `gro_flush_timeout` (ns).
    pub gro_flush_timeout: u64,
}

impl std::fmt::Display for Undeferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Undeferred {
            ifname,
            defer_hard_irqs,
            gro_flush_timeout,
            ..
        } = self;
        write!(
            f,
            "{ifname} has napi_defer_hard_irqs {defer_hard_irqs} and gro_flush_timeout \
             {gro_flush_timeout}, so between polls its interrupts (on veth: the sender's \
             softirq) take the receive work back; for full effect (as root): \
             echo 2 > /sys/class/net/{ifname}/napi_defer_hard_irqs; \
             echo 200000 > /sys/class/net/{ifname}/gro_flush_timeout"
        )
    }
}

/// The interfaces of `config` that busy-poll ([`CaptureConfig::busy_poll`])
/// with their interrupts taking the receive work back between polls
/// ([`Undeferred`]); empty without busy polling.
pub fn busy_poll_undeferred(config: &RecordConfig) -> Vec<Undeferred> {
    let list = match &config.input {
        Input::Interface(c) => std::slice::from_ref(c),
        Input::Interfaces(l) => l.as_slice(),
        _ => &[],
    };
    list.iter()
        .filter_map(|c| {
            let usecs = c.busy_poll.as_ref()?.usecs;
            let (defer, timeout) = sys::napi_defer(&c.ifname)?;
            (defer == 0 || timeout == 0).then(|| Undeferred {
                ifname: c.ifname.clone(),
                usecs,
                defer_hard_irqs: defer,
                gro_flush_timeout: timeout,
            })
        })
        .collect()
}

/// Fails, naming each missing capability and what it is for, when the
/// process lacks the rights to record with AF_XDP (checked against its
/// effective capabilities, also as root: a container may have dropped
/// some). `locked_bytes`: the UMEM it will pin ([`locked_bytes`]);
/// `perfmon`: the filter reads the frame length ([`filter_needs_perfmon`]).
pub fn check_rights(locked_bytes: u64, perfmon: bool) -> Result<(), PreflightError> {
    let missing = sys::missing_capabilities(locked_bytes, perfmon);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(PreflightError::Rights(missing))
    }
}

/// The rights sending and the smaller tools check before they start:
/// root, or at least CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF.
pub fn check_basic_rights() -> Result<(), PreflightError> {
    let missing = sys::missing_basic_capabilities();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(PreflightError::BasicRights(missing))
    }
}

/// The UMEM bytes a recording of `c` pins: frames x frame size per queue.
pub fn locked_bytes(c: &CaptureConfig) -> u64 {
    let queues = match &c.queues {
        Some(q) => q.len() as u64,
        None => sys::rx_queue_count(&c.ifname).unwrap_or(1).max(1) as u64,
    };
    queues * c.frames as u64 * c.frame_size as u64
}

/// Does `expr` need CAP_PERFMON in the XDP program (it reads the length)?
/// False when it does not compile (the recording reports that itself).
pub fn filter_needs_perfmon(expr: Option<&str>, snaplen: u32) -> bool {
    expr.and_then(|e| CaptureFilter::compile(e, wiretape_filter::LINKTYPE_ETHERNET, snaplen).ok())
        .is_some_and(|f| f.needs_perfmon())
}

/// The nearest existing directory at or above `p` (where `p` would be
/// created); `.` for a relative path none of whose parts exists.
pub fn nearest_existing(p: &Path) -> PathBuf {
    let mut q = p.to_path_buf();
    while !q.exists() {
        if !q.pop() {
            return PathBuf::from(".");
        }
    }
    if q.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        q
    }
}

/// `0` for one queue, `0-{n-1}` for more.
pub fn queue_range(count: u32) -> String {
    if count <= 1 {
        "0".to_string()
    } else {
        format!("0-{}", count - 1)
    }
}

/// The queues each interface of `config` is to record from exist
/// (checked before anything is made or attached: the engine would refuse a
/// missing one only once opening). An interface that does not exist is
/// left to the checks that name it.
pub fn check_queues(config: &RecordConfig) -> Result<(), PreflightError> {
    let named: Vec<(&str, &[u32])> = match &config.input {
        Input::Interface(c) => vec![(c.ifname.as_str(), c.queues.as_deref().unwrap_or(&[]))],
        Input::Interfaces(l) => l
            .iter()
            .map(|c| (c.ifname.as_str(), c.queues.as_deref().unwrap_or(&[])))
            .collect(),
        Input::Netmap(c) => vec![(c.ifname.as_str(), c.queues.as_deref().unwrap_or(&[]))],
        _ => Vec::new(),
    };
    for (iface, queues) in named {
        let Ok(count) = sys::rx_queue_count(iface) else {
            continue;
        };
        let count = count.max(1);
        if let Some(&q) = queues.iter().find(|&&q| q >= count) {
            return Err(PreflightError::NoQueue {
                ifname: iface.to_string(),
                queue: q,
                count,
                asked: queues.to_vec(),
            });
        }
    }
    Ok(())
}

/// Several volumes (output directories): none twice (two paths to one
/// directory count), none inside another. Looks at the paths only (each
/// made absolute, through its symbolic links where it exists).
pub fn check_volumes(dirs: &[PathBuf]) -> Result<(), PreflightError> {
    for (i, a) in dirs.iter().enumerate() {
        for b in &dirs[..i] {
            let (x, y) = (canonical(a), canonical(b));
            if x == y {
                return Err(PreflightError::VolumeTwice {
                    given: a.clone(),
                    first: b.clone(),
                });
            }
            if x.starts_with(&y) || y.starts_with(&x) {
                let (inner, outer) = if x.starts_with(&y) { (a, b) } else { (b, a) };
                return Err(PreflightError::VolumesNest {
                    inner: inner.clone(),
                    outer: outer.clone(),
                });
            }
        }
    }
    Ok(())
}

/// `dir` as the path two names of one directory share: canonical where it
/// exists, else its parent's canonical path and its name (a directory the
/// recording will make), else absolute (as given when even that fails).
pub(crate) fn canonical(dir: &Path) -> PathBuf {
    if let Ok(c) = dir.canonicalize() {
        return c;
    }
    if let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        if let Ok(p) = parent.canonicalize() {
            return p.join(name);
        }
    }
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned())
}

/// An output directory as given: a directory, or a path whose parent
/// exists (with `create_all`, any path: its missing parents would be
/// made), writable where it is or will be made. Creates nothing (a probe
/// file is made and removed).
pub fn check_output_dir(dir: &Path, create_all: bool) -> Result<(), PreflightError> {
    let probe_in = if dir.exists() {
        if !dir.is_dir() {
            return Err(StorageError::NotADirectory(dir.to_owned()).into());
        }
        dir.to_owned()
    } else {
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        if !parent.is_dir() && !create_all {
            return Err(PreflightError::NoParent {
                dir: dir.to_owned(),
                parent,
            });
        }
        nearest_existing(dir)
    };
    if !probe_in.is_dir() {
        return Err(StorageError::NotADirectory(probe_in).into());
    }
    Ok(probe_writable(&probe_in, dir)?)
}

/// Whether a file can be made in `probe_in` (the output directory `dir`,
/// or where it would be created): a probe file is made and removed.
pub fn probe_writable(probe_in: &Path, dir: &Path) -> Result<(), StorageError> {
    let probe = probe_in.join(format!(".wiretape-probe-{}", std::process::id()));
    std::fs::File::create(&probe).map_err(|source| StorageError::NotWritable {
        path: dir.to_owned(),
        source,
    })?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// Runs the checks of a recording of `config` (see the module docs);
/// `metrics`: the address the metrics endpoint would listen on.
pub fn preflight(
    config: &RecordConfig,
    metrics: Option<SocketAddr>,
) -> Result<Preflight, PreflightError> {
    let mut ok: Vec<String> = Vec::new();
    let ethernet_filter = || match &config.filter {
        Some(e) => CaptureFilter::compile(
            e,
            wiretape_filter::LINKTYPE_ETHERNET,
            config.storage.snaplen,
        )
        .map(Some),
        None => Ok(None),
    };
    let exists = |ifname: &str| match sys::ifindex(ifname) {
        Some(_) => Ok(()),
        None => Err(PreflightError::NoSuchInterface(ifname.to_string())),
    };
    let once = |names: &[&str]| {
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(PreflightError::Twice(n.to_string()));
            }
        }
        Ok(())
    };
    match &config.input {
        Input::Interface(_) | Input::Interfaces(_) => {
            let list: Vec<&CaptureConfig> = match &config.input {
                Input::Interface(c) => vec![c],
                Input::Interfaces(l) => l.iter().collect(),
                _ => unreachable!("matched above"),
            };
            once(&list.iter().map(|c| c.ifname.as_str()).collect::<Vec<_>>())?;
            let filter = ethernet_filter()?;
            check_afxdp(&list, filter.as_ref(), &mut ok)?;
        }
        Input::Packet(list) => {
            let names: Vec<&str> = list.iter().map(|c| c.ifname.as_str()).collect();
            for (i, n) in names.iter().enumerate() {
                once(&names[..=i])?;
                exists(n)?;
            }
            ethernet_filter()?;
            ok.push(format!(
                "interfaces {} (packet engine: {} blocks x {} KiB per queue)",
                names.join(","),
                list[0].blocks,
                list[0].block_size / 1024
            ));
        }
        Input::Netmap(c) => {
            exists(&c.ifname)?;
            ethernet_filter()?;
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/netmap")
                .map_err(PreflightError::Netmap)?;
            ok.push(format!("interface {} (netmap)", c.ifname));
        }
        Input::File(f) => {
            let src = crate::FileSource::open_with(&f.path, &config.storage.read)?;
            if let Some(e) = &config.filter {
                CaptureFilter::compile(e, src.linktype(), config.storage.snaplen)?;
                ok.push(format!("filter '{e}'"));
            }
            ok.push(format!("input {}", f.path.display()));
        }
    }
    // Every volume of the store (`-w` given more than once), each with
    // its own line.
    let dirs = config.storage.dirs();
    for dir in &dirs {
        ok.push(check_dir(config, dir, dirs.len() as u64)?);
    }
    if let Some(addr) = metrics {
        std::net::TcpListener::bind(addr)
            .map_err(|source| PreflightError::MetricsAddress { addr, source })?;
        ok.push(format!("metrics address {addr}"));
    }
    Ok(Preflight { passed: ok })
}

/// The AF_XDP interfaces: each exists with its queues and takes the
/// filter; the rights; no XDP program attached; the program and the
/// filter loaded (never attached), so the verifier has its say.
fn check_afxdp(
    list: &[&CaptureConfig],
    filter: Option<&CaptureFilter>,
    ok: &mut Vec<String>,
) -> Result<(), PreflightError> {
    for c in list {
        check_interface(c, filter, ok)?;
    }
    check_rights(
        list.iter().map(|c| locked_bytes(c)).sum(),
        filter.is_some_and(|f| f.needs_perfmon()),
    )?;
    ok.push(if sys::is_root() {
        "rights (root)".into()
    } else {
        "rights (capabilities)".into()
    });
    for c in list {
        let ifindex = sys::ifindex(&c.ifname).unwrap_or(0);
        wiretape_capture::bpf::refuse_attached(ifindex, &c.ifname)?;
    }
    let mut prog = wiretape_capture::bpf::SteerProgram::load_with(None, list[0].cutoff)?;
    if let Some(c) = list[0].cutoff {
        ok.push(format!(
            "cutoff {} bytes per connection, table of {} connections (loaded)",
            c.size, c.flows
        ));
    }
    if let Some(f) = filter {
        prog.install_filter(f)?;
        ok.push(format!("filter '{}' (loaded, not attached)", f.expr));
    } else {
        ok.push("XDP program (loaded, not attached)".into());
    }
    drop(prog);
    if let Some(cpus) = &list[0].cpus {
        ok.push(format!("poll CPUs {cpus:?}"));
    }
    if let Some(cpus) = &list[0].writer_cpus {
        ok.push(format!("writer CPUs {cpus:?}"));
    }
    Ok(())
}

/// One AF_XDP interface: it exists, has the queues, can take the filter.
fn check_interface(
    c: &CaptureConfig,
    filter: Option<&CaptureFilter>,
    ok: &mut Vec<String>,
) -> Result<(), PreflightError> {
    let ifname = &c.ifname;
    if sys::ifindex(ifname).is_none() {
        return Err(PreflightError::NoSuchInterface(ifname.clone()));
    }
    let count = sys::rx_queue_count(ifname).unwrap_or(1).max(1);
    if let Some(q) = c
        .queues
        .as_ref()
        .and_then(|l| l.iter().find(|&&q| q >= count))
    {
        return Err(CaptureError::NoSuchQueue {
            ifname: ifname.clone(),
            queue: *q,
            count,
            last: count - 1,
        }
        .into());
    }
    let queues = c.queues.as_ref().map(|l| l.len() as u32).unwrap_or(count);
    let driver = sys::driver_name(ifname).unwrap_or_else(|| "?".into());
    ok.push(format!(
        "interface {ifname} (driver {driver}, {count} RX queues; recording {queues})"
    ));
    if filter.is_some() {
        if let Some(arphrd) = sys::arphrd(ifname).filter(|&t| t != 1) {
            return Err(CaptureError::FilterLinkType {
                ifname: ifname.clone(),
                arphrd,
            }
            .into());
        }
    }
    Ok(())
}

/// An output directory (one volume of `volumes`): writable (or its nearest
/// existing ancestor, where it would be created), O_DIRECT, free space for
/// at least the blocks its share of the queues keeps in flight.
fn check_dir(config: &RecordConfig, dir: &Path, volumes: u64) -> Result<String, PreflightError> {
    let st = &config.storage;
    let dir = &dir.to_path_buf();
    let (probe_in, created) = if dir.exists() {
        if !dir.is_dir() {
            return Err(StorageError::NotADirectory(dir.clone()).into());
        }
        (dir.clone(), false)
    } else {
        (nearest_existing(dir), true)
    };
    probe_writable(&probe_in, dir)?;
    let direct = wiretape_storage::uring::direct_supported(&probe_in);
    let engine = match st.io {
        IoMode::Direct if !direct => return Err(PreflightError::NoDirect(dir.clone())),
        IoMode::Buffered => "buffered writes",
        _ if direct => "O_DIRECT",
        _ => "buffered writes (no O_DIRECT there)",
    };
    // With several volumes each queue's file is on one of them at a time:
    // each volume needs room for its share of the queues.
    let queues = queue_count(&config.input).div_ceil(volumes.max(1));
    let need = queues * st.block_size as u64 * st.buffers as u64;
    let space = match wiretape_storage::fs_space(&probe_in) {
        // A filesystem that reports no size (ramfs) has no figure to check.
        Some((free, total)) if total > 0 => {
            if free < need {
                return Err(PreflightError::Space {
                    dir: dir.clone(),
                    free,
                    need,
                    queues,
                });
            }
            let low = st
                .retention
                .min_free_of(dir)
                .is_some_and(|m| m.below(free, total));
            format!(
                "{} free of {}{}",
                crate::summary::bytes_h(free),
                crate::summary::bytes_h(total),
                if low {
                    " (below --min-free: retention deletes our oldest files at the start)"
                } else {
                    ""
                }
            )
        }
        _ => "free space unknown".into(),
    };
    Ok(format!(
        "{} {}{} ({engine}, {space}{})",
        if volumes > 1 { "volume" } else { "directory" },
        dir.display(),
        if created { " (will be created)" } else { "" },
        limits(&st.retention, dir)
    ))
}

/// The limits of volume `dir` beyond the store's `--keep-*`: its
/// free-space floor (its own or the store's) and its own `--keep-bytes`,
/// as flags (`, --min-free /disk3=5%, --keep-bytes /disk3=400G`).
fn limits(p: &wiretape_storage::Policy, dir: &Path) -> String {
    use crate::options::{min_free_text, size_text};
    let own = p.of_volume(dir);
    let mut s = String::new();
    match (own.min_free, p.min_free) {
        (Some(m), _) => s += &format!(", --min-free {}={}", dir.display(), min_free_text(m)),
        (None, Some(m)) => s += &format!(", --min-free {}", min_free_text(m)),
        (None, None) => {}
    }
    if let Some(b) = own.keep_bytes {
        s += &format!(", --keep-bytes {}={}", dir.display(), size_text(b));
    }
    s
}

/// The queues a recording of `input` writes (the interfaces' RX queues
/// where no list is given).
fn queue_count(input: &Input) -> u64 {
    let of = |ifname: &str, q: &Option<Vec<u32>>| {
        q.as_ref()
            .map(|l| l.len() as u64)
            .unwrap_or_else(|| sys::rx_queue_count(ifname).unwrap_or(1).max(1) as u64)
    };
    match input {
        Input::Interface(c) => of(&c.ifname, &c.queues),
        Input::Interfaces(l) => l.iter().map(|c| of(&c.ifname, &c.queues)).sum(),
        Input::Netmap(c) => of(&c.ifname, &c.queues),
        Input::Packet(l) => l.iter().map(|c| of(&c.ifname, &c.queues)).sum(),
        Input::File(_) => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_capability_is_named_with_what_it_is_for() {
        let e = PreflightError::Rights(vec![MissingCap {
            name: "CAP_BPF",
            why: "to load the XDP program and its maps".into(),
        }]);
        assert!(e.to_string().starts_with(
            "missing capability CAP_BPF (to load the XDP program and its maps): run as root"
        ));
    }

    #[test]
    fn busy_polling_names_interfaces_whose_interrupts_take_the_work_back() {
        let mut config = RecordConfig::interface("lo", std::env::temp_dir());
        assert!(busy_poll_undeferred(&config).is_empty(), "no busy polling");
        let Input::Interface(c) = &mut config.input else {
            unreachable!()
        };
        c.busy_poll = Some(wiretape_capture::BusyPoll {
            usecs: 50,
            budget: 64,
        });
        let found = busy_poll_undeferred(&config);
        match sys::napi_defer("lo") {
            Some((d, t)) if d == 0 || t == 0 => {
                assert_eq!(found.len(), 1, "{found:?}");
                assert_eq!(found[0].usecs, 50);
                let text = found[0].to_string();
                assert!(
                    text.starts_with(&format!(
                        "lo has napi_defer_hard_irqs {d} and gro_flush_timeout {t}, so"
                    )),
                    "{text}"
                );
                assert!(
                    text.ends_with("echo 200000 > /sys/class/net/lo/gro_flush_timeout"),
                    "{text}"
                );
            }
            _ => assert!(found.is_empty(), "{found:?}"),
        }
    }

    #[test]
    fn the_nearest_existing_directory_is_where_a_path_would_be_made() {
        let tmp = std::env::temp_dir();
        assert_eq!(nearest_existing(&tmp.join("wt-no-such/a/b")), tmp);
        assert_eq!(
            nearest_existing(Path::new("wt-no-such-rel/x")),
            PathBuf::from(".")
        );
    }

    #[test]
    fn a_capture_file_to_read_must_have_bytes() {
        let dir = std::env::temp_dir().join(format!("wt-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let problem = |p: &Path| match check_input_file(p) {
            Err(PreflightError::InputFile { problem, .. }) => problem.to_string(),
            r => format!("{r:?}"),
        };
        assert!(problem(&dir.join("none.pcap")).starts_with("no such file"));
        assert!(problem(&dir).starts_with("a directory"));
        let empty = dir.join("empty.pcap");
        std::fs::write(&empty, b"").unwrap();
        assert!(problem(&empty).starts_with("it is empty"));
        std::fs::write(&empty, b"x").unwrap();
        assert!(check_input_file(&empty).is_ok());
        let cfg = RecordConfig::file(dir.join("none.pcap"), &dir);
        assert!(matches!(
            check_start(&cfg),
            Err(PreflightError::InputFile {
                problem: InputProblem::Missing,
                ..
            })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_interface_that_is_not_here_is_refused_first() {
        let cfg = RecordConfig::interfaces(&["lo", "wt-no-such-if0"], "/nonexistent");
        assert!(matches!(
            check_start(&cfg),
            Err(PreflightError::NoSuchInterface(n)) if n == "wt-no-such-if0"
        ));
    }
}
