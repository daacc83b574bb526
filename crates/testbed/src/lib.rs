//! A test bed of real parts: a veth pair inside a private network namespace,
//! and a sender of known frames. Used by `wiretape demo`, the integration
//! tests and the benches. Everything it creates is removed on drop, also when
//! a test fails (the namespace goes, and the veth pair with it).
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod sys;

use std::io;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
pub use wiretape_capture::frames;
use wiretape_capture::sys::pin_to_cpu;

/// The generator end's name inside a [`Testbed`] namespace.
pub const GEN_IF: &str = "wt-gen";
/// The capture end's name.
pub const CAP_IF: &str = "wt-cap";

fn run(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.stderr(Stdio::piped()).stdout(Stdio::piped()).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{:?} failed: {}",
            cmd,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A private network namespace holding a veth pair `wt-gen` <-> `wt-cap`.
pub struct Testbed {
    ns: String,
}

impl Testbed {
    /// Creates namespace `wt-<tag>-<pid>-<n>` with a veth pair of `queues`
    /// queues per end, both up, IPv6 off (no stray frames on the link).
    pub fn create(tag: &str, queues: u32) -> io::Result<Testbed> {
        static N: AtomicU32 = AtomicU32::new(0);
        let ns = format!(
            "wt-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        run(Command::new("ip").args(["netns", "add", &ns])).map_err(|e| {
            io::Error::other(format!(
                "cannot create a network namespace (are you root? is iproute2 installed?): {e}"
            ))
        })?;
        let tb = Testbed { ns };
        let q = queues.max(1).to_string();
        tb.ip(&["link", "set", "lo", "up"])?;
        tb.exec(&[
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ])?;
        tb.ip(&[
            "link",
            "add",
            GEN_IF,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            CAP_IF,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        tb.ip(&["link", "set", GEN_IF, "address", "02:77:74:00:00:01", "up"])?;
        tb.ip(&["link", "set", CAP_IF, "address", "02:77:74:00:00:02", "up"])?;
        Ok(tb)
    }

    /// Adds another veth pair `gen` <-> `cap` of `queues` queues per end to
    /// the namespace, both up, with the given MAC addresses' last byte:
    /// several capture interfaces in one namespace (multi-interface runs).
    pub fn add_pair(&self, gen: &str, cap: &str, queues: u32, mac_byte: u8) -> io::Result<()> {
        let q = queues.max(1).to_string();
        self.ip(&[
            "link",
            "add",
            gen,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            cap,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        let mac = |k: u8| format!("02:77:74:00:{mac_byte:02x}:{k:02x}");
        self.ip(&["link", "set", gen, "address", &mac(1), "up"])?;
        self.ip(&["link", "set", cap, "address", &mac(2), "up"])?;
        Ok(())
    }

    /// The namespace's name.
    pub fn netns(&self) -> &str {
        &self.ns
    }

    /// `ip -n NS ARGS...`
    pub fn ip(&self, args: &[&str]) -> io::Result<String> {
        run(Command::new("ip").arg("-n").arg(&self.ns).args(args))
    }

    /// Runs a command inside the namespace and returns its stdout.
    pub fn exec(&self, args: &[&str]) -> io::Result<String> {
        run(Command::new("ip")
            .args(["netns", "exec", &self.ns])
            .args(args))
    }

    /// A `Command` that runs `program` inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, program]);
        c
    }

    /// An interface statistic (e.g. `tx_dropped`) read inside the namespace.
    pub fn link_stat(&self, ifname: &str, stat: &str) -> u64 {
        self.exec(&["cat", &format!("/sys/class/net/{ifname}/statistics/{stat}")])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Sends frames `seqs` from the generator end, one sender thread per flow
    /// group, at about `pps` frames per second (None: as fast as it goes).
    pub fn send(
        &self,
        seqs: std::ops::Range<u64>,
        size: SizeFn,
        flows: u16,
        pps: Option<u64>,
    ) -> io::Result<SendReport> {
        self.send_from(GEN_IF, seqs, size, flows, pps)
    }

    /// [`Testbed::send`] from generator end `gen` (a pair made by
    /// [`Testbed::add_pair`]).
    pub fn send_from(
        &self,
        gen: &str,
        seqs: std::ops::Range<u64>,
        size: SizeFn,
        flows: u16,
        pps: Option<u64>,
    ) -> io::Result<SendReport> {
        let ns = self.ns.clone();
        let gen = gen.to_owned();
        std::thread::spawn(move || -> io::Result<SendReport> {
            sys::enter_netns(&ns)?;
            let s = sys::PacketSender::open(&gen)?;
            let start = Instant::now();
            let mut frame = Vec::with_capacity(2048);
            let mut sent = 0u64;
            let mut bytes = 0u64;
            for seq in seqs.clone() {
                let len = size.size(seq);
                frames::build_into(&mut frame, seq, len, (seq % flows.max(1) as u64) as u16);
                s.send(&frame)?;
                sent += 1;
                bytes += len as u64;
                if let Some(pps) = pps {
                    // Pace in bursts of 32 so that no queue on the way overflows.
                    if sent.is_multiple_of(32) {
                        pace(start, sent, pps);
                    }
                }
            }
            Ok(SendReport {
                sent,
                bytes,
                elapsed: start.elapsed(),
            })
        })
        .join()
        .map_err(|_| io::Error::other("sender thread panicked"))?
    }
}

impl Testbed {
    /// Sends `n` frames of `len` bytes (>= 70) at a constant `pps` from the
    /// generator end, each carrying its sequence number and the time it was
    /// sent (CLOCK_REALTIME ns): ground truth for timestamp accuracy.
    pub fn send_timed(
        &self,
        n: u64,
        len: usize,
        pps: u64,
        cpu: Option<usize>,
    ) -> io::Result<SendReport> {
        let ns = self.ns.clone();
        std::thread::spawn(move || -> io::Result<SendReport> {
            sys::enter_netns(&ns)?;
            if let Some(c) = cpu {
                pin_to_cpu(c)?;
            }
            let s = sys::PacketSender::open(GEN_IF)?;
            let len = len.max(frames::MIN_TIMED_LEN);
            let mut frame = Vec::with_capacity(len);
            let start = Instant::now();
            for seq in 0..n {
                pace(start, seq, pps);
                frames::build_timed_into(&mut frame, seq, len, wiretape_timestamp::realtime_ns());
                s.send(&frame)?;
            }
            Ok(SendReport {
                sent: n,
                bytes: n * len as u64,
                elapsed: start.elapsed(),
            })
        })
        .join()
        .map_err(|_| io::Error::other("sender thread panicked"))?
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.ns])
            .stderr(Stdio::null())
            .status();
    }
}

/// Waits (spinning: sleeps are too coarse at these rates) until frame `k`
/// of a stream paced at `pps` from `start` is due.
fn pace(start: Instant, k: u64, pps: u64) {
    let due = Duration::from_nanos(k * 1_000_000_000 / pps.max(1));
    while start.elapsed() < due {
        std::hint::spin_loop();
    }
}

/// What a sender did.
#[derive(Clone, Copy, Debug)]
pub struct SendReport {
    /// Frames sent.
    pub sent: u64,
    /// Their bytes.
    pub bytes: u64,
    /// How long sending took.
    pub elapsed: Duration,
}

/// Frame sizes by sequence number.
#[derive(Clone, Copy, Debug)]
pub enum SizeFn {
    /// Every frame this size.
    Fixed(usize),
    /// 60..=1514 bytes, spread over the range.
    Mixed,
}

impl SizeFn {
    /// The size of frame `seq`.
    pub fn size(self, seq: u64) -> usize {
        match self {
            SizeFn::Fixed(n) => n.clamp(frames::MIN_LEN, 9000),
            SizeFn::Mixed => frames::mixed_size(seq),
        }
    }
}
