//! How fast a GPU job trains: seconds per optimiser step for a placement and a batch size.
//!
//! **What is measured.** For each of the six models the Pollux authors timed one optimiser step
//! (and its gradient all-reduce part) on their testbed of 4-GPU nodes (petuum/adaptdl, OSDI'21
//! artifact, Apache-2.0; see `data/README.md` of the repository):
//! - `placements.csv`: every placement over one to four nodes of one to four GPUs each (up to
//!   rotation: `1213` stands for `2131`, `1312` and `3121` too), each at 7 to 21 per-GPU batch
//!   sizes;
//! - `scalability.csv`: 6, 8, 12 and 16 nodes at several GPU counts, at the same batch sizes.
//!
//! **How we read them.**
//! - A placement that was measured uses its own row set, linear in the per-GPU batch size.
//! - Any other placement (five nodes and more, more than four GPUs on a node, or a measured
//!   shape under a new GPU count) uses the mean step time of the measured placements with its
//!   node count and GPU count, linear in the batch size, then in the GPU count at the nearest
//!   measured node counts, then in the node count (more than 16 nodes count as 16, as in Pollux's
//!   simulator).
//! - Outside a measured range (a per-GPU batch below the smallest measured one, a GPU count
//!   beyond the largest measured at a node count) the nearest measured value stands. Both are
//!   assumptions of ours: a smaller batch takes no less time than the smallest measured one;
//!   eight GPUs on one node scale like four.
//!
//! **GPU types.** Those files are one GPU type: the T4s of AWS g4dn nodes (Sia's `aws`). Sia's
//! artifact (siasosp23/artifacts, SOSP'23; see `data/README.md` of the repository) measured the same models the
//! same way on four more ([`GpuType`]): `placements-<type>.csv` and `scalability-<type>.csv`,
//! read by the same rules. A node's type is its scenario's `gpu-type`; a node without one is a
//! T4 node, as every node was before types. A job spread over nodes of several types runs at
//! the slowest type's step time (the simulator allows it; Sia's policies never place so).
//!
//! **How a job uses them** ([`GpuConfig`], Pollux's rule for jobs of a fixed batch size): a
//! job of global batch size B on r GPUs runs ⌈B/r⌉ samples per GPU, in ⌈that / m⌉ passes
//! (gradient accumulation) when a GPU holds at most m at a time (m = the largest measured
//! per-GPU batch, 8 for yolov3 as in Pollux's simulator); a single GPU given a batch larger
//! than the model's smallest accumulates at least once. One optimiser step then takes
//! `step + (passes − 1) × (step − sync)`.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use crate::Model;

/// A GPU type with measured step times.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GpuType {
    /// NVIDIA T4 16 GB, 4 a node (AWS g4dn.12xlarge): Pollux's testbed, Sia's `aws`.
    #[default]
    T4,
    /// RTX 2080Ti 11 GB, 8 a node, 50 Gb/s Ethernet (Sia's `rtx`).
    Rtx,
    /// A100 40 GB, 8 a node (DGX-A100, 1.6 Tb/s InfiniBand; Sia's `dgx-ext`).
    A100,
    /// Quadro RTX 6000 24 GB, 4 a node (Sia's `quad`).
    Quadro,
    /// V100, 8 a node (Azure ND40rs_v2; Sia's `azure`).
    V100,
}

impl GpuType {
    /// Every type, in declaration order.
    pub const ALL: [GpuType; 5] = [GpuType::T4, GpuType::Rtx, GpuType::A100, GpuType::Quadro, GpuType::V100];

    /// The name policies and scenarios use.
    pub fn name(self) -> &'static str {
        match self {
            GpuType::T4 => "t4",
            GpuType::Rtx => "rtx",
            GpuType::A100 => "a100",
            GpuType::Quadro => "quadro",
            GpuType::V100 => "v100",
        }
    }

    /// The type a scenario names: ours ("a100") or Sia's ("dgx-ext"), any case; None for an
    /// unknown name.
    pub fn parse(name: &str) -> Option<GpuType> {
        let name = name.trim().to_ascii_lowercase();
        GpuType::ALL.into_iter().find(|t| {
            t.name() == name
                || match t {
                    GpuType::T4 => name == "aws",
                    GpuType::Rtx => name == "rtx2080ti",
                    GpuType::A100 => name == "dgx-ext" || name == "dgx",
                    GpuType::Quadro => name == "quad" || name == "rtx6000",
                    GpuType::V100 => name == "azure",
                }
        })
    }

    /// The file suffix of its measurements ("" for Pollux's own files).
    pub fn suffix(self) -> &'static str {
        match self {
            GpuType::T4 => "",
            GpuType::Rtx => "-rtx",
            GpuType::A100 => "-dgx-ext",
            GpuType::Quadro => "-quad",
            GpuType::V100 => "-azure",
        }
    }
}

/// The largest node count measured; more nodes are read as this many.
const MAX_NODES: u32 = 16;

/// Step and sync time over per-GPU batch sizes, ascending.
#[derive(Debug, Default)]
struct Series {
    local_bsz: Vec<f64>,
    step_s: Vec<f64>,
    sync_s: Vec<f64>,
}

impl Series {
    /// (step, sync) at `local_bsz`, linear between measured sizes, clamped at the ends.
    fn at(&self, local_bsz: f64) -> (f64, f64) {
        let (lo, hi, w) = bracket(&self.local_bsz, local_bsz);
        (lerp(self.step_s[lo], self.step_s[hi], w), lerp(self.sync_s[lo], self.sync_s[hi], w))
    }
}

/// One model's measured step times.
#[derive(Debug)]
struct StepTimes {
    /// By placement id (the digits of its smallest rotation, e.g. 1213).
    placements: HashMap<u32, Series>,
    /// The node counts measured, ascending.
    node_counts: Vec<f64>,
    /// By node count, in `node_counts`' order, the series of each (nodes, GPUs) shape: the mean
    /// over the placements of that shape, plus `scalability.csv`. A vector rather than a map,
    /// so that [`StepTimes::at`] (run for every candidate of every job each round) neither
    /// walks a tree nor allocates.
    by_nodes: Vec<NodeShapes>,
    /// Smallest and largest measured per-GPU batch size.
    local_range: (u32, u32),
}

/// The shapes of one node count: their GPU counts, ascending, and their series alike.
#[derive(Debug)]
struct NodeShapes {
    gpus: Vec<f64>,
    series: Vec<Series>,
}

/// Embeds a model's two step-time files for each GPU type, in [`GpuType::ALL`]'s order.
macro_rules! step_files {
    ($($model:literal),+ $(,)?) => {
        [$([
            step_files!(@type $model, ""),
            step_files!(@type $model, "-rtx"),
            step_files!(@type $model, "-dgx-ext"),
            step_files!(@type $model, "-quad"),
            step_files!(@type $model, "-azure"),
        ]),+]
    };
    (@type $model:literal, $suffix:literal) => {
        (
            include_str!(concat!("../../data/models/", $model, "/placements", $suffix, ".csv")),
            include_str!(concat!("../../data/models/", $model, "/scalability", $suffix, ".csv")),
        )
    };
}

/// The step-time files of each [`Model`], in declaration order, per GPU type.
const STEP_FILES: [[(&str, &str); 5]; 6] = step_files!("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3");

/// Each model's step times on each GPU type, parsed on first use of that pair.
static TABLES: [[OnceLock<StepTimes>; 5]; 6] = [const { [const { OnceLock::new() }; 5] }; 6];

/// `model`'s step times on `gpu`.
fn table(model: Model, gpu: GpuType) -> &'static StepTimes {
    TABLES[model as usize][gpu as usize].get_or_init(|| {
        let (placements, scalability) = STEP_FILES[model as usize][gpu as usize];
        StepTimes::parse(placements, scalability).unwrap_or_else(|e| {
            panic!("embedded data/models/{}/ step times{} are malformed: {e}", model.name(), gpu.suffix())
        })
    })
}

/// Rows of a CSV with a header, as numbers in the order of `columns`.
pub fn rows(text: &str, columns: &[&str]) -> Result<Vec<Vec<f64>>, String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().ok_or("the file is empty")?.split(',').map(str::trim).collect();
    let at: Vec<(usize, &str)> = columns
        .iter()
        .map(|&c| header.iter().position(|&h| h == c).map(|k| (k, c)).ok_or_else(|| format!("no `{c}` column")))
        .collect::<Result<_, _>>()?;
    lines
        .enumerate()
        .map(|(i, line)| {
            let cells: Vec<&str> = line.split(',').collect();
            at.iter()
                .map(|&(k, name)| match cells.get(k).map(|c| c.trim().parse::<f64>()) {
                    Some(Ok(v)) if v.is_finite() && v >= 0.0 => Ok(v),
                    _ => Err(format!("row {}: `{name}` is not a non-negative number", i + 1)),
                })
                .collect()
        })
        .collect()
}

impl StepTimes {
    fn parse(placements: &str, scalability: &str) -> Result<StepTimes, String> {
        type Points = BTreeMap<u64, (f64, f64, u32)>;
        let mut by_id: HashMap<u32, Points> = HashMap::new();
        let mut by_shape: BTreeMap<(u32, u32), Points> = BTreeMap::new();
        let mut local_range = (u32::MAX, 0);
        let add = |points: &mut Points, local: f64, step: f64, sync: f64| {
            let e = points.entry(local.to_bits()).or_insert((0.0, 0.0, 0));
            *e = (e.0 + step, e.1 + sync, e.2 + 1);
        };
        for row in rows(placements, &["placement", "local_bsz", "step_time", "sync_time"])? {
            let id = row[0] as u32;
            let digits: Vec<u32> = id.to_string().bytes().map(|b| u32::from(b - b'0')).collect();
            let shape = (digits.len() as u32, digits.iter().sum());
            local_range = (local_range.0.min(row[1] as u32), local_range.1.max(row[1] as u32));
            add(by_id.entry(id).or_default(), row[1], row[2], row[3]);
            add(by_shape.entry(shape).or_default(), row[1], row[2], row[3]);
        }
        for row in rows(scalability, &["num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"])? {
            add(by_shape.entry((row[0] as u32, row[1] as u32)).or_default(), row[2], row[3], row[4]);
        }
        let series = |points: Points| {
            let mut s = Series::default();
            let mut sorted: Vec<(f64, (f64, f64, u32))> =
                points.into_iter().map(|(k, v)| (f64::from_bits(k), v)).collect();
            sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
            for (local, (step, sync, n)) in sorted {
                s.local_bsz.push(local);
                s.step_s.push(step / f64::from(n));
                s.sync_s.push(sync / f64::from(n));
            }
            s
        };
        if by_id.is_empty() {
            return Err("placements.csv has no rows".into());
        }
        let shapes: BTreeMap<(u32, u32), Series> = by_shape.into_iter().map(|(k, v)| (k, series(v))).collect();
        let mut node_counts: Vec<u32> = Vec::new();
        let mut by_nodes: Vec<NodeShapes> = Vec::new();
        for ((nodes, gpus), series) in shapes {
            if node_counts.last() != Some(&nodes) {
                node_counts.push(nodes);
                by_nodes.push(NodeShapes { gpus: Vec::new(), series: Vec::new() });
            }
            let of_n = by_nodes.last_mut().expect("pushed above");
            of_n.gpus.push(f64::from(gpus));
            of_n.series.push(series);
        }
        let node_counts = node_counts.into_iter().map(f64::from).collect();
        Ok(StepTimes {
            placements: by_id.into_iter().map(|(k, v)| (k, series(v))).collect(),
            node_counts,
            by_nodes,
            local_range,
        })
    }

    /// (step, sync) of `shape` (GPUs per node) at `local_bsz`.
    fn at(&self, shape: &[u32], local_bsz: f64) -> (f64, f64) {
        if let Some(series) = placement_id(shape).and_then(|id| self.placements.get(&id)) {
            return series.at(local_bsz);
        }
        let nodes = (shape.len() as u32).clamp(1, MAX_NODES);
        let gpus: u32 = shape.iter().sum::<u32>().max(1);
        let (lo, hi, w) = bracket(&self.node_counts, f64::from(nodes));
        let at_nodes = |i: usize| {
            let of_n: &NodeShapes = &self.by_nodes[i];
            let (a, b, v) = bracket(&of_n.gpus, f64::from(gpus));
            let ((s0, y0), (s1, y1)) = (of_n.series[a].at(local_bsz), of_n.series[b].at(local_bsz));
            (lerp(s0, s1, v), lerp(y0, y1, v))
        };
        let ((s0, y0), (s1, y1)) = (at_nodes(lo), at_nodes(hi));
        (lerp(s0, s1, w), lerp(y0, y1, w))
    }

    /// The series of `nodes` nodes with `gpus` GPUs in all, as measured.
    #[cfg(test)]
    fn shape(&self, nodes: u32, gpus: u32) -> &Series {
        let n = self.node_counts.iter().position(|&c| c == f64::from(nodes)).expect("a measured node count");
        let of_n = &self.by_nodes[n];
        &of_n.series[of_n.gpus.iter().position(|&g| g == f64::from(gpus)).expect("a measured GPU count")]
    }
}

/// The id of a placement as the files write it: the digits of its smallest rotation, empty
/// nodes dropped. None when a node has more than 9 GPUs or there are more than 9 nodes.
fn placement_id(shape: &[u32]) -> Option<u32> {
    let mut digits = [0u32; 9];
    let mut n = 0;
    for &g in shape.iter().filter(|&&g| g > 0) {
        if n == digits.len() || g > 9 {
            return None;
        }
        digits[n] = g;
        n += 1;
    }
    let digits = &digits[..n];
    // Rotations have as many digits as each other, so the smallest number is the smallest
    // rotation.
    (0..n).map(|k| digits[k..].iter().chain(&digits[..k]).fold(0, |id, &d| id * 10 + d)).min()
}

/// Indices of the values around `x` in ascending `xs`, and the weight of the upper one;
/// clamped to the ends.
fn bracket(xs: &[f64], x: f64) -> (usize, usize, f64) {
    let last = xs.len() - 1;
    if x <= xs[0] {
        return (0, 0, 0.0);
    }
    if x >= xs[last] {
        return (last, last, 0.0);
    }
    let hi = xs.partition_point(|&v| v < x);
    let lo = hi - 1;
    (lo, hi, (x - xs[lo]) / (xs[hi] - xs[lo]))
}

fn lerp(a: f64, b: f64, w: f64) -> f64 {
    a + (b - a) * w
}

/// How a GPU job of a fixed global batch size runs on its GPUs (Pollux's rule, see the module
/// docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuConfig {
    /// GPUs (replicas).
    pub replicas: u32,
    /// Samples per GPU per pass.
    pub local_bsz: u32,
    /// Extra passes per optimiser step (gradient accumulation); 0 for none.
    pub accum_steps: u32,
}

impl GpuConfig {
    /// The configuration of a job of `model` asking for global batch size `batch_size` on
    /// `replicas` GPUs (at least one).
    pub fn new(model: impl Into<Model>, batch_size: u32, replicas: u32) -> GpuConfig {
        let model = model.into();
        let replicas = replicas.max(1);
        let max_local = model.max_local_batch();
        let batch = batch_size.max(1);
        let local = batch.div_ceil(replicas);
        let mut accum_steps = local.div_ceil(max_local) - 1;
        if replicas == 1 && batch > model.default_batch_size() {
            accum_steps = accum_steps.max(1);
        }
        let per_pass = local.div_ceil(accum_steps + 1);
        let cap = model.max_batch_size() / replicas.saturating_mul(accum_steps + 1);
        GpuConfig { replicas, local_bsz: per_pass.min(cap).max(1), accum_steps }
    }

    /// The global batch size it trains at: every GPU's samples over every pass.
    pub fn batch_size(&self) -> u32 {
        let samples = u64::from(self.replicas) * u64::from(self.local_bsz) * u64::from(self.accum_steps + 1);
        u32::try_from(samples).unwrap_or(u32::MAX)
    }

    /// Seconds per optimiser step of `model` with `shape` GPUs on each of its nodes, on T4s.
    pub fn step_s(&self, model: impl Into<Model>, shape: &[u32]) -> f64 {
        self.step_s_on(model, GpuType::T4, shape)
    }

    /// Seconds per optimiser step of `model` with `shape` GPUs of type `gpu` on each node.
    pub fn step_s_on(&self, model: impl Into<Model>, gpu: GpuType, shape: &[u32]) -> f64 {
        let (step, sync) = table(model.into(), gpu).at(shape, f64::from(self.local_bsz));
        step + f64::from(self.accum_steps) * (step - sync).max(0.0)
    }
}

/// The packed shape of `gpus` GPUs on nodes of `per_node`: full nodes, then the rest.
pub fn packed(gpus: u32, per_node: u32) -> Vec<u32> {
    let per_node = per_node.max(1);
    let mut shape = vec![per_node; (gpus / per_node) as usize];
    if !gpus.is_multiple_of(per_node) {
        shape.push(gpus % per_node);
    }
    shape
}

/// The smallest and largest per-GPU batch measured for `model` on `gpu`.
pub fn local_range(model: Model, gpu: GpuType) -> (u32, u32) {
    table(model, gpu).local_range
}

/// GPUs per node of a placement, in order of first appearance of each node.
pub fn shape_of(nodes: impl IntoIterator<Item = u32>) -> Vec<u32> {
    let mut shape: Vec<(u32, u32)> = Vec::new();
    for node in nodes {
        match shape.iter_mut().find(|(n, _)| *n == node) {
            Some((_, count)) => *count += 1,
            None => shape.push((node, 1)),
        }
    }
    shape.into_iter().map(|(_, count)| count).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv_step(model: &str, placement: &str, local: &str) -> f64 {
        let text =
            std::fs::read_to_string(format!("{}/../data/models/{model}/placements.csv", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        let row = text.lines().find(|l| l.starts_with(&format!("{placement},{local},"))).unwrap();
        row.split(',').nth(2).unwrap().parse().unwrap()
    }

    #[test]
    fn a_measured_placement_gives_its_measured_step_time() {
        let t = table(Model::Cifar10, GpuType::T4);
        assert_eq!(t.at(&[1], 64.0).0, csv_step("cifar10", "1", "64"));
        assert_eq!(t.at(&[2, 2], 129.0).0, csv_step("cifar10", "22", "129"));
        // Any rotation of a measured placement is the same placement.
        assert_eq!(t.at(&[3, 1, 2, 1], 32.0), t.at(&[1, 2, 1, 3], 32.0));
        assert_eq!(t.at(&[1, 2, 1, 3], 32.0).0, csv_step("cifar10", "1213", "32"));
    }

    #[test]
    fn between_measured_batch_sizes_the_step_time_is_linear_and_clamped_outside() {
        let t = table(Model::Cifar10, GpuType::T4);
        let (a, b) = (csv_step("cifar10", "1", "64"), csv_step("cifar10", "1", "91"));
        let mid = t.at(&[1], 77.5).0;
        assert!((mid - (a + b) / 2.0).abs() < 1e-12, "{mid} between {a} and {b}");
        assert_eq!(t.at(&[1], 1.0), t.at(&[1], 32.0), "below the smallest measured size");
        assert_eq!(t.at(&[1], 1e9), t.at(&[1], 1024.0), "above the largest");
    }

    #[test]
    fn unmeasured_placements_fall_between_their_neighbours() {
        for model in Model::ALL {
            let t = table(model, GpuType::T4);
            let local = f64::from(t.local_range.0);
            // Five nodes of four (20 GPUs) lie between four nodes at their most (16) and six
            // nodes at 20 GPUs (scalability.csv).
            let five = t.at(&[4; 5], local).0;
            let (four, six) = (t.shape(4, 16).at(local).0, t.shape(6, 20).at(local).0);
            assert!((four.min(six) - 1e-12..=four.max(six) + 1e-12).contains(&five), "{model:?}: {five}");
            assert!(t.at(&[4; 20], local).0 > 0.0, "{model:?}: beyond 16 nodes");
            assert!(t.at(&[8, 8], local).0 > 0.0, "{model:?}: 8 GPUs a node");
        }
    }

    #[test]
    fn every_gpu_type_reads_its_own_measurements_and_an_a100_outruns_a_t4() {
        for model in Model::ALL {
            for gpu in GpuType::ALL {
                let t = table(model, gpu);
                let local = f64::from(t.local_range.0);
                assert!(t.at(&[1], local).0 > 0.0 && t.at(&[8, 8], local).0.is_finite(), "{model:?} on {gpu:?}");
            }
            // NCF's steps are tiny and overhead-bound: measured slower on an A100 than on a T4.
            // Sia's workloads leave it out.
            let c = GpuConfig::new(model, model.default_batch_size(), 1);
            let (t4, a100) = (c.step_s_on(model, GpuType::T4, &[1]), c.step_s_on(model, GpuType::A100, &[1]));
            assert!(a100 < t4 || model == Model::Ncf, "{model:?}: A100 {a100} s a step against T4 {t4} s");
        }
        assert_eq!(GpuType::parse("dgx-ext"), Some(GpuType::A100));
        assert_eq!(GpuType::parse("AWS"), Some(GpuType::T4));
        assert_eq!(GpuType::parse("h100"), None);
    }

    #[test]
    fn placement_ids_are_the_smallest_rotation() {
        assert_eq!(placement_id(&[4]), Some(4));
        assert_eq!(placement_id(&[2, 1]), Some(12));
        assert_eq!(placement_id(&[3, 1, 2, 1]), Some(1213));
        assert_eq!(placement_id(&[0, 4, 0, 4]), Some(44));
        assert_eq!(placement_id(&[10]), None);
        assert_eq!(placement_id(&[]), None);
        assert_eq!(shape_of([3, 3, 1, 3, 1, 0]), vec![3, 2, 1]);
    }

    #[test]
    fn batch_configs_follow_the_fixed_batch_rule() {
        // cifar10 at 2048 on 6 GPUs: 342 a GPU, in one pass (at most 1024 fit).
        let c = GpuConfig::new(Model::Cifar10, 2048, 6);
        assert_eq!((c.local_bsz, c.accum_steps), (342, 0));
        // yolov3 at 64 on 4 GPUs: 16 a GPU, at most 8 a pass, so two passes of 8.
        let y = GpuConfig::new(Model::Yolov3, 64, 4);
        assert_eq!((y.local_bsz, y.accum_steps, y.batch_size()), (8, 1, 64));
        // One GPU above the smallest batch accumulates at least once.
        let one = GpuConfig::new(Model::Cifar10, 256, 1);
        assert_eq!((one.local_bsz, one.accum_steps), (128, 1));
        // A batch beyond the largest curve's is capped there.
        assert!(GpuConfig::new(Model::Cifar10, 1 << 20, 2).batch_size() <= Model::Cifar10.max_batch_size());
        // Degenerate inputs still give a runnable configuration.
        let z = GpuConfig::new(Model::Ncf, 0, 0);
        assert!(z.replicas == 1 && z.local_bsz >= 1);
        for (batch, gpus) in [(u32::MAX, u32::MAX), (u32::MAX, 1), (1, u32::MAX)] {
            let c = GpuConfig::new(Model::Yolov3, batch, gpus);
            assert!(c.local_bsz >= 1 && c.batch_size() >= 1 && c.step_s(Model::Yolov3, &[4; 3]).is_finite());
        }
    }

    #[test]
    fn more_gpus_make_a_step_of_the_same_batch_faster_for_a_compute_bound_model() {
        let m = Model::Imagenet;
        let one = GpuConfig::new(m, 3200, 8).step_s(m, &[4, 4]);
        let many = GpuConfig::new(m, 3200, 16).step_s(m, &[4, 4, 4, 4]);
        assert!(many < one, "{many} < {one}");
    }
}
