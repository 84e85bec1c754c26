//! The control API of `wasmsched run`, on loopback unless a token guards it (axum on a tokio
//! runtime of its own thread; the loop never waits on it):
//!
//! - `GET /status`: the [`Status`] as JSON (policies, versions, digests, roles, counters, last
//!   reload, shadow agreement);
//! - `GET /metrics`: the same numbers for Prometheus ([`metrics`]);
//! - `POST /rollback/{policy}`: bring back the policy's previous version, at the next tick
//!   boundary;
//! - `GET /readyz`: 200 once the world is warm (an observation made, every place the backend
//!   reaches answering: [`Status::ready`]), 503 and why before; `GET /livez`: 200 while the
//!   loop ends ticks ([`Status::live`]). A standby replica is ready: its world is warm.
//!
//! It listens on TCP or on a Unix socket ([`Listen`]); `wasmsched probe` asks the last two,
//! for a pod's exec probes.
//!
//! [`client`] is the other end, for `wasmsched status` and `wasmsched rollback`.

pub mod client;
pub mod metrics;
pub mod page;

use std::thread::JoinHandle;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::host::{HostHandle, RollbackError};
use crate::status::Status;

pub use crate::config::Listen;

/// Why the API could not start.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A non-loopback address without a token.
    #[error(
        "the control API would listen on {0}, which is not loopback, without a token: set [api] token, or listen on 127.0.0.1"
    )]
    TokenRequired(Listen),
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: Listen,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Talking to a running host failed.
    #[error("cannot reach the host at {addr}: {detail}")]
    Client {
        /// The address.
        addr: Listen,
        /// What went wrong and what to do.
        detail: String,
    },
}

/// The API server; it stops when dropped.
pub struct ApiServer {
    addr: Listen,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ApiServer {
    /// Where it listens (the port chosen, when port 0 was asked for).
    pub fn addr(&self) -> &Listen {
        &self.addr
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Listen::Unix(path) = &self.addr {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[derive(Clone)]
struct Api {
    host: HostHandle,
    token: Option<String>,
}

impl Api {
    /// The answer to a request without the right token; None when it may go on.
    fn refusal(&self, headers: &HeaderMap) -> Option<Response> {
        let token = self.token.as_ref()?;
        let given =
            headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        (given != Some(token.as_str())).then(|| {
            (StatusCode::UNAUTHORIZED, "a bearer token is required: Authorization: Bearer TOKEN\n").into_response()
        })
    }

    /// The answer to a request that would change something without the right token, or from
    /// a web page of another origin (a browser says where a request comes from; our client
    /// and curl do not); None when it may go on.
    fn refusal_to_act(&self, headers: &HeaderMap) -> Option<Response> {
        let text = |name| headers.get(name).and_then(|v: &axum::http::HeaderValue| v.to_str().ok());
        if let Some(origin) = text(header::ORIGIN) {
            let from = origin.split_once("://").map_or(origin, |(_, rest)| rest);
            if Some(from) != text(header::HOST) {
                let why = format!("a page from {origin} may not act on this host\n");
                return Some((StatusCode::FORBIDDEN, why).into_response());
            }
        }
        self.refusal(headers)
    }
}

/// Serve the API for `host` on `addr`. Any address but loopback or a Unix socket needs a
/// `token`. A Unix socket left by a host that stopped is replaced.
pub fn serve(host: HostHandle, addr: impl Into<Listen>, token: Option<String>) -> Result<ApiServer, ApiError> {
    let addr = addr.into();
    let token = token.filter(|t| !t.is_empty());
    if !addr.is_local() && token.is_none() {
        return Err(ApiError::TokenRequired(addr));
    }
    let bind = |source| ApiError::Bind { addr: addr.clone(), source };
    let (listener, local) = match &addr {
        Listen::Tcp(a) => {
            let listener = std::net::TcpListener::bind(a).map_err(bind)?;
            listener.set_nonblocking(true).map_err(bind)?;
            let local = Listen::Tcp(listener.local_addr().map_err(bind)?);
            (Bound::Tcp(listener), local)
        }
        Listen::Unix(path) => {
            use std::os::unix::fs::FileTypeExt;
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
                std::fs::remove_file(path).map_err(bind)?;
            }
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(bind)?;
            }
            let listener = std::os::unix::net::UnixListener::bind(path).map_err(bind)?;
            listener.set_nonblocking(true).map_err(bind)?;
            (Bound::Unix(listener), addr.clone())
        }
    };
    let app = axum::Router::new()
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/readyz", get(readyz))
        .route("/livez", get(livez))
        .route("/rollback/{policy}", post(rollback))
        .route("/experiment/stop", post(stop_experiment))
        .route("/", get(page::index))
        .route("/ui/app.js", get(page::script))
        .route("/ui/app.css", get(page::style))
        .route("/api/overview", get(page::overview))
        .route("/api/queue", get(page::queue))
        .route("/api/tenants", get(page::tenants))
        .route("/api/decisions", get(page::decisions))
        .route("/api/jobs/{id}", get(page::job))
        .route("/api/shadows", get(page::shadows))
        .route("/api/events", get(page::events))
        .with_state(Api { host, token });
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("wasmsched-api".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build();
            let result = runtime.and_then(|rt| {
                rt.block_on(async move {
                    let stop = async move { rx.await.unwrap_or(()) };
                    match listener {
                        Bound::Tcp(l) => {
                            axum::serve(tokio::net::TcpListener::from_std(l)?, app).with_graceful_shutdown(stop).await
                        }
                        Bound::Unix(l) => {
                            axum::serve(tokio::net::UnixListener::from_std(l)?, app).with_graceful_shutdown(stop).await
                        }
                    }
                })
            });
            if let Err(e) = result {
                tracing::error!(error = %e, "the control API stopped");
            }
        })
        .map_err(bind)?;
    tracing::info!(addr = %local, "control API listening");
    Ok(ApiServer { addr: local, shutdown: Some(tx), thread: Some(thread) })
}

/// A listener bound, before the API's runtime takes it.
enum Bound {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

async fn status(State(api): State<Api>, headers: HeaderMap) -> Response {
    if let Some(refused) = api.refusal(&headers) {
        return refused;
    }
    let status: Status = api.host.board().get();
    Json(status).into_response()
}

async fn metrics(State(api): State<Api>, headers: HeaderMap) -> Response {
    if let Some(refused) = api.refusal(&headers) {
        return refused;
    }
    let text = metrics::encode(&api.host.board().get());
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response()
}

async fn readyz(State(api): State<Api>) -> Response {
    probe(api.host.board().get().ready())
}

async fn livez(State(api): State<Api>) -> Response {
    probe(api.host.board().get().live(wasmsched_loop::record::wall_ms()))
}

/// A probe's answer: 200 `ok`, or 503 and why not. Probes need no token: they say nothing
/// but that.
fn probe(result: Result<(), String>) -> Response {
    match result {
        Ok(()) => (StatusCode::OK, "ok\n").into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}

async fn stop_experiment(State(api): State<Api>, headers: HeaderMap) -> Response {
    if let Some(refused) = api.refusal_to_act(&headers) {
        return refused;
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    api.host.stop_experiment(move |r| {
        let _ = tx.send(r);
    });
    match rx.await.unwrap_or_else(|_| Err("the host is stopping".into())) {
        Ok(name) => {
            (StatusCode::OK, format!("experiment {name} stopped; the configured roles serve again\n")).into_response()
        }
        Err(why) => (StatusCode::CONFLICT, format!("{why}\n")).into_response(),
    }
}

async fn rollback(State(api): State<Api>, Path(policy): Path<String>, headers: HeaderMap) -> Response {
    if let Some(refused) = api.refusal_to_act(&headers) {
        return refused;
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    api.host.rollback(&policy, move |r| {
        let _ = tx.send(r);
    });
    match rx.await.unwrap_or(Err(RollbackError::Stopping)) {
        Ok(done) => Json(done).into_response(),
        Err(e @ RollbackError::Unknown(_)) => (StatusCode::NOT_FOUND, format!("{e}\n")).into_response(),
        Err(e @ RollbackError::NoPrevious(_)) => (StatusCode::CONFLICT, format!("{e}\n")).into_response(),
        Err(e @ RollbackError::Stopping) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}
