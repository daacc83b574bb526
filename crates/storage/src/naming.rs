//! The one naming scheme of wiretape's files: made, parsed and listed here
//! and nowhere else.
//!
//! A capture file is `<prefix>-<iface>-q<queue>-<YYYYMMDDTHHMMSS.nnnnnnnnnZ>.<ext>`
//! (`ext` = `pcap` or `pcapng`), the time being the UTC stamp of its first
//! frame, so names sort by time. Its sidecar index is `<file>.idx`.
//! Retention deletes only names that [`parse`] accepts.

use crate::pcap::Format;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The file name of `queue`'s capture of `ifname` starting at `start_ns` (UTC).
pub fn file_name(prefix: &str, ifname: &str, queue: u32, start_ns: u64, format: Format) -> String {
    format!(
        "{prefix}-{ifname}-q{queue}-{}.{}",
        wiretape_timestamp::format_compact(start_ns),
        format.extension()
    )
}

/// The parts of one of our file names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name<'a> {
    /// The interface.
    pub ifname: &'a str,
    /// The RX queue.
    pub queue: u32,
    /// The UTC start, `YYYYMMDDTHHMMSS.nnnnnnnnnZ` (sorts by time).
    pub start: &'a str,
    /// `pcap` or `pcapng`.
    pub extension: &'a str,
}

/// Is `name` one of ours for `prefix`? Its parts, if so.
pub fn parse<'a>(name: &'a str, prefix: &str) -> Option<Name<'a>> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let (rest, extension) = if let Some(r) = rest.strip_suffix(".pcap") {
        (r, "pcap")
    } else {
        (rest.strip_suffix(".pcapng")?, "pcapng")
    };
    let (head, ts) = rest.rsplit_once('-')?;
    let (ifname, q) = head.rsplit_once('-')?;
    let q = q.strip_prefix('q')?;
    if ifname.is_empty() || q.is_empty() || !q.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let queue = q.parse().ok()?;
    let b = ts.as_bytes();
    let ok = b.len() == 26
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'.'
        && b[16..25].iter().all(u8::is_ascii_digit)
        && b[25] == b'Z';
    ok.then_some(Name {
        ifname,
        queue,
        start: ts,
        extension,
    })
}

/// The sidecar index of a capture file: `<file>.idx`.
pub fn index_path(capture: &Path) -> PathBuf {
    let mut p = capture.as_os_str().to_owned();
    p.push(".idx");
    PathBuf::from(p)
}

/// One of our files in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OurFile {
    /// Where it is.
    pub path: PathBuf,
    /// The UTC start in the name (`YYYYMMDDTHHMMSS.nnnnnnnnnZ`): sorts by time.
    pub start: String,
    /// Bytes of the file and its sidecar.
    pub bytes: u64,
    /// Last write.
    pub modified: SystemTime,
}

/// Our files (regular files named by [`parse`]) in `dir`, oldest first.
pub fn list(dir: &Path, prefix: &str) -> Vec<OurFile> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<OurFile> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let start = parse(&name, prefix)?.start.to_string();
            let md = e.metadata().ok()?;
            if !md.is_file() {
                return None;
            }
            let path = e.path();
            let side = std::fs::metadata(index_path(&path))
                .map(|m| m.len())
                .unwrap_or(0);
            Some(OurFile {
                path,
                start,
                bytes: md.len() + side,
                modified: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            })
        })
        .collect();
    v.sort_by(|a, b| a.start.cmp(&b.start).then(a.path.cmp(&b.path)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_names_parse_back() {
        let n = file_name("wt", "my-if", 12, 1_763_806_210_123_456_789, Format::PcapNg);
        assert_eq!(n, "wt-my-if-q12-20251122T101010.123456789Z.pcapng");
        let p = parse(&n, "wt").unwrap();
        assert_eq!(
            (p.ifname, p.queue, p.start, p.extension),
            ("my-if", 12, "20251122T101010.123456789Z", "pcapng")
        );
        assert_eq!(
            index_path(Path::new("/d/x.pcap")),
            PathBuf::from("/d/x.pcap.idx")
        );
    }

    #[test]
    fn names() {
        let ts = "20261122T101010.123456789Z";
        assert_eq!(
            parse(&format!("wt-eth0-q0-{ts}.pcap"), "wt").map(|n| n.start),
            Some(ts)
        );
        assert_eq!(
            parse(&format!("wt-my-if-q12-{ts}.pcapng"), "wt").map(|n| n.start),
            Some(ts)
        );
        for bad in [
            format!("wt-eth0-q0-{ts}.pcap.idx"),
            format!("other-eth0-q0-{ts}.pcap"),
            format!("wt-eth0-qx-{ts}.pcap"),
            format!("wt-eth0-q0-{ts}.txt"),
            "wt-eth0-q0-20261122T101010Z.pcap".into(),
            format!("wt--q0-{ts}.pcap"),
            format!("wtx-eth0-q0-{ts}.pcap"),
        ] {
            assert_eq!(parse(&bad, "wt"), None, "{bad}");
        }
    }
}
