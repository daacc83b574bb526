//! Several engines as one ([`MultiEngine`]): a run over several interfaces
//! (`wiretape record -i eth0 -i eth1`). The queues of all engines are
//! handed out under run-wide numbers (0, 1, ... interface after interface),
//! so the pipeline runs them as it runs one engine's, with one `-c` budget
//! for all; [`MultiEngine::locate`] turns a run-wide number back into the
//! interface and its own queue number (files are named by those).

use crate::engine::{Engine, EngineCounters, EngineQueue};
use crate::StartInfo;

/// Several engines of one kind, run as one.
pub struct MultiEngine<E: Engine> {
    engines: Vec<E>,
    /// Run-wide queue number -> (engine, its queue).
    map: Vec<(usize, u32)>,
    info: StartInfo,
}

impl<E: Engine> MultiEngine<E> {
    /// The engines, in order (each already opened). Panics on an empty list.
    pub fn new(engines: Vec<E>) -> Self {
        assert!(!engines.is_empty(), "a run needs at least one engine");
        let mut map = Vec::new();
        for (e, eng) in engines.iter().enumerate() {
            map.extend(eng.info().queues.iter().map(|&q| (e, q)));
        }
        let first = engines[0].info();
        let infos: Vec<StartInfo> = engines.iter().map(|e| e.info().clone()).collect();
        let info = StartInfo {
            engine: first.engine,
            ifname: infos
                .iter()
                .map(|i| i.ifname.as_str())
                .collect::<Vec<_>>()
                .join(","),
            ifindex: 0,
            source: None,
            queues: (0..map.len() as u32).collect(),
            xdp_mode: first.xdp_mode,
            bind_mode: first.bind_mode,
            zero_copy_refused: infos.iter().find_map(|i| i.zero_copy_refused.clone()),
            native_refused: infos.iter().find_map(|i| i.native_refused.clone()),
            cpus: infos.iter().flat_map(|i| i.cpus.iter().copied()).collect(),
            writer_cpus: infos
                .iter()
                .flat_map(|i| i.writer_cpus.iter().copied())
                .collect(),
            tai_offset_s: first.tai_offset_s,
            ts_mode: first.ts_mode,
            link_bps: infos.iter().filter_map(|i| i.link_bps).min(),
            clock: first.clock,
            hw_refused: infos.iter().find_map(|i| i.hw_refused.clone()),
            frames: first.frames,
            frame_size: first.frame_size,
            busy_poll: first.busy_poll,
            in_place: first.in_place,
            rx_queues: infos.iter().map(|i| i.rx_queues).sum(),
            interfaces: infos,
            mapped_file: None,
        };
        MultiEngine { engines, map, info }
    }

    /// The engine and its own queue number behind run-wide queue `queue`.
    pub fn locate(&self, queue: u32) -> Option<(&E, u32)> {
        self.map
            .get(queue as usize)
            .map(|&(e, q)| (&self.engines[e], q))
    }

    /// The engines, in order.
    pub fn engines(&self) -> &[E] {
        &self.engines
    }
}

impl<E: Engine> Engine for MultiEngine<E> {
    type Rx = E::Rx;
    type Frames = E::Frames;

    fn info(&self) -> &StartInfo {
        &self.info
    }

    fn take_queues(&mut self) -> Vec<EngineQueue<E::Rx, E::Frames>> {
        let mut out = Vec::new();
        for (e, eng) in self.engines.iter_mut().enumerate() {
            for mut q in eng.take_queues() {
                let global = self
                    .map
                    .iter()
                    .position(|&(me, mq)| me == e && mq == q.queue)
                    .expect("an engine hands out the queues its info lists");
                q.queue = global as u32;
                out.push(q);
            }
        }
        out.sort_by_key(|q| q.queue);
        out
    }

    fn counters(&self, queue: u32) -> EngineCounters {
        self.locate(queue)
            .map(|(e, q)| e.counters(q))
            .unwrap_or_default()
    }

    fn stop(&mut self) {
        for e in &mut self.engines {
            e.stop();
        }
    }

    /// The first interface that is gone, else the first that is down.
    fn link_status(&self) -> crate::LinkStatus {
        let all: Vec<crate::LinkStatus> = self.engines.iter().map(|e| e.link_status()).collect();
        all.iter()
            .find(|s| matches!(s, crate::LinkStatus::Gone(_)))
            .or_else(|| all.iter().find(|s| **s != crate::LinkStatus::Up))
            .cloned()
            .unwrap_or(crate::LinkStatus::Up)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{FrameStore, RxQueue};
    use crate::{FileConfig, FileEngine, RecordHead, RecordSource};
    use wiretape_timestamp::TsMode;

    /// `n` records of 60 bytes filled with `tag`.
    struct Mem {
        left: u32,
        tag: u8,
    }

    impl RecordSource for Mem {
        fn next(&mut self) -> Option<RecordHead> {
            (self.left > 0).then(|| {
                self.left -= 1;
                RecordHead {
                    caplen: 60,
                    wire_len: 60,
                    ts_ns: 1,
                }
            })
        }
        fn fill(&mut self, dst: &mut [u8]) {
            dst.fill(self.tag);
        }
    }

    fn file(name: &str, n: u32, tag: u8) -> FileEngine {
        FileEngine::open(
            &FileConfig::new(format!("/x/{name}.pcap")),
            Mem { left: n, tag },
            TsMode::Off,
        )
        .unwrap()
    }

    #[test]
    fn queues_are_numbered_run_wide_and_found_again() {
        let mut m = MultiEngine::new(vec![file("a", 3, 1), file("b", 5, 2)]);
        assert_eq!(m.info().ifname, "a,b");
        assert_eq!(m.info().queues, vec![0, 1]);
        assert_eq!(m.info().interfaces.len(), 2);
        assert_eq!(m.info().interfaces[1].ifname, "b");
        let (e, q) = m.locate(1).unwrap();
        assert_eq!((e.info().ifname.as_str(), q), ("b", 0));
        assert!(m.locate(2).is_none());
        let qs = m.take_queues();
        assert_eq!(qs.iter().map(|q| q.queue).collect::<Vec<_>>(), vec![0, 1]);
        for mut q in qs {
            let mut v = Vec::new();
            while q.rx.take(64, &mut v) > 0 {}
            let want: u8 = if q.queue == 0 { 1 } else { 2 };
            assert!(v
                .iter()
                .all(|d| q.frames.frame(d).0.iter().all(|&b| b == want)));
            q.frames.give_back(v.drain(..));
        }
        // Counters come from the engine behind each run-wide number.
        assert_eq!(m.counters(0).seen, 3);
        assert_eq!(m.counters(1).seen, 5);
        assert_eq!(m.counters(7), EngineCounters::default());
        m.stop();
    }
}
