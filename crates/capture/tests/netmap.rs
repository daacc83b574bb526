//! The netmap engine against a synthetic region laid out as the kernel lays
//! it out (`wiretape_capture::netmap::synthetic`): the real ring walk, buffer
//! arithmetic, slot return and stamping, with the kernel played by a test
//! thread (at full speed, publishing `tail` on its own) or by a scripted
//! sync (the deterministic cases: empty, full, wrap-around, slots held,
//! skipped slots, timestamps). No netmap module is needed.
#![allow(unused_crate_dependencies)] // a test crate uses only some of them
#![cfg(feature = "netmap")]

use std::io;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wiretape_capture::netmap::{
    synthetic, KernelRing, Netmap, NetmapFrames, NetmapPort, NetmapRx, NoSync, RingStamp, RxSync,
    SyntheticSpec,
};
use wiretape_capture::{
    CaptureFilter, Desc, Engine, EngineQueue, FrameStore, NetmapConfig, RxQueue,
};
use wiretape_timestamp::TsMode;

fn spec(rings: u32, slots: u32) -> SyntheticSpec {
    SyntheticSpec {
        name: "nm0".into(),
        rings,
        slots,
        buf_size: 2048,
    }
}

/// Length of frame `seq` (60 to 1514 bytes).
fn frame_len(seq: u64) -> usize {
    60 + (seq as usize * 131) % 1455
}

/// Frame `seq`: its number, then a pattern of it.
fn fill_frame(seq: u64, buf: &mut Vec<u8>) {
    let len = frame_len(seq);
    buf.clear();
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend((8..len).map(|j| (seq as usize * 7 + j) as u8));
}

/// Checks that `f` is frame `seq`, byte for byte.
fn check_frame(seq: u64, f: &[u8], scratch: &mut Vec<u8>) {
    fill_frame(seq, scratch);
    assert_eq!(f.len(), scratch.len(), "frame {seq}: length");
    assert!(f == &scratch[..], "frame {seq}: bytes differ");
}

type Queue<P> = EngineQueue<NetmapRx<P>, NetmapFrames>;

fn engine<P: RxSync>(ports: Vec<NetmapPort<P>>, ts: TsMode) -> (Netmap<P>, Vec<Queue<P>>) {
    let mut e = Netmap::from_ports("nm0", ports, &NetmapConfig::new("nm0"), ts).unwrap();
    let q = e.take_queues();
    (e, q)
}

/// The kernel at full speed on its own thread while a poll thread takes and
/// a writer thread checks and gives back: every frame once, in order, bytes
/// equal, every slot returned.
fn full_speed(slots: u32, ts: TsMode, batch: usize, frames: u64) {
    let (ports, mut kernels) = synthetic(&spec(1, slots)).unwrap();
    let (mut eng, mut queues) = engine(ports, ts);
    let q = queues.pop().unwrap();
    let (mut rx, mut store) = (q.rx, q.frames);
    let mut k = kernels.pop().unwrap();
    let kernel = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let (mut seq, mut full_seen) = (0u64, 0u64);
        while seq < frames {
            let room = k.room();
            if room == 0 {
                full_seen += 1;
                std::hint::spin_loop();
                continue;
            }
            // Publish in bursts of varying size, as a NIC's NAPI poll does.
            for _ in 0..room.min(1 + (seq % 97) as u32) {
                fill_frame(seq, &mut buf);
                assert!(k.push(&buf, false));
                seq += 1;
                if seq == frames {
                    break;
                }
            }
            k.publish();
        }
        (k, full_seen)
    });
    let (tx, rxc) = mpsc::channel::<Vec<Desc>>();
    let (free_tx, free_rx) = mpsc::channel::<Vec<Desc>>();
    let writer = std::thread::spawn(move || {
        let (mut next, mut scratch) = (0u64, Vec::new());
        for mut v in rxc {
            for d in &v {
                let (f, wire) = store.frame(d);
                assert_eq!(wire as usize, f.len());
                let seq = u64::from_le_bytes(f[..8].try_into().unwrap());
                assert_eq!(seq, next, "frames in order, each once");
                check_frame(seq, f, &mut scratch);
                next += 1;
            }
            store.give_back(v.drain(..));
            let _ = free_tx.send(v);
        }
        next
    });
    let t0 = Instant::now();
    let mut taken = 0u64;
    while taken < frames {
        let mut v = free_rx.try_recv().unwrap_or_default();
        let n = rx.take(batch, &mut v);
        if n == 0 {
            rx.wait(Duration::from_millis(1));
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "stalled at {taken}"
            );
            continue;
        }
        taken += n as u64;
        tx.send(v).unwrap();
    }
    drop(tx);
    assert_eq!(writer.join().unwrap(), frames);
    let (k, full_seen) = kernel.join().unwrap();
    // Nothing more comes: the last take gives every slot back.
    assert_eq!(rx.take(batch, &mut Vec::new()), 0);
    assert_eq!(k.head(), k.tail(), "every slot back with the kernel");
    assert_eq!(k.cur(), k.tail());
    eng.stop();
    assert_eq!(rx.take(batch, &mut Vec::new()), 0);
    assert!(rx.ended());
    let c = eng.counters(0);
    assert_eq!((c.seen, c.filtered, c.other), (frames, 0, 0));
    let bytes: u64 = (0..frames).map(|s| frame_len(s) as u64).sum();
    assert_eq!(c.seen_bytes, bytes);
    if ts != TsMode::Kpt && ts != TsMode::Off {
        assert_eq!(rx.stamp_stats().unwrap().frames, frames);
    }
    // The ring was full at times: wrap-around under a full ring happened.
    eprintln!(
        "{frames} frames through a {slots}-slot ring ({ts}): kernel found it full {full_seen} times"
    );
}

#[test]
fn every_frame_once_in_order_with_the_kernel_at_full_speed() {
    full_speed(1024, TsMode::Kpt, 256, 400_000);
}

#[test]
fn full_speed_with_an_odd_ring_and_stamps_per_sync() {
    // 1000 slots: not a power of two (netmap allows any size).
    full_speed(1000, TsMode::Wdts, 64, 300_000);
}

#[test]
fn full_speed_with_a_tiny_ring() {
    full_speed(7, TsMode::Off, 3, 50_000);
}

/// A kernel played synchronously: each `rxsync` (on the poll thread, as the
/// real ioctl) publishes up to the next scripted number of frames, and
/// stamps `ring->ts` as the kernel does.
struct Scripted {
    k: KernelRing,
    stamp: RingStamp,
    script: std::collections::VecDeque<u32>,
    seq: u64,
    ts: u64,
    /// Stamp each sync with the real time (as microtime does) instead of
    /// 10 µs steps from a fixed start.
    real_time: bool,
    /// Writes frame `seq`.
    make: fn(u64, &mut Vec<u8>),
    syncs: u32,
}

impl Scripted {
    fn new(k: KernelRing, script: &[u32]) -> Scripted {
        Scripted {
            stamp: k.stamp_handle(),
            k,
            script: script.iter().copied().collect(),
            seq: 0,
            ts: 1_700_000_000_000_000_000,
            real_time: false,
            make: fill_frame,
            syncs: 0,
        }
    }
}

impl RxSync for Scripted {
    fn rxsync(&mut self) -> io::Result<()> {
        self.syncs += 1;
        // microtime(): 10 µs per sync, or the real time.
        self.ts = if self.real_time {
            wiretape_timestamp::realtime_ns()
        } else {
            self.ts + 10_000
        };
        self.stamp.set_ns(self.ts);
        let want = self.script.pop_front().unwrap_or(0);
        let mut buf = Vec::new();
        for _ in 0..want {
            (self.make)(self.seq, &mut buf);
            if !self.k.push(&buf, false) {
                break;
            }
            self.seq += 1;
        }
        self.k.publish();
        Ok(())
    }
    fn wait(&mut self, _timeout: Duration) {}
}

/// Our ports with scripted kernels (the kernel ends move into the syncs;
/// the returned handles only watch `head`).
fn scripted(slots: u32, script: &[u32], ts: TsMode) -> (Netmap<Scripted>, Queue<Scripted>) {
    let (ports, kernels) = synthetic(&spec(1, slots)).unwrap();
    let ports: Vec<_> = ports
        .into_iter()
        .zip(kernels)
        .map(|(p, k)| p.with_sync(Scripted::new(k, script)))
        .collect();
    let (e, mut q) = engine(ports, ts);
    (e, q.pop().unwrap())
}

fn seqs(store: &NetmapFrames, v: &[Desc]) -> Vec<u64> {
    v.iter()
        .map(|d| u64::from_le_bytes(store.frame(d).0[..8].try_into().unwrap()))
        .collect()
}

#[test]
fn empty_ring_gives_nothing_and_ends_only_when_stopped() {
    let (mut e, q) = scripted(16, &[], TsMode::Kpt);
    let (mut rx, _store) = (q.rx, q.frames);
    let mut v = Vec::new();
    for _ in 0..5 {
        assert_eq!(rx.take(64, &mut v), 0);
        assert!(!rx.ended());
    }
    rx.wait(Duration::from_millis(1));
    e.stop();
    assert_eq!(rx.take(64, &mut v), 0);
    assert!(rx.ended());
    assert!(v.is_empty());
    assert_eq!(e.counters(0).seen, 0);
}

#[test]
fn a_full_ring_is_taken_whole_and_refilled_only_after_give_back() {
    // 8 slots: the kernel fills at most 7 (one stays empty, as netmap does).
    let (e, q) = scripted(8, &[100, 100, 100, 100], TsMode::Kpt);
    let (mut rx, mut store) = (q.rx, q.frames);
    let mut v = Vec::new();
    assert_eq!(rx.take(64, &mut v), 7, "the full ring");
    assert_eq!(seqs(&store, &v), (0..7).collect::<Vec<_>>());
    // Held by the writer: the next sync brings nothing (no room).
    assert_eq!(rx.take(64, &mut v), 0);
    // Give back the first 3: the next sync returns their slots, and the
    // kernel fills exactly those.
    store.give_back(v.drain(..3));
    let mut w = Vec::new();
    assert_eq!(rx.take(64, &mut w), 3);
    assert_eq!(seqs(&store, &w), vec![7, 8, 9]);
    store.give_back(v.drain(..));
    store.give_back(w.drain(..));
    assert_eq!(rx.take(64, &mut w), 7, "wrapped: the whole ring again");
    assert_eq!(seqs(&store, &w), (10..17).collect::<Vec<_>>());
    assert_eq!(e.counters(0).seen, 17);
}

#[test]
fn slots_go_back_in_order_and_only_when_given_back() {
    let (ports, kernels) = synthetic(&spec(1, 16)).unwrap();
    let k = kernels.into_iter().next().unwrap();
    let port = ports.into_iter().next().unwrap();
    // A sync that lets the test look at the kernel's view of head.
    struct Watch(Scripted, Arc<std::sync::Mutex<Vec<u32>>>);
    impl RxSync for Watch {
        fn rxsync(&mut self) -> io::Result<()> {
            self.1.lock().unwrap().push(self.0.k.head());
            self.0.rxsync()
        }
        fn wait(&mut self, _t: Duration) {}
    }
    let heads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let port = port.with_sync(Watch(Scripted::new(k, &[10, 0, 0, 0, 0]), heads.clone()));
    let (_e, mut q) = engine(vec![port], TsMode::Kpt);
    let q = q.pop().unwrap();
    let (mut rx, mut store) = (q.rx, q.frames);
    let mut v = Vec::new();
    // Taken in batches of 4: the ring is read without syncing again.
    assert_eq!(rx.take(4, &mut v), 4);
    assert_eq!(rx.take(4, &mut v), 4);
    assert_eq!(rx.take(4, &mut v), 2);
    assert_eq!(
        heads.lock().unwrap().clone(),
        vec![0],
        "one sync for 10 frames"
    );
    assert_eq!(rx.take(4, &mut v), 0);
    assert_eq!(
        *heads.lock().unwrap().last().unwrap(),
        0,
        "nothing given back yet"
    );
    store.give_back(v.drain(..5));
    assert_eq!(rx.take(4, &mut v), 0);
    assert_eq!(
        *heads.lock().unwrap().last().unwrap(),
        5,
        "exactly the 5 given back"
    );
    store.give_back(v.drain(..));
    assert_eq!(rx.take(4, &mut v), 0);
    assert_eq!(*heads.lock().unwrap().last().unwrap(), 10);
}

#[test]
#[should_panic(expected = "out of order")]
fn giving_back_a_later_frame_first_is_refused() {
    let (_e, q) = scripted(16, &[4], TsMode::Kpt);
    let (mut rx, mut store) = (q.rx, q.frames);
    let mut v = Vec::new();
    rx.take(64, &mut v);
    let mut later = v.split_off(2);
    store.give_back(later.drain(..));
}

#[test]
fn wrap_around_many_times_with_every_batch_size() {
    // 5 slots, scripts of 0..=6 frames, batches of 1..=4, give back lagging.
    let script: Vec<u32> = (0..3000).map(|i| (i * 5 % 7) as u32).collect();
    let (e, q) = scripted(5, &script, TsMode::Kpt);
    let (mut rx, mut store) = (q.rx, q.frames);
    let (mut held, mut next, mut scratch) = (Vec::new(), 0u64, Vec::new());
    for round in 0..3000usize {
        let mut v = Vec::new();
        rx.take(1 + round % 4, &mut v);
        for d in &v {
            let (f, _) = store.frame(d);
            let seq = u64::from_le_bytes(f[..8].try_into().unwrap());
            assert_eq!(seq, next);
            check_frame(seq, f, &mut scratch);
            next += 1;
        }
        held.extend(v);
        // Give back all but the newest one or two.
        let keep = round % 3;
        if held.len() > keep {
            let n = held.len() - keep;
            store.give_back(held.drain(..n));
        }
    }
    assert!(next > 2000, "{next} frames through a 5-slot ring");
    assert_eq!(e.counters(0).seen, next);
}

#[test]
fn filtered_and_fragmented_frames_are_counted_and_their_slots_returned() {
    let (ports, kernels) = synthetic(&spec(1, 32)).unwrap();
    let mut k = kernels.into_iter().next().unwrap();
    // 4 frames: UDP to port 53, a 3-slot fragmented frame, a TCP frame, UDP 53.
    let udp = |b: u8| {
        let mut f = vec![0u8; 60];
        f[12] = 0x08;
        f[14] = 0x45;
        f[23] = 17;
        f[36] = 0;
        f[37] = 53;
        f[59] = b;
        f
    };
    let mut tcp = udp(2);
    tcp[23] = 6;
    assert!(k.push(&udp(1), false));
    assert!(k.push(&[1; 100], true));
    assert!(k.push(&[2; 100], true));
    assert!(k.push(&[3; 100], false));
    assert!(k.push(&tcp, false));
    assert!(k.push(&udp(3), false));
    assert!(k.push_descriptor(u32::MAX, 60)); // a kernel bug: never read
    k.publish();
    let mut cfg = NetmapConfig::new("nm0");
    cfg.filter = Some(
        CaptureFilter::compile("udp port 53", wiretape_filter::LINKTYPE_ETHERNET, 262144).unwrap(),
    );
    let mut e = Netmap::from_ports("nm0", ports, &cfg, TsMode::Kpt).unwrap();
    let q = e.take_queues().pop().unwrap();
    let (mut rx, mut store) = (q.rx, q.frames);
    let mut v = Vec::new();
    assert_eq!(rx.take(64, &mut v), 2);
    assert_eq!(store.frame(&v[0]).0[59], 1);
    assert_eq!(store.frame(&v[1]).0[59], 3);
    let c = e.counters(0);
    // seen: 2 written + 1 filtered + 1 fragmented + 1 bad descriptor.
    assert_eq!((c.seen, c.filtered, c.other), (5, 1, 2));
    store.give_back(v.drain(..));
    assert_eq!(rx.take(64, &mut v), 0);
    // Everything back, the skipped slots (after the last frame) too.
    assert_eq!(k.head(), 7);
}

/// Frame `seq` as UDP to port 53, or TCP when `seq % 3 == 0` (filtered
/// out by `udp port 53`), numbered at bytes 42..50.
fn udp_or_tcp(seq: u64, buf: &mut Vec<u8>) {
    buf.clear();
    buf.resize(60 + (seq as usize * 37) % 200, 0);
    buf[12] = 0x08;
    buf[14] = 0x45;
    buf[23] = if seq.is_multiple_of(3) { 6 } else { 17 };
    buf[37] = 53;
    buf[42..50].copy_from_slice(&seq.to_le_bytes());
}

#[test]
fn filtered_slots_wrap_around_with_the_writer_lagging() {
    let script: Vec<u32> = (0..4000).map(|i| (i * 5 % 11) as u32).collect();
    let (ports, kernels) = synthetic(&spec(1, 9)).unwrap();
    let mut sync = Scripted::new(kernels.into_iter().next().unwrap(), &script);
    sync.make = udp_or_tcp;
    let port = ports.into_iter().next().unwrap().with_sync(sync);
    let mut cfg = NetmapConfig::new("nm0");
    cfg.filter = Some(
        CaptureFilter::compile("udp port 53", wiretape_filter::LINKTYPE_ETHERNET, 65535).unwrap(),
    );
    let mut e = Netmap::from_ports("nm0", vec![port], &cfg, TsMode::Off).unwrap();
    let q = e.take_queues().pop().unwrap();
    let (mut rx, mut store) = (q.rx, q.frames);
    let (mut held, mut want, mut made) = (Vec::new(), 1u64, 0u64);
    for round in 0..4000usize {
        let mut v = Vec::new();
        made += rx.take(1 + round % 5, &mut v) as u64;
        for d in &v {
            let f = store.frame(d).0;
            let seq = u64::from_le_bytes(f[42..50].try_into().unwrap());
            assert_eq!(seq, want, "round {round}");
            want += if want % 3 == 2 { 2 } else { 1 };
        }
        held.extend(v);
        let keep = round % 4;
        if held.len() > keep {
            let n = held.len() - keep;
            store.give_back(held.drain(..n));
        }
    }
    let c = e.counters(0);
    assert!(made > 1000, "{made} frames kept");
    // Frames 0..seen were looked at, in order: every third one filtered.
    assert_eq!((c.seen, c.other), (made + c.filtered, 0));
    assert_eq!(c.filtered, c.seen.div_ceil(3));
}

#[test]
fn stamps_come_from_ring_ts_per_sync() {
    // Syncs bring 4, then 6 frames; ring->ts advances 10 µs per sync.
    let t = |k: u64| 1_700_000_000_000_000_000 + k * 10_000;
    for mode in [TsMode::Batch, TsMode::Udts, TsMode::Wdts] {
        let (_e, q) = scripted(64, &[4, 6], mode);
        assert!(q.stamper.is_none(), "stamped by the engine, not the stage");
        let (mut rx, store) = (q.rx, q.frames);
        let mut a = Vec::new();
        assert_eq!(rx.take(64, &mut a), 4);
        // The second sync's 6 frames, taken 4 then 2: still one batch.
        let mut b = Vec::new();
        assert_eq!(rx.take(4, &mut b), 4);
        assert_eq!(rx.take(4, &mut b), 2);
        let first: Vec<u64> = a.iter().map(|d| d.ts).collect();
        let second: Vec<u64> = b.iter().map(|d| d.ts).collect();
        // The first sync has no earlier stamp to spread from: all at t(1).
        assert_eq!(first, vec![t(1); 4], "{mode}");
        let gap = t(2) - t(1);
        let want: Vec<u64> = match mode {
            TsMode::Batch => vec![t(2); 6],
            TsMode::Udts => (1..=6).map(|i| t(1) + gap * i / 6).collect(),
            _ => {
                let lens: Vec<u64> = b.iter().map(|d| store.frame(d).0.len() as u64).collect();
                let total: u64 = lens.iter().sum();
                let mut cum = 0;
                lens.iter()
                    .map(|l| {
                        cum += l;
                        t(1) + ((gap as u128 * cum as u128 + total as u128 / 2) / total as u128)
                            as u64
                    })
                    .collect()
            }
        };
        for (got, w) in second.iter().zip(&want) {
            assert!(got.abs_diff(*w) <= 1, "{mode}: {second:?} vs {want:?}");
        }
        assert_eq!(
            *second.last().unwrap(),
            t(2),
            "{mode}: the last frame at t(k+1)"
        );
        assert_eq!(rx.stamp_stats().unwrap().frames, 10);
    }
}

#[test]
fn kpt_and_off_are_stamped_by_the_stage_and_hw_xdp_are_refused() {
    for mode in [TsMode::Kpt, TsMode::Off] {
        let (_e, q) = scripted(16, &[], mode);
        assert_eq!(q.stamper.as_ref().map(|s| s.mode()), Some(mode));
    }
    for mode in [TsMode::Hw, TsMode::Xdp] {
        let (ports, _k) = synthetic(&spec(1, 16)).unwrap();
        let e = Netmap::from_ports("nm0", ports, &NetmapConfig::new("nm0"), mode);
        let msg = e.err().unwrap().to_string();
        assert!(
            msg.contains("--engine afxdp") && msg.contains("hybrid"),
            "{msg}"
        );
    }
}

#[test]
fn hybrid_spreads_saturated_syncs_and_stamps_quiet_ones_at_the_poller() {
    // A full batch (>= max) after a busy take counts as saturated: WDTS from
    // ring->ts. ring->ts is the real time here: hybrid's KPT batches mix it
    // with the poller's clock, as on a real machine.
    let (ports, kernels) = synthetic(&spec(1, 64)).unwrap();
    let mut sync = Scripted::new(kernels.into_iter().next().unwrap(), &[8, 8]);
    sync.real_time = true;
    let stamp_at = Arc::new(std::sync::Mutex::new(Vec::new()));
    struct Log(Scripted, Arc<std::sync::Mutex<Vec<u64>>>);
    impl RxSync for Log {
        fn rxsync(&mut self) -> io::Result<()> {
            self.0.rxsync()?;
            self.1.lock().unwrap().push(self.0.ts / 1000 * 1000);
            Ok(())
        }
        fn wait(&mut self, _t: Duration) {}
    }
    let port = ports
        .into_iter()
        .next()
        .unwrap()
        .with_sync(Log(sync, stamp_at.clone()));
    let (_e, mut q) = engine(vec![port], TsMode::Hybrid);
    let mut rx = q.pop().unwrap().rx;
    let mut v = Vec::new();
    assert_eq!(rx.take(8, &mut v), 8);
    assert_eq!(rx.take(8, &mut v), 8);
    let s = rx.stamp_stats().unwrap();
    // The first sync has no t(k): KPT; the second is spread.
    assert_eq!(
        (s.hybrid_kpt_batches, s.hybrid_wdts_batches),
        (1, 1),
        "{s:?}"
    );
    let ts = stamp_at.lock().unwrap().clone();
    assert_eq!(v[0].ts, ts[0], "a KPT batch starts at ring->ts");
    assert_eq!(v[15].ts, ts[1].max(v[7].ts), "WDTS ends at t(k+1)");
    assert!(v.windows(2).all(|w| w[0].ts <= w[1].ts), "never backwards");
}

#[test]
fn several_rings_each_with_its_own_descriptor() {
    let (ports, mut kernels) = synthetic(&spec(3, 64)).unwrap();
    for (q, k) in kernels.iter_mut().enumerate() {
        for i in 0..=q {
            assert!(k.push(&[q as u8 * 10 + i as u8; 60], false));
        }
        k.publish();
    }
    let (e, queues) = engine(ports, TsMode::Kpt);
    for q in queues {
        let n = q.queue as usize + 1;
        let (mut rx, store) = (q.rx, q.frames);
        let mut v = Vec::new();
        assert_eq!(rx.take(64, &mut v), n);
        for (i, d) in v.iter().enumerate() {
            assert!(store
                .frame(d)
                .0
                .iter()
                .all(|&b| b == q.queue as u8 * 10 + i as u8));
        }
        assert_eq!(e.counters(q.queue).seen, n as u64);
    }
    assert_eq!(e.info().engine, "netmap");
    assert_eq!(e.info().queues, vec![0, 1, 2]);
}

#[test]
fn open_errors_name_the_fix() {
    // No such interface: before /dev/netmap is even looked at.
    let e = Netmap::open(&NetmapConfig::new("wt-no-such-if0"), TsMode::Hybrid)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("no such interface 'wt-no-such-if0'"), "{e}");
    // The module is not on this machine: say so (skipped where it is).
    if !std::path::Path::new("/dev/netmap").exists() {
        let e = Netmap::open(&NetmapConfig::new("lo"), TsMode::Hybrid)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("/dev/netmap") && e.contains("module is not loaded"),
            "{e}"
        );
    }
    // A mode it cannot stamp in: refused first.
    let e = Netmap::open(&NetmapConfig::new("lo"), TsMode::Hw)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("--ts hw"), "{e}");
}

#[test]
fn no_sync_is_what_a_free_running_kernel_needs() {
    // NoSync never fails and never blocks long.
    let mut s = NoSync;
    assert!(s.rxsync().is_ok());
    let t = Instant::now();
    s.wait(Duration::from_secs(5));
    assert!(t.elapsed() < Duration::from_secs(1));
}
