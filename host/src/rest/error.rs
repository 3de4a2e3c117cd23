//! Kafka Connect's error body (`{"error_code": .., "message": ..}`) and a JSON body extractor
//! whose failures are 400s in that shape (never a 500, never plain text).

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::herder::HerderError;

/// An error response.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    /// A response with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
}

impl From<HerderError> for ApiError {
    fn from(e: HerderError) -> Self {
        let status = match &e {
            HerderError::NotFound(_) => StatusCode::NOT_FOUND,
            HerderError::Conflict(_) => StatusCode::CONFLICT,
            HerderError::BadRequest(_) => StatusCode::BAD_REQUEST,
            HerderError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error_code": self.status.as_u16(), "message": self.message});
        (self.status, axum::Json(body)).into_response()
    }
}

/// A JSON request body; malformed JSON or the wrong shape is a 400 that says what is wrong.
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        // As Kafka Connect: JSON bodies only. This also stops a web page from posting to the
        // loopback API with a "simple" (preflight-free) cross-site request.
        let json = req
            .headers()
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.trim_start()
                    .to_ascii_lowercase()
                    .starts_with("application/json")
            });
        if !json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "The request body must be JSON (Content-Type: application/json)",
            ));
        }
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| {
                // A body over `rest.request.max.bytes` is 413, as the rejection says.
                let status = e.status();
                let hint = if status == StatusCode::PAYLOAD_TOO_LARGE {
                    " (the limit is rest.request.max.bytes)"
                } else {
                    ""
                };
                ApiError::new(
                    status,
                    format!("cannot read the request body: {}{hint}", e.body_text()),
                )
            })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("Invalid JSON in the request body: {e}")))
    }
}
