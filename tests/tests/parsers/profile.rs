//! Calibrated profiles: `Profile::from_toml_str` and `Profile::load`, alone and in a scenario.

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use wasmsched::bindings::wit;
use wasmsched::error_chain;
use wasmsched::scenario::{LoadOptions, Scenario};
use wasmsched::sim::profile::Profile;

use super::workload::check_loaded;
use super::{Checked, apply, bytes, cases, edits, file, finite, names, positive, toml_lines, toml_values};

#[derive(Clone, Debug)]
struct ProfileGen {
    name: String,
    metric: String,
    lower: bool,
    work: f64,
    max_cores: f64,
    startup: f64,
    share_cost: Vec<(f64, f64)>,
    mib: u32,
    curve: Vec<f64>,
}

fn profile() -> impl Strategy<Value = ProfileGen> {
    (
        ("[a-z][a-z0-9-]{0,8}", "[a-z][a-z0-9-]{0,8}", any::<bool>()),
        (positive(), positive(), prop_oneof![Just(0.0), positive()]),
        (prop::collection::vec((positive(), positive()), 0..4), 1..=1u32 << 20, prop::collection::vec(finite(), 1..8)),
    )
        .prop_map(|((name, metric, lower), (work, max_cores, startup), (share_cost, mib, curve))| ProfileGen {
            name,
            metric,
            lower,
            work,
            max_cores,
            startup,
            share_cost,
            mib,
            curve,
        })
}

fn profile_text(p: &ProfileGen) -> String {
    let pairs: Vec<String> = p.share_cost.iter().map(|(c, w)| format!("[{c:?}, {w:?}]")).collect();
    let curve: Vec<String> = p.curve.iter().map(|v| format!("{v:?}")).collect();
    format!(
        "name = \"{}\"\nmetric = \"{}\"\ndirection = \"{}\"\nwork-per-epoch-core-s = {:?}\nmax-cores = {:?}\n\
         startup-s = {:?}\nshare-cost = [{}]\nmemory = \"{}MiB\"\ncurve = [{}]\n",
        p.name,
        p.metric,
        if p.lower { "lower-is-better" } else { "higher-is-better" },
        p.work,
        p.max_cores,
        p.startup,
        pairs.join(", "),
        p.mib,
        curve.join(", "),
    )
}

fn check_profile(p: &Profile) -> Checked {
    let c = &p.costs;
    prop_assert!(!p.name.trim().is_empty());
    prop_assert!(c.work_per_epoch_core_s.is_finite() && c.work_per_epoch_core_s > 0.0);
    prop_assert!(c.max_cores.is_finite() && c.max_cores > 0.0 && c.startup_s.is_finite() && c.startup_s >= 0.0);
    for points in [&c.share_cost, &c.quota_cost] {
        prop_assert!(points.iter().all(|&(x, y)| x.is_finite() && x > 0.0 && y.is_finite() && y > 0.0));
        prop_assert!(points.windows(2).all(|w| w[0].0 <= w[1].0), "sorted: {points:?}");
    }
    let curve = p.curve();
    prop_assert!(curve.epochs() >= 1 && (1..=curve.epochs()).all(|e| curve.metric_at(e).is_finite()));
    Ok(())
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn any_profile_file_reads_or_names_its_path(bytes in bytes()) {
        let (_dir, path) = file("learner.toml", &bytes);
        match Profile::load(&path) {
            Ok(p) => check_profile(&p)?,
            Err(e) => names(&e, &path.display().to_string(), 0)?,
        }
    }

    #[test]
    fn a_valid_profile_reads_back_as_generated(g in profile()) {
        let text = profile_text(&g);
        let p = Profile::from_toml_str("p.toml", &text).map_err(|e| TestCaseError::fail(format!("{}\n{text}", error_chain(&e))))?;
        prop_assert_eq!((&p.name, &p.metric), (&g.name, &g.metric));
        let direction = if g.lower { wit::Direction::LowerIsBetter } else { wit::Direction::HigherIsBetter };
        prop_assert_eq!(p.direction, direction);
        let c = &p.costs;
        prop_assert_eq!((c.work_per_epoch_core_s, c.max_cores, c.startup_s), (g.work, g.max_cores, g.startup));
        prop_assert_eq!(c.memory_bytes, u64::from(g.mib) << 20);
        let mut share = g.share_cost.clone();
        share.sort_by(|a, b| a.0.total_cmp(&b.0));
        prop_assert_eq!(&c.share_cost, &share);
        let curve: Vec<f64> = (1..=p.curve().epochs()).map(|e| p.curve().metric_at(e)).collect();
        prop_assert_eq!(&curve, &g.curve);
        check_profile(&p)?;
    }

    #[test]
    fn a_profile_near_a_valid_one_reads_or_names_its_path(
        g in profile(),
        edits in edits(toml_values(), toml_lines()),
        in_scenario in any::<bool>(),
    ) {
        let text = apply(&profile_text(&g), &edits, false);
        let (dir, path) = file("learner.toml", text.as_bytes());
        if in_scenario {
            // A scenario's [[profile]] is read relative to the scenario's folder.
            let scenario = "[[node]]\ncores = 2\nmemory = \"4GiB\"\n[[profile]]\nfile = \"learner.toml\"\nname = \"mine\"\n\
                            [[job]]\nname = \"a\"\nmodel = \"mine\"\n";
            let at = dir.path().join("s.toml");
            std::fs::write(&at, scenario).expect("the scenario is written");
            check_loaded(Scenario::load(&at, &LoadOptions::default()), &at.display().to_string(), scenario)?;
        }
        match Profile::load(&path) {
            Ok(p) => check_profile(&p)?,
            Err(e) => names(&e, &path.display().to_string(), 0)?,
        }
    }
}
