//! The client end of the control API, for `wasmsched status`, `rollback` and `probe`: one
//! HTTP/1.1 request over a plain connection (the API is on loopback or a Unix socket).

use std::io::{Read, Write};
use std::time::Duration;

use super::{ApiError, Listen};
use crate::host::RolledBack;
use crate::status::Status;

/// A connection to either kind of address.
trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

fn connect(addr: &Listen) -> std::io::Result<Box<dyn Stream>> {
    Ok(match addr {
        Listen::Tcp(a) => {
            let s = std::net::TcpStream::connect_timeout(a, Duration::from_secs(5))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            Box::new(s)
        }
        Listen::Unix(path) => {
            let s = std::os::unix::net::UnixStream::connect(path)?;
            s.set_read_timeout(Some(Duration::from_secs(30)))?;
            Box::new(s)
        }
    })
}

/// Send one request; returns the status code and the body.
pub fn request(
    addr: impl Into<Listen>,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Result<(u16, String), ApiError> {
    let addr = addr.into();
    let fail = |detail: String| ApiError::Client { addr: addr.clone(), detail };
    let mut stream =
        connect(&addr).map_err(|e| fail(format!("{e}; is `wasmsched run` running with its API on this address?")))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let host = match &addr {
        Listen::Tcp(a) => a.to_string(),
        Listen::Unix(_) => "localhost".into(),
    };
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).map_err(|e| fail(e.to_string()))?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| fail("the answer is not HTTP".into()))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| fail("the answer has no status code".into()))?;
    Ok((code, body.to_string()))
}

/// The host's status.
pub fn status(addr: impl Into<Listen>, token: Option<&str>) -> Result<Status, ApiError> {
    let addr = addr.into();
    let (code, body) = request(&addr, "GET", "/status", token)?;
    if code != 200 {
        return Err(ApiError::Client { addr, detail: format!("HTTP {code}: {}", body.trim()) });
    }
    serde_json::from_str(&body).map_err(|e| ApiError::Client { addr, detail: format!("unreadable status: {e}") })
}

/// Ask for a rollback of `policy`.
pub fn rollback(addr: impl Into<Listen>, policy: &str, token: Option<&str>) -> Result<RolledBack, ApiError> {
    let addr = addr.into();
    let (code, body) = request(&addr, "POST", &format!("/rollback/{policy}"), token)?;
    if code != 200 {
        return Err(ApiError::Client { addr, detail: format!("HTTP {code}: {}", body.trim()) });
    }
    serde_json::from_str(&body).map_err(|e| ApiError::Client { addr, detail: format!("unreadable answer: {e}") })
}

/// End a running host's `[experiment]`; its name, as the host says it.
pub fn stop_experiment(addr: impl Into<Listen>, token: Option<&str>) -> Result<String, ApiError> {
    let addr = addr.into();
    let (code, body) = request(&addr, "POST", "/experiment/stop", token)?;
    if code != 200 {
        return Err(ApiError::Client { addr, detail: format!("HTTP {code}: {}", body.trim()) });
    }
    Ok(body.trim().to_string())
}

/// What a probe asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Probe {
    /// Whether the world is warm (`/readyz`).
    Ready,
    /// Whether the loop ends ticks (`/livez`).
    Live,
}

/// Ask a probe: Ok when the host says yes, else why not (its answer, or why it could not be
/// reached).
pub fn probe(addr: impl Into<Listen>, which: Probe) -> Result<(), String> {
    let path = match which {
        Probe::Ready => "/readyz",
        Probe::Live => "/livez",
    };
    match request(addr, "GET", path, None) {
        Ok((200, _)) => Ok(()),
        Ok((code, body)) => Err(format!("HTTP {code}: {}", body.trim())),
        Err(e) => Err(e.to_string()),
    }
}
