//! The console: one page (`GET /`) and its script and style, embedded in
//! the binary, nothing loaded from another host. Served with a
//! Content-Security-Policy of `default-src 'self'` (no inline script or
//! style: the script is its own file of the same origin) and
//! `frame-ancestors 'none'`. The page asks the API (`/v1/status`,
//! `/v1/files`, `/v1/timeline`, `/v1/count`, `/v1/sessions`,
//! `/v1/extract`) from the
//! browser; everything from the store or the user goes into the page as
//! text (`textContent`), never as markup.

use super::body::ApiBody;
use hyper::header::HeaderValue;
use hyper::Response;

/// One embedded file.
pub(super) struct Asset {
    body: &'static str,
    content_type: &'static str,
}

const PAGE: Asset = Asset {
    body: include_str!("console/index.html"),
    content_type: "text/html; charset=utf-8",
};
const SCRIPT: Asset = Asset {
    body: include_str!("console/console.js"),
    content_type: "text/javascript; charset=utf-8",
};
const STYLE: Asset = Asset {
    body: include_str!("console/console.css"),
    content_type: "text/css; charset=utf-8",
};

/// The policy of every console answer.
pub(super) const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

/// The console's file at `path`, if it is one.
pub(super) fn asset(path: &str) -> Option<&'static Asset> {
    match path {
        "/" | "/index.html" => Some(&PAGE),
        "/console.js" => Some(&SCRIPT),
        "/console.css" => Some(&STYLE),
        _ => None,
    }
}

/// The answer carrying `a`.
pub(super) fn answer(a: &'static Asset) -> Response<ApiBody> {
    let mut r = Response::new(ApiBody::full(a.body.as_bytes()));
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static(a.content_type),
    );
    h.insert(
        hyper::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        hyper::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        hyper::header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    r
}
