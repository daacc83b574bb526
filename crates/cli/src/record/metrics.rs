//! `record --metrics ADDR`: the endpoint's errors in the command's words
//! (the endpoint is the library's: [`wiretape::pipeline::metrics`]).

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
