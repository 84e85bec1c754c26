//! The operator's page in a real browser (headless Chromium over its DevTools protocol),
//! against a running host on the simulator: three tenants queueing for sixteen GPUs, FIFO
//! active and fair share as its shadow. Each page loads and agrees with `/status` and the
//! audit log, an update arrives without a reload, the token is enforced, nothing is fetched
//! from elsewhere, and it fits a phone. Screenshots go under the target dir, and into
//! `WASMSCHED_SCREENSHOTS` (the operator's guide's, `docs/operator/`) when that is set.
//! Without Chromium the test says it skips, loudly.

use std::net::SocketAddr;

use wasmsched::api::{self, client};
use wasmsched_tests::cdp::{Browser, chromium_or_say};
use wasmsched_tests::live::{Running, Setup, component};
use wasmsched_tests::page::{SHOWN, TOKEN, elsewhere, http, number, open, screenshot, sign_in};

/// Where the screenshots go first.
const TMP: &str = env!("CARGO_TARGET_TMPDIR");

#[test]
fn the_operators_page_agrees_with_the_status_updates_live_and_keeps_its_token() {
    let Some(chromium) = chromium_or_say("page", "the operator's page was not checked") else { return };
    let setup = Setup::new();
    // nlp's jobs train cifar10 for 40 epochs rather than bert for 4: short epochs, so the jobs'
    // pages have progress to draw within the test's minutes of backend time.
    let workload = include_str!("../../scenarios/tenants.toml").replacen(
        "model = \"bert\"\ngpus = 2\nmax-epochs = 4",
        "model = \"cifar10\"\ngpus = 2\nmax-epochs = 40",
        1,
    );
    std::fs::write(setup.dir.path().join("workload.toml"), workload).unwrap();
    setup.land("fifo", &component("fifo"));
    setup.land("fair-share", &component("fair-share"));
    let policies = "[policy.fifo]\n[policy.fair-share]\nrole = \"shadow\"\n";
    let running = Running::start(setup.config("30s", "600", policies));
    running.wait("a queue with reasons", |s| s.ticks > 3 && s.jobs_queued > 0 && !s.pending.is_empty());
    let server =
        api::serve(running.handle.clone(), "127.0.0.1:0".parse::<SocketAddr>().unwrap(), Some(TOKEN.into())).unwrap();
    let api::Listen::Tcp(addr) = server.addr().clone() else { unreachable!() };
    let origin = format!("http://{addr}");

    // Over HTTP: the page's files come without the token and forbid loading from elsewhere;
    // its data does not; a page of another origin may not act.
    let (code, page) = http(addr, "GET / HTTP/1.1\r\n");
    assert_eq!(code, 200);
    assert!(page.contains("content-security-policy: default-src 'self'"), "{page}");
    assert_eq!(http(addr, "GET /api/overview HTTP/1.1\r\n").0, 401);
    assert_eq!(http(addr, "GET /api/events HTTP/1.1\r\n").0, 401);
    let (code, body) = http(
        addr,
        &format!(
            "POST /rollback/fifo HTTP/1.1\r\nOrigin: http://elsewhere.example\r\nAuthorization: Bearer {TOKEN}\r\n"
        ),
    );
    assert_eq!(code, 403, "{body}");

    let mut browser = Browser::launch(&chromium, 1280, 900);
    // Without the token: the form, and no data; with it, the overview.
    sign_in(&mut browser, &origin);
    assert!(number(&mut browser, "nodes-total") == 4 && number(&mut browser, "gpus-total") == 16);

    // Live: updates arrive over the stream, and the page is never loaded again.
    browser.eval("window.stillTheSamePage = true");
    let before = browser.eval("Number(document.body.dataset.updates || 0)").as_u64().unwrap();
    let ticks_before = number(&mut browser, "ticks");
    browser.wait_for("two updates", &format!("Number(document.body.dataset.updates || 0) >= {before} + 2"), SHOWN);
    browser.wait_for(
        "a later tick shown",
        &format!("Number(document.querySelector('[data-field=\"ticks\"]').textContent) > {ticks_before}"),
        SHOWN,
    );
    assert_eq!(
        browser.eval("window.stillTheSamePage === true && performance.getEntriesByType('navigation').length"),
        1
    );
    screenshot(&mut browser, TMP.as_ref(), "overview");

    for (page, route) in
        [("queue", "#/queue"), ("tenants", "#/tenants"), ("decisions", "#/decisions"), ("shadows", "#/shadows")]
    {
        open(&mut browser, page, route);
        screenshot(&mut browser, TMP.as_ref(), page);
    }
    // A job's page: the placed job with the most progress, its curve drawn.
    open(&mut browser, "decisions", "#/decisions?pick");
    let placed = browser
        .eval("[...document.querySelectorAll('tr[data-job]:not([data-job=\"\"])')].map(r => Number(r.dataset.job))");
    let progress = |job: u64| {
        let (_, body) = client::request(server.addr(), "GET", &format!("/api/jobs/{job}"), Some(TOKEN)).unwrap();
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["progress"].as_array().map_or(0, Vec::len)
    };
    let job = placed.as_array().unwrap().iter().filter_map(|j| j.as_u64()).max_by_key(|&j| progress(j)).unwrap();
    open(&mut browser, "job", &format!("#/jobs/{job}"));
    eprintln!("job {job}: {} progress records", progress(job));
    if progress(job) > 1 {
        let curve = "document.querySelector('svg[role=\"img\"] path, svg[role=\"img\"] polyline') !== null";
        browser.wait_for("its progress curve", curve, SHOWN);
    }
    screenshot(&mut browser, TMP.as_ref(), "job");

    // Stopped, the host's figures hold still: the page must show exactly what /status says.
    let summary = running.stop();
    assert!(summary.ticks > 0);
    browser.wait_for("the page to see the loop stop", "document.body.textContent.includes('stopped')", SHOWN);
    let status = client::status(server.addr(), Some(TOKEN)).unwrap();
    open(&mut browser, "overview", "#/overview?again");
    assert_eq!(number(&mut browser, "jobs-running"), status.jobs_running);
    assert_eq!(number(&mut browser, "jobs-queued"), status.jobs_queued);
    assert_eq!(number(&mut browser, "ticks"), status.ticks);

    open(&mut browser, "queue", "#/queue");
    let rows = browser.eval(
        "[...document.querySelectorAll('tr[data-job]')].map(r => [Number(r.dataset.job), r.querySelector('[data-field=\"reason\"]').textContent, r.querySelector('[data-field=\"reason-by\"]').textContent])",
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len() as u64, status.jobs_queued.min(50), "one row per queued job, 50 a page");
    let mut compared = 0;
    for p in &status.pending {
        if let Some(row) = rows.iter().find(|r| r[0] == p.job.0) {
            assert_eq!(row[1], p.reason.as_str(), "job {} waits for the policy's reason", p.job.0);
            assert!(row[2].as_str().unwrap().contains("policy"), "{row:?}");
            compared += 1;
        }
    }
    assert!(compared > 0, "no queued job's reason was compared: {rows:?} against {:?}", status.pending);

    // The shadow's agreement, as the status counts it.
    open(&mut browser, "shadows", "#/shadows?stopped");
    let agreement = status.policy("fair-share").and_then(|p| p.shadow).expect("fair share's agreement");
    let shown =
        browser.eval("document.querySelector('[data-shadow=\"fair-share\"] [data-field=\"rate\"]').textContent");
    assert_eq!(shown, format!("{:.1} %", agreement.rate() * 100.0), "{agreement:?}");

    // A decision's outcome, against the audit log's line for its tick.
    open(&mut browser, "decisions", "#/decisions");
    let shown = browser.eval(
        "[...document.querySelectorAll('tr[data-seq]')].map(r => [Number(r.dataset.job), r.querySelector('[data-field=\"outcome\"]').textContent, r.querySelector('[data-field=\"kind\"]').textContent])",
    );
    let shown = shown.as_array().unwrap();
    assert!(!shown.is_empty(), "no decisions shown");
    let placed = shown.iter().find(|d| d[1] == "applied" && d[2] == "place").expect("an applied placement");
    let job = placed[0].as_u64().unwrap() as u32;
    let audit = setup.audit_lines();
    let in_audit = audit.iter().any(|l| {
        l.active
            .as_ref()
            .is_some_and(|a| a.actions.iter().any(|x| x.job.0 == job) && a.not_applied.iter().all(|x| x.job.0 != job))
    });
    assert!(in_audit, "the audit log has no applied action on job {job}");

    // A phone: nothing wider than the screen but the tables' own scrolling.
    browser.viewport(390, 844, true);
    open(&mut browser, "queue", "#/queue?phone");
    let width = browser.eval("document.documentElement.scrollWidth").as_u64().unwrap();
    assert!(width <= 391, "the page is {width} px wide on a 390 px phone");
    screenshot(&mut browser, TMP.as_ref(), "queue-phone");

    // Usable without a mouse or eyes: every control labelled, the page named in the nav.
    let unlabelled = browser.eval(
        "[...document.querySelectorAll('input, select')].filter(e => e.labels.length === 0 && !e.getAttribute('aria-label')).map(e => e.outerHTML)",
    );
    assert_eq!(unlabelled, serde_json::json!([]), "controls without labels");
    assert_eq!(browser.eval("document.querySelectorAll('nav [aria-current=\"page\"]').length"), 1);

    let fetched = elsewhere(&browser, &origin);
    assert!(fetched.is_empty(), "the page fetched from elsewhere: {fetched:?}");
    assert!(browser.errors().is_empty(), "the page logged errors: {:?}", browser.errors());
    drop(server);
}
