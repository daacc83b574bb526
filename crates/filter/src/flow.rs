//! The flow index: which hosts, ports, protocols, VLANs and EtherTypes a
//! block of frames holds ([`FlowSet`], gathered by [`FlowCollector`] as the
//! writer fills the block), and which of them a filter needs ([`Needs`],
//! read off the compiled classic BPF program), so that a reader skips the
//! blocks that cannot match.
//!
//! # Soundness
//!
//! Skipping is safe only if every frame the program accepts has its needed
//! keys in its block's set. Both sides therefore speak of the same bytes at
//! the same offsets, with the program's own (raw) semantics rather than a
//! "proper" protocol parser:
//!
//! * the EtherType at 12 is a key; when it is a VLAN TPID (0x8100, 0x88a8,
//!   0x9100, as libpcap's `vlan` tests them) the VLAN id at 14 and the
//!   EtherType at 16 are keys, and once more (VLAN id at 18, EtherType at
//!   20) for a second tag. The network header starts after the last
//!   EtherType read (`base` = 14, 18 or 22);
//! * IPv4 (EtherType 0x0800): the protocol byte at `base + 9`, the
//!   addresses at `base + 12` and `base + 16`, the ports at `base + 4 *
//!   (frame[base] & 0xf)` and 2 bytes on (libpcap's `ldxb 4*([base]&0xf)`),
//!   whatever the protocol or fragment offset;
//! * IPv6 (0x86dd): next header at `base + 6`, addresses at `base + 8` and
//!   `base + 24`, ports at `base + 40` and `base + 42`;
//! * ARP and RARP (0x0806, 0x8035): the addresses at `base + 14` and
//!   `base + 24` (libpcap's `host` looks there too).
//!
//! A key is recorded whenever its bytes are in the frame (as stored, after
//! the snap length). On the program's side ([`Needs::of`]) every path from
//! the first instruction to an accepting `ret` is followed (a bounded walk:
//! classic BPF only jumps forward); the equalities taken on the path
//! (`jeq` true branches on loads of those offsets, with the EtherType chain
//! that places `base`) become the keys that path needs. A path with no
//! recognisable key, or a program too branchy to walk, makes the filter
//! unable to narrow: every block is read. A key of a kind the block holds
//! too many of to list is recorded as "any" for that kind.

use crate::insn::{op, Insn};

/// The VLAN tag protocol identifiers libpcap's `vlan` accepts.
const TPIDS: [u16; 3] = [0x8100, 0x88a8, 0x9100];
const ETH_IP4: u16 = 0x0800;
const ETH_IP6: u16 = 0x86dd;
const ETH_ARP: u16 = 0x0806;
const ETH_RARP: u16 = 0x8035;

/// One thing a block can hold and a filter can need.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    /// An EtherType (outer, or after a VLAN tag).
    EtherType(u16),
    /// A VLAN id (12 bits).
    Vlan(u16),
    /// An IP protocol / IPv6 next header.
    Proto(u8),
    /// An IPv4 address (source, destination, or an ARP address), host order.
    Ip4(u32),
    /// An IPv6 address, host order.
    Ip6(u128),
    /// A TCP/UDP/SCTP port (source or destination).
    Port(u16),
    /// Any IPv4 address in `lo..=hi` (a filter's `net`: a prefix, or any
    /// mask, taken as the range of the values it admits). Only a filter
    /// needs it; a frame holds addresses.
    Net4(u32, u32),
    /// Any IPv6 address in `lo..=hi`.
    Net6(u128, u128),
    /// Any port in `lo..=hi` (`portrange`).
    Ports(u16, u16),
}

impl Key {
    /// The host key this range of addresses is: one address, or a range.
    pub fn net4(lo: u32, hi: u32) -> Key {
        if lo == hi {
            Key::Ip4(lo)
        } else {
            Key::Net4(lo, hi)
        }
    }

    /// As [`Key::net4`], IPv6.
    pub fn net6(lo: u128, hi: u128) -> Key {
        if lo == hi {
            Key::Ip6(lo)
        } else {
            Key::Net6(lo, hi)
        }
    }

    /// One port, or a range of them.
    pub fn ports(lo: u16, hi: u16) -> Key {
        if lo == hi {
            Key::Port(lo)
        } else {
            Key::Ports(lo, hi)
        }
    }

    /// Whether it is an address or a range of them (the key index files
    /// frames under their hosts).
    pub fn is_host(&self) -> bool {
        matches!(
            self,
            Key::Ip4(_) | Key::Ip6(_) | Key::Net4(..) | Key::Net6(..)
        )
    }

    /// How many values it admits (1 for a plain key).
    pub fn width(&self) -> u128 {
        match *self {
            Key::Net4(lo, hi) => u128::from(hi.saturating_sub(lo)) + 1,
            Key::Net6(lo, hi) => hi.saturating_sub(lo).saturating_add(1),
            Key::Ports(lo, hi) => u128::from(hi.saturating_sub(lo)) + 1,
            _ => 1,
        }
    }
}

/// Whether a sorted list holds a value in `lo..=hi`.
fn any_in<T: Ord + Copy>(sorted: &[T], lo: T, hi: T) -> bool {
    let i = sorted.partition_point(|&v| v < lo);
    sorted.get(i).is_some_and(|&v| v <= hi)
}

/// What one frame holds, as the module docs describe (a fixed-size value:
/// nothing allocated per frame).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct FrameKeys {
    /// Bits: 0..3 ethertypes present (count in `n_eth`), see fields.
    n_eth: u8,
    n_vlan: u8,
    has_proto: bool,
    n_port: u8,
    n_v4: u8,
    n_v6: u8,
    eth: [u16; 3],
    vlan: [u16; 2],
    proto: u8,
    port: [u16; 2],
    v4: [u32; 2],
    v6: [u128; 2],
}

#[inline(always)]
fn be16(f: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_be_bytes(f.get(o..o + 2)?.try_into().ok()?))
}
#[inline(always)]
fn be32(f: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_be_bytes(f.get(o..o + 4)?.try_into().ok()?))
}
#[inline(always)]
fn be128(f: &[u8], o: usize) -> Option<u128> {
    Some(u128::from_be_bytes(f.get(o..o + 16)?.try_into().ok()?))
}

impl FrameKeys {
    /// The keys of one Ethernet frame (its stored bytes).
    #[inline]
    pub fn of(f: &[u8]) -> FrameKeys {
        let mut k = FrameKeys::default();
        let Some(e0) = be16(f, 12) else {
            return k;
        };
        k.eth[0] = e0;
        k.n_eth = 1;
        let (mut e, mut base) = (e0, 14usize);
        for tag in 0..2 {
            if !TPIDS.contains(&e) {
                break;
            }
            if let Some(v) = be16(f, base) {
                k.vlan[tag] = v & 0xfff;
                k.n_vlan += 1;
            }
            match be16(f, base + 2) {
                Some(n) => {
                    k.eth[tag + 1] = n;
                    k.n_eth += 1;
                    e = n;
                    base += 4;
                }
                None => return k,
            }
        }
        match e {
            ETH_IP4 => {
                if let Some(&p) = f.get(base + 9) {
                    k.proto = p;
                    k.has_proto = true;
                }
                k.push_v4(be32(f, base + 12));
                k.push_v4(be32(f, base + 16));
                if let Some(&vihl) = f.get(base) {
                    let t = base + 4 * (vihl & 0xf) as usize;
                    k.push_port(be16(f, t));
                    k.push_port(be16(f, t + 2));
                }
            }
            ETH_IP6 => {
                if let Some(&p) = f.get(base + 6) {
                    k.proto = p;
                    k.has_proto = true;
                }
                for o in [base + 8, base + 24] {
                    if let Some(a) = be128(f, o) {
                        k.v6[k.n_v6 as usize] = a;
                        k.n_v6 += 1;
                    }
                }
                k.push_port(be16(f, base + 40));
                k.push_port(be16(f, base + 42));
            }
            ETH_ARP | ETH_RARP => {
                k.push_v4(be32(f, base + 14));
                k.push_v4(be32(f, base + 24));
            }
            _ => {}
        }
        k
    }

    #[inline(always)]
    fn push_v4(&mut self, a: Option<u32>) {
        if let Some(a) = a {
            self.v4[self.n_v4 as usize] = a;
            self.n_v4 += 1;
        }
    }

    #[inline(always)]
    fn push_port(&mut self, p: Option<u16>) {
        if let Some(p) = p {
            self.port[self.n_port as usize] = p;
            self.n_port += 1;
        }
    }

    /// The keys of a plain IPv4 frame from its packed signature (a
    /// [`SigRow::sig`]): what [`FrameKeys::of`] gives for the frame.
    pub fn from_sig(sig: u128) -> FrameKeys {
        let addrs = (sig >> 32) as u64;
        let ports = sig as u32;
        FrameKeys {
            n_eth: 1,
            eth: [ETH_IP4, 0, 0],
            has_proto: true,
            proto: (sig >> 96) as u8,
            n_v4: 2,
            v4: [(addrs >> 32) as u32, addrs as u32],
            n_port: 2,
            port: [(ports >> 16) as u16, ports as u16],
            ..FrameKeys::default()
        }
    }

    /// The keys from their lists (each at most as long as a frame has:
    /// 3 EtherTypes, 2 VLAN ids, 2 of each address and 2 ports; None if
    /// longer).
    pub fn from_parts(
        eth: &[u16],
        vlans: &[u16],
        proto: Option<u8>,
        v4: &[u32],
        v6: &[u128],
        ports: &[u16],
    ) -> Option<FrameKeys> {
        if eth.len() > 3 || vlans.len() > 2 || v4.len() > 2 || v6.len() > 2 || ports.len() > 2 {
            return None;
        }
        let mut k = FrameKeys {
            n_eth: eth.len() as u8,
            n_vlan: vlans.len() as u8,
            has_proto: proto.is_some(),
            proto: proto.unwrap_or(0),
            n_v4: v4.len() as u8,
            n_v6: v6.len() as u8,
            n_port: ports.len() as u8,
            ..FrameKeys::default()
        };
        k.eth[..eth.len()].copy_from_slice(eth);
        k.vlan[..vlans.len()].copy_from_slice(vlans);
        k.v4[..v4.len()].copy_from_slice(v4);
        k.v6[..v6.len()].copy_from_slice(v6);
        k.port[..ports.len()].copy_from_slice(ports);
        Some(k)
    }

    /// The EtherTypes (outer first).
    pub fn ether_types(&self) -> &[u16] {
        &self.eth[..self.n_eth as usize]
    }

    /// The VLAN ids (outer first).
    pub fn vlans(&self) -> &[u16] {
        &self.vlan[..self.n_vlan as usize]
    }

    /// The IP protocol, if the frame holds one.
    pub fn proto(&self) -> Option<u8> {
        self.has_proto.then_some(self.proto)
    }

    /// The IPv4 addresses (source, destination; ARP's sender, target).
    pub fn ip4(&self) -> &[u32] {
        &self.v4[..self.n_v4 as usize]
    }

    /// The IPv6 addresses.
    pub fn ip6(&self) -> &[u128] {
        &self.v6[..self.n_v6 as usize]
    }

    /// The ports.
    pub fn ports(&self) -> &[u16] {
        &self.port[..self.n_port as usize]
    }

    /// Whether the frame holds `k`.
    pub fn holds(&self, k: &Key) -> bool {
        match *k {
            Key::EtherType(v) => self.ether_types().contains(&v),
            Key::Vlan(v) => self.vlans().contains(&v),
            Key::Proto(v) => self.proto() == Some(v),
            Key::Ip4(v) => self.ip4().contains(&v),
            Key::Ip6(v) => self.ip6().contains(&v),
            Key::Port(v) => self.ports().contains(&v),
            Key::Net4(lo, hi) => self.ip4().iter().any(|a| (lo..=hi).contains(a)),
            Key::Net6(lo, hi) => self.ip6().iter().any(|a| (lo..=hi).contains(a)),
            Key::Ports(lo, hi) => self.ports().iter().any(|p| (lo..=hi).contains(p)),
        }
    }

    /// A hash of the keys for the collector's direct-mapped table.
    #[inline]
    fn slot_hash(&self) -> usize {
        let mut h = (self.n_eth as u64) << 8 | self.n_vlan as u64;
        h ^= (self.eth[0] as u64) << 16 ^ (self.eth[1] as u64) << 32 ^ (self.vlan[0] as u64) << 48;
        h ^= (self.proto as u64) << 40 ^ (self.v4[0] as u64) ^ (self.v4[1] as u64) << 29;
        h ^= (self.port[0] as u64) << 7 ^ (self.port[1] as u64) << 23;
        for a in &self.v6 {
            h ^= (*a as u64) ^ (*a >> 64) as u64;
        }
        (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize
    }

    /// Calls `f` with each key of the frame.
    pub fn for_each(&self, mut f: impl FnMut(Key)) {
        self.eth[..self.n_eth as usize]
            .iter()
            .for_each(|&e| f(Key::EtherType(e)));
        self.vlan[..self.n_vlan as usize]
            .iter()
            .for_each(|&v| f(Key::Vlan(v)));
        if self.has_proto {
            f(Key::Proto(self.proto));
        }
        self.v4[..self.n_v4 as usize]
            .iter()
            .for_each(|&a| f(Key::Ip4(a)));
        self.v6[..self.n_v6 as usize]
            .iter()
            .for_each(|&a| f(Key::Ip6(a)));
        self.port[..self.n_port as usize]
            .iter()
            .for_each(|&p| f(Key::Port(p)));
    }
}

/// Values of one kind a block's set lists before that kind is "any".
pub const MAX_PER_KIND: usize = 1024;
/// Slots of the direct-mapped tables that remember addresses seen.
const TABLE: usize = 4096;

/// A direct-mapped table of values seen in this block, exact (a hit is
/// a value already listed), with a list of the values in the order first
/// seen (a value evicted by a collision may be listed twice: duplicates go
/// at [`FlowCollector::finish`]).
struct Seen<T> {
    slots: Box<[Option<T>]>,
    list: Vec<T>,
    any: bool,
}

impl<T: Copy + PartialEq + Ord> Seen<T> {
    fn new() -> Self {
        Seen {
            slots: vec![None; TABLE].into_boxed_slice(),
            list: Vec::with_capacity(4 * MAX_PER_KIND),
            any: false,
        }
    }

    #[inline(always)]
    fn add(&mut self, v: T, h: u64) {
        let i = (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % TABLE;
        if self.slots[i] == Some(v) || self.any {
            return;
        }
        self.slots[i] = Some(v);
        if self.list.len() < 4 * MAX_PER_KIND {
            self.list.push(v);
        } else {
            self.any = true;
        }
    }

    /// The sorted values (or "any"); starts over.
    fn take(&mut self, out: &mut Vec<T>, any: &mut bool, hash: impl Fn(T) -> u64) {
        for &v in &self.list {
            let i = (hash(v).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % TABLE;
            self.slots[i] = None;
        }
        *any = self.any;
        if !self.any {
            out.extend_from_slice(&self.list);
        }
        self.list.clear();
        self.any = false;
    }
}

/// A bitmap of 16-bit (or smaller) values seen, with their list: exact.
struct Bits {
    words: Box<[u64]>,
    list: Vec<u16>,
}

impl Bits {
    fn new(values: usize) -> Self {
        Bits {
            words: vec![0; values.div_ceil(64)].into_boxed_slice(),
            list: Vec::with_capacity(MAX_PER_KIND + 1),
        }
    }

    #[inline(always)]
    fn add(&mut self, v: u16) {
        let (w, b) = (v as usize / 64, 1u64 << (v % 64));
        if self.words[w] & b == 0 {
            self.words[w] |= b;
            // Past the cap the kind is "any": the list stops growing.
            if self.list.len() <= MAX_PER_KIND {
                self.list.push(v);
            }
        }
    }

    fn take(&mut self, any: &mut bool) -> Vec<u16> {
        for &v in &self.list {
            self.words[v as usize / 64] = 0;
        }
        // (Values past the cap set bits without being listed.)
        if self.list.len() > MAX_PER_KIND {
            self.words.fill(0);
        }
        let v = std::mem::take(&mut self.list);
        self.list.reserve(MAX_PER_KIND + 1);
        *any = v.len() > MAX_PER_KIND;
        if *any {
            Vec::new()
        } else {
            v
        }
    }
}

/// Gathers the keys of one block's frames. Per frame: the frame's keys are
/// read ([`FrameKeys::of`]); a frame like the previous one costs nothing
/// more; otherwise each key is looked up in its kind's exact "seen" table
/// (bitmaps for EtherTypes' low bits, VLANs, protocols and ports;
/// direct-mapped tables for addresses) and listed if new. Nothing is
/// allocated per frame; sorting happens once per block
/// ([`FlowCollector::finish`]).
///
/// With rows on ([`FlowCollector::with_rows`]), the collector also keeps,
/// per block, [`SigRow`]s or [`KeysRow`]s per distinct frame signature
/// (all of a frame's keys: a plain IPv4 frame's packed `fast_sig`, any
/// other frame's [`FrameKeys`]) with the stream offsets of its first and
/// last frame in the block and their count (a new row where a frame comes
/// more than [`ROW_GAP`] after the signature's last one): the exact key index is built
/// from these rows (the `keys` module of the storage crate). The tables
/// that spot a signature already seen in the block are direct-mapped, so a
/// signature pushed out by a collision starts a second row: rows are exact
/// (every frame is in exactly one row, whose keys are its keys), not
/// necessarily one per signature. A frame seen before costs one store more
/// than without rows (its row's last offset).
pub struct FlowCollector {
    last: FrameKeys,
    fresh: bool,
    /// Plain IPv4 frames' keys packed ([`fast_sig`]): the last one's slot,
    /// and a direct-mapped table of those seen in this block (sig 0: empty).
    last_sig: u128,
    last_slot: usize,
    sigs: Box<[SigSlot]>,
    /// The slots of `sigs` in use (so that a block's end visits those
    /// only, not the whole table).
    used_sigs: Vec<u16>,
    /// Other frames' keys, likewise (rows only).
    slow: Box<[KeysSlot]>,
    used_slow: Vec<u16>,
    last_slow: usize,
    rows: Option<Rows>,
    /// The block the rows being collected belong to.
    block: u32,
    eth: Vec<u16>,
    vlans: Bits,
    protos: Bits,
    ports: Bits,
    ip4: Seen<u32>,
    ip6: Seen<u128>,
}

/// One slot of the table of plain IPv4 signatures: the signature (0:
/// empty), and the stream offsets (relative to the block's first record) of
/// the first and last frame with it, and their count.
#[derive(Clone, Copy, Default)]
#[repr(C, align(32))]
struct SigSlot {
    sig: u128,
    first: u32,
    last: u32,
    frames: u32,
}

#[derive(Clone, Copy, Default)]
struct KeysSlot {
    keys: FrameKeys,
    used: bool,
    first: u32,
    last: u32,
    frames: u32,
}

/// A row of a plain IPv4 signature ([`FrameKeys::from_sig`] gives its keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigRow {
    /// The signature (`fast_sig`'s packing).
    pub sig: u128,
    /// The block (as numbered by [`FlowCollector::set_block`] and counted up
    /// by each [`FlowCollector::finish`]).
    pub block: u32,
    /// Offset of the first frame's record, from the block's first record.
    pub first: u32,
    /// Offset of the last frame's record, likewise.
    pub last: u32,
    /// Frames.
    pub frames: u32,
}

/// A row of any other frame signature: its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeysRow {
    /// Every key of its frames.
    pub keys: FrameKeys,
    /// As [`SigRow::block`].
    pub block: u32,
    /// As [`SigRow::first`].
    pub first: u32,
    /// As [`SigRow::last`].
    pub last: u32,
    /// Frames.
    pub frames: u32,
}

/// Rows of one or more blocks, in block order ([`FlowCollector::take_rows`]).
#[derive(Clone, Debug, Default)]
pub struct Rows {
    /// Plain IPv4 signatures.
    pub sig: Vec<SigRow>,
    /// Other signatures.
    pub keys: Vec<KeysRow>,
}

impl Rows {
    /// Rows in all.
    pub fn len(&self) -> usize {
        self.sig.len() + self.keys.len()
    }

    /// No row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the rows take in memory.
    pub fn bytes(&self) -> usize {
        self.sig.len() * std::mem::size_of::<SigRow>()
            + self.keys.len() * std::mem::size_of::<KeysRow>()
    }

    /// Empties both lists, keeping their memory.
    pub fn clear(&mut self) {
        self.sig.clear();
        self.keys.clear();
    }

    /// Moves the rows of blocks `block` and later into `rest` (the lists
    /// are in block order).
    pub fn split_off_from(&mut self, block: u32, rest: &mut Rows) {
        let i = self.sig.partition_point(|r| r.block < block);
        rest.sig.extend_from_slice(&self.sig[i..]);
        self.sig.truncate(i);
        let i = self.keys.partition_point(|r| r.block < block);
        rest.keys.extend_from_slice(&self.keys[i..]);
        self.keys.truncate(i);
    }
}

impl Default for FlowCollector {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FlowCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowCollector")
            .field("ip4", &self.ip4.list.len())
            .field("ports", &self.ports.list.len())
            .field("rows", &self.rows.as_ref().map(Rows::len))
            .finish()
    }
}

/// Slots of the table of other frames' signatures (rows only).
const SLOW: usize = 256;

/// A row ends where the next frame of its signature starts more than this
/// many bytes after its last one (a page: reading a row's bytes then never
/// reads a page between two of its frames that holds none of them).
pub const ROW_GAP: u32 = 4096;

#[inline(always)]
fn sig_slot(sig: u128) -> usize {
    let h = ((sig as u64) ^ (sig >> 64) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 53) as usize % SIGS
}

impl FlowCollector {
    /// An empty collector (allocates its tables now, once).
    pub fn new() -> Self {
        FlowCollector {
            last: FrameKeys::default(),
            fresh: true,
            last_sig: 0,
            last_slot: 0,
            sigs: vec![SigSlot::default(); SIGS].into_boxed_slice(),
            used_sigs: Vec::with_capacity(SIGS),
            slow: Box::new([]),
            used_slow: Vec::new(),
            last_slow: 0,
            rows: None,
            block: 0,
            eth: Vec::with_capacity(16),
            vlans: Bits::new(4096),
            protos: Bits::new(256),
            ports: Bits::new(65536),
            ip4: Seen::new(),
            ip6: Seen::new(),
        }
    }

    /// Also collects rows (see the type's docs), room made for `capacity`
    /// of them (more are taken, growing the list).
    pub fn with_rows(mut self, capacity: usize) -> Self {
        self.slow = vec![KeysSlot::default(); SLOW].into_boxed_slice();
        self.used_slow = Vec::with_capacity(SLOW);
        self.rows = Some(Rows {
            sig: Vec::with_capacity(capacity),
            keys: Vec::with_capacity(capacity / 16 + 64),
        });
        self
    }

    /// Whether rows are collected.
    pub fn has_rows(&self) -> bool {
        self.rows.is_some()
    }

    /// Numbers the block being collected (each [`FlowCollector::finish`]
    /// counts one up).
    pub fn set_block(&mut self, block: u32) {
        self.block = block;
    }

    /// The number of the block being collected.
    pub fn block(&self) -> u32 {
        self.block
    }

    /// Rows collected so far (of finished blocks, and of signatures of the
    /// current one pushed out of their slot).
    pub fn rows(&self) -> Option<&Rows> {
        self.rows.as_ref()
    }

    /// Swaps the rows collected so far with `other` (emptied first): the
    /// caller takes them, the collector goes on into `other`'s memory.
    pub fn take_rows(&mut self, other: &mut Rows) {
        other.clear();
        if let Some(r) = &mut self.rows {
            std::mem::swap(r, other);
        }
    }

    /// Moves the rows of blocks `block` and later from `other` back to the
    /// front of the collector's (`other` came from [`FlowCollector::take_rows`]).
    pub fn give_back_rows_from(&mut self, block: u32, other: &mut Rows) {
        if let Some(r) = &mut self.rows {
            let mut rest = Rows::default();
            other.split_off_from(block, &mut rest);
            rest.sig.append(&mut r.sig);
            rest.keys.append(&mut r.keys);
            std::mem::swap(&mut r.sig, &mut rest.sig);
            std::mem::swap(&mut r.keys, &mut rest.keys);
        }
    }

    /// Adds one frame (its stored bytes); with rows, its record is at
    /// offset 0 of the block (see [`FlowCollector::add_at`]).
    #[inline]
    pub fn add(&mut self, frame: &[u8]) {
        self.add_at(frame, 0)
    }

    /// Adds one frame (its stored bytes) whose record starts `off` bytes
    /// after the block's first record.
    #[inline]
    pub fn add_at(&mut self, frame: &[u8], off: u32) {
        if let Some(sig) = fast_sig(frame) {
            // The common case: its keys are all in `sig`; one seen in this
            // block already adds nothing but its row's end.
            if sig == self.last_sig {
                let i = self.last_slot;
                self.extend_sig(i, off);
                return;
            }
            self.last_sig = sig;
            let i = sig_slot(sig);
            self.last_slot = i;
            if self.sigs[i].sig == sig {
                self.extend_sig(i, off);
                return;
            }
            let s = &mut self.sigs[i];
            if s.sig != 0 {
                if let Some(r) = &mut self.rows {
                    r.sig.push(SigRow {
                        sig: s.sig,
                        block: self.block,
                        first: s.first,
                        last: s.last,
                        frames: s.frames,
                    });
                }
            } else {
                self.used_sigs.push(i as u16);
            }
            *s = SigSlot {
                sig,
                first: off,
                last: off,
                frames: 1,
            };
            let k = FrameKeys::of(frame);
            self.add_keys(k);
            return;
        }
        let k = FrameKeys::of(frame);
        if self.rows.is_some() {
            self.add_slow_row(&k, off);
        }
        self.add_keys(k);
    }

    /// A frame of the signature in slot `i`, `off` bytes into the block:
    /// its row grows to it, or (rows on, more than [`ROW_GAP`] after the
    /// row's last frame) the row goes out and a new one starts here, so
    /// that no row spans a gap wider than a page between two of its frames.
    #[inline(always)]
    fn extend_sig(&mut self, i: usize, off: u32) {
        let s = &mut self.sigs[i];
        if off.wrapping_sub(s.last) > ROW_GAP {
            if let Some(r) = &mut self.rows {
                r.sig.push(SigRow {
                    sig: s.sig,
                    block: self.block,
                    first: s.first,
                    last: s.last,
                    frames: s.frames,
                });
                s.first = off;
                s.frames = 0;
            }
        }
        s.last = off;
        s.frames += 1;
    }

    /// As [`FlowCollector::extend_sig`], for a slot of other frames.
    #[inline]
    fn extend_slow(&mut self, i: usize, off: u32) {
        let s = &mut self.slow[i];
        if off.wrapping_sub(s.last) > ROW_GAP {
            if let Some(r) = &mut self.rows {
                r.keys.push(KeysRow {
                    keys: s.keys,
                    block: self.block,
                    first: s.first,
                    last: s.last,
                    frames: s.frames,
                });
                s.first = off;
                s.frames = 0;
            }
        }
        s.last = off;
        s.frames += 1;
    }

    /// A frame without a fast signature, into its row.
    #[inline]
    fn add_slow_row(&mut self, k: &FrameKeys, off: u32) {
        let j = self.last_slow;
        if self.slow[j].used && self.slow[j].keys == *k {
            self.extend_slow(j, off);
            return;
        }
        let i = k.slot_hash() % SLOW;
        self.last_slow = i;
        if self.slow[i].used && self.slow[i].keys == *k {
            self.extend_slow(i, off);
            return;
        }
        let s = &mut self.slow[i];
        if s.used {
            if let Some(r) = &mut self.rows {
                r.keys.push(KeysRow {
                    keys: s.keys,
                    block: self.block,
                    first: s.first,
                    last: s.last,
                    frames: s.frames,
                });
            }
        } else {
            self.used_slow.push(i as u16);
        }
        *s = KeysSlot {
            keys: *k,
            used: true,
            first: off,
            last: off,
            frames: 1,
        };
    }

    #[inline]
    fn add_keys(&mut self, k: FrameKeys) {
        if k == self.last && !self.fresh {
            return;
        }
        self.fresh = false;
        self.last = k;
        for &e in &k.eth[..k.n_eth as usize] {
            if !self.eth.contains(&e) {
                self.eth.push(e);
            }
        }
        for &v in &k.vlan[..k.n_vlan as usize] {
            self.vlans.add(v);
        }
        if k.has_proto {
            self.protos.add(k.proto as u16);
        }
        for &a in &k.v4[..k.n_v4 as usize] {
            self.ip4.add(a, a as u64);
        }
        for &a in &k.v6[..k.n_v6 as usize] {
            self.ip6.add(a, (a ^ a >> 64) as u64);
        }
        for &p in &k.port[..k.n_port as usize] {
            self.ports.add(p);
        }
    }

    /// Whether no frame was added since the last [`FlowCollector::finish`].
    pub fn is_empty(&self) -> bool {
        self.fresh
    }

    /// Forgets the frames added since the last finish (their block never
    /// went out): no set, no rows; the block number stays.
    pub fn discard(&mut self) {
        let b = self.block;
        let rows = self.rows.as_ref().map(|r| (r.sig.len(), r.keys.len()));
        let _ = self.finish();
        if let (Some(r), Some((ns, nk))) = (&mut self.rows, rows) {
            r.sig.truncate(ns);
            r.keys.truncate(nk);
            // Rows pushed out of their slot during the block go too.
            let i = r.sig.partition_point(|x| x.block < b);
            r.sig.truncate(i);
            let i = r.keys.partition_point(|x| x.block < b);
            r.keys.truncate(i);
        }
        self.block = b;
    }

    /// The block's set; the collector starts over for the next block (with
    /// rows: the block's rows are added to the list and the block number
    /// counts up).
    pub fn finish(&mut self) -> FlowSet {
        let mut s = FlowSet::default();
        let [a0, a1, a2, a3, a4, a5] = &mut s.any;
        s.ether_types = std::mem::take(&mut self.eth);
        self.eth.reserve(16);
        *a0 = s.ether_types.len() > MAX_PER_KIND;
        s.vlans = self.vlans.take(a1);
        s.protos = self.protos.take(a2).into_iter().map(|p| p as u8).collect();
        self.ip4.take(&mut s.ip4, a3, |a| a as u64);
        self.ip6.take(&mut s.ip6, a4, |a| (a ^ a >> 64) as u64);
        s.ports = self.ports.take(a5);
        s.normalize();
        self.last = FrameKeys::default();
        self.fresh = true;
        self.last_sig = 0;
        let block = self.block;
        // The slots in use only: a block of a few flows costs a few.
        match &mut self.rows {
            Some(r) => {
                for &i in &self.used_sigs {
                    let slot = &mut self.sigs[i as usize];
                    r.sig.push(SigRow {
                        sig: slot.sig,
                        block,
                        first: slot.first,
                        last: slot.last,
                        frames: slot.frames,
                    });
                    slot.sig = 0;
                }
                for &i in &self.used_slow {
                    let slot = &mut self.slow[i as usize];
                    r.keys.push(KeysRow {
                        keys: slot.keys,
                        block,
                        first: slot.first,
                        last: slot.last,
                        frames: slot.frames,
                    });
                    slot.used = false;
                }
                self.block = block.wrapping_add(1);
            }
            None => {
                for &i in &self.used_sigs {
                    self.sigs[i as usize].sig = 0;
                }
            }
        }
        self.used_sigs.clear();
        self.used_slow.clear();
        s
    }
}

/// Slots of the table of packed IPv4 keys (32 KiB).
const SIGS: usize = 2048;

/// The keys of an untagged IPv4 frame long enough to hold them all, packed
/// into one value (never 0): protocol, addresses, and the 4 bytes at the
/// transport header (ports). Two frames with the same value have the same
/// keys ([`FrameKeys::of`]). None for any other frame.
#[inline(always)]
fn fast_sig(f: &[u8]) -> Option<u128> {
    let h: &[u8; 38] = f.get(..38)?.try_into().ok()?;
    if h[12] != 0x08 || h[13] != 0x00 {
        return None;
    }
    let t = 14 + 4 * (h[14] & 0xf) as usize;
    let ports = u32::from_be_bytes(f.get(t..t + 4)?.try_into().ok()?);
    let addrs = u64::from_be_bytes(h[26..34].try_into().ok()?);
    Some(1 << 127 | (h[23] as u128) << 96 | (addrs as u128) << 32 | ports as u128)
}

const KINDS: usize = 6;

/// The keys of one block, each kind sorted and without repeats, or "any"
/// when the block held too many of that kind to list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowSet {
    /// EtherTypes.
    pub ether_types: Vec<u16>,
    /// VLAN ids.
    pub vlans: Vec<u16>,
    /// IP protocols.
    pub protos: Vec<u8>,
    /// IPv4 addresses.
    pub ip4: Vec<u32>,
    /// IPv6 addresses.
    pub ip6: Vec<u128>,
    /// Ports.
    pub ports: Vec<u16>,
    /// Per kind, in the order of the fields above: too many to list (the
    /// block may hold any value; its list is empty).
    pub any: [bool; KINDS],
}

fn sort_cap<T: Ord>(v: &mut Vec<T>, any: &mut bool) {
    v.sort_unstable();
    v.dedup();
    if v.len() > MAX_PER_KIND {
        v.clear();
        *any = true;
    }
}

impl FlowSet {
    /// A set that may hold anything (an unknown block).
    pub fn anything() -> FlowSet {
        FlowSet {
            any: [true; KINDS],
            ..Default::default()
        }
    }

    /// Adds one key (call [`FlowSet::normalize`] before asking). A range
    /// (which no frame holds) makes its kind "any": the set stays sound.
    pub fn push(&mut self, k: Key) {
        match k {
            Key::EtherType(v) => self.ether_types.push(v),
            Key::Vlan(v) => self.vlans.push(v),
            Key::Proto(v) => self.protos.push(v),
            Key::Ip4(v) => self.ip4.push(v),
            Key::Ip6(v) => self.ip6.push(v),
            Key::Port(v) => self.ports.push(v),
            Key::Net4(..) => self.any[3] = true,
            Key::Net6(..) => self.any[4] = true,
            Key::Ports(..) => self.any[5] = true,
        }
    }

    /// Sorts, removes repeats, and turns a kind with too many values into "any".
    pub fn normalize(&mut self) {
        let [a0, a1, a2, a3, a4, a5] = &mut self.any;
        sort_cap(&mut self.ether_types, a0);
        sort_cap(&mut self.vlans, a1);
        sort_cap(&mut self.protos, a2);
        sort_cap(&mut self.ip4, a3);
        sort_cap(&mut self.ip6, a4);
        sort_cap(&mut self.ports, a5);
    }

    /// Sorts and removes repeats, listing every value however many (an
    /// exact set, as the key index gives: not for [`FlowSet::encode`],
    /// which lists at most [`MAX_PER_KIND`] of a kind).
    pub fn normalize_exact(&mut self) {
        fn sd<T: Ord>(v: &mut Vec<T>) {
            v.sort_unstable();
            v.dedup();
        }
        sd(&mut self.ether_types);
        sd(&mut self.vlans);
        sd(&mut self.protos);
        sd(&mut self.ip4);
        sd(&mut self.ip6);
        sd(&mut self.ports);
    }

    /// Whether the block may hold `k`.
    pub fn may_hold(&self, k: &Key) -> bool {
        match *k {
            Key::EtherType(v) => self.any[0] || self.ether_types.binary_search(&v).is_ok(),
            Key::Vlan(v) => self.any[1] || self.vlans.binary_search(&v).is_ok(),
            Key::Proto(v) => self.any[2] || self.protos.binary_search(&v).is_ok(),
            Key::Ip4(v) => self.any[3] || self.ip4.binary_search(&v).is_ok(),
            Key::Ip6(v) => self.any[4] || self.ip6.binary_search(&v).is_ok(),
            Key::Port(v) => self.any[5] || self.ports.binary_search(&v).is_ok(),
            Key::Net4(lo, hi) => self.any[3] || any_in(&self.ip4, lo, hi),
            Key::Net6(lo, hi) => self.any[4] || any_in(&self.ip6, lo, hi),
            Key::Ports(lo, hi) => self.any[5] || any_in(&self.ports, lo, hi),
        }
    }

    /// Appends the encoding: per kind (in field order) a little-endian u16
    /// count (0xffff: any), then the values, little-endian, fixed width.
    pub fn encode(&self, out: &mut Vec<u8>) {
        fn put<const N: usize, T: Copy>(
            out: &mut Vec<u8>,
            any: bool,
            v: &[T],
            le: impl Fn(T) -> [u8; N],
        ) {
            let n = if any { 0xffff } else { v.len() as u16 };
            out.extend_from_slice(&n.to_le_bytes());
            if !any {
                v.iter().for_each(|&x| out.extend_from_slice(&le(x)));
            }
        }
        put(out, self.any[0], &self.ether_types, u16::to_le_bytes);
        put(out, self.any[1], &self.vlans, u16::to_le_bytes);
        put(out, self.any[2], &self.protos, u8::to_le_bytes);
        put(out, self.any[3], &self.ip4, u32::to_le_bytes);
        put(out, self.any[4], &self.ip6, u128::to_le_bytes);
        put(out, self.any[5], &self.ports, u16::to_le_bytes);
    }

    /// Reads [`FlowSet::encode`]'s bytes; `None` if they are not such
    /// (short, too many values, not sorted).
    pub fn decode(b: &[u8]) -> Option<FlowSet> {
        struct Rd<'a>(&'a [u8]);
        impl Rd<'_> {
            fn take(&mut self, n: usize) -> Option<&[u8]> {
                if self.0.len() < n {
                    return None;
                }
                let (a, b) = self.0.split_at(n);
                self.0 = b;
                Some(a)
            }
            fn list<const N: usize, T: Ord>(
                &mut self,
                any: &mut bool,
                from: impl Fn([u8; N]) -> T,
            ) -> Option<Vec<T>> {
                let n = u16::from_le_bytes(self.take(2)?.try_into().ok()?);
                if n == 0xffff {
                    *any = true;
                    return Some(Vec::new());
                }
                let n = n as usize;
                if n > MAX_PER_KIND {
                    return None;
                }
                let raw = self.take(n * N)?;
                let v: Vec<T> = raw
                    .chunks_exact(N)
                    .map(|c| from(c.try_into().unwrap()))
                    .collect();
                v.windows(2).all(|w| w[0] < w[1]).then_some(v)
            }
        }
        let mut r = Rd(b);
        let mut s = FlowSet::default();
        let [a0, a1, a2, a3, a4, a5] = &mut s.any;
        s.ether_types = r.list(a0, u16::from_le_bytes)?;
        s.vlans = r.list(a1, u16::from_le_bytes)?;
        s.protos = r.list(a2, u8::from_le_bytes)?;
        s.ip4 = r.list(a3, u32::from_le_bytes)?;
        s.ip6 = r.list(a4, u128::from_le_bytes)?;
        s.ports = r.list(a5, u16::from_le_bytes)?;
        r.0.is_empty().then_some(s)
    }
}

/// What a filter needs of a block: it may match only if, for one of the
/// alternatives, the block may hold every key of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needs {
    alts: Vec<Vec<Key>>,
}

/// A value the walk knows the accumulator (or X, or a scratch word) holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    Unknown,
    /// `size` bytes at `off`, and-ed with `mask`.
    Abs {
        off: u32,
        size: u8,
        mask: u32,
    },
    /// `size` bytes at `X + off` where X = 4 * (frame[xoff] & 0xf).
    Ind {
        xoff: u32,
        off: u32,
        size: u8,
        mask: u32,
    },
    /// X = 4 * (frame[off] & 0xf) (`ldxb 4*([off]&0xf)`).
    Msh(u32),
}

#[derive(Clone)]
struct State {
    a: Val,
    x: Val,
    m: [Val; op::MEMWORDS as usize],
}

/// Steps a walk may take before the filter is judged too branchy to narrow.
const WALK_BUDGET: u32 = 1 << 16;
/// Alternatives kept at most (more: the filter does not narrow).
const MAX_ALTS: usize = 256;

/// What a path knows of a loaded value: it lies in `lo..=hi` (an equality
/// is `k..=k`; `lo > hi`: no value, the path is impossible).
type Fact = (Val, u64, u64);

struct Walk<'a> {
    insns: &'a [Insn],
    budget: u32,
    facts: Vec<Fact>,
    alts: Vec<Vec<Key>>,
    /// A path accepts with nothing recognisable: no narrowing.
    open: bool,
}

fn full_mask(size: u8) -> u32 {
    match size {
        1 => 0xff,
        2 => 0xffff,
        _ => 0xffff_ffff,
    }
}

impl Needs {
    /// What `insns` (a validated program) needs of a block, or `None` when it
    /// cannot narrow (see the module docs).
    pub fn of(insns: &[Insn]) -> Option<Needs> {
        let mut w = Walk {
            insns,
            budget: WALK_BUDGET,
            facts: Vec::new(),
            alts: Vec::new(),
            open: false,
        };
        let st = State {
            a: Val::Unknown,
            x: Val::Unknown,
            m: [Val::Unknown; op::MEMWORDS as usize],
        };
        if !w.go(0, st) || w.open {
            return None;
        }
        let mut alts = w.alts;
        for a in &mut alts {
            a.sort_unstable();
            a.dedup();
        }
        alts.sort_unstable();
        alts.dedup();
        Some(Needs { alts })
    }

    /// Needs stated directly, for a filter whose compiler knows its keys
    /// (Stenographer's queries): a block may match when it may hold every
    /// key of one of `alts`. Sound only if every frame the filter accepts
    /// holds, as [`FrameKeys::of`] reads it, all the keys of one of them.
    pub fn from_alternatives(mut alts: Vec<Vec<Key>>) -> Needs {
        for a in &mut alts {
            a.sort_unstable();
            a.dedup();
        }
        alts.sort_unstable();
        alts.dedup();
        Needs { alts }
    }

    /// The alternatives: each a set of keys that a matching frame holds all of
    /// (no alternative: the filter matches nothing).
    pub fn alternatives(&self) -> &[Vec<Key>] {
        &self.alts
    }

    /// Whether a block with `set` may hold a matching frame.
    pub fn may_match(&self, set: &FlowSet) -> bool {
        self.alts
            .iter()
            .any(|alt| alt.iter().all(|k| set.may_hold(k)))
    }
}

impl Walk<'_> {
    /// Walks every path from `pc`; false when the budget ran out or an
    /// instruction was not understood. The facts it learns on its way (the
    /// false branches of comparisons) are forgotten when it returns.
    fn go(&mut self, pc: usize, st: State) -> bool {
        let depth = self.facts.len();
        let ok = self.path(pc, st);
        self.facts.truncate(depth);
        ok
    }

    fn path(&mut self, mut pc: usize, mut st: State) -> bool {
        loop {
            if self.budget == 0 || self.alts.len() > MAX_ALTS || self.open {
                return false;
            }
            self.budget -= 1;
            let Some(i) = self.insns.get(pc) else {
                return false;
            };
            let class = i.code & 0x07;
            let size = match i.code & 0x18 {
                op::W => 4,
                op::H => 2,
                op::B => 1,
                _ => 0,
            };
            match class {
                op::LD => {
                    st.a = match i.code & 0xe0 {
                        op::ABS if size > 0 => Val::Abs {
                            off: i.k,
                            size,
                            mask: full_mask(size),
                        },
                        op::IND if size > 0 => match st.x {
                            Val::Msh(xoff) => Val::Ind {
                                xoff,
                                off: i.k,
                                size,
                                mask: full_mask(size),
                            },
                            _ => Val::Unknown,
                        },
                        op::MEM => st.m[(i.k % op::MEMWORDS) as usize],
                        _ => Val::Unknown,
                    };
                }
                op::LDX => {
                    st.x = match i.code & 0xe0 {
                        op::MSH => Val::Msh(i.k),
                        op::MEM => st.m[(i.k % op::MEMWORDS) as usize],
                        _ => Val::Unknown,
                    };
                }
                op::ST => st.m[(i.k % op::MEMWORDS) as usize] = st.a,
                op::STX => st.m[(i.k % op::MEMWORDS) as usize] = st.x,
                op::ALU => {
                    st.a = match (i.code & 0xf0, i.code & 0x08, st.a) {
                        (op::AND, op::K, Val::Abs { off, size, mask }) => Val::Abs {
                            off,
                            size,
                            mask: mask & i.k,
                        },
                        (
                            op::AND,
                            op::K,
                            Val::Ind {
                                xoff,
                                off,
                                size,
                                mask,
                            },
                        ) => Val::Ind {
                            xoff,
                            off,
                            size,
                            mask: mask & i.k,
                        },
                        _ => Val::Unknown,
                    };
                }
                op::MISC => {
                    if i.code & 0xf8 == op::TAX {
                        st.x = st.a;
                    } else {
                        st.a = st.x;
                    }
                }
                op::RET => {
                    let accepts = match i.code & 0x18 {
                        op::K => i.k != 0,
                        _ => true,
                    };
                    if accepts {
                        self.accept();
                    }
                    return true;
                }
                op::JMP => {
                    let next = pc + 1;
                    if i.code & 0xf0 == op::JA {
                        if (i.k as i32) < 0 {
                            // A loop (protochain): no narrowing.
                            return false;
                        }
                        pc = next + i.k as usize;
                        continue;
                    }
                    let (t, f) = (next + i.jt as usize, next + i.jf as usize);
                    // What each branch learns of a loaded value: `jeq`
                    // (true: equal), `jgt` and `jge` (a range either way).
                    let known =
                        matches!(st.a, Val::Abs { .. } | Val::Ind { .. }) && i.code & 0x08 == op::K;
                    let k = u64::from(i.k);
                    let (on_true, on_false) = match i.code & 0xf0 {
                        _ if !known => (None, None),
                        op::JEQ => (Some((k, k)), None),
                        op::JGT => (Some((k + 1, u64::MAX)), Some((0, k))),
                        op::JGE if k == 0 => (Some((0, u64::MAX)), Some((1, 0))),
                        op::JGE => (Some((k, u64::MAX)), Some((0, k - 1))),
                        _ => (None, None),
                    };
                    if let Some((lo, hi)) = on_true {
                        self.facts.push((st.a, lo, hi));
                    }
                    let ok = self.go(t, st.clone());
                    if on_true.is_some() {
                        self.facts.pop();
                    }
                    if !ok {
                        return false;
                    }
                    // Kept for the rest of this path (`go` forgets it).
                    if let Some((lo, hi)) = on_false {
                        self.facts.push((st.a, lo, hi));
                    }
                    pc = f;
                    continue;
                }
                _ => return false,
            }
            pc += 1;
        }
    }

    /// The path's facts reached an accepting `ret`: its keys.
    fn accept(&mut self) {
        match keys_of(&self.facts) {
            Path::Impossible => {}
            Path::Needs(k) if k.is_empty() => self.open = true,
            Path::Needs(k) => self.alts.push(k),
        }
    }
}

enum Path {
    /// Two facts disagree: no frame takes this path.
    Impossible,
    Needs(Vec<Key>),
}

/// The range of values every fact on `v` allows (None: no fact on it);
/// `Err` when none is allowed.
fn range_of(facts: &[Fact], v: Val) -> Result<Option<(u64, u64)>, ()> {
    let mut got: Option<(u64, u64)> = None;
    for &(w, lo, hi) in facts {
        if w == v {
            let (a, b) = got.map_or((lo, hi), |(a, b)| (a.max(lo), b.min(hi)));
            if a > b {
                return Err(());
            }
            got = Some((a, b));
        }
    }
    Ok(got)
}

/// The range a whole `size`-byte field's value is known to lie in from the
/// facts on it: a range (or an equality) of the whole field, and an
/// equality of it under a mask (`net`: `[k & m, k & m | !m]`, every value
/// it admits, exactly the prefix for a prefix mask). None when nothing is
/// known; `Err` when nothing is possible.
fn field_range(
    facts: &[Fact],
    at: impl Fn(&Val) -> Option<u32>,
    size: u8,
) -> Result<Option<(u64, u64)>, ()> {
    let full = full_mask(size);
    let mut got: Option<(u64, u64)> = None;
    for &(v, lo, hi) in facts {
        let Some(mask) = at(&v) else { continue };
        let (lo, hi) = if mask == full {
            (lo, hi.min(u64::from(full)))
        } else if lo == hi {
            let base = lo & u64::from(mask);
            (base, base | u64::from(full & !mask))
        } else {
            // A range of a masked value bounds nothing simply.
            continue;
        };
        let (a, b) = got.map_or((lo, hi), |(a, b)| (a.max(lo), b.min(hi)));
        if a > b {
            return Err(());
        }
        got = Some((a, b));
    }
    Ok(got)
}

fn keys_of(facts: &[Fact]) -> Path {
    // Facts on one load that no value meets make the path impossible.
    for &(v, _, _) in facts {
        if range_of(facts, v).is_err() {
            return Path::Impossible;
        }
    }
    // A single value every fact on the load agrees on.
    let get = |off, size: u8, mask| match range_of(facts, Val::Abs { off, size, mask }) {
        Ok(Some((lo, hi))) if lo == hi => u32::try_from(lo).ok(),
        _ => None,
    };
    let abs_at = |off: u32, size: u8| {
        move |v: &Val| match *v {
            Val::Abs {
                off: o,
                size: s,
                mask,
            } if o == off && s == size => Some(mask),
            _ => None,
        }
    };
    let mut keys = Vec::new();
    let Some(e0) = get(12, 2, 0xffff) else {
        return Path::Needs(keys);
    };
    keys.push(Key::EtherType(e0 as u16));
    let (mut e, mut base) = (Some(e0 as u16), 14u32);
    for _ in 0..2 {
        match e {
            Some(t) if TPIDS.contains(&t) => {
                if let Some(v) = get(base, 2, 0xfff) {
                    keys.push(Key::Vlan(v as u16));
                }
                e = get(base + 2, 2, 0xffff).map(|n| n as u16);
                if let Some(n) = e {
                    keys.push(Key::EtherType(n));
                }
                base += 4;
            }
            _ => break,
        }
    }
    // A port field's range: at `off` from the transport header (IPv4:
    // `X + off` with X from the header length byte at `xoff`).
    let port = |xoff: Option<u32>, off: u32| -> Result<Option<Key>, ()> {
        let at = move |v: &Val| match (*v, xoff) {
            (
                Val::Ind {
                    xoff: x,
                    off: o,
                    size: 2,
                    mask,
                },
                Some(want),
            ) if x == want && o == off => Some(mask),
            (
                Val::Abs {
                    off: o,
                    size: 2,
                    mask,
                },
                None,
            ) if o == off => Some(mask),
            _ => None,
        };
        Ok(field_range(facts, at, 2)?
            .filter(|&(lo, hi)| (lo, hi) != (0, 0xffff))
            .map(|(lo, hi)| Key::ports(lo as u16, hi as u16)))
    };
    let addr4 = |keys: &mut Vec<Key>, off: u32| -> Result<(), ()> {
        if let Some((lo, hi)) = field_range(facts, abs_at(off, 4), 4)? {
            if (lo, hi) != (0, u64::from(u32::MAX)) {
                keys.push(Key::net4(lo as u32, hi as u32));
            }
        }
        Ok(())
    };
    let found = (|| -> Result<(), ()> {
        match e {
            Some(ETH_IP4) => {
                if let Some(p) = get(base + 9, 1, 0xff) {
                    keys.push(Key::Proto(p as u8));
                }
                for o in [base + 12, base + 16] {
                    addr4(&mut keys, o)?;
                }
                for o in [base, base + 2] {
                    keys.extend(port(Some(base), o)?);
                }
            }
            Some(ETH_IP6) => {
                if let Some(p) = get(base + 6, 1, 0xff) {
                    keys.push(Key::Proto(p as u8));
                }
                for o in [base + 8, base + 24] {
                    // Each word's range; the address lies between the
                    // words' lows and highs (a prefix: exactly). Only when
                    // the last word was compared: a frame holds an address
                    // key only if all 16 bytes are stored, and a program
                    // that compared fewer words (`ip6 net X/64`) accepts a
                    // frame cut after them.
                    let (mut lo, mut hi, mut last) = (0u128, 0u128, false);
                    for i in 0..4 {
                        let (a, b) = match field_range(facts, abs_at(o + 4 * i, 4), 4)? {
                            Some(r) => {
                                last = i == 3;
                                r
                            }
                            None => (0, u64::from(u32::MAX)),
                        };
                        lo = lo << 32 | u128::from(a);
                        hi = hi << 32 | u128::from(b);
                    }
                    if last && (lo, hi) != (0, u128::MAX) {
                        keys.push(Key::net6(lo, hi));
                    }
                }
                for o in [base + 40, base + 42] {
                    keys.extend(port(None, o)?);
                }
            }
            Some(ETH_ARP) | Some(ETH_RARP) => {
                for o in [base + 14, base + 24] {
                    addr4(&mut keys, o)?;
                }
            }
            _ => {}
        }
        Ok(())
    })();
    match found {
        Ok(()) => Path::Needs(keys),
        Err(()) => Path::Impossible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn ip4_udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0];
        p.extend_from_slice(&src);
        p.extend_from_slice(&dst);
        p.extend_from_slice(&sport.to_be_bytes());
        p.extend_from_slice(&dport.to_be_bytes());
        p.extend_from_slice(&[0, 8, 0, 0]);
        eth(0x0800, &p)
    }

    #[test]
    fn frame_keys_of_an_ipv4_udp_frame() {
        let f = ip4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 53);
        let mut ks = Vec::new();
        FrameKeys::of(&f).for_each(|k| ks.push(k));
        assert_eq!(
            ks,
            vec![
                Key::EtherType(0x800),
                Key::Proto(17),
                Key::Ip4(0x0a00_0001),
                Key::Ip4(0x0a00_0002),
                Key::Port(1234),
                Key::Port(53)
            ]
        );
        // Cut short: only what is there.
        let mut ks = Vec::new();
        FrameKeys::of(&f[..30]).for_each(|k| ks.push(k));
        assert_eq!(
            ks,
            vec![Key::EtherType(0x800), Key::Proto(17), Key::Ip4(0x0a00_0001)]
        );
    }

    #[test]
    fn sets_encode_and_decode() {
        let mut c = FlowCollector::new();
        for i in 0..50u8 {
            c.add(&ip4_udp(
                [10, 0, 0, i % 5],
                [10, 0, 0, 99],
                1000 + i as u16,
                53,
            ));
        }
        let s = c.finish();
        assert_eq!(s.ip4.len(), 6);
        assert_eq!(s.ports.len(), 51);
        let mut b = Vec::new();
        s.encode(&mut b);
        assert_eq!(FlowSet::decode(&b), Some(s.clone()));
        assert_eq!(FlowSet::decode(&b[..b.len() - 1]), None);
        assert!(c.is_empty());
        let any = FlowSet::anything();
        let mut b = Vec::new();
        any.encode(&mut b);
        assert_eq!(b.len(), 12);
        assert_eq!(FlowSet::decode(&b), Some(any));
    }

    #[test]
    fn too_many_values_of_a_kind_is_any() {
        let mut c = FlowCollector::new();
        for i in 0..3000u32 {
            let a = i.to_be_bytes();
            c.add(&ip4_udp([10, 1, a[2], a[3]], [10, 0, 0, 1], 7, 9));
        }
        let s = c.finish();
        assert!(s.any[3], "ip4 listed {} values", s.ip4.len());
        assert!(s.may_hold(&Key::Ip4(0x0b00_0000)));
        assert!(!s.may_hold(&Key::Port(8)));
    }
}
