//! `Gate`: what every request passes before the routes, in order: the `Host` check, the
//! `Origin` check (and CORS preflights), the API key (not for `/health`), a declared
//! body size over the limit (413 at once, before any of the body is read), and the body
//! timeout (408 when the body does not arrive in time). `ConnectionService` is the hyper
//! service of one connection: it marks the connection busy from a request's head to the
//! end of its response.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Request, Response, StatusCode, header};
use axum::response::IntoResponse;
use hyper::body::{Body as HttpBody, Incoming};
use tower_service::Service;

use crate::server::api_keys::{Caller, KeyCheck};
use crate::server::bodies::{DeadlineBody, TrackedBody};
use crate::server::browser::{BrowserPolicy, is_preflight};
use crate::server::connections::Tracker;
use crate::server::errors::ApiError;
use crate::server::metrics::Metrics;

/// The checks in front of the router, and the router.
#[derive(Debug)]
pub(crate) struct Gate {
    /// The routes.
    pub(crate) router: Router,
    /// `Host` and `Origin` rules.
    pub(crate) policy: BrowserPolicy,
    /// The API keys.
    pub(crate) keys: KeyCheck,
    /// Declared bodies over this many bytes get 413 at once.
    pub(crate) max_body_bytes: usize,
    /// A body must arrive within this time of its head.
    pub(crate) body_timeout: Duration,
    /// The counters.
    pub(crate) metrics: Arc<Metrics>,
}

impl Gate {
    /// The response to `request`.
    pub(crate) async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: HttpBody<Data = Bytes> + Unpin + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if let Err(e) = self.policy.check_host(request.headers()) {
            return self.refused(e);
        }
        let cors = match self.policy.check_origin(request.headers()) {
            Ok(cors) => cors,
            Err(e) => return self.refused(e),
        };
        let mut response = match &cors {
            Some(cors) if is_preflight(request.method(), request.headers()) => {
                cors.preflight(request.headers())
            }
            _ => self.admit(request).await,
        };
        if let Some(cors) = &cors {
            cors.decorate(response.headers_mut());
        }
        response
    }

    fn refused(&self, error: ApiError) -> Response<Body> {
        let counter = match error.status {
            StatusCode::UNAUTHORIZED => &self.metrics.unauthorized_requests,
            StatusCode::FORBIDDEN => &self.metrics.forbidden_requests,
            _ => &self.metrics.invalid_requests,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        error.into_response()
    }

    /// The API key, the declared body size, then the router with the body timeout.
    async fn admit<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: HttpBody<Data = Bytes> + Unpin + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let caller = if request.uri().path() == "/health" {
            Caller::default()
        } else {
            match self.keys.authenticate(request.headers()) {
                Ok(caller) => caller,
                Err(e) => return self.refused(e),
            }
        };
        if declared_length(request.headers()).is_some_and(|n| n > self.max_body_bytes as u64) {
            return self.refused(ApiError::body_too_large(self.max_body_bytes).closing());
        }
        let expired = Arc::new(AtomicBool::new(false));
        let mut request =
            request.map(|body| DeadlineBody::new(body, self.body_timeout, Arc::clone(&expired)));
        request.extensions_mut().insert(caller);
        let mut router = self.router.clone();
        let ready = std::future::poll_fn(|cx| {
            Service::<Request<DeadlineBody<B>>>::poll_ready(&mut router, cx)
        });
        let response = match ready.await {
            Ok(()) => router.call(request).await,
            Err(never) => match never {},
        };
        let response = match response {
            Ok(response) => response,
            Err(never) => match never {},
        };
        if expired.load(Ordering::Acquire) {
            self.metrics.body_timeouts.fetch_add(1, Ordering::Relaxed);
            let timeout = ApiError::invalid(
                None,
                format!(
                    "the request body did not arrive within {:.3} s",
                    self.body_timeout.as_secs_f64()
                ),
            )
            .with_status(StatusCode::REQUEST_TIMEOUT)
            .with_code("request_timeout")
            .closing();
            return self.refused(timeout);
        }
        response
    }
}

/// The `Content-Length` a request declares, if it declares one.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The hyper service of one connection.
#[derive(Debug)]
pub(crate) struct ConnectionService {
    gate: Arc<Gate>,
    tracker: Arc<Tracker>,
}

impl ConnectionService {
    /// Requests on the connection of `tracker`, through `gate`.
    pub(crate) fn new(gate: Arc<Gate>, tracker: Arc<Tracker>) -> ConnectionService {
        ConnectionService { gate, tracker }
    }
}

impl hyper::service::Service<Request<Incoming>> for ConnectionService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let guard = self.tracker.begin_request();
        let gate = Arc::clone(&self.gate);
        Box::pin(async move {
            let response = gate.handle(request).await;
            Ok(response.map(|body| TrackedBody::new(body, guard)))
        })
    }
}
