//! Why a TLS handshake failed, in words, on the side that sees it, with
//! what to do: the server's log line for a refused client, and the
//! client's message for a refusal by the sensor (read from the alert
//! rustls receives) or for a sensor whose certificate it refuses.
//!
//! Both sides know more than rustls's error says: the certificates in
//! play (the client's own, the CA files, what the peer presented and the
//! CA names the sensor asks for), so each message names them, with their
//! dates where time is the cause.

use super::PemRole;
use crate::text::clean;
use rustls::{AlertDescription, CertificateError, Error};
use std::path::PathBuf;

/// What an explanation names that a program says its own way: a file of
/// either side's configuration, and the ways to a new certificate. Its
/// `Display` is the library's words; a command line says its flags and
/// subcommands ([`Naming`]: `wiretape` says `--client-ca` and
/// `` `wiretape certs client DIR NAME --force` ``).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Term {
    /// A file by what it is for ("the client CA").
    File(PemRole),
    /// The peer's file by what it is for ("its client CA").
    Its(PemRole),
    /// The sensor's setting of a file, as a client tells it ("the
    /// sensor's server certificate").
    Sensor(PemRole),
    /// The CA a client trusts servers of, as a server tells its clients
    /// (all clients, other programs too).
    ClientsCa,
    /// How a client gives its certificate, key and CA, as a server tells
    /// its clients (all clients, other programs too).
    ClientFiles,
    /// A new client certificate of the same CA, in place of an old one
    /// ([`super::issue_client`]).
    RenewClient,
    /// A new server certificate of the same CA, in place of an old one
    /// ([`super::issue_server`]).
    RenewServer,
    /// A new server certificate of the same CA for this name.
    ServerFor(String),
    /// The sensor's limit on connections open at once, as a client tells
    /// it.
    ConnectionLimit,
    /// A new CA, its server certificate, then client certificates
    /// ([`super::init`], then [`super::issue_client`]).
    NewCa,
}

impl std::fmt::Display for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bare = |r: &PemRole| r.what().trim_start_matches("the ").to_string();
        match self {
            Term::File(r) => write!(f, "{r}"),
            Term::Its(r) => write!(f, "its {}", bare(r)),
            Term::Sensor(r) => write!(f, "the sensor's {}", bare(r)),
            Term::ClientsCa => f.write_str("the CA it trusts servers of"),
            Term::ClientFiles => {
                f.write_str("the client gives its certificate, its key and this CA")
            }
            Term::RenewClient => f.write_str("tls::issue_client with force"),
            Term::RenewServer => f.write_str("tls::issue_server with force"),
            Term::ServerFor(n) => write!(f, "tls::issue_server for {n} with force"),
            Term::ConnectionLimit => f.write_str("its limit of connections"),
            Term::NewCa => f.write_str("tls::init with force, then tls::issue_client"),
        }
    }
}

/// How explanations name files and fixes ([`Term`]): the library's words
/// ([`library_terms`], the default) or a command line's.
pub type Naming = fn(&Term) -> String;

/// The default [`Naming`]: [`Term`]'s `Display`.
pub fn library_terms(t: &Term) -> String {
    t.to_string()
}

/// What a certificate says about itself, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// Its subject (`CN=alice`), escaped.
    pub subject: String,
    /// Its issuer's name, escaped.
    pub issuer: String,
    /// Not valid before (Unix seconds).
    pub not_before: i64,
    /// Not valid after (Unix seconds).
    pub not_after: i64,
    /// Its CN, SAN DNS names and SAN IP addresses.
    pub names: Vec<String>,
    /// Its extended key usage says TLS server (None: no such extension).
    pub server_auth: Option<bool>,
    /// Its extended key usage says TLS client (None: no such extension).
    pub client_auth: Option<bool>,
    /// SHA-256 of its DER, the first 8 bytes in hex (`ab:cd:...`).
    pub fingerprint: String,
}

/// SHA-256 of `der`, its first 8 bytes as `ab:cd:...` (enough to tell two
/// certificates of the same name apart in a message).
pub fn fingerprint(der: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    d.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// What `der` says about itself; None for a certificate that does not parse.
pub fn cert_info(der: &[u8]) -> Option<CertInfo> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let (_, c) = X509Certificate::from_der(der).ok()?;
    let mut names: Vec<String> = c
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(|s| clean(s, 64)))
        .collect();
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for n in &san.value.general_names {
            let s = match n {
                GeneralName::DNSName(d) => clean(d, 64),
                GeneralName::IPAddress(b) => match b.len() {
                    4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(*b).ok()?).to_string(),
                    16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(*b).ok()?).to_string(),
                    _ => continue,
                },
                _ => continue,
            };
            if !names.contains(&s) {
                names.push(s);
            }
        }
    }
    let eku = c.extended_key_usage().ok().flatten().map(|e| e.value);
    Some(CertInfo {
        subject: clean(&c.subject().to_string(), 200),
        issuer: clean(&c.issuer().to_string(), 200),
        not_before: c.validity().not_before.timestamp(),
        not_after: c.validity().not_after.timestamp(),
        names,
        server_auth: eku.map(|e| e.any || e.server_auth),
        client_auth: eku.map(|e| e.any || e.client_auth),
        fingerprint: fingerprint(der),
    })
}

/// A distinguished name as sent in TLS (DER of an X.501 Name), as text.
pub fn dn_text(der: &[u8]) -> Option<String> {
    use x509_parser::prelude::FromDer;
    let (_, n) = x509_parser::x509::X509Name::from_der(der).ok()?;
    Some(clean(&n.to_string(), 200))
}

/// Unix seconds as `2026-11-27T14:02:09Z`.
pub fn utc(secs: i64) -> String {
    let s = wiretape_timestamp::format_rfc3339(secs.max(0) as u64 * 1_000_000_000);
    format!("{}Z", &s[..19])
}

/// A duration in seconds, for people: `71 s`, `5 min`, `3 h`, `12 days`.
pub fn span(secs: i64) -> String {
    let s = secs.unsigned_abs();
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        7200..=172_799 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86_400),
    }
}

/// The current time, Unix seconds.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// An alert's name as the RFCs spell it: `certificate_expired`.
pub fn alert_name(a: AlertDescription) -> String {
    let d = format!("{a:?}");
    let mut out = String::new();
    let mut prev_lower = false;
    for c in d.chars() {
        if c.is_ascii_uppercase() && prev_lower {
            out.push('_');
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// `'CN=x' (SHA-256 ab:cd:..)` for each certificate, joined by ` or `.
fn subjects(cas: &[CertInfo]) -> String {
    if cas.is_empty() {
        return "(none)".into();
    }
    cas.iter()
        .map(|c| format!("'{}' (SHA-256 {})", c.subject, c.fingerprint))
        .collect::<Vec<_>>()
        .join(" or ")
}

fn names(c: &CertInfo) -> String {
    if c.names.is_empty() {
        "no name".into()
    } else {
        c.names.join(", ")
    }
}

/// The server's view: its own certificate and the CA of its clients.
#[derive(Clone, Debug)]
pub struct ServerSide {
    /// Its certificate ([`PemRole::ServerCert`]), the leaf.
    pub cert: CertInfo,
    /// The CA(s) of [`PemRole::ClientCa`].
    pub client_cas: Vec<CertInfo>,
    /// How its messages name files and fixes.
    pub naming: Naming,
}

/// Why a client's certificate was refused (the server's verifier saw
/// `err` for the leaf `der` at `now`), with what to do.
pub fn client_cert_refused(err: &Error, der: &[u8], now: i64, me: &ServerSide) -> String {
    let Some(c) = cert_info(der) else {
        return format!("the client's certificate does not parse ({err}): give it one made by `wiretape certs client`");
    };
    let who = format!("client certificate '{}'", c.subject);
    let say = |t: Term| (me.naming)(&t);
    let client_ca = say(Term::File(PemRole::ClientCa));
    let Error::InvalidCertificate(ce) = err else {
        return format!("{who} refused: {err}");
    };
    let ca = subjects(&me.client_cas);
    match ce {
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => format!(
            "{who} expired on {} ({} ago): the client needs a new one, made with the CA of {client_ca} \
             ({})",
            utc(c.not_after),
            span(now - c.not_after),
            say(Term::RenewClient)
        ),
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => format!(
            "{who} is not valid before {} (in {}): this machine's clock or the CA's was wrong when it was \
             made; check `date -u` here and where the certificate was made",
            utc(c.not_before),
            span(c.not_before - now)
        ),
        CertificateError::UnknownIssuer => format!(
            "{who} was issued by '{}', not by the CA of {client_ca}, {ca}: the client needs a certificate \
             made with this server's CA (`wiretape certs client DIR NAME` in the directory of {client_ca})",
            c.issuer
        ),
        CertificateError::BadSignature => format!(
            "{who} names '{}' as its issuer but is not signed by {client_ca} {ca}: it comes from another CA \
             of the same name; the client needs a certificate made with this server's CA \
             (`wiretape certs client DIR NAME` in the directory of {client_ca})",
            c.issuer
        ),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => format!(
            "{who} is not a client certificate (it is made for {}): the client must present a \
             client-NAME.pem of `wiretape certs client`",
            if c.server_auth == Some(true) { "servers" } else { "another use" }
        ),
        other => format!("{who} refused: {other}"),
    }
}

/// Why a TLS handshake with a client failed (`err`; `verifier` is what the
/// verifier said of the client's certificate, if it refused one).
pub fn handshake_refused(err: &Error, verifier: Option<String>, me: &ServerSide) -> String {
    if let Some(v) = verifier {
        return v;
    }
    let say = |t: Term| (me.naming)(&t);
    let mine = format!(
        "this server's certificate '{}' (issued by '{}', for {})",
        me.cert.subject,
        me.cert.issuer,
        names(&me.cert)
    );
    match err {
        Error::NoCertificatesPresented => format!(
            "the client presented no certificate: every client needs one of {} {} \
             (`wiretape certs client DIR NAME`; then {})",
            say(Term::File(PemRole::ClientCa)),
            subjects(&me.client_cas),
            say(Term::ClientFiles)
        ),
        Error::AlertReceived(a) => {
            let n = alert_name(*a);
            match a {
                AlertDescription::UnknownCA => format!(
                    "the client does not trust {mine} (alert {n}): {} must be the ca.pem that issued \
                     this server's certificate",
                    say(Term::ClientsCa)
                ),
                AlertDescription::DecryptError => format!(
                    "the client could not verify the signature of {mine} (alert {n}): {} is another \
                     CA of the same name; give it this server's ca.pem",
                    say(Term::Its(PemRole::ServerCa))
                ),
                AlertDescription::BadCertificate => format!(
                    "the client refused {mine} (alert {n}; most often the name: the client must ask for \
                     one of its names, or give this server a certificate with the name it uses: {})",
                    say(Term::RenewServer)
                ),
                AlertDescription::CertificateExpired => format!(
                    "the client says {mine} is expired or not yet valid (alert {n}; it is valid from {} to {}): \
                     renew it ({}) or check the clocks",
                    utc(me.cert.not_before),
                    utc(me.cert.not_after),
                    say(Term::RenewServer)
                ),
                _ => format!("the client ended the handshake (alert {n})"),
            }
        }
        Error::InvalidMessage(m) => format!("not a TLS handshake ({m:?}): the client must speak TLS"),
        Error::PeerIncompatible(p) => format!(
            "no TLS version or cipher suite in common with the client ({p:?}): this server speaks TLS 1.2 \
             and 1.3 with ECDHE and AES-GCM or ChaCha20-Poly1305 only"
        ),
        other => other.to_string(),
    }
}

/// The client's view: its certificate and the CA of the sensors.
#[derive(Clone, Debug)]
pub struct ClientSide {
    /// Its certificate ([`PemRole::ClientCert`]).
    pub cert_path: PathBuf,
    /// Its leaf.
    pub cert: CertInfo,
    /// The CA of the sensors ([`PemRole::ServerCa`]).
    pub ca_path: PathBuf,
    /// Its certificates.
    pub cas: Vec<CertInfo>,
    /// How its messages name files and fixes.
    pub naming: Naming,
}

/// What a client saw of a sensor during a handshake.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// The sensor's certificate (its leaf), once presented.
    pub server: Option<CertInfo>,
    /// The CA names the sensor asked client certificates of.
    pub hints: Option<Vec<String>>,
}

/// Why the sensor at `host:port` and this client could not agree
/// (`err`, rustls's error on this side), with what to do.
pub fn sensor_refused(err: &Error, me: &ClientSide, seen: &Seen, host: &str, port: u16) -> String {
    let say = |t: Term| (me.naming)(&t);
    let mine = format!(
        "{} {} ('{}')",
        say(Term::File(PemRole::ClientCert)),
        me.cert_path.display(),
        me.cert.subject
    );
    let now = now();
    let sensor_cas = match &seen.hints {
        Some(h) if !h.is_empty() => format!(
            "; the sensor admits certificates of {}",
            h.iter()
                .map(|s| format!("'{s}'"))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
        _ => String::new(),
    };
    let server = seen.server.as_ref();
    let theirs = match server {
        Some(s) => format!(
            "the sensor's certificate '{}' (issued by '{}', SHA-256 {})",
            s.subject, s.issuer, s.fingerprint
        ),
        None => "the sensor's certificate".into(),
    };
    match err {
        Error::AlertReceived(a) => {
            let n = alert_name(*a);
            match a {
                AlertDescription::CertificateExpired => {
                    let c = &me.cert;
                    if now > c.not_after {
                        format!(
                            "the sensor refused this client's certificate (alert {n}): {mine} expired on {} \
                             ({} ago); get a new one made with the sensor's CA ({})",
                            utc(c.not_after),
                            span(now - c.not_after),
                            say(Term::RenewClient)
                        )
                    } else if now < c.not_before {
                        format!(
                            "the sensor refused this client's certificate (alert {n}): {mine} is not valid \
                             before {} (in {}); check the clocks (`date -u` here and where it was made)",
                            utc(c.not_before),
                            span(c.not_before - now)
                        )
                    } else {
                        format!(
                            "the sensor says this client's certificate is expired or not yet valid (alert {n}), \
                             but {mine} is valid from {} to {} by this machine's clock: one of the two clocks \
                             is wrong (compare `date -u` here and on the sensor)",
                            utc(c.not_before),
                            utc(c.not_after)
                        )
                    }
                }
                AlertDescription::UnknownCA => format!(
                    "the sensor does not admit certificates of this client's CA (alert {n}): {mine} was issued \
                     by '{}'{sensor_cas}; use a certificate made with the sensor's CA \
                     (`wiretape certs client DIR NAME` in the directory of {})",
                    me.cert.issuer,
                    say(Term::Its(PemRole::ClientCa))
                ),
                AlertDescription::DecryptError => format!(
                    "the sensor could not verify the signature of this client's certificate (alert {n}): {mine} \
                     was issued by '{}', a CA of the same name as the sensor's but another one{sensor_cas}; use \
                     a certificate made with the sensor's CA (`wiretape certs client DIR NAME` in the directory \
                     of {})",
                    me.cert.issuer,
                    say(Term::Its(PemRole::ClientCa))
                ),
                AlertDescription::UnsupportedCertificate => format!(
                    "the sensor refused {mine} (alert {n}): it is not a client certificate; use a \
                     client-NAME.pem of `wiretape certs client`"
                ),
                AlertDescription::CertificateRequired => format!(
                    "the sensor wants a client certificate and got none (alert {n}): give {}, {} and \
                     {}{sensor_cas}",
                    say(Term::File(PemRole::ClientCert)),
                    say(Term::File(PemRole::ClientKey)),
                    say(Term::File(PemRole::ServerCa))
                ),
                AlertDescription::ProtocolVersion
                | AlertDescription::HandshakeFailure
                | AlertDescription::InsufficientSecurity => format!(
                    "no TLS version or cipher suite in common with the sensor (alert {n}): this client speaks \
                     TLS 1.2 and 1.3 with ECDHE and AES-GCM or ChaCha20-Poly1305"
                ),
                _ => format!(
                    "the sensor ended the TLS handshake (alert {n}) with {mine}: its log (the stderr of \
                     `wiretape api`) says why"
                ),
            }
        }
        Error::InvalidCertificate(ce) => {
            let ca = format!(
                "{} {} ({})",
                say(Term::File(PemRole::ServerCa)),
                me.ca_path.display(),
                subjects(&me.cas)
            );
            match ce {
                CertificateError::UnknownIssuer => format!(
                    "{theirs} is not signed by {ca}: give the ca.pem of the sensor's `wiretape certs init`"
                ),
                CertificateError::BadSignature => format!(
                    "{theirs} is not signed by {ca}, a CA of the same name but another one: give the ca.pem \
                     of the sensor's `wiretape certs init`"
                ),
                CertificateError::NotValidForNameContext { presented, .. } => {
                    // rustls says `DnsName("x")` and `IpAddress(a)`: the names alone.
                    let bare = |p: &String| {
                        let p = p.trim_start_matches("DnsName(\"").trim_start_matches("IpAddress(");
                        clean(p.trim_end_matches(')').trim_end_matches('"'), 64)
                    };
                    let valid: Vec<String> = match server {
                        Some(s) if !s.names.is_empty() => s.names.clone(),
                        _ => presented.iter().map(bare).collect(),
                    };
                    let host = clean(host, 64);
                    let url = |h: &str| {
                        if h.contains(':') {
                            format!("https://[{h}]:{port}")
                        } else {
                            format!("https://{h}:{port}")
                        }
                    };
                    format!(
                        "{theirs} is for {}, not for '{host}' of the URL {}: use {}, or give the sensor a \
                         certificate with that name (on the sensor: {})",
                        if valid.is_empty() { "no name".into() } else { valid.join(", ") },
                        url(&host),
                        valid.first().map_or("a name it has".into(), |f| url(f)),
                        say(Term::ServerFor(host.clone())),
                    )
                }
                CertificateError::NotValidForName => format!(
                    "{theirs} is not for '{}', the host of the URL: use a name it has, or give the sensor a \
                     certificate with that name",
                    clean(host, 64)
                ),
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    let end = server.map(|s| s.not_after);
                    format!(
                        "{theirs} expired{}: on the sensor, {} makes a new one (then restart `wiretape api`)",
                        end.map(|e| format!(" on {} ({} ago)", utc(e), span(now - e)))
                            .unwrap_or_default(),
                        say(Term::RenewServer)
                    )
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    let start = server.map(|s| s.not_before);
                    format!(
                        "{theirs} is not valid yet{}: one of the clocks is wrong (compare `date -u` here and \
                         on the sensor)",
                        start
                            .map(|s| format!(" (not before {}, in {})", utc(s), span(s - now)))
                            .unwrap_or_default()
                    )
                }
                CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                    format!(
                        "{theirs} is not made for servers: give {} the server.pem of `wiretape certs`",
                        say(Term::Sensor(PemRole::ServerCert))
                    )
                }
                other => format!("{theirs} is refused: {other}"),
            }
        }
        Error::InvalidMessage(_) => format!(
            "the server at {host}:{port} does not speak TLS (it answered in plain text: a plain-HTTP \
             `wiretape api` on loopback?): use http://{host}:{port}"
        ),
        other => format!("TLS: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alert_names_and_spans() {
        assert_eq!(alert_name(AlertDescription::UnknownCA), "unknown_ca");
        assert_eq!(
            alert_name(AlertDescription::CertificateExpired),
            "certificate_expired"
        );
        assert_eq!(alert_name(AlertDescription::DecryptError), "decrypt_error");
        assert_eq!(span(71), "71 s");
        assert_eq!(span(-300), "5 min");
        assert_eq!(span(3 * 86_400), "3 days");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    fn info(subject: &str) -> CertInfo {
        CertInfo {
            subject: subject.into(),
            issuer: "CN=ca".into(),
            not_before: 0,
            not_after: 1,
            names: vec!["127.0.0.1".into()],
            server_auth: Some(true),
            client_auth: Some(false),
            fingerprint: "ab:cd".into(),
        }
    }

    /// Every explanation, both sides, in the library's words: no flag of
    /// a command line in them, the files named by what they are for.
    #[test]
    fn explanations_speak_library_words() {
        use AlertDescription as A;
        use CertificateError as C;
        let server = ServerSide {
            cert: info("CN=server"),
            client_cas: vec![info("CN=ca")],
            naming: library_terms,
        };
        let client = ClientSide {
            cert_path: "/c.pem".into(),
            cert: info("CN=alice"),
            ca_path: "/ca.pem".into(),
            cas: vec![info("CN=ca")],
            naming: library_terms,
        };
        let seen = Seen {
            server: Some(info("CN=server")),
            hints: Some(vec!["CN=ca".into()]),
        };
        let name = C::NotValidForNameContext {
            expected: rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            presented: vec!["IpAddress(127.0.0.1)".into()],
        };
        let mut lines = Vec::new();
        for a in [
            A::UnknownCA,
            A::DecryptError,
            A::BadCertificate,
            A::CertificateExpired,
            A::CertificateRequired,
            A::UnsupportedCertificate,
            A::HandshakeFailure,
            A::InternalError,
        ] {
            lines.push(handshake_refused(&Error::AlertReceived(a), None, &server));
            lines.push(sensor_refused(
                &Error::AlertReceived(a),
                &client,
                &seen,
                "h",
                1,
            ));
        }
        lines.push(handshake_refused(
            &Error::NoCertificatesPresented,
            None,
            &server,
        ));
        for c in [
            C::Expired,
            C::NotValidYet,
            C::UnknownIssuer,
            C::BadSignature,
            C::InvalidPurpose,
            C::NotValidForName,
            name,
        ] {
            let e = Error::InvalidCertificate(c);
            lines.push(sensor_refused(&e, &client, &seen, "localhost", 1));
        }
        for l in &lines {
            assert!(!l.contains("--"), "{l}");
        }
        let all = lines.join("\n");
        for w in [
            "the client's certificate /c.pem ('CN=alice')",
            "the server CA /ca.pem ('CN=ca'",
            "every client needs one of the client CA 'CN=ca'",
            "then the client gives its certificate, its key and this CA",
            "the CA it trusts servers of must be the ca.pem",
            "its server CA is another CA of the same name",
            "in the directory of its client CA",
            "give the client's certificate, the client's key and the server CA",
            "(on the sensor: tls::issue_server for localhost with force)",
            "on the sensor, tls::issue_server with force makes a new one",
            "give the sensor's server's certificate the server.pem",
        ] {
            assert!(all.contains(w), "'{w}' not in:\n{all}");
        }
        let e = Error::InvalidCertificate(C::Expired);
        let made = rcgen::generate_simple_self_signed(vec!["alice".to_string()]).unwrap();
        let l = client_cert_refused(&e, made.cert.der(), now(), &server);
        assert!(
            !l.contains("--") && l.contains("the CA of the client CA"),
            "{l}"
        );
    }
}
