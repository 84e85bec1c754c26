//! Headless Chromium driven over its DevTools protocol: a page opened, scripts evaluated in it,
//! the requests it made, screenshots. For the operator page's browser tests, which need a live
//! page (updates that arrive over a stream) rather than a page dumped once.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// How long the browser may take to start, or to answer one call.
const PATIENCE: Duration = Duration::from_secs(60);

/// Chromium: `WASMSCHED_CHROMIUM`, `/usr/bin/chromium`, or `chromium` on the PATH.
pub fn chromium() -> Option<PathBuf> {
    let from_env = std::env::var_os("WASMSCHED_CHROMIUM").map(PathBuf::from);
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| {
        std::env::split_paths(&p)
            .flat_map(|dir| ["chromium", "chromium-browser"].map(|n| dir.join(n)))
            .collect::<Vec<_>>()
    });
    from_env.into_iter().chain([PathBuf::from("/usr/bin/chromium")]).chain(on_path).find(|p| p.is_file())
}

/// [`chromium`], or None after saying that `test` skips and what it left unchecked.
pub fn chromium_or_say(test: &str, unchecked: &str) -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        eprintln!(
            "SKIPPED {test}: no chromium (apt-get install chromium, or set WASMSCHED_CHROMIUM to its path); {unchecked}"
        );
    }
    found
}

/// How every test runs Chromium: headless, alone (no sandbox, GPU, sync, updates or
/// background traffic), quiet.
pub const HEADLESS: [&str; 11] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--mute-audio",
];

/// A headless Chromium with one page, driven over the DevTools protocol; it is killed when
/// dropped.
pub struct Browser {
    child: Child,
    _profile: tempfile::TempDir,
    socket: WebSocket<MaybeTlsStream<TcpStream>>,
    session: String,
    next: u64,
    /// Every event the page sent, in order.
    pub events: Vec<Value>,
}

impl Browser {
    /// Start `chromium` with a viewport of `width` × `height` and open a blank page.
    pub fn launch(chromium: &Path, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new(chromium)
            .args(HEADLESS)
            .args(["--remote-debugging-port=0", "--remote-allow-origins=*"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg(format!("--window-size={width},{height}"))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium.display()));
        // Chromium writes the port it chose and the browser's path into the profile.
        let port_file = profile.path().join("DevToolsActivePort");
        let started = Instant::now();
        let url = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && let Some((port, path)) = text.split_once('\n')
                && !path.trim().is_empty()
            {
                break format!("ws://127.0.0.1:{}{}", port.trim(), path.trim());
            }
            assert!(started.elapsed() < PATIENCE, "chromium did not open its DevTools port within {PATIENCE:?}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let (socket, _) = tungstenite::connect(&url).unwrap_or_else(|e| panic!("cannot reach chromium at {url}: {e}"));
        if let MaybeTlsStream::Plain(s) = socket.get_ref() {
            s.set_read_timeout(Some(PATIENCE)).unwrap();
        }
        let mut browser =
            Browser { child, _profile: profile, socket, session: String::new(), next: 0, events: Vec::new() };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().expect("a target id").to_string();
        let attached = browser.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}));
        browser.session = attached["sessionId"].as_str().expect("a session id").to_string();
        for domain in ["Page.enable", "Network.enable", "Runtime.enable"] {
            browser.call(domain, json!({}));
        }
        browser
    }

    /// Call `method` (on the page, once one is attached) and wait for its answer; events that
    /// come meanwhile are kept in [`Browser::events`].
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        self.socket.send(Message::text(message.to_string())).unwrap();
        let started = Instant::now();
        loop {
            assert!(started.elapsed() < PATIENCE, "no answer to {method} within {PATIENCE:?}");
            let Message::Text(text) = self.socket.read().unwrap_or_else(|e| panic!("chromium went away: {e}")) else {
                continue;
            };
            let v: Value = serde_json::from_str(&text).unwrap();
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method} failed: {}", v["error"]);
                return v["result"].clone();
            }
            if v.get("method").is_some() {
                self.events.push(v);
            }
        }
    }

    /// Go to `url` and wait until it has loaded.
    pub fn navigate(&mut self, url: &str) {
        let before = self.events.len();
        self.call("Page.navigate", json!({"url": url}));
        let started = Instant::now();
        while !self.events[before..].iter().any(|e| e["method"] == "Page.loadEventFired") {
            assert!(started.elapsed() < PATIENCE, "{url} did not load within {PATIENCE:?}");
            self.call("Runtime.evaluate", json!({"expression": "1"}));
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The value of `expression` in the page (a promise is awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self
            .call("Runtime.evaluate", json!({"expression": expression, "returnByValue": true, "awaitPromise": true}));
        assert!(r.get("exceptionDetails").is_none(), "{expression} threw: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// Wait until `expression` is truthy in the page, and return its value; panics with `what`
    /// after `patience`.
    pub fn wait_for(&mut self, what: &str, expression: &str, patience: Duration) -> Value {
        let started = Instant::now();
        loop {
            let v = self.eval(expression);
            let truthy = !(v.is_null() || v == json!(false) || v == json!(0) || v == json!(""));
            if truthy {
                return v;
            }
            if started.elapsed() > patience {
                let shown = self.eval("document.body.innerText.slice(0, 3000)");
                panic!(
                    "waited {patience:?} for {what} ({expression}); the page shows:\n{}\nand logged: {:?}",
                    shown.as_str().unwrap_or_default(),
                    self.errors()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Set the viewport to `width` × `height` (a phone's, say).
    pub fn viewport(&mut self, width: u32, height: u32, mobile: bool) {
        let params = json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile});
        self.call("Emulation.setDeviceMetricsOverride", params);
    }

    /// A PNG of the page as it shows now, the whole page's height, written to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png", "captureBeyondViewport": true}));
        let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Every URL the page asked for so far.
    pub fn requested(&self) -> Vec<String> {
        let sent = self.events.iter().filter(|e| e["method"] == "Network.requestWillBeSent");
        sent.filter_map(|e| e["params"]["request"]["url"].as_str().map(str::to_string)).collect()
    }

    /// What the page logged to its console as errors, and exceptions it did not catch.
    pub fn errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e["method"].as_str()? {
                "Runtime.exceptionThrown" => Some(e["params"]["exceptionDetails"].to_string()),
                "Runtime.consoleAPICalled" if e["params"]["type"] == "error" => Some(e["params"]["args"].to_string()),
                _ => None,
            })
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
