//! Watching the recorded interface: a `NETLINK_ROUTE` socket subscribed to
//! link events (`RTMGRP_LINK`), read without blocking by the recording's
//! control loop, tells when the interface is deleted (`ip link del`, a VM's
//! NIC unplugged, moved to another namespace: `RTM_DELLINK`) or goes down
//! (administratively or losing carrier: `RTM_NEWLINK` without `IFF_UP` or
//! `IFF_LOWER_UP`). The AF_XDP sockets' error state (`SO_ERROR`, which the
//! kernel sets to `ENETDOWN` when it unbinds them from a vanishing device)
//! is the second witness, read by the engine.
//!
//! Each `unsafe` block is one libc call with its arguments' validity stated.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// How the recorded interface is, as last seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkStatus {
    /// Up, with carrier.
    Up,
    /// Present but down: administratively (`ip link set down`) or without
    /// carrier. Frames stop; the recording goes on (a warning).
    Down(String),
    /// Deleted, unplugged or moved away: nothing more can arrive on it.
    Gone(String),
}

const RTMGRP_LINK: u32 = 1;
const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const NLMSG_HDR: usize = 16;
const IFINFO: usize = 16;
const IFF_UP: u32 = 0x1;
const IFF_LOWER_UP: u32 = 0x10000;

/// A link-event subscription for one interface (see the module docs).
pub struct LinkMonitor {
    fd: OwnedFd,
    ifindex: u32,
    ifname: String,
    status: LinkStatus,
    buf: Vec<u8>,
}

impl LinkMonitor {
    /// Subscribes to link events and takes `ifname`'s (index `ifindex`)
    /// current state.
    pub fn new(ifname: &str, ifindex: u32) -> io::Result<LinkMonitor> {
        // SAFETY: plain socket(2); the fd is owned at once below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_ROUTE,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: raw is a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain data; all-zero is valid.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = RTMGRP_LINK;
        // SAFETY: bind with a valid sockaddr_nl and its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut m = LinkMonitor {
            fd,
            ifindex,
            ifname: ifname.to_string(),
            status: LinkStatus::Up,
            buf: vec![0; 64 << 10],
        };
        m.status = m.status_now();
        Ok(m)
    }

    /// The state now: reads the events that arrived since the last call
    /// (no blocking; a few syscalls at most).
    pub fn poll(&mut self) -> LinkStatus {
        loop {
            // SAFETY: recv into our own buffer of buf.len() bytes.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // Events were lost (the socket's buffer overran): ask
                    // the system directly instead.
                    Some(libc::ENOBUFS) => {
                        self.status = self.status_now();
                        continue;
                    }
                    _ => break,
                }
            }
            if n == 0 {
                break;
            }
            let n = n as usize;
            let mut off = 0;
            while off + NLMSG_HDR <= n {
                let b = &self.buf[off..n];
                let len = u32::from_ne_bytes(b[0..4].try_into().unwrap()) as usize;
                let kind = u16::from_ne_bytes(b[4..6].try_into().unwrap());
                if len < NLMSG_HDR || len > b.len() {
                    break;
                }
                if (kind == RTM_NEWLINK || kind == RTM_DELLINK) && len >= NLMSG_HDR + IFINFO {
                    let info = &b[NLMSG_HDR..NLMSG_HDR + IFINFO];
                    let index = i32::from_ne_bytes(info[4..8].try_into().unwrap());
                    let flags = u32::from_ne_bytes(info[8..12].try_into().unwrap());
                    if index as u32 == self.ifindex {
                        self.status = if kind == RTM_DELLINK {
                            // Deleted, or moved to another namespace (also a
                            // DELLINK here): either way it is gone.
                            LinkStatus::Gone(format!(
                                "interface {} disappeared during the recording (deleted, unplugged or moved to another network namespace)",
                                self.ifname
                            ))
                        } else {
                            self.status_of_flags(flags)
                        };
                    }
                }
                off += (len + 3) & !3;
            }
        }
        self.status.clone()
    }

    fn status_of_flags(&self, flags: u32) -> LinkStatus {
        if flags & IFF_UP == 0 {
            LinkStatus::Down(format!("link {} is administratively down", self.ifname))
        } else if flags & IFF_LOWER_UP == 0 {
            LinkStatus::Down(format!("link {} has no carrier", self.ifname))
        } else {
            LinkStatus::Up
        }
    }

    /// The state as the system reports it now (index by name, flags).
    fn status_now(&self) -> LinkStatus {
        if crate::sys::ifindex(&self.ifname) != Some(self.ifindex) {
            return LinkStatus::Gone(format!(
                "interface {} disappeared during the recording",
                self.ifname
            ));
        }
        match crate::sys::if_flags(&self.ifname) {
            Some(f) => self.status_of_flags(f),
            None => LinkStatus::Up,
        }
    }
}
