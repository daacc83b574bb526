//! The test bed's OS calls: entering a network namespace, a raw AF_PACKET
//! sender, the tc egress program that steers its frames to a TX queue.
//! Each `unsafe` block is one libc call with its arguments' validity stated.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use wiretape_capture::sys::ifindex;

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Holds an exclusive `flock` on `path` (created if missing) until dropped:
/// serializes `ip netns add` across threads and processes (see
/// [`crate::Testbed::create`]).
pub struct FileLock {
    /// Kept open: closing it releases the lock.
    _file: File,
}

impl FileLock {
    /// Opens (or creates) `path` and waits for its exclusive lock.
    pub fn exclusive(path: &str) -> io::Result<FileLock> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?;
        // SAFETY: flock on a descriptor this File owns and keeps open; it
        // blocks until the lock is ours and touches no memory.
        let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(FileLock { _file: f })
    }
}

/// Moves the calling thread into the network namespace named `name`
/// (as created by `ip netns add`, i.e. /run/netns/NAME).
pub fn enter_netns(name: &str) -> io::Result<()> {
    let f = File::open(format!("/run/netns/{name}"))?;
    // SAFETY: f is an open netns file; setns only changes this thread's namespace.
    cvt(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }).map(|_| ())
}

/// A raw AF_PACKET socket that sends whole Ethernet frames on one interface.
pub struct PacketSender {
    fd: OwnedFd,
}

impl PacketSender {
    /// Opens the socket in the calling thread's network namespace.
    pub fn open(ifname: &str) -> io::Result<Self> {
        Self::open_on_queue(ifname, None)
    }

    /// Opens a socket whose frames leave on TX queue `queue` of `ifname`
    /// (when the interface has a [`QueueSteering`] program: the socket's
    /// mark says the queue; without one the kernel's hash decides).
    pub fn open_on_queue(ifname: &str, queue: Option<u32>) -> io::Result<Self> {
        let idx = ifindex(ifname).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no interface {ifname}"))
        })?;
        // Protocol 0: this socket receives nothing, it only sends.
        // SAFETY: plain socket(2), owned at once.
        let raw =
            cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: raw is a fresh fd.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain data.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_ifindex = idx as i32;
        // SAFETY: bind with a valid sockaddr_ll and its size.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        })?;
        if let Some(q) = queue {
            let mark: libc::c_int = q as libc::c_int + 1;
            // SAFETY: setsockopt reads one c_int from &mark, of the size given.
            cvt(unsafe {
                libc::setsockopt(
                    raw,
                    libc::SOL_SOCKET,
                    libc::SO_MARK,
                    (&mark as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as u32,
                )
            })?;
        }
        Ok(PacketSender { fd })
    }

    /// Sends one frame; retries while the device queue is full (ENOBUFS/EAGAIN).
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        loop {
            // SAFETY: frame is a valid buffer of frame.len() bytes.
            let rc =
                unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if rc >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                    std::thread::yield_now()
                }
                _ => return Err(e),
            }
        }
    }
}

/// While alive, the calling thread is inside another network namespace;
/// on drop it returns to the one it came from.
pub struct NetnsGuard {
    home: File,
}

impl NetnsGuard {
    /// Enters namespace `name` until the guard drops.
    pub fn enter(name: &str) -> io::Result<Self> {
        let home = File::open("/proc/thread-self/ns/net")?;
        enter_netns(name)?;
        Ok(NetnsGuard { home })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // SAFETY: home is an open netns file of this thread's former namespace.
        unsafe { libc::setns(self.home.as_raw_fd(), libc::CLONE_NEWNET) };
    }
}

/// A tc egress program (TCX) on one interface that sends every frame whose
/// socket mark is `q + 1` out on TX queue `q`, and leaves unmarked frames
/// to the kernel's choice. Alive while this value is: dropping it (or
/// deleting the interface) detaches it.
///
/// How: the program copies `skb->mark` into `skb->queue_mapping`. The
/// queue is picked after the egress hook (`__dev_queue_xmit`), and with no
/// XPS map the pick (`skb_tx_hash`) takes a recorded queue mapping `m` as
/// queue `m - 1` instead of hashing the flow. Frames keep the plain
/// `dev_queue_xmit` path: the qdisc, and the taps that let tcpdump on the
/// generator end see what was sent.
pub struct QueueSteering {
    _link: OwnedFd,
    _prog: OwnedFd,
}

/// `bpf(2)` commands, program and attach types used here (uapi/linux/bpf.h).
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
const BPF_TCX_EGRESS: u32 = 47;

/// The head of `union bpf_attr` for BPF_PROG_LOAD (the kernel zero-fills
/// the rest up to its own size).
#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The head of `union bpf_attr` for BPF_LINK_CREATE, with the tcx part zero.
#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    tcx: [u64; 2],
}

/// One eBPF instruction: opcode, registers (dst low nibble, src high), offset, immediate.
const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    code as u64
        | ((dst | (src << 4)) as u64) << 8
        | (off as u16 as u64) << 16
        | (imm as u32 as u64) << 32
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: bpf(2) reads (and for some commands writes) *attr, a bpf_attr
    // head laid out as the kernel's for `cmd`, of the size given; the
    // pointers inside it stay valid for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success these commands return a new fd, owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as libc::c_int) })
}

impl QueueSteering {
    /// Loads the program and attaches it to the egress of interface
    /// `ifname` in the calling thread's network namespace.
    pub fn attach(ifname: &str) -> io::Result<Self> {
        let idx = ifindex(ifname).ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("no interface {ifname}"))
        })?;
        // __sk_buff: len @0, pkt_type @4, mark @8, queue_mapping @12.
        let prog = [
            insn(0x61, 2, 1, 8, 0),  // r2 = *(u32 *)(r1 + mark)
            insn(0x63, 1, 2, 12, 0), // *(u32 *)(r1 + queue_mapping) = r2
            insn(0xb7, 0, 0, 0, 0),  // r0 = TC_ACT_OK
            insn(0x95, 0, 0, 0, 0),  // exit
        ];
        let license = c"GPL";
        let mut log = vec![0u8; 4096];
        let mut name = [0u8; 16];
        name[..11].copy_from_slice(b"wt_steer_tx");
        let mut load = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_SCHED_CLS,
            insn_cnt: prog.len() as u32,
            insns: prog.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: 1,
            log_size: log.len() as u32,
            log_buf: log.as_mut_ptr() as u64,
            kern_version: 0,
            prog_flags: 0,
            prog_name: name,
            prog_ifindex: 0,
            expected_attach_type: 0,
        };
        let prog_fd = bpf(BPF_PROG_LOAD, &mut load).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            io::Error::other(format!(
                "cannot load the queue-steering tc program: {e}: {}",
                String::from_utf8_lossy(&log[..end]).trim()
            ))
        })?;
        let mut link = LinkCreateAttr {
            prog_fd: prog_fd.as_raw_fd() as u32,
            target_ifindex: idx,
            attach_type: BPF_TCX_EGRESS,
            flags: 0,
            tcx: [0; 2],
        };
        let link_fd = bpf(BPF_LINK_CREATE, &mut link).map_err(|e| {
            io::Error::other(format!(
                "cannot attach the queue-steering program to {ifname}'s tc egress (TCX, Linux 6.6+): {e}"
            ))
        })?;
        Ok(QueueSteering {
            _link: link_fd,
            _prog: prog_fd,
        })
    }
}
