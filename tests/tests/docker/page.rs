//! The operator's page on Docker: a host on the real engine with two training containers, one
//! CPU-limited, fair share active; its page opened in headless Chromium. The page shows the
//! engine, its counts are `/status`'s, fair share's limits are on the timeline as applied, the
//! token is enforced and nothing is fetched from elsewhere.

use std::time::Duration;

use wasmsched_tests::cdp::chromium_or_say;
use wasmsched_tests::live::{Running, Setup, component};
use wasmsched_tests::page::{Watched, open};

use crate::engine::{eventually, trainer_engine_or_skip};
use crate::{QUICK, test_label};

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn the_operators_page_shows_the_engine_its_containers_and_the_limits_applied() {
    let Some(chromium) = chromium_or_say(module_path!(), "the page was not checked on Docker") else { return };
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
    let mut page = Watched::open(&chromium, &host, env!("CARGO_TARGET_TMPDIR").as_ref(), "docker-overview");
    let status = page.stop(host);
    let browser = &mut page.browser;
    let engine = status.endpoints.first().expect("the engine in the status");
    assert!(engine.up, "{engine:?}");
    let shown = browser.eval(&format!("document.body.textContent.includes({:?})", engine.name));
    assert_eq!(shown, true, "the engine {} is not on the page", engine.name);

    // Fair share's lifted limit, applied, on the timeline.
    open(browser, "decisions", "#/decisions?kind=set-cpu");
    let rows = browser.eval(
        "[...document.querySelectorAll('tr[data-seq]')].map(r => [r.querySelector('[data-field=\"kind\"]').textContent, r.querySelector('[data-field=\"outcome\"]').textContent, r.textContent])",
    );
    let rows = rows.as_array().unwrap();
    assert!(
        rows.iter().any(|r| r[0] == "set-cpu" && r[1] == "applied" && r[2].as_str().unwrap().contains("page-a")),
        "no applied set-cpu on page-a: {rows:?}"
    );
    page.assert_clean();
}
