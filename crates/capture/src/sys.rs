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
        name: [0; libc::IFNAMSIZ],
        data: (cmd as *mut T).cast(),
        _pad: [0; 16],
    };
    for (d, s) in req
        .name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
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

/// The interface's link type (`/sys/class/net/NAME/type`, an `ARPHRD_`
/// value: 1 for Ethernet); None if it cannot be read.
pub fn arphrd(name: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/type"))
        .ok()?
        .trim()
        .parse()
        .ok()
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
