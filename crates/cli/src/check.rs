//! `wiretape record ... --check`: everything a recording would check or
//! trip on, without recording: the interface and its queues, the CPUs (as
//! parsed), the rights (each capability, the locked-memory limit), an XDP
//! program already attached, the capture filter (compiled by libpcap, then
//! the steering program and the filter program loaded into the kernel, so
//! the verifier has its say, and dropped: nothing is attached), the output
//! directory (writable, or creatable), O_DIRECT, free space, the metrics
//! address. Exit 0 with one line saying what was checked, or the first
//! problem as the error line a real run would print.

use anyhow::{bail, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use wiretape::capture::{sys, CaptureFilter};
use wiretape::{Input, RecordConfig};

/// Runs the checks (see the module docs).
pub(crate) fn run(opts: &RecordConfig, metrics: Option<SocketAddr>) -> Result<i32> {
    let mut ok: Vec<String> = Vec::new();
    let ethernet_filter = || match &opts.filter {
        Some(e) => {
            CaptureFilter::compile(e, wiretape::filter::LINKTYPE_ETHERNET, opts.storage.snaplen)
                .map(Some)
        }
        None => Ok(None),
    };
    match &opts.input {
        Input::Interface(_) | Input::Interfaces(_) => {
            let list: Vec<&wiretape::capture::CaptureConfig> = match &opts.input {
                Input::Interface(c) => vec![c],
                Input::Interfaces(l) => l.iter().collect(),
                _ => unreachable!("matched above"),
            };
            for (i, c) in list.iter().enumerate() {
                if list[..i].iter().any(|o| o.ifname == c.ifname) {
                    bail!("interface {} is given twice: give each -i once", c.ifname);
                }
            }
            let filter = match ethernet_filter() {
                Ok(f) => f,
                // As a recording: a syntax error is a usage error.
                Err(e) => {
                    eprintln!("wiretape: error: {e}");
                    return Ok(crate::filter::exit_code(&e));
                }
            };
            for c in &list {
                check_interface(c, filter.as_ref(), &mut ok)?;
            }
            crate::record::check_privileges(
                list.iter().map(|c| crate::record::locked_bytes(c)).sum(),
                filter.as_ref().is_some_and(|f| f.needs_perfmon()),
            )?;
            ok.push(if sys::is_root() {
                "rights (root)".into()
            } else {
                "rights (capabilities)".into()
            });
            for c in &list {
                let ifindex = sys::ifindex(&c.ifname).unwrap_or(0);
                wiretape::capture::bpf::refuse_attached(ifindex, &c.ifname)?;
            }
            // Loaded, never attached: the verifier checks the program and
            // the filter as a recording would load them.
            let mut prog = wiretape::capture::bpf::SteerProgram::load_with(None, list[0].cutoff)?;
            if let Some(c) = list[0].cutoff {
                ok.push(format!(
                    "cutoff {} bytes per connection, table of {} connections (loaded)",
                    c.size, c.flows
                ));
            }
            if let Some(f) = &filter {
                prog.install_filter(f)?;
                ok.push(format!("filter '{}' (loaded, not attached)", f.expr));
            } else {
                ok.push("XDP program (loaded, not attached)".into());
            }
            drop(prog);
            if let Some(cpus) = &list[0].cpus {
                ok.push(format!("poll CPUs {cpus:?}"));
            }
            if let Some(cpus) = &list[0].writer_cpus {
                ok.push(format!("writer CPUs {cpus:?}"));
            }
        }
        Input::Packet(list) => {
            for (i, c) in list.iter().enumerate() {
                if list[..i].iter().any(|o| o.ifname == c.ifname) {
                    bail!("interface {} is given twice: give each -i once", c.ifname);
                }
                if sys::ifindex(&c.ifname).is_none() {
                    bail!(
                        "no such interface '{}' in this network namespace (list interfaces with `ip link`)",
                        c.ifname
                    );
                }
            }
            if let Err(e) = ethernet_filter() {
                eprintln!("wiretape: error: {e}");
                return Ok(crate::filter::exit_code(&e));
            }
            let names: Vec<&str> = list.iter().map(|c| c.ifname.as_str()).collect();
            ok.push(format!(
                "interfaces {} (packet engine: {} blocks x {} KiB per queue)",
                names.join(","),
                list[0].blocks,
                list[0].block_size / 1024
            ));
        }
        Input::Netmap(c) => {
            if sys::ifindex(&c.ifname).is_none() {
                bail!(
                    "no such interface '{}' in this network namespace (list interfaces with `ip link`)",
                    c.ifname
                );
            }
            if let Err(e) = ethernet_filter() {
                eprintln!("wiretape: error: {e}");
                return Ok(crate::filter::exit_code(&e));
            }
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/netmap")
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot open /dev/netmap ({e}): is the netmap module loaded, and may this user open it?"
                    )
                })?;
            ok.push(format!("interface {} (netmap)", c.ifname));
        }
        Input::File(f) => {
            let src = wiretape::pipeline::FileSource::open(&f.path)?;
            if let Some(e) = &opts.filter {
                CaptureFilter::compile(e, src.linktype(), opts.storage.snaplen)?;
                ok.push(format!("filter '{e}'"));
            }
            ok.push(format!("input {}", f.path.display()));
        }
    }
    ok.push(check_dir(opts)?);
    if let Some(addr) = metrics {
        std::net::TcpListener::bind(addr)
            .map_err(|e| anyhow::anyhow!("cannot listen on {addr} for --metrics: {e}"))?;
        ok.push(format!("metrics address {addr}"));
    }
    println!("wiretape: check passed: {}", ok.join(", "));
    Ok(0)
}

/// One AF_XDP interface: it exists, has the queues, can take the filter.
fn check_interface(
    c: &wiretape::capture::CaptureConfig,
    filter: Option<&CaptureFilter>,
    ok: &mut Vec<String>,
) -> Result<()> {
    let ifname = &c.ifname;
    if sys::ifindex(ifname).is_none() {
        bail!(
            "no such interface '{ifname}' in this network namespace (list interfaces with `ip link`)"
        );
    }
    let count = sys::rx_queue_count(ifname).unwrap_or(1).max(1);
    if let Some(q) = c
        .queues
        .as_ref()
        .and_then(|l| l.iter().find(|&&q| q >= count))
    {
        bail!(wiretape::capture::CaptureError::NoSuchQueue {
            ifname: ifname.clone(),
            queue: *q,
            count,
            last: count - 1,
        });
    }
    let queues = c.queues.as_ref().map(|l| l.len() as u32).unwrap_or(count);
    let driver = sys::driver_name(ifname).unwrap_or_else(|| "?".into());
    ok.push(format!(
        "interface {ifname} (driver {driver}, {count} RX queues; recording {queues})"
    ));
    if filter.is_some() {
        if let Some(arphrd) = sys::arphrd(ifname).filter(|&t| t != 1) {
            bail!(wiretape::capture::CaptureError::FilterLinkType {
                ifname: ifname.clone(),
                arphrd,
            });
        }
    }
    Ok(())
}

/// The output directory: writable (or its nearest existing ancestor, where
/// it would be created), O_DIRECT, free space for at least the blocks each
/// queue keeps in flight.
fn check_dir(opts: &RecordConfig) -> Result<String> {
    let st = &opts.storage;
    let dir = &st.dir;
    let (probe_in, created) = if dir.exists() {
        if !dir.is_dir() {
            bail!(wiretape::storage::StorageError::NotADirectory(dir.clone()));
        }
        (dir.clone(), false)
    } else {
        (nearest_existing(dir), true)
    };
    let probe = probe_in.join(format!(".wiretape-check-{}", std::process::id()));
    std::fs::File::create(&probe).map_err(|source| {
        wiretape::storage::StorageError::NotWritable {
            path: dir.clone(),
            source,
        }
    })?;
    let _ = std::fs::remove_file(&probe);
    let direct = wiretape::storage::uring::direct_supported(&probe_in);
    let engine = match st.io {
        wiretape::storage::IoMode::Direct if !direct => bail!(
            "output directory {} is on a filesystem that refuses O_DIRECT: use --io auto or buffered",
            dir.display()
        ),
        wiretape::storage::IoMode::Buffered => "buffered writes",
        _ if direct => "O_DIRECT",
        _ => "buffered writes (no O_DIRECT there)",
    };
    let of = |ifname: &str, q: &Option<Vec<u32>>| {
        q.as_ref()
            .map(|l| l.len() as u64)
            .unwrap_or_else(|| sys::rx_queue_count(ifname).unwrap_or(1).max(1) as u64)
    };
    let queues = match &opts.input {
        Input::Interface(c) => of(&c.ifname, &c.queues),
        Input::Interfaces(l) => l.iter().map(|c| of(&c.ifname, &c.queues)).sum(),
        Input::Netmap(c) => of(&c.ifname, &c.queues),
        Input::Packet(l) => l.iter().map(|c| of(&c.ifname, &c.queues)).sum(),
        Input::File(_) => 1,
    };
    let need = queues * st.block_size as u64 * st.buffers as u64;
    let space = match wiretape::storage::fs_space(&probe_in) {
        Some((free, total)) => {
            if free < need {
                bail!(
                    "output directory {}: only {} free, less than the {} its {queues} queue(s) write at once: free space or choose another -w",
                    dir.display(),
                    crate::report::bytes_h(free),
                    crate::report::bytes_h(need)
                );
            }
            let low = match st.retention.min_free {
                Some(wiretape::MinFree::Bytes(b)) => free < b,
                Some(wiretape::MinFree::Percent(p)) => (free as f64) < total as f64 * p / 100.0,
                None => false,
            };
            format!(
                "{} free of {}{}",
                crate::report::bytes_h(free),
                crate::report::bytes_h(total),
                if low {
                    " (below --min-free: retention deletes our oldest files at the start)"
                } else {
                    ""
                }
            )
        }
        None => "free space unknown".into(),
    };
    Ok(format!(
        "directory {}{} ({engine}, {space})",
        dir.display(),
        if created { " (will be created)" } else { "" }
    ))
}

pub(crate) fn nearest_existing(p: &Path) -> PathBuf {
    let mut q = p.to_path_buf();
    while !q.exists() {
        if !q.pop() {
            return PathBuf::from(".");
        }
    }
    if q.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        q
    }
}
