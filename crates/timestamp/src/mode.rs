//! The timestamping modes.

use std::fmt;
use std::str::FromStr;

/// How frames are stamped (`wiretape record --ts MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TsMode {
    /// The NIC's receive time (XDP metadata kfunc); `xdp` for frames without one.
    Hw,
    /// Kernel time per frame, taken in the XDP program as the frame arrives.
    Xdp,
    /// Per frame at the polling thread, from a cheap clock (TSC or vDSO).
    Kpt,
    /// One stamp per batch (what batch engines do): a baseline.
    Batch,
    /// The gap between two batches spread uniformly over the frames.
    Udts,
    /// The gap between two batches spread in proportion to frame sizes.
    Wdts,
    /// WDTS while the queue is saturated, KPT otherwise.
    Hybrid,
    /// No timestamps (all zero): the fastest path.
    Off,
}

impl TsMode {
    /// Every mode, in the order `--ts` lists them.
    pub const ALL: [TsMode; 8] = [
        TsMode::Hw,
        TsMode::Xdp,
        TsMode::Kpt,
        TsMode::Batch,
        TsMode::Udts,
        TsMode::Wdts,
        TsMode::Hybrid,
        TsMode::Off,
    ];

    /// The modes computed in user space from batches (what the simulator evaluates).
    pub const POLLER: [TsMode; 5] = [
        TsMode::Batch,
        TsMode::Kpt,
        TsMode::Udts,
        TsMode::Wdts,
        TsMode::Hybrid,
    ];

    /// The mode's name as `--ts` takes it and reports print it; [`FromStr`]
    /// parses it back.
    pub fn name(self) -> &'static str {
        match self {
            TsMode::Hw => "hw",
            TsMode::Xdp => "xdp",
            TsMode::Kpt => "kpt",
            TsMode::Batch => "batch",
            TsMode::Udts => "udts",
            TsMode::Wdts => "wdts",
            TsMode::Hybrid => "hybrid",
            TsMode::Off => "off",
        }
    }

    /// Whether the mode needs the XDP program's metadata stamps.
    pub fn uses_xdp_meta(self) -> bool {
        matches!(self, TsMode::Hw | TsMode::Xdp)
    }
}

impl fmt::Display for TsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TsMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown timestamp mode '{s}': use one of hw, xdp, kpt, batch, udts, wdts, hybrid, off"))
    }
}
