//! The operator's page: its own files (`/`, `/ui/app.js`, `/ui/app.css`, no data in them, so
//! no token), the JSON it reads (`/api/…`, behind the token like `/status`: the views of
//! [`crate::journal::view`]), and one stream of ticks (`/api/events`) that tells it when to
//! read again.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::Api;
use crate::journal::view::{self, DecisionQuery, Paging, QueueQuery};
use crate::journal::{Journal, Pulse};
use crate::status::Status;

const INDEX: &str = include_str!("../page/index.html");
const SCRIPT: &str = include_str!("../page/app.js");
const STYLE: &str = include_str!("../page/app.css");

/// What the page may load: its own files and answers, nothing from elsewhere.
const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The events a listening page gets: at most this often.
const PULSE_EVERY: Duration = Duration::from_millis(500);

/// One of the page's own files.
fn asset(body: &'static str, kind: &'static str) -> Response {
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

pub(super) async fn index() -> Response {
    asset(INDEX, "text/html; charset=utf-8")
}

pub(super) async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

pub(super) async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

/// The answer to a view's request: refused without the token, else the view as JSON.
fn answer(api: &Api, headers: &HeaderMap, view: impl FnOnce(&Status, &Journal) -> Value) -> Response {
    if let Some(refused) = api.refusal(headers) {
        return refused;
    }
    Json(view(&api.host.board().get(), api.host.journal())).into_response()
}

pub(super) async fn overview(State(api): State<Api>, headers: HeaderMap, Query(q): Query<Paging>) -> Response {
    let actions = api.token.is_some();
    answer(&api, &headers, |s, j| view::overview(s, j, &q, actions))
}

pub(super) async fn queue(State(api): State<Api>, headers: HeaderMap, Query(q): Query<QueueQuery>) -> Response {
    answer(&api, &headers, |s, j| view::queue(s, j, &q))
}

pub(super) async fn tenants(State(api): State<Api>, headers: HeaderMap) -> Response {
    answer(&api, &headers, view::tenants)
}

pub(super) async fn decisions(State(api): State<Api>, headers: HeaderMap, Query(q): Query<DecisionQuery>) -> Response {
    answer(&api, &headers, |_, j| view::decisions(j, &q))
}

pub(super) async fn shadows(State(api): State<Api>, headers: HeaderMap) -> Response {
    answer(&api, &headers, view::shadows)
}

pub(super) async fn job(State(api): State<Api>, headers: HeaderMap, Path(id): Path<u32>) -> Response {
    if let Some(refused) = api.refusal(&headers) {
        return refused;
    }
    match view::job(api.host.journal(), id) {
        Ok(v) => Json(v).into_response(),
        Err(why) => (StatusCode::NOT_FOUND, format!("{why}\n")).into_response(),
    }
}

pub(super) async fn events(State(api): State<Api>, headers: HeaderMap) -> Response {
    if let Some(refused) = api.refusal(&headers) {
        return refused;
    }
    let rx = api.host.journal().listen();
    // The current pulse first, then each change, at most one per PULSE_EVERY; the stream
    // ends after the loop has.
    let stream = futures_util::stream::unfold((rx, true, false), |(mut rx, first, done)| async move {
        if done {
            return None;
        }
        if !first {
            tokio::time::sleep(PULSE_EVERY).await;
            rx.changed().await.ok()?;
        }
        let pulse: Pulse = *rx.borrow_and_update();
        let event = Event::default().event("tick").json_data(pulse).unwrap_or_default();
        Some((Ok::<_, Infallible>(event), (rx, false, !pulse.running)))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
}
