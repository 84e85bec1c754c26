//! The host's config: `HostConfig::parse` and `HostConfig::load`.

use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use wasmsched::config::{BackendConfig, HostConfig, Role, Speed};
use wasmsched::error_chain;

use super::{Checked, apply, bytes, cases, edits, file, names, positive, toml_lines, toml_values};

#[derive(Clone, Debug)]
struct PolicyGen {
    name: String,
    shadow: bool,
    deadline_ms: u32,
    mib: u32,
    fair_share: bool,
    quarantine_after: u32,
}

#[derive(Clone, Debug)]
struct ConfigGen {
    /// The tick as written, and as read.
    tick: (String, Duration),
    docker: bool,
    speed: Option<(String, Speed)>,
    port: Option<u16>,
    policies: Vec<PolicyGen>,
}

fn host_config() -> impl Strategy<Value = ConfigGen> {
    let speed = prop_oneof![
        prop::sample::select(vec![("\"real-time\"", Speed::RealTime), ("\"max\"", Speed::Max)])
            .prop_map(|(text, speed)| (text.to_string(), speed)),
        positive().prop_map(|x| (format!("{x:?}"), Speed::Factor(x))),
    ];
    let tick = prop_oneof![
        (1..=3_600_000u64).prop_map(|ms| (format!("{ms}ms"), Duration::from_millis(ms))),
        (1..=u64::MAX).prop_map(|s| (format!("{s}s"), Duration::from_secs(s))),
    ];
    let policy = ("[a-z][a-z0-9-]{0,8}", any::<bool>(), 1..=10_000u32, 1..=4096u32, any::<bool>(), 0..=10u32).prop_map(
        |(name, shadow, deadline_ms, mib, fair_share, quarantine_after)| PolicyGen {
            name,
            shadow,
            deadline_ms,
            mib,
            fair_share,
            quarantine_after,
        },
    );
    (tick, any::<bool>(), prop::option::of(speed), prop::option::of(any::<u16>()), prop::collection::vec(policy, 0..4))
        .prop_map(|(tick, docker, speed, port, mut policies)| {
            policies.sort_by(|a, b| a.name.cmp(&b.name));
            policies.dedup_by(|a, b| a.name == b.name);
            // At most one active: the first that is not a shadow.
            let mut active = false;
            for p in &mut policies {
                p.shadow |= active;
                active |= !p.shadow;
            }
            ConfigGen { tick, docker, speed: speed.filter(|_| !docker), port, policies }
        })
}

fn config_text(g: &ConfigGen) -> String {
    let mut text = format!("tick = \"{}\"\npolicies-dir = \"policies.d\"\n\n[backend]\n", g.tick.0);
    if g.docker {
        text += "kind = \"docker\"\nengines = [\"unix:///a.sock\", \"tcp://10.0.0.2:2375\"]\nselector = \"team=ml\"\n";
    } else {
        text += "kind = \"sim\"\nworkload = \"w.toml\"\n";
    }
    if let Some((speed, _)) = &g.speed {
        text += &format!("speed = {speed}\n");
    }
    if let Some(port) = g.port {
        text += &format!("\n[api]\nlisten = \"127.0.0.1:{port}\"\n");
    }
    for p in &g.policies {
        text += &format!(
            "\n[policy.{}]\nrole = \"{}\"\ndeadline = \"{}ms\"\nmemory = \"{}MiB\"\nfallback = \"{}\"\nquarantine-after = {}\n\
             [policy.{}.config]\nalpha = 0.5\n",
            p.name,
            if p.shadow { "shadow" } else { "active" },
            p.deadline_ms,
            p.mib,
            if p.fair_share { "fair-share" } else { "keep-limits" },
            p.quarantine_after,
            p.name,
        );
    }
    text
}

/// What a config that parses must be: a host can be built from it without a panic.
fn check_config(c: &HostConfig) -> Checked {
    prop_assert!(!c.tick.is_zero());
    let _ = c.backend.speed().wall(c.tick);
    prop_assert!(c.policy.values().filter(|p| p.role == Role::Active).count() <= 1);
    for (name, p) in &c.policy {
        prop_assert!(!name.is_empty() && !name.contains('/') && !name.starts_with('.'), "{name:?}");
        let _ = (p.limits(), p.quarantine());
    }
    if let BackendConfig::Docker(d) = &c.backend {
        prop_assert!(!d.engines.is_empty() && !d.selector.trim().is_empty(), "{d:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn any_config_file_parses_or_names_its_path(bytes in bytes()) {
        let (_dir, path) = file("host.toml", &bytes);
        match HostConfig::load(&path) {
            Ok(c) => check_config(&c)?,
            Err(e) => names(&e, &path.display().to_string(), 0)?,
        }
    }

    #[test]
    fn a_valid_config_gives_its_tick_backend_and_policies(g in host_config()) {
        let text = config_text(&g);
        let c = HostConfig::parse(Path::new("gen.toml"), &text).map_err(|e| TestCaseError::fail(format!("{}\n{text}", error_chain(&e))))?;
        prop_assert_eq!(c.tick, g.tick.1);
        prop_assert_eq!(c.backend.speed(), g.speed.as_ref().map_or(Speed::RealTime, |s| s.1));
        match &c.backend {
            BackendConfig::Docker(d) => prop_assert!(g.docker && d.engines.len() == 2, "{d:?}"),
            other => prop_assert!(!g.docker, "{other:?}"),
        }
        prop_assert_eq!(c.api.listen.port(), Some(g.port.unwrap_or(7878)));
        prop_assert_eq!(c.policy.len(), g.policies.len());
        for p in &g.policies {
            let got = &c.policy[&p.name];
            prop_assert_eq!(got.role, if p.shadow { Role::Shadow } else { Role::Active });
            prop_assert_eq!(got.limits().deadline, Duration::from_millis(p.deadline_ms.into()));
            prop_assert_eq!((got.memory, got.quarantine_after), (u64::from(p.mib) << 20, p.quarantine_after));
            prop_assert_eq!(got.config["alpha"].as_float(), Some(0.5));
        }
        prop_assert_eq!(c.active(), g.policies.iter().find(|p| !p.shadow).map(|p| p.name.as_str()));
        check_config(&c)?;
    }

    #[test]
    fn a_config_near_a_valid_one_parses_or_names_its_path(
        g in host_config(),
        edits in edits(toml_values(), toml_lines()),
        dir in "[a-z]{1,8}",
    ) {
        let text = apply(&config_text(&g), &edits, false);
        let path = Path::new(&dir).join("host.toml");
        match HostConfig::parse(&path, &text) {
            Ok(c) => check_config(&c)?,
            Err(e) => names(&e, &path.display().to_string(), text.lines().count())?,
        }
    }
}

#[test]
fn a_tiny_speed_factor_or_a_huge_tick_gives_the_longest_wall_time_not_a_panic() {
    for (tick, speed) in [("30s", "1e-300"), ("18446744073709551615s", "0.5")] {
        let text = format!(
            "tick = \"{tick}\"\npolicies-dir = \"p\"\n[backend]\nkind = \"sim\"\nworkload = \"w.toml\"\nspeed = {speed}\n"
        );
        let c = HostConfig::parse(Path::new("host.toml"), &text).expect("a valid config");
        assert_eq!(c.backend.speed().wall(c.tick), Some(Duration::MAX), "tick {tick} at speed {speed}");
    }
}
