//! [`Stamper`]: one batch of frames in, one stamp per frame out, by mode.
//!
//! The formulas (t(k) = the stamp of the last frame of the previous batch,
//! t(k+1) = the time this batch was taken, s_j = frame sizes, n = batch size):
//! * UDTS: tau_i = t(k) + (t(k+1) - t(k)) * i / n
//! * WDTS: tau_i = t(k) + (t(k+1) - t(k)) * (s_1 + ... + s_i) / (s_1 + ... + s_n)
//! * batch: tau_i = t(k+1); KPT: tau_i = the clock when frame i is handled.
//! * hybrid: WDTS when the link is saturated, KPT otherwise. Saturated means
//!   either (a) frames were waiting: the batch was full, or the poller came
//!   back without sleeping because the last take left frames; or (b) with a
//!   known link speed, the batch's frames fill the gap they are spread over:
//!   their wire time (frame + 24 bytes of FCS, preamble and inter-frame gap)
//!   is at least 80% of t(k+1) - t(k). Then the link was busy through the gap
//!   and spreading it is right; on a link with idle gaps spreading smears
//!   them, and KPT is better. (a) alone misses a fast poller on a busy link
//!   (1514 B at line rate: the ring drains every time); (b) alone misses a
//!   full batch that covers only part of the gap (64 B at line rate).
//!
//! Clock-derived stamps never go backwards; XDP/NIC stamps are taken as given.

use crate::clock::Clock;
use crate::mode::TsMode;
use crate::TaiToUtc;

/// One frame of a batch, as the stamper sees it.
pub trait StampSlot {
    /// Frame length in bytes (WDTS weight).
    fn frame_len(&self) -> u32;
    /// The XDP program's TAI stamp (0: none).
    fn xdp_tai(&self) -> u64;
    /// The NIC's stamp in UTC ns (0: none).
    fn hw(&self) -> u64;
    /// Stores the result (UTC ns).
    fn set_ts(&mut self, ns: u64);
}

/// Counts of where stamps came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StampStats {
    /// Frames handed to [`Stamper::stamp`], whatever the mode (`off` too).
    pub frames: u64,
    /// Frames stamped by the NIC (mode hw).
    pub hw: u64,
    /// Frames stamped by the XDP program (modes hw, xdp).
    pub xdp: u64,
    /// Frames that had neither and got the poll time instead.
    pub poll_fallback: u64,
    /// Batches hybrid handled with WDTS (saturated).
    pub hybrid_wdts_batches: u64,
    /// Batches hybrid handled with KPT (not saturated, or the first batch:
    /// no t(k) to spread from).
    pub hybrid_kpt_batches: u64,
}

/// Stamps batches for one queue.
pub struct Stamper<C: Clock> {
    mode: TsMode,
    clock: C,
    tai: TaiToUtc,
    /// t(k): the stamp of the last frame of the previous batch (0: none yet).
    prev: u64,
    /// Link speed in bits per second (hybrid's saturation test), if known.
    link_bps: Option<u64>,
    /// Where this stamper's stamps came from so far; never reset.
    pub stats: StampStats,
}

/// Bytes on the wire around each frame: FCS 4, preamble 8, inter-frame gap 12.
pub const WIRE_OVERHEAD: u64 = 24;
/// Hybrid: link utilisation at or above which a batch counts as saturated (percent).
pub const SATURATED_PCT: u64 = 80;

/// Gaps longer than this are not spread (an idle link): 2^40 ns, ~18 min.
const MAX_SPREAD_NS: u64 = 1 << 40;

impl<C: Clock> Stamper<C> {
    /// A stamper in `mode` that reads `clock` for poll-time stamps and turns
    /// XDP stamps into UTC with `tai`. Hybrid knows no link speed until
    /// [`Stamper::with_link_speed`].
    pub fn new(mode: TsMode, clock: C, tai: TaiToUtc) -> Self {
        Stamper {
            mode,
            clock,
            tai,
            prev: 0,
            link_bps: None,
            stats: StampStats::default(),
        }
    }

    /// Gives hybrid the link speed for its saturation test.
    pub fn with_link_speed(mut self, bits_per_sec: Option<u64>) -> Self {
        self.link_bps = bits_per_sec.filter(|&b| b > 0);
        self
    }

    /// The mode it stamps in.
    pub fn mode(&self) -> TsMode {
        self.mode
    }

    /// The clock it reads (the simulator sets its simulated time through this).
    pub fn clock(&mut self) -> &mut C {
        &mut self.clock
    }

    /// Stamps a batch. `saturated`: frames were waiting (see module docs).
    #[inline]
    pub fn stamp<T: StampSlot>(&mut self, batch: &mut [T], saturated: bool) {
        if batch.is_empty() {
            return;
        }
        self.stats.frames += batch.len() as u64;
        match self.mode {
            TsMode::Off => batch.iter_mut().for_each(|f| f.set_ts(0)),
            TsMode::Xdp | TsMode::Hw => self.kernel(batch),
            TsMode::Kpt => {
                let first = self.now();
                self.kpt_from(batch, first)
            }
            TsMode::Batch => {
                let t = self.now();
                batch.iter_mut().for_each(|f| f.set_ts(t));
                self.prev = t;
            }
            TsMode::Udts => {
                let t1 = self.now();
                self.spread(batch, false, t1)
            }
            TsMode::Wdts => {
                let t1 = self.now();
                self.spread(batch, true, t1)
            }
            TsMode::Hybrid => {
                // One clock read: the decision's "now" is also the first KPT
                // stamp or t(k+1) of the spread.
                let now = self.now();
                let saturated = saturated
                    || match self.link_bps {
                        Some(bps) if self.prev != 0 => {
                            let gap = now - self.prev;
                            let wire_bits: u64 = batch
                                .iter()
                                .map(|f| (f.frame_len() as u64 + WIRE_OVERHEAD) * 8)
                                .sum();
                            // wire time (ns) = bits * 1e9 / bps, compared with the gap
                            (wire_bits as u128 * 1_000_000_000 * 100)
                                >= (gap as u128 * bps as u128 * SATURATED_PCT as u128)
                        }
                        _ => false,
                    };
                if saturated && self.prev != 0 {
                    self.stats.hybrid_wdts_batches += 1;
                    self.spread(batch, true, now)
                } else {
                    self.stats.hybrid_kpt_batches += 1;
                    self.kpt_from(batch, now)
                }
            }
        }
    }

    #[inline(always)]
    fn now(&mut self) -> u64 {
        self.clock.now_ns().max(self.prev)
    }

    fn kernel<T: StampSlot>(&mut self, batch: &mut [T]) {
        let hw_mode = self.mode == TsMode::Hw;
        let mut poll_now = 0;
        for f in batch.iter_mut() {
            let hw = if hw_mode { f.hw() } else { 0 };
            let ts = if hw != 0 {
                self.stats.hw += 1;
                hw
            } else if f.xdp_tai() != 0 {
                self.stats.xdp += 1;
                self.tai.to_utc(f.xdp_tai())
            } else {
                self.stats.poll_fallback += 1;
                if poll_now == 0 {
                    poll_now = self.clock.now_ns();
                }
                poll_now
            };
            f.set_ts(ts);
        }
    }

    /// KPT: the clock as each frame is handled; `first` was read for frame 0.
    fn kpt_from<T: StampSlot>(&mut self, batch: &mut [T], first: u64) {
        let mut last = first.max(self.prev);
        let mut it = batch.iter_mut();
        if let Some(f) = it.next() {
            f.set_ts(last);
        }
        for f in it {
            last = self.clock.now_ns().max(last);
            f.set_ts(last);
        }
        self.prev = last;
    }

    /// UDTS/WDTS over (t(k), t1].
    fn spread<T: StampSlot>(&mut self, batch: &mut [T], by_size: bool, t1: u64) {
        let gap = t1 - self.prev;
        if self.prev == 0 || gap > MAX_SPREAD_NS {
            // First batch, or after a long idle time: nothing to spread over.
            batch.iter_mut().for_each(|f| f.set_ts(t1));
            self.prev = t1;
            return;
        }
        let t0 = self.prev;
        // Fixed point with 32 fractional bits, rounded to nearest: one
        // division per batch, a 64x64->128 multiply per frame.
        const HALF: u128 = 1 << 31;
        if by_size {
            let total: u64 = batch
                .iter()
                .map(|f| f.frame_len() as u64)
                .sum::<u64>()
                .max(1);
            let scale = ((gap as u128) << 32) / total as u128;
            let mut cum = 0u64;
            for f in batch.iter_mut() {
                cum += f.frame_len() as u64;
                f.set_ts(t0 + ((cum as u128 * scale + HALF) >> 32) as u64);
            }
        } else {
            let n = batch.len() as u64;
            let step = ((gap as u128) << 32) / n as u128;
            for (i, f) in batch.iter_mut().enumerate() {
                f.set_ts(t0 + (((i as u128 + 1) * step + HALF) >> 32) as u64);
            }
        }
        // The last frame is exactly t(k+1), whatever the rounding.
        if let Some(f) = batch.last_mut() {
            f.set_ts(t1);
        }
        // The last frame ends at t1 up to rounding; the next batch starts there.
        self.prev = t1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Clone, Debug)]
    struct F {
        len: u32,
        xdp: u64,
        hw: u64,
        ts: u64,
    }
    impl StampSlot for F {
        fn frame_len(&self) -> u32 {
            self.len
        }
        fn xdp_tai(&self) -> u64 {
            self.xdp
        }
        fn hw(&self) -> u64 {
            self.hw
        }
        fn set_ts(&mut self, ns: u64) {
            self.ts = ns;
        }
    }
    /// A clock that returns the given times in order, then keeps the last.
    struct Script(Vec<u64>, usize);
    impl Clock for Script {
        fn now_ns(&mut self) -> u64 {
            let v = self.0[self.1.min(self.0.len() - 1)];
            self.1 += 1;
            v
        }
    }
    fn frames(lens: &[u32]) -> Vec<F> {
        lens.iter()
            .map(|&len| F {
                len,
                ..Default::default()
            })
            .collect()
    }
    fn stamper(mode: TsMode, times: &[u64]) -> Stamper<Script> {
        Stamper::new(
            mode,
            Script(times.to_vec(), 0),
            TaiToUtc::from_offset_secs(37),
        )
    }

    #[test]
    fn udts_spreads_uniformly_hand_computed() {
        let mut s = stamper(TsMode::Udts, &[1_000, 1_400]);
        let mut b = frames(&[100, 100]);
        s.stamp(&mut b, false);
        assert!(b.iter().all(|f| f.ts == 1_000), "first batch: one stamp");
        let mut b = frames(&[60, 1514, 60, 1514]);
        s.stamp(&mut b, false);
        // gap 400 over 4 frames: 1100, 1200, 1300, 1400
        assert_eq!(
            b.iter().map(|f| f.ts).collect::<Vec<_>>(),
            vec![1_100, 1_200, 1_300, 1_400]
        );
    }

    #[test]
    fn wdts_spreads_by_size_hand_computed() {
        let mut s = stamper(TsMode::Wdts, &[10_000, 13_000]);
        s.stamp(&mut frames(&[64]), false);
        let mut b = frames(&[100, 200, 300, 400, 1000]);
        s.stamp(&mut b, false);
        // gap 3000 over 2000 bytes: cumulative 100,300,600,1000,2000 -> +150,+450,+900,+1500,+3000
        assert_eq!(
            b.iter().map(|f| f.ts).collect::<Vec<_>>(),
            vec![10_150, 10_450, 10_900, 11_500, 13_000]
        );
    }

    #[test]
    fn batch_and_kpt() {
        let mut s = stamper(TsMode::Batch, &[500, 900]);
        let mut b = frames(&[1, 2, 3]);
        s.stamp(&mut b, false);
        assert!(b.iter().all(|f| f.ts == 500));
        let mut s = stamper(TsMode::Kpt, &[500, 510, 505, 530]);
        let mut b = frames(&[1, 2, 3, 4]);
        s.stamp(&mut b, false);
        // a clock read that goes back (505) is held at 510: monotonic
        assert_eq!(
            b.iter().map(|f| f.ts).collect::<Vec<_>>(),
            vec![500, 510, 510, 530]
        );
    }

    #[test]
    fn hybrid_switches_on_saturation() {
        let mut s = stamper(TsMode::Hybrid, &[1_000, 1_010, 2_000, 3_000, 3_001]);
        s.stamp(&mut frames(&[100]), false); // kpt: 1000
        let mut b = frames(&[100, 300]);
        s.stamp(&mut b, true); // saturated: wdts from 1000 to 1010
        assert_eq!(
            b.iter().map(|f| f.ts).collect::<Vec<_>>(),
            vec![1_002, 1_010]
        );
        let mut b = frames(&[100, 100]);
        s.stamp(&mut b, false); // not saturated: kpt
        assert_eq!(
            b.iter().map(|f| f.ts).collect::<Vec<_>>(),
            vec![2_000, 3_000]
        );
        assert_eq!(
            (s.stats.hybrid_wdts_batches, s.stats.hybrid_kpt_batches),
            (1, 2)
        );
    }

    #[test]
    fn hybrid_link_utilisation_rule() {
        // 10 Gbit/s: a 1514-byte frame is 1230.4 ns on the wire.
        let bps = Some(10_000_000_000);
        // Two 1514 B frames spread over 2500 ns: 2461 ns of wire time, 98%: saturated -> WDTS.
        let mut s = stamper(TsMode::Hybrid, &[10_000, 12_500, 12_510]).with_link_speed(bps);
        s.stamp(&mut frames(&[1514]), false);
        let mut b = frames(&[1514, 1514]);
        s.stamp(&mut b, false);
        assert_eq!(
            b.iter().map(|f| f.ts).collect::<Vec<_>>(),
            vec![11_250, 12_500]
        );
        assert_eq!(s.stats.hybrid_wdts_batches, 1);
        // The same two frames after 10 µs idle: 25% busy -> KPT (clock per frame).
        let mut s = stamper(TsMode::Hybrid, &[10_000, 20_000, 20_100]).with_link_speed(bps);
        s.stamp(&mut frames(&[1514]), false);
        let mut b = frames(&[1514, 1514]);
        s.stamp(&mut b, false);
        assert_eq!(
            b.iter().map(|f| f.ts).collect::<Vec<_>>(),
            vec![20_000, 20_100]
        );
        assert_eq!(s.stats.hybrid_kpt_batches, 2);
    }

    #[test]
    fn xdp_and_hw_with_fallbacks() {
        let mut s = stamper(TsMode::Hw, &[999]);
        let mut b = vec![
            F {
                len: 1,
                xdp: 37_000_000_500,
                hw: 0,
                ts: 0,
            },
            F {
                len: 1,
                xdp: 37_000_000_600,
                hw: 7_777,
                ts: 0,
            },
            F {
                len: 1,
                xdp: 0,
                hw: 0,
                ts: 0,
            },
        ];
        s.stamp(&mut b, false);
        assert_eq!(
            b.iter().map(|f| f.ts).collect::<Vec<_>>(),
            vec![500, 7_777, 999]
        );
        assert_eq!((s.stats.hw, s.stats.xdp, s.stats.poll_fallback), (1, 1, 1));
        let mut s = stamper(TsMode::Xdp, &[999]);
        s.stamp(&mut b, false);
        assert_eq!(b[1].ts, 600, "xdp mode ignores the NIC stamp");
    }

    #[test]
    fn spread_is_monotonic_and_ends_at_poll_time() {
        let times: Vec<u64> = (0..100).map(|k| 1_000_000 + k * 9_973).collect();
        let mut s = stamper(TsMode::Wdts, &times);
        let mut last = 0;
        for k in 0..99u32 {
            let mut b = frames(&(0..(k % 7 + 1)).map(|i| 60 + i * 211).collect::<Vec<_>>());
            s.stamp(&mut b, true);
            for f in &b {
                assert!(f.ts >= last);
                last = f.ts;
            }
            assert_eq!(b.last().unwrap().ts, times[k as usize]);
        }
    }

    #[test]
    fn off_is_zero() {
        let mut s = stamper(TsMode::Off, &[5]);
        let mut b = frames(&[1, 2]);
        b[0].ts = 9;
        s.stamp(&mut b, false);
        assert!(b.iter().all(|f| f.ts == 0));
    }
}
