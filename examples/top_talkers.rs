//! Live top talkers while wiretape records: every second, the IPv4 sources
//! that sent the most bytes, and frames per protocol.
//!
//! ```sh
//! cargo run --release --example top_talkers -- -i eth0 -w /data -d 60   # root
//! cargo run --release --example top_talkers -- -r trace.pcap -w /tmp/out
//! ```
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};
use wiretape::live::Recv;
use wiretape::{RecordConfig, Recording, SubscribeOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |flag: &str| args.windows(2).find(|w| w[0] == flag).map(|w| w[1].clone());
    let dir = arg("-w").ok_or("usage: top_talkers -i IFACE|-r FILE -w DIR [-d SECONDS]")?;
    let cfg = match (arg("-i"), arg("-r")) {
        (Some(i), _) => RecordConfig::interface(&i, &dir),
        (None, Some(f)) => RecordConfig::file(f, &dir),
        _ => return Err("give -i IFACE or -r FILE".into()),
    };
    let secs: f64 = arg("-d").map(|d| d.parse()).transpose()?.unwrap_or(3600.0);
    let mut rec = Recording::new(cfg);
    // Lossy: a slow terminal never slows the recorder (it skips instead).
    let mut sub = rec.subscribe(SubscribeOptions::lossy().name("top-talkers"));
    rec.start()?;
    let (mut bytes, mut protos) = (HashMap::<Ipv4Addr, u64>::new(), HashMap::new());
    let (start, mut next) = (Instant::now(), Instant::now() + Duration::from_secs(1));
    let mut ended = false;
    while !ended && start.elapsed().as_secs_f64() < secs {
        match sub.recv_timeout(Duration::from_millis(100)) {
            Recv::Batch(b) => {
                for f in b.frames() {
                    if let Some((src, proto)) = ipv4(f.data) {
                        *bytes.entry(src).or_default() += f.orig_len as u64;
                        *protos.entry(proto).or_insert(0u64) += 1;
                    }
                }
            }
            Recv::Timeout => {}
            Recv::Ended => ended = true,
        }
        if Instant::now() >= next || ended {
            next += Duration::from_secs(1);
            print(&bytes, &protos, start.elapsed());
            bytes.clear();
            protos.clear();
        }
    }
    let report = rec.stop()?;
    let me = sub.report();
    println!(
        "recorded {} frames; this monitor saw {} and skipped {}",
        report.written(),
        me.delivered,
        me.skipped
    );
    Ok(())
}

fn print(bytes: &HashMap<Ipv4Addr, u64>, protos: &HashMap<&str, u64>, t: Duration) {
    let mut top: Vec<_> = bytes.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut p: Vec<_> = protos.iter().collect();
    p.sort();
    println!("[{:6.1}s] frames per protocol: {p:?}", t.as_secs_f64());
    for (ip, b) in top.iter().take(10) {
        println!("  {ip:>15} {b:>12} bytes");
    }
}

/// The IPv4 source and protocol of an Ethernet frame (VLAN tags skipped).
fn ipv4(f: &[u8]) -> Option<(Ipv4Addr, &'static str)> {
    let mut off = 12;
    while matches!(f.get(off..off + 2)?, [0x81, 0x00] | [0x88, 0xa8]) {
        off += 4;
    }
    if f.get(off..off + 2)? != [0x08, 0x00] {
        return None;
    }
    let ip = f.get(off + 2..off + 22)?;
    let proto = match ip[9] {
        1 => "icmp",
        6 => "tcp",
        17 => "udp",
        _ => "other",
    };
    Some((Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]), proto))
}
