//! Small OS calls the engines need: interface index and RX queue count,
//! CPU affinity, capabilities, link speed, memlock.
//! Each `unsafe` block is one libc call with its arguments' validity stated.

use std::ffi::CString;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// The interface index of `name` in this thread's network namespace.
pub fn ifindex(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: c is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

/// `name` as `struct ifreq`'s name field: NUL-terminated, cut to
/// `IFNAMSIZ - 1` bytes.
fn ifr_name(name: &str) -> [libc::c_char; libc::IFNAMSIZ] {
    let mut n = [0; libc::IFNAMSIZ];
    for (d, b) in n.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *d = b as libc::c_char;
    }
    n
}

/// Whether `fd` is readable (a listening socket: a connection waits),
/// waiting at most `timeout` for it. Listeners are asked this before
/// `accept`: an `accept` that finds nothing has still made a socket and
/// freed it through RCU, so polling with it every few milliseconds keeps
/// every CPU (the one taking the traffic too) passing grace periods.
pub fn readable(fd: std::os::fd::BorrowedFd<'_>, timeout: std::time::Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one pollfd that lives for the call; fd is open (borrowed).
    match cvt(unsafe { libc::poll(&mut p, 1, ms) }) {
        Ok(n) => Ok(n > 0 && p.revents != 0),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// Looks interface indexes up by name on one socket opened once (in the
/// namespace of the thread that opens it): a recording asks ten times a
/// second whether its interfaces are still there, and each socket
/// `if_nametoindex` opens and closes is freed through RCU, which makes
/// every CPU (the one taking the traffic too) pass a grace period each time.
pub struct IfIndexes {
    fd: OwnedFd,
}

/// `struct ifreq` with its index member.
#[repr(C)]
struct IfReqIndex {
    name: [libc::c_char; libc::IFNAMSIZ],
    index: libc::c_int,
    _pad: [u8; 20],
}

impl IfIndexes {
    /// Opens the socket the lookups go through.
    pub fn new() -> io::Result<IfIndexes> {
        // SAFETY: a plain datagram socket used only for ioctls, owned at once.
        let s =
            cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: s is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(s) };
        Ok(IfIndexes { fd })
    }

    /// The index of interface `name` now (`SIOCGIFINDEX`), None if there is
    /// no such interface (or the name is too long to be one).
    pub fn index(&self, name: &str) -> Option<u32> {
        if name.len() >= libc::IFNAMSIZ || name.bytes().any(|b| b == 0) {
            return None;
        }
        let mut r = IfReqIndex {
            name: ifr_name(name),
            index: 0,
            _pad: [0; 20],
        };
        // SAFETY: SIOCGIFINDEX reads the NUL-terminated name and writes the
        // int after it in r, laid out as struct ifreq (40 bytes), which lives
        // for the call.
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::SIOCGIFINDEX as _, &mut r) }).ok()?;
        (r.index > 0).then_some(r.index as u32)
    }
}

#[repr(C)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

#[repr(C)]
struct IfReqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Runs one ethtool command on interface `name`: `cmd` is the command
/// struct (its first field the command number) that the kernel reads and fills.
fn ethtool<T>(name: &str, cmd: &mut T) -> io::Result<()> {
    let mut req = IfReqData {
        name: ifr_name(name),
        data: (cmd as *mut T).cast(),
        _pad: [0; 16],
    };
    // SAFETY: a plain datagram socket used only for the ioctl, owned at once.
    let s = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: s is a fresh fd.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    // SAFETY: SIOCETHTOOL reads req (the name and a pointer to cmd) and reads
    // and writes *cmd; both live for the call, laid out as the kernel expects
    // (the callers pass the kernel's ethtool struct for that command).
    cvt(unsafe { libc::ioctl(s.as_raw_fd(), libc::SIOCETHTOOL, &mut req) }).map(|_| ())
}

/// Number of RX queues of `name` (ethtool channels: rx + combined); falls
/// back to /sys when the driver does not report channels.
pub fn rx_queue_count(name: &str) -> io::Result<u32> {
    let mut ch = EthtoolChannels {
        cmd: 0x3c, // ETHTOOL_GCHANNELS
        max_rx: 0,
        max_tx: 0,
        max_other: 0,
        max_combined: 0,
        rx_count: 0,
        tx_count: 0,
        other_count: 0,
        combined_count: 0,
    };
    if ethtool(name, &mut ch).is_ok() && ch.rx_count + ch.combined_count > 0 {
        return Ok(ch.rx_count + ch.combined_count);
    }
    let dir = format!("/sys/class/net/{name}/queues");
    let n = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count();
    Ok(n as u32)
}

/// The interface's flags as netlink gives them (`IFF_UP` 0x1, ...), with
/// `IFF_LOWER_UP` (0x10000) when it has carrier; None if it cannot be read.
pub fn if_flags(name: &str) -> Option<u32> {
    let base = format!("/sys/class/net/{name}");
    let t = std::fs::read_to_string(format!("{base}/flags")).ok()?;
    let flags = u32::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok()?;
    // `carrier` cannot be read while the link is administratively down.
    let carrier = std::fs::read_to_string(format!("{base}/carrier"))
        .map(|c| c.trim() == "1")
        .unwrap_or(false);
    Some(flags | if carrier { 0x10000 } else { 0 })
}

/// The interface's link type (`/sys/class/net/NAME/type`, an `ARPHRD_`
/// value: 1 for Ethernet); None if it cannot be read.
pub fn arphrd(name: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/type"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The interface's `napi_defer_hard_irqs` and `gro_flush_timeout` (ns)
/// from `/sys/class/net/NAME/`: with both non-zero, a NAPI that a busy
/// poller gave back stays armed on a timer instead of re-enabling the
/// device's interrupts (Documentation/networking/napi.rst). None if either
/// cannot be read.
pub fn napi_defer(name: &str) -> Option<(u64, u64)> {
    let read = |f: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/class/net/{name}/{f}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((read("napi_defer_hard_irqs")?, read("gro_flush_timeout")?))
}

/// CPUs this thread may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer and size for the calling thread (pid 0).
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return vec![0];
    }
    // SAFETY: CPU_ISSET only reads the set.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu < CPU_SETSIZE, so CPU_SET stays inside the set.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: valid pointer and size; pid 0 = this thread.
    cvt(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })
        .map(|_| ())
}

/// Lowers the calling thread's priority by `by` nice steps (Linux nice is
/// per thread), so that on a shared CPU the capture threads win: for
/// consumer threads that may fall behind but must never make the recorder
/// drop (PCAP-over-IP, dumps). Returns the new nice value.
pub fn lower_thread_priority(by: i32) -> io::Result<i32> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
    // getpriority returns the nice value, which may be -1: errno tells.
    // SAFETY: errno is this thread's; setting it to 0 first is the documented
    // way to tell a -1 result from an error.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: PRIO_PROCESS with a thread id addresses that thread only.
    let cur = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
    if cur == -1 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(0) {
            return Err(e);
        }
    }
    let new = (cur + by).min(19);
    // SAFETY: as above; raising the nice value needs no privilege.
    cvt(unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, new) })?;
    Ok(new)
}

/// True when the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Lifts RLIMIT_MEMLOCK so the UMEM and BPF maps can be pinned (root or
/// CAP_SYS_RESOURCE may; otherwise the current limit stays and a too-large
/// UMEM fails with a message that says to lower --frames).
pub fn raise_memlock() {
    let r = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit struct; failure leaves the limit unchanged.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &r) };
}

/// The locked-memory limit (RLIMIT_MEMLOCK, soft) in bytes; None: unlimited.
pub fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return Some(0);
    }
    (r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// A capability a recording needs and lacks, with what it is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingCap {
    /// Its name, e.g. `CAP_NET_RAW`.
    pub name: &'static str,
    /// What wiretape needs it for.
    pub why: String,
}

/// CAP_NET_ADMIN, CAP_NET_RAW, CAP_IPC_LOCK, CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF.
const CAP_NET_ADMIN: u32 = 12;
const CAP_NET_RAW: u32 = 13;
const CAP_IPC_LOCK: u32 = 14;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The capabilities an AF_XDP recording needs that this process lacks
/// (empty: it may record; root normally has all of them), checked against
/// its effective set, so that a missing one is named before anything is
/// opened. `locked_bytes`: the UMEM memory it will pin (CAP_IPC_LOCK is
/// only needed when that is over the locked-memory limit, e.g. under
/// systemd's `LimitMEMLOCK=infinity`); `perfmon`: the capture filter reads
/// the frame length (the verifier allows that pointer subtraction only with
/// CAP_PERFMON). What each is for, as found on Linux 6.18 as uid 65534:
/// CAP_BPF loads the program and its maps, CAP_NET_ADMIN creates the XSKMAP
/// and attaches XDP, CAP_NET_RAW opens AF_XDP sockets, CAP_IPC_LOCK pins
/// the UMEM beyond RLIMIT_MEMLOCK.
pub fn missing_capabilities(locked_bytes: u64, perfmon: bool) -> Vec<MissingCap> {
    caps_missing_from(effective_caps(), memlock_limit(), locked_bytes, perfmon)
}

/// The capabilities that sending and the smaller tools (`demo`, `tsbench
/// --live`, `replay`, `gen`) need and this process lacks: CAP_NET_ADMIN,
/// CAP_NET_RAW and CAP_BPF (or CAP_SYS_ADMIN); none for root.
pub fn missing_basic_capabilities() -> Vec<MissingCap> {
    if is_root() {
        return Vec::new();
    }
    let caps = effective_caps();
    let has = |n: u32| caps & (1u64 << n) != 0;
    let mut v = Vec::new();
    for (cap, name, why) in [
        (
            CAP_NET_ADMIN,
            "CAP_NET_ADMIN",
            "to make interfaces and attach XDP",
        ),
        (CAP_NET_RAW, "CAP_NET_RAW", "to open raw sockets"),
    ] {
        if !has(cap) {
            v.push(MissingCap {
                name,
                why: why.to_string(),
            });
        }
    }
    if !(has(CAP_BPF) || has(CAP_SYS_ADMIN)) {
        v.push(MissingCap {
            name: "CAP_BPF",
            why: "to load BPF programs".to_string(),
        });
    }
    v
}

fn caps_missing_from(
    caps: u64,
    memlock: Option<u64>,
    locked_bytes: u64,
    perfmon: bool,
) -> Vec<MissingCap> {
    let has = |n: u32| caps & (1u64 << n) != 0;
    let mut v = Vec::new();
    let mut miss = |name, why: &str| {
        v.push(MissingCap {
            name,
            why: why.to_string(),
        })
    };
    if !has(CAP_NET_ADMIN) {
        miss("CAP_NET_ADMIN", "to create the socket map and attach XDP");
    }
    if !(has(CAP_BPF) || has(CAP_SYS_ADMIN)) {
        miss("CAP_BPF", "to load the XDP program and its maps");
    }
    if !has(CAP_NET_RAW) {
        miss("CAP_NET_RAW", "to open AF_XDP sockets");
    }
    if !has(CAP_IPC_LOCK) && memlock.is_some_and(|l| l < locked_bytes) {
        let why = format!(
            "to pin {} MiB of UMEM: the locked-memory limit is {} KiB (or raise it: `ulimit -l`, LimitMEMLOCK=)",
            locked_bytes >> 20,
            memlock.unwrap_or(0) >> 10
        );
        miss("CAP_IPC_LOCK", &why);
    }
    if perfmon && !(has(CAP_PERFMON) || has(CAP_SYS_ADMIN)) {
        miss(
            "CAP_PERFMON",
            "the capture filter reads the frame length (len, less, greater)",
        );
    }
    v
}

/// Effective capabilities of this process (bit n = capability n).
pub fn effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

#[repr(C)]
struct EthtoolCmd {
    cmd: u32,
    supported: u32,
    advertising: u32,
    speed: u16,
    duplex: u8,
    port: u8,
    phy_address: u8,
    transceiver: u8,
    autoneg: u8,
    mdio_support: u8,
    maxtxpkt: u32,
    maxrxpkt: u32,
    speed_hi: u16,
    eth_tp_mdix: u8,
    eth_tp_mdix_ctrl: u8,
    lp_advertising: u32,
    reserved: [u32; 2],
}

/// Link speed of `name` in bits per second (ethtool), when the driver knows it.
pub fn link_speed_bps(name: &str) -> Option<u64> {
    // SAFETY: plain data, zero is valid.
    let mut cmd: EthtoolCmd = unsafe { std::mem::zeroed() };
    cmd.cmd = 0x1; // ETHTOOL_GSET
    ethtool(name, &mut cmd).ok()?;
    let mbps = cmd.speed as u32 | (cmd.speed_hi as u32) << 16;
    (mbps != 0 && mbps != u32::MAX && mbps != 0xffff).then_some(mbps as u64 * 1_000_000)
}

#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// The driver of `name` (ethtool's `driver`: `veth`, `mlx5_core`...), when
/// it says.
pub fn driver_name(name: &str) -> Option<String> {
    // SAFETY: plain data, zero is valid.
    let mut d: EthtoolDrvinfo = unsafe { std::mem::zeroed() };
    d.cmd = 0x3; // ETHTOOL_GDRVINFO
    ethtool(name, &mut d).ok()?;
    let end = d.driver.iter().position(|&b| b == 0).unwrap_or(32);
    let s = String::from_utf8_lossy(&d.driver[..end]).into_owned();
    (!s.is_empty()).then_some(s)
}

/// `struct ifreq` with its address member.
#[repr(C)]
struct IfReqAddr {
    name: [libc::c_char; libc::IFNAMSIZ],
    addr: libc::sockaddr_in,
    _pad: [u8; 8],
}

/// The IPv4 netmask of interface `name` as libpcap's `pcap_lookupnet`
/// gives it (and tcpdump passes it to the filter compiler): the mask's
/// bytes as they lie in memory; 0 when the interface has no IPv4 address
/// (or it cannot be read), as tcpdump uses then.
pub fn ipv4_netmask(name: &str) -> u32 {
    // SAFETY: a plain datagram socket used only for the ioctls, owned at once.
    let Ok(s) =
        cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
    else {
        return 0;
    };
    // SAFETY: s is a fresh fd.
    let s = unsafe { OwnedFd::from_raw_fd(s) };
    let ask = |req: libc::c_ulong| -> Option<u32> {
        // SAFETY: sockaddr_in is plain data; all zeros is a valid value.
        let addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        let mut r = IfReqAddr {
            name: ifr_name(name),
            addr,
            _pad: [0; 8],
        };
        r.addr.sin_family = libc::AF_INET as libc::sa_family_t;
        // SAFETY: SIOCGIFADDR / SIOCGIFNETMASK read the name and write one
        // struct sockaddr into r, which is laid out as struct ifreq (name,
        // then the 16-byte address, padded to 40 bytes) and lives for the call.
        cvt(unsafe { libc::ioctl(s.as_raw_fd(), req as _, &mut r) }).ok()?;
        Some(r.addr.sin_addr.s_addr)
    };
    if ask(libc::SIOCGIFADDR).is_none() {
        return 0;
    }
    ask(libc::SIOCGIFNETMASK).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_each_missing_capability() {
        let all = (1 << CAP_NET_ADMIN) | (1 << CAP_NET_RAW) | (1 << CAP_IPC_LOCK) | (1 << CAP_BPF);
        assert!(caps_missing_from(all, Some(8 << 10), 64 << 20, false).is_empty());
        for cap in [CAP_NET_ADMIN, CAP_NET_RAW, CAP_IPC_LOCK, CAP_BPF] {
            let m = caps_missing_from(all & !(1 << cap), Some(8 << 10), 64 << 20, false);
            assert_eq!(m.len(), 1, "{m:?}");
            let want = match cap {
                CAP_NET_ADMIN => "CAP_NET_ADMIN",
                CAP_NET_RAW => "CAP_NET_RAW",
                CAP_IPC_LOCK => "CAP_IPC_LOCK",
                _ => "CAP_BPF",
            };
            assert_eq!(m[0].name, want);
        }
        // CAP_IPC_LOCK is not needed under a high enough limit.
        let no_lock = all & !(1 << CAP_IPC_LOCK);
        assert!(caps_missing_from(no_lock, None, 64 << 20, false).is_empty());
        assert!(caps_missing_from(no_lock, Some(1 << 30), 64 << 20, false).is_empty());
        // CAP_SYS_ADMIN stands in for CAP_BPF (kernels before 5.8).
        let sys = (all & !(1 << CAP_BPF)) | (1 << CAP_SYS_ADMIN);
        assert!(caps_missing_from(sys, None, 0, true).is_empty());
        assert_eq!(caps_missing_from(all, None, 0, true)[0].name, "CAP_PERFMON");
    }

    #[test]
    fn lowers_only_the_calling_threads_priority() {
        let nice_of = |tid: libc::id_t| {
            // SAFETY: reads a thread's nice value; no memory involved.
            unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) }
        };
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
        let before = nice_of(me);
        let got = std::thread::spawn(|| lower_thread_priority(3).unwrap())
            .join()
            .unwrap();
        assert_eq!(got, (before + 3).min(19));
        // The caller's own value has not moved.
        assert_eq!(nice_of(me), before);
    }

    #[test]
    fn netmask_as_pcap_lookupnet_gives_it() {
        // lo: 127.0.0.1/8, the mask's bytes as they lie in memory.
        assert_eq!(ipv4_netmask("lo").to_ne_bytes(), [255, 0, 0, 0]);
        assert_eq!(ipv4_netmask("nosuch0"), 0);
    }
}
