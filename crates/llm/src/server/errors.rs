//! `ApiError`: an HTTP error answered as OpenAI does:
//! `{"error": {"message", "type", "param", "code"}}`.

use axum::Json;
use axum::http::StatusCode;
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
}

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
        }
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
        (self.status, Json(body)).into_response()
    }
}
