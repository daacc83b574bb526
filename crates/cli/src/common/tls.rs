//! The TLS flags of a client of sensors (`extract`, `index`, `timeline`).

use std::path::PathBuf;
use wiretape::query::remote::{Client, Remote};
use wiretape::query::tls;

/// The TLS flags of a client of sensors (`extract`, `index`, `timeline`).
#[derive(clap::Args, Clone, Debug, Default)]
pub(crate) struct ClientTls {
    /// This client's certificate (PEM), for https:// sensors.
    #[arg(long, value_name = "PEM", env = "WIRETAPE_CERT")]
    cert: Option<PathBuf>,
    /// This client's private key (PEM), for https:// sensors.
    #[arg(long, value_name = "PEM", env = "WIRETAPE_KEY")]
    key: Option<PathBuf>,
    /// The CA the sensors' certificates chain to (PEM).
    #[arg(long, value_name = "PEM", env = "WIRETAPE_CA")]
    ca: Option<PathBuf>,
}

impl ClientTls {
    /// The client of `remotes` (None without any): mutual TLS from
    /// --cert/--key/--ca for https://. Err: a usage problem, in words.
    pub(crate) fn client(
        &self,
        remotes: &[&Remote],
    ) -> std::result::Result<Option<Client>, String> {
        if remotes.is_empty() {
            return Ok(None);
        }
        let tls = match (&self.cert, &self.key, &self.ca) {
            (Some(c), Some(k), Some(ca)) => Some(
                tls::ClientTls::named(c, k, ca, super::flags::tls_term)
                    .map_err(|e| super::flags::tls_line(&e))?,
            ),
            (None, None, None) => {
                if let Some(r) = remotes.iter().find(|r| r.tls) {
                    return Err(format!(
                        "{}: https:// sensors need this client's certificate: give --cert PEM --key PEM \
                         --ca PEM (or WIRETAPE_CERT, WIRETAPE_KEY, WIRETAPE_CA; `wiretape certs client DIR \
                         NAME` makes them)",
                        r.url
                    ));
                }
                None
            }
            (c, k, ca) => {
                let (given, lacking) = super::flags::missing([
                    ("--cert", c.is_some()),
                    ("--key", k.is_some()),
                    ("--ca", ca.is_some()),
                ]);
                return Err(format!(
                    "{given} given without {lacking}: https:// sensors need all three of --cert, --key and \
                     --ca (or WIRETAPE_CERT, WIRETAPE_KEY, WIRETAPE_CA): --ca is the ca.pem of the sensors' \
                     `wiretape certs init`, --cert and --key this client's (`wiretape certs client DIR NAME`)"
                ));
            }
        };
        Client::named(tls, super::flags::tls_term)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}
