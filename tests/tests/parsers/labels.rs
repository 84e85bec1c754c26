//! Container labels: `declare::from_labels`.

use std::collections::HashMap;

use proptest::prelude::*;

use wasmsched::bindings::wit;
use wasmsched::declare::{self, PREFIX};

use super::progress::number;
use super::{Checked, cases, list, positive};

/// The labels a container may declare itself with (`declare`'s module docs).
fn keys() -> Vec<&'static str> {
    list("managed|model|kind|metric|direction|metrics|tiers|qoe-target|max-epochs|gpus|replicas|deliver|checkpoint")
}

/// Values a label near-miss takes instead of a valid one.
fn label_values() -> Vec<&'static str> {
    list(
        "| |nan|NaN|inf|-1|0|-0|1e309|4294967296|18446744073709551616|x|0.8|0.8,|,|0.8,0.9,1.0|0.9,nan|higher|\
          lower-is-better |/|//|a,b|loss:|:lower|inference|1e-320",
    )
}

/// What any declaration must be, whatever the labels: problems name a label that was given.
fn check_declared(name: &str, image: &str, labels: &HashMap<String, String>, d: &declare::Declared) -> Checked {
    for (key, why) in &d.problems {
        prop_assert!(labels.contains_key(key) && key.starts_with(PREFIX), "problem for a label not given: {key}");
        prop_assert!(!why.is_empty());
    }
    let spec = &d.spec;
    prop_assert_eq!(&spec.name, name.trim_start_matches('/'));
    prop_assert!(!spec.metrics.is_empty() && spec.metrics.iter().all(|m| !m.name.is_empty()));
    prop_assert!(!spec.model.is_empty() || image.is_empty());
    if let Some(t) = spec.tiers {
        prop_assert!(declare::tier_order(spec.metrics[0].direction, t.deliverable, t.final_).is_ok(), "{t:?}");
    }
    prop_assert!(spec.qoe_target.is_none_or(|q| q.is_finite() && q > 0.0));
    prop_assert!(spec.max_epochs.is_none_or(|e| e > 0) && spec.replicas >= 1);
    prop_assert!(d.deliver.as_ref().is_none_or(|argv| argv[0].starts_with('/')));
    prop_assert!(
        d.checkpoint.as_ref().is_none_or(|c| c.starts_with('/') && c.len() > 1),
        "checkpoint {:?}",
        d.checkpoint
    );
    let mut kept: Vec<(String, String)> =
        labels.iter().filter(|(k, _)| k.starts_with(PREFIX)).map(|(k, v)| (k.clone(), v.clone())).collect();
    kept.sort();
    prop_assert_eq!(&spec.labels, &kept);
    Ok(())
}

/// A valid declaration, as labels, and the spec fields it must give.
#[derive(Clone, Debug)]
struct Declaration {
    model: Option<String>,
    inference: bool,
    direction: Option<(&'static str, wit::Direction)>,
    metric: Option<String>,
    more: Vec<(String, wit::Direction)>,
    tiers: Option<(f64, f64)>,
    qoe: Option<f64>,
    max_epochs: Option<u32>,
    gpus: Option<u32>,
    replicas: Option<u32>,
    deliver: Option<Vec<String>>,
    checkpoint: Option<String>,
}

fn declaration() -> impl Strategy<Value = Declaration> {
    let direction = prop::sample::select(vec![
        ("higher-is-better", wit::Direction::HigherIsBetter),
        ("higher", wit::Direction::HigherIsBetter),
        ("lower-is-better", wit::Direction::LowerIsBetter),
        ("lower", wit::Direction::LowerIsBetter),
    ]);
    let more = prop::collection::vec(
        (
            "[a-z][a-z0-9_-]{0,8}",
            prop::bool::ANY
                .prop_map(|h| if h { wit::Direction::HigherIsBetter } else { wit::Direction::LowerIsBetter }),
        ),
        0..3,
    );
    let tiers = (number(), number()).prop_filter("two tiers", |(a, b)| a.1 != b.1).prop_map(|(a, b)| (a.1, b.1));
    (
        (
            prop::option::of("[a-z0-9:._/-]{1,12}"),
            any::<bool>(),
            prop::option::of(direction),
            prop::option::of("[a-z][a-z0-9_-]{0,8}"),
        ),
        (more, prop::option::of(tiers), prop::option::of(positive()), prop::option::of(1..=u32::MAX)),
        (prop::option::of(any::<u32>()), prop::option::of(1..=u32::MAX)),
        (
            prop::option::of(prop::collection::vec("/?[a-z0-9._-]{1,8}", 1..4)),
            prop::option::of("(/[a-z0-9_-]{1,6}){1,3}/?"),
        ),
    )
        .prop_map(
            |(
                (model, inference, direction, metric),
                (more, tiers, qoe, max_epochs),
                (gpus, replicas),
                (deliver, checkpoint),
            )| {
                let main = direction.map_or(wit::Direction::HigherIsBetter, |d| d.1);
                let tiers = tiers.map(|(a, b)| match (main, a < b) {
                    (wit::Direction::HigherIsBetter, true) | (wit::Direction::LowerIsBetter, false) => (a, b),
                    _ => (b, a),
                });
                let deliver = deliver.map(|mut argv| {
                    argv[0] = format!("/{}", argv[0].trim_start_matches('/'));
                    argv
                });
                Declaration {
                    model,
                    inference,
                    direction,
                    metric,
                    more,
                    tiers,
                    qoe,
                    max_epochs,
                    gpus,
                    replicas,
                    deliver,
                    checkpoint,
                }
            },
        )
}

impl Declaration {
    fn labels(&self) -> HashMap<String, String> {
        let word = |d: wit::Direction| if d == wit::Direction::HigherIsBetter { "higher" } else { "lower" };
        let more = self.more.iter().map(|(n, d)| format!("{n}:{}", word(*d))).collect::<Vec<_>>().join(",");
        let mut labels: Vec<(&str, Option<String>)> = vec![
            ("managed", Some("true".into())),
            ("model", self.model.clone()),
            ("kind", Some(if self.inference { "inference" } else { "training" }.into())),
            ("direction", self.direction.map(|d| d.0.to_string())),
            ("metric", self.metric.clone()),
            ("tiers", self.tiers.map(|(a, b)| format!("{a},{b}"))),
            ("qoe-target", self.qoe.map(|q| q.to_string())),
            ("max-epochs", self.max_epochs.map(|e| e.to_string())),
            ("gpus", self.gpus.map(|g| g.to_string())),
            ("replicas", self.replicas.map(|r| r.to_string())),
            ("deliver", self.deliver.as_ref().map(|argv| argv.join(","))),
            ("checkpoint", self.checkpoint.clone()),
        ];
        labels.push(("metrics", (!more.is_empty()).then_some(more)));
        labels.into_iter().filter_map(|(k, v)| Some((format!("{PREFIX}{k}"), v?))).collect()
    }

    /// Each field as the declaration gives it, by the label that sets it.
    fn fields(&self, d: &declare::Declared) -> Vec<(&'static str, String, String)> {
        let main = self.direction.map_or(wit::Direction::HigherIsBetter, |d| d.1);
        let default_metric = if main == wit::Direction::HigherIsBetter { "accuracy" } else { "loss" };
        let mut metrics = vec![(self.metric.clone().unwrap_or(default_metric.into()), main)];
        metrics.extend(self.more.iter().cloned());
        let got: Vec<(String, wit::Direction)> = d.spec.metrics.iter().map(|m| (m.name.clone(), m.direction)).collect();
        let kind = if self.inference { wit::JobKind::Inference } else { wit::JobKind::Training };
        let tiers = self.tiers.map(|(a, b)| wit::Tiers { deliverable: a, final_: b });
        let checkpoint = self.checkpoint.as_ref().map(|c| c.trim_end_matches('/').to_string());
        let s = &d.spec;
        vec![
            ("model", format!("{:?}", self.model.clone().unwrap_or("image".into())), format!("{:?}", s.model)),
            ("kind", format!("{kind:?}"), format!("{:?}", s.kind)),
            ("metrics", format!("{metrics:?}"), format!("{got:?}")),
            ("tiers", format!("{tiers:?}"), format!("{:?}", s.tiers)),
            ("qoe-target", format!("{:?}", self.qoe), format!("{:?}", s.qoe_target)),
            ("max-epochs", format!("{:?}", self.max_epochs), format!("{:?}", s.max_epochs)),
            ("gpus", format!("{:?}", self.gpus.unwrap_or(0)), format!("{:?}", s.gpus)),
            ("replicas", format!("{:?}", self.replicas.unwrap_or(1)), format!("{:?}", s.replicas)),
            ("deliver", format!("{:?}", self.deliver), format!("{:?}", d.deliver)),
            ("checkpoint", format!("{checkpoint:?}"), format!("{:?}", d.checkpoint)),
        ]
    }
}

/// A change to one label of a valid declaration.
#[derive(Clone, Debug)]
enum LabelEdit {
    Value(usize, &'static str),
    Pad(usize, String),
    Misspell(usize),
    Upper(usize),
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn any_labels_give_a_valid_job_and_every_problem_names_a_label_given(
        name in any::<String>(),
        image in "[a-z0-9:./-]{0,12}",
        labels in prop::collection::hash_map(
            prop_oneof![
                3 => prop::sample::select(keys()).prop_map(|k| format!("{PREFIX}{k}")),
                1 => "[a-z.-]{0,12}".prop_map(|k| format!("{PREFIX}{k}")),
                1 => any::<String>(),
            ],
            prop_oneof![any::<String>(), "[/,:. 0-9a-z-]{0,8}", prop::sample::select(label_values()).prop_map(String::from)],
            0..12,
        ),
    ) {
        let d = declare::from_labels(&name, &image, &labels);
        check_declared(&name, &image, &labels, &d)?;
    }

    #[test]
    fn a_valid_declaration_gives_what_it_declares(decl in declaration()) {
        let labels = decl.labels();
        let d = declare::from_labels("/job", "image", &labels);
        prop_assert!(d.problems.is_empty(), "{:?} from {labels:?}", d.problems);
        for (label, wanted, got) in decl.fields(&d) {
            prop_assert_eq!(wanted, got, "{}", label);
        }
        check_declared("/job", "image", &labels, &d)?;
    }

    #[test]
    fn a_label_near_a_valid_one_is_reported_by_its_name_and_leaves_the_others_alone(
        decl in declaration(),
        edit in prop_oneof![
            (any::<usize>(), prop::sample::select(label_values())).prop_map(|(i, v)| LabelEdit::Value(i, v)),
            (any::<usize>(), "[ \t]{1,3}").prop_map(|(i, s)| LabelEdit::Pad(i, s)),
            any::<usize>().prop_map(LabelEdit::Misspell),
            any::<usize>().prop_map(LabelEdit::Upper),
        ],
    ) {
        let mut labels = decl.labels();
        let mut keys: Vec<String> = labels.keys().cloned().collect();
        keys.sort();
        let (LabelEdit::Value(i, _) | LabelEdit::Pad(i, _) | LabelEdit::Misspell(i) | LabelEdit::Upper(i)) = &edit;
        let key = keys[i % keys.len()].clone();
        let value = labels.remove(&key).expect("a label of the declaration");
        match &edit {
            LabelEdit::Value(_, v) => labels.insert(key.clone(), v.to_string()),
            LabelEdit::Pad(_, s) => labels.insert(key.clone(), format!("{s}{value}{s}")),
            LabelEdit::Misspell(_) => labels.insert(format!("{key}s"), value),
            LabelEdit::Upper(_) => labels.insert(key.to_uppercase(), value),
        };
        let d = declare::from_labels("/job", "image", &labels);
        check_declared("/job", "image", &labels, &d)?;
        let edited = key.strip_prefix(PREFIX).expect("a declaration label");
        // The main metric's direction and name decide the tiers' order and the metric list.
        let touches = |label: &str| {
            label == edited
                || (matches!(edited, "direction" | "metric") && matches!(label, "tiers" | "metrics"))
        };
        // A misspelt key is reported by its name, with the key it was meant to be.
        let misspelt = matches!(edit, LabelEdit::Misspell(_))
            .then(|| format!("{edited}s"))
            .filter(|k| !declare::KNOWN_KEYS.contains(&k.as_str()));
        for (key, why) in &d.problems {
            let label = key.strip_prefix(PREFIX).unwrap_or(key);
            if misspelt.as_deref() == Some(label) {
                prop_assert!(why.contains(&format!("did you mean {PREFIX}{edited}?")), "{key}: {why}");
                continue;
            }
            prop_assert!(touches(label), "{edit:?} on {edited} made a problem for {key}: {:?}", d.problems);
        }
        let padded = matches!(edit, LabelEdit::Pad(..));
        for (label, wanted, got) in decl.fields(&d) {
            if padded || !touches(label) {
                prop_assert_eq!(wanted, got, "{} after {:?} on {}", label, edit, edited);
            }
        }
    }
}
