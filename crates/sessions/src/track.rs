//! The connection table: frames in, one [`Session`] per connection per
//! file out.

use crate::names::Names;
use crate::{dns, http, quic, tls};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;
use wiretape_filter::conn::{self, Packet};

/// The tracker's bounds.
#[derive(Clone, Debug)]
pub struct Config {
    /// Connections tracked at once at most; a new one arriving at a full
    /// table ends the least recently seen eighth (their rows are written,
    /// counted in [`TableStats::evicted`]; a later frame of one starts a
    /// new session).
    pub max_connections: usize,
    /// Frames with payload read for names, per direction of a connection.
    pub name_frames: u8,
    /// Bytes of a direction's stream put together for one message (a
    /// ClientHello, a request's head), at most.
    pub name_bytes: usize,
    /// Bytes of all those buffers together, at most; a connection that
    /// would need more is not named (counted in
    /// [`TableStats::names_skipped`]).
    pub buffer_budget: usize,
    /// At a cut, connections without a frame for this long (and TCP
    /// connections closed by FIN both ways or RST) are forgotten: a later
    /// frame starts a new session.
    pub idle_ns: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_connections: 1 << 19,
            name_frames: 8,
            name_bytes: 16 << 10,
            buffer_budget: 64 << 20,
            idle_ns: 15 * 60 * 1_000_000_000,
        }
    }
}

/// One connection's row in one file's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// Stable across files: a hash of the connection's normalized
    /// endpoints, protocol, VLAN and first timestamp ([`session_id`]).
    pub id: u64,
    /// The first frame's stamp in this file (ns since the epoch).
    pub first_ns: u64,
    /// The last frame's stamp in this file.
    pub last_ns: u64,
    /// 4 or 6.
    pub ip_version: u8,
    /// IP protocol (6 TCP, 17 UDP, ...).
    pub proto: u8,
    /// The client: the sender of the first frame, or of the SYN.
    pub client_ip: IpAddr,
    /// The client's port (0 without ports).
    pub client_port: u16,
    /// The server.
    pub server_ip: IpAddr,
    /// The server's port.
    pub server_port: u16,
    /// The outer VLAN id of the connection's first frame.
    pub vlan: Option<u16>,
    /// Frames from the client in this file.
    pub client_packets: u64,
    /// Their bytes on the wire (original lengths).
    pub client_bytes: u64,
    /// Frames from the server in this file.
    pub server_packets: u64,
    /// Their bytes on the wire.
    pub server_bytes: u64,
    /// TCP: every flag seen in this file, or-ed (FIN 0x01, SYN 0x02, RST
    /// 0x04, PSH 0x08, ACK 0x10, URG 0x20, ECE 0x40, CWR 0x80).
    pub tcp_flags: u8,
    /// The connection started in an earlier file.
    pub continued: bool,
    /// What its first frames named (None: nothing).
    pub names: Option<Box<Names>>,
}

/// The counts of one file's table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// Frames handed in.
    pub frames: u64,
    /// Frames that were not IPv4/IPv6 (not in any session).
    pub not_ip: u64,
    /// Non-first IP fragments (no ports: not in any session).
    pub fragments: u64,
    /// Sessions ended because the table was full.
    pub evicted: u64,
    /// TCP sessions ended by a new SYN on the same endpoints (port reuse).
    pub reused: u64,
    /// Connections left unnamed because the buffer budget was spent.
    pub names_skipped: u64,
    /// Frames the caller could not hand in ([`Tracker::skipped`]): the
    /// table is then incomplete.
    pub skipped: u64,
}

impl TableStats {
    /// Whether every frame of the file was seen.
    pub fn complete(&self) -> bool {
        self.skipped == 0
    }
}

/// One file's session table.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// The capture file's name, as the caller gave it.
    pub file: String,
    /// One row per connection with frames in the file, in the order they
    /// ended or (at the cut) first appeared.
    pub rows: Vec<Session>,
    /// Its counts.
    pub stats: TableStats,
}

/// The stable id of a session: the first 8 bytes (big-endian) of the
/// SHA-256 of `wiretape-session-v1`, the IP version, protocol, the two
/// endpoints (address as 16 bytes, port) in ascending order, the VLAN id
/// (0xffff untagged) and the first frame's stamp, shifted right by one
/// (63 bits: a positive INT64 in any SQL engine).
pub fn session_id(
    version: u8,
    proto: u8,
    a: ([u8; 16], u16),
    b: ([u8; 16], u16),
    vlan: Option<u16>,
    first_ns: u64,
) -> u64 {
    const TAG: &[u8] = b"wiretape-session-v1";
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let mut m = [0u8; TAG.len() + 2 + 36 + 2 + 8];
    let mut at = 0;
    for part in [
        TAG,
        &[version, proto],
        &lo.0,
        &lo.1.to_be_bytes(),
        &hi.0,
        &hi.1.to_be_bytes(),
        &vlan.unwrap_or(0xffff).to_be_bytes(),
        &first_ns.to_be_bytes(),
    ] {
        m[at..at + part.len()].copy_from_slice(part);
        at += part.len();
    }
    let d = ring::digest::digest(&ring::digest::SHA256, &m);
    u64::from_be_bytes(d.as_ref()[..8].try_into().unwrap_or_default()) >> 1
}

/// A connection's key: version, protocol and the two endpoints (address,
/// port), the lower first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    version: u8,
    proto: u8,
    lo: ([u8; 16], u16),
    hi: ([u8; 16], u16),
}

/// A fast, fixed hasher for keys (the table is not exposed to chosen
/// keys in a way that matters more than its bound: a collision flood
/// costs time per frame, never memory beyond `max_connections`).
#[derive(Default)]
struct Fx(u64);

impl Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        let mut last = 0u64;
        for (i, &b) in chunks.remainder().iter().enumerate() {
            last |= (b as u64) << (8 * i);
        }
        self.add(last);
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Fx {
    #[inline(always)]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// What one direction's parse is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// Nothing known yet.
    Unknown,
    /// A TLS ClientHello over TCP.
    Tls,
    /// An HTTP/1.x request.
    Http,
    /// A SOCKS 4/5 client's handshake, then a TLS ClientHello through it.
    Socks,
    /// DNS messages.
    Dns,
    /// QUIC Initials.
    Quic,
    /// Finished (named, or nothing to name).
    Done,
}

/// One direction of a connection, while names are read.
#[derive(Debug)]
struct Dir {
    want: Want,
    frames: u8,
    next_seq: Option<u32>,
    buf: Vec<u8>,
}

impl Dir {
    fn new() -> Self {
        Dir {
            want: Want::Unknown,
            frames: 0,
            next_seq: None,
            buf: Vec::new(),
        }
    }
}

/// The parse state of a connection still being named.
#[derive(Debug)]
struct Parse {
    dirs: [Dir; 2],
    quic: Option<Box<quic::Quic>>,
}

/// TCP: what was seen of each side.
#[derive(Clone, Copy, Debug, Default)]
struct Tcp {
    /// Each side's base sequence number (a SYN's, or one before its first
    /// segment's), client first.
    base: [Option<u32>; 2],
    fin: [bool; 2],
    rst: bool,
}

#[derive(Debug)]
struct Conn {
    row: Session,
    /// The client's endpoint (to tell directions).
    client: ([u8; 16], u16),
    /// A use stamp (least recently seen: the lowest).
    used: u64,
    tcp: Tcp,
    parse: Option<Parse>,
}

fn addr(version: u8, a: &[u8; 16]) -> IpAddr {
    if version == 4 {
        IpAddr::from([a[0], a[1], a[2], a[3]])
    } else {
        IpAddr::from(*a)
    }
}

/// The connection table (see the crate docs).
pub struct Tracker {
    cfg: Config,
    table: HashMap<Key, Conn, BuildHasherDefault<Fx>>,
    /// Rows of sessions that ended in the current file.
    done: Vec<Session>,
    stats: TableStats,
    clock: u64,
    /// Bytes held by parse buffers now.
    held: usize,
    /// The latest stamp seen.
    now_ns: u64,
    scratch: Vec<u8>,
    scratch2: Vec<u8>,
    used_scratch: Vec<u64>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("connections", &self.table.len())
            .field("held", &self.held)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker::new(Config::default())
    }
}

impl Tracker {
    /// An empty table.
    pub fn new(cfg: Config) -> Self {
        let cfg = Config {
            max_connections: cfg.max_connections.max(1),
            name_bytes: cfg.name_bytes.clamp(64, tls::MAX_HELLO + 4),
            ..cfg
        };
        Tracker {
            table: HashMap::with_capacity_and_hasher(
                cfg.max_connections.min(1 << 14),
                BuildHasherDefault::default(),
            ),
            cfg,
            done: Vec::new(),
            stats: TableStats::default(),
            clock: 0,
            held: 0,
            now_ns: 0,
            scratch: Vec::new(),
            scratch2: Vec::new(),
            used_scratch: Vec::new(),
        }
    }

    /// Connections tracked now.
    pub fn connections(&self) -> usize {
        self.table.len()
    }

    /// Bytes the parse buffers hold now.
    pub fn buffered(&self) -> usize {
        self.held
    }

    /// The counts of the current file so far.
    pub fn stats(&self) -> &TableStats {
        &self.stats
    }

    /// Counts `frames` the caller could not hand in (it fell behind): the
    /// current file's table is then marked incomplete.
    pub fn skipped(&mut self, frames: u64) {
        self.stats.skipped += frames;
    }

    /// Rows of the sessions that ended so far in the current file
    /// (evicted, or a port reused), taken out: a caller writing rows as it
    /// goes keeps its memory bounded by taking them after each batch.
    pub fn take_ended(&mut self) -> Vec<Session> {
        std::mem::take(&mut self.done)
    }

    /// Adds one frame: its link type (a pcap `LINKTYPE_`), stamp (ns), the
    /// captured bytes and the length it had on the wire.
    pub fn add(&mut self, linktype: u32, ts_ns: u64, frame: &[u8], orig_len: u32) {
        self.stats.frames += 1;
        let p = match conn::parse(linktype, frame) {
            conn::Frame::Ip(p) => p,
            conn::Frame::NotIp => {
                self.stats.not_ip += 1;
                return;
            }
            conn::Frame::Fragment => {
                self.stats.fragments += 1;
                return;
            }
        };
        let wire = (orig_len as u64).max(frame.len() as u64);
        self.now_ns = self.now_ns.max(ts_ns);
        self.clock += 1;
        let a = (p.src, p.sport);
        let b = (p.dst, p.dport);
        let key = Key {
            version: p.version,
            proto: p.proto,
            lo: if a <= b { a } else { b },
            hi: if a <= b { b } else { a },
        };
        let flags = p.tcp_flags.unwrap_or(0);
        let pure_syn = p.proto == 6 && flags & 0x12 == 0x02;
        if pure_syn {
            // A new SYN on a known connection with another sequence
            // number: the port was reused (tshark's rule too).
            let reused = self.table.get(&key).is_some_and(|c| {
                let side = usize::from(a != c.client);
                c.tcp.base[side].is_some_and(|s| s != p.tcp_seq)
            });
            if reused {
                if let Some(c) = self.table.remove(&key) {
                    self.stats.reused += 1;
                    self.end(c);
                }
            }
        }
        if !self.table.contains_key(&key) {
            if self.table.len() >= self.cfg.max_connections {
                self.evict();
            }
            // The client: the first frame's sender, unless it is a SYN-ACK.
            let client = if p.proto == 6 && flags & 0x12 == 0x12 {
                b
            } else {
                a
            };
            let server = if client == a { b } else { a };
            let c = Conn {
                row: Session {
                    id: session_id(p.version, p.proto, a, b, p.vlan, ts_ns),
                    first_ns: ts_ns,
                    last_ns: ts_ns,
                    ip_version: p.version,
                    proto: p.proto,
                    client_ip: addr(p.version, &client.0),
                    client_port: client.1,
                    server_ip: addr(p.version, &server.0),
                    server_port: server.1,
                    vlan: p.vlan,
                    client_packets: 0,
                    client_bytes: 0,
                    server_packets: 0,
                    server_bytes: 0,
                    tcp_flags: 0,
                    continued: false,
                    names: None,
                },
                client,
                used: 0,
                tcp: Tcp::default(),
                parse: matches!(p.proto, 6 | 17).then(|| Parse {
                    dirs: [Dir::new(), Dir::new()],
                    quic: None,
                }),
            };
            self.table.insert(key, c);
        }
        let Some(c) = self.table.get_mut(&key) else {
            return;
        };
        let dir = usize::from(a != c.client);
        let r = &mut c.row;
        if r.client_packets + r.server_packets == 0 {
            r.first_ns = ts_ns;
        }
        r.last_ns = r.last_ns.max(ts_ns);
        if dir == 0 {
            r.client_packets += 1;
            r.client_bytes += wire;
        } else {
            r.server_packets += 1;
            r.server_bytes += wire;
        }
        c.used = self.clock;
        if p.proto == 6 {
            r.tcp_flags |= flags;
            if c.tcp.base[dir].is_none() {
                c.tcp.base[dir] = Some(if flags & 0x02 != 0 {
                    p.tcp_seq
                } else {
                    p.tcp_seq.wrapping_sub(1)
                });
            }
            c.tcp.fin[dir] |= flags & 0x01 != 0;
            c.tcp.rst |= flags & 0x04 != 0;
        }
        if c.parse.is_some() && !p.payload.is_empty() {
            name_step(
                c,
                dir,
                &p,
                &self.cfg,
                &mut self.held,
                &mut self.stats,
                &mut self.scratch,
                &mut self.scratch2,
            );
        }
    }

    /// Ends a session: its buffers go, its row (if it had frames in this
    /// file) joins the ended ones.
    fn end(&mut self, mut c: Conn) {
        self.release(&mut c);
        if c.row.client_packets + c.row.server_packets > 0 {
            self.done.push(c.row);
        }
    }

    fn release(&mut self, c: &mut Conn) {
        if let Some(p) = c.parse.take() {
            self.held = self.held.saturating_sub(held_by(&p));
        }
    }

    /// Ends the least recently seen eighth of the table (at least one).
    fn evict(&mut self) {
        self.used_scratch.clear();
        self.used_scratch
            .extend(self.table.values().map(|c| c.used));
        let k = (self.table.len() / 8).max(1);
        let (_, &mut cut, _) = self.used_scratch.select_nth_unstable(k - 1);
        let old: Vec<Key> = self
            .table
            .iter()
            .filter(|(_, c)| c.used <= cut)
            .map(|(k, _)| *k)
            .collect();
        for k in old {
            if let Some(c) = self.table.remove(&k) {
                self.stats.evicted += 1;
                self.end(c);
            }
        }
    }

    /// Ends the current file's table (named `file`): a row for every
    /// session with frames in it. Sessions still open are carried into
    /// the next file with their ids and names (their counts start again);
    /// closed and idle ones are forgotten.
    pub fn cut(&mut self, file: &str) -> Table {
        let mut rows = std::mem::take(&mut self.done);
        let idle_before = self.now_ns.saturating_sub(self.cfg.idle_ns);
        let mut order: Vec<(u64, Key)> = Vec::new();
        let mut gone: Vec<Key> = Vec::new();
        for (k, c) in &mut self.table {
            let r = &mut c.row;
            if r.client_packets + r.server_packets > 0 {
                order.push((r.first_ns, *k));
            }
            let closed = c.tcp.rst || (c.tcp.fin[0] && c.tcp.fin[1]);
            if closed || r.last_ns < idle_before {
                gone.push(*k);
            }
        }
        order.sort_unstable_by(|x, y| x.0.cmp(&y.0).then(x.1.lo.cmp(&y.1.lo)));
        for (_, k) in &order {
            if let Some(c) = self.table.get_mut(k) {
                let r = &mut c.row;
                rows.push(r.clone());
                r.client_packets = 0;
                r.client_bytes = 0;
                r.server_packets = 0;
                r.server_bytes = 0;
                r.tcp_flags = 0;
                r.continued = true;
            }
        }
        for k in gone {
            if let Some(mut c) = self.table.remove(&k) {
                self.release(&mut c);
            }
        }
        Table {
            file: file.to_string(),
            rows,
            stats: std::mem::take(&mut self.stats),
        }
    }
}

/// Bytes a parse state holds.
fn held_by(p: &Parse) -> usize {
    p.dirs.iter().map(|d| d.buf.capacity()).sum::<usize>() + p.quic.as_ref().map_or(0, |q| q.held())
}

/// Reads names from one frame's payload (`dir`: 0 client, 1 server).
#[allow(clippy::too_many_arguments)]
fn name_step(
    c: &mut Conn,
    dir: usize,
    p: &Packet<'_>,
    cfg: &Config,
    held: &mut usize,
    stats: &mut TableStats,
    scratch: &mut Vec<u8>,
    scratch2: &mut Vec<u8>,
) {
    let Some(parse) = c.parse.as_mut() else {
        return;
    };
    let before = held_by(parse);
    let d = &mut parse.dirs[dir];
    if d.want != Want::Done {
        d.frames += 1;
        let last = d.frames >= cfg.name_frames;
        // Names are boxed only once there is one (a connection that names
        // nothing allocates nothing for them).
        let mut fresh = Names::default();
        let names: &mut Names = match c.row.names.as_deref_mut() {
            Some(n) => n,
            None => &mut fresh,
        };
        if p.proto == 17 {
            udp(d, &mut parse.quic, dir, p, names, scratch, scratch2);
        } else {
            tcp(d, dir, p, last, cfg, *held, stats, names, scratch);
        }
        // DNS reads more frames (a resolver's questions on one port).
        let limit = if d.want == Want::Dns {
            cfg.name_frames.max(dns::MAX_FRAMES)
        } else {
            cfg.name_frames
        };
        if d.frames >= limit && d.want != Want::Done {
            d.want = Want::Done;
        }
        if d.want == Want::Done {
            d.buf = Vec::new();
        }
        if c.row.names.is_none() && !fresh.is_empty() {
            c.row.names = Some(Box::new(fresh));
        }
    }
    let after = held_by(parse);
    *held = (*held + after).saturating_sub(before);
    if parse.dirs.iter().all(|d| d.want == Want::Done) {
        *held = held.saturating_sub(after);
        c.parse = None;
    }
}

fn udp(
    d: &mut Dir,
    q: &mut Option<Box<quic::Quic>>,
    dir: usize,
    p: &Packet<'_>,
    names: &mut Names,
    scratch: &mut Vec<u8>,
    scratch2: &mut Vec<u8>,
) {
    if d.want == Want::Unknown {
        d.want = if dns::is_dns_port(p.sport) || dns::is_dns_port(p.dport) {
            Want::Dns
        } else if p.sport == http::SSDP_PORT || p.dport == http::SSDP_PORT {
            // Requests come from the first sender; responses name nothing.
            if dir == 0 {
                Want::Http
            } else {
                Want::Done
            }
        } else if dir == 0 && quic::looks_initial(p.payload) {
            Want::Quic
        } else {
            Want::Done
        };
    }
    match d.want {
        Want::Dns if !dns::message(p.payload, names, scratch) => d.want = Want::Done,
        // One request per datagram, whole (a cut one: what is complete).
        Want::Http if http::request(p.payload, true, names) == http::Request::Done => {
            d.want = Want::Done
        }
        Want::Quic => {
            let st = q.get_or_insert_with(Box::default);
            if quic::Quic::datagram(st, p.payload, scratch, scratch2) == quic::Step::Hello {
                if let Some(h) = scratch2.get(4..).and_then(tls::client_hello) {
                    tls::store(&h, true, names);
                }
            }
            if st.done {
                *q = None;
                d.want = Want::Done;
            }
        }
        _ => {}
    }
}

#[allow(clippy::too_many_arguments)]
fn tcp(
    d: &mut Dir,
    dir: usize,
    p: &Packet<'_>,
    last: bool,
    cfg: &Config,
    held: usize,
    stats: &mut TableStats,
    names: &mut Names,
    scratch: &mut Vec<u8>,
) {
    if dir == 1 {
        // Nothing is read from TCP servers.
        d.want = Want::Done;
        return;
    }
    // The stream's next bytes: in order, from the first payload on.
    let seq = p.tcp_seq;
    let data: &[u8] = match d.next_seq {
        None => p.payload,
        Some(n) => {
            let ahead = seq.wrapping_sub(n) as i32;
            if ahead > 0 {
                // A gap: the stream cannot be put together.
                d.want = Want::Done;
                return;
            }
            let skip = (-(ahead as i64)) as usize;
            match p.payload.get(skip..) {
                Some(rest) if !rest.is_empty() => rest,
                // A retransmission of what was read.
                _ => return,
            }
        }
    };
    let start = if d.next_seq.is_none() {
        seq
    } else {
        d.next_seq.unwrap_or(seq)
    };
    d.next_seq = Some(start.wrapping_add(data.len() as u32));
    // The bytes so far: the frame's own when nothing is buffered (no copy).
    let whole: &[u8] = if d.buf.is_empty() {
        data
    } else {
        let room = cfg.name_bytes.saturating_sub(d.buf.len());
        let take = data.len().min(room);
        if held + take > cfg.buffer_budget {
            stats.names_skipped += 1;
            d.want = Want::Done;
            return;
        }
        d.buf.extend_from_slice(&data[..take]);
        &d.buf
    };
    let full = whole.len() >= cfg.name_bytes;
    if d.want == Want::Unknown {
        d.want = match whole.first() {
            Some(22) => Want::Tls,
            Some(4 | 5) => Want::Socks,
            Some(_) => Want::Http,
            None => return,
        };
    }
    let more = match d.want {
        Want::Tls => client_hello(whole, scratch, names),
        Want::Http => http::request(whole, last || full, names) == http::Request::More,
        Want::Socks => match socks_len(whole) {
            Socks::More => true,
            Socks::Not => false,
            Socks::Len(k) => match whole.get(k..) {
                Some([]) | None => true,
                Some(tunnel @ [22, ..]) => client_hello(tunnel, scratch, names),
                Some(_) => false,
            },
        },
        _ => false,
    };
    if !more || full {
        d.want = Want::Done;
        return;
    }
    if d.buf.is_empty() {
        // Keep this frame's bytes for the next.
        let take = data.len().min(cfg.name_bytes);
        if held + take > cfg.buffer_budget {
            stats.names_skipped += 1;
            d.want = Want::Done;
            return;
        }
        d.buf.extend_from_slice(&data[..take]);
    }
}

/// Reads the ClientHello at the start of `stream` (its TLS records put
/// together in `scratch`) into `names`; whether more bytes are needed.
fn client_hello(stream: &[u8], scratch: &mut Vec<u8>, names: &mut Names) -> bool {
    match tls::records(stream, scratch) {
        tls::Stream::Hello => {
            if let Some(h) = scratch.get(4..).and_then(tls::client_hello) {
                tls::store(&h, false, names);
            }
            false
        }
        tls::Stream::More => true,
        tls::Stream::NotTls => false,
    }
}

/// How far a SOCKS client's handshake reaches into its stream.
#[derive(Debug, PartialEq, Eq)]
enum Socks {
    /// The handshake ends here: what follows is the tunnel's.
    Len(usize),
    /// Not all of it yet.
    More,
    /// Not a SOCKS 4/5 handshake.
    Not,
}

/// The length of the client's side of a SOCKS handshake at the start of
/// `b` (RFC 1928 and 1929 for SOCKS 5: the greeting, a username/password
/// exchange if one follows, the CONNECT request; SOCKS 4 and 4a: the
/// request with its user id and, for 4a, the host name). FoxIO's JA4 reads
/// the ClientHello sent through it (tshark's SOCKS dissector hands the
/// tunnel to TLS), so the fingerprint is taken there.
fn socks_len(b: &[u8]) -> Socks {
    let need = |n: usize| if b.len() < n { Some(Socks::More) } else { None };
    let nul_after = |from: usize| {
        b.get(from..)?
            .iter()
            .position(|&c| c == 0)
            .map(|p| from + p + 1)
    };
    match b.first() {
        Some(4) => {
            if let Some(m) = need(8) {
                return m;
            }
            if b[1] != 1 {
                return Socks::Not;
            }
            let Some(user_end) = nul_after(8) else {
                return if b.len() > 8 + 255 {
                    Socks::Not
                } else {
                    Socks::More
                };
            };
            // 4a: the address 0.0.0.x (x > 0) says a host name follows.
            if b[4..7] == [0, 0, 0] && b[7] != 0 {
                return match nul_after(user_end) {
                    Some(e) => Socks::Len(e),
                    None if b.len() > user_end + 255 => Socks::Not,
                    None => Socks::More,
                };
            }
            Socks::Len(user_end)
        }
        Some(5) => {
            if let Some(m) = need(2) {
                return m;
            }
            let mut at = 2 + b[1] as usize;
            if b[1] == 0 {
                return Socks::Not;
            }
            if let Some(m) = need(at + 1) {
                return m;
            }
            if b[at] == 1 {
                // Username/password (RFC 1929): 1, ulen, user, plen, pass.
                if let Some(m) = need(at + 2) {
                    return m;
                }
                let p = at + 2 + b[at + 1] as usize;
                if let Some(m) = need(p + 1) {
                    return m;
                }
                at = p + 1 + b[p] as usize;
                if let Some(m) = need(at + 1) {
                    return m;
                }
            }
            if let Some(m) = need(at + 4) {
                return m;
            }
            if b[at] != 5 || b[at + 1] != 1 || b[at + 2] != 0 {
                return Socks::Not;
            }
            let addr = match b[at + 3] {
                1 => 4,
                4 => 16,
                3 => {
                    if let Some(m) = need(at + 5) {
                        return m;
                    }
                    1 + b[at + 4] as usize
                }
                _ => return Socks::Not,
            };
            let end = at + 4 + addr + 2;
            need(end).unwrap_or(Socks::Len(end))
        }
        _ => Socks::Not,
    }
}

#[cfg(test)]
mod socks_tests {
    use super::{socks_len, Socks};

    #[test]
    fn socks_handshakes_end_where_the_tunnel_starts() {
        // SOCKS 5, no authentication, a domain name.
        let mut b = vec![5, 1, 0, 5, 1, 0, 3, 11];
        b.extend_from_slice(b"example.com");
        b.extend_from_slice(&[1, 187]);
        let n = b.len();
        for cut in 0..n {
            assert_eq!(
                socks_len(&b[..cut]),
                if cut == 0 { Socks::Not } else { Socks::More },
                "{cut}"
            );
        }
        assert_eq!(socks_len(&b), Socks::Len(n));
        b.extend_from_slice(&[22, 3, 1]);
        assert_eq!(socks_len(&b), Socks::Len(n));
        // SOCKS 5 with username/password, an IPv4 address.
        let b = [
            5, 2, 0, 2, 1, 1, b'u', 2, b'p', b'w', 5, 1, 0, 1, 10, 0, 0, 1, 1, 187,
        ];
        assert_eq!(socks_len(&b), Socks::Len(b.len()));
        // SOCKS 4 and 4a.
        let b = [4, 1, 1, 187, 10, 0, 0, 1, b'u', 0];
        assert_eq!(socks_len(&b), Socks::Len(b.len()));
        let mut b = vec![4, 1, 1, 187, 0, 0, 0, 1, 0];
        b.extend_from_slice(b"example.com\0");
        assert_eq!(socks_len(&b), Socks::Len(b.len()));
        // Not SOCKS: a BIND, an unknown address type, HTTP.
        assert_eq!(socks_len(&[4, 2, 1, 187, 10, 0, 0, 1, 0]), Socks::Not);
        assert_eq!(socks_len(&[5, 1, 0, 5, 1, 0, 9, 0]), Socks::Not);
        assert_eq!(socks_len(b"GET / HTTP/1.1\r\n"), Socks::Not);
    }
}
