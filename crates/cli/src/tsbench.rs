//! `wiretape tsbench`: how accurate each timestamping mode is, measured
//! against ground truth in a link + poller simulation that runs the real
//! stamping code (wiretape::timestamp::sim).

use anyhow::Result;
use std::path::PathBuf;
use wiretape::timestamp::sim::{self, ns_text, Pattern, Poller};

#[derive(clap::Args)]
#[command(
    after_help = "Link: 10 Gbit/s Ethernet (preamble and inter-frame gap included). Poller: sleeps \
INTERVAL ± JITTER when its ring is dry, takes up to BATCH frames, spends PER-FRAME ns + 0.1 ns/byte on each. \
Error: (stamp gap) − (true gap) between consecutive frames; the table gives its mean ± std-dev and the \
99th percentile of its absolute value."
)]
pub(crate) struct Args {
    /// Frames per pattern.
    #[arg(long, default_value_t = 200_000)]
    frames: usize,
    /// Most frames per poll.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Poller sleep when idle, µs.
    #[arg(long, default_value_t = 10.0)]
    interval_us: f64,
    /// Uniform jitter on the sleep, ± µs.
    #[arg(long, default_value_t = 2.0)]
    jitter_us: f64,
    /// Handling time per frame, ns.
    #[arg(long, default_value_t = 25.0)]
    per_frame_ns: f64,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Write a bar chart (std-dev per mode and pattern, log scale) as SVG.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Print JSON rows instead of the table.
    #[arg(long)]
    json: bool,
    /// Also measure on a real veth pair (root): a sender paces frames at
    /// --rate with its send time in each, recorded once per mode in this run;
    /// error = (stamp gap) − (send gap).
    #[arg(long)]
    live: bool,
    /// Frames per mode in the live run.
    #[arg(long, default_value_t = 20_000)]
    live_frames: u64,
    /// Frames per second the live sender offers.
    #[arg(long, default_value_t = 100_000)]
    rate: u64,
    /// Frame size of the live run.
    #[arg(long, default_value_t = 1000)]
    size: usize,
    /// The live run's poll sleep (µs): kpt, batch and hybrid stamps depend on
    /// how often the poller looks (record's --poll-sleep-us, default 1000).
    #[arg(long, default_value_t = 1000)]
    poll_sleep_us: u64,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let poller = Poller {
        interval_ns: a.interval_us * 1000.0,
        jitter_ns: a.jitter_us * 1000.0,
        batch: a.batch.max(1),
        per_frame_ns: a.per_frame_ns,
        per_byte_ns: 0.1,
    };
    let rows = sim::run_all(a.frames.max(10), &poller, a.seed);
    if a.json {
        for r in &rows {
            println!(
                "{}",
                serde_json::json!({"pattern": r.pattern.name(), "mode": r.mode.name(), "mean_ns": r.mean,
                    "std_ns": r.std, "p99_abs_ns": r.p99_abs, "frames": r.frames})
            );
        }
    } else {
        println!(
            "inter-arrival error by mode ({} frames per pattern; poller: batch {}, sleep {} ± {} µs, {} ns/frame)",
            a.frames, poller.batch, a.interval_us, a.jitter_us, a.per_frame_ns
        );
        println!(
            "{:<18} {:<7} {:>24} {:>12}  best",
            "pattern", "mode", "mean ± std-dev", "p99 |err|"
        );
        for p in Pattern::ALL {
            let best = sim::best_std(&rows, p);
            for r in rows.iter().filter(|r| r.pattern == p) {
                println!(
                    "{:<18} {:<7} {:>24} {:>12}  {}",
                    p.name(),
                    r.mode.name(),
                    format!("{} ± {}", ns_text(r.mean), ns_text(r.std)),
                    ns_text(r.p99_abs),
                    if r.std == best { "*" } else { "" }
                );
            }
        }
    }
    if a.live {
        live(&a)?;
    }
    if let Some(path) = &a.svg {
        std::fs::write(path, sim::chart_svg(&rows))?;
        eprintln!("tsbench: chart written to {}", path.display());
    }
    Ok(0)
}

/// The live measurement on a veth pair (wiretape_testbed::stamps); prints a table.
fn live(a: &Args) -> Result<()> {
    use wiretape_testbed::stamps::{LiveBench, LiveConfig};
    let mut cfg = LiveConfig::default();
    cfg.frames = a.live_frames;
    cfg.size = a.size;
    cfg.rate = a.rate;
    cfg.poll_sleep = std::time::Duration::from_micros(a.poll_sleep_us);
    let bench = LiveBench::create(cfg)?;
    println!(
        "\nlive on veth ({} frames of {} B at {} frames/s per mode, poll sleep {} us):",
        a.live_frames, a.size, a.rate, a.poll_sleep_us
    );
    println!(
        "{:<8} {:>26} {:>12} {:>12} {:>8}",
        "mode", "mean ± std-dev", "p50 |err|", "p99 |err|", "frames"
    );
    for mode in LiveBench::modes() {
        let r = bench.measure(mode)?;
        println!(
            "{:<8} {:>26} {:>12} {:>12} {:>8}",
            r.label(),
            format!("{} ± {}", ns_text(r.error.mean), ns_text(r.error.std)),
            ns_text(r.error.p50_abs),
            ns_text(r.error.p99_abs),
            r.frames
        );
    }
    Ok(())
}
