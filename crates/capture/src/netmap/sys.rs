//! The netmap system calls: open `/dev/netmap`, register one RX ring
//! (`NIOCCTRL` with `NETMAP_REQ_REGISTER`), map the region, `NIOCRXSYNC`,
//! `poll`. Each `unsafe` block is one call with its arguments' validity
//! stated. None of this runs on a machine without the netmap module; the
//! engine reaches it only through [`DevPort`] and [`register`].

use super::layout::*;
use super::ring::{Region, RingInfo, RxRing};
use super::RxSync;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

/// The netmap control device.
pub(crate) const DEV: &str = "/dev/netmap";

/// Whether the netmap module is loaded (its device exists).
pub(crate) fn present() -> bool {
    Path::new(DEV).exists()
}

/// Why a registration failed.
pub(crate) enum RegisterError {
    /// A system call failed.
    Io(io::Error),
    /// The region does not hold the ring where the kernel said.
    Layout(String),
}

impl From<io::Error> for RegisterError {
    fn from(e: io::Error) -> Self {
        RegisterError::Io(e)
    }
}

/// Opens `/dev/netmap`, binds NIC RX ring `ring` of `ifname` to it
/// (`NR_REG_ONE_NIC`, RX only, exclusive; `slots` slots per ring asked for
/// when not 0), maps the region and opens our end of the ring.
pub(crate) fn register(
    ifname: &str,
    ring: u32,
    slots: u32,
) -> Result<(OwnedFd, RxRing, RingInfo), RegisterError> {
    let path = c"/dev/netmap";
    // SAFETY: a NUL-terminated path; the fd is owned at once below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: a fresh fd nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut reg = NmreqRegister {
        nr_rx_slots: slots,
        nr_ringid: ring as u16,
        nr_mode: NR_REG_ONE_NIC,
        nr_flags: NR_RX_RINGS_ONLY | NR_EXCLUSIVE,
        ..Default::default()
    };
    let mut hdr = NmreqHeader {
        nr_version: NETMAP_API,
        nr_reqtype: NETMAP_REQ_REGISTER,
        nr_reserved: 0,
        nr_name: [0; 64],
        nr_options: 0,
        nr_body: &mut reg as *mut NmreqRegister as u64,
    };
    for (d, s) in hdr.nr_name.iter_mut().zip(ifname.bytes().take(63)) {
        *d = s;
    }
    // SAFETY: NIOCCTRL reads the header and the body it points to and
    // writes both back; both are live, laid out as netmap.h (API 14) has
    // them (layout tests), for the duration of the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), NIOCCTRL as _, &mut hdr as *mut NmreqHeader) };
    if rc < 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: fd is registered to the port; nr_memsize is its region.
    let region = unsafe { Region::map(fd.as_raw_fd(), reg.nr_memsize as usize)? };
    // SAFETY: the kernel is the other end and follows the ring protocol;
    // this descriptor is bound to ring `ring` alone, opened once, here.
    let (rx, info) =
        unsafe { RxRing::open(std::sync::Arc::new(region), reg.nr_offset as usize, ring) }
            .map_err(|e| RegisterError::Layout(e.0))?;
    Ok((fd, rx, info))
}

/// A registered descriptor: the real kernel behind [`RxSync`].
pub struct DevPort {
    fd: OwnedFd,
}

impl DevPort {
    pub(crate) fn new(fd: OwnedFd) -> DevPort {
        DevPort { fd }
    }
}

impl RxSync for DevPort {
    fn rxsync(&mut self) -> io::Result<()> {
        // SAFETY: NIOCRXSYNC takes no argument; the fd is ours and registered.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), NIOCRXSYNC as _) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn wait(&mut self, timeout: Duration) {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call. netmap's
        // poll syncs the RX ring (reading head/cur) and waits for tail to
        // move past cur.
        unsafe { libc::poll(&mut p, 1, ms) };
    }
}
