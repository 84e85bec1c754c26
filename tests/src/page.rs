//! The operator's page, checked in a browser: what a test does with it (sign in, open a
//! route and wait for its data, read the numbers shown), shared by the simulator's test
//! (`tests/tests/page.rs`) and the kit's (`tests/tests/kubernetes/page.rs`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use wasmsched::api::{self, ApiServer, client};
use wasmsched::status::Status;

use crate::cdp::Browser;
use crate::live::Running;

/// The token the tests' hosts guard their API with.
pub const TOKEN: &str = "s3cret";

/// How long the page may take to show what it was asked for.
pub const SHOWN: Duration = Duration::from_secs(30);

/// A screenshot of the page as `name.png` under `tmp` (the test's target dir), and into
/// `WASMSCHED_SCREENSHOTS` (the operator's guide's, `docs/operator/`) when that is set.
pub fn screenshot(browser: &mut Browser, tmp: &Path, name: &str) {
    let mut dirs = vec![tmp.join("page")];
    dirs.extend(std::env::var_os("WASMSCHED_SCREENSHOTS").map(PathBuf::from));
    for dir in dirs {
        let path = dir.join(format!("{name}.png"));
        browser.screenshot(&path);
        eprintln!("screenshot: {}", path.display());
    }
}

/// One HTTP request with the headers given; the status code and body.
pub fn http(addr: SocketAddr, head: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(format!("{head}Host: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let code = raw.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap();
    (code, raw)
}

/// Go to the page at `route` and wait until it shows its data.
pub fn open(browser: &mut Browser, page: &str, route: &str) {
    browser.eval(&format!("location.hash = '{route}'"));
    let ready = format!("document.querySelector('#view[data-page=\"{page}\"][data-ready=\"true\"]') !== null");
    browser.wait_for(&format!("the {page} page"), &ready, SHOWN);
}

/// The text of every element matching `selector`.
pub fn texts(browser: &mut Browser, selector: &str) -> Vec<String> {
    let v = browser.eval(&format!("[...document.querySelectorAll('{selector}')].map(e => e.textContent.trim())"));
    v.as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect()
}

/// The number shown in the element whose `data-field` is `field`.
pub fn number(browser: &mut Browser, field: &str) -> u64 {
    let t = texts(browser, &format!("[data-field=\"{field}\"]"));
    t.first().unwrap_or_else(|| panic!("no {field} on the page")).parse().unwrap_or_else(|_| panic!("{field}: {t:?}"))
}

/// Open the page at `origin`, see it ask for the token and show nothing, give the token, and
/// wait for the overview.
pub fn sign_in(browser: &mut Browser, origin: &str) {
    browser.navigate(&format!("{origin}/#/overview"));
    browser.wait_for("the token form", "document.querySelector('#token-form') !== null", SHOWN);
    assert!(texts(browser, "[data-field=\"jobs-running\"]").is_empty(), "data shown without the token");
    browser.eval(&format!(
        "document.querySelector('#token').value = '{TOKEN}'; document.querySelector('#token-form').requestSubmit()"
    ));
    open(browser, "overview", "#/overview");
}

/// Every URL the page asked for that is not on `origin`.
pub fn elsewhere(browser: &Browser, origin: &str) -> Vec<String> {
    browser.requested().into_iter().filter(|u| !u.starts_with(origin) && u != "about:blank").collect()
}

/// A running host's page in a browser: the API served with [`TOKEN`] on loopback (its data
/// refused without it), the page signed in and one live update seen, a screenshot `name`
/// taken under `tmp`.
pub struct Watched {
    /// The browser, on the page.
    pub browser: Browser,
    /// The API, kept up after the host stops so that the page can still be read.
    pub server: ApiServer,
    /// The page's origin, `http://127.0.0.1:PORT`.
    pub origin: String,
}

impl Watched {
    /// Open `host`'s page in a new `chromium`.
    pub fn open(chromium: &Path, host: &Running, tmp: &Path, name: &str) -> Watched {
        let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server = api::serve(host.handle.clone(), loopback, Some(TOKEN.into())).unwrap();
        let api::Listen::Tcp(addr) = server.addr().clone() else { unreachable!("a TCP address was asked for") };
        assert_eq!(http(addr, "GET /api/overview HTTP/1.1\r\n").0, 401, "no token, no data");
        let origin = format!("http://{addr}");
        let mut browser = Browser::launch(chromium, 1280, 900);
        sign_in(&mut browser, &origin);
        let before = browser.eval("Number(document.body.dataset.updates || 0)").as_u64().unwrap();
        browser.wait_for("an update", &format!("Number(document.body.dataset.updates || 0) > {before}"), SHOWN);
        screenshot(&mut browser, tmp, name);
        Watched { browser, server, origin }
    }

    /// Stop `host`, see the page say so, and check that its overview shows `/status`'s counts
    /// and ticks; that status.
    pub fn stop(&mut self, host: Running) -> Status {
        host.stop();
        let b = &mut self.browser;
        b.wait_for("the page to see the loop stop", "document.body.textContent.includes('stopped')", SHOWN);
        let status = client::status(self.server.addr(), Some(TOKEN)).unwrap();
        open(b, "overview", "#/overview?stopped");
        assert_eq!(number(b, "jobs-running"), status.jobs_running);
        assert_eq!(number(b, "jobs-queued"), status.jobs_queued);
        assert_eq!(number(b, "ticks"), status.ticks);
        status
    }

    /// Nothing fetched from elsewhere, no error logged.
    pub fn assert_clean(&self) {
        let fetched = elsewhere(&self.browser, &self.origin);
        assert!(fetched.is_empty(), "the page fetched from elsewhere: {fetched:?}");
        assert!(self.browser.errors().is_empty(), "the page logged errors: {:?}", self.browser.errors());
    }
}
