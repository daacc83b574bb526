//! The numbers of the capture file formats, in one place: the classic pcap
//! file's magics and header sizes, pcapng's block types, sizes and padding,
//! and the link type wiretape records. The capture engines lay pcapng out
//! in place in the kernel's ring (`wiretape-capture`), the writers and
//! readers write and walk both formats (`wiretape-storage`), the filter
//! compiler names link types (`wiretape-filter`): all of them take these
//! from here, so a number is never copied.
//!
//! No dependencies, no code but [`pcapng::pad4`].

#![no_std]
#![deny(unsafe_code)]

/// The classic pcap format
/// (<https://www.ietf.org/archive/id/draft-ietf-opsawg-pcap-03.html>).
pub mod pcap {
    /// File magic of pcap with microsecond stamps (read in the file's byte order).
    pub const MAGIC_US: u32 = 0xa1b2_c3d4;
    /// File magic of pcap with nanosecond stamps: what wiretape writes by default.
    pub const MAGIC_NS: u32 = 0xa1b2_3c4d;
    /// Bytes of the file header: magic, version 2.4, thiszone, sigfigs,
    /// snaplen, link type.
    pub const FILE_HEADER_LEN: usize = 24;
    /// Bytes of a record header (seconds, fraction, caplen, orig_len: four
    /// u32s), which the captured bytes follow.
    pub const RECORD_HEADER_LEN: usize = 16;
    /// Link type of Ethernet frames (libpcap's `LINKTYPE_ETHERNET`,
    /// `DLT_EN10MB`): what wiretape records from interfaces.
    pub const LINKTYPE_ETHERNET: u32 = 1;
}

/// pcapng (<https://www.ietf.org/archive/id/draft-ietf-opsawg-pcapng-03.html>).
pub mod pcapng {
    /// Block type of a Section Header Block (the same bytes in either byte order).
    pub const SHB: u32 = 0x0A0D_0D0A;
    /// Block type of an Interface Description Block.
    pub const IDB: u32 = 1;
    /// Block type of a Simple Packet Block (read, never written: it has no stamp).
    pub const SPB: u32 = 3;
    /// Block type of an Enhanced Packet Block: one per record wiretape writes.
    pub const EPB: u32 = 6;
    /// The SHB's byte-order magic; read byte-swapped, the section is big-endian.
    pub const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
    /// Bytes of an EPB before its packet data: type, length, interface,
    /// stamp (two u32s), captured and original length.
    pub const EPB_HEAD: usize = 28;
    /// Bytes of an EPB besides the (padded) packet data: its head and the
    /// trailing length.
    pub const EPB_OVERHEAD: usize = EPB_HEAD + 4;
    /// A filler block's type: of local use (bit 31), "WT" in the low bits.
    /// Readers (libpcap, Wireshark, wiretape's) skip it; wiretape fills the
    /// gaps of blocks laid out in place with it.
    pub const FILL: u32 = 0x8000_5754;
    /// The smallest block: type, length, trailing length.
    pub const MIN_BLOCK: usize = 12;

    /// `n` rounded up to a multiple of 4 (pcapng pads data and options to 4 bytes).
    #[inline(always)]
    pub const fn pad4(n: usize) -> usize {
        (n + 3) & !3
    }
}
