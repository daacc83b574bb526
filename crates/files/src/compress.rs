//! Compressed capture files (`record --compress lz4|zstd[:LEVEL]`), their
//! format: every block of records becomes one independently decodable unit
//! of a standard format, so that `lz4`, `zstd`, Wireshark and tcpdump read
//! the file and a query decompresses only the blocks it selects
//! ([`crate::zread`] reads them).
//!
//! - lz4: the whole file is ONE LZ4 frame (magic, FLG = version 01, block
//!   independence, content checksum; BD = 4 MB blocks), each record block
//!   one LZ4 block (stored uncompressed, high bit of its size set, when it
//!   does not shrink), closed by the end mark and the XXH32 of the content.
//! - zstd: one zstd frame per record block, with its content size (and a
//!   checksum), so any block decodes alone.
//!
//! Here: the choice ([`Compress`]), the formats' numbers, the encoders of
//! one block, and where a block went ([`Placed`], which the index keeps).
//! The writing (a sink in front of a file's, compressor threads) is
//! `wiretape-storage`'s.

use std::hash::Hasher;

/// How files are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compress {
    /// Plain pcap / pcapng.
    #[default]
    None,
    /// One LZ4 frame per file, one LZ4 block per record block.
    Lz4,
    /// One zstd frame per record block, at this level.
    Zstd(i32),
}

/// zstd's level when `--compress zstd` names none.
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;
/// The LZ4 frame's magic number.
pub const LZ4_MAGIC: u32 = 0x184D_2204;
/// A zstd frame's magic number.
pub const ZSTD_MAGIC: u32 = 0xFD2F_B528;
/// The largest LZ4 block the frame header announces (BD = 7: 4 MB).
pub const LZ4_MAX_BLOCK: usize = 4 << 20;
/// Bytes of our LZ4 frame header (magic, FLG, BD, header checksum).
pub const LZ4_HEADER_LEN: u64 = 7;
/// The high bit of an LZ4 block size: the block is stored uncompressed.
pub const LZ4_STORED: u32 = 0x8000_0000;

/// A compression's name that does not parse (`lz4`, `zstd`, `zstd:LEVEL`,
/// `none`); each holds the text as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompressError {
    /// `lz4:LEVEL`: LZ4 has no levels.
    #[error("compression {0}: lz4 takes no level; use lz4 or zstd:LEVEL")]
    Lz4Level(String),
    /// `zstd:LEVEL` with a level zstd does not have.
    #[error("compression {given}: zstd level must be an integer from {min} to {max}")]
    ZstdLevel {
        /// The text as given.
        given: String,
        /// zstd's lowest level.
        min: i32,
        /// zstd's highest level.
        max: i32,
    },
    /// Not a compression wiretape writes.
    #[error("compression {0}: unknown compression; use lz4, zstd or zstd:LEVEL")]
    Unknown(String),
}

impl CompressError {
    /// The line with the setting named `name` (a command's flag, a file's
    /// key) instead of the library's words.
    pub fn named(&self, name: &str) -> String {
        match self {
            CompressError::Lz4Level(s) => {
                format!("{name} {s}: lz4 takes no level; use {name} lz4 or zstd:LEVEL")
            }
            CompressError::ZstdLevel { given, min, max } => {
                format!("{name} {given}: zstd level must be an integer from {min} to {max}")
            }
            CompressError::Unknown(s) => {
                format!("{name} {s}: unknown compression; use lz4, zstd or zstd:LEVEL")
            }
        }
    }
}

impl std::str::FromStr for Compress {
    type Err = CompressError;
    fn from_str(s: &str) -> Result<Self, CompressError> {
        let (alg, level) = match s.split_once(':') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        match (alg, level) {
            ("none", None) => Ok(Compress::None),
            ("lz4", None) => Ok(Compress::Lz4),
            ("lz4", Some(_)) => Err(CompressError::Lz4Level(s.to_string())),
            ("zstd", None) => Ok(Compress::Zstd(ZSTD_DEFAULT_LEVEL)),
            ("zstd", Some(l)) => {
                let range = zstd::compression_level_range();
                match l.parse::<i32>() {
                    Ok(n) if range.contains(&n) => Ok(Compress::Zstd(n)),
                    _ => Err(CompressError::ZstdLevel {
                        given: s.to_string(),
                        min: *range.start(),
                        max: *range.end(),
                    }),
                }
            }
            _ => Err(CompressError::Unknown(s.to_string())),
        }
    }
}

impl Compress {
    /// The file name suffix after `.pcap` / `.pcapng` (`""` when plain).
    pub fn suffix(self) -> &'static str {
        match self {
            Compress::None => "",
            Compress::Lz4 => ".lz4",
            Compress::Zstd(_) => ".zst",
        }
    }

    /// The algorithm's name as the summary says it (`none`, `lz4`, `zstd`).
    pub fn algorithm(self) -> &'static str {
        match self {
            Compress::None => "none",
            Compress::Lz4 => "lz4",
            Compress::Zstd(_) => "zstd",
        }
    }

    /// The level (zstd's; 0 for lz4 and none).
    pub fn level(self) -> i32 {
        match self {
            Compress::Zstd(l) => l,
            _ => 0,
        }
    }

    /// Whether files are compressed at all.
    pub fn is_on(self) -> bool {
        self != Compress::None
    }
}

/// The LZ4 frame header we write: magic, FLG (version 01, independent
/// blocks, content checksum), BD (4 MB blocks), header checksum.
pub fn lz4_frame_header() -> [u8; LZ4_HEADER_LEN as usize] {
    let mut h = [0u8; 7];
    h[..4].copy_from_slice(&LZ4_MAGIC.to_le_bytes());
    h[4] = 0b0110_0100;
    h[5] = 0x70;
    let mut x = twox_hash::XxHash32::with_seed(0);
    x.write(&h[4..6]);
    h[6] = (x.finish_32() >> 8) as u8;
    h
}

/// Appends `data` as LZ4 blocks of at most [`LZ4_MAX_BLOCK`] bytes each
/// (compressed, or stored when `store` or when compressing does not shrink).
pub fn lz4_blocks(data: &[u8], store: bool, out: &mut Vec<u8>) {
    for part in data.chunks(LZ4_MAX_BLOCK) {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        let mut n = 0;
        if !store {
            let bound = lz4_flex::block::get_maximum_output_size(part.len());
            out.resize(at + 4 + bound, 0);
            n = lz4_flex::block::compress_into(part, &mut out[at + 4..]).unwrap_or(usize::MAX);
        }
        if store || n >= part.len() {
            out.truncate(at + 4);
            out.extend_from_slice(part);
            let w = part.len() as u32 | LZ4_STORED;
            out[at..at + 4].copy_from_slice(&w.to_le_bytes());
        } else {
            out.truncate(at + 4 + n);
            out[at..at + 4].copy_from_slice(&(n as u32).to_le_bytes());
        }
    }
}

/// Appends `data` as one zstd frame of raw (stored) blocks, with its
/// content size: what a block becomes when the compressors fall behind.
pub fn zstd_stored_frame(data: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&ZSTD_MAGIC.to_le_bytes());
    // FCS field 8 bytes, single segment, no checksum, no dictionary.
    out.push(0b1110_0000);
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    const MAX: usize = 128 << 10;
    if data.is_empty() {
        out.extend_from_slice(&[1, 0, 0]); // last, raw, size 0
        return;
    }
    let mut parts = data.chunks(MAX).peekable();
    while let Some(p) = parts.next() {
        let last = u32::from(parts.peek().is_none());
        let h = last | ((p.len() as u32) << 3);
        out.extend_from_slice(&h.to_le_bytes()[..3]);
        out.extend_from_slice(p);
    }
}

/// Where one record block went in a compressed file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placed {
    /// Offset of its first byte in the uncompressed stream.
    pub u_start: u64,
    /// Its uncompressed length.
    pub u_len: u64,
    /// Offset of its compressed unit (LZ4 block header, zstd frame) in the file.
    pub c_off: u64,
    /// Compressed bytes, headers included.
    pub c_len: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_parses_and_refuses_in_words() {
        assert_eq!("lz4".parse::<Compress>(), Ok(Compress::Lz4));
        assert_eq!("zstd".parse::<Compress>(), Ok(Compress::Zstd(3)));
        assert_eq!("zstd:19".parse::<Compress>(), Ok(Compress::Zstd(19)));
        assert_eq!("none".parse::<Compress>(), Ok(Compress::None));
        for bad in ["zstd:99", "zstd:x", "lz4:3", "gzip", ""] {
            let e = bad.parse::<Compress>().unwrap_err();
            assert!(!e.to_string().contains("--"), "{e}");
            let e = e.named("--compress");
            assert!(e.starts_with(&format!("--compress {bad}:")), "{e}");
            assert_eq!(e.lines().count(), 1);
        }
        assert_eq!(Compress::Zstd(1).suffix(), ".zst");
        assert_eq!(Compress::Lz4.suffix(), ".lz4");
    }

    #[test]
    fn blocks_that_do_not_shrink_are_stored_and_decode_back() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u8> = (0..70_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        let mut out = Vec::new();
        lz4_blocks(&random, false, &mut out);
        let w = u32::from_le_bytes(out[..4].try_into().unwrap());
        assert_ne!(w & LZ4_STORED, 0, "stored");
        assert_eq!(&out[4..], &random[..]);
        let mut z = Vec::new();
        zstd_stored_frame(&random, &mut z);
        assert_eq!(zstd::bulk::decompress(&z, 1 << 20).unwrap(), random);
        let text = b"GET / HTTP/1.1\r\n".repeat(4000);
        let mut out = Vec::new();
        lz4_blocks(&text, false, &mut out);
        assert!(out.len() < text.len() / 4);
        let n = (u32::from_le_bytes(out[..4].try_into().unwrap())) as usize;
        let back = lz4_flex::block::decompress(&out[4..4 + n], text.len()).unwrap();
        assert_eq!(back, text);
    }
}
