//! The automatic engine choice (`--engine auto`): which capture engine
//! suits the interfaces of a recording, with the reason as a value that the
//! start line and the run summary show (see [`choose_engine`]).

use crate::{Input, RecordConfig};
use wiretape_capture::bpf::{xdp_features, XDP_ACT_BASIC, XDP_ACT_XSK_ZEROCOPY};
use wiretape_capture::{sys, PacketConfig};

/// An engine the automatic choice can pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Engine {
    /// AF_XDP with an XDP program per RX queue.
    Afxdp,
    /// TPACKET_V3 (AF_PACKET).
    Packet,
}

impl Engine {
    /// Its name as `--engine` takes it (`afxdp`, `packet`).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Afxdp => "afxdp",
            Engine::Packet => "packet",
        }
    }

    /// `afxdp` or `packet`; anything else is none.
    pub fn from_name(s: &str) -> Option<Engine> {
        match s {
            "afxdp" => Some(Engine::Afxdp),
            "packet" => Some(Engine::Packet),
            _ => None,
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What [`choose_engine`] decided, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct EngineChoice {
    /// The engine.
    pub engine: Engine,
    /// Why, in a sentence starting `auto: ENGINE, ...`; none where nothing
    /// could be learnt (an interface that does not exist, a kernel before
    /// 6.3 without XDP feature flags: then AF_XDP, which says what is wrong).
    pub reason: Option<String>,
}

impl EngineChoice {
    fn new(engine: Engine, reason: Option<String>) -> EngineChoice {
        EngineChoice { engine, reason }
    }
}

/// What the choice considers besides the interfaces.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct AutoHints {
    /// The site's choice of engine for `auto` (the CLI reads it from
    /// `WIRETAPE_ENGINE`); it wins over everything else.
    pub site: Option<Engine>,
    /// An option given that only AF_XDP has (its name, e.g. `--cutoff`):
    /// AF_XDP it is.
    pub afxdp_only: Option<String>,
}

/// Chooses the engine for recording `ifaces`: packet where no interface's
/// driver offers AF_XDP zero-copy and each hands XDP skbs (veth, tun, no
/// native XDP), since AF_XDP's copy mode would copy each frame twice and
/// AF_PACKET copies it once; else AF_XDP. Reads the interfaces' XDP
/// feature flags and drivers (no privileges needed).
pub fn choose_engine<S: AsRef<str>>(ifaces: &[S], hints: &AutoHints) -> EngineChoice {
    if let Some(e) = hints.site {
        return EngineChoice::new(e, Some(format!("auto: {e}, as WIRETAPE_ENGINE says")));
    }
    if let Some(flag) = &hints.afxdp_only {
        return EngineChoice::new(
            Engine::Afxdp,
            Some(format!("auto: afxdp, as {flag} needs it")),
        );
    }
    let mut skb_devices = Vec::new();
    for name in ifaces.iter().map(AsRef::as_ref) {
        // Unknown (no such interface: afxdp says so; a kernel before 6.3).
        let Some(features) = sys::ifindex(name).and_then(xdp_features) else {
            return EngineChoice::new(Engine::Afxdp, None);
        };
        let driver = sys::driver_name(name).unwrap_or_default();
        if features & XDP_ACT_XSK_ZEROCOPY != 0 {
            return EngineChoice::new(
                Engine::Afxdp,
                Some(format!("auto: afxdp, {name} offers AF_XDP zero-copy")),
            );
        }
        // Frames that reach the driver as skbs (veth, tun) or a driver
        // without native XDP: XDP first copies each skb into an XDP
        // buffer, then AF_XDP copies it again. A NIC with native XDP but
        // no zero-copy makes one copy and no skb in AF_XDP's copy mode:
        // afxdp stays.
        if matches!(driver.as_str(), "veth" | "tun") || features & XDP_ACT_BASIC == 0 {
            skb_devices.push(format!(
                "{name} ({})",
                if driver.is_empty() {
                    "no native XDP"
                } else {
                    driver.as_str()
                }
            ));
        } else {
            return EngineChoice::new(
                Engine::Afxdp,
                Some(format!(
                    "auto: afxdp, {name} runs XDP natively ({driver}): copy mode makes one copy and no skb"
                )),
            );
        }
    }
    EngineChoice::new(
        Engine::Packet,
        Some(format!(
            "auto: packet, {} has no AF_XDP zero-copy and hands XDP skbs, which AF_XDP would copy twice and AF_PACKET copies once; --engine afxdp to force",
            skb_devices.join(", ")
        )),
    )
}

impl RecordConfig {
    /// The defaults for recording `ifnames` into `dir` with the engine
    /// [`choose_engine`] picks for them, and that choice (what `wiretape
    /// record -i IFACE` does with `--engine auto`).
    pub fn auto(
        ifnames: &[&str],
        dir: impl Into<std::path::PathBuf>,
        hints: &AutoHints,
    ) -> (RecordConfig, EngineChoice) {
        let choice = choose_engine(ifnames, hints);
        let mut c = match ifnames {
            [one] => RecordConfig::interface(one, dir),
            several => RecordConfig::interfaces(several, dir),
        };
        if choice.engine == Engine::Packet {
            c.input = Input::Packet(ifnames.iter().map(|n| PacketConfig::new(*n)).collect());
        }
        (c, choice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_and_an_afxdp_only_option_decide_before_the_interfaces() {
        let mut h = AutoHints {
            afxdp_only: Some("--cutoff".into()),
            ..AutoHints::default()
        };
        let c = choose_engine(&["no-such-if0"], &h);
        assert_eq!(c.engine, Engine::Afxdp);
        assert_eq!(
            c.reason.as_deref(),
            Some("auto: afxdp, as --cutoff needs it")
        );
        h.site = Some(Engine::Packet);
        let c = choose_engine(&["no-such-if0"], &h);
        assert_eq!(c.engine, Engine::Packet);
        assert_eq!(
            c.reason.as_deref(),
            Some("auto: packet, as WIRETAPE_ENGINE says")
        );
    }

    #[test]
    fn an_unknown_interface_is_afxdp_without_a_reason() {
        let c = choose_engine(&["no-such-if0"], &AutoHints::default());
        assert_eq!(c, EngineChoice::new(Engine::Afxdp, None));
    }
}
