//! `wiretape tsbench`: how accurate each timestamping mode is, measured
//! against ground truth in a link + poller simulation that runs the real
//! stamping code (wiretape::timestamp::sim).

use anyhow::Result;
use std::fmt::Write as _;
use std::path::PathBuf;
use wiretape::timestamp::sim::{self, Accuracy, Pattern, Poller};
use wiretape::timestamp::TsMode;

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

fn us(ns: f64) -> String {
    if ns.abs() >= 1000.0 {
        format!("{:.2} µs", ns / 1000.0)
    } else {
        format!("{ns:.1} ns")
    }
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
            let these: Vec<&Accuracy> = rows.iter().filter(|r| r.pattern == p).collect();
            let best = these.iter().map(|r| r.std).fold(f64::INFINITY, f64::min);
            for r in these {
                println!(
                    "{:<18} {:<7} {:>24} {:>12}  {}",
                    p.name(),
                    r.mode.name(),
                    format!("{} ± {}", us(r.mean), us(r.std)),
                    us(r.p99_abs),
                    if r.std == best { "*" } else { "" }
                );
            }
        }
    }
    if a.live {
        live(&a)?;
    }
    if let Some(path) = &a.svg {
        std::fs::write(path, svg(&rows))?;
        eprintln!("tsbench: chart written to {}", path.display());
    }
    Ok(0)
}

/// A grouped bar chart: one group per pattern, one bar per mode, std-dev on a log axis.
fn svg(rows: &[Accuracy]) -> String {
    let modes = TsMode::POLLER;
    let colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"];
    let (w, h, left, top, bottom) = (900.0, 420.0, 70.0, 40.0, 60.0);
    let plot_h = h - top - bottom;
    let lo = 1.0f64.log10(); // 1 ns
    let hi = rows
        .iter()
        .map(|r| r.std.max(1.0))
        .fold(10.0f64, f64::max)
        .log10()
        .ceil();
    let y = |v: f64| top + plot_h * (1.0 - (v.max(1.0).log10() - lo) / (hi - lo));
    let group_w = (w - left - 20.0) / Pattern::ALL.len() as f64;
    let bar_w = group_w * 0.8 / modes.len() as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{left}" y="20" font-size="14">Timestamp inter-arrival error (std-dev, log scale) by mode — wiretape tsbench</text>"#
    );
    let mut e = 0.0;
    while e <= hi {
        let v = 10f64.powf(e);
        let yy = y(v);
        let label = if v >= 1000.0 {
            format!("{} µs", v / 1000.0)
        } else {
            format!("{v} ns")
        };
        let _ = write!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{yy}" y2="{yy}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{label}</text>"##,
            w - 20.0,
            left - 5.0,
            yy + 4.0
        );
        e += 1.0;
    }
    for (gi, p) in Pattern::ALL.iter().enumerate() {
        let gx = left + gi as f64 * group_w + group_w * 0.1;
        for (mi, m) in modes.iter().enumerate() {
            if let Some(r) = rows.iter().find(|r| r.pattern == *p && r.mode == *m) {
                let x = gx + mi as f64 * bar_w;
                let yy = y(r.std);
                let _ = write!(
                    s,
                    r#"<rect x="{x:.1}" y="{yy:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{} {}: {:.1} ns</title></rect>"#,
                    bar_w * 0.9,
                    top + plot_h - yy,
                    colors[mi],
                    p.name(),
                    m.name(),
                    r.std
                );
            }
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{}</text>"#,
            gx + group_w * 0.4,
            h - bottom + 18.0,
            p.name()
        );
    }
    for (mi, m) in modes.iter().enumerate() {
        let x = left + mi as f64 * 110.0;
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{}" width="12" height="12" fill="{}"/><text x="{}" y="{}">{}</text>"#,
            h - 22.0,
            colors[mi],
            x + 16.0,
            h - 12.0,
            m.name()
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The live measurement on a veth pair; prints a table.
fn live(a: &Args) -> Result<()> {
    use std::sync::atomic::AtomicBool;
    use wiretape::files::{PcapReader, Record};
    use wiretape_testbed::{frames, Testbed, CAP_IF};
    wiretape::pipeline::preflight::check_basic_rights()?;
    let tb = Testbed::create("tsb", 1)?;
    println!(
        "\nlive on veth ({} frames of {} B at {} frames/s per mode, poll sleep {} us):",
        a.live_frames, a.size, a.rate, a.poll_sleep_us
    );
    println!(
        "{:<8} {:>26} {:>12} {:>12} {:>8}",
        "mode", "mean ± std-dev", "p50 |err|", "p99 |err|", "frames"
    );
    // Every mode that stamps (off has nothing to measure).
    for mode in TsMode::ALL.into_iter().filter(|m| *m != TsMode::Off) {
        let dir = std::env::temp_dir().join(format!(
            "wiretape-tsbench-{}-{}",
            std::process::id(),
            mode.name()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut opts = wiretape::RecordConfig::interface(CAP_IF, &dir);
        opts.stage.count = Some(a.live_frames);
        opts.ts = mode;
        opts.stage.idle_sleep = std::time::Duration::from_micros(a.poll_sleep_us.max(1));
        // Sender on the first CPU, capture threads on the last: on a small
        // machine a preempted sender (its send time is taken before its
        // syscall) would otherwise dominate the error.
        let cpus = wiretape::capture::sys::allowed_cpus();
        let (send_cpu, cap_cpu) = (cpus.first().copied(), cpus.last().copied());
        let mut cap = wiretape::capture::CaptureConfig::new(CAP_IF);
        cap.cpus = cap_cpu.map(|c| vec![c]);
        opts.input = wiretape::Input::Interface(cap);
        opts.duration = Some(std::time::Duration::from_secs_f64(
            10.0 + a.live_frames as f64 / a.rate as f64,
        ));
        let stop = AtomicBool::new(false);
        let rep = {
            let _inside = wiretape_testbed::sys::NetnsGuard::enter(tb.netns())?;
            std::thread::scope(|s| -> Result<_> {
                let mut h = None;
                let rep = wiretape::record(&opts, &stop, |ev| {
                    if let wiretape::Event::Started(_) = ev {
                        let tb = &tb;
                        h =
                            Some(s.spawn(move || {
                                tb.send_timed(a.live_frames, a.size, a.rate, send_cpu)
                            }));
                    }
                })?;
                if let Some(h) = h {
                    h.join().map_err(|_| anyhow::anyhow!("sender panicked"))??;
                }
                Ok(rep)
            })?
        };
        let mut pts: Vec<(u64, u64, u64)> = Vec::new();
        let mut rec = Record::default();
        for f in rep.queues.iter().flat_map(|q| q.sink.files.iter()) {
            let mut r = PcapReader::open(f)?;
            while r.next_into(&mut rec)? {
                if let Some((seq, sent)) = frames::parse_timed(&rec.data) {
                    pts.push((seq, sent, rec.ts_ns));
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        pts.sort();
        let errs: Vec<f64> = pts
            .windows(2)
            .filter(|w| w[1].0 == w[0].0 + 1)
            .map(|w| (w[1].2 as f64 - w[0].2 as f64) - (w[1].1 as f64 - w[0].1 as f64))
            .collect();
        let n = errs.len().max(1) as f64;
        let mean = errs.iter().sum::<f64>() / n;
        let std = (errs.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / n).sqrt();
        let mut abs = wiretape::timestamp::hist::values();
        for e in &errs {
            abs.saturating_record(e.abs().round() as u64);
        }
        let p99 = wiretape::timestamp::hist::quantile(&abs, 0.99) as f64;
        let p50 = wiretape::timestamp::hist::quantile(&abs, 0.5) as f64;
        let label = if mode == TsMode::Hw && rep.queues.iter().all(|q| q.stamps.hw == 0) {
            "hw(=xdp)".to_string()
        } else {
            mode.name().to_string()
        };
        println!(
            "{:<8} {:>26} {:>12} {:>12} {:>8}",
            label,
            format!("{} ± {}", us(mean), us(std)),
            us(p50),
            us(p99),
            pts.len()
        );
    }
    Ok(())
}
