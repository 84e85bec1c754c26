//! Jobs sharing one GPU: how fast each runs, from measurements.
//!
//! **What is measured.** Gavel's authors ran every pair of 26 single-GPU job types (7 models at
//! several batch sizes) together on one V100 under CUDA MPS and recorded both jobs' steps per
//! second, and each type's alone (stanford-futuredata/gavel, MIT; `data/gavel/`). A job's
//! *speed* on a shared GPU is its steps/s there over its steps/s alone: 1 runs as if alone.
//! Across the 636 measured speeds a pair's two speeds add up to 1.31 on average (0.35 to 2.0).
//!
//! **How we read them** (space sharing, MPS):
//! - Each job type `a` has a *sensitivity* `s_a` and a *pressure* `p_a`; beside the jobs `B`,
//!   `a` runs at `1 / (1 + Σ_{b∈B} c_ab · cap_b)` with `c_ab = s_a · p_b`. The 52 numbers are
//!   fitted by least squares to every measured speed ([`fit_error`]: mean absolute error 0.11
//!   in speed, the test prints it). A measured pair keeps its own `c_ab = 1/speed − 1`, so it
//!   runs at its measured speeds; the fit serves the pairs and the sets of three or more that
//!   were not measured.
//! - **Shares.** A job's *demand* `d_a` is its pressure scaled so that the heaviest type's is
//!   1: the share of the GPU it uses alone (an assumption of ours; the data give no
//!   utilisation). A share `q_a` below its demand caps it: `cap_a = q_a / d_a`, and it runs
//!   at `cap_a` times the speed above and presses on the others by `cap_a` as much. A share
//!   at or above the demand changes nothing.
//! - **Time-slicing.** Where any holder of a GPU has no share (the unregulated default: CUDA
//!   contexts of different processes take turns), `k` jobs each run at `1/k`.
//!
//! **Which type a job is** (an assumption of ours): cifar10 is ResNet-18, imagenet ResNet-50,
//! bert the Transformer, deepspeech2 the LM (both recurrent), ncf Recommendation, each at the
//! measured batch size nearest its per-GPU batch (in log scale); yolov3 is CycleGAN (both
//! convolutional on large images; one measured batch).
//!
//! **Services.** A GPU inference service is a job of its model's type at its batch size: it
//! presses on the jobs beside it and is slowed by them like any other, and its p99 latency
//! follows from the speed it gets ([`p99_ms`]).
//!
//! **Memory.** A pair Gavel could not run together (out of memory) never fits. Otherwise the
//! jobs' footprints must add up to at most the GPU's memory; a footprint is an assumption of
//! ours ([`footprint_bytes`]): weights, optimiser state and activations growing with the
//! batch, so that ResNet-50 at batch 128 takes 13 GiB of a 16 GiB V100.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use super::model::Model;

const GIB: f64 = (1u64 << 30) as f64;

/// One measured job type: its family and batch size (None where Gavel gives one only).
#[derive(Clone, Debug, PartialEq)]
struct JobType {
    family: String,
    batch: Option<u32>,
}

/// The fitted model and the measured pairs.
struct Table {
    types: Vec<JobType>,
    sensitivity: Vec<f64>,
    pressure: Vec<f64>,
    /// `c_ab` of each measured pair (a beside b).
    measured: HashMap<(usize, usize), f64>,
    /// Pairs that did not fit in memory, both orders.
    oom: HashSet<(usize, usize)>,
    /// Steps per second alone.
    alone: Vec<f64>,
    error: FitError,
}

/// How far the fitted model is from the measured speeds.
#[derive(Clone, Copy, Debug)]
pub struct FitError {
    /// Measured speeds compared (both jobs of every measured pair, both orders).
    pub speeds: usize,
    /// Mean absolute error in speed.
    pub mean_abs: f64,
    /// The largest absolute error.
    pub max_abs: f64,
}

/// Gavel's measured throughputs (MIT; `data/gavel/`), embedded.
const GAVEL: &str = include_str!("../../data/gavel/simulation_throughputs.json");

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    Table::parse(GAVEL, "v100")
        .unwrap_or_else(|e| panic!("the embedded data/gavel/simulation_throughputs.json is malformed: {e}"))
});

static CROSS_DOMAIN: LazyLock<f64> = LazyLock::new(|| {
    spread_speed(GAVEL)
        .unwrap_or_else(|e| panic!("the embedded data/gavel/simulation_throughputs.json is malformed: {e}"))
});

/// The fraction of its speed a GPU job keeps when its nodes lie in more than one topology
/// domain: the median, over every multi-GPU configuration Gavel measured (model, batch size,
/// GPU count, on K80, P100 and V100 servers), of its throughput with its workers spread over
/// servers (`<gpu>_unconsolidated`) against packed on one (`<gpu>`). The assumption is that a
/// domain boundary costs what a server boundary cost there; the step times a placement gets
/// already pay for its nodes themselves.
pub fn cross_domain_speed() -> f64 {
    *CROSS_DOMAIN
}

/// [`cross_domain_speed`] from Gavel's throughput file `json`.
fn spread_speed(json: &str) -> Result<f64, String> {
    let all: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let mut ratios = Vec::new();
    for gpu in ["k80", "p100", "v100"] {
        let (Some(packed), Some(spread)) = (all.get(gpu), all.get(format!("{gpu}_unconsolidated"))) else {
            return Err(format!("no `{gpu}` or `{gpu}_unconsolidated` table"));
        };
        for (key, row) in spread.as_object().into_iter().flatten().filter(|(k, _)| !k.ends_with(", 1)")) {
            let alone = |r: &serde_json::Value| r.get("null").and_then(serde_json::Value::as_f64);
            if let (Some(s), Some(p)) = (alone(row), packed.get(key).and_then(alone))
                && p > 0.0
            {
                ratios.push(s / p);
            }
        }
    }
    if ratios.is_empty() {
        return Err("no multi-GPU configuration measured both ways".into());
    }
    ratios.sort_by(f64::total_cmp);
    let mid = ratios.len() / 2;
    Ok(if ratios.len() % 2 == 1 { ratios[mid] } else { (ratios[mid - 1] + ratios[mid]) / 2.0 })
}

impl Table {
    fn parse(json: &str, gpu: &str) -> Result<Table, String> {
        let all: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let rows = all.get(gpu).and_then(|v| v.as_object()).ok_or_else(|| format!("no `{gpu}` table"))?;
        let keys: Vec<&String> = rows.keys().filter(|k| k.ends_with(", 1)")).collect();
        let types: Vec<JobType> = keys.iter().map(|k| job_type_of(k)).collect::<Result<_, _>>()?;
        let index: HashMap<&str, usize> = keys.iter().enumerate().map(|(i, k)| (k.as_str(), i)).collect();
        let alone: Vec<f64> = keys
            .iter()
            .map(|k| rows[k.as_str()].get("null").and_then(|v| v.as_f64()).filter(|&v| v > 0.0))
            .collect::<Option<_>>()
            .ok_or("a job type without a positive throughput alone")?;
        let (mut measured, mut oom) = (HashMap::new(), HashSet::new());
        let mut speeds = Vec::new();
        for (a, key) in keys.iter().enumerate() {
            for (other, pair) in rows[key.as_str()].as_object().into_iter().flatten() {
                let Some(&b) = index.get(other.as_str()) else { continue };
                let pair: Vec<f64> = pair.as_array().into_iter().flatten().filter_map(|v| v.as_f64()).collect();
                let [mine, _] = pair[..] else { return Err(format!("{key} beside {other}: not a pair")) };
                if pair.iter().all(|&v| v == 0.0) {
                    oom.extend([(a, b), (b, a)]);
                    continue;
                }
                let speed = (mine / alone[a]).clamp(0.02, 1.0);
                measured.insert((a, b), 1.0 / speed - 1.0);
                speeds.push((a, b, speed));
            }
        }
        let (sensitivity, pressure) = fit(types.len(), &speeds);
        let mut table = Table {
            types,
            sensitivity,
            pressure,
            measured,
            oom,
            alone,
            error: FitError { speeds: 0, mean_abs: 0.0, max_abs: 0.0 },
        };
        let errors: Vec<f64> = speeds.iter().map(|&(a, b, x)| (1.0 / (1.0 + table.fitted(a, b)) - x).abs()).collect();
        table.error = FitError {
            speeds: errors.len(),
            mean_abs: errors.iter().sum::<f64>() / errors.len().max(1) as f64,
            max_abs: errors.iter().copied().fold(0.0, f64::max),
        };
        Ok(table)
    }

    fn fitted(&self, a: usize, b: usize) -> f64 {
        self.sensitivity[a] * self.pressure[b]
    }

    /// `c_ab`: measured where the pair was, else fitted.
    fn interference(&self, a: usize, b: usize) -> f64 {
        self.measured.get(&(a, b)).copied().unwrap_or_else(|| self.fitted(a, b))
    }

    fn demand(&self, a: usize) -> f64 {
        self.pressure[a].clamp(0.05, 1.0)
    }

    /// The type of `family` at the measured batch nearest `batch` in log scale.
    fn nearest(&self, family: &str, batch: u32) -> usize {
        let distance = |t: &JobType| t.batch.map_or(0.0, |b| (f64::from(b) / f64::from(batch.max(1))).ln().abs());
        (0..self.types.len())
            .filter(|&i| self.types[i].family == family)
            .min_by(|&x, &y| distance(&self.types[x]).total_cmp(&distance(&self.types[y])))
            .unwrap_or_else(|| panic!("no measured job type of family {family}"))
    }
}

/// `"('ResNet-50 (batch size 64)', 1)"` as a family and batch size.
fn job_type_of(key: &str) -> Result<JobType, String> {
    let name = key.strip_prefix("('").and_then(|k| k.strip_suffix("', 1)")).ok_or_else(|| format!("a key {key:?}"))?;
    Ok(match name.split_once(" (batch size ") {
        Some((family, rest)) => JobType {
            family: family.into(),
            batch: Some(rest.trim_end_matches(')').parse().map_err(|_| format!("a batch size in {key:?}"))?),
        },
        None => JobType { family: name.into(), batch: None },
    })
}

/// Least squares for `speed ≈ 1 / (1 + s_a p_b)`: alternating least squares on
/// `1/speed − 1 = s_a p_b` to start, then gradient steps on the speeds themselves. Pressures
/// end scaled so that the largest is 1.
fn fit(n: usize, speeds: &[(usize, usize, f64)]) -> (Vec<f64>, Vec<f64>) {
    let (mut s, mut p) = (vec![1.0; n], vec![0.5; n]);
    for _ in 0..100 {
        s = least_squares(&s, &p, speeds, |a, b| (a, b));
        p = least_squares(&p, &s, speeds, |a, b| (b, a));
    }
    let loss = |s: &[f64], p: &[f64]| speeds.iter().map(|&(a, b, x)| (1.0 / (1.0 + s[a] * p[b]) - x).powi(2)).sum();
    let mut current: f64 = loss(&s, &p);
    let mut rate = 0.01;
    for _ in 0..3000 {
        let (mut gs, mut gp) = (vec![0.0; n], vec![0.0; n]);
        for &(a, b, x) in speeds {
            let y = 1.0 / (1.0 + s[a] * p[b]);
            // d/dc of (y − x)² with y = 1/(1 + c): −2 (y − x) y².
            let g = -2.0 * (y - x) * y * y;
            gs[a] += g * p[b];
            gp[b] += g * s[a];
        }
        let step =
            |v: &[f64], g: &[f64], r: f64| v.iter().zip(g).map(|(v, g)| (v - r * g).max(0.0)).collect::<Vec<_>>();
        let (ns, np) = (step(&s, &gs, rate), step(&p, &gp, rate));
        let next = loss(&ns, &np);
        if next < current {
            (s, p, current) = (ns, np, next);
            rate *= 1.2;
        } else {
            rate /= 2.0;
        }
    }
    let top = p.iter().copied().fold(0.0, f64::max).max(1e-9);
    (s.iter().map(|v| v * top).collect(), p.iter().map(|v| v / top).collect())
}

/// One half of alternating least squares on `1/speed − 1 = s_a p_b`: each value of `fitted`
/// (the index `side(a, b).0` of a measured speed) refitted with the other side `fixed` (the
/// index `side(a, b).1`); a value without data keeps its own.
fn least_squares(
    fitted: &[f64],
    fixed: &[f64],
    speeds: &[(usize, usize, f64)],
    side: impl Fn(usize, usize) -> (usize, usize),
) -> Vec<f64> {
    let (mut num, mut den) = (vec![0.0; fitted.len()], vec![0.0; fitted.len()]);
    for &(a, b, x) in speeds {
        let (i, j) = side(a, b);
        num[i] += (1.0 / x - 1.0) * fixed[j];
        den[i] += fixed[j] * fixed[j];
    }
    fitted.iter().zip(num.iter().zip(&den)).map(|(&v, (&n, &d))| if d > 0.0 { (n / d).max(0.0) } else { v }).collect()
}

/// The measured job type a job of `model` at per-GPU batch `local_bsz` runs as.
pub fn job_type(model: Model, local_bsz: u32) -> usize {
    let t = &*TABLE;
    match model {
        Model::Cifar10 => t.nearest("ResNet-18", local_bsz),
        Model::Imagenet => t.nearest("ResNet-50", local_bsz),
        Model::Bert => t.nearest("Transformer", local_bsz),
        Model::Deepspeech2 => t.nearest("LM", local_bsz),
        Model::Ncf => t.nearest("Recommendation", local_bsz),
        Model::Yolov3 => t.nearest("CycleGAN", local_bsz),
    }
}

/// A job type's name as Gavel writes it: `ResNet-50 (batch size 64)`.
pub fn type_name(kind: usize) -> String {
    let t = &TABLE.types[kind];
    t.batch.map_or_else(|| t.family.clone(), |b| format!("{} (batch size {b})", t.family))
}

/// The share of a GPU a job of type `kind` uses alone, in 0.05..=1.
pub fn demand(kind: usize) -> f64 {
    TABLE.demand(kind)
}

/// Seconds a GPU service of type `kind` takes per request alone: a forward pass of one batch
/// of the type's size, taken as a third of its measured training step (an assumption of ours).
pub fn request_s(kind: usize) -> f64 {
    1.0 / (3.0 * TABLE.alone[kind])
}

/// A GPU service's p99 latency in ms: an M/M/1 queue of `rate` requests per second served at
/// `speed` times its speed alone ([`request_s`]); its sojourn time's 99th percentile is
/// `ln 100 / (μ − λ)`. An overloaded service (load 0.99 and more) reads 100 service times.
pub fn p99_ms(kind: usize, speed: f64, rate: f64) -> f64 {
    let service_s = request_s(kind) / speed.max(1e-6);
    let mu = 1.0 / service_s;
    if rate < 0.99 * mu { 1000.0 * 100f64.ln() / (mu - rate) } else { 1000.0 * 100.0 * service_s }
}

/// How the fitted model compares with the measured speeds.
pub fn fit_error() -> FitError {
    TABLE.error
}

/// A job of type `kind` at per-GPU batch `local_bsz`: its GPU memory, an assumption of ours.
pub fn footprint_bytes(kind: usize, local_bsz: u32) -> u64 {
    let t = &TABLE.types[kind];
    // A batch beyond the family's largest measured one counts as that (Gavel's largest ran).
    let largest = TABLE.types.iter().filter(|o| o.family == t.family).filter_map(|o| o.batch).max();
    let batch = f64::from(largest.map_or(local_bsz, |b| local_bsz.clamp(1, b)));
    let gib = match t.family.as_str() {
        "ResNet-18" => 1.0 + 0.02 * batch,
        "ResNet-50" => 1.5 + 0.09 * batch,
        "Transformer" => 2.0 + 0.03 * batch,
        "LM" => 1.5 + 0.05 * batch,
        "Recommendation" => 1.0 + 0.0005 * batch,
        "CycleGAN" => 6.0,
        _ => 2.0,
    };
    (gib * GIB) as u64
}

/// Whether Gavel measured `a` and `b` together (false: they ran out of memory, or were not
/// measured because of it).
pub fn measured_to_fit(a: usize, b: usize) -> bool {
    !TABLE.oom.contains(&(a, b))
}

/// One job on a GPU: its type and its share (a fraction; None: no share set).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Holder {
    /// Its measured job type ([`job_type`]).
    pub kind: usize,
    /// Its share of the GPU, 0..=1; None when it has none.
    pub share: Option<f64>,
}

/// How fast each of `holders` runs on the one GPU they share, as a fraction of alone.
pub fn speeds(holders: &[Holder]) -> Vec<f64> {
    let t = &*TABLE;
    let caps: Vec<f64> =
        holders.iter().map(|h| h.share.map_or(1.0, |q| (q / t.demand(h.kind)).clamp(0.0, 1.0))).collect();
    if holders.len() > 1 && holders.iter().any(|h| h.share.is_none()) {
        return vec![1.0 / holders.len() as f64; holders.len()];
    }
    (0..holders.len())
        .map(|a| {
            let pressed: f64 = (0..holders.len())
                .filter(|&b| b != a)
                .map(|b| t.interference(holders[a].kind, holders[b].kind) * caps[b])
                .sum();
            caps[a] / (1.0 + pressed)
        })
        .collect()
}

/// The share of the GPU's compute each holder uses, running at `speeds`.
pub fn used(holders: &[Holder], speeds: &[f64]) -> Vec<f64> {
    holders.iter().zip(speeds).map(|(h, s)| (demand(h.kind) * s).min(1.0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_across_domains_keeps_the_median_speed_gavel_measured_across_servers() {
        let speed = cross_domain_speed();
        assert!((speed - 0.739).abs() < 0.001, "{speed}: 165 configurations, median 0.739");
        assert!(spread_speed("{}").is_err());
    }

    fn alone_or_shared(kind: usize, share: Option<f64>) -> Holder {
        Holder { kind, share }
    }

    #[test]
    fn the_table_parses_and_the_fit_is_close_to_the_measured_speeds() {
        let t = &*TABLE;
        assert_eq!(t.types.len(), 26);
        let e = fit_error();
        eprintln!(
            "co-location fit: {} measured speeds, mean abs error {:.3}, max {:.3}",
            e.speeds, e.mean_abs, e.max_abs
        );
        assert_eq!(e.speeds, 636);
        assert!(e.mean_abs < 0.13, "{e:?}");
        assert!((t.pressure.iter().copied().fold(0.0, f64::max) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_measured_pair_runs_at_its_measured_speeds_under_mps() {
        let json: serde_json::Value =
            serde_json::from_str(include_str!("../../data/gavel/simulation_throughputs.json")).unwrap();
        let v100 = &json["v100"];
        let a = "('ResNet-18 (batch size 64)', 1)";
        let b = "('Recommendation (batch size 2048)', 1)";
        let pair = v100[a][b].as_array().unwrap();
        let want = [
            pair[0].as_f64().unwrap() / v100[a]["null"].as_f64().unwrap(),
            pair[1].as_f64().unwrap() / v100[b]["null"].as_f64().unwrap(),
        ];
        let (ka, kb) = (job_type(Model::Cifar10, 64), job_type(Model::Ncf, 2048));
        assert_eq!(type_name(ka), "ResNet-18 (batch size 64)");
        let got = speeds(&[alone_or_shared(ka, Some(1.0)), alone_or_shared(kb, Some(1.0))]);
        assert!((got[0] - want[0]).abs() < 1e-9 && (got[1] - want[1]).abs() < 1e-9, "{got:?} {want:?}");
        assert!(got[0] + got[1] > 1.0, "this pair gains from sharing: {got:?}");
    }

    #[test]
    fn time_slicing_splits_the_gpu_evenly() {
        let k = job_type(Model::Imagenet, 64);
        assert_eq!(speeds(&[alone_or_shared(k, None), alone_or_shared(k, Some(0.5))]), [0.5, 0.5]);
        assert_eq!(speeds(&[alone_or_shared(k, None)]), [1.0], "alone without a share");
    }

    #[test]
    fn a_share_below_the_demand_caps_a_job_and_eases_the_pressure_on_the_other() {
        let (heavy, light) = (job_type(Model::Imagenet, 16), job_type(Model::Cifar10, 32));
        assert!(demand(heavy) > 0.5, "{}", demand(heavy));
        let free = speeds(&[alone_or_shared(light, Some(1.0)), alone_or_shared(heavy, Some(1.0))]);
        let capped = speeds(&[alone_or_shared(light, Some(1.0)), alone_or_shared(heavy, Some(0.2))]);
        assert!(capped[1] < free[1] && capped[0] > free[0], "{free:?} -> {capped:?}");
        let alone = speeds(&[alone_or_shared(heavy, Some(demand(heavy) / 2.0))]);
        assert!((alone[0] - 0.5).abs() < 1e-9, "half its demand, half its speed: {alone:?}");
    }

    #[test]
    fn three_jobs_press_on_each_other_more_than_two() {
        let k = [job_type(Model::Cifar10, 64), job_type(Model::Ncf, 1024), job_type(Model::Deepspeech2, 20)];
        let two = speeds(&[alone_or_shared(k[0], Some(1.0)), alone_or_shared(k[1], Some(1.0))]);
        let three = speeds(&k.map(|kind| alone_or_shared(kind, Some(1.0))));
        assert!(three[0] <= two[0] && three[1] < two[1], "{two:?} {three:?}");
    }

    #[test]
    fn pairs_that_ran_out_of_memory_never_fit() {
        let big = job_type(Model::Imagenet, 128);
        assert_eq!(type_name(big), "ResNet-50 (batch size 128)");
        assert!(!measured_to_fit(big, big));
        assert!(measured_to_fit(job_type(Model::Cifar10, 64), big));
        assert!(footprint_bytes(big, 128) > 12 * (1 << 30));
    }
}
