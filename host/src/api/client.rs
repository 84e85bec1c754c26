//! The client end of the control API, for `wasmsched status` and `wasmsched rollback`: one
//! HTTP/1.1 request over a plain TCP connection (the API is on loopback).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::ApiError;
use crate::host::RolledBack;
use crate::host::status::Status;

/// Send one request; returns the status code and the body.
pub fn request(addr: SocketAddr, method: &str, path: &str, token: Option<&str>) -> Result<(u16, String), ApiError> {
    let fail = |detail: String| ApiError::Client { addr, detail };
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| fail(format!("{e}; is `wasmsched run` running with its API on this address?")))?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| fail(e.to_string()))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n");
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
pub fn status(addr: SocketAddr, token: Option<&str>) -> Result<Status, ApiError> {
    let (code, body) = request(addr, "GET", "/status", token)?;
    if code != 200 {
        return Err(ApiError::Client { addr, detail: format!("HTTP {code}: {}", body.trim()) });
    }
    serde_json::from_str(&body).map_err(|e| ApiError::Client { addr, detail: format!("unreadable status: {e}") })
}

/// Ask for a rollback of `policy`.
pub fn rollback(addr: SocketAddr, policy: &str, token: Option<&str>) -> Result<RolledBack, ApiError> {
    let (code, body) = request(addr, "POST", &format!("/rollback/{policy}"), token)?;
    if code != 200 {
        return Err(ApiError::Client { addr, detail: format!("HTTP {code}: {}", body.trim()) });
    }
    serde_json::from_str(&body).map_err(|e| ApiError::Client { addr, detail: format!("unreadable answer: {e}") })
}
