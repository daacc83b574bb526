//! `wiretape demo`: the embedded default run. A veth pair in a private
//! network namespace, a known set of frames sent through it, recorded by the
//! real engine (XDP + AF_XDP), read back and checked byte for byte; then
//! everything is removed.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use wiretape::capture::{CaptureConfig, XdpMode};
use wiretape::files::{PcapReader, Record};
use wiretape::pipeline::summary::thousands;
use wiretape::timestamp::{format_rfc3339, realtime_ns};
use wiretape::{Event, Input, RecordConfig};
use wiretape_testbed::{frames, sys, SizeFn, Testbed, CAP_IF, GEN_IF};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Frames to send (sizes 60..1514, spread over flows and queues).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    count: u64,
    /// RX queues of the veth pair.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    queues: u32,
    /// Frames per second the sender offers.
    #[arg(long, default_value_t = 50_000)]
    rate: u64,
    /// XDP mode: auto, native or generic.
    #[arg(long, default_value = "auto", value_parser = ["auto", "native", "generic"])]
    xdp_mode: String,
    /// Keep the capture files in DIR (default: a temporary directory, removed).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

pub(crate) fn run(a: Args) -> Result<i32> {
    wiretape::pipeline::preflight::check_basic_rights()
        .context("the demo creates a network namespace and attaches XDP")?;
    let (dir, temp) = match &a.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("wiretape-demo-{}", std::process::id())),
            true,
        ),
    };
    let tb = Testbed::create("demo", a.queues)?;
    println!(
        "demo: network namespace {} with veth {GEN_IF} <-> {CAP_IF} ({} RX queues); sending {} frames of 60..1514 bytes at {} frames/s",
        tb.netns(),
        a.queues,
        thousands(a.count),
        thousands(a.rate)
    );
    let mut opts = RecordConfig::interface(CAP_IF, &dir);
    opts.stage.count = Some(a.count);
    let mut cap = CaptureConfig::new(CAP_IF);
    cap.xdp_mode = match a.xdp_mode.as_str() {
        "native" => Some(XdpMode::Native),
        "generic" => Some(XdpMode::Generic),
        _ => None,
    };
    opts.input = Input::Interface(cap);
    // A bound, in case frames go missing: the demo must always end.
    opts.duration = Some(Duration::from_secs_f64(
        10.0 + a.count as f64 / a.rate.max(1) as f64,
    ));
    let stop = AtomicBool::new(false);
    let t0 = realtime_ns();
    let mut why = String::new();
    let mut meter = wiretape::pipeline::ProgressMeter::new();
    let (rep, sent) = {
        let _inside = sys::NetnsGuard::enter(tb.netns())?;
        std::thread::scope(|s| -> Result<_> {
            let mut sender = None;
            let rep = wiretape::record(&opts, &stop, |ev| match ev {
                Event::Started(info) => {
                    println!(
                        "demo: {}",
                        wiretape::pipeline::StartLine::new(info, &opts, None)
                    );
                    let tb = &tb;
                    sender =
                        Some(s.spawn(move || tb.send(0..a.count, SizeFn::Mixed, 8, Some(a.rate))));
                }
                Event::Progress {
                    elapsed,
                    snapshot,
                    storage,
                } => eprintln!("{}", meter.line(elapsed, &snapshot, &storage)),
                Event::Stopping(w) => why = w.to_string(),
                Event::Notice(n) => println!("demo: {n}"),
                Event::Finished(_) => {}
            })?;
            let sent = match sender {
                Some(h) => h.join().map_err(|_| anyhow::anyhow!("sender panicked"))??,
                None => bail!("the capture never started"),
            };
            Ok((rep, sent))
        })?
    };
    let t1 = realtime_ns();
    let summary = wiretape::RunSummary::new(&rep, &opts, &why, &Default::default(), None);
    print!("{}", summary.text());

    // Read back what was recorded and check it against what was sent.
    let mut problems = Vec::new();
    let mut seen = vec![false; a.count as usize];
    let mut total = 0u64;
    let mut per_file = BTreeMap::new();
    let mut examples = Vec::new();
    for q in &rep.queues {
        for f in &q.sink.files {
            let mut r = PcapReader::open(f)?;
            let mut rec = Record::default();
            let mut last_ts = 0;
            let mut n = 0u64;
            while r.next_into(&mut rec)? {
                n += 1;
                if rec.ts_ns < last_ts {
                    problems.push(format!(
                        "{}: timestamps go backwards at record {n}",
                        f.display()
                    ));
                }
                if rec.ts_ns < t0 || rec.ts_ns > t1 {
                    problems.push(format!(
                        "{}: record {n} stamped {} outside the run",
                        f.display(),
                        format_rfc3339(rec.ts_ns)
                    ));
                }
                last_ts = rec.ts_ns;
                match frames::parse(&rec.data) {
                    Some((seq, len, flow))
                        if seq < a.count && rec.data == frames::build(seq, len, flow) =>
                    {
                        if std::mem::replace(&mut seen[seq as usize], true) {
                            problems.push(format!("frame {seq} recorded twice"));
                        }
                        if examples.len() < 5 {
                            examples.push((rec.ts_ns, q.queue, seq, len));
                        }
                    }
                    _ => problems.push(format!(
                        "{}: record {n} is not a frame the demo sent",
                        f.display()
                    )),
                }
            }
            total += n;
            per_file.insert(f.clone(), n);
        }
    }
    let missing = seen.iter().filter(|s| !**s).count();
    if missing > 0 {
        problems.push(format!("{missing} sent frames are not in the files"));
    }
    if !rep.identity_holds() {
        problems.push("accounting identity does not hold".into());
    }
    println!("demo: recorded files:");
    for (f, n) in &per_file {
        println!("  {:>8} frames  {}", thousands(*n), f.display());
    }
    println!("demo: first records:");
    examples.sort();
    for (ts, q, seq, len) in &examples {
        println!(
            "  {}  queue {q}  seq {seq:>6}  {len:>5} bytes",
            format_rfc3339(*ts)
        );
    }
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    problems.truncate(10);
    if problems.is_empty() && total == sent.sent {
        println!(
            "demo: OK: sent {} frames ({} bytes); recorded {} in {} files, every one byte-identical, timestamps in order; seen = written + drops{}",
            thousands(sent.sent),
            thousands(sent.bytes),
            thousands(total),
            per_file.len(),
            if temp { String::new() } else { format!("; files kept in {}", dir.display()) }
        );
        Ok(0)
    } else {
        println!(
            "demo: FAILED: sent {}, recorded {total}: {}",
            sent.sent,
            problems.join("; ")
        );
        Ok(1)
    }
}
