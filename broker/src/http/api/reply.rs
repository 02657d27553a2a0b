//! The management API's answers: JSON bodies (serde_json) and errors as
//! `{"error": "..."}`, so a client reads every refusal the same way.
//! Knows no route and no caller.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::Serialize;

use crate::http::Answer;

const JSON: &str = "application/json";

/// `value` as JSON with `status`.
pub(super) fn json<T: Serialize>(status: StatusCode, value: &T) -> Answer {
    match serde_json::to_vec(value) {
        Ok(body) => {
            let mut answer = Response::new(Full::new(Bytes::from(body)));
            *answer.status_mut() = status;
            answer
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
            answer
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("the answer could not be encoded: {e}"),
        ),
    }
}

/// `{"error": message}` with `status`.
pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Answer {
    #[derive(Serialize)]
    struct Refusal {
        error: String,
    }
    let body = serde_json::to_vec(&Refusal {
        error: message.into(),
    })
    .unwrap_or_else(|_| b"{\"error\":\"\"}".to_vec());
    let mut answer = Response::new(Full::new(Bytes::from(body)));
    *answer.status_mut() = status;
    answer
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    answer
}

/// 405 naming the methods the path takes.
pub(super) fn method_not_allowed(allowed: &'static str) -> Answer {
    let mut answer = error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("this path takes {allowed}"),
    );
    answer
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allowed));
    answer
}

/// An empty answer with `status` (204, or 201 without a body).
pub(super) fn empty(status: StatusCode) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::new()));
    *answer.status_mut() = status;
    answer
}
