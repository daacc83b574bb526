//! `wiretape record`.

mod check;
mod metrics;
mod options;

use anyhow::{bail, Result};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use wiretape::pipeline::options::{
    parse_bytes, parse_duration, parse_keep_bytes_scoped, parse_min_free_scoped, parse_ring_size,
    parse_rotate_size, parse_secs, Scoped,
};
use wiretape::pipeline::{preflight, ProgressMeter, StartLine, Status};
use wiretape::Event;

#[derive(clap::Args)]
#[command(
    after_help = "Stops after COUNT frames, after SECONDS, or on Ctrl-C/SIGTERM; always cleanly: blocks \
flushed, XDP program detached, summary printed. Files: DIR/<prefix>-<iface>-q<queue>-<UTC start>.pcap \
(pcap with nanosecond timestamps; .pcapng with --format pcapng), each with a .idx sidecar. Torn tails \
left by a crash in DIR are trimmed at start.\n\nExamples:\n  wiretape record -i eth0 -w /data -c 1000000\n  \
wiretape record -i eth0 -w /data --rotate-size 1G --keep-bytes 500G --on-full rotate\n  \
wiretape record -i eth0 -w /data --format pcapng --rotate-time 60s --keep-age 7d --cpus 2,3 --writer-cpus 4,5\n  \
wiretape record -i eth0 -i eth1 -w /data --cpus 2-5   # both directions of a tap: files per interface and queue\n  \
wiretape record --engine netmap -i eth0 -w /data      # netmap rings (build with --features netmap)\n\nA capture filter (tcpdump's language) goes after the options, or after --, or in a file with -F. \
A first filter word that is also an existing file here (tcp, host, ...) is refused \
as ambiguous: -F WORD reads the filter from that file, -- WORD takes it as the filter:\n  \
wiretape record -i eth0 -w /data tcp port 443 and not host 10.0.0.1\n  \
wiretape record -i eth0 -w /data -- tcp port 443\n  \
wiretape record -i eth0 -w /data -F filter.txt\n\n\
-w DIR is created if missing, but not its parents: a -w path whose parent does not exist is \
refused (a typo) unless --mkdir (config: create = true). Every usage error (exit 2) comes before \
anything is created or attached; every message, its cause and its fix: docs/errors.md.\n\n\
Signals: SIGINT/SIGTERM stop cleanly; SIGHUP starts a new file on every queue (at its next frame) and \
finishes the old ones; SIGUSR2 prints the summary so far and goes on.\n\n\
Live (see also `wiretape ctl --help`):\n  \
wiretape record -i eth0 -w /data --ring 4G --ring-only   # keep the last 4 GiB in RAM; write only dumps\n  \
wiretape ctl -w /data dump --last 30s tcp port 443      # a window of the ring into DIR, named by its first frame\n  \
kill -USR1 $(pidof wiretape)                             # dump the ring (or --dump-window of it)\n  \
wiretape record -i eth0 -w /data --serve 127.0.0.1:57012 # PCAP-over-IP: nc 127.0.0.1 57012 | tcpdump -r -\n\n\
Needs root, or CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW and CAP_IPC_LOCK (and CAP_PERFMON for filters using len, less or greater)."
)]
pub(crate) struct Args {
    /// Interface to record (e.g. eth0). Repeat it to record several in one
    /// run (-i eth0 -i eth1): an XDP program on each, a poll and a writer
    /// thread per (interface, queue), files named by interface and queue,
    /// --cpus/--writer-cpus covering all their queues in order, -c counting
    /// frames of all of them together; all are checked before any is attached.
    #[arg(
        short = 'i',
        long = "interface",
        value_name = "IFACE",
        required_unless_present = "read",
        action = clap::ArgAction::Append
    )]
    iface: Vec<String>,
    /// Instead of an interface, feed a capture file (pcap ns/us or pcapng)
    /// through the same pipeline as one RX queue: no privileges needed.
    /// Frames keep the file's timestamps unless --ts asks for kpt, batch,
    /// udts, wdts or hybrid. Files are named after the file's stem. A plain
    /// pcap file is read in place (mapped; do not truncate it meanwhile).
    #[arg(short = 'r', long = "read", value_name = "FILE", conflicts_with_all = ["iface", "queues", "cpus", "xdp_mode", "zero_copy", "frames", "frame_size", "engine", "netmap_slots"])]
    read: Option<PathBuf>,
    /// With -r: how fast the file is fed: max (default), original (its own
    /// gaps; 2x twice as fast), a frame rate (100000) or a bit rate (5gbit).
    #[arg(long, value_name = "SPEED", default_value = "max", requires = "read")]
    speed: String,
    /// Output directory (created if missing; its parent must exist, unless
    /// --mkdir). Repeat it to spread the files over several volumes (-w
    /// /disk1 -w /disk2; config: write = ["/disk1", "/disk2"]): each new
    /// file goes to the volume with the fewest files in flight, a volume
    /// that fails (full, I/O error, read-only, gone) is taken out and the
    /// others take its share; retention covers them all, oldest first;
    /// store.toml in each names them all, for the readers.
    #[arg(short = 'w', long = "write", value_name = "DIR", required = true, action = clap::ArgAction::Append)]
    dirs: Vec<PathBuf>,
    /// Create the -w directory with every missing parent (a typo in the
    /// path is otherwise refused, naming the missing parent). In a
    /// --config file: `create = true` (or `mkdir = true`).
    #[arg(long)]
    mkdir: bool,
    /// Stop after COUNT frames in total (at least 1).
    #[arg(short = 'c', long, value_name = "COUNT", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Stop after SECONDS (fractions allowed).
    #[arg(short = 'd', long = "duration", value_name = "SECONDS", value_parser = parse_secs)]
    duration: Option<Duration>,
    /// Bytes kept of each frame (the original length is always recorded).
    #[arg(short = 's', long, value_name = "SNAPLEN", default_value_t = wiretape::DEFAULT_SNAPLEN,
          value_parser = clap::value_parser!(u32).range(14..=262144))]
    snaplen: u32,
    /// RX queues to record: `all` or a list like 0,1 or 0-3.
    #[arg(long, value_name = "all|0,1,..")]
    queues: Option<String>,
    /// CPUs for the poll threads, one per queue in turn (e.g. 2,3 or 2-5).
    /// Default: the CPUs this process may run on, in turn.
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Timestamps: hw (NIC time where the driver gives it, else xdp), xdp (kernel
    /// time per frame in the XDP program), kpt (per frame at the poll thread, TSC),
    /// batch, udts, wdts (a batch's gap spread uniformly / by size), hybrid
    /// (wdts when the queue is saturated, kpt otherwise), off. See `wiretape tsbench`.
    /// Default hw (with -r: the file's own stamps; with --engine netmap:
    /// hybrid over ring->ts, the time netmap stamps each ring sync with;
    /// hw and xdp need the XDP program and are refused there).
    #[arg(long = "ts", value_name = "MODE",
          value_parser = ["hw", "xdp", "kpt", "batch", "udts", "wdts", "hybrid", "off"])]
    ts: Option<String>,
    /// Write the final accounting as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    summary_json: Option<PathBuf>,
    /// Where the XDP program runs: auto (native, else generic), native, generic.
    #[arg(long, value_name = "MODE", value_parser = ["auto", "native", "generic"])]
    xdp_mode: Option<String>,
    /// AF_XDP zero-copy: auto (try, else copy), on, off.
    #[arg(long, value_name = "MODE", value_parser = ["auto", "on", "off"])]
    zero_copy: Option<String>,
    /// UMEM frames per queue (power of two): how many frames may wait for the
    /// writer. Default 32768.
    #[arg(long, value_name = "N")]
    frames: Option<u32>,
    /// Bytes per UMEM frame: 2048 or 4096. The largest frame recorded is this
    /// minus 256 (1792 by default: Ethernet with VLAN tags); larger frames are
    /// counted in drops.other.
    #[arg(long, value_name = "BYTES")]
    frame_size: Option<u32>,
    /// Capture engine: afxdp (an XDP program steers each RX queue into an
    /// AF_XDP socket), packet (TPACKET_V3: one AF_PACKET socket and ring of
    /// blocks per queue, at most one per CPU, fanned out by RX queue; one
    /// kernel copy per frame,
    /// where AF_XDP in copy mode makes two: cheaper on devices without
    /// AF_XDP zero-copy, e.g. veth; the filter runs in user space; every
    /// queue; no --cutoff) or netmap (each RX ring bound through /dev/netmap
    /// and read in place: needs the netmap kernel module and a wiretape
    /// built with `--features netmap`; stamps default to hybrid).
    /// Default auto: packet on an interface whose driver offers no AF_XDP
    /// zero-copy and hands XDP skbs (veth, tun, a driver without native
    /// XDP: the kernel's XDP features say so), unless an option only
    /// afxdp has is given (--cutoff, --busy-poll, --xdp-mode, --zero-copy,
    /// --frames, --frame-size, some --queues only); afxdp otherwise. The
    /// environment variable WIRETAPE_ENGINE=afxdp|packet sets what auto
    /// picks. The start line and the summary's `engine` name what was
    /// picked, and why.
    #[arg(long, value_name = "ENGINE", default_value = "auto", value_parser = ["auto", "afxdp", "packet", "netmap"])]
    engine: String,
    /// With --engine packet: ring blocks per RX queue (default 64); a socket
    /// reading several queues has that many per queue in its ring. The ring
    /// holds every frame not yet copied by the writer.
    #[arg(long, value_name = "N")]
    packet_blocks: Option<u32>,
    /// With --engine packet: KiB per ring block, a power of two (default
    /// 1024). A block is handed over when full or 8 ms after its first frame.
    #[arg(long, value_name = "KIB")]
    packet_block_kib: Option<u32>,
    /// With --engine packet: milliseconds after its first frame that a
    /// partly filled block is handed over (the kernel's block timer,
    /// 1-60000; default 8). Longer means fuller blocks and fewer wakeups on a
    /// slow link; frames reach the disk and live consumers that much later.
    #[arg(long, value_name = "MS")]
    packet_retire_ms: Option<u32>,
    /// With --engine packet: AF_PACKET sockets (each with its ring and poll
    /// thread) reading the interface, 1 to its RX queue count; socket n
    /// takes the queues q with q mod N = n. Default: one per queue, but no
    /// more than the CPUs the poll threads may use (--cpus, else the
    /// allowed ones): a socket per queue beyond that gains nothing and
    /// costs the kernel a fanout step on every frame.
    #[arg(long, value_name = "N")]
    packet_sockets: Option<u32>,
    /// With --format pcapng (the packet engine; auto picks it): frames are
    /// not copied. Each ring block is laid out in place as pcapng (a packet
    /// block's head written just before each frame, blocks readers skip over
    /// the rest) and written to disk as it lies: less CPU per frame from
    /// about 1 KB frames (blocks of smaller frames are still copied). A
    /// block written from the ring is the kernel's again only once the disk
    /// has it, so while the disk is behind (a quarter of the ring or more
    /// waits for it, or came in during one write) blocks are copied into
    /// the RAM buffer instead. The price: a disk that stops outright for
    /// longer than the ring lasts (--packet-blocks x --packet-block-kib per
    /// queue, 64 MiB: ~140 ms at 3.6 Gbit/s) with ring blocks in its queue
    /// drops frames, where copying buffers in RAM; and 84-91 bytes more disk
    /// per frame. Not with --compress, -c, --tsprec us, a --snaplen below
    /// the default, or --ts other than hw/xdp.
    #[arg(long)]
    packet_in_place: bool,
    /// Lay out in place only blocks whose frames take at least BYTES of
    /// ring on average (header included; default 768: smaller frames cost
    /// less copied). For tests and measurements.
    #[arg(long, value_name = "BYTES", hide = true)]
    packet_in_place_min: Option<u32>,
    /// Write a block laid out in place from the ring only while fewer than
    /// BYTES wait for the disk, else copy it (default: a quarter of a
    /// queue's ring; 0: copy every block). For tests and measurements.
    #[arg(long, value_name = "BYTES", hide = true)]
    packet_in_place_backlog: Option<u64>,
    /// With --engine netmap: slots per RX ring to ask netmap for (64-16384;
    /// the driver may round it). The ring holds every frame not yet copied
    /// by the writer. Default: the driver's ring size (`ethtool -g`).
    #[arg(long, value_name = "N")]
    netmap_slots: Option<u32>,
    /// Most frames a poll thread takes from the ring at once.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    batch: usize,
    /// Microseconds a poll thread sleeps when its ring runs dry, so frames
    /// are handled in batches and threads wake rarely (after ~10 ms of
    /// silence it blocks instead). Lower it for kpt/hybrid stamps at low load;
    /// xdp and hw stamps do not depend on it. Default 1000 (netmap: 50, as
    /// its rings of a few thousand slots fill sooner than a UMEM).
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    poll_sleep_us: Option<u64>,
    /// Busy polling (AF_XDP; off by default): each socket gets
    /// SO_PREFER_BUSY_POLL, SO_BUSY_POLL=US and SO_BUSY_POLL_BUDGET=--batch
    /// (at most 65535), and each poll thread runs the driver's NAPI poll
    /// itself, one recvfrom per round: the driver's receive work (the XDP
    /// program, the copy into the UMEM) moves from the softirq onto the
    /// poll thread's CPU. A dry ring is polled again at
    /// once for US microseconds, then the thread sleeps (--poll-sleep-us) as
    /// without busy polling. Costs CPU: under load the poll thread keeps its
    /// CPU busy. For full effect set napi_defer_hard_irqs and
    /// gro_flush_timeout in /sys/class/net/IFACE/ (e.g. 2 and 200000), so the
    /// interrupts stay off while we poll; wiretape does not change them.
    /// Needs CAP_NET_ADMIN. Try 50. No effect on veth (Linux 6.13+ gives
    /// its AF_XDP sockets no NAPI id to poll); for NICs whose driver does.
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    busy_poll: Option<u32>,
    /// Write a partly filled block after this many seconds, so a quiet link lands on disk.
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = parse_secs)]
    flush_interval: Duration,
    /// File name prefix.
    #[arg(long, default_value = "wiretape")]
    prefix: String,
    /// How files are written: auto (O_DIRECT through io_uring where the
    /// filesystem takes it, else buffered, with a notice), direct, buffered.
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser = ["auto", "direct", "buffered"])]
    io: String,
    /// Block size in KiB: frames are copied into blocks this big, written whole.
    #[arg(long, value_name = "KIB", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(64..=65536))]
    block_kib: u64,
    /// Start a new file before one grows past SIZE (bytes, or with K, M, G,
    /// T: binary units, e.g. 1G). Files never split a frame and are never empty.
    #[arg(long, value_name = "SIZE", value_parser = parse_rotate_size)]
    rotate_size: Option<u64>,
    /// Start a new file every DURATION of packet time (e.g. 60s, 5m, 1h;
    /// a bare number is seconds), at the first frame past it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    rotate_time: Option<Duration>,
    /// File format: pcap (nanosecond stamps unless --tsprec us) or pcapng
    /// (SHB, one IDB with if_name and if_tsresol=9, EPBs).
    #[arg(long, value_name = "FORMAT", default_value = "pcap", value_parser = ["pcap", "pcapng"])]
    format: String,
    /// pcap timestamp precision: ns (default; magic a1b23c4d) or us (classic
    /// a1b2c3d4, for old readers; stamps are cut to microseconds).
    #[arg(long, value_name = "PREC", default_value = "ns", value_parser = ["ns", "us"])]
    tsprec: String,
    /// Keep at most N of our files in DIR: the oldest go first (needs
    /// rotation to make more than one file per queue). Only files named like
    /// ours (<prefix>-<iface>-q<N>-<UTC>.pcap[ng]) are ever deleted.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    keep_files: Option<u64>,
    /// Keep at most SIZE bytes of our files (e.g. 500G), all volumes
    /// together; oldest go first. DIR=SIZE (repeatable, beside SIZE) caps
    /// one volume, a -w DIR, where a disk is smaller: its own oldest go.
    #[arg(long, value_name = "SIZE|DIR=SIZE", value_parser = parse_keep_bytes_scoped)]
    keep_bytes: Vec<Scoped<u64>>,
    /// Delete our files last written more than DURATION ago (e.g. 7d, 12h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    keep_age: Option<Duration>,
    /// Delete our oldest files while the filesystem has less free space than
    /// SIZE (e.g. 10G) or PCT of its size (e.g. 5%), on each volume (the
    /// files of the volume that is low). DIR=SIZE|PCT (repeatable) sets one
    /// volume's own floor in place of that (e.g. /disk3=50G).
    #[arg(long, value_name = "SIZE|PCT|DIR=...", value_parser = parse_min_free_scoped)]
    min_free: Vec<Scoped<wiretape::MinFree>>,
    /// When the disk fills up: stop (cleanly; the summary's drops gain
    /// disk_full) or rotate (delete our oldest files and go on; stop only
    /// when nothing of ours is left to delete).
    #[arg(long, value_name = "ACTION", default_value = "stop", value_parser = ["stop", "rotate"])]
    on_full: String,
    /// CPUs for the writer threads (one per queue, each with its own
    /// io_uring), in turn (e.g. 1 or 2-3). Default: none: one thread per
    /// queue takes and copies its frames, on its --cpus CPU; a queue given a
    /// writer CPU other than its poll CPU copies on a thread of its own.
    #[arg(long, value_name = "LIST")]
    writer_cpus: Option<String>,
    /// Do not write the .idx sidecar (per block: first/last time, offset,
    /// count, and the flow keys: hosts, ports, protocols, VLANs).
    #[arg(long)]
    no_index: bool,
    /// Index blocks by time only, without their flow keys (filtered
    /// `extract` then reads every block of the window); no key index either.
    #[arg(long)]
    no_flow_index: bool,
    /// No exact key index (`<file>.kdx`: every host, port, protocol and
    /// VLAN to the places of its frames, built off the capture threads as
    /// each file closes, or every half million flows of a long one); the
    /// flow sets of the .idx still narrow (for comparisons).
    #[arg(long)]
    no_key_index: bool,
    /// No session table (`<file>.sessions.parquet`: one row per connection
    /// of the file, with its endpoints, packets and bytes each way, and the
    /// names its first frames carried: DNS query and answers, TLS SNI,
    /// ALPN and JA4, HTTP/1.x host, method, path and user agent, QUIC
    /// SNI). Made on a thread of its own from a copy of each block as it
    /// goes to the disk; when that thread is behind, a block is skipped
    /// for sessions (the summary's sessions_skipped counts its frames, the
    /// file's table is marked incomplete), never dropped from the capture.
    /// Asked with `wiretape sessions DIR`, or any Parquet reader.
    #[arg(long)]
    no_sessions: bool,
    /// Compress files at rest: lz4 (one LZ4 frame per file: `.pcap.lz4`,
    /// opened by Wireshark, `lz4 -dc`) or zstd[:LEVEL] (a zstd frame per
    /// block: `.pcap.zst`, read by `zstdcat F | tcpdump -r -`; level 3 by
    /// default). Blocks are compressed off the writer's path; when the
    /// compressors fall behind, a block is stored uncompressed (counted),
    /// never dropped.
    #[arg(long, value_name = "ALG", default_value = "none")]
    compress: String,
    /// Encrypt files at rest to this age recipient (age1..., the public key
    /// age-keygen prints; repeatable: any one recipient's identity opens a
    /// file). Files become .pcap.age (after compression: .pcap.lz4.age),
    /// standard age files: age -d -i KEY F | tcpdump -r -. Their .idx keeps
    /// times, counts and offsets only: no flow sets, key index nor session
    /// table (they would hold addresses and names in clear). Read back with
    /// --identity (extract, info, timeline, index, api, record -r).
    #[arg(long, value_name = "RECIPIENT")]
    encrypt_to: Vec<String>,
    /// Encrypt to the recipients of FILE too (one age1... a line, #
    /// comments; repeatable): see --encrypt-to.
    #[arg(long, value_name = "FILE")]
    encrypt_to_file: Vec<PathBuf>,
    #[command(flatten)]
    id: crate::common::IdentityArg,
    /// Keep only the first SIZE bytes (wire lengths; K, M, G: binary units) of
    /// each connection (IP version, address pair, protocol, port pair, in
    /// both directions); TCP segments with SYN, FIN or RST, non-IP frames
    /// and non-first fragments are always kept. Cut frames are counted in
    /// packets_cutoff. Applied after the capture filter: in the XDP program
    /// for -i (cut frames never reach user space), in the file engine for
    /// -r; not with --engine netmap.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    cutoff: Option<u64>,
    /// Connections the cutoff tracks at once; a new one at a full table
    /// evicts the least recently seen (they start again from zero,
    /// counted in cutoff_flows_evicted).
    #[arg(long, value_name = "N", default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(1..=(1 << 26)))]
    cutoff_flows: u64,
    /// Threads compressing blocks, all queues together. Default: the cores
    /// less one, at least one.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    compress_threads: Option<u64>,
    /// RAM in MiB for blocks waiting for the disk, all queues together: a
    /// burst faster than the disk queues here instead of being dropped
    /// (allocated only under pressure). Default: a quarter of RAM, or of the
    /// memory cgroup's limit when running in one, at most 4096.
    #[arg(long, value_name = "MIB")]
    buffer_mib: Option<u64>,
    /// Blocks per file (one being filled, the others being written).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(2..=64))]
    write_buffers: u64,
    /// No progress line.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Time-travel buffer: keep the most recent SIZE of frames in RAM (e.g.
    /// 4G; all queues together, preallocated at start, huge pages where the
    /// kernel gives them). `wiretape ctl dump` and SIGUSR1 write a window
    /// of it into DIR, as a capture file named by its first frame's time.
    #[arg(long, value_name = "SIZE", value_parser = parse_ring_size)]
    ring: Option<u64>,
    /// With --ring: write no capture files; only dumps reach the disk (record
    /// only what an alarm asks for). packets_written then counts frames
    /// kept in the ring.
    #[arg(long, requires = "ring")]
    ring_only: bool,
    /// What SIGUSR1 dumps: the last DURATION of the ring (e.g. 30s; default:
    /// all of it).
    #[arg(long, value_name = "DURATION", requires = "ring", value_parser = parse_duration)]
    dump_window: Option<Duration>,
    /// Unix socket for `wiretape ctl` (status, dump), mode 0600. Default:
    /// DIR/.wiretape-control.sock (skipped, with a notice, when another
    /// wiretape records into DIR).
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// PCAP-over-IP: serve the frames on ADDR (e.g. 127.0.0.1:57012). Each
    /// TCP client gets a pcap header (ns stamps), then every frame from its
    /// connect onward, in time order across queues: `nc 127.0.0.1 57012 |
    /// tcpdump -r -`. A client that reads slower than the stream is cut off
    /// (logged, counted); it never slows the recorder. Loopback only unless
    /// --serve-allow-remote.
    #[arg(long, value_name = "ADDR")]
    serve: Option<std::net::SocketAddr>,
    /// Most PCAP-over-IP clients at once (more are refused, counted).
    #[arg(long, value_name = "N", default_value_t = 8, requires = "serve",
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    serve_max_clients: u64,
    /// Allow --serve on a non-loopback address (every frame goes to whoever connects).
    #[arg(long, requires = "serve")]
    serve_allow_remote: bool,
    /// Benchmarks only: N in-process lossless subscribers, each reading
    /// every frame (stamp, length, first byte), to measure what they cost
    /// the recorder; their counters are in the summary's subscribers[].
    #[arg(long, value_name = "N", hide = true, default_value_t = 0)]
    bench_subscribers: usize,
    /// Read the capture filter expression from FILE (`#` starts a comment
    /// that runs to the end of the line), instead of the trailing words.
    #[arg(
        short = 'F',
        long = "filter-file",
        value_name = "FILE",
        conflicts_with_all = ["expression", "after"]
    )]
    filter_file: Option<PathBuf>,
    /// When the interface disappears (deleted, unplugged, a driver reset),
    /// wait for it to come back and record on into new files (the gap is in
    /// the summary) instead of stopping with exit 1.
    #[arg(long)]
    wait_iface: bool,
    /// Read flags from FILE (TOML; keys are the long flag names, e.g.
    /// `write = "/data"`, `rotate-size = "1G"`, `queues = [0, 1]`,
    /// `wait-iface = true`, `filter = "tcp port 443"`); flags on the command
    /// line override it. What the systemd unit reads (/etc/wiretape/IFACE.conf).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Validate everything (interface, queues, CPUs, rights, the XDP program
    /// and filter loaded but not attached, directory, O_DIRECT, free space)
    /// and exit: 0 and one line if all is well, else the first problem
    /// (exit 1, or 2 for bad usage). Attaches nothing, writes no capture.
    #[arg(long)]
    check: bool,
    /// Serve the recording's numbers for Prometheus at http://ADDR/metrics
    /// (OpenMetrics text): per interface and queue frames seen, written,
    /// filtered and dropped by reason, bytes, disk write latency, RAM
    /// buffer, files open/rotated/deleted, free space, last error. ADDR:
    /// 127.0.0.1:9750, [::1]:9750 or a bare port (on 127.0.0.1).
    #[arg(long, value_name = "ADDR", value_parser = wiretape::pipeline::options::parse_listen_addr)]
    metrics: Option<std::net::SocketAddr>,
    /// Let --metrics listen on an address other machines can reach.
    #[arg(long, requires = "metrics")]
    metrics_allow_remote: bool,
    /// Show libbpf's own log lines (otherwise folded into the one-line
    /// reason of an error).
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Capture filter, as tcpdump takes it (man pcap-filter): only the
    /// frames it accepts are recorded; the others go on to the kernel's
    /// stack untouched and are counted in packets_filtered. Decided in the
    /// XDP program (with -r: in user space). Example: tcp port 443 and not net 10.0.0.0/8
    #[arg(value_name = "FILTER EXPRESSION")]
    expression: Vec<String>,
    /// The capture filter, after `--` (a first word that is also a file
    /// here is taken as the filter).
    #[arg(last = true, value_name = "FILTER")]
    after: Vec<String>,
}

/// The default control socket, DIR/.wiretape-control.sock, unless another
/// wiretape listens there or the path is too long for a socket (then none,
/// with a notice).
fn default_control(dir: &std::path::Path) -> Option<PathBuf> {
    wiretape::live::control::default_socket(dir)
        .map_err(|e| eprintln!("wiretape: no control socket: {e} (give --control PATH)"))
        .ok()
}

pub(crate) fn run(a: Args) -> Result<i32> {
    let wiretape::pipeline::options::Built {
        config: mut opts,
        engine_reason,
        trigger,
        ..
    } = options::config(&a)?;
    // A typo in -w is refused before anything else is looked at.
    let volumes = preflight::check_volumes(&a.dirs).and_then(|()| {
        a.dirs
            .iter()
            .try_for_each(|d| preflight::check_output_dir(d, a.mkdir))
    });
    volumes.map_err(check::in_flags)?;
    preflight::check_queues(&opts).map_err(check::in_flags)?;
    if a.check {
        return check::run(&opts, a.metrics);
    }

    // The cheap checks first: nothing is attached or created before them.
    preflight::check_start(&opts).map_err(check::in_flags)?;
    for n in preflight::busy_poll_undeferred(&opts) {
        eprintln!("wiretape: notice: --busy-poll {}: {n}", n.usecs);
    }
    wiretape::capture::bpflog::set_verbose(a.verbose);
    let metrics = match a.metrics {
        Some(addr) => {
            use wiretape::pipeline::metrics::Metrics;
            let m = Metrics::serve(
                addr,
                a.metrics_allow_remote,
                &opts.ifname(),
                a.dir().to_owned(),
            )
            .map_err(metrics::in_flags)?;
            eprintln!("wiretape: metrics on http://{}/metrics", m.addr);
            Some(m)
        }
        None => None,
    };
    opts.live.control = match &a.control {
        Some(p) => Some(p.clone()),
        None => default_control(a.dir()),
    };

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    // SIGHUP: rotate every file now; SIGUSR2: the summary so far, going on.
    signal_hook::flag::register(signal_hook::consts::SIGHUP, opts.controls.rotate.clone())?;
    signal_hook::flag::register(signal_hook::consts::SIGUSR2, opts.controls.status.clone())?;
    let status = opts.controls.status.clone();
    // SIGUSR1 dumps the ring (without one it says so instead of killing the run).
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, trigger)?;
    let tty = std::io::stderr().is_terminal();
    let quiet = a.quiet;
    let mut why = String::new();
    let mut fin = wiretape::StorageProgress::default();
    let mut systemd = wiretape::pipeline::service::Notifier::new(&opts.storage.dir);
    let mut meter = ProgressMeter::new();
    let live = wiretape::live::Live::new(opts.live.clone());
    let readers = live.bench_subscribers(a.bench_subscribers);
    let rep = match wiretape::record_live(&opts, &live, &stop, |ev| {
        if let Some(m) = &metrics {
            m.observe(&ev);
        }
        systemd.observe(&ev);
        match ev {
            Event::Started(info) => {
                eprintln!("{}", StartLine::new(info, &opts, engine_reason.as_deref()))
            }
            Event::Progress {
                elapsed,
                snapshot,
                storage,
            } => {
                if status.swap(false, std::sync::atomic::Ordering::AcqRel) {
                    if tty && !quiet {
                        eprintln!();
                    }
                    eprint!("{}", Status::new(elapsed, &snapshot, &storage));
                }
                if !quiet {
                    let line = meter.line(elapsed, &snapshot, &storage);
                    if tty {
                        eprint!("\r{line}\x1b[K");
                    } else {
                        eprintln!("{line}");
                    }
                }
            }
            Event::Finished(st) => fin = st,
            Event::Notice(n) => eprintln!("wiretape: {n}"),
            Event::Stopping(w) => {
                if tty && !quiet {
                    eprintln!();
                }
                why = w.to_string();
            }
        }
    }) {
        Ok(r) => r,
        // A refused expression is a usage error, like clap's (exit 2),
        // before anything is attached.
        Err(wiretape::PipelineError::Filter(e)) => {
            eprintln!("wiretape: error: {e}");
            return Ok(crate::common::exit_code(&e));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(m) = &metrics {
        m.finish(&rep, &fin);
    }
    for r in readers {
        let _ = r.join();
    }
    let mut summary = wiretape::RunSummary::new(&rep, &opts, &why, &fin, engine_reason.as_deref());
    summary.errors = crate::common::flags::run_errors(&rep);
    eprint!("{}", summary.text());
    if let Some(p) = &a.summary_json {
        std::fs::write(p, summary.to_json())
            .map_err(|e| anyhow::anyhow!("cannot write the summary {}: {e}", p.display()))?;
    }
    if let Some(e) = summary.errors.first() {
        bail!("{e} (the files hold every frame the summary counts as written)");
    }
    Ok(0)
}

impl Args {
    /// The first -w: the control socket's and the metrics' directory.
    fn dir(&self) -> &std::path::Path {
        &self.dirs[0]
    }
}
