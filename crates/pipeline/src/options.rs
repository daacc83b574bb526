//! A recording's options as plain values, and the [`RecordConfig`] they
//! make: what `wiretape record`'s flags mean, for any program.
//!
//! [`RecordOptions`] has one field per option of a recording (the CLI's
//! flags, without the parsing of a command line); [`RecordOptions::build`]
//! checks them against each other, resolves the automatic engine choice
//! ([`crate::choose_engine`]) and returns the [`RecordConfig`] with the
//! choice's reason ([`Built`]), or the first problem as an
//! [`OptionsError`] that names the option at fault as a value ([`Opt`]),
//! so that a caller can word it in its own terms (the CLI names its flag).
//! Nothing is created or attached; the only things looked at beyond the
//! options are the interfaces (the engine choice, the packet engine's
//! queues), the CPUs this process may run on and the recipients' files.
//!
//! The sizes and durations the options take in text are parsed by
//! [`parse_bytes`], [`parse_rotate_size`], [`parse_ring_size`],
//! [`parse_min_free`], [`parse_duration`], [`parse_secs`] and
//! [`parse_listen_addr`]; the limits given for the whole store or for one
//! volume (`DIR=SIZE`) by [`parse_keep_bytes_scoped`] and
//! [`parse_min_free_scoped`]; a file of options (`wiretape record --config
//! FILE`) by [`mod@file`].
//!
//! ```no_run
//! use wiretape_pipeline::options::RecordOptions;
//! let mut o = RecordOptions::new(["eth0"], "/data");
//! o.rotate_size = Some(wiretape_pipeline::options::parse_bytes("1G").unwrap());
//! let built = o.build().unwrap();
//! println!("{}", built.engine_reason.as_deref().unwrap_or("engine as asked"));
//! ```

pub mod file;

use crate::engine::{choose_engine, AutoHints, Engine};
use crate::{Input, RecordConfig};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use wiretape_capture::cpulist::{self, ListError, NotAllowed};
use wiretape_capture::{
    sys, BusyPoll, CaptureConfig, CaptureError, FileConfig, NetmapConfig, PacketConfig, XdpCutoff,
    XdpMode,
};
use wiretape_storage::{Limit, LimitWords, MinFree, Policy, VolumeLimits, DEFAULT_SNAPLEN};

/// The engine a recording of interfaces asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineOpt {
    /// Chosen for the interfaces ([`crate::choose_engine`]): packet where
    /// AF_XDP would copy each frame twice, else AF_XDP; the packet engine
    /// when its ring is sized or laid out in place.
    #[default]
    Auto,
    /// AF_XDP.
    Afxdp,
    /// TPACKET_V3 (AF_PACKET).
    Packet,
    /// netmap (cargo feature `netmap`).
    Netmap,
}

impl EngineOpt {
    /// Its name (`auto`, `afxdp`, `packet`, `netmap`).
    pub fn name(self) -> &'static str {
        match self {
            EngineOpt::Auto => "auto",
            EngineOpt::Afxdp => "afxdp",
            EngineOpt::Packet => "packet",
            EngineOpt::Netmap => "netmap",
        }
    }

    /// The engine of that name; anything else is none.
    pub fn from_name(s: &str) -> Option<EngineOpt> {
        [
            EngineOpt::Auto,
            EngineOpt::Afxdp,
            EngineOpt::Packet,
            EngineOpt::Netmap,
        ]
        .into_iter()
        .find(|e| e.name() == s)
    }
}

impl From<Engine> for EngineOpt {
    fn from(e: Engine) -> EngineOpt {
        match e {
            Engine::Afxdp => EngineOpt::Afxdp,
            Engine::Packet => EngineOpt::Packet,
        }
    }
}

impl std::fmt::Display for EngineOpt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An option of [`RecordOptions`], as an error names it (one variant per
/// field that can be at fault).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Opt {
    /// [`RecordOptions::speed`].
    Speed,
    /// [`RecordOptions::queues`].
    Queues,
    /// [`RecordOptions::cpus`].
    Cpus,
    /// [`RecordOptions::writer_cpus`].
    WriterCpus,
    /// [`RecordOptions::ts`].
    Ts,
    /// [`RecordOptions::xdp_mode`].
    XdpMode,
    /// [`RecordOptions::zero_copy`].
    ZeroCopy,
    /// [`RecordOptions::frames`].
    Frames,
    /// [`RecordOptions::frame_size`].
    FrameSize,
    /// [`RecordOptions::packet_blocks`].
    PacketBlocks,
    /// [`RecordOptions::packet_block_kib`].
    PacketBlockKib,
    /// [`RecordOptions::packet_retire_ms`].
    PacketRetireMs,
    /// [`RecordOptions::packet_sockets`].
    PacketSockets,
    /// [`RecordOptions::packet_in_place`].
    PacketInPlace,
    /// [`RecordOptions::netmap_slots`].
    NetmapSlots,
    /// [`RecordOptions::busy_poll`].
    BusyPoll,
    /// [`RecordOptions::cutoff`].
    Cutoff,
    /// [`RecordOptions::io`].
    Io,
    /// [`RecordOptions::format`] with [`RecordOptions::tsprec`].
    Format,
    /// [`RecordOptions::compress`].
    Compress,
    /// [`RecordOptions::encrypt_to`].
    EncryptTo,
    /// [`RecordOptions::encrypt_to_file`].
    EncryptToFile,
    /// [`RecordOptions::keep_bytes`] and [`RecordOptions::volume_keep_bytes`].
    KeepBytes,
    /// [`RecordOptions::min_free`] and [`RecordOptions::volume_min_free`].
    MinFree,
    /// [`RecordOptions::keep_files`].
    KeepFiles,
    /// [`RecordOptions::keep_age`].
    KeepAge,
    /// [`RecordOptions::on_full_rotate`].
    OnFullRotate,
    /// [`RecordOptions::rotate_size`].
    RotateSize,
    /// [`RecordOptions::rotate_time`].
    RotateTime,
    /// [`RecordOptions::wait_iface`] (named in the notices of a vanished
    /// interface).
    WaitIface,
}

impl From<Limit> for Opt {
    /// The option that sets a retention or rotation limit.
    fn from(l: Limit) -> Opt {
        match l {
            Limit::KeepFiles => Opt::KeepFiles,
            Limit::KeepAge => Opt::KeepAge,
            Limit::MinFree => Opt::MinFree,
            Limit::OnFullRotate => Opt::OnFullRotate,
            Limit::RotateSize => Opt::RotateSize,
            Limit::RotateTime => Opt::RotateTime,
            _ => Opt::KeepBytes,
        }
    }
}

impl std::fmt::Display for Opt {
    /// The field's name (`cutoff`, `writer_cpus`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            Opt::Speed => "speed",
            Opt::Queues => "queues",
            Opt::Cpus => "cpus",
            Opt::WriterCpus => "writer_cpus",
            Opt::Ts => "ts",
            Opt::XdpMode => "xdp_mode",
            Opt::ZeroCopy => "zero_copy",
            Opt::Frames => "frames",
            Opt::FrameSize => "frame_size",
            Opt::PacketBlocks => "packet_blocks",
            Opt::PacketBlockKib => "packet_block_kib",
            Opt::PacketRetireMs => "packet_retire_ms",
            Opt::PacketSockets => "packet_sockets",
            Opt::PacketInPlace => "packet_in_place",
            Opt::NetmapSlots => "netmap_slots",
            Opt::BusyPoll => "busy_poll",
            Opt::Cutoff => "cutoff",
            Opt::Io => "io",
            Opt::Format => "format",
            Opt::Compress => "compress",
            Opt::EncryptTo => "encrypt_to",
            Opt::EncryptToFile => "encrypt_to_file",
            Opt::KeepBytes => "keep_bytes",
            Opt::MinFree => "min_free",
            Opt::KeepFiles => "keep_files",
            Opt::KeepAge => "keep_age",
            Opt::OnFullRotate => "on_full_rotate",
            Opt::RotateSize => "rotate_size",
            Opt::RotateTime => "rotate_time",
            Opt::WaitIface => "wait_iface",
        };
        f.write_str(name)
    }
}

/// Why [`RecordOptions::packet_in_place`] cannot be: the option it
/// conflicts with, in the order they are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InPlaceConflict {
    /// Not pcapng: blocks are laid out in place as pcapng.
    #[error("blocks are laid out as pcapng: the format must be pcapng")]
    NotPcapng,
    /// Microsecond stamps: the kernel's are nanoseconds.
    #[error("the kernel's stamps are nanoseconds: the precision must be ns")]
    MicroStamps,
    /// Compression: compressed files are written from RAM blocks.
    #[error("compressed files are written from RAM blocks")]
    Compressed,
    /// Encryption: encrypted files are written from RAM blocks.
    #[error("encrypted files are written from RAM blocks")]
    Encrypted,
    /// A frame count: it may end a run inside a block.
    #[error("a frame count may end a run inside a block")]
    Count,
    /// A snap length below the default: frames are written uncut.
    #[error("frames are written uncut: the snap length must be the default")]
    Snaplen,
    /// Stamps other than the kernel's (hw, xdp).
    #[error("frames carry the kernel's stamps: the timestamp mode must be hw or xdp")]
    Stamps,
}

/// The first problem [`RecordOptions::build`] found.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// Neither interfaces nor a capture file to read.
    #[error("no input: give an interface or a capture file to read")]
    NoInput,
    /// No output directory.
    #[error("no output directory: give at least one")]
    NoOutput,
    /// The netmap engine, in a build without it.
    #[error(transparent)]
    NetmapNotBuilt(CaptureError),
    /// An option a capture file has no use for.
    #[error("{option} does not apply to a capture file")]
    NotForFile {
        /// The option.
        option: Opt,
    },
    /// An option the engine in use does not have.
    #[error("{option} does not apply to the {engine} engine")]
    NotFor {
        /// The option.
        option: Opt,
        /// The engine in use (never auto).
        engine: EngineOpt,
    },
    /// Several interfaces, with an engine that records one.
    #[error("the {engine} engine records one interface per run")]
    SeveralInterfaces {
        /// The engine.
        engine: EngineOpt,
    },
    /// Blocks laid out in place, with an option that needs them copied.
    #[error("ring blocks laid out in place: {0}")]
    InPlace(InPlaceConflict),
    /// A list of numbers that does not parse.
    #[error("{option}: {error}")]
    List {
        /// The option ([`Opt::Queues`], [`Opt::Cpus`], [`Opt::WriterCpus`]).
        option: Opt,
        /// What is wrong with it.
        #[source]
        error: ListError,
    },
    /// A CPU this process may not run on.
    #[error("{option}: {error}")]
    CpuNotAllowed {
        /// The option ([`Opt::Cpus`], [`Opt::WriterCpus`]).
        option: Opt,
        /// The CPU and the allowed ones.
        #[source]
        error: NotAllowed,
    },
    /// The packet engine's ring sizes, or its queues or sockets against
    /// the interface (the capture side's words).
    #[error(transparent)]
    Packet(CaptureError),
    /// The compression's name refused ([`Opt::Compress`]).
    #[error("{0}")]
    Compress(#[source] wiretape_files::compress::CompressError),
    /// The file format and stamp precision refused ([`Opt::Format`]).
    #[error("{0}")]
    Format(#[source] wiretape_files::FormatError),
    /// A value its parser refuses (the parser's words).
    #[error("{message}")]
    Value {
        /// The option.
        option: Opt,
        /// What the parser said.
        message: String,
    },
    /// A recipient, or a recipients' file, refused (its words name it).
    #[error("{error}")]
    Key {
        /// The option.
        option: Opt,
        /// What is wrong with it.
        #[source]
        error: wiretape_files::crypt::KeyError,
    },
    /// A live stream on an address beyond loopback, not allowed.
    #[error(transparent)]
    NotLoopback(crate::LiveError),
    /// A volume's own limit for a directory that is not one of the
    /// volumes ([`RecordOptions::dirs`], compared as canonical paths).
    #[error("{option}: {} is not one of the volumes ({})", dir.display(), dir_list(volumes))]
    NotAVolume {
        /// The option ([`Opt::KeepBytes`], [`Opt::MinFree`]).
        option: Opt,
        /// The directory as given.
        dir: PathBuf,
        /// The volumes as given.
        volumes: Vec<PathBuf>,
    },
    /// A limit given twice: for the whole store, or for one volume.
    #[error("{option} is given twice for {}", dir.as_ref().map_or("the whole store".into(), |d| d.display().to_string()))]
    LimitTwice {
        /// The option ([`Opt::KeepBytes`], [`Opt::MinFree`]).
        option: Opt,
        /// The volume as given (none: the whole store).
        dir: Option<PathBuf>,
    },
}

/// Directories, comma-separated, for an error's words.
fn dir_list(dirs: &[PathBuf]) -> String {
    let d: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    d.join(", ")
}

/// A limit as given: for the whole store (`SIZE`) or for one volume
/// (`DIR=SIZE`); see [`parse_keep_bytes_scoped`], [`Scoped::split`].
#[derive(Clone, Debug, PartialEq)]
pub enum Scoped<T> {
    /// For the whole store.
    Store(T),
    /// For the volume in this directory (one of [`RecordOptions::dirs`]).
    Volume(PathBuf, T),
}

impl<T: Clone> Scoped<T> {
    /// The store's value and the volumes' of a repeatable option (for
    /// [`RecordOptions::keep_bytes`] and [`RecordOptions::volume_keep_bytes`],
    /// say); the store's given twice is refused as `option`'s.
    #[allow(clippy::type_complexity)]
    pub fn split(
        given: &[Scoped<T>],
        option: Opt,
    ) -> Result<(Option<T>, Vec<(PathBuf, T)>), OptionsError> {
        let (mut store, mut volumes) = (None, Vec::new());
        for g in given {
            match g {
                Scoped::Store(_) if store.is_some() => {
                    return Err(OptionsError::LimitTwice { option, dir: None });
                }
                Scoped::Store(v) => store = Some(v.clone()),
                Scoped::Volume(d, v) => volumes.push((d.clone(), v.clone())),
            }
        }
        Ok((store, volumes))
    }
}

/// Every option of a recording, as values; [`RecordOptions::build`] makes
/// the [`RecordConfig`]. [`Default`] (and [`RecordOptions::new`]) holds
/// the defaults `wiretape record` has.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RecordOptions {
    /// Interfaces to record (none: [`RecordOptions::read`]).
    pub interfaces: Vec<String>,
    /// A capture file to feed through the pipeline instead.
    pub read: Option<PathBuf>,
    /// How fast the file is fed (`max`, `original`, `2x`, a frame or bit rate).
    pub speed: String,
    /// Output directories (volumes); the first is the main one.
    pub dirs: Vec<PathBuf>,
    /// Frames to record in total.
    pub count: Option<u64>,
    /// How long to record.
    pub duration: Option<Duration>,
    /// Bytes kept of each frame.
    pub snaplen: u32,
    /// RX queues (`all` or a list such as `0,1` or `0-3`; none: all).
    pub queues: Option<String>,
    /// CPUs of the poll threads (a list).
    pub cpus: Option<String>,
    /// CPUs of the writer threads (a list).
    pub writer_cpus: Option<String>,
    /// Timestamp mode by name (none: the engine's default).
    pub ts: Option<String>,
    /// Where the XDP program runs (none: native, else generic).
    pub xdp_mode: Option<XdpMode>,
    /// AF_XDP zero-copy (none: try it, else copy).
    pub zero_copy: Option<bool>,
    /// UMEM frames per queue.
    pub frames: Option<u32>,
    /// Bytes per UMEM frame.
    pub frame_size: Option<u32>,
    /// The engine.
    pub engine: EngineOpt,
    /// What [`EngineOpt::Auto`] picks on this site, whatever else (the CLI
    /// reads it from `WIRETAPE_ENGINE`).
    pub site_engine: Option<Engine>,
    /// Packet engine: ring blocks per queue.
    pub packet_blocks: Option<u32>,
    /// Packet engine: KiB per ring block.
    pub packet_block_kib: Option<u32>,
    /// Packet engine: the block timer in milliseconds.
    pub packet_retire_ms: Option<u32>,
    /// Packet engine: sockets reading the interface.
    pub packet_sockets: Option<u32>,
    /// Packet engine: ring blocks laid out in place as pcapng.
    pub packet_in_place: bool,
    /// Packet engine: the smallest average ring bytes per frame laid out in place.
    pub packet_in_place_min: Option<u32>,
    /// Packet engine: bytes waiting for the disk above which a block laid
    /// out in place is copied instead (none: a quarter of a queue's ring).
    pub packet_in_place_backlog: Option<u64>,
    /// netmap: slots per RX ring.
    pub netmap_slots: Option<u32>,
    /// Most frames a poll thread takes at once.
    pub batch: usize,
    /// Microseconds a poll thread sleeps on a dry ring (none: 1000, netmap 50).
    pub poll_sleep_us: Option<u64>,
    /// AF_XDP busy polling, in microseconds.
    pub busy_poll: Option<u32>,
    /// A partly filled block is written after this long.
    pub flush_interval: Duration,
    /// File name prefix.
    pub prefix: String,
    /// How files are written (`auto`, `direct`, `buffered`).
    pub io: String,
    /// Block size in KiB.
    pub block_kib: u64,
    /// A new file before one grows past this many bytes.
    pub rotate_size: Option<u64>,
    /// A new file every this much packet time.
    pub rotate_time: Option<Duration>,
    /// File format (`pcap`, `pcapng`).
    pub format: String,
    /// pcap stamp precision (`ns`, `us`).
    pub tsprec: String,
    /// Retention: at most this many files.
    pub keep_files: Option<u64>,
    /// Retention: at most this many bytes, all volumes together.
    pub keep_bytes: Option<u64>,
    /// Retention: at most this many bytes on one volume (a directory of
    /// [`RecordOptions::dirs`], as given or another path to it), each
    /// volume once.
    pub volume_keep_bytes: Vec<(PathBuf, u64)>,
    /// Retention: no file older than this.
    pub keep_age: Option<Duration>,
    /// Retention: at least this much free space (on each volume's
    /// filesystem).
    pub min_free: Option<MinFree>,
    /// Retention: one volume's own free-space floor, in place of
    /// [`RecordOptions::min_free`] there (each volume once).
    pub volume_min_free: Vec<(PathBuf, MinFree)>,
    /// A full disk: delete the oldest files and go on (else stop).
    pub on_full_rotate: bool,
    /// The `.idx` sidecar.
    pub index: bool,
    /// Flow keys in the `.idx`.
    pub flow_index: bool,
    /// The exact key index (`.kdx`).
    pub key_index: bool,
    /// The session table.
    pub sessions: bool,
    /// Compression at rest (`none`, `lz4`, `zstd[:LEVEL]`).
    pub compress: String,
    /// Compressing threads (none: the cores less one).
    pub compress_threads: Option<u64>,
    /// age recipients to encrypt to (`age1...`).
    pub encrypt_to: Vec<String>,
    /// Files of age recipients to encrypt to.
    pub encrypt_to_file: Vec<PathBuf>,
    /// Readers' options (identities for encrypted files).
    pub read_options: wiretape_files::ReadOptions,
    /// Bytes kept of each connection.
    pub cutoff: Option<u64>,
    /// Connections the cutoff tracks at once.
    pub cutoff_flows: u64,
    /// RAM in MiB for blocks waiting for the disk.
    pub buffer_mib: Option<u64>,
    /// Blocks per file.
    pub write_buffers: u64,
    /// Bytes of the time-travel ring.
    pub ring: Option<u64>,
    /// Write only the ring's dumps, no capture files.
    pub ring_only: bool,
    /// What the dump trigger dumps (none: the whole ring).
    pub dump_window: Option<Duration>,
    /// PCAP-over-IP on this address.
    pub serve: Option<SocketAddr>,
    /// Most PCAP-over-IP clients at once.
    pub serve_max_clients: u64,
    /// Allow [`RecordOptions::serve`] beyond loopback.
    pub serve_allow_remote: bool,
    /// Wait for a vanished interface and record on.
    pub wait_iface: bool,
    /// The capture filter (a tcpdump expression).
    pub filter: Option<String>,
}

impl Default for RecordOptions {
    fn default() -> RecordOptions {
        RecordOptions {
            interfaces: Vec::new(),
            read: None,
            speed: "max".into(),
            dirs: Vec::new(),
            count: None,
            duration: None,
            snaplen: DEFAULT_SNAPLEN,
            queues: None,
            cpus: None,
            writer_cpus: None,
            ts: None,
            xdp_mode: None,
            zero_copy: None,
            frames: None,
            frame_size: None,
            engine: EngineOpt::Auto,
            site_engine: None,
            packet_blocks: None,
            packet_block_kib: None,
            packet_retire_ms: None,
            packet_sockets: None,
            packet_in_place: false,
            packet_in_place_min: None,
            packet_in_place_backlog: None,
            netmap_slots: None,
            batch: 1024,
            poll_sleep_us: None,
            busy_poll: None,
            flush_interval: Duration::from_secs(1),
            prefix: "wiretape".into(),
            io: "auto".into(),
            block_kib: 1024,
            rotate_size: None,
            rotate_time: None,
            format: "pcap".into(),
            tsprec: "ns".into(),
            keep_files: None,
            keep_bytes: None,
            volume_keep_bytes: Vec::new(),
            keep_age: None,
            min_free: None,
            volume_min_free: Vec::new(),
            on_full_rotate: false,
            index: true,
            flow_index: true,
            key_index: true,
            sessions: true,
            compress: "none".into(),
            compress_threads: None,
            encrypt_to: Vec::new(),
            encrypt_to_file: Vec::new(),
            read_options: wiretape_files::ReadOptions::new(),
            cutoff: None,
            cutoff_flows: 1 << 20,
            buffer_mib: None,
            write_buffers: 16,
            ring: None,
            ring_only: false,
            dump_window: None,
            serve: None,
            serve_max_clients: 8,
            serve_allow_remote: false,
            wait_iface: false,
            filter: None,
        }
    }
}

/// What [`RecordOptions::build`] makes.
#[derive(Debug)]
#[non_exhaustive]
pub struct Built {
    /// The recording.
    pub config: RecordConfig,
    /// Why the automatic engine choice chose as it did (none: the engine
    /// was given, or nothing could be learnt).
    pub engine_reason: Option<String>,
    /// The ring-dump trigger the config's live side holds (set it to dump).
    pub trigger: Arc<AtomicBool>,
}

impl RecordOptions {
    /// The defaults, recording `interfaces` into `dir`.
    pub fn new<S: Into<String>>(
        interfaces: impl IntoIterator<Item = S>,
        dir: impl Into<PathBuf>,
    ) -> RecordOptions {
        RecordOptions {
            interfaces: interfaces.into_iter().map(Into::into).collect(),
            dirs: vec![dir.into()],
            ..RecordOptions::default()
        }
    }

    /// The recording these options ask for (see the module docs); the
    /// automatic choice's reason names an option as [`Opt`]'s `Display`
    /// does (`cutoff`).
    pub fn build(&self) -> Result<Built, OptionsError> {
        self.build_naming(&|o| o.to_string())
    }

    /// [`RecordOptions::build`], with the automatic choice's reason naming
    /// an option that settled it as `name` says (the CLI: its flag).
    pub fn build_naming(&self, name: &dyn Fn(Opt) -> String) -> Result<Built, OptionsError> {
        if self.engine == EngineOpt::Netmap && !wiretape_capture::netmap::BUILT {
            return Err(OptionsError::NetmapNotBuilt(CaptureError::NetmapNotBuilt));
        }
        let dir = self.dirs.first().ok_or(OptionsError::NoOutput)?;
        let volumes = self.volume_limits()?;
        let (input, engine_reason) = self.input(name)?;
        let netmap = matches!(input, Input::Netmap(_));
        let mut c = match &input {
            Input::File(f) => RecordConfig::file(&f.path, dir),
            Input::Interface(i) => RecordConfig::interface(&i.ifname, dir),
            Input::Netmap(n) => RecordConfig::netmap(&n.ifname, dir),
            Input::Interfaces(_) | Input::Packet(_) => {
                let names: Vec<&str> = self.interfaces.iter().map(String::as_str).collect();
                RecordConfig::interfaces(&names, dir)
            }
        };
        c.input = input;
        c.storage.more_dirs = self.dirs[1..].to_vec();
        c.storage.read = self.read_options.clone();
        if let Some(ts) = &self.ts {
            c.ts = ts.parse().map_err(|message| OptionsError::Value {
                option: Opt::Ts,
                message,
            })?;
        }
        c.stage.count = self.count;
        c.stage.batch = self.batch;
        let sleep_us = self.poll_sleep_us.unwrap_or(if netmap { 50 } else { 1000 });
        c.stage.idle_sleep = Duration::from_micros(sleep_us);
        c.duration = self.duration;
        c.filter = self.filter.clone();
        c.wait_iface = self.wait_iface;
        c.wait_iface_name = name(Opt::WaitIface);
        let st = &mut c.storage;
        st.snaplen = self.snaplen;
        st.flush_interval = self.flush_interval;
        st.prefix = self.prefix.clone();
        st.io = value(Opt::Io, self.io.parse())?;
        st.block_size = self.block_kib as usize * 1024;
        st.buffers = self.write_buffers as usize;
        st.rotate_size = self.rotate_size;
        st.rotate_time = self.rotate_time;
        if let Some(m) = self.buffer_mib {
            st.buffer_bytes = m << 20;
        }
        st.format = wiretape_files::Format::from_flags(&self.format, &self.tsprec)
            .map_err(OptionsError::Format)?;
        st.index = self.index;
        st.flow_index = self.flow_index;
        st.key_index = self.key_index;
        st.sessions = self.sessions;
        st.compress = self.compress.parse().map_err(OptionsError::Compress)?;
        if let Some(n) = self.compress_threads {
            st.compress_threads = n as usize;
        }
        st.encrypt_to = self.recipients()?;
        st.retention = Policy {
            keep_files: self.keep_files.map(|n| n as usize),
            keep_bytes: self.keep_bytes,
            keep_age: self.keep_age,
            min_free: self.min_free,
            volumes,
        };
        st.on_full_rotate = self.on_full_rotate;
        st.retention_words = LimitWords::naming(&|l| name(Opt::from(l)));
        // Laid out in place, a ring block is the kernel's again only once
        // the disk has it: a run is written from the ring only while less
        // than a quarter of a queue's ring waits for the disk, else copied.
        let ring = self.packet_blocks.unwrap_or(64) as u64
            * self.packet_block_kib.unwrap_or(1024) as u64
            * 1024;
        st.direct_backlog_max = self.packet_in_place_backlog.unwrap_or(ring / 4);
        let trigger = Arc::new(AtomicBool::new(false));
        let lv = &mut c.live;
        lv.ring_bytes = self.ring.unwrap_or(0);
        lv.write_files = !self.ring_only;
        lv.trigger_window = self.dump_window;
        lv.trigger = Some(trigger.clone());
        if let Some(addr) = self.serve {
            if !crate::live::may_listen(addr, self.serve_allow_remote) {
                return Err(OptionsError::NotLoopback(crate::LiveError::NotLoopback(
                    addr,
                )));
            }
            let mut sc = crate::ServeConfig::new(addr);
            sc.max_clients = self.serve_max_clients as usize;
            sc.allow_remote = self.serve_allow_remote;
            lv.serve = Some(sc);
        }
        Ok(Built {
            config: c,
            engine_reason,
            trigger,
        })
    }

    /// The first option given that only AF_XDP has, which settles the
    /// automatic choice.
    fn afxdp_only(&self) -> Option<Opt> {
        [
            (self.cutoff.is_some(), Opt::Cutoff),
            (self.busy_poll.is_some(), Opt::BusyPoll),
            (self.xdp_mode.is_some(), Opt::XdpMode),
            (self.zero_copy.is_some(), Opt::ZeroCopy),
            (self.frames.is_some(), Opt::Frames),
            (self.frame_size.is_some(), Opt::FrameSize),
            (
                self.queues.as_deref().is_some_and(|q| q.trim() != "all"),
                Opt::Queues,
            ),
        ]
        .into_iter()
        .find(|(given, _)| *given)
        .map(|(_, o)| o)
    }

    /// The first of the packet engine's ring options given.
    fn packet_sized(&self) -> Option<Opt> {
        [
            (self.packet_blocks.is_some(), Opt::PacketBlocks),
            (self.packet_block_kib.is_some(), Opt::PacketBlockKib),
            (self.packet_retire_ms.is_some(), Opt::PacketRetireMs),
            (self.packet_sockets.is_some(), Opt::PacketSockets),
        ]
        .into_iter()
        .find(|(given, _)| *given)
        .map(|(_, o)| o)
    }

    /// The engine: the one given, else the packet engine where its ring is
    /// sized or laid out in place, else [`choose_engine`]'s, with its reason.
    fn resolve_engine(&self, name: &dyn Fn(Opt) -> String) -> (EngineOpt, Option<String>) {
        if self.engine != EngineOpt::Auto {
            return (self.engine, None);
        }
        if self.packet_sized().is_some() || self.packet_in_place {
            return (EngineOpt::Packet, None);
        }
        let hints = AutoHints {
            site: self.site_engine,
            afxdp_only: self.afxdp_only().map(name),
        };
        let c = choose_engine(&self.interfaces, &hints);
        (c.engine.into(), c.reason)
    }

    /// `--packet-in-place` against the other options: the first conflict.
    fn in_place_conflict(&self) -> Option<InPlaceConflict> {
        use InPlaceConflict as C;
        [
            (self.format != "pcapng", C::NotPcapng),
            (self.tsprec != "ns", C::MicroStamps),
            (self.compress != "none", C::Compressed),
            (
                !self.encrypt_to.is_empty() || !self.encrypt_to_file.is_empty(),
                C::Encrypted,
            ),
            (self.count.is_some(), C::Count),
            (self.snaplen < DEFAULT_SNAPLEN, C::Snaplen),
            (
                !matches!(self.ts.as_deref(), None | Some("hw") | Some("xdp")),
                C::Stamps,
            ),
        ]
        .into_iter()
        .find(|(conflict, _)| *conflict)
        .map(|(_, c)| c)
    }

    /// The capture side, with the automatic choice's reason.
    fn input(&self, name: &dyn Fn(Opt) -> String) -> Result<(Input, Option<String>), OptionsError> {
        if let Some(path) = &self.read {
            if self.busy_poll.is_some() {
                return Err(OptionsError::NotForFile {
                    option: Opt::BusyPoll,
                });
            }
            let mut f = FileConfig::new(path);
            f.speed = value(Opt::Speed, self.speed.parse())?;
            f.cpu = cpus(&self.cpus, Opt::Cpus)?.and_then(|c| c.first().copied());
            f.writer_cpu =
                cpus(&self.writer_cpus, Opt::WriterCpus)?.and_then(|c| c.first().copied());
            f.cutoff = self.cutoff.map(|size| (size, self.cutoff_flows as usize));
            return Ok((Input::File(f), None));
        }
        let iface = self.interfaces.first().ok_or(OptionsError::NoInput)?;
        if self.packet_in_place {
            if let Some(why) = self.in_place_conflict() {
                return Err(OptionsError::InPlace(why));
            }
        }
        let (engine, reason) = self.resolve_engine(name);
        let not_for = |option| Err(OptionsError::NotFor { option, engine });
        if self.cutoff.is_some() && engine != EngineOpt::Afxdp {
            return not_for(Opt::Cutoff);
        }
        if engine != EngineOpt::Packet {
            if let Some(o) = self.packet_sized() {
                return not_for(o);
            }
            if self.packet_in_place {
                return not_for(Opt::PacketInPlace);
            }
        }
        let queues = || match self.queues.as_deref().map(str::trim) {
            None | Some("all") => Ok(None),
            Some(s) => list(s, Opt::Queues).map(Some),
        };
        if engine == EngineOpt::Netmap {
            if self.interfaces.len() > 1 {
                return Err(OptionsError::SeveralInterfaces { engine });
            }
            if self.busy_poll.is_some() {
                return not_for(Opt::BusyPoll);
            }
            self.refuse_socket_options(engine)?;
            let mut c = NetmapConfig::new(iface);
            c.queues = queues()?;
            c.cpus = cpus(&self.cpus, Opt::Cpus)?;
            c.writer_cpus = cpus(&self.writer_cpus, Opt::WriterCpus)?;
            c.slots = self.netmap_slots;
            return Ok((Input::Netmap(c), reason));
        }
        if self.netmap_slots.is_some() {
            return not_for(Opt::NetmapSlots);
        }
        if engine == EngineOpt::Packet {
            if self.busy_poll.is_some() {
                return not_for(Opt::BusyPoll);
            }
            self.refuse_socket_options(engine)?;
            let cpus_ = cpus(&self.cpus, Opt::Cpus)?;
            let writer_cpus = cpus(&self.writer_cpus, Opt::WriterCpus)?;
            let queues = queues()?;
            let list = self
                .interfaces
                .iter()
                .map(|name| {
                    let mut c = PacketConfig::new(name);
                    c.queues = queues.clone();
                    c.cpus = cpus_.clone();
                    c.writer_cpus = writer_cpus.clone();
                    if let Some(n) = self.packet_blocks {
                        c.blocks = n;
                    }
                    if let Some(k) = self.packet_block_kib {
                        c.block_size = k.saturating_mul(1024);
                    }
                    if let Some(ms) = self.packet_retire_ms {
                        c.retire_ms = ms;
                    }
                    c.sockets = self.packet_sockets;
                    c.in_place = self.packet_in_place;
                    if let Some(m) = self.packet_in_place_min {
                        c.in_place_min_slot = m;
                    }
                    c
                })
                .collect::<Vec<_>>();
            // The sizes, and the queues and sockets against each interface
            // (one that is missing is for the recording to refuse).
            if let Some(c) = list.first() {
                c.check_sizes().map_err(OptionsError::Packet)?;
            }
            for c in list.iter().filter(|c| sys::ifindex(&c.ifname).is_some()) {
                c.check_interface().map_err(OptionsError::Packet)?;
            }
            return Ok((Input::Packet(list), reason));
        }
        let mut c = CaptureConfig::new(iface);
        c.queues = queues()?;
        c.cpus = cpus(&self.cpus, Opt::Cpus)?;
        c.writer_cpus = cpus(&self.writer_cpus, Opt::WriterCpus)?;
        c.xdp_mode = self.xdp_mode;
        c.zero_copy = self.zero_copy;
        if let Some(n) = self.frames {
            c.frames = n;
        }
        if let Some(n) = self.frame_size {
            c.frame_size = n;
        }
        c.cutoff = self.cutoff.map(|size| XdpCutoff {
            size,
            flows: self.cutoff_flows.min(u32::MAX as u64) as u32,
        });
        c.busy_poll = self.busy_poll.map(|usecs| BusyPoll {
            usecs,
            budget: self.batch.clamp(1, u16::MAX as usize) as u16,
        });
        if self.interfaces.len() > 1 {
            // The same settings on each; the CPU lists cover all queues.
            let each = self.interfaces.iter().map(|name| {
                let mut c = c.clone();
                c.ifname = name.clone();
                c
            });
            return Ok((Input::Interfaces(each.collect()), reason));
        }
        Ok((Input::Interface(c), reason))
    }

    /// Refuses AF_XDP's socket and UMEM options for another engine.
    fn refuse_socket_options(&self, engine: EngineOpt) -> Result<(), OptionsError> {
        for (given, option) in [
            (self.xdp_mode.is_some(), Opt::XdpMode),
            (self.zero_copy.is_some(), Opt::ZeroCopy),
            (self.frames.is_some(), Opt::Frames),
            (self.frame_size.is_some(), Opt::FrameSize),
        ] {
            if given {
                return Err(OptionsError::NotFor { option, engine });
            }
        }
        Ok(())
    }

    /// Each volume's own limits, by its directory as in
    /// [`RecordOptions::dirs`] (the paths given for them may be other
    /// paths to it: compared canonically).
    fn volume_limits(&self) -> Result<BTreeMap<PathBuf, VolumeLimits>, OptionsError> {
        let canon: Vec<PathBuf> = self
            .dirs
            .iter()
            .map(|d| crate::preflight::canonical(d))
            .collect();
        let volume = |option, dir: &Path| {
            let c = crate::preflight::canonical(dir);
            match canon.iter().position(|v| *v == c) {
                Some(i) => Ok(self.dirs[i].clone()),
                None => Err(OptionsError::NotAVolume {
                    option,
                    dir: dir.to_owned(),
                    volumes: self.dirs.clone(),
                }),
            }
        };
        let twice = |option, dir: &Path| OptionsError::LimitTwice {
            option,
            dir: Some(dir.to_owned()),
        };
        let mut m: BTreeMap<PathBuf, VolumeLimits> = BTreeMap::new();
        for (dir, bytes) in &self.volume_keep_bytes {
            let own = m.entry(volume(Opt::KeepBytes, dir)?).or_default();
            if own.keep_bytes.replace(*bytes).is_some() {
                return Err(twice(Opt::KeepBytes, dir));
            }
        }
        for (dir, floor) in &self.volume_min_free {
            let own = m.entry(volume(Opt::MinFree, dir)?).or_default();
            if own.min_free.replace(*floor).is_some() {
                return Err(twice(Opt::MinFree, dir));
            }
        }
        Ok(m)
    }

    /// The recipients to encrypt to (none: files are written plain).
    fn recipients(&self) -> Result<Option<wiretape_files::crypt::Recipients>, OptionsError> {
        use wiretape_files::crypt::{parse_recipient, read_recipients_file, Recipients};
        let mut to = Vec::new();
        for r in &self.encrypt_to {
            to.push(parse_recipient(r).map_err(|error| OptionsError::Key {
                option: Opt::EncryptTo,
                error,
            })?);
        }
        for f in &self.encrypt_to_file {
            to.extend(read_recipients_file(f).map_err(|error| OptionsError::Key {
                option: Opt::EncryptToFile,
                error,
            })?);
        }
        Ok((!to.is_empty()).then_some(Recipients(to)))
    }
}

/// A parsed value, or its parser's words as the option's error.
fn value<T>(option: Opt, r: Result<T, String>) -> Result<T, OptionsError> {
    r.map_err(|message| OptionsError::Value { option, message })
}

/// A list of numbers (`0,1,4-6`).
fn list(s: &str, option: Opt) -> Result<Vec<u32>, OptionsError> {
    cpulist::parse(s).map_err(|error| OptionsError::List { option, error })
}

/// A list of CPUs, each one this process may run on.
fn cpus(s: &Option<String>, option: Opt) -> Result<Option<Vec<usize>>, OptionsError> {
    let Some(s) = s else { return Ok(None) };
    let cpus: Vec<usize> = list(s, option)?.into_iter().map(|c| c as usize).collect();
    cpulist::check(&cpus, &sys::allowed_cpus())
        .map_err(|error| OptionsError::CpuNotAllowed { option, error })?;
    Ok(Some(cpus))
}

/// A size, a percentage or a duration that does not parse (the text
/// says which, with an example).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// Not a size.
    #[error("'{0}' is not a size: use e.g. 1G, 512M, 100000")]
    NotASize(String),
    /// A size with a unit other than K, M, G, T.
    #[error("'{value}': unknown unit '{unit}' (use K, M, G or T)")]
    Unit {
        /// The size as given.
        value: String,
        /// Its unit.
        unit: String,
    },
    /// A rotation size below 64 KiB.
    #[error("'{0}' is too small: files rotate at 64K at the least")]
    RotateTooSmall(String),
    /// A ring below 4 MiB.
    #[error("'{0}' is too small: the ring holds at least 4M")]
    RingTooSmall(String),
    /// Not a percentage.
    #[error("'{0}' is not a percentage: use e.g. 5%")]
    NotAPercentage(String),
    /// A percentage outside 0 to 100.
    #[error("'{0}': a percentage between 0 and 100")]
    Percentage(String),
    /// Not a duration.
    #[error("'{0}' is not a duration: use e.g. 60s, 5m, 1h")]
    NotADuration(String),
    /// A duration of zero or less.
    #[error("'{0}' must be a positive duration")]
    DurationNotPositive(String),
    /// Not a number of seconds.
    #[error("'{0}' is not a number of seconds")]
    NotSeconds(String),
    /// Seconds of zero or less.
    #[error("'{0}' must be a positive number of seconds")]
    SecondsNotPositive(String),
    /// `=VALUE` without the volume's directory.
    #[error("'{0}': name the volume before '=' (e.g. /disk3=400G), or give the value alone for the whole store")]
    NoVolume(String),
    /// Neither `HOST:PORT` nor a port.
    #[error("'{0}' is not an address to listen on: use e.g. 127.0.0.1:9750, [::1]:9750 or 9750")]
    NotAnAddress(String),
}

/// `123`, `64K`, `512M`, `1G`, `2T` (binary units; `KiB`/`MB` spellings
/// too; fractions allowed) in bytes.
pub fn parse_bytes(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().map_err(|_| ValueError::NotASize(s.into()))?;
    let mul = match unit
        .trim()
        .to_ascii_lowercase()
        .trim_end_matches('b')
        .trim_end_matches('i')
    {
        "" => 1u64,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => {
            return Err(ValueError::Unit {
                value: s.into(),
                unit: unit.into(),
            })
        }
    };
    Ok((v * mul as f64) as u64)
}

/// `n` bytes as [`parse_bytes`] takes them, in the largest binary unit
/// it is a whole number of (`400G`, `1536M`, `1000`).
pub fn size_text(n: u64) -> String {
    for (shift, unit) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// A free-space floor as [`parse_min_free`] takes it (`5%`, `10G`).
pub fn min_free_text(m: MinFree) -> String {
    match m {
        MinFree::Percent(p) => format!("{p}%"),
        MinFree::Bytes(b) => size_text(b),
    }
}

/// A rotation size: [`parse_bytes`], at least 64 KiB.
pub fn parse_rotate_size(s: &str) -> Result<u64, ValueError> {
    let bytes = parse_bytes(s)?;
    if bytes < 64 << 10 {
        return Err(ValueError::RotateTooSmall(s.into()));
    }
    Ok(bytes)
}

/// A time-travel ring's size: [`parse_bytes`], at least 4 MiB.
pub fn parse_ring_size(s: &str) -> Result<u64, ValueError> {
    let bytes = parse_bytes(s)?;
    if bytes < 4 << 20 {
        return Err(ValueError::RingTooSmall(s.into()));
    }
    Ok(bytes)
}

/// Free space to keep: a size ([`parse_bytes`], `10G`) or a percentage of
/// the filesystem (`5%`).
pub fn parse_min_free(s: &str) -> Result<MinFree, ValueError> {
    if let Some(p) = s.trim().strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| ValueError::NotAPercentage(s.into()))?;
        if !(0.0..100.0).contains(&v) {
            return Err(ValueError::Percentage(s.into()));
        }
        return Ok(MinFree::Percent(v));
    }
    parse_bytes(s).map(MinFree::Bytes)
}

/// `--keep-bytes`: a size for the whole store ([`parse_bytes`], `10T`) or
/// for one volume, `DIR=SIZE` (`/disk3=400G`; the size after the last
/// `=`).
pub fn parse_keep_bytes_scoped(s: &str) -> Result<Scoped<u64>, ValueError> {
    scoped(s, parse_bytes)
}

/// `--min-free`: a floor for every volume ([`parse_min_free`], `10G`,
/// `5%`) or one volume's own, `DIR=SIZE|PCT%` (`/disk3=5%`).
pub fn parse_min_free_scoped(s: &str) -> Result<Scoped<MinFree>, ValueError> {
    scoped(s, parse_min_free)
}

/// `VALUE` or `DIR=VALUE`, the value by `parse`.
fn scoped<T>(s: &str, parse: fn(&str) -> Result<T, ValueError>) -> Result<Scoped<T>, ValueError> {
    match s.rsplit_once('=') {
        None => parse(s).map(Scoped::Store),
        Some((dir, _)) if dir.trim().is_empty() => Err(ValueError::NoVolume(s.into())),
        Some((dir, v)) => parse(v).map(|v| Scoped::Volume(dir.into(), v)),
    }
}

/// `90`, `90s`, `5m`, `1h`, `1d`, `1.5s`: positive.
pub fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        Some((i, 'd')) => (&t[..i], 86400.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| ValueError::NotADuration(s.into()))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(ValueError::DurationNotPositive(s.into()));
    }
    Ok(Duration::from_secs_f64(v * mul))
}

/// A positive number of seconds (fractions allowed).
pub fn parse_secs(s: &str) -> Result<Duration, ValueError> {
    let v: f64 = s.parse().map_err(|_| ValueError::NotSeconds(s.into()))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(ValueError::SecondsNotPositive(s.into()));
    }
    Ok(Duration::from_secs_f64(v))
}

/// An address to listen on (the metrics endpoint's: [`crate::metrics::Metrics::serve`]): `HOST:PORT`
/// (`127.0.0.1:9750`, `[::1]:9750`), or a bare port, on 127.0.0.1.
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, ValueError> {
    let t = s.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    t.parse().map_err(|_| ValueError::NotAnAddress(s.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_are_host_and_port_or_a_port_on_loopback() {
        let a = |s| parse_listen_addr(s).map(|a| a.to_string());
        assert_eq!(a("9750").unwrap(), "127.0.0.1:9750");
        assert_eq!(a(" [::1]:1 ").unwrap(), "[::1]:1");
        assert_eq!(
            a("localhost").unwrap_err().to_string(),
            "'localhost' is not an address to listen on: use e.g. 127.0.0.1:9750, [::1]:9750 or 9750"
        );
    }

    /// Options recording an interface that does not exist here (nothing
    /// about this host is learnt, so the choice is AF_XDP, with no reason).
    fn nowhere() -> RecordOptions {
        RecordOptions::new(["no-such-if0"], "/nonexistent/out")
    }

    fn err(o: &RecordOptions) -> OptionsError {
        o.build().expect_err("the options are refused")
    }

    #[test]
    fn the_defaults_record_an_interface_with_afxdp_and_the_cli_defaults() {
        let b = nowhere().build().unwrap();
        assert!(matches!(&b.config.input, Input::Interface(c) if c.ifname == "no-such-if0"));
        assert_eq!(b.engine_reason, None);
        assert_eq!(b.config.storage.prefix, "wiretape");
        assert_eq!(b.config.storage.block_size, 1 << 20);
        assert_eq!(b.config.stage.idle_sleep, Duration::from_micros(1000));
        assert!(b.config.live.trigger.is_some());
        assert!(b.config.live.write_files);
        // A quarter of the packet engine's default ring (64 x 1 MiB).
        assert_eq!(b.config.storage.direct_backlog_max, 16 << 20);
    }

    #[test]
    fn several_interfaces_and_volumes_share_the_settings() {
        let mut o = nowhere();
        o.interfaces.push("no-such-if1".into());
        o.dirs.push("/nonexistent/two".into());
        o.frames = Some(4096);
        let b = o.build().unwrap();
        let Input::Interfaces(list) = &b.config.input else {
            panic!("not several interfaces: {:?}", b.config.input)
        };
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].ifname, "no-such-if1");
        assert!(list.iter().all(|c| c.frames == 4096));
        assert_eq!(
            b.config.storage.more_dirs,
            vec![PathBuf::from("/nonexistent/two")]
        );
    }

    #[test]
    fn the_notices_of_a_vanished_interface_name_wait_iface_as_told() {
        let mut o = nowhere();
        o.wait_iface = true;
        let b = o.build().unwrap();
        assert!(b.config.wait_iface);
        assert_eq!(b.config.wait_iface_name, "wait_iface");
        let b = o
            .build_naming(&|o| match o {
                Opt::WaitIface => "--wait-iface".into(),
                other => other.to_string(),
            })
            .unwrap();
        assert_eq!(b.config.wait_iface_name, "--wait-iface");
    }

    #[test]
    fn the_site_engine_and_an_afxdp_only_option_give_the_reason() {
        let mut o = nowhere();
        o.site_engine = Some(Engine::Packet);
        let b = o.build().unwrap();
        assert!(matches!(b.config.input, Input::Packet(_)));
        assert_eq!(
            b.engine_reason.as_deref(),
            Some("auto: packet, as WIRETAPE_ENGINE says")
        );
        let mut o = nowhere();
        o.busy_poll = Some(50);
        let b = o.build().unwrap();
        assert_eq!(
            b.engine_reason.as_deref(),
            Some("auto: afxdp, as busy_poll needs it")
        );
        let b = o.build_naming(&|_| "--busy-poll".into()).unwrap();
        assert_eq!(
            b.engine_reason.as_deref(),
            Some("auto: afxdp, as --busy-poll needs it")
        );
        // The packet engine's ring sized: that engine, no choice made.
        let mut o = nowhere();
        o.packet_blocks = Some(8);
        let b = o.build().unwrap();
        let Input::Packet(list) = &b.config.input else {
            panic!("not the packet engine")
        };
        assert_eq!((list[0].blocks, b.engine_reason), (8, None));
    }

    #[test]
    fn no_input_and_no_output_are_refused() {
        let mut o = nowhere();
        o.interfaces.clear();
        assert!(matches!(err(&o), OptionsError::NoInput));
        let mut o = nowhere();
        o.dirs.clear();
        assert!(matches!(err(&o), OptionsError::NoOutput));
    }

    #[test]
    fn a_capture_file_takes_the_speed_and_no_busy_polling() {
        let mut o = RecordOptions {
            read: Some("/nonexistent/in.pcap".into()),
            dirs: vec!["/nonexistent/out".into()],
            cutoff: Some(4096),
            ..RecordOptions::default()
        };
        let b = o.build().unwrap();
        assert!(matches!(&b.config.input, Input::File(f) if f.cutoff == Some((4096, 1 << 20))));
        o.speed = "bogus".into();
        assert!(matches!(
            err(&o),
            OptionsError::Value {
                option: Opt::Speed,
                ..
            }
        ));
        o.busy_poll = Some(50);
        assert!(matches!(
            err(&o),
            OptionsError::NotForFile {
                option: Opt::BusyPoll
            }
        ));
    }

    #[test]
    fn an_option_the_engine_lacks_names_both() {
        let packet = |f: &dyn Fn(&mut RecordOptions)| {
            let mut o = nowhere();
            o.engine = EngineOpt::Packet;
            f(&mut o);
            match err(&o) {
                OptionsError::NotFor { option, engine } => (option, engine),
                e => panic!("another error: {e}"),
            }
        };
        use EngineOpt::Packet as P;
        assert_eq!(packet(&|o| o.cutoff = Some(1)), (Opt::Cutoff, P));
        assert_eq!(packet(&|o| o.busy_poll = Some(1)), (Opt::BusyPoll, P));
        assert_eq!(packet(&|o| o.frames = Some(4096)), (Opt::Frames, P));
        assert_eq!(
            packet(&|o| o.xdp_mode = Some(XdpMode::Native)),
            (Opt::XdpMode, P)
        );
        assert_eq!(
            packet(&|o| o.netmap_slots = Some(256)),
            (Opt::NetmapSlots, P)
        );
        let mut o = nowhere();
        o.engine = EngineOpt::Afxdp;
        o.packet_sockets = Some(1);
        assert!(matches!(
            err(&o),
            OptionsError::NotFor {
                option: Opt::PacketSockets,
                engine: EngineOpt::Afxdp
            }
        ));
        o.packet_sockets = None;
        o.packet_in_place = true;
        o.format = "pcapng".into();
        assert!(matches!(
            err(&o),
            OptionsError::NotFor {
                option: Opt::PacketInPlace,
                ..
            }
        ));
    }

    #[cfg(not(feature = "netmap"))]
    #[test]
    fn netmap_without_the_feature_says_how_to_build_it() {
        let mut o = nowhere();
        o.engine = EngineOpt::Netmap;
        assert!(matches!(
            err(&o),
            OptionsError::NetmapNotBuilt(CaptureError::NetmapNotBuilt)
        ));
    }

    #[cfg(feature = "netmap")]
    #[test]
    fn netmap_records_one_interface() {
        let mut o = nowhere();
        o.engine = EngineOpt::Netmap;
        o.interfaces.push("no-such-if1".into());
        assert!(matches!(
            err(&o),
            OptionsError::SeveralInterfaces {
                engine: EngineOpt::Netmap
            }
        ));
    }

    #[test]
    fn laid_out_in_place_each_conflict_in_order() {
        let conflict = |f: &dyn Fn(&mut RecordOptions)| {
            let mut o = nowhere();
            o.packet_in_place = true;
            o.format = "pcapng".into();
            f(&mut o);
            match err(&o) {
                OptionsError::InPlace(c) => c,
                e => panic!("another error: {e}"),
            }
        };
        use InPlaceConflict as C;
        assert_eq!(conflict(&|o| o.format = "pcap".into()), C::NotPcapng);
        assert_eq!(conflict(&|o| o.tsprec = "us".into()), C::MicroStamps);
        assert_eq!(conflict(&|o| o.compress = "lz4".into()), C::Compressed);
        assert_eq!(conflict(&|o| o.encrypt_to = vec!["x".into()]), C::Encrypted);
        assert_eq!(conflict(&|o| o.count = Some(5)), C::Count);
        assert_eq!(conflict(&|o| o.snaplen = 100), C::Snaplen);
        assert_eq!(conflict(&|o| o.ts = Some("kpt".into())), C::Stamps);
        // Two at once: the first in order.
        assert_eq!(
            conflict(&|o| {
                o.count = Some(5);
                o.compress = "lz4".into()
            }),
            C::Compressed
        );
        let mut o = nowhere();
        o.packet_in_place = true;
        o.format = "pcapng".into();
        let b = o.build().unwrap();
        assert!(matches!(&b.config.input, Input::Packet(l) if l[0].in_place));
    }

    #[test]
    fn lists_and_cpus_name_their_option() {
        let mut o = nowhere();
        o.queues = Some("0-a".into());
        assert!(matches!(
            err(&o),
            OptionsError::List {
                option: Opt::Queues,
                error: ListError::Item(_)
            }
        ));
        let mut o = nowhere();
        o.writer_cpus = Some(",".into());
        assert!(matches!(
            err(&o),
            OptionsError::List {
                option: Opt::WriterCpus,
                error: ListError::Empty(_)
            }
        ));
        let mut o = nowhere();
        o.cpus = Some("100000".into());
        assert!(matches!(
            err(&o),
            OptionsError::CpuNotAllowed {
                option: Opt::Cpus,
                ..
            }
        ));
    }

    #[test]
    fn the_packet_rings_sizes_are_checked() {
        let mut o = nowhere();
        o.engine = EngineOpt::Packet;
        o.packet_block_kib = Some(3);
        assert!(matches!(err(&o), OptionsError::Packet(_)));
    }

    #[test]
    fn values_their_parsers_refuse_name_the_option() {
        let value = |f: &dyn Fn(&mut RecordOptions)| {
            let mut o = nowhere();
            f(&mut o);
            match err(&o) {
                OptionsError::Value { option, .. } => option,
                e => panic!("another error: {e}"),
            }
        };
        assert_eq!(value(&|o| o.ts = Some("sometimes".into())), Opt::Ts);
        assert_eq!(value(&|o| o.io = "sideways".into()), Opt::Io);
        let mut o = nowhere();
        o.format = "csv".into();
        assert!(matches!(err(&o), OptionsError::Format(_)));
        o = nowhere();
        o.compress = "zip".into();
        assert!(matches!(err(&o), OptionsError::Compress(_)));
        let key = |set: &dyn Fn(&mut RecordOptions)| {
            let mut o = nowhere();
            set(&mut o);
            match err(&o) {
                OptionsError::Key { option, .. } => option,
                e => panic!("another error: {e}"),
            }
        };
        assert_eq!(
            key(&|o| o.encrypt_to = vec!["age1bad".into()]),
            Opt::EncryptTo
        );
        assert_eq!(
            key(&|o| o.encrypt_to_file = vec!["/nonexistent/recipients".into()]),
            Opt::EncryptToFile
        );
    }

    #[test]
    fn serving_beyond_loopback_needs_allowing() {
        let mut o = nowhere();
        o.serve = Some("0.0.0.0:57012".parse().unwrap());
        assert!(matches!(err(&o), OptionsError::NotLoopback(_)));
        o.serve_allow_remote = true;
        o.serve_max_clients = 3;
        let b = o.build().unwrap();
        assert_eq!(b.config.live.serve.map(|s| s.max_clients), Some(3));
    }

    #[test]
    fn sizes_parse_with_binary_units_and_bounds() {
        assert_eq!(parse_bytes("100000"), Ok(100_000));
        assert_eq!(parse_bytes("64K"), Ok(64 << 10));
        assert_eq!(parse_bytes("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_bytes("2t"), Ok(2 << 40));
        assert_eq!(parse_bytes("x"), Err(ValueError::NotASize("x".into())));
        assert_eq!(
            parse_bytes("5X").unwrap_err().to_string(),
            "'5X': unknown unit 'X' (use K, M, G or T)"
        );
        assert_eq!(parse_rotate_size("64K"), Ok(64 << 10));
        assert_eq!(
            parse_rotate_size("1K"),
            Err(ValueError::RotateTooSmall("1K".into()))
        );
        assert_eq!(parse_ring_size("4M"), Ok(4 << 20));
        assert_eq!(
            parse_ring_size("1M"),
            Err(ValueError::RingTooSmall("1M".into()))
        );
        assert_eq!(parse_min_free("5%"), Ok(MinFree::Percent(5.0)));
        assert_eq!(parse_min_free("10G"), Ok(MinFree::Bytes(10 << 30)));
        assert_eq!(
            parse_min_free("x%"),
            Err(ValueError::NotAPercentage("x%".into()))
        );
        assert_eq!(
            parse_min_free("200%"),
            Err(ValueError::Percentage("200%".into()))
        );
    }

    #[test]
    fn a_limit_for_the_store_or_for_one_volume() {
        use Scoped::{Store, Volume};
        assert_eq!(parse_keep_bytes_scoped("10T"), Ok(Store(10 << 40)));
        assert_eq!(
            parse_keep_bytes_scoped("/disk3=400G"),
            Ok(Volume("/disk3".into(), 400 << 30))
        );
        // The size after the last '=': a directory may hold one.
        assert_eq!(
            parse_keep_bytes_scoped("/srv/a=b=1M"),
            Ok(Volume("/srv/a=b".into(), 1 << 20))
        );
        assert_eq!(
            parse_keep_bytes_scoped("=1M"),
            Err(ValueError::NoVolume("=1M".into()))
        );
        assert_eq!(
            parse_keep_bytes_scoped("/disk3=lots"),
            Err(ValueError::NotASize("lots".into()))
        );
        assert_eq!(
            parse_keep_bytes_scoped("/disk3"),
            Err(ValueError::NotASize("/disk3".into()))
        );
        assert_eq!(
            parse_min_free_scoped("/disk3=5%"),
            Ok(Volume("/disk3".into(), MinFree::Percent(5.0)))
        );
        assert_eq!(
            parse_min_free_scoped("10G"),
            Ok(Store(MinFree::Bytes(10 << 30)))
        );
        assert_eq!(
            parse_min_free_scoped("/disk3=200%"),
            Err(ValueError::Percentage("200%".into()))
        );
        // What the parsers take back, as the preflight says it.
        for n in [400u64 << 30, 1536 << 20, 1000, 10 << 40] {
            assert_eq!(parse_bytes(&size_text(n)), Ok(n));
        }
        assert_eq!(size_text(400 << 30), "400G");
        assert_eq!(min_free_text(MinFree::Percent(5.0)), "5%");
        // The store's given twice is refused; the volumes' are kept.
        let given = [Store(1u64), Volume("/a".into(), 2), Store(3)];
        assert!(matches!(
            Scoped::split(&given, Opt::KeepBytes),
            Err(OptionsError::LimitTwice {
                option: Opt::KeepBytes,
                dir: None
            })
        ));
        assert_eq!(
            Scoped::split(&given[..2], Opt::KeepBytes).unwrap(),
            (Some(1), vec![(PathBuf::from("/a"), 2)])
        );
    }

    /// A volume's own limits reach the retention policy under the volume's
    /// path as given to -w (another path to it is compared canonically);
    /// a directory that is not a volume, or a volume named twice, is
    /// refused naming it.
    #[test]
    fn a_volume_s_own_limits_name_one_of_the_volumes() {
        let base = std::env::temp_dir().join(format!("wt-opt-vol-{}", std::process::id()));
        let (a, b) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let mut o = nowhere();
        o.dirs = vec![a.clone(), b.clone()];
        o.keep_bytes = Some(10 << 30);
        o.volume_keep_bytes = vec![(base.join("a/../b/"), 1 << 30)];
        o.volume_min_free = vec![(a.clone(), MinFree::Percent(5.0))];
        let p = o.build().unwrap().config.storage.retention;
        assert_eq!(p.keep_bytes, Some(10 << 30));
        assert_eq!(p.of_volume(&b).keep_bytes, Some(1 << 30));
        assert_eq!(p.of_volume(&b).min_free, None);
        assert_eq!(p.of_volume(&a).min_free, Some(MinFree::Percent(5.0)));
        assert_eq!(p.volumes.len(), 2);
        o.volume_keep_bytes.push((base.join("c"), 1));
        match err(&o) {
            OptionsError::NotAVolume {
                option: Opt::KeepBytes,
                dir,
                volumes,
            } => {
                assert_eq!((dir, volumes), (base.join("c"), vec![a.clone(), b.clone()]));
            }
            e => panic!("{e}"),
        }
        o.volume_keep_bytes.pop();
        o.volume_min_free
            .push((base.join("./a"), MinFree::Bytes(1)));
        assert!(matches!(
            err(&o),
            OptionsError::LimitTwice {
                option: Opt::MinFree,
                dir: Some(_)
            }
        ));
        std::fs::remove_dir_all(base).unwrap();
    }

    #[test]
    fn durations_and_seconds_are_positive() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86400)));
        assert_eq!(
            parse_duration("x"),
            Err(ValueError::NotADuration("x".into()))
        );
        assert_eq!(
            parse_duration("0s"),
            Err(ValueError::DurationNotPositive("0s".into()))
        );
        assert_eq!(parse_secs("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_secs("1s"), Err(ValueError::NotSeconds("1s".into())));
        assert_eq!(
            parse_secs("inf").unwrap_err().to_string(),
            "'inf' must be a positive number of seconds"
        );
    }
}
