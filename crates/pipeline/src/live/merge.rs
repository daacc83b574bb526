//! [`Merger`]: the frames of a subscriber's batches (in order per queue) in
//! timestamp order across queues: held until every queue's writer has
//! published past them ([`Merger::mark`]), or within a reorder window.

use super::chunk::{record_at, ts_at, Frame};
use super::hub::Batch;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Merges batches of several queues into one stream in timestamp order.
///
/// Marked ([`Merger::mark`] before taking the subscriber's batches), a
/// frame is handed out once every queue of the run has published past its
/// stamp: a queue's watermark is the stamp of the last frame its writer
/// handed to the subscribers; a quiet queue's (no frame for 100 ms) is the
/// clock of its writer's last quiet pass less `window` of stamps, so an
/// idle queue holds the stream at most about `window` plus 100 ms; an
/// ended queue holds nothing. A queue whose writer is busy but late (a
/// loaded machine) holds the stream until it catches up, so the order
/// holds however late its batches come; while it is held the frames count
/// against the subscriber's buffer, and a lossy subscriber skips (counted)
/// what does not fit rather than send a frame out of order. No wall time
/// is read.
///
/// Never marked, a frame goes once nothing earlier is likely to come:
/// every queue of the run has frames waiting, or the stream has moved
/// `window` past it (a later frame of any queue is stamped at least
/// `window` after it), or it has waited `window` of wall time (a quiet
/// link); a batch later than that goes out behind later frames.
///
/// Frames of one queue keep their order; equal stamps go in the order
/// queues were first seen. Batches are dropped (their chunks released) as
/// soon as they are read.
///
/// ```no_run
/// # fn demo(mut sub: wiretape_pipeline::live::Subscriber) {
/// use std::time::Duration;
/// use wiretape_pipeline::live::{Merger, Recv};
/// let mut m = Merger::new(Duration::from_millis(50)).expect_queues(&sub.queues());
/// loop {
///     m.mark(&sub);
///     match sub.recv_timeout(Duration::from_millis(50)) {
///         Recv::Batch(b) => m.push(b),
///         Recv::Timeout => {}
///         Recv::Ended => break,
///     }
///     while let Some(f) = m.next_ready() {
///         println!("{} {} bytes", f.ts_ns, f.orig_len);
///     }
/// }
/// while let Some(f) = m.next_flush() {
///     println!("{} {} bytes", f.ts_ns, f.orig_len);
/// }
/// # }
/// ```
pub struct Merger {
    queues: Vec<Cursor>,
    expect: Vec<u32>,
    window: Duration,
    window_ns: u64,
    newest_ts: u64,
    held_bytes: usize,
    missed: u64,
    /// Marked: every queue has published up to this stamp.
    floor: Option<u64>,
}

struct Cursor {
    queue: u32,
    batches: VecDeque<(Batch, Instant)>,
    off: usize,
}

impl Merger {
    /// A merger that holds frames at most `window` (of stamps, or of wall
    /// time on a quiet link) waiting for earlier ones.
    pub fn new(window: Duration) -> Merger {
        Merger {
            queues: Vec::new(),
            expect: Vec::new(),
            window,
            window_ns: window.as_nanos() as u64,
            newest_ts: 0,
            held_bytes: 0,
            missed: 0,
            floor: None,
        }
    }

    /// The run's queues ([`super::Subscriber::queues`]): until each has
    /// frames waiting, only the window releases frames.
    pub fn expect_queues(mut self, queues: &[u32]) -> Merger {
        self.expect = queues.to_vec();
        self
    }

    /// Takes how far every queue's writer has published (see [`Merger`]):
    /// call it before taking the subscriber's batches, so that every frame
    /// at or before the mark is then pushed. From the first mark on,
    /// frames go by the marks alone (until the run has started, none go).
    pub fn mark(&mut self, sub: &super::Subscriber) {
        let floor = sub.published_floor(self.window_ns).unwrap_or(0);
        self.floor = Some(self.floor.map_or(floor, |f| f.max(floor)));
    }

    /// Adds a batch (in the order the subscriber received it).
    pub fn push(&mut self, b: Batch) {
        self.newest_ts = self.newest_ts.max(b.last_ts());
        self.held_bytes += b.as_pcap_records().len();
        self.missed += b.missed_before();
        let q = b.queue();
        let i = match self.queues.iter().position(|c| c.queue == q) {
            Some(i) => i,
            None => {
                self.queues.push(Cursor {
                    queue: q,
                    batches: VecDeque::new(),
                    off: 0,
                });
                self.queues.len() - 1
            }
        };
        self.queues[i].batches.push_back((b, Instant::now()));
    }

    /// Bytes of records held.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Frames the subscriber missed, as its batches told (lossy).
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// Whether no frame is held.
    pub fn is_empty(&self) -> bool {
        self.queues.iter().all(|c| c.batches.is_empty())
    }

    /// The next frame in time order, if one may go now.
    pub fn next_ready(&mut self) -> Option<Frame<'_>> {
        self.next_inner(false)
    }

    /// The next frame in time order, whatever the window (the stream ended).
    pub fn next_flush(&mut self) -> Option<Frame<'_>> {
        self.next_inner(true)
    }

    fn next_inner(&mut self, flush: bool) -> Option<Frame<'_>> {
        let mut best: Option<(usize, u64)> = None;
        let mut all = true;
        for (i, c) in self.queues.iter_mut().enumerate() {
            while let Some((b, _)) = c.batches.front() {
                let len = b.as_pcap_records().len();
                if c.off < len {
                    break;
                }
                self.held_bytes -= len;
                c.batches.pop_front();
                c.off = 0;
            }
            match c.batches.front() {
                Some((b, _)) => {
                    let ts = ts_at(b.as_pcap_records(), c.off);
                    if best.is_none_or(|(_, t)| ts < t) {
                        best = Some((i, ts));
                    }
                }
                None => all = false,
            }
        }
        let (i, ts) = best?;
        if let (false, Some(floor)) = (flush, self.floor) {
            if ts > floor {
                return None;
            }
        } else if !flush {
            let all = all
                && self
                    .expect
                    .iter()
                    .all(|q| self.queues.iter().any(|c| c.queue == *q));
            let ready = all
                || ts.saturating_add(self.window_ns) <= self.newest_ts
                || self.queues[i]
                    .batches
                    .front()
                    .is_some_and(|(_, at)| at.elapsed() >= self.window);
            if !ready {
                return None;
            }
        }
        let c = &mut self.queues[i];
        let (b, _) = c.batches.front().expect("a head");
        let (f, next) = record_at(b.as_pcap_records(), c.off);
        c.off = next;
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::{Hub, LiveConfig, Recv, SubscribeOptions, Subscriber};

    #[test]
    fn two_queues_come_out_in_time_order_and_whole() {
        let hub = Hub::new(LiveConfig::default());
        let mut sub = hub.subscribe(SubscribeOptions::lossless().max_batches(1000));
        let mut w = hub.attach(&[3, 5], 65535).unwrap();
        // Queue 3 gets even stamps, queue 5 odd ones, published in batches
        // of different sizes, queue 5 running ahead.
        let (mut a, mut b) = (0u64, 0u64);
        let n = 5000u64;
        while a < n || b < n {
            for _ in 0..37 {
                if b < n {
                    w[1].push(2 * b + 1, &(2 * b + 1).to_le_bytes(), 8);
                    b += 1;
                }
            }
            w[1].publish(0);
            for _ in 0..23 {
                if a < n {
                    w[0].push(2 * a, &(2 * a).to_le_bytes(), 8);
                    a += 1;
                }
            }
            w[0].publish(0);
        }
        drop(w);
        hub.finish();
        let mut m = Merger::new(Duration::from_secs(3600)).expect_queues(&sub.queues());
        let mut out = Vec::new();
        loop {
            match sub.recv_timeout(Duration::from_secs(1)) {
                Recv::Batch(b) => m.push(b),
                Recv::Timeout => panic!("no end"),
                Recv::Ended => break,
            }
            while let Some(f) = m.next_ready() {
                assert_eq!(f.data, &f.ts_ns.to_le_bytes()[..]);
                out.push(f.ts_ns);
            }
        }
        while let Some(f) = m.next_flush() {
            out.push(f.ts_ns);
        }
        assert_eq!(out, (0..2 * n).collect::<Vec<_>>());
        assert!(m.is_empty() && m.held_bytes() == 0);
    }

    /// Marked, a frame waits for every queue to publish past it however
    /// long that takes (no wall time, a window of 1 ns): a queue's batch
    /// that comes late with earlier stamps still goes in order; a quiet
    /// queue stops holding the stream once its writer's quiet pass is a
    /// window past; an ended queue holds nothing.
    #[test]
    fn marked_frames_wait_for_every_queue_however_late() {
        let hub = Hub::new(LiveConfig::default());
        let mut sub = hub.subscribe(SubscribeOptions::lossless().max_batches(1000));
        let mut w = hub.attach(&[3, 5], 65535).unwrap();
        let mut m = Merger::new(Duration::from_nanos(1)).expect_queues(&sub.queues());
        let mut out = Vec::new();
        fn pass(m: &mut Merger, sub: &mut Subscriber, out: &mut Vec<u64>) {
            m.mark(sub);
            while let Recv::Batch(b) = sub.try_next() {
                m.push(b);
            }
            while let Some(f) = m.next_ready() {
                assert_eq!(f.data, &f.ts_ns.to_le_bytes()[..]);
                out.push(f.ts_ns);
            }
        }
        // Queue 3 publishes stamps 100..200; queue 5 nothing yet.
        for t in 100..200u64 {
            w[0].push(t, &t.to_le_bytes(), 8);
        }
        w[0].publish(0);
        pass(&mut m, &mut sub, &mut out);
        std::thread::sleep(Duration::from_millis(20));
        pass(&mut m, &mut sub, &mut out);
        assert!(out.is_empty(), "held for queue 5, whatever the wall time");
        // Queue 5's batch comes late with earlier stamps: 50..150, odd.
        for t in (51..150u64).step_by(2) {
            w[1].push(t, &t.to_le_bytes(), 8);
        }
        w[1].publish(0);
        pass(&mut m, &mut sub, &mut out);
        let mut want: Vec<u64> = (51..150).step_by(2).chain(100..150).collect();
        want.sort();
        assert_eq!(out, want, "up to queue 5's last stamp, in order");
        // Queue 5 goes quiet: its clock is far past the stamps.
        w[1].idle(0);
        pass(&mut m, &mut sub, &mut out);
        want.extend(150..200);
        assert_eq!(out, want, "a quiet queue holds nothing back");
        // Queue 3 ends; queue 5 publishes more, later.
        for t in 300..310u64 {
            w[1].push(t, &t.to_le_bytes(), 8);
        }
        w[1].publish(0);
        let w5 = w.pop().unwrap();
        drop(w);
        pass(&mut m, &mut sub, &mut out);
        want.extend(300..310);
        assert_eq!(out, want);
        drop(w5);
        hub.finish();
        assert!(m.is_empty());
    }
}
