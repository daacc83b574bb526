//! What several commands share (and nothing else of the CLI does): the
//! input words, the TLS flags of a sensors' client, the filter expression,
//! the time window flags, usage errors.

pub(crate) mod flags;
pub(crate) mod inputs;
pub(crate) mod tls;

use anyhow::{bail, Result};
use std::path::PathBuf;
use wiretape::files::ReadOptions;
use wiretape::query::{StoreSpan, Window};
use wiretape::timestamp::{format_rfc3339, parse_time_in, realtime_ns, NoZone};

/// A usage error: one line, exit 2.
pub(crate) fn usage_exit(msg: impl std::fmt::Display) -> Result<i32> {
    eprintln!("wiretape: error: {msg}");
    Ok(2)
}

/// 2: an expression refused is a usage error, whether libpcap refuses it
/// or compiles it into what cannot run here (Linux ancillary loads, which
/// tcpdump refuses for a saved file too; a loop in XDP).
pub(crate) fn exit_code(_: &wiretape::filter::FilterError) -> i32 {
    2
}

/// The capture filter of `-F FILE` or the trailing words (None: none, or
/// blank). Both at once is an error, as is an unreadable file.
pub(crate) fn filter_expression(
    words: &[String],
    file: Option<&std::path::Path>,
) -> Result<Option<String>> {
    let expr = match file {
        Some(p) if !words.is_empty() => bail!(
            "give the filter either as trailing words or with -F {}, not both (words: '{}')",
            p.display(),
            words.join(" ")
        ),
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| anyhow::anyhow!("cannot read the filter file {}: {e}", p.display()))?;
            // As tcpdump's -F: '#' to the end of a line is a comment.
            text.lines()
                .map(|l| l.split('#').next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join(" ")
        }
        None => words.join(" "),
    };
    let expr = expr.split_whitespace().collect::<Vec<_>>().join(" ");
    Ok((!expr.is_empty()).then_some(expr))
}

/// How `--utc` reads a TIME without a zone.
pub(crate) fn no_zone(utc: bool) -> NoZone {
    if utc {
        NoZone::Utc
    } else {
        NoZone::Refuse(Some("--utc"))
    }
}

/// `--from`, `--to` and `--utc`: a time window. Each command words the
/// help of `--from` and `--to` its own way (`mut_arg` in its
/// `#[command]`).
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct WindowArgs {
    /// The window's start (inclusive).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    from: Option<String>,
    /// The window's end (exclusive).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    to: Option<String>,
    /// A TIME without a zone (2026-11-22 14:02:00) is UTC.
    #[arg(long)]
    utc: bool,
}

impl WindowArgs {
    /// The window (TIME: RFC 3339, Unix seconds, back from now; without a
    /// zone UTC with `--utc`), checked: Err is the usage error's line.
    pub(crate) fn window(&self) -> std::result::Result<Window, String> {
        let now = realtime_ns();
        let time = |s: &Option<String>, what: &str| {
            s.as_deref()
                .map(|s| {
                    parse_time_in(s, now, no_zone(self.utc)).map_err(|e| format!("--{what}: {e}"))
                })
                .transpose()
        };
        let window = Window {
            from_ns: time(&self.from, "from")?,
            to_ns: time(&self.to, "to")?,
        };
        if let (Some(f), Some(t)) = (window.from_ns, window.to_ns) {
            if t <= f {
                return Err(format!(
                    "--to {} is not after --from {}: the window [from, to) is empty",
                    format_rfc3339(t),
                    format_rfc3339(f)
                ));
            }
        }
        Ok(window)
    }
}

/// The files `paths` stand for: a directory's captures named like ours
/// (oldest first), anything else itself (a missing file is for the
/// reader to name). Err: a directory that cannot be listed.
pub(crate) fn captures(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        for gone in wiretape::files::store::expand(p).1 {
            eprintln!(
                "wiretape: note: {}: a volume of this store, missing: its files are not read",
                gone.display()
            );
        }
    }
    // A volume of a store stands for all of them (store.toml).
    for p in &wiretape::files::store::expand_inputs(paths) {
        if p.is_dir() {
            let files = wiretape::files::naming::list_any(p, None)
                .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", p.display()))?;
            if files.is_empty() {
                match wiretape::files::steno::layout(p) {
                    wiretape::files::steno::Layout::Packets(d) => eprintln!(
                        "wiretape: note: {}: a Stenographer store without packet files yet ({} empty: stenotype writes its first file when its first block fills)",
                        p.display(),
                        d.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
                    ),
                    wiretape::files::steno::Layout::None => eprintln!(
                        "wiretape: note: {}: no capture files named like wiretape's in it",
                        p.display()
                    ),
                }
            }
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// `--identity FILE` of the commands that read captures: the age
/// identities encrypted captures (`record --encrypt-to`) are read with.
#[derive(clap::Args, Debug, Default, Clone)]
pub(crate) struct IdentityArg {
    /// Read encrypted captures (.pcap.age, .pcap.lz4.age: record
    /// --encrypt-to) with the age identities of FILE (AGE-SECRET-KEY-1...
    /// lines, as age-keygen -o writes; # comments). Only the chunks a query
    /// needs are decrypted. A file none of them opens is refused in one
    /// line naming it and its recipients.
    #[arg(long, value_name = "FILE", env = "WIRETAPE_IDENTITY")]
    pub(crate) identity: Option<PathBuf>,
}

impl IdentityArg {
    /// The reader options with these identities (none given: encrypted
    /// files are refused when met). An unreadable or bad file is a usage
    /// error.
    pub(crate) fn options(&self) -> Result<ReadOptions> {
        let mut o = ReadOptions::new();
        if let Some(p) = &self.identity {
            let ids = wiretape::files::crypt::read_identity_file(p)
                .map_err(|e| crate::usage(format!("--identity {e}")))?;
            o = o.with_identities(ids);
        }
        Ok(o)
    }
}

/// `--index-dir DIR` of the commands that read (or, `index`, write) the
/// indexes of Stenographer's files.
#[derive(clap::Args, Debug, Default, Clone)]
pub(crate) struct IndexDirArg {
    /// Where the indexes (.idx, .kdx, session tables) of Stenographer's
    /// packet files are written (`index`) and read (`extract`, `api`,
    /// `timeline`, `info`, `sessions`): DIR/<the file's absolute path>.idx.
    /// Never beside them: wiretape writes nothing in Stenographer's
    /// directories.
    #[arg(long, value_name = "DIR")]
    pub(crate) index_dir: Option<PathBuf>,
}

impl IndexDirArg {
    /// `o` with the sidecar directory, when given.
    pub(crate) fn apply(&self, o: ReadOptions) -> ReadOptions {
        match &self.index_dir {
            Some(d) => o.with_steno_sidecar_dir(d),
            None => o,
        }
    }
}

/// `--identity` and `--index-dir`: how a command that reads stores reads
/// them.
#[derive(clap::Args, Debug, Default, Clone)]
pub(crate) struct ReadArgs {
    #[command(flatten)]
    pub(crate) id: IdentityArg,
    #[command(flatten)]
    pub(crate) dir: IndexDirArg,
}

impl ReadArgs {
    /// The reader options of both flags ([`IdentityArg::options`]).
    pub(crate) fn options(&self) -> Result<ReadOptions> {
        Ok(self.dir.apply(self.id.options()?))
    }
}

/// When a window found nothing because it misses the store: one line
/// saying the store's span (`extract`, `timeline`); true when said.
pub(crate) fn say_missed(span: Option<StoreSpan>, frames: u64, window: &Window) -> bool {
    let missed = StoreSpan::missed(span, frames, window);
    if let Some(s) = missed {
        eprintln!(
            "wiretape: no frames: {}; give --from/--to inside that span",
            s.missed_line(window)
        );
    }
    missed.is_some()
}
