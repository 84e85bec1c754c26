//! The config's parsing and checks.
use super::*;

const MINIMAL: &str = "tick = \"1s\"\npolicies-dir = \"p\"\n[backend]\nkind = \"sim\"\nworkload = \"w.toml\"\n";

fn parse(text: &str) -> Result<HostConfig, ConfigError> {
    HostConfig::parse(Path::new("host.toml"), text)
}

/// The error `[backend]` written as `table` gets.
fn refused(table: &str) -> String {
    let text = format!("tick = \"1s\"\npolicies-dir = \"p\"\n[backend]\n{table}");
    parse(&text).expect_err(table).to_string()
}

#[cfg(feature = "docker")]
fn docker(c: &HostConfig) -> &crate::backend::docker::DockerConfig {
    match &c.backend {
        BackendConfig::Docker(d) => d,
        other => panic!("not a docker backend: {other:?}"),
    }
}

#[cfg(feature = "kubernetes")]
fn kubernetes(c: &HostConfig) -> &crate::backend::kubernetes::KubernetesConfig {
    match &c.backend {
        BackendConfig::Kubernetes(k) => k,
        other => panic!("not a kubernetes backend: {other:?}"),
    }
}

#[test]
fn a_minimal_config_takes_the_defaults() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.tick, Duration::from_secs(1));
    assert_eq!(c.backend.speed(), Speed::RealTime);
    assert_eq!(c.api.listen, default_listen());
    assert!(c.reload.watch);
    assert!(c.policy.is_empty());
}

#[test]
fn a_policy_table_reads_its_limits_role_fallback_and_own_config() {
    let text = format!(
        "{MINIMAL}[policy.a]\nrole = \"shadow\"\ndeadline = \"20ms\"\nmemory = \"32MiB\"\nfallback = \"fair-share\"\n\
         log-lines = 10\nlog-bytes = \"2KiB\"\n\
         [policy.a.config]\nalpha = 0.5\n"
    );
    let c = parse(&text).unwrap();
    let a = &c.policy["a"];
    assert_eq!(a.role, Role::Shadow);
    assert_eq!(a.limits().deadline, Duration::from_millis(20));
    assert_eq!(a.memory, 32 << 20);
    assert_eq!((a.limits().log_lines, a.limits().log_bytes), (10, 2 << 10));
    assert_eq!(a.fallback, Fallback::FairShare);
    assert_eq!(a.config["alpha"].as_float(), Some(0.5));
    assert_eq!(c.active(), None);
}

#[test]
fn unknown_keys_are_refused_with_their_name() {
    for (text, key) in [
        (format!("{MINIMAL}colour = \"blue\"\n"), "colour"),
        (format!("{MINIMAL}speeed = 2\n"), "speeed"),
        (format!("{MINIMAL}[policy.a]\ndeadlin = \"1s\"\n"), "deadlin"),
        (format!("{MINIMAL}[api]\nport = 80\n"), "port"),
    ] {
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains(&format!("unknown field `{key}`")), "{key}: {e}");
    }
}

#[cfg(feature = "docker")]
#[test]
fn a_docker_backend_takes_engines_and_a_selector_with_the_defaults_for_the_rest() {
    const DOCKER: &str = "tick = \"1s\"\npolicies-dir = \"p\"\n[backend]\nkind = \"docker\"\n";
    let c =
        parse(&format!("{DOCKER}engines = [\"unix:///a.sock\", \"tcp://10.0.0.2:2375\"]\nselector = \"team=ml\"\n"))
            .unwrap();
    let d = docker(&c);
    assert_eq!(d.engines, ["unix:///a.sock", "tcp://10.0.0.2:2375"]);
    assert_eq!(d.selector, "team=ml");
    assert!(d.gpus);
    assert_eq!(c.backend.speed(), Speed::RealTime);
    let defaults = parse(DOCKER).unwrap();
    let defaults = docker(&defaults);
    assert_eq!(defaults.selector, "wasmsched.managed=true");
    assert_eq!((defaults.engines.len(), defaults.timeout), (1, Duration::from_secs(5)));
    let empty = parse(&format!("{DOCKER}engines = []\ngpus = false\n")).unwrap();
    assert_eq!(docker(&empty).engines, defaults.engines, "no engine listed is the default one");
    assert!(!docker(&empty).gpus);
}

/// Every message a `[backend]` table can get beyond serde's own, in full.
#[test]
fn a_backend_table_that_cannot_be_used_says_what_to_write() {
    let mut cases = Vec::new();
    cases.extend([
        ("kind = \"sim\"\n", "the sim backend needs a workload: [backend] workload = \"scenarios/demo.toml\""),
        ("workload = \"w.toml\"\n", "missing field `kind`"),
        ("kind = 3\nworkload = \"w.toml\"\n", "invalid type: integer, expected a backend's kind"),
        (
            "kind = \"simm\"\nworkload = \"w.toml\"\n",
            "unknown variant `simm`, expected one of `sim`, `docker`, `kubernetes`",
        ),
        ("kind = \"sim\"\nworkload = \"w.toml\"\nspeeed = 2\n", "unknown field `speeed`"),
    ]);
    #[cfg(feature = "docker")]
    cases.extend([
        (
            "kind = \"sim\"\nworkload = \"w.toml\"\nengines = [\"unix:///a.sock\"]\n",
            "the sim backend runs a workload on a simulated clock; remove engines (it is for kind = \"docker\")",
        ),
        (
            "kind = \"docker\"\nworkload = \"w.toml\"\n",
            "the docker backend runs real containers in real time; remove workload (it is for kind = \"sim\")",
        ),
        (
            "kind = \"docker\"\nspeed = 60\n",
            "the docker backend runs real containers in real time; remove speed (it is for kind = \"sim\")",
        ),
        (
            "kind = \"docker\"\nselector = \" \"\n",
            "selector is a label, KEY=VALUE or KEY, e.g. \"wasmsched.managed=true\"",
        ),
        (
            "kind = \"docker\"\ntimeout = \"1s\"\n",
            "unknown field `timeout`, expected one of `engines`, `selector`, `gpus`",
        ),
    ]);
    #[cfg(feature = "kubernetes")]
    cases.extend([
        (
            "kind = \"sim\"\nworkload = \"w.toml\"\nkubeconfig = \"k\"\nnamespace = \"x\"\nscheduler-name = \"s\"\n",
            "the sim backend runs a workload on a simulated clock; remove kubeconfig, namespace and scheduler-name \
             (they are for kind = \"kubernetes\")",
        ),
        (
            "kind = \"kubernetes\"\nspeed = \"max\"\n",
            "the kubernetes backend runs pods on a cluster in real time; remove speed (it is for kind = \"sim\")",
        ),
        ("kind = \"kubernetes\"\nselector = \"\"\n", "selector is a label selector, e.g. \"wasmsched.managed=true\""),
        ("kind = \"kubernetes\"\nnamespace = \" \"\n", "namespace is a namespace's name, e.g. \"default\""),
        (
            "kind = \"kubernetes\"\n[backend.gpu-telemetry]\nport = 0\n",
            "[backend.gpu-telemetry] port is the port the exporter serves on, e.g. 9400",
        ),
        ("kind = \"kubernetes\"\n[backend.gpu-telemetry]\nprot = 9400\n", "unknown field `prot`"),
        (
            "kind = \"kubernetes\"\n[backend.gpu-sharing]\ninterval = \"short\"\n",
            "[backend.gpu-sharing] interval is time-slicing's: drop it, or set strategy = \"time-slicing\"",
        ),
        ("kind = \"kubernetes\"\n[backend.gpu-sharing]\nstrategy = \"mig\"\n", "expected `mps` or `time-slicing`"),
    ]);
    #[cfg(all(feature = "docker", feature = "kubernetes"))]
    cases.extend([
        (
            "kind = \"sim\"\nworkload = \"w.toml\"\nengines = []\nselector = \"a=b\"\n",
            "the sim backend runs a workload on a simulated clock; remove engines and selector (they are for \
             kind = \"docker\" and kind = \"kubernetes\")",
        ),
        (
            "kind = \"docker\"\nnamespace = \"x\"\n",
            "the docker backend runs real containers in real time; remove namespace (it is for kind = \"kubernetes\")",
        ),
        (
            "kind = \"kubernetes\"\nworkload = \"w.toml\"\nengines = []\n",
            "the kubernetes backend runs pods on a cluster in real time; remove engines and workload (they are for \
             kind = \"sim\" and kind = \"docker\")",
        ),
        (
            "kind = \"kubernetes\"\ngpus = false\n",
            "the kubernetes backend runs pods on a cluster in real time; remove gpus (it is for kind = \"docker\")",
        ),
    ]);
    for (table, says) in cases {
        let e = refused(table);
        assert!(e.starts_with("config host.toml: "), "{table}: {e}");
        assert!(e.contains(says), "{table}:\n{e}\nshould say\n{says}");
    }
}

#[cfg(feature = "kubernetes")]
#[test]
fn a_gpu_telemetry_table_reads_dcgm_exporter_with_the_gpu_operators_defaults() {
    let text = "tick = \"1s\"\npolicies-dir = \"p\"\n[backend]\nkind = \"kubernetes\"\n\
                [backend.gpu-telemetry]\nselector = \"app.kubernetes.io/name=dcgm-exporter\"\n";
    let c = parse(text).unwrap();
    let gpus = kubernetes(&c).gpu_telemetry.as_ref().expect("the table turns it on");
    assert_eq!(
        (gpus.namespace.as_str(), gpus.selector.as_str(), gpus.port, gpus.path.as_str()),
        ("gpu-operator", "app.kubernetes.io/name=dcgm-exporter", 9400, "/metrics")
    );
    let c = parse("tick = \"1s\"\npolicies-dir = \"p\"\n[backend]\nkind = \"kubernetes\"\n").unwrap();
    assert!(kubernetes(&c).gpu_telemetry.is_none(), "no table, no scraping");
}

#[cfg(not(all(feature = "docker", feature = "kubernetes")))]
#[test]
fn a_backend_left_out_of_the_build_says_which_feature_to_rebuild_with() {
    #[cfg(not(feature = "docker"))]
    {
        let e = refused("kind = \"docker\"\nengines = [\"unix:///a.sock\"]\n");
        assert!(
            e.contains("this wasmsched was built without the docker backend: rebuild with --features docker"),
            "{e}"
        );
    }
    #[cfg(not(feature = "kubernetes"))]
    {
        let e = refused("kind = \"kubernetes\"\n");
        assert!(e.contains("built without the kubernetes backend: rebuild with --features kubernetes"), "{e}");
    }
}

#[test]
fn speeds_are_real_time_max_or_a_positive_factor() {
    let with = |s: &str| parse(&MINIMAL.replace("kind = \"sim\"", &format!("kind = \"sim\"\nspeed = {s}")));
    assert_eq!(with("\"max\"").unwrap().backend.speed(), Speed::Max);
    assert_eq!(with("60").unwrap().backend.speed(), Speed::Factor(60.0));
    assert_eq!(with("2.5").unwrap().backend.speed().wall(Duration::from_secs(5)), Some(Duration::from_secs(2)));
    for bad in ["0", "-1", "\"fast\""] {
        assert!(with(bad).unwrap_err().to_string().contains("speed is"), "{bad}");
    }
}

#[test]
fn two_active_policies_are_refused() {
    let e = parse(&format!("{MINIMAL}[policy.a]\n[policy.b]\n")).unwrap_err().to_string();
    assert!(e.contains("at most one may be"), "{e}");
}

#[test]
fn a_non_loopback_api_needs_a_token() {
    let open = format!("{MINIMAL}[api]\nlisten = \"0.0.0.0:7878\"\n");
    assert!(parse(&open).unwrap_err().to_string().contains("token"));
    assert!(parse(&format!("{open}token = \"s3cret\"\n")).is_ok());
    assert!(parse(&format!("{MINIMAL}[api]\nlisten = \"[::1]:7878\"\n")).is_ok());
    // The page's TCP address beside a socket needs one too.
    let http = format!("{MINIMAL}[api]\nlisten = \"unix:/run/api.sock\"\nhttp = \"0.0.0.0:7878\"\n");
    assert!(parse(&http).unwrap_err().to_string().contains("0.0.0.0:7878"));
    let config = parse(&format!("{http}token = \"s3cret\"\n")).unwrap();
    assert_eq!(config.api.addresses().len(), 2);
}

#[test]
fn the_token_may_come_from_a_file_and_not_from_both() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("policies")).unwrap();
    let config = dir.path().join("host.toml");
    let write = |api: &str| std::fs::write(&config, format!("{MINIMAL}[api]\nhttp = \"0.0.0.0:0\"\n{api}")).unwrap();
    std::fs::write(dir.path().join("token"), "s3cret\n").unwrap();
    write("token-file = \"token\"\n");
    assert_eq!(HostConfig::load(&config).unwrap().api.token.as_deref(), Some("s3cret"));
    write("token-file = \"token\"\ntoken = \"other\"\n");
    assert!(HostConfig::load(&config).unwrap_err().to_string().contains("keep one"));
    write("token-file = \"absent\"\n");
    let e = HostConfig::load(&config).unwrap_err().to_string();
    assert!(e.contains("absent") && e.contains("create it"), "{e}");
}

#[test]
fn bad_durations_say_how_to_write_one() {
    let e = parse(&MINIMAL.replace("\"1s\"", "\"soon\"")).unwrap_err().to_string();
    assert!(e.contains("is not a duration") && e.contains("30s"), "{e}");
}

#[test]
fn the_guardrails_are_on_by_default_and_can_be_set_or_turned_off() {
    let c = parse(MINIMAL).unwrap();
    assert_eq!(c.budget, BudgetConfig::default());
    assert!(c.budget.enabled && c.watchdog.enabled);
    assert_eq!(c.watchdog.after, Duration::from_secs(30));
    let text = format!("{MINIMAL}[budget]\nenabled = false\n[watchdog]\nafter = \"5s\"\nsafe = \"fair-share\"\n");
    let c = parse(&text).unwrap();
    assert!(!c.budget.enabled);
    assert_eq!((c.watchdog.after, c.watchdog.safe), (Duration::from_secs(5), Fallback::FairShare));
    let e = parse(&format!("{MINIMAL}[budget]\nmax-per-day = 1\n")).unwrap_err().to_string();
    assert!(e.contains("max-per-day"), "{e}");
}

#[test]
fn the_example_configs_parse() {
    let c = parse(include_str!("../../../examples/run.toml")).unwrap();
    assert_eq!(c.active(), Some("fair-share"));
    assert_eq!(c.policy["candidate"].role, Role::Shadow);
    assert_eq!(c.backend.speed(), Speed::Factor(60.0));
    assert_eq!(c.budget, BudgetConfig::default(), "the example spells out the defaults");
    assert_eq!(c.watchdog, WatchdogConfig::default(), "the example spells out the defaults");
    assert!(c.experiment.is_none(), "the example's experiment is commented out");
    let with_experiment: String = include_str!("../../../examples/run.toml")
        .lines()
        .map(|l| {
            if l.starts_with("# [experiment]")
                || l.starts_with("# name")
                || l.starts_with("# arms")
                || l.starts_with("# block")
                || l.starts_with("# burn-in")
                || l.starts_with("# conclude")
                || l.starts_with("# design")
                || l.starts_with("# assign")
                || l.starts_with("# pools")
            {
                &l[2..]
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let e = parse(&with_experiment).unwrap().experiment.expect("uncommented, it parses");
    assert_eq!(
        (e.arms.as_slice(), e.block, e.conclude_after),
        (&["fair-share".to_string(), "candidate".to_string()][..], Duration::from_secs(1800), Some(6))
    );
    assert!(e.is_split() && e.pools.len() == 2, "the split's lines uncommented too: {e:?}");
    let refused = parse(&with_experiment.replace("\"candidate\"]", "\"nobody\"]")).unwrap_err().to_string();
    assert!(refused.contains("add a [policy.nobody] table"), "{refused}");
    #[cfg(feature = "docker")]
    {
        let c = parse(include_str!("../../../examples/docker.toml")).unwrap();
        assert_eq!((c.backend.kind(), docker(&c).selector.as_str()), ("docker", "wasmsched.managed=true"));
        assert_eq!(c.budget, BudgetConfig::default());
    }
    #[cfg(feature = "kubernetes")]
    {
        let c = parse(include_str!("../../../examples/kubernetes.toml")).unwrap();
        assert_eq!(c.backend.kind(), "kubernetes");
        assert_eq!(c.active(), Some("flowcon"));
        let k = kubernetes(&c);
        assert_eq!(
            (k.namespace.as_str(), k.selector.as_str(), k.scheduler.as_str()),
            ("default", "wasmsched.managed=true", "wasmsched")
        );
        assert_eq!(k.timeout, Duration::from_secs(5), "not a key: the default");
        // The GPU tables' lines, uncommented, are a config too.
        let text = include_str!("../../../examples/kubernetes.toml");
        let mut uncommented = String::new();
        let mut in_gpu_table = false;
        for line in text.lines() {
            in_gpu_table = (in_gpu_table && line.starts_with("# ")) || line.starts_with("# [backend.gpu-");
            let key = in_gpu_table && line[2..].starts_with(|c: char| c == '[' || c.is_ascii_lowercase());
            uncommented.push_str(if key { &line[2..] } else { line });
            uncommented.push('\n');
        }
        let k = kubernetes(&parse(&uncommented).unwrap()).clone();
        let gpus = k.gpu_telemetry.expect("[backend.gpu-telemetry] uncommented");
        assert_eq!(gpus.service.as_deref(), Some("nvidia-dcgm-exporter"));
        assert_eq!(k.gpu_sharing.pinned_memory, Some(wasmsched_kubernetes::sharing::PinnedMemory::Requested));
    }
}

#[test]
fn relative_paths_are_taken_from_the_config_files_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.toml");
    std::fs::write(&path, format!("{MINIMAL}[record]\naudit = \"a.jsonl\"\n")).unwrap();
    let c = HostConfig::load(&path).unwrap();
    assert_eq!(c.policies_dir, dir.path().join("p"));
    match &c.backend {
        BackendConfig::Sim(s) => assert_eq!(s.workload, dir.path().join("w.toml")),
        #[allow(unreachable_patterns, reason = "the only arm in a build without live backends")]
        other => panic!("not the sim: {other:?}"),
    }
    #[cfg(feature = "kubernetes")]
    {
        let path = dir.path().join("k8s.toml");
        std::fs::write(
            &path,
            "tick = \"1s\"\npolicies-dir = \"p\"\n[backend]\nkind = \"kubernetes\"\nkubeconfig = \"kc\"\n",
        )
        .unwrap();
        let c = HostConfig::load(&path).unwrap();
        assert_eq!(kubernetes(&c).kubeconfig, Some(dir.path().join("kc")));
    }
    assert_eq!(c.record.audit, Some(dir.path().join("a.jsonl")));
}

#[test]
fn resources_take_the_place_of_the_folder_and_its_tables_on_kubernetes_only() {
    let kube = "tick = \"1s\"\n[backend]\nkind = \"kubernetes\"\n";
    let c = parse(&format!("{kube}[resources]\nretry = \"3s\"\n")).unwrap();
    assert_eq!(c.resources.as_ref().map(|r| r.retry.as_secs()), Some(3));
    assert!(c.policies_dir.as_os_str().is_empty());
    let cases = [
        (format!("{kube}[resources]\n[policy.x]\n"), "remove the [policy.*] tables"),
        (
            "tick = \"1s\"\n[backend]\nkind = \"sim\"\nworkload = \"w.toml\"\n[resources]\n".to_string(),
            "kind = \"kubernetes\"",
        ),
        (format!("{kube}[resources]\nretry = \"0s\"\n"), "retry must be above 0"),
        (kube.to_string(), "policies-dir is missing"),
        (
            format!("policies-dir = \"p\"\n{kube}[[trust.all-of]]\nkind = \"public-key\"\nkey = \"k.pub\"\n"),
            "add [resources]",
        ),
    ];
    for (text, needed) in cases {
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains(needed), "{needed:?} not in {err}");
    }
}

#[test]
fn a_trust_key_that_cannot_be_read_stops_the_host_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("host.toml");
    let text = "tick = \"1s\"\n[backend]\nkind = \"kubernetes\"\n[resources]\n\
                [[trust.all-of]]\nkind = \"public-key\"\nkey = \"keys/release.pub\"\n";
    std::fs::write(&path, text).unwrap();
    let err = wasmsched_core::error_chain(&HostConfig::load(&path).unwrap_err());
    assert!(err.contains(&dir.path().join("keys/release.pub").display().to_string()), "{err}");
}
