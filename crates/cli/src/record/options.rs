//! `record`'s flags as the library's [`RecordOptions`], and its
//! [`OptionsError`]s in the flags' words (usage errors, exit 2).

use super::Args;
use anyhow::Result;
use wiretape::capture::cpulist::ListError;
use wiretape::capture::XdpMode;
use wiretape::pipeline::options::{Built, EngineOpt, InPlaceConflict, Opt, OptionsError, Scoped};
use wiretape::RecordOptions;

/// The recording the flags ask for, the reason of `--engine auto`'s
/// choice, and the SIGUSR1 dump trigger the config holds. Usage errors
/// (exit 2) only: nothing is looked at beyond the options.
pub(super) fn config(a: &Args) -> Result<Built> {
    // -r's input and the files an earlier run left are read with these.
    let read_options = a.id.options()?;
    let mut o = options(a);
    o.read_options = read_options;
    (o.keep_bytes, o.volume_keep_bytes) =
        Scoped::split(&a.keep_bytes, Opt::KeepBytes).map_err(in_flags)?;
    (o.min_free, o.volume_min_free) = Scoped::split(&a.min_free, Opt::MinFree).map_err(in_flags)?;
    if o.engine == EngineOpt::Netmap && !wiretape::capture::netmap::BUILT {
        return Err(wiretape::capture::CaptureError::NetmapNotBuilt.into());
    }
    // What auto means on this host (a site's choice; the integration tests
    // written for AF_XDP set afxdp).
    o.site_engine = std::env::var("WIRETAPE_ENGINE")
        .ok()
        .and_then(|e| wiretape::pipeline::Engine::from_name(&e));
    let words =
        crate::common::inputs::filter_only(&a.expression, &a.after).map_err(crate::usage)?;
    o.filter = crate::common::filter_expression(&words, a.filter_file.as_deref())?;
    o.build_naming(&|o| flag(o).to_string()).map_err(in_flags)
}

/// The flags as options (the filter, the identities and the site's engine
/// are `config`'s to add).
fn options(a: &Args) -> RecordOptions {
    let mut o = RecordOptions::default();
    o.interfaces = a.iface.clone();
    o.read = a.read.clone();
    o.speed = a.speed.clone();
    o.dirs = a.dirs.clone();
    o.count = a.count;
    o.duration = a.duration;
    o.snaplen = a.snaplen;
    o.queues = a.queues.clone();
    o.cpus = a.cpus.clone();
    o.writer_cpus = a.writer_cpus.clone();
    o.ts = a.ts.clone();
    o.xdp_mode = match a.xdp_mode.as_deref() {
        Some("native") => Some(XdpMode::Native),
        Some("generic") => Some(XdpMode::Generic),
        _ => None,
    };
    o.zero_copy = match a.zero_copy.as_deref() {
        Some("on") => Some(true),
        Some("off") => Some(false),
        _ => None,
    };
    o.frames = a.frames;
    o.frame_size = a.frame_size;
    // clap allows only the engines' names.
    o.engine = EngineOpt::from_name(&a.engine).unwrap_or_default();
    o.packet_blocks = a.packet_blocks;
    o.packet_block_kib = a.packet_block_kib;
    o.packet_retire_ms = a.packet_retire_ms;
    o.packet_sockets = a.packet_sockets;
    o.packet_in_place = a.packet_in_place;
    o.packet_in_place_min = a.packet_in_place_min;
    o.packet_in_place_backlog = a.packet_in_place_backlog;
    o.netmap_slots = a.netmap_slots;
    o.batch = a.batch;
    o.poll_sleep_us = a.poll_sleep_us;
    o.busy_poll = a.busy_poll;
    o.flush_interval = a.flush_interval;
    o.prefix = a.prefix.clone();
    o.io = a.io.clone();
    o.block_kib = a.block_kib;
    o.rotate_size = a.rotate_size;
    o.rotate_time = a.rotate_time;
    o.format = a.format.clone();
    o.tsprec = a.tsprec.clone();
    o.keep_files = a.keep_files;
    o.keep_age = a.keep_age;
    o.on_full_rotate = a.on_full == "rotate";
    o.index = !a.no_index;
    o.flow_index = !a.no_flow_index;
    o.key_index = !a.no_key_index;
    o.sessions = !a.no_sessions;
    o.compress = a.compress.clone();
    o.compress_threads = a.compress_threads;
    o.encrypt_to = a.encrypt_to.clone();
    o.encrypt_to_file = a.encrypt_to_file.clone();
    o.cutoff = a.cutoff;
    o.cutoff_flows = a.cutoff_flows;
    o.buffer_mib = a.buffer_mib;
    o.write_buffers = a.write_buffers;
    o.ring = a.ring;
    o.ring_only = a.ring_only;
    o.dump_window = a.dump_window;
    o.serve = a.serve;
    o.serve_max_clients = a.serve_max_clients;
    o.serve_allow_remote = a.serve_allow_remote;
    o.wait_iface = a.wait_iface;
    o
}

/// The flag of an option.
fn flag(o: Opt) -> &'static str {
    match o {
        Opt::Speed => "--speed",
        Opt::Queues => "--queues",
        Opt::Cpus => "--cpus",
        Opt::WriterCpus => "--writer-cpus",
        Opt::Ts => "--ts",
        Opt::XdpMode => "--xdp-mode",
        Opt::ZeroCopy => "--zero-copy",
        Opt::Frames => "--frames",
        Opt::FrameSize => "--frame-size",
        Opt::PacketBlocks => "--packet-blocks",
        Opt::PacketBlockKib => "--packet-block-kib",
        Opt::PacketRetireMs => "--packet-retire-ms",
        Opt::PacketSockets => "--packet-sockets",
        Opt::PacketInPlace => "--packet-in-place",
        Opt::NetmapSlots => "--netmap-slots",
        Opt::BusyPoll => "--busy-poll",
        Opt::Cutoff => "--cutoff",
        Opt::Io => "--io",
        Opt::Format => "--format",
        Opt::Compress => "--compress",
        Opt::EncryptTo => "--encrypt-to",
        Opt::EncryptToFile => "--encrypt-to-file",
        Opt::KeepBytes => "--keep-bytes",
        Opt::MinFree => "--min-free",
        Opt::KeepFiles => "--keep-files",
        Opt::KeepAge => "--keep-age",
        Opt::OnFullRotate => "--on-full rotate",
        Opt::RotateSize => "--rotate-size",
        Opt::RotateTime => "--rotate-time",
        Opt::WaitIface => "--wait-iface",
        _ => "an option",
    }
}

/// The options' error as the flags' usage error (exit 2).
fn in_flags(e: OptionsError) -> anyhow::Error {
    use Opt::*;
    let msg = match e {
        OptionsError::NotForFile { option: BusyPoll } => "--busy-poll applies to interfaces \
            (-i, --engine afxdp) only: a capture file (-r) has no driver to poll"
            .to_string(),
        OptionsError::NotFor { option, engine } => not_for(option, engine),
        OptionsError::SeveralInterfaces { .. } => "several interfaces in one run need --engine \
            afxdp: with netmap, run one wiretape per interface"
            .to_string(),
        OptionsError::InPlace(why) => format!("--packet-in-place: {}", in_place(why)),
        OptionsError::List { option, error } => match error {
            ListError::Item(part) => format!(
                "invalid {} '{part}': use numbers like 0,1 or ranges like 0-3",
                flag(option)
            ),
            ListError::Empty(s) => {
                format!("invalid {} '{s}': give at least one number", flag(option))
            }
            e => e.to_string(),
        },
        OptionsError::CpuNotAllowed { option, error } => format!("{}: {error}", flag(option)),
        OptionsError::Compress(e) => e.named(flag(Opt::Compress)),
        OptionsError::Format(e) => e.named(flag(Opt::Format), "--tsprec"),
        OptionsError::Value {
            option: Speed,
            message,
        } => format!("--speed {message}"),
        // clap allows only the modes' names.
        OptionsError::Value {
            option: Ts,
            message,
        } => return anyhow::Error::msg(message),
        OptionsError::NetmapNotBuilt(e) => return e.into(),
        OptionsError::NotLoopback(l) => {
            crate::common::flags::live_line(&l).unwrap_or_else(|| l.to_string())
        }
        OptionsError::Key { option, error } => format!("{} {error}", flag(option)),
        OptionsError::NotAVolume {
            option,
            dir,
            volumes,
        } => format!(
            "{} {}=...: {} is not one of the volumes (-w {}): name one of them, or give the \
             value alone for the whole store",
            flag(option),
            dir.display(),
            dir.display(),
            volumes
                .iter()
                .map(|v| v.display().to_string())
                .collect::<Vec<_>>()
                .join(", -w ")
        ),
        OptionsError::LimitTwice { option, dir: None } => {
            format!(
                "{} is given twice for the whole store: give it once",
                flag(option)
            )
        }
        OptionsError::LimitTwice {
            option,
            dir: Some(d),
        } => {
            format!(
                "{} {}=... is given twice: give each volume's once",
                flag(option),
                d.display()
            )
        }
        e => e.to_string(),
    };
    crate::usage(msg)
}

/// An option the engine in use does not have.
fn not_for(option: Opt, engine: EngineOpt) -> String {
    let ring = match engine {
        EngineOpt::Netmap => "netmap's ring size is --netmap-slots",
        _ => "the packet engine's ring is --packet-blocks x --packet-block-kib",
    };
    match option {
        Opt::Cutoff => format!(
            "--cutoff: the {engine} engine does not apply it (the XDP program of --engine afxdp \
             and the file engine, -r, do); use --engine afxdp or leave --cutoff out"
        ),
        Opt::PacketBlocks | Opt::PacketBlockKib | Opt::PacketRetireMs | Opt::PacketSockets => {
            "--packet-blocks, --packet-block-kib, --packet-retire-ms and --packet-sockets apply \
             to --engine packet only"
                .into()
        }
        Opt::PacketInPlace => {
            "--packet-in-place applies to --engine packet only (AF_XDP frames are \
                          copied out of the UMEM)"
                .into()
        }
        Opt::NetmapSlots => {
            "--netmap-slots applies to --engine netmap only (AF_XDP's is --frames)".into()
        }
        Opt::BusyPoll if engine == EngineOpt::Netmap => {
            "--busy-poll applies to --engine afxdp only: \
            it sets AF_XDP socket options (netmap's poll thread already polls its rings)"
                .into()
        }
        Opt::BusyPoll => {
            "--busy-poll applies to --engine afxdp only: it sets AF_XDP socket options".into()
        }
        Opt::XdpMode | Opt::ZeroCopy | Opt::Frames | Opt::FrameSize => {
            format!("{} applies to --engine afxdp only ({ring})", flag(option))
        }
        o => format!("{} does not apply to --engine {engine}", flag(o)),
    }
}

/// Why `--packet-in-place` cannot be, and the fix.
fn in_place(why: InPlaceConflict) -> &'static str {
    match why {
        InPlaceConflict::NotPcapng => "it writes pcapng: add --format pcapng",
        InPlaceConflict::MicroStamps => "it writes ns stamps: leave --tsprec us out",
        InPlaceConflict::Compressed => {
            "compressed files are written from RAM blocks: leave --compress out"
        }
        InPlaceConflict::Encrypted => {
            "encrypted files are written from RAM blocks: leave --encrypt-to out"
        }
        InPlaceConflict::Count => "-c may end a run inside a block: leave -c out (or use -d)",
        InPlaceConflict::Snaplen => "frames are written uncut: leave --snaplen out",
        InPlaceConflict::Stamps => {
            "frames carry the kernel's stamps: use --ts hw (the default) or xdp"
        }
        _ => "it conflicts with another option",
    }
}
