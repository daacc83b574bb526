//! A test bed of real parts: a veth pair inside a private network namespace,
//! and a sender of known frames. Used by `wiretape demo`, the integration
//! tests and the benches. Everything it creates is removed on drop, also when
//! a test fails (the namespace goes, and the veth pair with it).
#![deny(unsafe_code)]

pub mod demo;
pub mod stamps;
#[allow(unsafe_code)]
pub mod sys;

use std::io;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
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
    /// The queue-steering programs of the multi-queue generator ends.
    steering: std::sync::Mutex<Vec<sys::QueueSteering>>,
    /// Their interfaces' names.
    steered: std::sync::Mutex<Vec<String>>,
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
        // One `ip netns add` at a time, across threads and processes: on a
        // fresh machine the first ones also make /run/netns a mount point,
        // and two racing there can stack two mounts, the namespaces made
        // between them then cannot be removed by `ip netns del` (CI saw two
        // left behind after a suite that passed).
        static CREATE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let one = CREATE.lock().unwrap_or_else(|p| p.into_inner());
        let lock = sys::FileLock::exclusive("/run/wiretape-testbed.lock")?;
        run(Command::new("ip").args(["netns", "add", &ns])).map_err(|e| {
            io::Error::other(format!(
                "cannot create a network namespace (are you root? is iproute2 installed?): {e}"
            ))
        })?;
        drop(lock);
        drop(one);
        log(&format!("created {ns}"));
        let tb = Testbed {
            ns,
            steering: Default::default(),
            steered: Default::default(),
        };
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
        if queues > 1 {
            tb.steer(GEN_IF)?;
        }
        Ok(tb)
    }

    /// Attaches the queue-steering program to `gen`'s egress (see
    /// [`QueueSender`]): flow `f` of a send leaves on queue `f % queues`.
    fn steer(&self, gen: &str) -> io::Result<()> {
        let ns = self.ns.clone();
        let name = gen.to_owned();
        let st = std::thread::spawn(move || -> io::Result<sys::QueueSteering> {
            sys::enter_netns(&ns)?;
            sys::QueueSteering::attach(&name)
        })
        .join()
        .map_err(|_| io::Error::other("steering thread panicked"))??;
        self.steering.lock().unwrap().push(st);
        self.steered.lock().unwrap().push(gen.to_owned());
        Ok(())
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
        if queues > 1 {
            self.steer(gen)?;
        }
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

    /// Sends frames `seqs` from the generator end at about `pps` frames per
    /// second (None: as fast as it goes). Frame `seq` belongs to flow
    /// `seq % flows`, and flow `f` goes out on TX queue `f % queues`, which
    /// on a veth pair is the capture end's RX queue of the same number: the
    /// spread over queues is fixed by the flows, on every machine
    /// ([`SendReport::per_queue`] says what each queue got).
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
        let run = Arc::new(SendRun::default());
        self.spawn_sender(gen, seqs, size, flows, pps, run)
            .join()
            .map_err(|_| io::Error::other("sender thread panicked"))?
    }

    /// [`Testbed::send`] on a thread of its own, until it is done or told
    /// to stop ([`Stream::stop`]); [`Stream::sent`] says how many frames it
    /// has handed to the kernel so far (frames `seqs.start` onward, in order).
    pub fn send_stream(
        &self,
        seqs: std::ops::Range<u64>,
        size: SizeFn,
        flows: u16,
        pps: Option<u64>,
    ) -> Stream {
        let run = Arc::new(SendRun::default());
        let handle = self.spawn_sender(GEN_IF, seqs, size, flows, pps, run.clone());
        Stream { run, handle }
    }

    fn spawn_sender(
        &self,
        gen: &str,
        seqs: std::ops::Range<u64>,
        size: SizeFn,
        flows: u16,
        pps: Option<u64>,
        run: Arc<SendRun>,
    ) -> std::thread::JoinHandle<io::Result<SendReport>> {
        let ns = self.ns.clone();
        let steered = self.steered.lock().unwrap().iter().any(|g| g == gen);
        let gen = gen.to_owned();
        std::thread::spawn(move || -> io::Result<SendReport> {
            sys::enter_netns(&ns)?;
            let s = QueueSender::open(&gen, steered)?;
            let flows = flows.max(1) as u64;
            let start = Instant::now();
            let mut frame = Vec::with_capacity(2048);
            let mut rep = SendReport {
                sent: 0,
                bytes: 0,
                elapsed: Duration::ZERO,
                per_queue: vec![0; s.queues()],
            };
            for seq in seqs.clone() {
                if run.stop.load(Ordering::Relaxed) {
                    break;
                }
                let len = size.size(seq);
                let flow = seq % flows;
                frames::build_into(&mut frame, seq, len, flow as u16);
                let q = (flow % s.queues() as u64) as usize;
                s.send(q, &frame)?;
                rep.sent += 1;
                rep.bytes += len as u64;
                rep.per_queue[q] += 1;
                run.sent.store(rep.sent, Ordering::Release);
                if let Some(pps) = pps {
                    // Pace in bursts of 32 so that no queue on the way overflows.
                    if rep.sent.is_multiple_of(32) {
                        pace(start, rep.sent, pps);
                    }
                }
            }
            rep.elapsed = start.elapsed();
            Ok(rep)
        })
    }
}

/// What a sender thread shares with its [`Stream`].
#[derive(Default)]
struct SendRun {
    stop: AtomicBool,
    sent: AtomicU64,
}

/// A sender running on its own thread ([`Testbed::send_stream`]).
pub struct Stream {
    run: Arc<SendRun>,
    handle: std::thread::JoinHandle<io::Result<SendReport>>,
}

impl Stream {
    /// Frames handed to the kernel so far.
    pub fn sent(&self) -> u64 {
        self.run.sent.load(Ordering::Acquire)
    }

    /// Stops sending (after the frame being sent) and waits for the
    /// thread: what it sent in all.
    pub fn stop(self) -> io::Result<SendReport> {
        self.run.stop.store(true, Ordering::Relaxed);
        self.handle
            .join()
            .map_err(|_| io::Error::other("sender thread panicked"))?
    }
}

/// Sends whole frames on chosen TX queues of one interface: one AF_PACKET
/// socket per queue, each marked with its queue, on an interface that
/// carries a [`sys::QueueSteering`] program.
///
/// Why: one AF_PACKET socket's frames get their TX queue from a hash of the
/// flow with a seed drawn at boot (`skb_tx_hash`), so two flows land on one
/// queue on about half of all machines, and "two queues" in a test then
/// means one. Other ways were weighed: `PACKET_QDISC_BYPASS` picks the
/// sending CPU's number (modulo the queues), which cannot reach four queues
/// on two CPUs; mqprio and tc's skbedit, which map a priority or a match to
/// a queue, are not built into this project's kernels; an AF_XDP socket
/// per queue sends on exactly its queue but skips the taps, so tcpdump on
/// the generator end (a test's independent record of what was sent) sees
/// nothing. The steering program keeps the plain path and only fixes the
/// queue. An interface with one queue needs no steering.
struct QueueSender {
    socks: Vec<sys::PacketSender>,
}

impl QueueSender {
    fn open(ifname: &str, steered: bool) -> io::Result<Self> {
        let queues = wiretape_capture::sys::rx_queue_count(ifname)?.max(1);
        if queues == 1 {
            return Ok(QueueSender {
                socks: vec![sys::PacketSender::open(ifname)?],
            });
        }
        if !steered {
            return Err(io::Error::other(format!(
                "{ifname} has {queues} queues but no queue-steering program: \
                 make multi-queue pairs with Testbed::create or Testbed::add_pair"
            )));
        }
        let socks = (0..queues)
            .map(|q| sys::PacketSender::open_on_queue(ifname, Some(q)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(QueueSender { socks })
    }

    fn queues(&self) -> usize {
        self.socks.len()
    }

    /// Sends `frame` on queue `q` (frames leave in the order given: each
    /// send is synchronous through the device).
    fn send(&self, q: usize, frame: &[u8]) -> io::Result<()> {
        self.socks[q].send(frame)
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
                per_queue: Vec::new(),
            })
        })
        .join()
        .map_err(|_| io::Error::other("sender thread panicked"))?
    }
}

impl Drop for Testbed {
    /// Removes the namespace (and the veth pairs in it): first whatever
    /// process a test left running in it, then `ip netns del`, retried
    /// while its file stays; a namespace that cannot be removed is named on
    /// stderr with `ip`'s reason (the suite's last check counts them).
    fn drop(&mut self) {
        if let Ok(pids) = run(Command::new("ip").args(["netns", "pids", &self.ns])) {
            for pid in pids.split_whitespace() {
                let _ = Command::new("kill")
                    .args(["-KILL", pid])
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let file = std::path::Path::new("/run/netns").join(&self.ns);
        let mut why = String::new();
        for _ in 0..20 {
            match run(Command::new("ip").args(["netns", "del", &self.ns])) {
                Ok(_) if !file.exists() => return,
                Ok(_) => why = format!("{} still exists", file.display()),
                Err(e) => why = e.to_string(),
            }
            if !file.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let line = format!("network namespace {} not removed: {why}", self.ns);
        eprintln!("testbed: {line}");
        log(&line);
    }
}

/// Appends a line naming the calling thread (a test's name under the test
/// harness, which hides a passing test's stderr) to the test bed's log,
/// `wiretape-testbed.log` in the temporary directory: what the suite shows
/// when a namespace was left behind.
fn log(line: &str) {
    use std::io::Write;
    let who = std::thread::current()
        .name()
        .unwrap_or("unnamed thread")
        .to_owned();
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(std::env::temp_dir().join("wiretape-testbed.log"))
    {
        let _ = writeln!(f, "{} {}: {line}", std::process::id(), who);
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
#[derive(Clone, Debug)]
pub struct SendReport {
    /// Frames sent.
    pub sent: u64,
    /// Their bytes.
    pub bytes: u64,
    /// How long sending took.
    pub elapsed: Duration,
    /// Frames sent on each TX queue of the generator end (= the capture
    /// end's RX queue of that number); empty for [`Testbed::send_timed`].
    pub per_queue: Vec<u64>,
}

impl SendReport {
    /// Fails, naming the queues, unless every queue in `need` got a frame:
    /// a test that asserts something of a queue's file checks first that
    /// the traffic reached that queue.
    pub fn require_queues(&self, need: std::ops::Range<usize>) -> io::Result<()> {
        let empty: Vec<usize> = need
            .clone()
            .filter(|&q| self.per_queue.get(q).copied().unwrap_or(0) == 0)
            .collect();
        if empty.is_empty() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "the test needs frames on queues {need:?}, but the sender put none on {empty:?} \
                 (frames per queue: {:?}): give it more flows",
                self.per_queue
            )))
        }
    }
}

/// Frame sizes by sequence number.
#[derive(Clone, Copy, Debug)]
pub enum SizeFn {
    /// Every frame this size.
    Fixed(usize),
    /// 60..=1514 bytes, spread over the range.
    Mixed,
    /// Even frames the first size, odd ones the second: sent with two
    /// flows on two queues, queue 0 gets the even ones, so one queue can
    /// carry most of the bytes (1500 and 160: 90 %).
    EvenOdd(usize, usize),
}

impl SizeFn {
    /// The size of frame `seq`.
    pub fn size(self, seq: u64) -> usize {
        match self {
            SizeFn::Fixed(n) => n.clamp(frames::MIN_LEN, 9000),
            SizeFn::Mixed => frames::mixed_size(seq),
            SizeFn::EvenOdd(even, odd) => {
                let n = if seq.is_multiple_of(2) { even } else { odd };
                n.clamp(frames::MIN_LEN, 9000)
            }
        }
    }
}
