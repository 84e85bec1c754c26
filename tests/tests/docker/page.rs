//! The operator's page on Docker: a host on the real engine with two training containers, one
//! CPU-limited, fair share active; its page opened in headless Chromium. The page shows the
//! engine, its counts are `/status`'s, fair share's limits are on the timeline as applied, the
//! token is enforced and nothing is fetched from elsewhere.

use std::net::SocketAddr;
use std::time::Duration;

use wasmsched::api::{self, client};
use wasmsched_tests::cdp::{Browser, chromium};
use wasmsched_tests::live::{Running, Setup, component};
use wasmsched_tests::page::{SHOWN, TOKEN, elsewhere, http, number, open, screenshot, sign_in};

use crate::engine::{eventually, trainer_engine_or_skip};
use crate::{QUICK, test_label};

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn the_operators_page_shows_the_engine_its_containers_and_the_limits_applied() {
    let Some(chromium) = chromium() else {
        eprintln!(
            "SKIPPED {}: no chromium (apt-get install chromium); the page was not checked on Docker",
            module_path!()
        );
        return;
    };
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("page");
    let a = e.start_trainer("page-a", &[("test", &label)], QUICK, Some(0.5));
    let _b = e.start_trainer("page-b", &[("test", &label)], QUICK, None);
    let setup = Setup::new();
    setup.land("fair-share", &component("fair-share"));
    let text = format!(
        "tick = \"500ms\"\npolicies-dir = \"policies\"\n[backend]\nkind = \"docker\"\nengines = [\"{}\"]\n\
         selector = \"wasmsched.test={label}\"\ngpus = false\n[api]\nenabled = false\n\
         [record]\naudit = \"audit.jsonl\"\n[policy.fair-share]\nrole = \"active\"\n",
        e.endpoint
    );
    let path = setup.dir.path().join("host.toml");
    std::fs::write(&path, text).unwrap();
    let host = Running::start(wasmsched::config::HostConfig::load(&path).unwrap());
    host.wait("two containers seen", |s| s.jobs_running == 2);
    eventually("fair share lifting the limit", Duration::from_secs(30), || (e.cpus(&a.id) >= 1.0).then_some(()));
    let server =
        api::serve(host.handle.clone(), "127.0.0.1:0".parse::<SocketAddr>().unwrap(), Some(TOKEN.into())).unwrap();
    let api::Listen::Tcp(addr) = server.addr().clone() else { unreachable!() };
    let origin = format!("http://{addr}");
    assert_eq!(http(addr, "GET /api/overview HTTP/1.1\r\n").0, 401, "no token, no data");

    let mut browser = Browser::launch(&chromium, 1280, 900);
    sign_in(&mut browser, &origin);
    let before = browser.eval("Number(document.body.dataset.updates || 0)").as_u64().unwrap();
    browser.wait_for("an update", &format!("Number(document.body.dataset.updates || 0) > {before}"), SHOWN);
    screenshot(&mut browser, env!("CARGO_TARGET_TMPDIR").as_ref(), "docker-overview");

    host.stop();
    browser.wait_for("the page to see the loop stop", "document.body.textContent.includes('stopped')", SHOWN);
    let status = client::status(server.addr(), Some(TOKEN)).unwrap();
    open(&mut browser, "overview", "#/overview?stopped");
    assert_eq!(number(&mut browser, "jobs-running"), status.jobs_running);
    assert_eq!(number(&mut browser, "ticks"), status.ticks);
    let engine = status.endpoints.first().expect("the engine in the status");
    assert!(engine.up, "{engine:?}");
    let shown = browser.eval(&format!("document.body.textContent.includes({:?})", engine.name));
    assert_eq!(shown, true, "the engine {} is not on the page", engine.name);

    // Fair share's lifted limit, applied, on the timeline.
    open(&mut browser, "decisions", "#/decisions?kind=set-cpu");
    let rows = browser.eval(
        "[...document.querySelectorAll('tr[data-seq]')].map(r => [r.querySelector('[data-field=\"kind\"]').textContent, r.querySelector('[data-field=\"outcome\"]').textContent, r.textContent])",
    );
    let rows = rows.as_array().unwrap();
    assert!(
        rows.iter().any(|r| r[0] == "set-cpu" && r[1] == "applied" && r[2].as_str().unwrap().contains("page-a")),
        "no applied set-cpu on page-a: {rows:?}"
    );
    let fetched = elsewhere(&browser, &origin);
    assert!(fetched.is_empty(), "the page fetched from elsewhere: {fetched:?}");
    assert!(browser.errors().is_empty(), "the page logged errors: {:?}", browser.errors());
}
