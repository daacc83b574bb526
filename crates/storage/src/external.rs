//! Bytes written straight from memory that is not a [`crate::sink::Block`]: a run
//! of pcapng blocks an engine laid out in place (the TPACKET_V3 engine
//! turns each ring block into one, see `wiretape_capture::packet`), which a
//! sink writes with O_DIRECT from where it lies, and then says so
//! ([`External`]'s `done`), so that the owner may reuse the memory. While
//! the disk is behind, the io_uring sink copies a run into its RAM blocks
//! instead and finishes it at once
//! ([`crate::sink::BlockSink::set_direct_backlog`]): the owner (a packet
//! ring) needs its memory back sooner than a slow disk would give it.
//!
//! When the file's volume fails, a run the file does not keep (its write
//! failed, it was still queued, or it came after the failure) is copied
//! out then, before its memory goes back to the owner, and given back with
//! the blocks ([`crate::sink::BlockSink::take_unwritten`]) for another
//! volume; a run written while a write below it in the file was still on
//! its way is finished only once that write is done (a failure there
//! would need it). Nothing is copied on the good path.
//!
//! Such a run is pcapng as any reader reads it: Enhanced Packet Blocks for
//! the frames and, between them, fillers ([`FILL`]) that readers skip: a
//! block type of local use (the top bit set), which the pcapng spec
//! reserves for applications and tells readers to skip. Wireshark, tshark,
//! libpcap and this crate's [`wiretape_files::walk`] skip it.

use wiretape_files::pcapng;

pub use wiretape_format::pcapng::{FILL, MIN_BLOCK};

/// Lays a filler block over all of `dst` (at least [`MIN_BLOCK`] bytes, a
/// multiple of 4): its type and length at the front, the length again at
/// the end; what lies between is left as it is (readers skip it).
pub fn write_fill(dst: &mut [u8]) {
    let n = dst.len();
    assert!(
        n >= MIN_BLOCK && n.is_multiple_of(4),
        "a filler of {n} bytes"
    );
    dst[0..4].copy_from_slice(&FILL.to_le_bytes());
    dst[4..8].copy_from_slice(&(n as u32).to_le_bytes());
    dst[n - 4..].copy_from_slice(&(n as u32).to_le_bytes());
}

/// A run of pcapng blocks in memory its owner lends (see the module docs),
/// to be written as it lies. The memory is the owner's again when the
/// External is dropped: the sink drops it once the write completed or
/// failed (or never went out).
pub struct External {
    mem: Box<dyn AsRef<[u8]> + Send>,
}

impl External {
    /// A run over `mem`'s bytes, which must start on a page and be whole
    /// pages (O_DIRECT) and stay where they are while `mem` lives (the
    /// owner's promise: `as_ref` always names the same bytes).
    pub fn new(mem: Box<dyn AsRef<[u8]> + Send>) -> External {
        let b = (*mem).as_ref();
        assert!(
            (b.as_ptr() as usize).is_multiple_of(4096)
                && b.len().is_multiple_of(4096)
                && !b.is_empty(),
            "an external run must be whole pages"
        );
        External { mem }
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        (*self.mem).as_ref()
    }

    /// Start of its bytes (for a write entry).
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.bytes().as_ptr()
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.bytes().len()
    }

    /// Never empty (checked by `new`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Its bytes reached the file (`ok`) or never will: the memory goes
    /// back to its owner.
    pub fn finish(self, _ok: bool) {}
}

/// What a run holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunInfo {
    /// Enhanced Packet Blocks (frames).
    pub frames: u64,
    /// Their captured bytes.
    pub bytes: u64,
    /// The first frame's stamp (ns; interface 0's resolution must be ns).
    pub first_ns: Option<u64>,
}

/// Walks the blocks of a run: `each(offset of the block, stamp, frame)`
/// for every EPB. Errs (naming the offset) when a block leaves the run or
/// its lengths disagree: such a run is never written.
pub fn walk_run(run: &[u8], mut each: impl FnMut(usize, u64, &[u8])) -> Result<RunInfo, String> {
    let rd = |o: usize| u32::from_le_bytes([run[o], run[o + 1], run[o + 2], run[o + 3]]);
    let mut info = RunInfo::default();
    let mut o = 0usize;
    while o < run.len() {
        if run.len() - o < MIN_BLOCK {
            return Err(format!("a block header cut at offset {o}"));
        }
        let (kind, total) = (rd(o), rd(o + 4) as usize);
        if total < MIN_BLOCK || !total.is_multiple_of(4) || total > run.len() - o {
            return Err(format!("a block of {total} bytes at offset {o}"));
        }
        if rd(o + total - 4) as usize != total {
            return Err(format!("the block at offset {o} ends in another length"));
        }
        if kind == pcapng::EPB {
            if total < pcapng::EPB_OVERHEAD {
                return Err(format!("a packet block of {total} bytes at offset {o}"));
            }
            let ts = ((rd(o + 12) as u64) << 32) | rd(o + 16) as u64;
            let cap = rd(o + 20) as usize;
            if pcapng::EPB_OVERHEAD + cap > total {
                return Err(format!(
                    "captured length {cap} beyond its block at offset {o}"
                ));
            }
            each(
                o,
                ts,
                &run[o + pcapng::EPB_HEAD..o + pcapng::EPB_HEAD + cap],
            );
            info.frames += 1;
            info.bytes += cap as u64;
            info.first_ns.get_or_insert(ts);
        }
        o += total;
    }
    Ok(info)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sink::Block;
    use crate::writer::PcapWriter;
    use wiretape_files::{Format, PcapReader, Record};

    /// A run in a block of our own, laid out as an engine lays a ring
    /// block out: a filler first, then each frame's packet block with a
    /// filler after it, a last filler up to the page.
    struct Owned(Block);
    impl AsRef<[u8]> for Owned {
        fn as_ref(&self) -> &[u8] {
            self.0.data()
        }
    }
    pub(crate) fn run(frames: &[(u64, Vec<u8>)]) -> External {
        let mut b = Block::new(1 << 16);
        let buf = b.buf_mut();
        let mut o = 0;
        write_fill(&mut buf[o..o + 40]);
        o += 40;
        for (ts, f) in frames {
            let n = pcapng::EPB_OVERHEAD + pcapng::pad4(f.len());
            pcapng::write_epb(&mut buf[o..o + n], *ts, f, f.len() as u32);
            o += n;
            write_fill(&mut buf[o..o + 52]);
            o += 52;
        }
        let end = (o + MIN_BLOCK).next_multiple_of(4096);
        write_fill(&mut buf[o..end]);
        b.set_len(end);
        External::new(Box::new(Owned(b)))
    }

    /// Runs, copied frames and flushes mixed, through the io_uring sink
    /// (runs written as they lie), the io_uring sink told the disk is behind
    /// (a backlog limit of 0: every run copied, its memory given back at
    /// once) and the buffered one (runs copied): every file holds every
    /// frame in order, and the same bytes.
    #[test]
    fn runs_and_copied_frames_make_one_valid_file_through_either_sink() {
        let dir = std::env::temp_dir().join(format!("wt-ext-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let frame = |i: u64| vec![(i % 251) as u8; 60 + (i as usize * 37) % 1400];
        let mut files = Vec::new();
        for (name, direct, backlog) in [
            ("direct", true, crate::uring::DIRECT_BACKLOG_MAX),
            ("behind", true, 0),
            ("buffered", false, 0),
        ] {
            let path = dir.join(format!("{name}.pcapng"));
            let mut sink = if direct {
                crate::sink::AnySink::Direct(Box::new(
                    crate::uring::UringSink::create(&path, 1 << 16, 4).unwrap(),
                ))
            } else {
                crate::sink::AnySink::Buffered(crate::sink::FileSink::create(&path).unwrap())
            };
            let shared = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
            crate::sink::BlockSink::set_direct_backlog(&mut sink, backlog, shared.clone());
            let mut w =
                PcapWriter::with_format(sink, 262144, Format::PcapNg, "t").with_index(&path);
            let mut i = 0u64;
            for round in 0..6 {
                let fs: Vec<_> = (0..7).map(|k| (i + k, frame(i + k))).collect();
                i += 7;
                let info = w.write_external(run(&fs)).unwrap();
                assert_eq!((info.frames, info.first_ns), (7, Some(i - 7)));
                for _ in 0..round {
                    w.write(i, &frame(i)).unwrap();
                    i += 1;
                }
                if round % 2 == 1 {
                    w.flush().unwrap();
                }
            }
            let (st, sink) = w.close_keeping_sink();
            let st = st.unwrap();
            assert_eq!((st.frames, st.runs), (i, 6), "{name}");
            let direct_runs = crate::sink::BlockSink::stats(&sink).runs_direct;
            assert_eq!(direct_runs, if name == "direct" { 6 } else { 0 }, "{name}");
            drop(sink);
            assert_eq!(
                shared.load(std::sync::atomic::Ordering::Relaxed),
                0,
                "{name}: nothing waits"
            );
            let mut r = PcapReader::open(&path).unwrap();
            let mut rec = Record::default();
            let mut k = 0;
            while r.next_into(&mut rec).unwrap() {
                assert_eq!((rec.ts_ns, &rec.data), (k, &frame(k)), "{name}: frame {k}");
                k += 1;
            }
            assert_eq!(k, i, "{name}");
            files.push(std::fs::read(&path).unwrap());
        }
        assert!(
            files.iter().all(|f| *f == files[0]),
            "the same bytes through every sink"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_run_of_fillers_and_packets_walks_as_laid_out() {
        let mut run = vec![0u8; 256];
        write_fill(&mut run[0..20]);
        pcapng::write_epb(&mut run[20..20 + 32 + 60], 7, &[9u8; 60], 64);
        write_fill(&mut run[112..256]);
        let mut seen = Vec::new();
        let info = walk_run(&run, |o, ts, f| seen.push((o, ts, f.len()))).unwrap();
        assert_eq!(seen, vec![(20, 7, 60)]);
        assert_eq!((info.frames, info.bytes, info.first_ns), (1, 60, Some(7)));
        run[252] = 1;
        assert!(walk_run(&run, |_, _, _| {}).is_err());
    }
}
