//! The test bed's OS calls: entering a network namespace, a raw AF_PACKET
//! sender. Each `unsafe` block is one libc call with its arguments' validity stated.

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
