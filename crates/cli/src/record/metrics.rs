//! `record --metrics ADDR`: the address parsed; the endpoint is the
//! library's ([`wiretape::pipeline::metrics`]).

use std::net::SocketAddr;
use wiretape::pipeline::metrics::MetricsError;

/// The endpoint's error in the command's words (its flags named): a
/// remote address without `--metrics-allow-remote` is a usage error.
pub(crate) fn in_flags(e: MetricsError) -> anyhow::Error {
    match e {
        MetricsError::Remote(addr) => crate::usage(format!(
            "--metrics {addr} would serve the recording's numbers beyond this machine: \
             add --metrics-allow-remote to mean it, or listen on 127.0.0.1"
        )),
        MetricsError::Listen { addr, source } => {
            anyhow::Error::new(source).context(format!("cannot listen on {addr} for --metrics"))
        }
        MetricsError::Thread(source) => {
            let text = format!("cannot start the --metrics thread: {source}");
            anyhow::Error::new(source).context(text)
        }
        e => e.into(),
    }
}

/// Parses `--metrics`: `HOST:PORT`, or a bare `PORT` (on 127.0.0.1).
pub(crate) fn parse_addr(s: &str) -> std::result::Result<SocketAddr, String> {
    let t = s.trim();
    if let Ok(port) = t.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    t.parse().map_err(|_| {
        format!("'{s}' is not an address to listen on: use e.g. 127.0.0.1:9750, [::1]:9750 or 9750")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("9750").unwrap().to_string(), "127.0.0.1:9750");
        assert_eq!(parse_addr("[::1]:1").unwrap().to_string(), "[::1]:1");
        assert!(parse_addr("localhost").is_err());
    }
}
