//! `ApiError`: an HTTP error answered as OpenAI does:
//! `{"error": {"message", "type", "param", "code"}}`.

use axum::Json;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    /// The HTTP status.
    pub(crate) status: StatusCode,
    /// What went wrong, for people.
    pub(crate) message: String,
    /// OpenAI's error type (`invalid_request_error`, `server_error`, ...).
    pub(crate) kind: &'static str,
    /// The request field at fault, if one is.
    pub(crate) param: Option<String>,
    /// A machine-readable code, if any.
    pub(crate) code: Option<&'static str>,
    /// Headers to send with it (`Retry-After`, `WWW-Authenticate`, `Connection`).
    pub(crate) headers: Vec<(HeaderName, &'static str)>,
}

/// Seconds a client is asked to wait before retrying a 429 or 503 (`Retry-After`).
pub(crate) const RETRY_AFTER_SECS: &str = "1";

#[derive(Serialize)]
struct Body<'a> {
    error: Detail<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: Option<&'a str>,
}

impl ApiError {
    /// A 400 about `param` (or the request as a whole).
    pub(crate) fn invalid(param: Option<&str>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(str::to_owned),
            code: None,
            headers: Vec::new(),
        }
    }

    /// A 429: the server or this API key is at its limit; `Retry-After` says when to
    /// try again.
    pub(crate) fn rate_limited(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::TOO_MANY_REQUESTS,
            message: message.into(),
            kind: "rate_limit_exceeded",
            param: None,
            code: Some("rate_limit_exceeded"),
            headers: vec![(header::RETRY_AFTER, RETRY_AFTER_SECS)],
        }
    }

    /// A 413: the request body is (or says it is) larger than `limit` bytes.
    pub(crate) fn body_too_large(limit: usize) -> ApiError {
        ApiError::invalid(
            None,
            format!("the request body is larger than {limit} bytes"),
        )
        .with_status(StatusCode::PAYLOAD_TOO_LARGE)
        .with_code("request_too_large")
    }

    /// A 401: no API key, or not one of the server's.
    pub(crate) fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::invalid(None, message)
            .with_status(StatusCode::UNAUTHORIZED)
            .with_code("invalid_api_key")
            .with_header(header::WWW_AUTHENTICATE, "Bearer")
    }

    /// A 403 refusing a browser request (foreign `Origin` or `Host`).
    pub(crate) fn forbidden(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::invalid(None, message)
            .with_status(StatusCode::FORBIDDEN)
            .with_code(code)
    }

    /// A 503 while the server drains (after SIGINT/SIGTERM or [`Server::shutdown`]):
    /// `Retry-After` asks the client (or a load balancer) to try again, elsewhere.
    ///
    /// [`Server::shutdown`]: crate::server::Server::shutdown
    pub(crate) fn shutting_down() -> ApiError {
        ApiError::server(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is shutting down",
        )
        .with_header(header::RETRY_AFTER, RETRY_AFTER_SECS)
    }

    /// A 503 while the model loads (`code` `model_loading`, with `Retry-After`).
    pub(crate) fn loading() -> ApiError {
        ApiError::server(
            StatusCode::SERVICE_UNAVAILABLE,
            "the model is loading; retry later",
        )
        .with_code("model_loading")
        .with_header(header::RETRY_AFTER, RETRY_AFTER_SECS)
    }

    /// With a header.
    pub(crate) fn with_header(mut self, name: HeaderName, value: &'static str) -> ApiError {
        self.headers.push((name, value));
        self
    }

    /// Asking the client to close the connection after it (the request body was not
    /// read to its end).
    pub(crate) fn closing(self) -> ApiError {
        self.with_header(header::CONNECTION, "close")
    }

    /// With a machine-readable code.
    pub(crate) fn with_code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    /// With another status.
    pub(crate) fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = status;
        self
    }

    /// A 5xx from the engine or the server's state.
    pub(crate) fn server(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind: "server_error",
            param: None,
            code: None,
            headers: Vec::new(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: Detail {
                message: &self.message,
                kind: self.kind,
                param: self.param.as_deref(),
                code: self.code,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        for (name, value) in self.headers {
            response
                .headers_mut()
                .append(name, HeaderValue::from_static(value));
        }
        response
    }
}
