//! The operator's page on the kit: a host on the real cluster placing three queued pods with
//! FIFO, its page opened in headless Chromium. The page shows the cluster's own nodes and the
//! apiserver, its counts are `/status`'s, each pod's placement is on the timeline as applied,
//! the token is enforced and nothing is fetched from elsewhere.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use wasmsched_tests::cdp::chromium_or_say;
use wasmsched_tests::live::{Running, Setup, component};
use wasmsched_tests::page::{Watched, number, open, screenshot};

use crate::cluster::{cluster, serial};
use crate::replicas::{queued_pod, with_limits};
use crate::test_label;

#[test]
#[cfg_attr(
    not(live_kubernetes),
    ignore = "needs a Kubernetes cluster: `../shared/k8s/cluster up 2`, export WASMSCHED_KUBECONFIG=<its kubeconfig>"
)]
fn the_operators_page_shows_the_kits_nodes_pods_and_apiserver() {
    let Some(chromium) = chromium_or_say(module_path!(), "the page was not checked on the kit") else { return };
    let Some(c) = cluster() else {
        eprintln!("SKIPPED {}: no Kubernetes cluster", module_path!());
        return;
    };
    let _serial = serial();
    let label = test_label("page");
    let _sweep = c.sweep(&label);
    let names: Vec<String> =
        (0..3).map(|i| queued_pod(c, &label, &format!("page-{}-{i}", std::process::id()), with_limits())).collect();
    let setup = Setup::new();
    setup.land("fifo", &component("fifo"));
    let text = format!(
        "tick = \"500ms\"\npolicies-dir = \"policies\"\n[backend]\nkind = \"kubernetes\"\nkubeconfig = \"{}\"\n\
         selector = \"wasmsched.test={label}\"\n[api]\nenabled = false\n[record]\naudit = \"audit.jsonl\"\n\
         [policy.fifo]\nrole = \"active\"\n",
        c.kubeconfig.display()
    );
    let path = setup.dir.path().join("host.toml");
    std::fs::write(&path, text).unwrap();
    let host = Running::start(wasmsched::config::HostConfig::load(&path).unwrap());
    host.wait("the three pods running", |s| s.jobs_running == 3);
    let tmp: &std::path::Path = env!("CARGO_TARGET_TMPDIR").as_ref();
    let mut page = Watched::open(&chromium, &host, tmp, "kit-overview");
    let status = page.stop(host);
    let browser = &mut page.browser;
    let nodes = c.rt.block_on(Api::<Node>::all(c.client.clone()).list(&ListParams::default())).unwrap().items;
    assert_eq!(number(browser, "nodes-total"), nodes.len() as u64, "the kit's nodes");
    for n in &nodes {
        let name = n.metadata.name.as_deref().unwrap();
        assert!(
            browser.eval(&format!("document.body.textContent.includes('{name}')")) == true,
            "node {name} not shown"
        );
    }
    let apiserver = status.endpoints.iter().find(|e| e.kind == "apiserver").expect("the apiserver in the status");
    assert!(apiserver.up, "{apiserver:?}");

    // Each pod's placement, applied, on the timeline.
    open(browser, "decisions", "#/decisions?kind=place");
    let placed = browser.eval(
        "[...document.querySelectorAll('tr[data-seq]')].filter(r => r.querySelector('[data-field=\"outcome\"]').textContent === 'applied').map(r => r.textContent)",
    );
    for name in &names {
        assert!(
            placed.as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains(name.as_str())),
            "{name}: {placed}"
        );
    }
    screenshot(browser, tmp, "kit-decisions");
    // A pod's page names its namespace.
    let job = browser.eval("Number(document.querySelector('tr[data-job]:not([data-job=\"\"])').dataset.job)");
    open(browser, "job", &format!("#/jobs/{job}"));
    assert_eq!(browser.eval("document.body.textContent.includes('default')"), true, "the pod's namespace");
    page.assert_clean();
}
