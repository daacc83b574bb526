//! Clocks for per-frame stamps at the polling thread.
//!
//! [`TscClock`] turns TSC ticks into UTC ns: it is anchored to CLOCK_REALTIME
//! and recalibrated about once a second. Rules (tested below):
//! * Drift: the tick rate is re-estimated from each interval, and the small
//!   remaining error (< 1 ms) is slewed away over the next interval.
//! * A forward step of the reference clock (settimeofday, NTP step) is
//!   followed at once: stamps are UTC.
//! * A backward step is slewed at 500 ppm (like adjtime): stamps never go
//!   backwards within a clock, so they stay in order within a queue.

use crate::realtime_ns;

/// A source of ns timestamps for the poll thread.
pub trait Clock {
    /// The time now in ns (UTC since the epoch for the real clocks). `&mut`
    /// because a read may recalibrate.
    fn now_ns(&mut self) -> u64;
}

/// CLOCK_REALTIME through the vDSO (~20 ns a read).
#[derive(Clone, Copy, Debug, Default)]
pub struct RealtimeClock;

impl Clock for RealtimeClock {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        realtime_ns()
    }
}

/// The best per-frame clock here: the TSC when it is invariant, else the vDSO.
pub enum AutoClock {
    /// The calibrated TSC (boxed: it is far larger than the other variant).
    Tsc(Box<TscClock>),
    /// The vDSO, where the TSC is missing or not invariant.
    Realtime(RealtimeClock),
}

impl AutoClock {
    /// Calibrates a TSC clock (about 20 ms) where the TSC is invariant.
    pub fn new() -> Self {
        match TscClock::system() {
            Some(c) => AutoClock::Tsc(Box::new(c)),
            None => AutoClock::Realtime(RealtimeClock),
        }
    }

    /// Which clock was chosen, for reports: `tsc` or `clock_gettime`.
    pub fn name(&self) -> &'static str {
        match self {
            AutoClock::Tsc(_) => "tsc",
            AutoClock::Realtime(_) => "clock_gettime",
        }
    }
}

impl Default for AutoClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for AutoClock {
    #[inline(always)]
    fn now_ns(&mut self) -> u64 {
        match self {
            AutoClock::Tsc(c) => c.now_ns(),
            AutoClock::Realtime(c) => c.now_ns(),
        }
    }
}

/// What [`TscClock`] is built from: a tick counter and a reference clock.
pub trait TickSource {
    /// The counter now: ticks at a constant rate, never backwards (0 where
    /// there is no counter).
    fn ticks(&mut self) -> u64;
    /// The reference time (UTC ns) and the ticks at that moment.
    fn reference(&mut self) -> (u64, u64);
}

/// The CPU's TSC against CLOCK_REALTIME.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemTsc;

impl TickSource for SystemTsc {
    #[inline(always)]
    fn ticks(&mut self) -> u64 {
        crate::tsc::read().unwrap_or(0)
    }
    fn reference(&mut self) -> (u64, u64) {
        // The narrowest of a few (tsc, realtime, tsc) windows.
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..7 {
            let a = self.ticks();
            let r = realtime_ns();
            let b = self.ticks();
            if b - a < best.0 {
                best = (b - a, r, a + (b - a) / 2);
            }
        }
        (best.1, best.2)
    }
}

const SHIFT: u32 = 32;
/// Largest error slewed rather than treated as a step.
const STEP_NS: i64 = 1_000_000;
/// Slew rate for backward steps: 500 ppm.
const SLEW_PPM: u64 = 500;

/// TSC ticks to UTC ns, with drift correction; see the module docs.
pub struct TscClock<S: TickSource = SystemTsc> {
    src: S,
    base_ticks: u64,
    base_ns: u64,
    /// ns per tick, fixed point (<< SHIFT).
    mult: u64,
    /// Estimated rate from the last calibration (before slewing).
    rate: u64,
    next_cal: u64,
    cal_ticks: u64,
    last: u64,
    ref_ticks: u64,
    ref_ns: u64,
    /// Recalibrations done so far (about one per `every` of [`TscClock::new`]).
    pub calibrations: u64,
    /// Steps of the reference clock seen: forward ones followed, backward ones slewed.
    pub steps: u64,
}

impl TscClock<SystemTsc> {
    /// A TSC clock when the TSC is invariant; None otherwise (use [`RealtimeClock`]).
    pub fn system() -> Option<Self> {
        if !crate::tsc::invariant() {
            return None;
        }
        Some(Self::new(
            SystemTsc,
            std::time::Duration::from_millis(20),
            std::time::Duration::from_secs(1),
        ))
    }
}

impl<S: TickSource> TscClock<S> {
    /// Calibrates over `warmup` (busy-waits that long), then recalibrates every `every`.
    pub fn new(mut src: S, warmup: std::time::Duration, every: std::time::Duration) -> Self {
        let (n0, t0) = src.reference();
        let want = warmup.as_nanos() as u64;
        let (mut n1, mut t1) = src.reference();
        while n1.saturating_sub(n0) < want || t1 <= t0 {
            std::hint::spin_loop();
            (n1, t1) = src.reference();
        }
        let rate = (((n1 - n0) as u128) << SHIFT) / (t1 - t0) as u128;
        let rate = rate as u64;
        let cal_ticks = (every.as_nanos() << SHIFT)
            .checked_div(rate as u128)
            .unwrap_or(1) as u64;
        TscClock {
            src,
            base_ticks: t1,
            base_ns: n1,
            mult: rate,
            rate,
            next_cal: t1 + cal_ticks,
            cal_ticks: cal_ticks.max(1),
            last: 0,
            ref_ticks: t1,
            ref_ns: n1,
            calibrations: 0,
            steps: 0,
        }
    }

    #[inline(always)]
    fn project(&self, ticks: u64) -> u64 {
        self.base_ns
            + (((ticks.wrapping_sub(self.base_ticks)) as u128 * self.mult as u128) >> SHIFT) as u64
    }

    /// Nanoseconds per tick (for reports).
    pub fn ns_per_tick(&self) -> f64 {
        self.rate as f64 / (1u64 << SHIFT) as f64
    }

    fn recalibrate(&mut self) {
        let (ref_ns, ref_ticks) = self.src.reference();
        let ours = self.project(ref_ticks);
        let err = ref_ns as i64 - ours as i64;
        let dt = ref_ticks.wrapping_sub(self.ref_ticks).max(1);
        let dn = ref_ns as i64 - self.ref_ns as i64;
        self.calibrations += 1;
        // Continue from where we are, whatever happens next.
        self.base_ns = ours.max(self.last);
        self.base_ticks = ref_ticks;
        if err.abs() <= STEP_NS && dn > 0 {
            // Drift: new rate estimate from the reference interval, plus a
            // correction that removes the error over the next interval.
            self.rate = (((dn as u128) << SHIFT) / dt as u128) as u64;
            let corr = ((err as i128) << SHIFT) / self.cal_ticks as i128;
            self.mult = (self.rate as i128 + corr).max(1) as u64;
        } else if err > 0 {
            // Forward step: follow it.
            self.steps += 1;
            self.base_ns = ref_ns.max(self.last);
            self.mult = self.rate;
        } else {
            // Backward step: slew at SLEW_PPM until caught up (never backwards).
            self.steps += 1;
            self.mult = self.rate - self.rate * SLEW_PPM / 1_000_000;
        }
        self.ref_ns = ref_ns;
        self.ref_ticks = ref_ticks;
        self.next_cal = ref_ticks + self.cal_ticks;
    }
}

impl<S: TickSource> Clock for TscClock<S> {
    #[inline]
    fn now_ns(&mut self) -> u64 {
        let mut t = self.src.ticks();
        if t >= self.next_cal {
            self.recalibrate();
            // The new base is later than `t`: read again.
            t = self.src.ticks();
        }
        let ns = self.project(t).max(self.last);
        self.last = ns;
        ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A fake: ticks at 3 per ns (3 GHz); the reference runs `ppm` fast and can jump.
    #[derive(Clone)]
    struct Fake {
        t: Rc<Cell<u64>>,
        jump: Rc<Cell<i64>>,
        ppm: i64,
    }
    impl TickSource for Fake {
        fn ticks(&mut self) -> u64 {
            let v = self.t.get();
            self.t.set(v + 30); // 10 ns pass per read
            v
        }
        fn reference(&mut self) -> (u64, u64) {
            let t = self.ticks();
            let ns = (t / 3) as i64;
            let ns = ns + ns * self.ppm / 1_000_000 + self.jump.get();
            (1_700_000_000_000_000_000u64.wrapping_add(ns as u64), t)
        }
    }
    fn fake(ppm: i64) -> (TscClock<Fake>, Rc<Cell<u64>>, Rc<Cell<i64>>) {
        let f = Fake {
            t: Rc::new(Cell::new(1_000)),
            jump: Rc::new(Cell::new(0)),
            ppm,
        };
        let (t, j) = (f.t.clone(), f.jump.clone());
        (
            TscClock::new(
                f,
                std::time::Duration::from_millis(1),
                std::time::Duration::from_millis(10),
            ),
            t,
            j,
        )
    }
    fn truth(c: &mut TscClock<Fake>) -> (u64, u64) {
        let (r, _) = c.src.reference();
        (c.now_ns(), r)
    }
    fn advance(t: &Rc<Cell<u64>>, c: &mut TscClock<Fake>, ns: u64) {
        // Move time forward in 1 µs reads, as a poll thread would.
        for _ in 0..ns / 1000 {
            t.set(t.get() + 3000);
            c.now_ns();
        }
    }

    #[test]
    fn tracks_a_drifting_reference() {
        let (mut c, t, _) = fake(100); // reference 100 ppm fast
        advance(&t, &mut c, 100_000_000);
        let (ours, reference) = truth(&mut c);
        let err = ours as i64 - reference as i64;
        assert!(err.abs() < 2_000, "error after drift correction: {err} ns");
        assert!(c.calibrations >= 5);
    }

    #[test]
    fn follows_a_forward_step_and_never_goes_back_on_a_backward_one() {
        let (mut c, t, jump) = fake(0);
        advance(&t, &mut c, 30_000_000);
        jump.set(1_000_000_000); // +1 s
        advance(&t, &mut c, 30_000_000);
        let (ours, reference) = truth(&mut c);
        assert!(
            (ours as i64 - reference as i64).abs() < 2_000,
            "forward step followed"
        );
        assert!(c.steps >= 1);

        jump.set(0); // back by 1 s
        let mut last = c.now_ns();
        for _ in 0..50_000 {
            t.set(t.get() + 3000);
            let n = c.now_ns();
            assert!(n >= last, "clock went backwards");
            last = n;
        }
        // Slewing: the error shrinks but is not removed at once.
        let (ours, reference) = truth(&mut c);
        let err = ours as i64 - reference as i64;
        assert!(err > 0 && err < 1_000_000_000, "slewing back: {err}");
    }

    #[test]
    fn system_tsc_agrees_with_realtime() {
        if let Some(mut c) = TscClock::system() {
            let a = c.now_ns();
            let r = realtime_ns();
            assert!(a.abs_diff(r) < 5_000_000, "tsc clock {a} vs realtime {r}");
            assert!(c.ns_per_tick() > 0.01 && c.ns_per_tick() < 10.0);
        }
    }
}
