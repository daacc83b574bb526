//! `wiretape index`: (re)builds missing or outdated `.idx` sidecars (block
//! times and flow sets) with a progress bar, and exports the block index of
//! a store as a Parquet table for fleet-wide queries (`--parquet`).

use crate::report::{bytes_h, thousands};
use anyhow::{anyhow, bail, Context, Result};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wiretape::storage::block::DEFAULT_BLOCK_SIZE;
use wiretape::storage::index::{self, Entry, FlowSet};
use wiretape::storage::naming;

#[derive(clap::Args)]
#[command(
    after_help = "An index is rebuilt when it is missing, unreadable, of an older format \
(no flow sets) or older than its capture file; --force rebuilds every one. Files being written \
are left to their writer (its index grows as blocks go out). In a directory only files named like \
wiretape's are indexed; a file named on the command line is indexed whatever its name.\n\n\
--parquet writes one row per block: node, file, iface, queue, block, offset, bytes, frames, \
first_ns, last_ns, first_time, last_time, and the flow keys ether_types, vlans, protos, ip4, ip6, \
ports (lists; NULL when the block held too many of that kind to list, or its index has no flow \
sets: such a block may hold anything). Every sensor writes its own table to a shared place; one \
SQL query over all of them says which sensors and files hold what:\n\n  \
SELECT node, file, offset FROM 'idx/*.parquet'\n   \
WHERE last_ns >= 1763820120000000000 AND first_ns < 1763820300000000000\n     \
AND (ip4 IS NULL OR list_contains(ip4, '10.1.2.3'))\n\n\
Examples:\n  \
wiretape index /data\n  \
wiretape index --force /data/wiretape-eth0-q0-20261122T140200.000000000Z.pcap\n  \
wiretape index --parquet /shared/idx/$(hostname).parquet /data"
)]
pub struct Args {
    /// Directories and capture files.
    #[arg(value_name = "DIR|FILE", required = true)]
    inputs: Vec<PathBuf>,
    /// Rebuild every index, up to date or not.
    #[arg(long)]
    force: bool,
    /// Also write the block index of all inputs as a Parquet table to OUT.
    #[arg(long, value_name = "OUT.parquet")]
    parquet: Option<PathBuf>,
    /// The node (sensor) name in the Parquet table. Default: the host name.
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
    /// In directories, only files of this prefix (default: any of ours).
    #[arg(long, value_name = "PREFIX")]
    prefix: Option<String>,
    /// A JSON summary on stdout.
    #[arg(long)]
    json: bool,
    /// No progress and no summary on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
}

/// What happened to one file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Outcome {
    UpToDate,
    Rebuilt,
    BeingWritten,
    Failed,
}

/// Why an index must be rebuilt, or None when it is current.
fn stale(capture: &Path, force: bool) -> Option<&'static str> {
    let ip = index::path_for(capture);
    let (Ok(cm), Ok(im)) = (std::fs::metadata(capture), std::fs::metadata(&ip)) else {
        return Some("missing");
    };
    if force {
        return Some("forced");
    }
    match index::version(&ip) {
        Ok(2) => {}
        Ok(_) => return Some("old format, no flow sets"),
        Err(_) => return Some("unreadable"),
    }
    match index::read(&ip) {
        Err(_) => return Some("unreadable"),
        Ok(es) if es.iter().any(|e| e.flows.is_none()) => return Some("no flow sets"),
        Ok(_) => {}
    }
    match (cm.modified(), im.modified()) {
        (Ok(c), Ok(i)) if i < c => Some("older than its capture"),
        _ => None,
    }
}

/// The capture files of `inputs`: our files in directories, any named file.
fn captures(inputs: &[PathBuf], prefix: Option<&str>) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in inputs {
        let m = std::fs::metadata(p).with_context(|| format!("{}", p.display()))?;
        if m.is_dir() {
            out.extend(
                naming::list_any(p, prefix).with_context(|| format!("reading {}", p.display()))?,
            );
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

fn being_written(p: &Path) -> bool {
    std::fs::File::open(p).is_ok_and(|f| wiretape::storage::is_being_written(&f))
}

/// A progress bar on stderr: redrawn at most 5 times a second on a
/// terminal, a line every 10 s otherwise.
struct Bar {
    total: u64,
    done: u64,
    start: Instant,
    last: Instant,
    tty: bool,
    quiet: bool,
    files: (usize, usize),
}

impl Bar {
    fn show(&mut self, now_in_file: u64, force: bool) {
        if self.quiet {
            return;
        }
        let every = if self.tty {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(10)
        };
        if !force && self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        let done = self.done + now_in_file;
        let secs = self.start.elapsed().as_secs_f64().max(1e-3);
        let rate = done as f64 / secs;
        let frac = if self.total == 0 {
            1.0
        } else {
            (done as f64 / self.total as f64).min(1.0)
        };
        let eta = if rate > 0.0 {
            (self.total.saturating_sub(done)) as f64 / rate
        } else {
            0.0
        };
        let w = 30;
        let fill = (frac * w as f64) as usize;
        let line = format!(
            "[{}{}] {:>3.0}% {} of {}, {}/s, ETA {:.0} s, file {} of {}",
            "#".repeat(fill),
            " ".repeat(w - fill),
            frac * 100.0,
            bytes_h(done),
            bytes_h(self.total),
            bytes_h(rate as u64),
            eta,
            self.files.0,
            self.files.1
        );
        if self.tty {
            eprint!("\r{line}\x1b[K");
        } else {
            eprintln!("wiretape: index: {line}");
        }
    }
}

pub fn run(a: Args) -> Result<i32> {
    let files = captures(&a.inputs, a.prefix.as_deref())?;
    if let Some(out) = &a.parquet {
        if out.is_dir() {
            bail!(
                "--parquet {} is a directory: give a file name, e.g. {}/$(hostname).parquet",
                out.display(),
                out.display()
            );
        }
    }
    let started = Instant::now();
    let mut todo = Vec::new();
    let mut outcomes = Vec::new();
    for f in &files {
        if being_written(f) {
            outcomes.push((f.clone(), Outcome::BeingWritten, None));
        } else if let Some(why) = stale(f, a.force) {
            todo.push((f.clone(), why));
        } else {
            outcomes.push((f.clone(), Outcome::UpToDate, None));
        }
    }
    let total: u64 = todo
        .iter()
        .map(|(f, _)| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let mut bar = Bar {
        total,
        done: 0,
        start: Instant::now(),
        last: Instant::now() - Duration::from_secs(60),
        tty: std::io::stderr().is_terminal(),
        quiet: a.quiet || todo.is_empty(),
        files: (0, todo.len()),
    };
    let mut failed = 0;
    let mut entries = 0u64;
    for (i, (f, why)) in todo.iter().enumerate() {
        bar.files.0 = i + 1;
        let len = std::fs::metadata(f).map_or(0, |m| m.len());
        let r = index::rebuild_with(f, DEFAULT_BLOCK_SIZE as u64, &mut |at| bar.show(at, false));
        bar.done += len;
        match r {
            Ok(n) => {
                entries += n;
                outcomes.push((f.clone(), Outcome::Rebuilt, Some(why.to_string())));
            }
            Err(e) => {
                failed += 1;
                if bar.tty && !bar.quiet {
                    eprintln!();
                }
                eprintln!("wiretape: index: {}: {e}", f.display());
                outcomes.push((f.clone(), Outcome::Failed, Some(e.to_string())));
            }
        }
    }
    bar.show(0, true);
    if bar.tty && !bar.quiet {
        eprintln!();
    }
    let count = |o: Outcome| outcomes.iter().filter(|x| x.1 == o).count();
    let mut rows = 0;
    if let Some(out) = &a.parquet {
        let node = match &a.node {
            Some(n) => n.clone(),
            None => hostname(),
        };
        rows = write_parquet(out, &node, &files)?;
    }
    let secs = started.elapsed().as_secs_f64();
    if a.json {
        let j = serde_json::json!({
            "files": files.len(),
            "rebuilt": count(Outcome::Rebuilt),
            "up_to_date": count(Outcome::UpToDate),
            "being_written": count(Outcome::BeingWritten),
            "failed": count(Outcome::Failed),
            "entries_written": entries,
            "bytes_read": total,
            "seconds": secs,
            "parquet": a.parquet.as_ref().map(|p| p.display().to_string()),
            "parquet_rows": rows,
            "details": outcomes.iter().filter(|o| o.1 != Outcome::UpToDate).map(|(f, o, why)| serde_json::json!({
                "file": f.display().to_string(),
                "outcome": format!("{o:?}").to_lowercase(),
                "why": why,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string(&j)?);
    } else if !a.quiet {
        eprintln!(
            "wiretape: index: {} files: {} rebuilt ({} read in {:.1} s), {} up to date, {} being \
             written (left to their writer), {} failed{}",
            files.len(),
            count(Outcome::Rebuilt),
            bytes_h(total),
            secs,
            count(Outcome::UpToDate),
            count(Outcome::BeingWritten),
            failed,
            a.parquet
                .as_ref()
                .map(|p| format!("; {} blocks to {}", thousands(rows as u64), p.display()))
                .unwrap_or_default()
        );
    }
    Ok(i32::from(failed > 0))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// One row per indexed block of `files` into a Parquet file at `out`
/// (written to a temporary name, then renamed: readers never see half a
/// table). Returns the rows.
fn write_parquet(out: &Path, node: &str, files: &[PathBuf]) -> Result<usize> {
    use arrow_array::builder::{
        Int32Builder, Int64Builder, ListBuilder, StringBuilder, TimestampNanosecondBuilder,
    };
    use arrow_array::{ArrayRef, RecordBatch};
    use arrow_schema::{DataType, Field, Schema, TimeUnit};

    let list = |name: &str, item: DataType| {
        Field::new(
            name,
            DataType::List(Arc::new(Field::new("item", item, true))),
            true,
        )
    };
    let ts = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
    let schema = Arc::new(Schema::new(vec![
        Field::new("node", DataType::Utf8, false),
        Field::new("file", DataType::Utf8, false),
        Field::new("iface", DataType::Utf8, true),
        Field::new("queue", DataType::Int32, true),
        Field::new("block", DataType::Int32, false),
        Field::new("offset", DataType::Int64, false),
        Field::new("bytes", DataType::Int64, false),
        Field::new("frames", DataType::Int64, false),
        Field::new("first_ns", DataType::Int64, false),
        Field::new("last_ns", DataType::Int64, false),
        Field::new("first_time", ts.clone(), false),
        Field::new("last_time", ts.clone(), false),
        list("ether_types", DataType::Int32),
        list("vlans", DataType::Int32),
        list("protos", DataType::Int32),
        list("ip4", DataType::Utf8),
        list("ip6", DataType::Utf8),
        list("ports", DataType::Int32),
    ]));
    let mut node_b = StringBuilder::new();
    let mut file_b = StringBuilder::new();
    let mut iface_b = StringBuilder::new();
    let mut queue_b = Int32Builder::new();
    let mut block_b = Int32Builder::new();
    let mut off_b = Int64Builder::new();
    let mut bytes_b = Int64Builder::new();
    let mut frames_b = Int64Builder::new();
    let mut first_b = Int64Builder::new();
    let mut last_b = Int64Builder::new();
    let mut first_t = TimestampNanosecondBuilder::new().with_timezone("UTC");
    let mut last_t = TimestampNanosecondBuilder::new().with_timezone("UTC");
    let mut eth_b = ListBuilder::new(Int32Builder::new());
    let mut vlan_b = ListBuilder::new(Int32Builder::new());
    let mut proto_b = ListBuilder::new(Int32Builder::new());
    let mut ip4_b = ListBuilder::new(StringBuilder::new());
    let mut ip6_b = ListBuilder::new(StringBuilder::new());
    let mut port_b = ListBuilder::new(Int32Builder::new());
    let mut rows = 0usize;
    for f in files {
        let ip = index::path_for(f);
        let entries: Vec<Entry> = match index::read(&ip) {
            Ok(e) => e,
            Err(e) => {
                eprintln!(
                    "wiretape: index: {}: no usable index ({e}): not in the table",
                    f.display()
                );
                continue;
            }
        };
        let abs = std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let parsed = naming::parse_any(name);
        // The interface: the series without its prefix and queue.
        let iface = parsed.as_ref().and_then(|p| {
            p.series
                .rsplit_once('-')
                .and_then(|(head, _)| head.split_once('-'))
                .map(|(_, i)| i.to_string())
        });
        let len = std::fs::metadata(f).map_or(0, |m| m.len());
        for (i, e) in entries.iter().enumerate() {
            let end = entries.get(i + 1).map_or(len, |n| n.offset);
            node_b.append_value(node);
            file_b.append_value(abs.display().to_string());
            iface_b.append_option(iface.as_deref());
            queue_b.append_option(parsed.as_ref().map(|p| p.queue as i32));
            block_b.append_value(i as i32);
            off_b.append_value(e.offset as i64);
            bytes_b.append_value(end.saturating_sub(e.offset) as i64);
            frames_b.append_value(e.count as i64);
            first_b.append_value(e.first_ns as i64);
            last_b.append_value(e.last_ns as i64);
            first_t.append_value(e.first_ns as i64);
            last_t.append_value(e.last_ns as i64);
            let any = FlowSet::anything();
            let fs = e.flows.as_ref().unwrap_or(&any);
            let ints =
                |b: &mut ListBuilder<Int32Builder>, any: bool, v: &mut dyn Iterator<Item = i32>| {
                    if any {
                        b.append_null();
                    } else {
                        v.for_each(|x| b.values().append_value(x));
                        b.append(true);
                    }
                };
            ints(
                &mut eth_b,
                fs.any[0],
                &mut fs.ether_types.iter().map(|&x| x as i32),
            );
            ints(
                &mut vlan_b,
                fs.any[1],
                &mut fs.vlans.iter().map(|&x| x as i32),
            );
            ints(
                &mut proto_b,
                fs.any[2],
                &mut fs.protos.iter().map(|&x| x as i32),
            );
            if fs.any[3] {
                ip4_b.append_null();
            } else {
                fs.ip4.iter().for_each(|&a| {
                    ip4_b
                        .values()
                        .append_value(std::net::Ipv4Addr::from(a).to_string())
                });
                ip4_b.append(true);
            }
            if fs.any[4] {
                ip6_b.append_null();
            } else {
                fs.ip6.iter().for_each(|&a| {
                    ip6_b
                        .values()
                        .append_value(std::net::Ipv6Addr::from(a).to_string())
                });
                ip6_b.append(true);
            }
            ints(
                &mut port_b,
                fs.any[5],
                &mut fs.ports.iter().map(|&x| x as i32),
            );
            rows += 1;
        }
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(node_b.finish()),
        Arc::new(file_b.finish()),
        Arc::new(iface_b.finish()),
        Arc::new(queue_b.finish()),
        Arc::new(block_b.finish()),
        Arc::new(off_b.finish()),
        Arc::new(bytes_b.finish()),
        Arc::new(frames_b.finish()),
        Arc::new(first_b.finish()),
        Arc::new(last_b.finish()),
        Arc::new(first_t.finish()),
        Arc::new(last_t.finish()),
        Arc::new(eth_b.finish()),
        Arc::new(vlan_b.finish()),
        Arc::new(proto_b.finish()),
        Arc::new(ip4_b.finish()),
        Arc::new(ip6_b.finish()),
        Arc::new(port_b.finish()),
    ];
    let batch = RecordBatch::try_new(schema.clone(), cols).map_err(|e| anyhow!("{e}"))?;
    let tmp = {
        let mut s = out.as_os_str().to_owned();
        s.push(".tmp");
        PathBuf::from(s)
    };
    let file =
        std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, None)
        .map_err(|e| anyhow!("{}: {e}", out.display()))?;
    w.write(&batch)
        .and_then(|_| w.close().map(|_| ()))
        .map_err(|e| anyhow!("{}: {e}", out.display()))?;
    std::fs::rename(&tmp, out).with_context(|| format!("cannot write {}", out.display()))?;
    Ok(rows)
}
