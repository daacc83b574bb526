//! The shared structures of netmap API version 14, as `sys/net/netmap.h`
//! (github.com/luigirizzo/netmap, `NETMAP_API 14`) declares them, with
//! their sizes and field offsets pinned by tests to what gcc makes of that
//! header on x86-64 Linux (LP64: `ssize_t` and `long` are 8 bytes; printed
//! by a C program including the header, see the tests).
//!
//! Why our own `#[repr(C)]` structs rather than the `netmap_sys` crate:
//! `netmap_sys` 0.1.4 (the last release, unmaintained since 2019) declares
//! API 11, lacks `offset_mask`/`buf_align` in `netmap_ring`, lacks
//! `ni_host_tx_rings`/`ni_host_rx_rings` in `netmap_if`, and does not align
//! `sem` to 128 bytes (its own FIXMEs), so its slots start at offset 184
//! instead of 256: reading a real ring through it would read the wrong
//! memory. It also has no `nmreq_header`/`nmreq_register` (NIOCCTRL). The
//! bindgen-based `netmap-min-sys` needs the netmap headers and clang at
//! build time, which a CI machine without netmap lacks. The structs below
//! are few and small; the layout tests pin every offset we read.
//!
//! Nothing here is `unsafe`: the structs only describe the memory, which
//! [`super::ring`] reads through raw pointers at these offsets.

use std::mem::offset_of;

/// The API version we speak (`NETMAP_API`).
pub(crate) const NETMAP_API: u16 = 14;

/// `struct netmap_slot`: one buffer descriptor of a ring.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NetmapSlot {
    /// The buffer's index in the region's buffer pool.
    pub(crate) buf_idx: u32,
    /// Bytes of the frame (or of this fragment, with `NS_MOREFRAG`).
    pub(crate) len: u16,
    /// `NS_*` flags.
    pub(crate) flags: u16,
    /// Indirect buffers / buffer offsets (unused here).
    pub(crate) ptr: u64,
}

/// `NS_BUF_CHANGED`: the slot's `buf_idx` was changed.
#[allow(dead_code)]
pub(crate) const NS_BUF_CHANGED: u16 = 0x0001;
/// `NS_MOREFRAG`: the packet continues in the next slot.
pub(crate) const NS_MOREFRAG: u16 = 0x0020;

/// `struct timeval` as the kernel writes it into `netmap_ring.ts` (LP64).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Timeval {
    /// Seconds.
    pub(crate) tv_sec: i64,
    /// Microseconds.
    pub(crate) tv_usec: i64,
}

/// `struct netmap_ring` (its header: the slots follow at offset 256).
#[repr(C)]
#[allow(dead_code)] // fields are read through raw pointers at their offsets
pub(crate) struct NetmapRing {
    /// Offset of the buffer pool from this ring.
    pub(crate) buf_ofs: i64,
    /// Slots in the ring (any number, not only powers of two).
    pub(crate) num_slots: u32,
    /// Bytes per buffer.
    pub(crate) nr_buf_size: u32,
    /// The ring's number.
    pub(crate) ringid: u16,
    /// 0: TX, 1: RX.
    pub(crate) dir: u16,
    /// (user) first slot owned by the user.
    pub(crate) head: u32,
    /// (user) wakeup point.
    pub(crate) cur: u32,
    /// (kernel) first slot owned by the kernel.
    pub(crate) tail: u32,
    /// `NR_*` flags (user-writable).
    pub(crate) flags: u32,
    /// (kernel) time of the last sync.
    pub(crate) ts: Timeval,
    /// Offsets option (0 unless asked for).
    pub(crate) offset_mask: u64,
    /// Packet alignment for TX offsets.
    pub(crate) buf_align: u64,
    /// Opaque room, aligned to `NM_CACHE_ALIGN` (128).
    pub(crate) sem: Sem,
}

/// `uint8_t sem[128] __attribute__((aligned(128)))`.
#[repr(C, align(128))]
pub(crate) struct Sem(pub(crate) [u8; 128]);

/// Offsets of the ring's fields (the slots start at [`RING_SLOTS`]).
pub(crate) const RING_BUF_OFS: usize = offset_of!(NetmapRing, buf_ofs);
pub(crate) const RING_NUM_SLOTS: usize = offset_of!(NetmapRing, num_slots);
pub(crate) const RING_BUF_SIZE: usize = offset_of!(NetmapRing, nr_buf_size);
pub(crate) const RING_RINGID: usize = offset_of!(NetmapRing, ringid);
pub(crate) const RING_DIR: usize = offset_of!(NetmapRing, dir);
pub(crate) const RING_HEAD: usize = offset_of!(NetmapRing, head);
pub(crate) const RING_CUR: usize = offset_of!(NetmapRing, cur);
pub(crate) const RING_TAIL: usize = offset_of!(NetmapRing, tail);
pub(crate) const RING_FLAGS: usize = offset_of!(NetmapRing, flags);
pub(crate) const RING_TS: usize = offset_of!(NetmapRing, ts);
/// `offsetof(struct netmap_ring, slot)` = `sizeof(struct netmap_ring)`.
pub(crate) const RING_SLOTS: usize = std::mem::size_of::<NetmapRing>();

/// `NR_TIMESTAMP`: update `ts` on every sync (even with the module's
/// `no_timestamp` parameter set).
pub(crate) const NR_TIMESTAMP: u32 = 0x0002;

/// `struct netmap_if` (its header: `ring_ofs[]` follows at offset 56).
#[repr(C)]
#[allow(dead_code)] // fields are read through raw pointers at their offsets
pub(crate) struct NetmapIf {
    /// The interface's name.
    pub(crate) ni_name: [u8; 16],
    /// API version (unused by the kernel).
    pub(crate) ni_version: u32,
    /// `NI_*` flags.
    pub(crate) ni_flags: u32,
    /// NIC TX rings.
    pub(crate) ni_tx_rings: u32,
    /// NIC RX rings.
    pub(crate) ni_rx_rings: u32,
    /// First extra buffer.
    pub(crate) ni_bufs_head: u32,
    /// Host TX rings.
    pub(crate) ni_host_tx_rings: u32,
    /// Host RX rings.
    pub(crate) ni_host_rx_rings: u32,
    /// Spare.
    pub(crate) ni_spare1: [u32; 3],
    /// `ssize_t ring_ofs[]`: each ring's offset from this struct, TX rings
    /// (NIC then host) first, then RX rings (NIC then host); 0 for a ring
    /// not bound to this file descriptor.
    pub(crate) ring_ofs: [isize; 0],
}

pub(crate) const IF_NAME: usize = offset_of!(NetmapIf, ni_name);
pub(crate) const IF_TX_RINGS: usize = offset_of!(NetmapIf, ni_tx_rings);
pub(crate) const IF_RX_RINGS: usize = offset_of!(NetmapIf, ni_rx_rings);
pub(crate) const IF_HOST_TX_RINGS: usize = offset_of!(NetmapIf, ni_host_tx_rings);
pub(crate) const IF_HOST_RX_RINGS: usize = offset_of!(NetmapIf, ni_host_rx_rings);
pub(crate) const IF_RING_OFS: usize = offset_of!(NetmapIf, ring_ofs);

/// `struct nmreq_header`: the argument of `NIOCCTRL`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct NmreqHeader {
    /// `NETMAP_API`.
    pub(crate) nr_version: u16,
    /// `NETMAP_REQ_*`.
    pub(crate) nr_reqtype: u16,
    /// Must be zero.
    pub(crate) nr_reserved: u32,
    /// The port's name (`eth0`).
    pub(crate) nr_name: [u8; 64],
    /// Options (a pointer; 0: none).
    pub(crate) nr_options: u64,
    /// The request body (a pointer).
    pub(crate) nr_body: u64,
}

/// `NETMAP_REQ_REGISTER`.
pub(crate) const NETMAP_REQ_REGISTER: u16 = 1;

/// `struct nmreq_register`: the body of `NETMAP_REQ_REGISTER`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct NmreqRegister {
    /// (out) offset of this descriptor's `netmap_if` in the region.
    pub(crate) nr_offset: u64,
    /// (out) bytes of the shared region.
    pub(crate) nr_memsize: u64,
    /// (in/out) slots per TX ring.
    pub(crate) nr_tx_slots: u32,
    /// (in/out) slots per RX ring.
    pub(crate) nr_rx_slots: u32,
    /// (in/out) TX rings.
    pub(crate) nr_tx_rings: u16,
    /// (in/out) RX rings.
    pub(crate) nr_rx_rings: u16,
    /// (in/out) host TX rings.
    pub(crate) nr_host_tx_rings: u16,
    /// (in/out) host RX rings.
    pub(crate) nr_host_rx_rings: u16,
    /// (in/out) memory allocator id.
    pub(crate) nr_mem_id: u16,
    /// (in) the ring, with `NR_REG_ONE_NIC`.
    pub(crate) nr_ringid: u16,
    /// (in) `NR_REG_*`.
    pub(crate) nr_mode: u32,
    /// (in/out) extra buffers.
    pub(crate) nr_extra_bufs: u32,
    /// (in) `NR_*` flags.
    pub(crate) nr_flags: u64,
}

/// `NR_REG_ONE_NIC`: bind one NIC ring pair (`nr_ringid`).
pub(crate) const NR_REG_ONE_NIC: u32 = 4;
/// `NR_EXCLUSIVE`: nobody else may bind the ring while we hold it.
pub(crate) const NR_EXCLUSIVE: u64 = 0x800;
/// `NR_RX_RINGS_ONLY`: bind the RX ring only.
pub(crate) const NR_RX_RINGS_ONLY: u64 = 0x2000;

/// Linux `_IOC(dir, type, nr, size)`.
const fn ioc(dir: u64, ty: u8, nr: u8, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | ((ty as u64) << 8) | nr as u64
}

/// `NIOCCTRL = _IOWR('i', 151, struct nmreq_header)`.
pub(crate) const NIOCCTRL: u64 = ioc(3, b'i', 151, std::mem::size_of::<NmreqHeader>());
/// `NIOCRXSYNC = _IO('i', 149)`.
pub(crate) const NIOCRXSYNC: u64 = ioc(0, b'i', 149, 0);

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, size_of};

    /// Sizes and offsets as gcc lays out netmap.h (API 14) on x86-64 Linux:
    /// the numbers below were printed with `offsetof`/`sizeof` by a C program
    /// including luigirizzo/netmap's `sys/net/netmap.h` (commit 89607e14).
    #[test]
    fn slot_layout() {
        assert_eq!(size_of::<NetmapSlot>(), 16);
        assert_eq!(offset_of!(NetmapSlot, buf_idx), 0);
        assert_eq!(offset_of!(NetmapSlot, len), 4);
        assert_eq!(offset_of!(NetmapSlot, flags), 6);
        assert_eq!(offset_of!(NetmapSlot, ptr), 8);
    }

    #[test]
    fn ring_layout() {
        assert_eq!(RING_BUF_OFS, 0);
        assert_eq!(RING_NUM_SLOTS, 8);
        assert_eq!(RING_BUF_SIZE, 12);
        assert_eq!(RING_RINGID, 16);
        assert_eq!(RING_DIR, 18);
        assert_eq!(RING_HEAD, 20);
        assert_eq!(RING_CUR, 24);
        assert_eq!(RING_TAIL, 28);
        assert_eq!(RING_FLAGS, 32);
        // timeval is 8-aligned: 4 bytes of padding after flags.
        assert_eq!(RING_TS, 40);
        assert_eq!(size_of::<Timeval>(), 16);
        assert_eq!(offset_of!(NetmapRing, offset_mask), 56);
        assert_eq!(offset_of!(NetmapRing, buf_align), 64);
        // sem is aligned to NM_CACHE_ALIGN (128).
        assert_eq!(offset_of!(NetmapRing, sem), 128);
        assert_eq!(RING_SLOTS, 256);
        assert_eq!(align_of::<NetmapRing>(), 128);
    }

    #[test]
    fn if_layout() {
        assert_eq!(IF_NAME, 0);
        assert_eq!(offset_of!(NetmapIf, ni_version), 16);
        assert_eq!(offset_of!(NetmapIf, ni_flags), 20);
        assert_eq!(IF_TX_RINGS, 24);
        assert_eq!(IF_RX_RINGS, 28);
        assert_eq!(offset_of!(NetmapIf, ni_bufs_head), 32);
        assert_eq!(IF_HOST_TX_RINGS, 36);
        assert_eq!(IF_HOST_RX_RINGS, 40);
        assert_eq!(IF_RING_OFS, 56);
        assert_eq!(size_of::<NetmapIf>(), 56);
        assert_eq!(size_of::<isize>(), 8, "ring_ofs is ssize_t (LP64)");
    }

    #[test]
    fn request_layout() {
        assert_eq!(size_of::<NmreqHeader>(), 88);
        assert_eq!(offset_of!(NmreqHeader, nr_name), 8);
        assert_eq!(offset_of!(NmreqHeader, nr_options), 72);
        assert_eq!(offset_of!(NmreqHeader, nr_body), 80);
        assert_eq!(size_of::<NmreqRegister>(), 56);
        assert_eq!(offset_of!(NmreqRegister, nr_tx_slots), 16);
        assert_eq!(offset_of!(NmreqRegister, nr_tx_rings), 24);
        assert_eq!(offset_of!(NmreqRegister, nr_mem_id), 32);
        assert_eq!(offset_of!(NmreqRegister, nr_ringid), 34);
        assert_eq!(offset_of!(NmreqRegister, nr_mode), 36);
        assert_eq!(offset_of!(NmreqRegister, nr_extra_bufs), 40);
        assert_eq!(offset_of!(NmreqRegister, nr_flags), 48);
    }

    #[test]
    fn ioctl_numbers() {
        // _IOWR('i', 151, 88 bytes) and _IO('i', 149) on Linux.
        assert_eq!(NIOCCTRL, 0xc058_6997);
        assert_eq!(NIOCRXSYNC, 0x6995);
    }
}
