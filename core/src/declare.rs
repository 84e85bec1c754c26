//! How a job declares what it reports and what it is trying to reach: one set of rules for
//! the simulator's scenarios and the live backend's container labels (`docs/targets.md`).
//!
//! A container declares itself with labels:
//!
//! ```text
//! wasmsched.managed=true                 # the host manages this container
//! wasmsched.model=mlp                    # the model or application (default: the image)
//! wasmsched.kind=training                # or inference
//! wasmsched.metric=accuracy              # the main metric, first in each progress record
//! wasmsched.direction=higher-is-better   # or lower-is-better
//! wasmsched.metrics=loss:lower           # more metrics it reports, in order (optional)
//! wasmsched.tiers=0.80,0.90              # TRADL's T1, T2 on the main metric
//! wasmsched.qoe-target=2.5               # DQoES: s per epoch (training), ms per request (inference)
//! wasmsched.max-epochs=30                # stop after this many epochs at the latest
//! wasmsched.gpus=2                       # the GPUs it asks for when placed (default 0)
//! wasmsched.replicas=2                   # pieces it may be split into across nodes (default 1)
//! wasmsched.gpu-counts=1,2,4,8          # elastic: the GPU counts a resize may give it (default: gpus)
//! wasmsched.batch-size=64-1024           # the global batch sizes it accepts (one, or a range)
//! wasmsched.deliver=/bin/export,/model   # the command `deliver` runs in the container
//! wasmsched.checkpoint=/ckpt             # the folder a migration or a preemption carries over
//! wasmsched.disruptible=false            # never stopped, migrated or preempted (crate::budget)
//! wasmsched.tenant=vision                # the tenant (team, queue) it belongs to (default: default)
//! ```
//!
//! A label that does not parse is reported with what to write instead, and the job is managed
//! without that declaration: a typo never takes a job out of the host's hands.

use std::collections::HashMap;

use wasmsched_rules::JobId;

use crate::bindings::wit;

/// The label prefix every declaration uses.
pub const PREFIX: &str = "wasmsched.";

/// Every `wasmsched.*` key the host reads: those a job declares (above), and those the host
/// writes itself on what it makes (a migrated or preempted container's carried state, a pod's
/// job name, a calibration run). Any other is a misspelling, reported with the nearest of these.
pub const KNOWN_KEYS: &[&str] = &[
    "managed",
    "model",
    "kind",
    "metric",
    "direction",
    "metrics",
    "tiers",
    "qoe-target",
    "max-epochs",
    "gpus",
    "replicas",
    "gpu-counts",
    "batch-size",
    "deliver",
    "checkpoint",
    "disruptible",
    "tenant",
    // Written by the host.
    "replaces",
    "wait",
    "arrived-unix-ms",
    "run-ms",
    "gpu-ms",
    "gpu-share",
    "batch-size-in-force",
    "job-name",
    "rank",
    "group-size",
    "calibrate",
];

/// The key nearest to `key` (without the prefix) among [`KNOWN_KEYS`], when one is close
/// enough to be what was meant.
fn nearest(key: &str) -> Option<&'static str> {
    let (best, distance) = KNOWN_KEYS.iter().map(|k| (*k, strsim::levenshtein(key, k))).min_by_key(|&(_, d)| d)?;
    (distance <= 3.max(key.len() / 3)).then_some(best)
}

/// The label by which a job opts out of disruption: `wasmsched.disruptible=false`.
pub const OPT_OUT_LABEL: &str = "wasmsched.disruptible";

/// The label that carries a job's namespace where its backend has them (a pod's), for the
/// operator's page; set by the backend, not read from the job.
pub const NAMESPACE_LABEL: &str = "wasmsched.namespace";

/// Whether a job declared itself out of the disruption budget's reach
/// (`wasmsched.disruptible=false`).
pub fn opted_out(spec: &wit::JobSpec) -> bool {
    spec.labels.iter().any(|(k, v)| k == OPT_OUT_LABEL && v.trim().eq_ignore_ascii_case("false"))
}

/// Check that T1 is the easier target for a metric's direction; the message says why not.
pub fn tier_order(direction: wit::Direction, t1: f64, t2: f64) -> Result<(), &'static str> {
    if !t1.is_finite() || !t2.is_finite() {
        return Err("tiers must be two finite numbers, T1 and T2");
    }
    match direction {
        wit::Direction::HigherIsBetter if t1 < t2 => Ok(()),
        wit::Direction::LowerIsBetter if t1 > t2 => Ok(()),
        wit::Direction::HigherIsBetter => Err("higher is better, so T1 (the easier target) must be below T2"),
        wit::Direction::LowerIsBetter => Err("lower is better, so T1 (the easier target) must be above T2"),
    }
}

/// What a container declared, parsed from its labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Declared {
    /// The job as it crosses to policies (its handle is set when the host tracks it).
    pub spec: wit::JobSpec,
    /// The command `deliver` runs inside the container, if declared.
    pub deliver: Option<Vec<String>>,
    /// The folder a migration carries along, if declared.
    pub checkpoint: Option<String>,
    /// Labels that did not parse: the label and what to write instead.
    pub problems: Vec<(String, String)>,
}

/// Parse a container's labels into its declaration. `name` and `image` name the job when no
/// label does. Every `wasmsched.*` label is also kept in the spec's labels, for policies.
pub fn from_labels(name: &str, image: &str, labels: &HashMap<String, String>) -> Declared {
    let mut read = Labels { labels, problems: Vec::new() };
    let direction = read.direction();
    let metrics = read.metrics(direction);
    let kind = read.kind();
    let tiers = read.tiers(direction, &metrics[0].name);
    let qoe_target = read.qoe_target();
    let max_epochs = read.max_epochs();
    let gpus = read.count("gpus", 0, 0);
    let replicas = read.count("replicas", 1, 1);
    let scaling = read.scaling();
    let deliver = read.deliver();
    let checkpoint = read.checkpoint();
    read.unknown_keys();
    let tenant = read.tenant();
    let model = read.get("model").filter(|m| !m.is_empty()).unwrap_or(image).to_string();
    let mut kept: Vec<(String, String)> =
        labels.iter().filter(|(k, _)| k.starts_with(PREFIX)).map(|(k, v)| (k.clone(), v.clone())).collect();
    kept.sort();
    let spec = wit::JobSpec {
        handle: JobId(0),
        name: name.trim_start_matches('/').to_string(),
        model,
        kind,
        metrics,
        tiers,
        qoe_target,
        max_epochs,
        labels: kept,
        arrival_ms: 0,
        gpus,
        replicas,
        scaling,
        tenant,
        requests: wit::Resources::NONE,
        node_selector: Vec::new(),
    };
    Declared { spec, deliver, checkpoint, problems: read.problems }
}

/// A job's labels as they are read, one key at a time, with what did not parse.
struct Labels<'a> {
    labels: &'a HashMap<String, String>,
    /// The label and what to write instead.
    problems: Vec<(String, String)>,
}

impl<'a> Labels<'a> {
    /// The value of `wasmsched.KEY`, trimmed.
    fn get(&self, key: &str) -> Option<&'a str> {
        self.labels.get(&format!("{PREFIX}{key}")).map(|v| v.trim())
    }

    fn problem(&mut self, key: &str, why: String) {
        self.problems.push((format!("{PREFIX}{key}"), why));
    }

    /// `direction`: of the main metric (higher is better unless said).
    fn direction(&mut self) -> wit::Direction {
        match self.get("direction") {
            None => wit::Direction::HigherIsBetter,
            Some(d) => parse_direction(d).unwrap_or_else(|| {
                self.problem(
                    "direction",
                    format!("{d:?} is not a direction: write higher-is-better or lower-is-better"),
                );
                wit::Direction::HigherIsBetter
            }),
        }
    }

    /// `metric` (the main one: accuracy or loss by its direction) and `metrics`, the others.
    fn metrics(&mut self, direction: wit::Direction) -> Vec<wit::MetricSpec> {
        let main = self.get("metric").filter(|m| !m.is_empty()).unwrap_or(match direction {
            wit::Direction::HigherIsBetter => "accuracy",
            wit::Direction::LowerIsBetter => "loss",
        });
        let mut metrics = vec![wit::MetricSpec { name: main.to_string(), direction }];
        for item in self.get("metrics").unwrap_or("").split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.split_once(':').map(|(n, d)| (n.trim(), parse_direction(d.trim()))) {
                Some((n, Some(d))) if !n.is_empty() => metrics.push(wit::MetricSpec { name: n.into(), direction: d }),
                _ => self.problem(
                    "metrics",
                    format!("{item:?} is not NAME:DIRECTION: write e.g. loss:lower,f1:higher (after the main metric)"),
                ),
            }
        }
        metrics
    }

    /// `kind`: training (the default) or inference.
    fn kind(&mut self) -> wit::JobKind {
        match self.get("kind") {
            None | Some("training") => wit::JobKind::Training,
            Some("inference") => wit::JobKind::Inference,
            Some(k) => {
                self.problem("kind", format!("{k:?} is not a job kind: write training or inference"));
                wit::JobKind::Training
            }
        }
    }

    /// `tiers`: TRADL's two targets of the main metric `main`, in its direction's order.
    fn tiers(&mut self, direction: wit::Direction, main: &str) -> Option<wit::Tiers> {
        let t = self.get("tiers")?;
        let parsed: Option<Vec<f64>> = t.split(',').map(|x| x.trim().parse().ok()).collect();
        match parsed.as_deref() {
            Some(&[t1, t2]) => match tier_order(direction, t1, t2) {
                Ok(()) => Some(wit::Tiers { deliverable: t1, final_: t2 }),
                Err(order) => {
                    self.problem("tiers", format!("{t}: for {main}, {order}"));
                    None
                }
            },
            _ => {
                self.problem("tiers", format!("{t:?} is not two numbers: write T1,T2, e.g. 0.8,0.9"));
                None
            }
        }
    }

    /// `qoe-target`: DQoES's target, a positive number.
    fn qoe_target(&mut self) -> Option<f64> {
        let q = self.get("qoe-target")?;
        match q.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Some(x),
            _ => {
                self.problem(
                    "qoe-target",
                    format!("{q:?} is not a positive number (seconds per epoch, ms per request)"),
                );
                None
            }
        }
    }

    /// `max-epochs`: a whole number above 0.
    fn max_epochs(&mut self) -> Option<u32> {
        let e = self.get("max-epochs")?;
        match e.parse::<u32>() {
            Ok(n) if n > 0 => Some(n),
            _ => {
                self.problem("max-epochs", format!("{e:?} is not a whole number of epochs above 0"));
                None
            }
        }
    }

    /// A whole number of at least `least` under `key`, else `default`.
    fn count(&mut self, key: &str, least: u32, default: u32) -> u32 {
        self.get(key).map_or(default, |v| match v.parse::<u32>() {
            Ok(n) if n >= least => n,
            _ => {
                self.problem(key, format!("{v:?} is not a whole number of at least {least}"));
                default
            }
        })
    }

    /// `gpu-counts` and `batch-size`: what an elastic job may be resized to.
    fn scaling(&mut self) -> wit::Scaling {
        let gpu_counts = self.get("gpu-counts").map_or_else(Vec::new, |text| {
            let counts: Option<Vec<u32>> = text.split(',').map(|c| c.trim().parse().ok()).collect();
            counts.unwrap_or_else(|| {
                self.problem(
                    "gpu-counts",
                    format!("{text:?} is not a list of GPU counts: write them comma-separated, as 1,2,4,8"),
                );
                Vec::new()
            })
        });
        let (batch_size_min, batch_size_max) = self.get("batch-size").map_or((0, 0), |text| {
            let (lo, hi) = text.split_once('-').unwrap_or((text, text));
            match (lo.trim().parse::<u32>(), hi.trim().parse::<u32>()) {
                (Ok(lo), Ok(hi)) if lo <= hi => (lo, hi),
                _ => {
                    self.problem(
                        "batch-size",
                        format!("{text:?} is not a batch size: write one (128) or a range the job accepts (64-1024)"),
                    );
                    (0, 0)
                }
            }
        });
        wit::Scaling { gpu_counts, batch_size_min, batch_size_max }
    }

    /// `deliver`: an absolute command and its arguments, comma-separated.
    fn deliver(&mut self) -> Option<Vec<String>> {
        let d = self.get("deliver")?;
        let argv: Vec<String> = d.split(',').map(|a| a.trim().to_string()).collect();
        if argv.first().is_some_and(|a| a.starts_with('/')) {
            return Some(argv);
        }
        self.problem(
            "deliver",
            format!("{d:?} is not a command: write an absolute path and its arguments, comma-separated"),
        );
        None
    }

    /// `checkpoint`: an absolute folder inside the container.
    fn checkpoint(&mut self) -> Option<String> {
        let c = self.get("checkpoint")?;
        let folder = c.trim_end_matches('/');
        if c.starts_with('/') && !folder.is_empty() {
            return Some(folder.to_string());
        }
        self.problem("checkpoint", format!("{c:?} is not an absolute folder path inside the container"));
        None
    }

    /// Every `wasmsched.` key that is not one we read, with the nearest one that is.
    fn unknown_keys(&mut self) {
        let mut unknown: Vec<&str> =
            self.labels.keys().filter_map(|k| k.strip_prefix(PREFIX)).filter(|k| !KNOWN_KEYS.contains(k)).collect();
        unknown.sort_unstable();
        for key in unknown {
            let hint = match nearest(key) {
                Some(near) => format!("not a key wasmsched reads: did you mean {PREFIX}{near}?"),
                None => format!("not a key wasmsched reads (they are {PREFIX}{})", KNOWN_KEYS[..17].join(", ")),
            };
            self.problem(key, hint);
        }
    }

    /// `tenant`: a tenant's name, else the default tenant.
    fn tenant(&mut self) -> String {
        match self.get("tenant") {
            None => crate::world::DEFAULT_TENANT.to_string(),
            Some(t) if crate::tenants::valid_name(t) => t.to_string(),
            Some(t) => {
                self.problem("tenant", format!("{t:?} is not a tenant name: {}", crate::tenants::NAME_RULE));
                crate::world::DEFAULT_TENANT.to_string()
            }
        }
    }
}

fn parse_direction(text: &str) -> Option<wit::Direction> {
    match text {
        "higher-is-better" | "higher" => Some(wit::Direction::HigherIsBetter),
        "lower-is-better" | "lower" => Some(wit::Direction::LowerIsBetter),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string())).collect()
    }

    #[test]
    fn a_full_declaration_becomes_a_spec() {
        let d = from_labels(
            "/train-a",
            "trainer:1",
            &labels(&[
                ("managed", "true"),
                ("model", "mlp"),
                ("metric", "accuracy"),
                ("metrics", "loss:lower"),
                ("tiers", "0.8, 0.9"),
                ("qoe-target", "2.5"),
                ("max-epochs", "30"),
                ("deliver", "/trainer,deliver,/ckpt/model"),
                ("checkpoint", "/ckpt/"),
                ("gpus", "2"),
                ("replicas", "2"),
            ]),
        );
        assert!(d.problems.is_empty(), "{:?}", d.problems);
        assert_eq!(d.spec.name, "train-a");
        assert_eq!(d.spec.model, "mlp");
        assert_eq!(d.spec.metrics.len(), 2);
        assert_eq!(d.spec.metrics[1].direction, wit::Direction::LowerIsBetter);
        assert_eq!(d.spec.tiers, Some(wit::Tiers { deliverable: 0.8, final_: 0.9 }));
        assert_eq!(d.spec.qoe_target, Some(2.5));
        assert_eq!(d.spec.max_epochs, Some(30));
        assert_eq!(d.deliver.as_deref(), Some(&["/trainer".to_string(), "deliver".into(), "/ckpt/model".into()][..]));
        assert_eq!(d.checkpoint.as_deref(), Some("/ckpt"));
        assert_eq!((d.spec.gpus, d.spec.replicas), (2, 2));
        assert_eq!(d.spec.labels.len(), 11, "the declaration is kept for policies");
    }

    #[test]
    fn no_declaration_is_a_plain_job_named_after_its_image() {
        let d = from_labels("/x", "trainer:1", &labels(&[("managed", "true")]));
        assert!(d.problems.is_empty());
        assert_eq!((d.spec.model.as_str(), d.spec.metrics[0].name.as_str()), ("trainer:1", "accuracy"));
        assert_eq!((d.spec.tiers, d.spec.qoe_target, d.spec.max_epochs), (None, None, None));
    }

    #[test]
    fn tiers_follow_the_metric_direction() {
        let lower = labels(&[("metric", "wer"), ("direction", "lower-is-better"), ("tiers", "0.3,0.2")]);
        assert_eq!(from_labels("j", "i", &lower).spec.tiers, Some(wit::Tiers { deliverable: 0.3, final_: 0.2 }));
        let wrong = labels(&[("tiers", "0.9,0.8")]);
        let d = from_labels("j", "i", &wrong);
        assert_eq!(d.spec.tiers, None);
        assert!(d.problems[0].1.contains("must be below T2"), "{:?}", d.problems);
    }

    #[test]
    fn a_checkpoint_of_only_slashes_is_refused_not_read_as_an_empty_folder() {
        for only_slashes in ["/", "//", "///"] {
            let d = from_labels("j", "i", &labels(&[("checkpoint", only_slashes)]));
            assert_eq!(d.checkpoint, None, "{only_slashes}");
            assert_eq!(d.problems[0].0, "wasmsched.checkpoint");
        }
        assert_eq!(from_labels("j", "i", &labels(&[("checkpoint", "/ckpt//")])).checkpoint.as_deref(), Some("/ckpt"));
    }

    #[test]
    fn a_misspelt_key_is_reported_with_the_nearest_one_and_the_hosts_own_keys_are_not() {
        let d = from_labels(
            "/x",
            "trainer:1",
            &labels(&[("managed", "true"), ("disruptable", "false"), ("max-epoch", "3"), ("zzzzzzzzzzzz", "1")]),
        );
        let problems: HashMap<&str, &str> = d.problems.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(problems["wasmsched.disruptable"], "not a key wasmsched reads: did you mean wasmsched.disruptible?");
        assert_eq!(problems["wasmsched.max-epoch"], "not a key wasmsched reads: did you mean wasmsched.max-epochs?");
        assert!(problems["wasmsched.zzzzzzzzzzzz"].starts_with("not a key wasmsched reads (they are"), "{problems:?}");
        assert_eq!(problems.len(), 3);
        let own = labels(&[("managed", "true"), ("replaces", "abc"), ("run-ms", "5"), ("gpu-share", "50")]);
        assert!(from_labels("/x", "t", &own).problems.is_empty());
    }

    #[test]
    fn every_bad_label_is_reported_and_the_job_kept() {
        let d = from_labels(
            "j",
            "i",
            &labels(&[
                ("direction", "up"),
                ("kind", "batch"),
                ("tiers", "high"),
                ("qoe-target", "-1"),
                ("max-epochs", "0"),
                ("deliver", "export"),
                ("checkpoint", "ckpt"),
                ("metrics", "loss"),
                ("gpus", "-2"),
                ("replicas", "0"),
            ]),
        );
        let keys: Vec<&str> = d.problems.iter().map(|(k, _)| k.strip_prefix(PREFIX).unwrap()).collect();
        assert_eq!(
            keys,
            [
                "direction",
                "metrics",
                "kind",
                "tiers",
                "qoe-target",
                "max-epochs",
                "gpus",
                "replicas",
                "deliver",
                "checkpoint"
            ]
        );
        assert_eq!((d.spec.gpus, d.spec.replicas), (0, 1), "the defaults stand");
        assert!(d.problems.iter().all(|(_, why)| why.contains("write") || why.contains("not")));
        assert_eq!(d.spec.kind, wit::JobKind::Training);
    }
}
