//! All of the TPACKET_V3 engine's `unsafe`: the AF_PACKET socket and its
//! options, the ring mapped from it, and reads and small in-place writes
//! of the blocks the kernel handed over.
//!
//! The ring (`PACKET_RX_RING`, `TPACKET_V3`) is `blocks` blocks of
//! `block_size` bytes, mapped shared with the kernel. Each block starts with
//! a `tpacket_block_desc`; its `block_status` says who owns it:
//! `TP_STATUS_KERNEL` (0) the kernel fills it; `TP_STATUS_USER` (bit 0) it is
//! ours, holding `num_pkts` frames from `offset_to_first_pkt` on, each
//! behind a `tpacket3_hdr` whose `tp_next_offset` leads to the next.
//!
//! The invariant every block below relies on: a block is read or written by
//! us only between the acquire load that saw `TP_STATUS_USER` in its status
//! ([`Ring::is_user`]) and the release store that gives it back
//! ([`Ring::release`]); the engine gives a block back only once every frame
//! token pointing into it was given back by the writer. Inside a block every
//! read and write is checked against the block's bounds first: the kernel's
//! offsets are trusted for nothing but content.

use crate::Desc;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use wiretape_timestamp::StampSlot;

/// `sizeof(struct tpacket_block_desc)`: the block header.
#[cfg(test)]
const BLOCK_HDR: u32 = 48;
/// `sizeof(struct tpacket3_hdr)`: a frame's header.
pub(super) const FRAME_HDR: u32 = 48;
/// `tp_status`: `tp_vlan_tci` holds a tag the kernel took off the frame.
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
/// `tp_status`: `tp_vlan_tpid` holds that tag's TPID.
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
/// `tp_status`: the stamp is the NIC's.
pub(super) const TP_STATUS_TS_RAW_HARDWARE: u32 = 1 << 31;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const ETH_P_ALL: u16 = 0x0003;
const ETH_P_8021Q: u16 = 0x8100;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_RESERVE: libc::c_int = 12;
use wiretape_format::pcapng::{EPB, FILL};
/// pcapng: an Enhanced Packet Block's fixed head (type, length, interface,
/// stamp, lengths) and its whole overhead (the trailing length too), in
/// the ring's own width (the numbers are `wiretape_format`'s).
const EPB_HEAD: u32 = wiretape_format::pcapng::EPB_HEAD as u32;
const EPB_OVERHEAD: u32 = wiretape_format::pcapng::EPB_OVERHEAD as u32;
/// The smallest pcapng block (type, length, trailing length).
const MIN_BLOCK: u32 = wiretape_format::pcapng::MIN_BLOCK as u32;
/// Runs are written with O_DIRECT: whole pages.
const PAGE: u32 = 4096;
/// The longest frame laid out in place: wiretape's default snap length.
/// Files laid out in place have at least that snap length (the CLI lays out
/// only then), so such a frame is never cut; a longer one (a 512 KiB BIG
/// TCP aggregate, say) makes its block go the copy way, which cuts it.
const MAX_LAID_OUT: u32 = 262_144;
/// Flag of a token that names the frame's first byte (a frame laid out in
/// place) rather than its header.
const DATA_ADDR: u64 = 1 << 63;
const PACKET_TIMESTAMP: libc::c_int = 17;

/// One frame's header, read out of a block (`struct tpacket3_hdr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FrameHead {
    /// Offset of the next frame's header from this one's (0: the last).
    pub next: u32,
    /// The stamp, UTC ns.
    pub ts_ns: u64,
    /// Captured bytes.
    pub snaplen: u32,
    /// Length on the wire.
    pub len: u32,
    /// `tp_status`.
    pub status: u32,
    /// Offset of the frame's first byte from its header.
    pub mac: u32,
    /// `tp_vlan_tci`: the tag the kernel took off (with TP_STATUS_VLAN_VALID).
    pub vlan: u16,
    /// `tp_vlan_tpid`: its TPID (with TP_STATUS_VLAN_TPID_VALID).
    pub tpid: u16,
}

impl FrameHead {
    /// The kernel took a VLAN tag off, and [`Ring::put_back_vlan`] puts it back.
    #[inline(always)]
    fn has_tag_to_put_back(&self) -> bool {
        self.status & TP_STATUS_VLAN_VALID != 0 && self.snaplen >= 12 && self.mac >= FRAME_HDR + 4
    }

    /// (offset of the first byte from the header, captured bytes) once the
    /// tag is back.
    #[inline(always)]
    fn placed(&self) -> (u32, u32) {
        if self.has_tag_to_put_back() {
            (self.mac - 4, self.snaplen + 4)
        } else {
            (self.mac, self.snaplen)
        }
    }
}

/// `n` rounded up to a multiple of 4 (pcapng's padding).
#[inline(always)]
fn pad4(n: u32) -> u32 {
    wiretape_format::pcapng::pad4(n as usize) as u32
}

/// Where laying a block out in place stands (see [`Ring::lay_frame`]).
#[derive(Debug, Default)]
pub(super) struct Layout {
    /// End of what is laid out so far.
    cursor: u32,
    /// Start of the last packet block, whose trailing length is written
    /// only when the next frame's header has been read (it may lie over
    /// that header's first bytes).
    open: Option<u32>,
    /// Frames laid out.
    pub kept: u64,
    /// The first one's stamp.
    pub first_ns: Option<u64>,
}

/// An AF_PACKET socket (`SOCK_RAW`), closed on drop.
pub(super) struct Socket {
    fd: OwnedFd,
}

/// `setsockopt(fd, level, name, &val, sizeof val)`.
fn setopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, val: &T) -> io::Result<()> {
    // SAFETY: `val` is a live value of the size passed; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A classic BPF program of one instruction: `ret #k` (0: take nothing).
fn ret_filter(fd: &OwnedFd, k: u32) -> io::Result<()> {
    let mut insn = libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let prog = libc::sock_fprog {
        len: 1,
        filter: &mut insn,
    };
    setopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
}

impl Socket {
    /// A new socket that receives nothing yet (protocol 0, and a filter
    /// that takes nothing, so that nothing arrives before [`Socket::open_gate`]).
    pub(super) fn new() -> io::Result<Socket> {
        // SAFETY: plain socket(2); the result is checked and owned at once.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just opened and own alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        ret_filter(&fd, 0)?;
        Ok(Socket { fd })
    }

    /// `PACKET_VERSION` = `TPACKET_V3`; outgoing frames not taken (RX only,
    /// as the XDP engine); stamps: the NIC's where it gives one, else the
    /// kernel's software stamp (`PACKET_TIMESTAMP`).
    pub(super) fn setup(&self, hw_stamps: bool) -> io::Result<()> {
        setopt(
            &self.fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V3 as libc::c_int),
        )?;
        setopt(
            &self.fd,
            libc::SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            &1 as &libc::c_int,
        )?;
        if hw_stamps {
            let flags = libc::SOF_TIMESTAMPING_RAW_HARDWARE as libc::c_int;
            setopt(&self.fd, libc::SOL_PACKET, PACKET_TIMESTAMP, &flags)?;
        }
        Ok(())
    }

    /// `PACKET_RESERVE`: `n` bytes more between each frame's header and its
    /// first byte (2 puts an Ethernet frame on a 4-byte boundary, where a
    /// pcapng block can precede it).
    pub(super) fn reserve(&self, n: u32) -> io::Result<()> {
        setopt(
            &self.fd,
            libc::SOL_PACKET,
            PACKET_RESERVE,
            &(n as libc::c_int),
        )
    }

    /// `PACKET_RX_RING`: `blocks` blocks of `block_size` bytes, a block
    /// handed over at the latest `retire_ms` after its first frame.
    pub(super) fn rx_ring(&self, block_size: u32, blocks: u32, retire_ms: u32) -> io::Result<()> {
        let req = libc::tpacket_req3 {
            tp_block_size: block_size,
            tp_block_nr: blocks,
            tp_frame_size: 2048,
            tp_frame_nr: (block_size / 2048) * blocks,
            tp_retire_blk_tov: retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setopt(&self.fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
    }

    /// Binds to interface `ifindex`, all protocols: frames start coming
    /// (through the gate).
    pub(super) fn bind(&self, ifindex: u32) -> io::Result<()> {
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = ETH_P_ALL.to_be();
        sa.sll_ifindex = ifindex as i32;
        // SAFETY: a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&sa as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Joins fanout group `id`, frames spread by the RX queue they came in
    /// on (`PACKET_FANOUT_QM`): the n-th socket to join gets queue n.
    pub(super) fn join_fanout(&self, id: u16) -> io::Result<()> {
        let arg: u32 = id as u32 | (libc::PACKET_FANOUT_QM << 16);
        setopt(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)
    }

    /// Lets frames in (takes the gate's filter off).
    pub(super) fn open_gate(&self) -> io::Result<()> {
        setopt(
            &self.fd,
            libc::SOL_SOCKET,
            libc::SO_DETACH_FILTER,
            &0 as &libc::c_int,
        )
    }

    /// Lets no new frame in (the gate again): frames already in the ring stay.
    pub(super) fn close_gate(&self) -> io::Result<()> {
        ret_filter(&self.fd, 0)
    }

    /// `PACKET_STATISTICS`: (frames the ring took or dropped, dropped for a
    /// full ring) since the last call (the kernel resets them).
    pub(super) fn stats(&self) -> io::Result<(u64, u64)> {
        // SAFETY: all-zero is a valid tpacket_stats_v3.
        let mut st: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` and `len` are live and sized; the kernel writes at most `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((st.tp_packets as u64, st.tp_drops as u64))
    }

    /// The socket's pending error (`SO_ERROR`): the kernel sets ENETDOWN
    /// when the interface goes away.
    pub(super) fn take_error(&self) -> Option<io::Error> {
        let mut e: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `e` and `len` are live and sized.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut e as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (r == 0 && e != 0).then(|| io::Error::from_raw_os_error(e))
    }

    /// Waits up to `timeout` for a block (`ppoll(POLLIN)`).
    pub(super) fn wait(&self, timeout: std::time::Duration) {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: one live pollfd, a live timespec, no signal mask.
        unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    }
}

/// The ring mapped from a [`Socket`]; unmapped on drop. Shared by the poll
/// thread (block status, headers, release) and the writer (frame bytes).
pub(super) struct Ring {
    ptr: NonNull<u8>,
    len: usize,
    block_size: u32,
    blocks: u32,
    /// The frame area's owner id, stamped into every token it hands out.
    owner: u32,
}

// SAFETY: plain shared memory; who touches which block when is governed by
// the ownership protocol of the module docs, not by this handle.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl Ring {
    /// Maps the ring `sock` was given ([`Socket::rx_ring`] with the same sizes).
    pub(super) fn map(sock: &Socket, block_size: u32, blocks: u32) -> io::Result<Ring> {
        let len = block_size as usize * blocks as usize;
        // SAFETY: a new shared mapping of the socket's own ring (the kernel
        // checks `len` against it); no memory of ours is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                sock.fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring {
            ptr: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
            block_size,
            blocks,
            owner: crate::desc::new_owner(),
        })
    }

    /// An anonymous mapping laid out as the kernel lays a ring out, for
    /// tests of the walk and the layout without a socket.
    #[cfg(test)]
    pub(super) fn anonymous(block_size: u32, blocks: u32) -> Ring {
        let len = block_size as usize * blocks as usize;
        // SAFETY: a new private anonymous mapping; no memory of ours is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(p != libc::MAP_FAILED, "mmap");
        Ring {
            ptr: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
            block_size,
            blocks,
            owner: crate::desc::new_owner(),
        }
    }

    /// The token of the frame whose header is at `off` of block `b`, as
    /// [`Ring::frame_head`] returned `h` for it.
    #[inline(always)]
    pub(super) fn desc(&self, b: u32, off: u32, h: &FrameHead) -> Desc {
        let hdr = b as u64 * self.block_size as u64 + off as u64;
        // SAFETY: `owner` is this ring's own id; `hdr` names a frame header
        // that frame_head checked to lie, with its frame, inside block `b`,
        // which is ours until the token is given back (the module's
        // invariant). The token's `addr` is the header's ring offset (read
        // back by `frame`), its `len` the captured bytes.
        unsafe { Desc::new(self.owner, hdr, h.snaplen, 0, 0) }
    }

    /// The frame area's owner id.
    pub(super) fn owner(&self) -> u32 {
        self.owner
    }

    /// Blocks in the ring.
    pub(super) fn blocks(&self) -> u32 {
        self.blocks
    }

    /// The status word of block `b` (shared with the kernel).
    #[inline(always)]
    fn status(&self, b: u32) -> &AtomicU32 {
        assert!(b < self.blocks, "block {b} outside the ring");
        // SAFETY: inside the mapping (checked), 4-aligned (blocks are
        // page-aligned, the field is at 8); the kernel and we only touch it
        // as a whole u32, so an atomic view is sound.
        unsafe {
            &*self
                .ptr
                .as_ptr()
                .add(b as usize * self.block_size as usize + 8)
                .cast::<AtomicU32>()
        }
    }

    /// Whether block `b` is ours (acquire: its contents are then visible).
    #[inline(always)]
    pub(super) fn is_user(&self, b: u32) -> bool {
        self.status(b).load(Ordering::Acquire) & TP_STATUS_USER != 0
    }

    /// Gives block `b` back to the kernel (release: our reads and writes of
    /// it are done). Only for a block of ours whose tokens are all back.
    #[inline(always)]
    pub(super) fn release(&self, b: u32) {
        self.status(b).store(TP_STATUS_KERNEL, Ordering::Release);
    }

    /// The address of the u32 at `off` of block `b`, `off + 4` checked
    /// against the block.
    #[inline(always)]
    fn word(&self, b: u32, off: u32) -> *mut u32 {
        assert!(b < self.blocks && off.checked_add(4).is_some_and(|e| e <= self.block_size));
        // SAFETY: the offset lies inside the mapping (checked just above).
        unsafe {
            self.ptr
                .as_ptr()
                .add(b as usize * self.block_size as usize + off as usize)
                .cast::<u32>()
        }
    }

    /// A u32 at `off` of block `b`, `off + 4` checked against the block.
    #[inline(always)]
    fn read_u32(&self, b: u32, off: u32) -> u32 {
        // SAFETY: inside block `b` (word checks it), which is ours (the
        // module's invariant: only called between is_user and release).
        unsafe { self.word(b, off).read_unaligned() }
    }

    /// (frames in block `b`, offset of the first one's header).
    #[inline]
    pub(super) fn block_head(&self, b: u32) -> (u32, u32) {
        (self.read_u32(b, 12), self.read_u32(b, 16))
    }

    /// The frame header at `off` of block `b`; None when the header or the
    /// frame it describes would leave the block.
    #[inline]
    pub(super) fn frame_head(&self, b: u32, off: u32) -> Option<FrameHead> {
        if b >= self.blocks || off.checked_add(FRAME_HDR)? > self.block_size {
            return None;
        }
        // One bounds check (above) for the whole header, then plain loads.
        // SAFETY: [off, off + FRAME_HDR) is inside block `b` (checked), which
        // is ours (the module's invariant: only called between is_user and
        // release, or by the holder of a token into the block).
        let hdr: [u8; FRAME_HDR as usize] = unsafe {
            self.ptr
                .as_ptr()
                .add(b as usize * self.block_size as usize + off as usize)
                .cast::<[u8; FRAME_HDR as usize]>()
                .read_unaligned()
        };
        let u32_at = |i: usize| u32::from_le_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
        let mac = u16::from_le_bytes([hdr[24], hdr[25]]) as u32;
        let h = FrameHead {
            next: u32_at(0),
            ts_ns: u32_at(4) as u64 * 1_000_000_000 + u32_at(8) as u64,
            snaplen: u32_at(12),
            len: u32_at(16),
            status: u32_at(20),
            mac,
            vlan: (u32_at(32) & 0xffff) as u16,
            tpid: u16::from_le_bytes([hdr[36], hdr[37]]),
        };
        let end = (off as u64) + (mac as u64) + (h.snaplen as u64);
        (mac >= FRAME_HDR && end <= self.block_size as u64).then_some(h)
    }

    /// A frame whose VLAN tag the kernel took off (`TP_STATUS_VLAN_VALID`)
    /// gets it back as libpcap puts it back: the 12 address bytes move 4
    /// bytes earlier (into the header's gap) and the tag goes after them;
    /// the header's `tp_mac`, `tp_snaplen` and `tp_len` follow, so the
    /// frame's header stays its one description. Returns the new head.
    /// Frames without a removed tag (or too short to hold addresses) are
    /// left as they are.
    #[inline(always)]
    pub(super) fn put_back_vlan(&self, b: u32, off: u32, h: FrameHead) -> FrameHead {
        if !h.has_tag_to_put_back() {
            return h;
        }
        self.put_back_tag(b, off, h)
    }

    /// [`Ring::put_back_vlan`]'s move, for a frame that has a tag to put back.
    #[cold]
    #[inline(never)]
    fn put_back_tag(&self, b: u32, off: u32, h: FrameHead) -> FrameHead {
        let tci = h.vlan as u32;
        let tpid = if h.status & TP_STATUS_VLAN_TPID_VALID != 0 {
            h.tpid
        } else {
            ETH_P_8021Q
        };
        let mac = h.mac - 4;
        let start = b as usize * self.block_size as usize + off as usize;
        // Bounds: frame_head checked off + h.mac + h.snaplen <= block_size
        // and h.mac >= FRAME_HDR + 4, so [off + mac, off + h.mac + 12) and
        // the header's fields at 12..28 are inside the block and do not
        // overlap the bytes moved.
        // SAFETY: inside block `b`, which is ours (the module's invariant);
        // ptr::copy allows the overlapping move.
        unsafe {
            let base = self.ptr.as_ptr().add(start);
            std::ptr::copy(base.add(h.mac as usize), base.add(mac as usize), 12);
            let tag = base.add(mac as usize + 12);
            tag.cast::<[u8; 2]>().write(tpid.to_be_bytes());
            tag.add(2)
                .cast::<[u8; 2]>()
                .write((tci as u16).to_be_bytes());
            base.add(12).cast::<u32>().write_unaligned(h.snaplen + 4);
            base.add(16).cast::<u32>().write_unaligned(h.len + 4);
            base.add(24).cast::<u16>().write_unaligned(mac as u16);
        }
        FrameHead {
            snaplen: h.snaplen + 4,
            len: h.len + 4,
            mac,
            ..h
        }
    }

    /// A u32 written at `off` of block `b`, `off + 4` checked against the block.
    #[inline(always)]
    fn write_u32(&self, b: u32, off: u32, v: u32) {
        // SAFETY: inside block `b` (word checks it), which is ours (the
        // module's invariant: only the poll thread lays a block out, between
        // is_user and release, before any run of it is handed out).
        unsafe { self.word(b, off).write_unaligned(v) }
    }

    /// The first 8 bytes of block `b` (the header's version and private
    /// offset, which a layout covers and [`Ring::restore_head`] puts back).
    pub(super) fn head8(&self, b: u32) -> [u32; 2] {
        [self.read_u32(b, 0), self.read_u32(b, 4)]
    }

    /// Puts back what [`Ring::head8`] read, before the block goes back.
    pub(super) fn restore_head(&self, b: u32, head: [u32; 2]) {
        self.write_u32(b, 0, head[0]);
        self.write_u32(b, 4, head[1]);
    }

    /// The mean ring bytes a frame of block `b` takes (`n` frames from
    /// `first`; from the block header's used length, no frame read).
    pub(super) fn mean_slot(&self, b: u32, n: u32, first: u32) -> u32 {
        self.read_u32(b, 20).saturating_sub(first) / n.max(1)
    }

    /// Whether every frame of block `b` (`n` frames, the first header at
    /// `first`) can be laid out in place as a run of pcapng blocks: each
    /// frame (its VLAN tag put back) on a 4-byte boundary, room for a
    /// packet block's head before it and a filler between any two, and a
    /// last filler before the block's end. Reads the headers only.
    pub(super) fn can_lay_out(&self, b: u32, n: u32, first: u32) -> bool {
        let (mut off, mut cursor) = (first, 0u32);
        for i in 0..n {
            let Some(h) = self.frame_head(b, off) else {
                return false;
            };
            let (mac, snap) = h.placed();
            let Some(s) = (off + mac).checked_sub(EPB_HEAD) else {
                return false;
            };
            if snap > MAX_LAID_OUT {
                return false;
            }
            if !s.is_multiple_of(4) || s < cursor + MIN_BLOCK {
                return false;
            }
            cursor = s + EPB_OVERHEAD + pad4(snap);
            if h.next == 0 {
                if i + 1 != n {
                    return false;
                }
                break;
            }
            match off.checked_add(h.next) {
                Some(o) => off = o,
                None => return false,
            }
        }
        cursor
            .checked_add(MIN_BLOCK)
            .is_some_and(|e| e <= self.block_size)
    }

    /// A filler block over `[from, to)` of block `b`.
    #[inline(always)]
    fn fill(&self, b: u32, from: u32, to: u32) {
        let n = to - from;
        debug_assert!(n >= MIN_BLOCK && n.is_multiple_of(4));
        self.write_u32(b, from, FILL);
        self.write_u32(b, from + 4, n);
        self.write_u32(b, to - 4, n);
    }

    /// Writes the trailing length of the last packet block laid out.
    #[inline(always)]
    fn close_open(&self, b: u32, lay: &mut Layout) {
        if let Some(s) = lay.open.take() {
            self.write_u32(b, lay.cursor - 4, lay.cursor - s);
        }
    }

    /// Lays out the frame whose header at `off` of block `b` is `h` (read,
    /// its tag put back, in a block [`Ring::can_lay_out`] passed) as an
    /// Enhanced Packet Block of interface 0 stamped `ts_ns` (pcapng with ns
    /// stamps), just before its first byte: the frame's bytes stay where
    /// they are. What lies between the last block laid out and this one
    /// (headers, skipped frames) becomes a filler. Returns its token.
    #[inline]
    pub(super) fn lay_frame(
        &self,
        b: u32,
        off: u32,
        h: &FrameHead,
        ts_ns: u64,
        lay: &mut Layout,
    ) -> Desc {
        let s = off + h.mac - EPB_HEAD;
        self.close_open(b, lay);
        if s > lay.cursor {
            self.fill(b, lay.cursor, s);
        }
        let total = EPB_OVERHEAD + pad4(h.snaplen);
        let mut head = [0u8; EPB_HEAD as usize];
        for (i, v) in [
            EPB,
            total,
            0,
            (ts_ns >> 32) as u32,
            ts_ns as u32,
            h.snaplen,
            h.len,
        ]
        .into_iter()
        .enumerate()
        {
            head[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        let end = s + EPB_HEAD + h.snaplen;
        let padded = s + EPB_HEAD + pad4(h.snaplen);
        // One bounds check for the head, the frame and its padding.
        assert!(b < self.blocks && padded <= self.block_size);
        // SAFETY: [s, s + 28) and [end, padded) are inside block `b`
        // (checked just above: s < end <= padded), which is ours (the
        // module's invariant); the head lies before the frame's bytes and
        // the padding after them. The padding is zeroed by stores, not read:
        // the frame's last line need not be fetched.
        unsafe {
            let base = self.ptr.as_ptr().add(b as usize * self.block_size as usize);
            base.add(s as usize)
                .cast::<[u8; EPB_HEAD as usize]>()
                .write_unaligned(head);
            base.add(end as usize)
                .write_bytes(0, (padded - end) as usize);
        }
        lay.open = Some(s);
        lay.cursor = s + total;
        lay.kept += 1;
        lay.first_ns.get_or_insert(ts_ns);
        let data = b as u64 * self.block_size as u64 + (off + h.mac) as u64;
        // SAFETY: `owner` is this ring's own id; the token names the
        // frame's first byte (DATA_ADDR) inside block `b`, which is ours
        // until every token into it and its run are given back (the
        // module's invariant); `hw` carries the length on the wire.
        unsafe { Desc::new(self.owner, DATA_ADDR | data, h.snaplen, 0, h.len as u64) }
    }

    /// Ends the layout of block `b`: the last packet block's trailing
    /// length, and a filler up to the next page. Returns the run's length
    /// (whole pages from the block's start), or None when no frame was laid
    /// out (nothing to write).
    pub(super) fn lay_end(&self, b: u32, lay: &mut Layout) -> Option<u32> {
        if lay.kept == 0 {
            return None;
        }
        self.close_open(b, lay);
        let end = (lay.cursor + MIN_BLOCK)
            .next_multiple_of(PAGE)
            .min(self.block_size);
        self.fill(b, lay.cursor, end);
        Some(end)
    }

    /// The bytes of the frame of token `d`, and its length on the wire.
    /// The header is read again here (the writer's thread): it is the
    /// frame's one description. Panics for a token of another frame area.
    #[inline]
    pub(super) fn frame(&self, d: &Desc) -> (&[u8], u32) {
        assert!(d.owner() == self.owner, "Desc of another frame area");
        if d.addr() & DATA_ADDR != 0 {
            return self.laid_out_frame(d);
        }
        let hdr = d.addr();
        let b = (hdr / self.block_size as u64) as u32;
        let off = (hdr % self.block_size as u64) as u32;
        let h = self
            .frame_head(b, off)
            .expect("a token's frame header was checked when it was handed out");
        self.frame_at(b, off, &h)
    }

    /// The bytes of the frame whose header at `off` of block `b` is `h`
    /// (as [`Ring::frame_head`] returned it), and its length on the wire.
    #[inline]
    pub(super) fn frame_at(&self, b: u32, off: u32, h: &FrameHead) -> (&[u8], u32) {
        assert!(h.mac >= FRAME_HDR, "frame inside its header");
        (
            self.bytes_in(b, off as u64 + h.mac as u64, h.snaplen),
            h.len,
        )
    }

    /// `len` bytes from offset `start` of block `b`; panics unless all of
    /// them lie inside the block.
    #[inline(always)]
    fn bytes_in(&self, b: u32, start: u64, len: u32) -> &[u8] {
        assert!(
            b < self.blocks && start + len as u64 <= self.block_size as u64,
            "frame outside its block"
        );
        // SAFETY: inside block `b` (checked just above); the block is ours
        // until it is given back, which happens only after every token into
        // it (and its run, laid out in place) came back: the caller is the
        // poll thread walking it, the writer holding a token into it
        // (`FrameStore::frame`), or the block's run.
        unsafe {
            std::slice::from_raw_parts(
                self.ptr
                    .as_ptr()
                    .add(b as usize * self.block_size as usize + start as usize),
                len as usize,
            )
        }
    }
}

impl Ring {
    /// Whether token `d` names a frame laid out in place.
    #[inline(always)]
    pub(super) fn is_laid_out(d: &Desc) -> bool {
        d.addr() & DATA_ADDR != 0
    }

    /// [`Ring::frame`] of a frame laid out in place: its header may be
    /// covered by then, so the token itself says where the frame is.
    #[inline]
    fn laid_out_frame(&self, d: &Desc) -> (&[u8], u32) {
        let at = d.addr() & !DATA_ADDR;
        let b = (at / self.block_size as u64).min(u32::MAX as u64) as u32;
        (
            self.bytes_in(b, at % self.block_size as u64, d.len()),
            d.hw() as u32,
        )
    }
}

/// Blocks whose run is out to be written, shared by the poll thread (which
/// holds a block until its run is back) and the runs themselves.
pub(super) struct RunFlags {
    out: Box<[std::sync::atomic::AtomicBool]>,
}

impl RunFlags {
    pub(super) fn new(blocks: u32) -> RunFlags {
        RunFlags {
            out: (0..blocks).map(|_| Default::default()).collect(),
        }
    }

    /// Whether block `b`'s run is still out.
    #[inline]
    pub(super) fn is_out(&self, b: u32) -> bool {
        self.out[b as usize].load(Ordering::Acquire)
    }
}

/// Block `b` laid out as a run of pcapng blocks, lent to the writer: its
/// bytes are what the file gets. Dropping it (the write done or failed)
/// lets the poll thread give the block back.
pub(super) struct RingRun {
    ring: std::sync::Arc<Ring>,
    flags: std::sync::Arc<RunFlags>,
    block: u32,
    len: u32,
    /// Frames it holds.
    pub frames: u64,
    /// The first one's stamp (UTC ns).
    pub first_ns: u64,
    /// Frames handed out up to its last one (the writer writes the run
    /// once it has taken that many).
    pub(super) end: u64,
}

impl RingRun {
    /// Block `b`'s run of `len` bytes ([`Ring::lay_end`]); the block is
    /// held until the run is dropped.
    pub(super) fn new(
        ring: std::sync::Arc<Ring>,
        flags: std::sync::Arc<RunFlags>,
        b: u32,
        len: u32,
        lay: &Layout,
        end: u64,
    ) -> RingRun {
        assert!(b < ring.blocks && len <= ring.block_size && len.is_multiple_of(PAGE));
        flags.out[b as usize].store(true, Ordering::Release);
        RingRun {
            ring,
            flags,
            block: b,
            len,
            frames: lay.kept,
            first_ns: lay.first_ns.unwrap_or(0),
            end,
        }
    }
}

impl AsRef<[u8]> for RingRun {
    fn as_ref(&self) -> &[u8] {
        // The first `len` bytes of the block, laid out and no longer
        // written by anyone: the poll thread holds the block (never gives
        // it back, never walks it again) while its flag is set, i.e. until
        // this run is dropped. Page-aligned: blocks are whole pages of a
        // page-aligned mapping.
        self.ring.bytes_in(self.block, 0, self.len)
    }
}

impl Drop for RingRun {
    fn drop(&mut self) {
        self.flags.out[self.block as usize].store(false, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what mmap returned; the ring is dropped
        // after every borrow of it (its owners hold it in an Arc).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Fills block `b` of `ring` as `tpacket_rcv` does for TPACKET_V3 with
    /// `reserve` bytes of PACKET_RESERVE: the block header, then each frame
    /// behind a `tpacket3_hdr` at 8-byte aligned offsets, its first byte at
    /// `tp_mac` (Ethernet: 82 + reserve). `tags[i]`: a VLAN tag the kernel
    /// took off frame i. Returns (frames, first offset).
    fn kernel_fill(
        ring: &Ring,
        b: u32,
        frames: &[Vec<u8>],
        tags: &[Option<u16>],
        reserve: u32,
    ) -> (u32, u32) {
        let base = b as usize * ring.block_size as usize;
        // SAFETY: a test's anonymous ring, block `b` inside it.
        let blk = unsafe {
            std::slice::from_raw_parts_mut(ring.ptr.as_ptr().add(base), ring.block_size as usize)
        };
        let w32 =
            |blk: &mut [u8], o: usize, v: u32| blk[o..o + 4].copy_from_slice(&v.to_le_bytes());
        let first = 48u32;
        let mut off = first as usize;
        let mac = 82 + reserve;
        for (i, f) in frames.iter().enumerate() {
            let next = ((mac as usize + f.len()) + 7) & !7;
            w32(
                blk,
                off,
                if i + 1 == frames.len() {
                    0
                } else {
                    next as u32
                },
            );
            w32(blk, off + 4, 1_700_000_000 + i as u32);
            w32(blk, off + 8, 123 + i as u32);
            w32(blk, off + 12, f.len() as u32);
            w32(blk, off + 16, f.len() as u32);
            let mut status = TP_STATUS_USER;
            if let Some(tci) = tags[i] {
                status |= TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID;
                w32(blk, off + 28 + 4, tci as u32);
                blk[off + 36..off + 38].copy_from_slice(&0x8100u16.to_le_bytes());
            }
            w32(blk, off + 20, status);
            blk[off + 24..off + 26].copy_from_slice(&(mac as u16).to_le_bytes());
            // The sockaddr_ll and the gap: whatever the kernel left there.
            blk[off + 48..off + mac as usize].fill(0xEE);
            blk[off + mac as usize..off + mac as usize + f.len()].copy_from_slice(f);
            off += next;
        }
        w32(blk, 0, 2);
        w32(blk, 4, 48);
        w32(blk, 12, frames.len() as u32);
        w32(blk, 16, first);
        w32(blk, 20, off as u32);
        ring.status(b).store(TP_STATUS_USER, Ordering::Release);
        (frames.len() as u32, first)
    }

    /// The pcapng blocks of a run: (type, its bytes).
    fn blocks_of(run: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let rd = |o: usize| u32::from_le_bytes(run[o..o + 4].try_into().unwrap());
        let mut out = Vec::new();
        let mut o = 0;
        while o < run.len() {
            let (kind, len) = (rd(o), rd(o + 4) as usize);
            assert!(
                len >= 12 && len % 4 == 0 && o + len <= run.len(),
                "block at {o}: {len}"
            );
            assert_eq!(
                rd(o + len - 4) as usize,
                len,
                "trailing length of the block at {o}"
            );
            out.push((kind, run[o..o + len].to_vec()));
            o += len;
        }
        out
    }

    fn frame(i: usize, len: usize) -> Vec<u8> {
        let mut f: Vec<u8> = (0..len).map(|k| (i * 7 + k) as u8).collect();
        f[12] = 0x08;
        f[13] = 0x00;
        f
    }

    /// A block laid out in place is a run of pcapng blocks: each kept frame
    /// an EPB with its stamp, lengths and bytes as they were (a VLAN tag
    /// put back), fillers over everything else (a skipped frame included),
    /// whole pages; and the block's first bytes come back.
    #[test]
    fn a_block_laid_out_in_place_is_pcapng() {
        let ring = Arc::new(Ring::anonymous(1 << 16, 2));
        let sizes = [60usize, 61, 62, 63, 1514, 99, 333, 64, 1000, 17];
        let frames: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| frame(i, n))
            .collect();
        let tags: Vec<Option<u16>> = (0..sizes.len())
            .map(|i| (i % 4 == 1).then_some(7))
            .collect();
        let (n, first) = kernel_fill(&ring, 1, &frames, &tags, 2);
        assert!(ring.can_lay_out(1, n, first));
        let head = ring.head8(1);
        let mut lay = Layout::default();
        let mut off = first;
        let mut want = Vec::new();
        for i in 0..n as usize {
            let h = ring.frame_head(1, off).unwrap();
            let next = h.next;
            let h = ring.put_back_vlan(1, off, h);
            if i == 3 {
                // Skipped (as the filter skips): under a filler.
                off += next;
                continue;
            }
            let d = ring.lay_frame(1, off, &h, h.ts_ns, &mut lay);
            let (bytes, wire) = ring.frame(&d);
            let mut f = frames[i].clone();
            if tags[i].is_some() {
                f.splice(12..12, [0x81, 0x00, 0x00, 0x07]);
            }
            assert_eq!((bytes, wire as usize), (&f[..], f.len()), "frame {i}");
            want.push((h.ts_ns, f));
            off += next;
        }
        let len = ring.lay_end(1, &mut lay).unwrap();
        assert_eq!(len % PAGE, 0);
        let flags = Arc::new(RunFlags::new(2));
        let run = RingRun::new(ring.clone(), flags.clone(), 1, len, &lay, 9);
        assert!(flags.is_out(1));
        let mut got = Vec::new();
        for (kind, b) in blocks_of(run.as_ref()) {
            let rd = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
            match kind {
                EPB => {
                    let cap = rd(20) as usize;
                    assert_eq!(
                        (rd(8), rd(24) as usize),
                        (0, cap),
                        "interface 0, length on the wire"
                    );
                    assert_eq!(b.len(), 32 + pad4(cap as u32) as usize, "no options");
                    assert!(
                        b[28 + cap..b.len() - 4].iter().all(|&z| z == 0),
                        "zero padding"
                    );
                    got.push((
                        ((rd(12) as u64) << 32) | rd(16) as u64,
                        b[28..28 + cap].to_vec(),
                    ));
                }
                FILL => {}
                k => panic!("a block of type {k:#x}"),
            }
        }
        assert_eq!(got, want, "the kept frames, in order, with their stamps");
        assert_eq!((run.frames, run.first_ns), (9, want[0].0));
        drop(run);
        assert!(!flags.is_out(1), "the run dropped: the block may go back");
        ring.restore_head(1, head);
        assert_eq!(ring.head8(1), [2, 48]);
    }

    /// Frames off a 4-byte boundary (no reserve: Ethernet at 82) cannot be
    /// laid out: such a block is walked and copied instead.
    #[test]
    fn frames_off_a_4_byte_boundary_are_not_laid_out() {
        let ring = Ring::anonymous(1 << 16, 1);
        let frames: Vec<Vec<u8>> = (0..5).map(|i| frame(i, 100 + i)).collect();
        let (n, first) = kernel_fill(&ring, 0, &frames, &[None; 5], 0);
        assert!(!ring.can_lay_out(0, n, first));
        let (n, first) = kernel_fill(&ring, 0, &frames, &[None; 5], 2);
        assert!(ring.can_lay_out(0, n, first));
        assert_eq!(
            ring.mean_slot(0, n, first),
            (0..5).map(|i| (84 + 100 + i + 7) & !7).sum::<u32>() / 5
        );
        // A frame longer than the default snap length is not laid out.
        let big = Ring::anonymous(1 << 20, 1);
        let frames = vec![frame(0, 100), frame(1, MAX_LAID_OUT as usize + 1)];
        let (n, first) = kernel_fill(&big, 0, &frames, &[None; 2], 2);
        assert!(!big.can_lay_out(0, n, first));
        let frames = vec![frame(0, 100), frame(1, MAX_LAID_OUT as usize)];
        let (n, first) = kernel_fill(&big, 0, &frames, &[None; 2], 2);
        assert!(big.can_lay_out(0, n, first));
    }

    /// The offsets read above are the kernel's (`linux/if_packet.h`).
    #[test]
    fn offsets_are_the_kernels() {
        assert_eq!(
            std::mem::size_of::<libc::tpacket_block_desc>(),
            super::BLOCK_HDR as usize
        );
        assert_eq!(
            std::mem::size_of::<libc::tpacket3_hdr>(),
            super::FRAME_HDR as usize
        );
        let h = std::mem::MaybeUninit::<libc::tpacket3_hdr>::uninit();
        let p = h.as_ptr();
        let off = |f: *const u8| (f as usize) - (p as usize);
        // SAFETY: addr_of! on an uninit value computes addresses only.
        unsafe {
            assert_eq!(off(std::ptr::addr_of!((*p).tp_sec).cast()), 4);
            assert_eq!(off(std::ptr::addr_of!((*p).tp_nsec).cast()), 8);
            assert_eq!(off(std::ptr::addr_of!((*p).tp_snaplen).cast()), 12);
            assert_eq!(off(std::ptr::addr_of!((*p).tp_len).cast()), 16);
            assert_eq!(off(std::ptr::addr_of!((*p).tp_status).cast()), 20);
            assert_eq!(off(std::ptr::addr_of!((*p).tp_mac).cast()), 24);
            assert_eq!(off(std::ptr::addr_of!((*p).hv1).cast()), 28);
        }
    }
}
