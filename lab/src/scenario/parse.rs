//! Our TOML scenario format (documented field by field in `scenarios/README.md`): parsed
//! with serde, then checked field by field with errors that name the file and the line.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use toml::de::DeTable;

use wasmsched_core::bindings::wit;
use wasmsched_core::units::{parse_bytes, parse_duration_s};
use wasmsched_loop::budget::BudgetConfig;
use wasmsched_loop::watchdog::WatchdogConfig;
use wasmsched_sim::model::{Curve, Model};
use wasmsched_sim::profile::Profile;
use wasmsched_sim::throughput::GpuType;
use wasmsched_sim::workload::{
    JobPlan, MAX_JOB_GPUS, MAX_NODE_CORES, MAX_NODE_GPUS, MAX_NODE_MEMORY_BYTES, NodeSpec, Workload,
};

use super::{Claim, Scenario, WorkloadError};

/// A scenario file: see `scenarios/README.md`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    /// The workload's name in reports; the file's stem when absent.
    name: Option<String>,
    /// The cluster's nodes, one `[[node]]` table each; at least one.
    #[serde(default)]
    node: Vec<NodeTable>,
    /// Calibrated job kinds, one `[[profile]]` table each; jobs name them in `model`.
    #[serde(default)]
    profile: Vec<ProfileTable>,
    /// The jobs, one `[[job]]` table each (or several, with `count`); at least one.
    #[serde(default)]
    job: Vec<JobTable>,
    /// What a paper reports for this set-up, printed beside our figures by `compare`.
    #[serde(default)]
    paper: Vec<Claim>,
    /// The disruption budget its runs go under; the cautious default when absent.
    #[serde(default)]
    budget: BudgetConfig,
    /// The watchdog its runs go under; the default when absent.
    #[serde(default)]
    watchdog: WatchdogConfig,
    /// The tenants its jobs belong to ([`wasmsched_core::tenants`]), one `[[tenants]]` table each.
    #[serde(default)]
    tenants: Vec<wasmsched_core::tenants::TenantConfig>,
}

/// A `[[node]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct NodeTable {
    /// Unique name jobs may pin to; `node-<i>` (0-based) when absent.
    name: Option<String>,
    /// CPU capacity in cores; fractions allowed (`0.5`), must be positive.
    cores: f64,
    /// Memory capacity with a unit: `"64GiB"`, `"512MiB"`, `"1.5TiB"`, `"64GB"`.
    memory: String,
    /// GPUs on the node; 0 when absent.
    #[serde(default)]
    gpus: i64,
    /// Memory of each GPU, with a unit; required when `gpus` > 0.
    gpu_memory: Option<String>,
    /// The type of its GPUs ("t4", "a100").
    gpu_type: Option<String>,
    /// Its topology domains, coarsest first (`["block-1", "rack-3"]`).
    #[serde(default)]
    domains: Vec<String>,
}

/// The most topology levels a scenario node names.
const MAX_DOMAIN_LEVELS: usize = 8;

/// A `[[profile]]` table: a job kind measured by `wasmsched calibrate`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ProfileTable {
    /// The profile file, relative to the scenario's folder.
    file: String,
    /// The name jobs use in `model`; the profile's own `name` when absent.
    name: Option<String>,
}

/// Whether a job trains or serves.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum KindName {
    /// Walks its model's learning curve epoch by epoch.
    Training,
    /// Serves requests at `request-rate` for `duration`.
    Inference,
}

/// A `[[job]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct JobTable {
    /// Unique job name (with `count`, the prefix of `<name>-<i>`).
    name: String,
    /// One of bert, cifar10, deepspeech2, imagenet, ncf, yolov3, or a `[[profile]]`'s name.
    model: String,
    /// When it arrives, as a duration from the start: `"0s"`, `"90s"`, `"2m"`, `"1h30m"`; `"0s"`
    /// when absent.
    arrival: Option<String>,
    /// `"training"` (the default) or `"inference"`.
    kind: Option<KindName>,
    /// Pins the job to the node of this name; the simulator places it when absent.
    node: Option<String>,
    /// Global batch size (positive); the model's default when absent.
    batch_size: Option<i64>,
    /// GPUs the job asks for; 0 when absent.
    gpus: Option<i64>,
    /// Into how many pieces (each `gpus / replicas` GPUs) the job may be split across nodes;
    /// 1 (one node) when absent.
    replicas: Option<i64>,
    /// Stop after this many epochs (positive); the whole curve when absent.
    max_epochs: Option<i64>,
    /// Multiplies the model's work per epoch (positive); 1.0 when absent.
    work_scale: Option<f64>,
    /// TRADL tiers `[T1, T2]` on the model's metric; T1 must be easier than T2. Training only.
    tiers: Option<Vec<f64>>,
    /// DQoES target (positive): seconds per epoch for training, milliseconds per request for
    /// inference.
    qoe_target: Option<f64>,
    /// Inference only, required there: requests per second (positive).
    request_rate: Option<f64>,
    /// Inference only, required there: how long the service runs, as a duration (`"1h"`).
    duration: Option<String>,
    /// Expands this table into `count` jobs named `<name>-0` … `<name>-<count-1>`.
    count: Option<i64>,
    /// With `count`: the time between two consecutive arrivals (`"10s"`); `"0s"` when absent.
    every: Option<String>,
    /// False opts the job out of disruption (the budget never stops, migrates or preempts
    /// it); true when absent.
    disruptible: Option<bool>,
    /// An elastic GPU training job (any GPU count, its own batch size, Sia's restore delays);
    /// false when absent.
    elastic: Option<bool>,
    /// The tenant it belongs to; `default` when absent.
    tenant: Option<String>,
}

/// The most jobs one `[[job]]` table expands into with `count` (more is a typo, and would
/// exhaust the memory).
const MAX_COUNT: i64 = 100_000;

/// Which array of tables a line lookup is about.
#[derive(Clone, Copy)]
enum Table {
    Node,
    Job,
    Profile,
}

impl Table {
    /// Its key in the file.
    fn key(self) -> &'static str {
        match self {
            Table::Node => "node",
            Table::Job => "job",
            Table::Profile => "profile",
        }
    }
}

/// Where a semantic error is: the file, and the lines of its tables and keys, from the spans
/// the TOML parser gives every key and table.
struct Fields<'a> {
    path: &'a str,
    text: &'a str,
    /// The document as parsed, with spans, once an error asks for a line (None if it does not
    /// parse, which `toml::from_str` has already said).
    doc: OnceCell<Option<toml::Spanned<DeTable<'a>>>>,
}

impl<'a> Fields<'a> {
    fn new(path: &'a str, text: &'a str) -> Fields<'a> {
        Fields { path, text, doc: OnceCell::new() }
    }

    /// The 1-based line of `key` in the `index`-th table of `table`, else of that table.
    fn line(&self, table: Table, index: usize, key: &str) -> Option<usize> {
        let doc = self.doc.get_or_init(|| DeTable::parse(self.text).ok()).as_ref()?;
        let tables = doc.get_ref().iter().find(|(k, _)| k.get_ref() == table.key())?.1;
        let entry = tables.get_ref().as_array()?.get(index)?;
        let keyed = entry.get_ref().as_table().and_then(|t| t.iter().find(|(k, _)| k.get_ref() == key));
        let span = keyed.map_or_else(|| entry.span(), |(k, _)| k.span());
        Some(line_column(self.text, span.start).0)
    }

    /// `message` about `key` of the `index`-th table of `table`.
    fn err(&self, table: Table, index: usize, key: &str, message: String) -> WorkloadError {
        WorkloadError::Field { path: self.path.into(), line: self.line(table, index, key), field: key.into(), message }
    }
}

/// Parses and validates a scenario. `path` labels errors; `default_name` names the workload
/// when the scenario has no `name`; profile files are found relative to `folder` (the
/// current directory when None).
pub(super) fn scenario(
    path: &str,
    default_name: &str,
    text: &str,
    folder: Option<&Path>,
) -> Result<Scenario, WorkloadError> {
    let file: ScenarioFile = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((None, None), |span| {
            let (line, column) = line_column(text, span.start);
            (Some(line), Some(column))
        });
        WorkloadError::Toml { path: path.into(), line, column, message: e.message().trim_end().to_string() }
    })?;
    let at = Fields::new(path, text);
    if file.node.is_empty() {
        return Err(WorkloadError::NoNodes {
            path: path.into(),
            hint: "add a [[node]] table with `cores` and `memory` (see scenarios/README.md)",
        });
    }
    let mut nodes: Vec<NodeSpec> = Vec::with_capacity(file.node.len());
    for (i, table) in file.node.iter().enumerate() {
        let node = node(i, table, &at)?;
        if nodes.iter().any(|n| n.name == node.name) {
            let message = format!("node name `{}` is used twice: give every node its own name", node.name);
            return Err(at.err(Table::Node, i, "name", message));
        }
        nodes.push(node);
    }
    let profiles = profiles(&file.profile, folder, &at)?;
    if file.job.is_empty() {
        return Err(WorkloadError::Empty {
            path: path.into(),
            hint: "add a [[job]] table with `name` and `model` (see scenarios/README.md)",
        });
    }
    let mut jobs = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, table) in file.job.iter().enumerate() {
        let (plan, spacing) = job(i, table, &nodes, &profiles, &at)?;
        expand(i, table, plan, spacing, &mut seen, &mut jobs, &at)?;
    }
    let tenants = wasmsched_core::tenants::declare(&file.tenants).map_err(|message| WorkloadError::Field {
        path: path.into(),
        line: None,
        field: "tenants".into(),
        message,
    })?;
    let name = file.name.unwrap_or_else(|| default_name.to_string());
    Ok(Scenario {
        workload: Workload { name, nodes, jobs },
        claims: file.paper,
        budget: file.budget,
        watchdog: file.watchdog,
        tenants,
        perturb: 0.0,
    })
}

/// The `i`-th `[[node]]` table.
fn node(i: usize, table: &NodeTable, at: &Fields) -> Result<NodeSpec, WorkloadError> {
    let err = |key: &str, message: String| at.err(Table::Node, i, key, message);
    let name = table.name.clone().unwrap_or_else(|| format!("node-{i}"));
    let cpu_millicores = (table.cores * 1000.0).round();
    if !table.cores.is_finite() || cpu_millicores < 1.0 || table.cores > MAX_NODE_CORES {
        return Err(err(
            "cores",
            format!(
                "{} cores: a node needs a positive number of cores up to {MAX_NODE_CORES}, e.g. 16 or 0.5",
                table.cores
            ),
        ));
    }
    let memory_bytes = parse_bytes(&table.memory).map_err(|m| err("memory", m))?;
    if memory_bytes > MAX_NODE_MEMORY_BYTES {
        return Err(err("memory", format!("{}: a node has at most 1024TiB of memory, e.g. \"256GiB\"", table.memory)));
    }
    let gpus = whole("gpus", table.gpus, 0).map_err(|m| err("gpus", m))?;
    if gpus > MAX_NODE_GPUS {
        return Err(err("gpus", format!("{gpus} GPUs: a node has at most {MAX_NODE_GPUS}, e.g. 8")));
    }
    let gpu_memory_bytes = match (&table.gpu_memory, gpus) {
        (Some(text), _) => parse_bytes(text).map_err(|m| err("gpu-memory", m))?,
        (None, 0) => 0,
        (None, _) => {
            return Err(err("gpu-memory", "the node has GPUs: say how much memory each has, e.g. \"32GiB\"".into()));
        }
    };
    // The name as the simulator has measured it ("dgx-ext" is written "a100").
    let gpu_type = match table.gpu_type.as_deref() {
        None => String::new(),
        Some(text) => match GpuType::parse(text) {
            Some(t) => t.name().to_string(),
            None => {
                let known: Vec<&str> = GpuType::ALL.iter().map(|t| t.name()).collect();
                return Err(err(
                    "gpu-type",
                    format!(
                        "{text:?} is not a GPU type the simulator has measurements of: write one of {}",
                        known.join(", ")
                    ),
                ));
            }
        },
    };
    if table.domains.len() > MAX_DOMAIN_LEVELS {
        return Err(err(
            "domains",
            format!(
                "{} levels: a node names at most {MAX_DOMAIN_LEVELS}, coarsest first, e.g. [\"block-1\", \"rack-3\"]",
                table.domains.len()
            ),
        ));
    }
    if let Some(bad) = table.domains.iter().find(|d| d.trim().is_empty() || d.len() > 63) {
        return Err(err("domains", format!("{bad:?}: a domain is a name of 1 to 63 characters, e.g. \"rack-3\"")));
    }
    let domains = table.domains.clone();
    Ok(NodeSpec {
        name,
        cpu_millicores: cpu_millicores as u64,
        memory_bytes,
        gpus,
        gpu_memory_bytes,
        gpu_type,
        domains,
    })
}

/// The `[[profile]]` tables, by the name jobs use; their files relative to `folder`.
fn profiles(
    tables: &[ProfileTable],
    folder: Option<&Path>,
    at: &Fields,
) -> Result<HashMap<String, Arc<Profile>>, WorkloadError> {
    let mut profiles: HashMap<String, Arc<Profile>> = HashMap::new();
    for (i, table) in tables.iter().enumerate() {
        let err = |key: &str, message: String| at.err(Table::Profile, i, key, message);
        let file = folder.map_or_else(|| Path::new(&table.file).to_path_buf(), |f| f.join(&table.file));
        let mut profile = Profile::load(&file).map_err(|e| err("file", wasmsched_core::error_chain(&e)))?;
        if let Some(name) = &table.name {
            profile.name.clone_from(name);
        }
        if Model::parse(&profile.name).is_some() {
            return Err(err(
                "name",
                format!("`{}` is a built-in model's name: give the profile another `name`", profile.name),
            ));
        }
        if profiles.contains_key(&profile.name) {
            return Err(err("name", format!("two profiles are named `{}`: give each its own `name`", profile.name)));
        }
        profiles.insert(profile.name.clone(), Arc::new(profile));
    }
    Ok(profiles)
}

/// How a `[[job]]` table's `count` spreads its jobs: how many, and the time between two
/// arrivals (seconds).
struct Spacing {
    count: usize,
    every_s: f64,
}

/// The `i`-th `[[job]]` table as one job's plan (its name and arrival those of the table),
/// and how its `count` spreads it.
fn job(
    i: usize,
    table: &JobTable,
    nodes: &[NodeSpec],
    profiles: &HashMap<String, Arc<Profile>>,
    at: &Fields,
) -> Result<(JobPlan, Spacing), WorkloadError> {
    let err = |key: &str, message: String| at.err(Table::Job, i, key, message);
    let (model, profile) = model(i, table, profiles, at)?;
    let kind = match table.kind.unwrap_or(KindName::Training) {
        KindName::Training => wit::JobKind::Training,
        KindName::Inference => wit::JobKind::Inference,
    };
    let arrival_s = match &table.arrival {
        Some(text) => parse_duration_s(text).map_err(|m| err("arrival", m))?,
        None => 0.0,
    };
    let node = match &table.node {
        Some(wanted) => {
            let index = nodes.iter().position(|n| &n.name == wanted).ok_or_else(|| WorkloadError::UnknownNode {
                path: at.path.into(),
                line: at.line(Table::Job, i, "node"),
                job: table.name.clone(),
                node: wanted.clone(),
                known: nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", "),
            })?;
            Some(index as u32)
        }
        None => None,
    };
    let batch_size = match table.batch_size {
        Some(b) => whole("batch-size", b, 1).map_err(|m| err("batch-size", m))?,
        None => model.default_batch_size(),
    };
    let gpus = whole("gpus", table.gpus.unwrap_or(0), 0).map_err(|m| err("gpus", m))?;
    if gpus > MAX_JOB_GPUS {
        return Err(err("gpus", format!("{gpus} GPUs: a job asks for at most {MAX_JOB_GPUS}")));
    }
    let replicas = whole("replicas", table.replicas.unwrap_or(1), 1).map_err(|m| err("replicas", m))?;
    if replicas > MAX_JOB_GPUS {
        return Err(err("replicas", format!("{replicas} replicas: a job has at most {MAX_JOB_GPUS}")));
    }
    let max_epochs =
        table.max_epochs.map(|e| whole("max-epochs", e, 1)).transpose().map_err(|m| err("max-epochs", m))?;
    let work_scale = positive("work-scale", table.work_scale.unwrap_or(1.0)).map_err(|m| err("work-scale", m))?;
    let qoe_target =
        table.qoe_target.map(|q| positive("qoe-target", q)).transpose().map_err(|m| err("qoe-target", m))?;
    let plan = JobPlan { profile: profile.clone(), ..JobPlan::training("", model, 0.0) };
    let tiers = tiers(table, kind, &plan, &err)?;
    let (request_rate, duration_s) = service(table, kind, &err)?;
    let spacing = spacing(table, arrival_s, &err)?;
    let plan = JobPlan {
        name: table.name.clone(),
        model,
        profile,
        kind,
        arrival_s,
        node,
        batch_size,
        gpus,
        replicas,
        max_epochs,
        work_scale,
        tiers,
        qoe_target,
        request_rate,
        duration_s,
        disruptible: table.disruptible.unwrap_or(true),
        elastic: table.elastic.unwrap_or(false),
        tuned: false,
        tenant: wasmsched_core::world::DEFAULT_TENANT.to_string(),
        measured: false,
    };
    Ok((plan, spacing))
}

/// The `i`-th `[[job]]` table's model: a built-in one, or a `[[profile]]`'s (which runs on
/// cifar10's curve machinery with its own measured curve).
fn model(
    i: usize,
    table: &JobTable,
    profiles: &HashMap<String, Arc<Profile>>,
    at: &Fields,
) -> Result<(Model, Option<Arc<Profile>>), WorkloadError> {
    let profile = profiles.get(&table.model).cloned();
    let model = match (&profile, Model::parse(&table.model)) {
        (Some(_), _) => Model::Cifar10,
        (None, Some(model)) => model,
        (None, None) => {
            return Err(WorkloadError::UnknownModel {
                path: at.path.into(),
                line: at.line(Table::Job, i, "model"),
                field: "model".into(),
                found: table.model.clone(),
            });
        }
    };
    if profile.is_some() && table.batch_size.is_some() {
        let message = format!(
            "profile `{}` has one measured curve; the batch size picks a built-in model's: drop it",
            table.model
        );
        return Err(at.err(Table::Job, i, "batch-size", message));
    }
    Ok((model, profile))
}

/// A training job's TRADL tiers `[T1, T2]`, T1 easier than T2 on `plan`'s metric.
fn tiers(
    table: &JobTable,
    kind: wit::JobKind,
    plan: &JobPlan,
    err: &impl Fn(&str, String) -> WorkloadError,
) -> Result<Option<(f64, f64)>, WorkloadError> {
    match (table.tiers.as_deref(), kind) {
        (None, _) => Ok(None),
        (Some(_), wit::JobKind::Inference) => {
            Err(err("tiers", "tiers apply to training jobs: give an inference service a qoe-target".into()))
        }
        (Some(&[t1, t2]), wit::JobKind::Training) => Ok(Some(check_tiers(plan, t1, t2).map_err(|m| err("tiers", m))?)),
        (Some(other), wit::JobKind::Training) => {
            Err(err("tiers", format!("{} values: write two, [T1, T2], e.g. [0.85, 0.92]", other.len())))
        }
    }
}

/// An inference job's `request-rate` and `duration` (both required); none for a training job
/// (which may have neither).
fn service(
    table: &JobTable,
    kind: wit::JobKind,
    err: &impl Fn(&str, String) -> WorkloadError,
) -> Result<(Option<f64>, Option<f64>), WorkloadError> {
    if kind == wit::JobKind::Training {
        for (key, set) in [("request-rate", table.request_rate.is_some()), ("duration", table.duration.is_some())] {
            if set {
                return Err(err(key, format!("`{key}` is for inference jobs: drop it or add kind = \"inference\"")));
            }
        }
        return Ok((None, None));
    }
    let rate = table.request_rate.ok_or_else(|| {
        err("request-rate", "an inference job needs `request-rate`, in requests per second, e.g. 20".into())
    })?;
    let rate = positive("request-rate", rate).map_err(|m| err("request-rate", m))?;
    let text = table
        .duration
        .as_deref()
        .ok_or_else(|| err("duration", "an inference job needs `duration`, how long it serves, e.g. \"1h\"".into()))?;
    let duration = parse_duration_s(text).map_err(|m| err("duration", m))?;
    if duration <= 0.0 {
        return Err(err("duration", "an inference service must run for a positive duration, e.g. \"1h\"".into()));
    }
    Ok((Some(rate), Some(duration)))
}

/// A `[[job]]` table's `count` and `every`, its last arrival still a time.
fn spacing(
    table: &JobTable,
    arrival_s: f64,
    err: &impl Fn(&str, String) -> WorkloadError,
) -> Result<Spacing, WorkloadError> {
    let count = match table.count {
        Some(c) if c > MAX_COUNT => {
            return Err(err("count", format!("{c} is out of range: `count` is at most {MAX_COUNT} jobs a table")));
        }
        Some(c) => whole("count", c, 1).map_err(|m| err("count", m))? as usize,
        None => 1,
    };
    let every_s = match (&table.every, table.count) {
        (Some(_), None) => {
            return Err(err("every", "`every` spaces the jobs of a `count`: add `count` or drop it".into()));
        }
        (Some(text), Some(_)) => parse_duration_s(text).map_err(|m| err("every", m))?,
        (None, _) => 0.0,
    };
    if !(arrival_s + every_s * (count - 1) as f64).is_finite() {
        let message = format!("`arrival` + `every` × {} is too long: write shorter durations", count - 1);
        return Err(err("every", message));
    }
    Ok(Spacing { count, every_s })
}

/// The jobs of the `i`-th `[[job]]` table, as `plan` spaced by `spacing` (`<name>-<k>` with a
/// `count`), into `jobs`; `seen` has the table each name came from.
fn expand(
    i: usize,
    table: &JobTable,
    plan: JobPlan,
    spacing: Spacing,
    seen: &mut HashMap<String, usize>,
    jobs: &mut Vec<JobPlan>,
    at: &Fields,
) -> Result<(), WorkloadError> {
    let err = |key: &str, message: String| at.err(Table::Job, i, key, message);
    for k in 0..spacing.count {
        let name = if table.count.is_some() { format!("{}-{k}", table.name) } else { table.name.clone() };
        if name.trim().is_empty() {
            return Err(err("name", "a job needs a non-empty name".into()));
        }
        if let Some(&first) = seen.get(&name) {
            return Err(WorkloadError::DuplicateJob {
                path: at.path.into(),
                line: at.line(Table::Job, i, "name"),
                name,
                first_line: at.line(Table::Job, first, "name"),
            });
        }
        if plan.elastic && (plan.gpus == 0 || plan.kind != wit::JobKind::Training || plan.profile.is_some()) {
            return Err(err(
                "elastic",
                "an elastic job is a GPU training job of a built-in model: give it gpus, or drop elastic".into(),
            ));
        }
        let tenant = match &table.tenant {
            None => wasmsched_core::world::DEFAULT_TENANT.to_string(),
            Some(t) if wasmsched_core::tenants::valid_name(t) => t.clone(),
            Some(_) => return Err(err("tenant", format!("a tenant's name is {}", wasmsched_core::tenants::NAME_RULE))),
        };
        seen.insert(name.clone(), i);
        let arrival_s = plan.arrival_s + spacing.every_s * k as f64;
        jobs.push(JobPlan { name, arrival_s, tenant, ..plan.clone() });
    }
    Ok(())
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Checks that T1 is easier than T2 for the metric direction of `plan`'s model or profile.
fn check_tiers(plan: &JobPlan, t1: f64, t2: f64) -> Result<(f64, f64), String> {
    let (metric, direction) = plan.metric();
    let order = match wasmsched_core::declare::tier_order(direction, t1, t2) {
        Ok(()) => return Ok((t1, t2)),
        Err(order) if !t1.is_finite() || !t2.is_finite() => return Err(order.into()),
        Err(order) => order,
    };
    let curve: &Curve = &plan.curve();
    let (d1, d2) = curve.default_tiers();
    Err(format!(
        "[{t1}, {t2}] is in the wrong order: for {}'s {metric} {order}; swap them (its default tiers are [{d1:.4}, {d2:.4}])",
        plan.model_name()
    ))
}

/// `value` as a u32 of at least `min`.
fn whole(key: &str, value: i64, min: i64) -> Result<u32, String> {
    if value < min || value > i64::from(u32::MAX) {
        let floor = if min == 0 { "zero or more" } else { "at least 1" };
        return Err(format!("{value} is out of range: `{key}` must be a whole number, {floor}"));
    }
    Ok(value as u32)
}

/// `value` if it is finite and positive.
fn positive(key: &str, value: f64) -> Result<f64, String> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!("{value} is out of range: `{key}` must be a positive number"))
    }
}
