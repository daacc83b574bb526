//! `wiretape replay` and `wiretape gen`: AF_XDP transmit, paced
//! (`wiretape::pipeline::send` around `capture::tx::transmit`): the flags,
//! the signals and the lines.

use anyhow::{bail, Result};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use wiretape::capture::tx::{self, GenSize, GenSource, Speed, TxConfig, TxReport};
use wiretape::pipeline::send::{self, SendMeter, SendSummary};

/// Options both commands share.
#[derive(clap::Args)]
pub(crate) struct TxArgs {
    /// Interface to send on.
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    iface: String,
    /// TX queue (AF_XDP binds one queue).
    #[arg(long, value_name = "Q", default_value_t = 0)]
    queue: u32,
    /// Frames handed to the kernel per wake-up.
    #[arg(long, value_name = "N", default_value_t = 64)]
    batch: usize,
    /// Pin the sending thread to this CPU.
    #[arg(long, value_name = "CPU")]
    cpu: Option<usize>,
    /// Print the report as JSON on stdout (fields: sent, failed, too_long,
    /// device_dropped, bytes, duration_s, pps, gbps, max_late_us, mode).
    #[arg(long)]
    json: bool,
    /// No progress line.
    #[arg(short = 'q', long)]
    quiet: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  wiretape replay trace.pcap -i eth1                   # at the trace's own pace\n  \
wiretape replay trace.pcapng -i eth1 --speed max --loop 10\n  \
wiretape replay trace.pcap -i eth1 --speed 5gbit\n  \
wiretape replay trace.pcap -i eth1 --speed 250000     # frames per second\n\n\
Needs root (or CAP_NET_RAW, CAP_IPC_LOCK). Copy mode on veth; zero-copy where the driver has it (--zero-copy)."
)]
pub(crate) struct ReplayArgs {
    /// Capture file: pcap (ns or µs, either byte order) or pcapng.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    tx: TxArgs,
    /// original (the trace's gaps; `2x` twice as fast), max, a frame rate
    /// (250000), or a bit rate on the wire (5gbit, 200mbit).
    #[arg(long, value_name = "SPEED", default_value = "original")]
    speed: Speed,
    /// Send the file N times over (the next pass starts right after the last frame).
    #[arg(long = "loop", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    loops: u64,
    /// Try zero-copy (needs driver support; veth has none).
    #[arg(long)]
    zero_copy: bool,
}

#[derive(clap::Args)]
#[command(
    after_help = "Frames: Ethernet/IPv4/UDP 198.18.0.1 -> 198.18.0.2 (the benchmarking range), \
to a MAC that is nobody's; the payload carries the magic WTAP, a sequence number, the frame length, \
the flow, and the UTC time the frame was handed to the kernel (frames >= 64 bytes), so a recording \
of it shows every loss and each frame's one-way delay.\n\nExamples:\n  wiretape gen -i eth1 --size 64 --count 10000000\n  \
wiretape gen -i eth1 --size imix --count 1000000 --rate 100000 --flows 16"
)]
pub(crate) struct GenArgs {
    #[command(flatten)]
    tx: TxArgs,
    /// Frame size in bytes without FCS (60..4000), or imix (7 x 64, 4 x 576, 1 x 1514).
    #[arg(long, value_name = "N|imix", default_value = "64")]
    size: GenSize,
    /// Frames to send.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: u64,
    /// Frames per second (default: as fast as possible).
    #[arg(long, value_name = "PPS")]
    rate: Option<f64>,
    /// Distinct flows (UDP source ports 10000..10000+F), round robin.
    #[arg(long, value_name = "F", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    flows: u16,
}

fn common(a: &TxArgs) -> Result<TxConfig> {
    let mut c = send::tx_config(&a.iface)?;
    c.queue = a.queue;
    c.batch = a.batch;
    c.cpu = a.cpu;
    Ok(c)
}

fn run_tx(a: &TxArgs, cfg: &TxConfig, src: &mut dyn tx::Source, what: &str) -> Result<TxReport> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    if !a.quiet {
        eprintln!(
            "wiretape: sending {what} on {} queue {} ({:?})",
            cfg.ifname, cfg.queue, cfg.speed
        );
    }
    let mut meter = SendMeter::new();
    let rep = tx::transmit(cfg, src, &stop, |sent, bytes, el| {
        if !a.quiet {
            eprintln!("{}", meter.line(sent, bytes, el));
        }
    })?;
    Ok(rep)
}

fn print_report(a: &TxArgs, s: &SendSummary) {
    if a.json {
        println!("{}", s.to_json());
    }
    for l in s.lines() {
        eprintln!("wiretape: {l}");
    }
}

pub(crate) fn replay(a: ReplayArgs) -> Result<i32> {
    let mut src = send::open_replay(&a.file, a.loops)?;
    let mut cfg = common(&a.tx)?;
    cfg.speed = a.speed;
    cfg.zero_copy = a.zero_copy;
    let r = run_tx(&a.tx, &cfg, &mut src, &a.file.display().to_string())?;
    print_report(&a.tx, &SendSummary::replay(&r, &src, a.loops));
    if let Some(e) = src.error {
        bail!("{e} (every frame before it was sent)");
    }
    Ok(i32::from(r.failed > 0))
}

pub(crate) fn gen(a: GenArgs) -> Result<i32> {
    // Usage first (exit 2), then the interface and the rights.
    let speed = match a.rate {
        Some(r) if r > 0.0 && r.is_finite() => Speed::Pps(r),
        Some(r) => {
            return Err(crate::usage(format!(
                "--rate {r}: give a positive number of frames per second"
            )))
        }
        None => Speed::Max,
    };
    let mut cfg = common(&a.tx)?;
    cfg.speed = speed;
    let mut src = GenSource::new(a.size, a.count, a.flows);
    let what = format!("{} frames of size {:?}, {} flows", a.count, a.size, a.flows);
    let r = run_tx(&a.tx, &cfg, &mut src, &what)?;
    print_report(&a.tx, &SendSummary::gen(&r, a.count));
    Ok(i32::from(r.failed > 0))
}
