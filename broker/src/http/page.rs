//! The status page at `/`: one HTML file with its script inline
//! (`page.html`), compiled into the binary so the broker needs no files and
//! the user no build step. The page reads the JSON management API from the
//! browser; this module only serves it and must not know what it shows.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::Response;

/// The page, as written in `page.html`.
const PAGE: &str = include_str!("page.html");

/// The answer to `GET /`.
pub(super) fn answer() -> Response<Full<Bytes>> {
    let mut answer = Response::new(Full::new(Bytes::from_static(PAGE.as_bytes())));
    let headers = answer.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Its own inline script and style and calls to this origin only; not
    // to be framed by another site.
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    answer
}
