//! Which two jobs run well on one GPU (`colocate = true`): Gavel's measured pair speeds.
//!
//! Gavel's authors ran every pair of 26 single-GPU job types (7 model families at several batch
//! sizes) together on one V100 under MPS and recorded each one's speed beside the other as a
//! fraction of its speed alone (`data/gavel/v100-pairs.csv`, derived from
//! `simulation_throughputs.json` by `data/gavel/pairs.py`; Gavel, MIT). A pair's speeds add up
//! to 1.31 on average, from 0.35 to 2.0; 21 pairs ran out of memory. Like the goodput tables
//! Sia plans with, these are read as if profiling were exact.
//!
//! A job's type is its model's family (our reading, as the simulator's: cifar10 is ResNet-18,
//! imagenet ResNet-50, bert the Transformer, deepspeech2 the LM, ncf Recommendation, yolov3
//! CycleGAN) at some batch. A policy does not see the per-GPU batch a job's type was measured
//! at, so two models' speeds together are the means over their families' measured pairs.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use wasmsched_goodput::Model;

/// The measured job types and pairs.
struct Table {
    /// Each type's family and batch (0: the family's one measured batch).
    types: Vec<(String, u32)>,
    /// `(a, b)` → a's speed beside b and b's beside a, both orders; `(0, 0)`: out of memory.
    pairs: BTreeMap<(usize, usize), (f64, f64)>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    Table::parse(include_str!("../../../data/gavel/v100-pairs.csv"))
        .unwrap_or_else(|e| panic!("the embedded data/gavel/v100-pairs.csv is malformed: {e}"))
});

impl Table {
    fn parse(csv: &str) -> Result<Table, String> {
        let mut table = Table { types: Vec::new(), pairs: BTreeMap::new() };
        let index = |types: &mut Vec<(String, u32)>, family: &str, batch: &str| -> Result<usize, String> {
            let batch: u32 = batch.parse().map_err(|_| format!("a batch size {batch:?}"))?;
            Ok(types.iter().position(|(f, b)| f == family && *b == batch).unwrap_or_else(|| {
                types.push((family.to_owned(), batch));
                types.len() - 1
            }))
        };
        for line in csv.lines().filter(|l| !l.starts_with('#')).skip(1) {
            let cells: Vec<&str> = line.split(',').collect();
            let [fa, ba, fb, bb, sa, sb] = cells[..] else { return Err(format!("a row {line:?}")) };
            let a = index(&mut table.types, fa, ba)?;
            let b = index(&mut table.types, fb, bb)?;
            let speed = |s: &str| s.parse::<f64>().map_err(|_| format!("a speed {s:?}"));
            let (sa, sb) = (speed(sa)?, speed(sb)?);
            table.pairs.insert((a, b), (sa, sb));
            table.pairs.insert((b, a), (sb, sa));
        }
        Ok(table)
    }
}

/// The Gavel family a model runs as.
fn family(model: Model) -> &'static str {
    match model {
        Model::Cifar10 => "ResNet-18",
        Model::Imagenet => "ResNet-50",
        Model::Bert => "Transformer",
        Model::Deepspeech2 => "LM",
        Model::Ncf => "Recommendation",
        Model::Yolov3 => "CycleGAN",
    }
}

/// A job of `a`'s speed beside a job of `b` and `b`'s beside `a`, each a fraction of alone,
/// whatever their per-GPU batches (which a policy does not see): the means over every measured
/// pair of their families that fit in memory; None where none did.
pub fn speeds(a: Model, b: Model) -> Option<(f64, f64)> {
    let t = &*TABLE;
    let (mut sum, mut n) = ((0.0, 0.0), 0.0);
    for (&(x, y), &(sx, sy)) in &t.pairs {
        if t.types[x].0 == family(a) && t.types[y].0 == family(b) && sx > 0.0 && sy > 0.0 {
            sum = (sum.0 + sx, sum.1 + sy);
            n += 1.0;
        }
    }
    (n > 0.0).then(|| (sum.0 / n, sum.1 / n))
}

/// How many measured job types there are.
#[cfg(test)]
pub fn types() -> usize {
    TABLE.types.len()
}
