//! Which live tests this build runs: those against a Docker Engine when the set-up named one
//! (`WASMSCHED_DOCKER`), those against a Kubernetes cluster when it named one
//! (`WASMSCHED_KUBECONFIG`). Without, they are compiled as ignored with the reason, so that a
//! machine with neither counts them as ignored rather than passed; `.ci/run` names both.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(live_docker, live_kubernetes)");
    for (var, cfg) in [("WASMSCHED_DOCKER", "live_docker"), ("WASMSCHED_KUBECONFIG", "live_kubernetes")] {
        println!("cargo::rerun-if-env-changed={var}");
        if std::env::var(var).is_ok_and(|v| !v.trim().is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
