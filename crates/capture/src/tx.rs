//! Transmitting: the safe loop behind `wiretape replay` and `wiretape gen`.
//! Frames come from a [`Source`] (a capture file, or synthetic frames), are
//! written straight into the TX UMEM (one copy), posted in batches on an
//! AF_XDP TX ring ([`crate::xsk::Tx`]) and paced: as fast as possible, at a
//! frame or bit rate, or at the capture's own gaps (`original`). Pacing
//! sleeps until shortly before a frame is due and spins the rest, so gaps are
//! kept to a few microseconds, and frames due together go out as one batch.

use crate::xsk::{BindMode, Tx};
use crate::{sys, CaptureError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How fast to send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Speed {
    /// The gaps the source gives (a capture's timestamps), scaled by the factor.
    Original(f64),
    /// As fast as the socket takes frames.
    Max,
    /// Frames per second.
    Pps(f64),
    /// Bits per second on the wire (frame + 24 bytes: FCS, preamble, gap).
    Bps(f64),
}

impl std::str::FromStr for Speed {
    type Err = String;
    /// `original`, `max`, `100000` (frames/s), `5gbit`, `200mbit`, `2x` (original, twice as fast).
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || {
            format!("'{s}' is not a speed: use original, max, a frame rate (100000) or a bit rate (5gbit, 200mbit)")
        };
        let num = |x: &str| -> Result<f64, String> {
            let v: f64 = x.trim().parse().map_err(|_| bad())?;
            if v > 0.0 && v.is_finite() {
                Ok(v)
            } else {
                Err(bad())
            }
        };
        match t.as_str() {
            "original" => return Ok(Speed::Original(1.0)),
            "max" => return Ok(Speed::Max),
            _ => {}
        }
        for (suf, mul) in [
            ("gbit", 1e9),
            ("mbit", 1e6),
            ("kbit", 1e3),
            ("gbps", 1e9),
            ("mbps", 1e6),
        ] {
            if let Some(n) = t.strip_suffix(suf) {
                return Ok(Speed::Bps(num(n)? * mul));
            }
        }
        if let Some(n) = t.strip_suffix('x') {
            return Ok(Speed::Original(num(n)?));
        }
        Ok(Speed::Pps(num(t.strip_suffix("pps").unwrap_or(&t))?))
    }
}

/// When each frame is due at a [`Speed`]: shared by the transmit loop and
/// the file engine.
#[derive(Clone, Debug)]
pub(crate) struct Pacer {
    speed: Speed,
    frames: u64,
    bits: f64,
}

impl Pacer {
    pub(crate) fn new(speed: Speed) -> Self {
        Pacer {
            speed,
            frames: 0,
            bits: 0.0,
        }
    }

    /// When the next frame (`len` bytes, due `due_src` ns after the first
    /// by its source's own clock) goes, in ns after the start; None: now.
    /// Call once per frame, in order.
    #[inline]
    pub(crate) fn due(&mut self, len: usize, due_src: u64) -> Option<u64> {
        let due = match self.speed {
            Speed::Max => None,
            Speed::Original(f) => Some((due_src as f64 / f) as u64),
            Speed::Pps(r) => Some((self.frames as f64 * 1e9 / r) as u64),
            Speed::Bps(b) => Some((self.bits * 1e9 / b) as u64),
        };
        self.frames += 1;
        self.bits += ((len + 24) * 8) as f64;
        due
    }
}

/// Where frames come from.
pub trait Source {
    /// The next frame's length and, for [`Speed::Original`], when it is due
    /// (ns after the first frame); None at the end.
    fn next(&mut self) -> Option<(usize, u64)>;
    /// Writes the frame announced by the last `next` into `dst` (exactly its
    /// length); `send_ns` is the UTC time it is handed to the kernel.
    fn fill(&mut self, dst: &mut [u8], send_ns: u64);
}

/// What a transmission did.
#[derive(Clone, Debug, Default)]
pub struct TxReport {
    /// Frames the kernel took and completed (sent by the socket).
    pub sent: u64,
    /// Bytes of the sent frames (frame lengths: no FCS, preamble or gap).
    pub bytes: u64,
    /// Frames that could not be sent: longer than a UMEM frame, refused by
    /// the kernel (invalid descriptor), or not completed at the end.
    pub failed: u64,
    /// Of `failed`: frames longer than the largest frame the socket sends.
    pub too_long: u64,
    /// The sending device's tx_dropped grew by this much meanwhile (veth:
    /// the peer's queue was full): sent by us, lost on the wire.
    pub device_dropped: u64,
    /// From the first frame until the drain ended (the wait for the last
    /// completions included).
    pub duration: Duration,
    /// Largest lateness of a paced frame behind its due time (µs).
    pub max_late_us: f64,
    /// How the socket was bound: `zero-copy` or `copy`.
    pub mode: &'static str,
}

impl TxReport {
    /// Frames sent per second over `duration`.
    pub fn pps(&self) -> f64 {
        self.sent as f64 / self.duration.as_secs_f64().max(1e-9)
    }
    /// Gbit/s of frame bytes over `duration` (without the 24 bytes of wire
    /// overhead per frame that [`Speed::Bps`] counts).
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.duration.as_secs_f64().max(1e-9) / 1e9
    }
}

/// Settings of a transmission.
#[derive(Clone, Debug)]
pub struct TxConfig {
    /// The interface to send on.
    pub ifname: String,
    /// The TX queue the socket binds to (see `ethtool -l`).
    pub queue: u32,
    /// How frames are paced.
    pub speed: Speed,
    /// Frames posted before the kernel is kicked.
    pub batch: usize,
    /// UMEM frames (a power of two); also the TX and completion ring sizes.
    pub frames: u32,
    /// Bytes per UMEM frame (2048 or 4096): longer frames are not sent.
    pub frame_size: u32,
    /// Bind in zero-copy mode (fails where the driver has none); else copy mode.
    pub zero_copy: bool,
    /// Pin the sending thread to this CPU.
    pub cpu: Option<usize>,
}

impl TxConfig {
    /// Defaults for `ifname`: queue 0, `max` speed, batches of 64, 4096 frames
    /// of 4096 bytes, copy mode, no pinning.
    pub fn new(ifname: impl Into<String>) -> Self {
        TxConfig {
            ifname: ifname.into(),
            queue: 0,
            speed: Speed::Max,
            batch: 64,
            frames: 4096,
            frame_size: 4096,
            zero_copy: false,
            cpu: None,
        }
    }
}

/// Opens the TX socket for `cfg`.
pub fn open(cfg: &TxConfig) -> Result<Tx, CaptureError> {
    let ifindex = sys::ifindex(&cfg.ifname)
        .ok_or_else(|| CaptureError::NoSuchInterface(cfg.ifname.clone()))?;
    sys::raise_memlock();
    Tx::open(
        ifindex,
        cfg.queue,
        cfg.frames,
        cfg.frame_size,
        cfg.zero_copy,
    )
    .map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                " (run as root, or grant CAP_NET_RAW and CAP_IPC_LOCK)"
            }
            Some(libc::EINVAL) => " (no such TX queue? see `ethtool -l`)",
            Some(libc::EBUSY) => " (another AF_XDP socket is bound to this queue)",
            Some(libc::EOPNOTSUPP) => " (the driver has no zero-copy: leave it off)",
            _ => "",
        };
        CaptureError::Socket {
            ifname: cfg.ifname.clone(),
            queue: cfg.queue,
            source: e,
            hint,
        }
    })
}

fn tx_dropped(ifname: &str) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/{ifname}/statistics/tx_dropped"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Sends every frame of `src` (or until `stop` is set) and reports.
/// `progress` is called about once a second with (sent, bytes, elapsed).
pub fn transmit(
    cfg: &TxConfig,
    src: &mut dyn Source,
    stop: &AtomicBool,
    mut progress: impl FnMut(u64, u64, Duration),
) -> Result<TxReport, CaptureError> {
    let mut tx = open(cfg)?;
    if let Some(c) = cfg.cpu {
        let _ = sys::pin_to_cpu(c);
    }
    let dropped0 = tx_dropped(&cfg.ifname);
    let batch = cfg.batch.clamp(1, (cfg.frames / 2) as usize);
    let max_len = tx.frame_size() as usize;
    let mut rep = TxReport {
        mode: match tx.mode {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
        },
        ..Default::default()
    };
    let start = Instant::now();
    let mut next_progress = Duration::from_secs(1);
    let mut posted = 0u64;
    let mut unflushed = 0usize;
    let mut send_ns = 0u64;
    let mut pacer = Pacer::new(cfg.speed);
    let mut sent_bytes_pending: std::collections::VecDeque<u32> =
        std::collections::VecDeque::with_capacity(cfg.frames as usize);
    let io = |e: std::io::Error| CaptureError::Socket {
        ifname: cfg.ifname.clone(),
        queue: cfg.queue,
        source: e,
        hint: "",
    };
    // Completions come back in posting order: their lengths are in
    // `sent_bytes_pending`.
    let reap = |tx: &mut Tx, rep: &mut TxReport, q: &mut std::collections::VecDeque<u32>| {
        let n = tx.reap();
        for _ in 0..n {
            rep.bytes += q.pop_front().unwrap_or(0) as u64;
        }
        rep.sent += n as u64;
    };
    while !stop.load(Ordering::Relaxed) {
        let Some((len, due_src)) = src.next() else {
            break;
        };
        if len > max_len {
            rep.too_long += 1;
            rep.failed += 1;
            continue;
        }
        let due = pacer.due(len, due_src);
        if let Some(d) = due {
            let mut now = start.elapsed().as_nanos() as u64;
            if d > now + 20_000 {
                // Not due yet: what is posted goes now, then wait.
                tx.flush().map_err(io)?;
                unflushed = 0;
                if d > now + 300_000 {
                    std::thread::sleep(Duration::from_nanos(d - now - 200_000));
                }
                loop {
                    reap(&mut tx, &mut rep, &mut sent_bytes_pending);
                    now = start.elapsed().as_nanos() as u64;
                    if now >= d {
                        break;
                    }
                    std::hint::spin_loop();
                }
            }
            let late = now.saturating_sub(d) as f64 / 1e3;
            if late > rep.max_late_us && posted > 0 {
                rep.max_late_us = late;
            }
        }
        // A free frame: give the kernel what is posted and take back what it sent.
        while tx.free_frames() == 0 {
            tx.flush().map_err(io)?;
            unflushed = 0;
            reap(&mut tx, &mut rep, &mut sent_bytes_pending);
            if tx.free_frames() == 0 {
                tx.wait(1);
            }
        }
        // The frames of a batch go to the kernel together at its flush: one
        // clock read per batch (paced frames are each their own batch).
        if unflushed == 0 {
            send_ns = wiretape_timestamp::realtime_ns();
        }
        let ok = tx.post_with(len, |dst| src.fill(dst, send_ns));
        debug_assert!(ok);
        sent_bytes_pending.push_back(len as u32);
        posted += 1;
        unflushed += 1;
        if unflushed >= batch {
            tx.flush().map_err(io)?;
            unflushed = 0;
            reap(&mut tx, &mut rep, &mut sent_bytes_pending);
        }
        if posted.is_multiple_of(4096) {
            let el = start.elapsed();
            if el >= next_progress {
                next_progress += Duration::from_secs(1);
                progress(rep.sent, rep.bytes, el);
            }
        }
    }
    // Drain: everything posted is sent, or given up after a second without progress.
    let mut last = Instant::now();
    while tx.outstanding > 0 && last.elapsed() < Duration::from_secs(1) {
        tx.flush().map_err(io)?;
        let before = rep.sent;
        reap(&mut tx, &mut rep, &mut sent_bytes_pending);
        if rep.sent != before {
            last = Instant::now();
        } else {
            tx.wait(1);
        }
    }
    rep.duration = start.elapsed();
    rep.failed += tx.outstanding as u64;
    rep.failed += tx.stats().map(|s| s.tx_invalid_descs).unwrap_or(0);
    rep.device_dropped = tx_dropped(&cfg.ifname).saturating_sub(dropped0);
    Ok(rep)
}

/// Synthetic frames for `wiretape gen`: Ethernet/IPv4/UDP test frames (see
/// [`crate::frames`]) with a sequence number, a flow, and (frames of
/// at least [`crate::frames::MIN_TIMED_LEN`] bytes) the UTC time
/// they were handed to the kernel.
pub struct GenSource {
    sizes: GenSize,
    count: u64,
    flows: u16,
    seq: u64,
    len: usize,
    /// One frame per size (IMIX has three): found by a short scan, not a hash.
    templates: Vec<(usize, Vec<u8>)>,
}

/// Frame sizes of `gen` (bytes without the FCS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenSize {
    /// Every frame this many bytes (60..=4000 when parsed).
    Fixed(usize),
    /// Simple IMIX: 7 x 64, 4 x 576, 1 x 1514 bytes, interleaved.
    Imix,
}

impl std::str::FromStr for GenSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(GenSize::Imix);
        }
        let n: usize = s
            .parse()
            .map_err(|_| format!("'{s}' is not a size: give bytes (60..=4000) or imix"))?;
        if !(60..=4000).contains(&n) {
            return Err(format!("size {n} out of range: 60..=4000 bytes (no FCS)"));
        }
        Ok(GenSize::Fixed(n))
    }
}

const IMIX: [usize; 12] = [64, 576, 64, 64, 576, 64, 1514, 64, 576, 64, 64, 576];

impl GenSize {
    /// The size of frame `seq` (IMIX repeats its 12-frame pattern).
    pub fn len(self, seq: u64) -> usize {
        match self {
            GenSize::Fixed(n) => n,
            GenSize::Imix => IMIX[(seq % IMIX.len() as u64) as usize],
        }
    }
}

impl GenSource {
    /// `count` frames of `sizes`, round-robin over `flows` flows (at least
    /// one; flow n is UDP source port 10000 + n).
    pub fn new(sizes: GenSize, count: u64, flows: u16) -> Self {
        GenSource {
            sizes,
            count,
            flows: flows.max(1),
            seq: 0,
            len: 0,
            templates: Default::default(),
        }
    }
}

impl Source for GenSource {
    fn next(&mut self) -> Option<(usize, u64)> {
        if self.seq >= self.count {
            return None;
        }
        self.len = self.sizes.len(self.seq);
        Some((self.len, 0))
    }

    fn fill(&mut self, dst: &mut [u8], send_ns: u64) {
        let len = self.len;
        let i = match self.templates.iter().position(|(l, _)| *l == len) {
            Some(i) => i,
            None => {
                self.templates.push((len, crate::frames::build(0, len, 0)));
                self.templates.len() - 1
            }
        };
        dst.copy_from_slice(&self.templates[i].1);
        let flow = (self.seq % self.flows as u64) as u16;
        crate::frames::patch(dst, self.seq, flow, send_ns);
        self.seq += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frames;

    #[test]
    fn speeds_parse() {
        assert_eq!("max".parse(), Ok(Speed::Max));
        assert_eq!("original".parse(), Ok(Speed::Original(1.0)));
        assert_eq!("2x".parse(), Ok(Speed::Original(2.0)));
        assert_eq!("100000".parse(), Ok(Speed::Pps(100000.0)));
        assert_eq!("5gbit".parse(), Ok(Speed::Bps(5e9)));
        assert_eq!("200Mbit".parse(), Ok(Speed::Bps(2e8)));
        assert!("fast".parse::<Speed>().is_err());
        assert!("-3".parse::<Speed>().is_err());
    }

    #[test]
    fn gen_frames_carry_seq_flow_and_send_time() {
        let mut g = GenSource::new(GenSize::Imix, 24, 3);
        assert_eq!(g.sizes.len(0), 64);
        let mut lens = Vec::new();
        while let Some((len, _)) = g.next() {
            let mut buf = vec![0u8; len];
            let seq = g.seq;
            g.fill(&mut buf, 1_000 + seq);
            let (s, l, f) = frames::parse(&buf).unwrap();
            assert_eq!((s, l, f), (seq, len, (seq % 3) as u16));
            let near = 1u64 << 50; // a capture time far from the low bits
            let t = (near - 12_345) + seq;
            g.seq = seq; // fill again, with a realistic send time
            g.fill(&mut buf, t);
            assert_eq!(frames::gen_send_time(&buf, near), Some(t), "len {len}");
            // valid IPv4 header checksum after patching
            assert!(frames::ip_checksum_ok(&buf));
            lens.push(len);
        }
        assert_eq!(lens.iter().filter(|&&l| l == 64).count(), 14);
        assert_eq!(lens.iter().filter(|&&l| l == 1514).count(), 2);
        assert_eq!("imix".parse(), Ok(GenSize::Imix));
        assert!("59".parse::<GenSize>().is_err());
    }
}
