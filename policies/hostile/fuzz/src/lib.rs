//! Hostile fixture for the policy fuzzer (`tests/tests/fuzz.rs`): every decision drawn from a
//! seed. The seed first draws a temperament, how often this policy fails, hangs, floods its
//! log, how large its decisions run and which actions and targets it favours; then each call
//! draws its decision from the seed, the call's number and that temperament:
//!
//! - actions of every kind (CPU and memory limits set and lifted, migrations, deliveries,
//!   stops, GPU shares, placements, preemptions, resizes), valid and not, on running, queued,
//!   ended and unknown jobs, nodes and GPUs that exist and that do not, numbers from zero to
//!   their type's maximum;
//! - decisions from empty to far over the host's limits, placements naming up to 200,000 node
//!   entries, reasons why jobs wait by the thousand and up to 64 KiB long;
//! - its own error, a panic, a call that never returns, or memory past any cap, on some calls;
//! - log lines in bursts of up to 4,000, up to 8 KiB each, at every level;
//! - any `next-call-ms`, zero and `u64::MAX` among them.
//!
//! The same seed and the same snapshots give the same decisions: a failing seed replays.
//!
//! Config: `seed` (required, any u64).

use std::hint::black_box;

use serde::Deserialize;
use wasmsched_sdk::log::{self, Level};
use wasmsched_sdk::prelude::*;

/// The fixture's config.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// Where every draw starts.
    pub seed: u64,
}

/// SplitMix64: a small generator whose every seed, zero included, gives a full stream.
#[derive(Clone, Copy, Debug)]
pub struct Draw(u64);

impl Draw {
    /// The stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Draw(seed)
    }

    /// The next 64 bits.
    pub fn bits(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.bits() % n }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.bits() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }

    /// One of `items`.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    /// An index into `weights`, each drawn in proportion to its weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut at = self.below(total.max(1));
        for (i, &w) in weights.iter().enumerate() {
            if at < u64::from(w) {
                return i;
            }
            at -= u64::from(w);
        }
        0
    }

    /// A number from zero to `max`: often an edge (0, 1, `max`), else anywhere below `max`
    /// or near `typical`.
    pub fn number(&mut self, typical: u64, max: u64) -> u64 {
        match self.below(6) {
            0 => self.pick(&[0, 1, max, max - 1]),
            1 => self.below(max),
            _ => self.below(typical.saturating_mul(2).max(1)),
        }
    }
}

/// The kinds of action, in the order of [`Temperament::kinds`].
const KINDS: usize = 11;

/// How one seed's policy behaves, drawn once from the seed.
#[derive(Clone, Debug)]
pub struct Temperament {
    /// A calm one rarely fails, mostly names jobs that exist, and keeps its decisions within
    /// the host's limits.
    pub calm: bool,
    /// Chance a call also starts every queued job that fits, first fit, as a real policy does
    /// (always, for a calm one).
    pub places: f64,
    /// Chance a call answers with its own error.
    pub fails: f64,
    /// Chance a call panics.
    pub traps: f64,
    /// Chance a call never returns.
    pub hangs: f64,
    /// Chance a call allocates past any memory cap.
    pub hogs: f64,
    /// Chance a call logs a burst.
    pub logs: f64,
    /// A burst's most lines.
    pub log_lines: u64,
    /// A burst's longest line, in bytes.
    pub log_bytes: u64,
    /// The most actions a call returns.
    pub most_actions: u64,
    /// Chance a placement or resize names more node entries than a few (past the cluster's
    /// size, which refuses the whole decision), up to 200,000.
    pub entries: f64,
    /// Weights of set-cpu, lift-cpu, set-memory, migrate, deliver, stop, set-gpu-share, place,
    /// preempt, resize and place-valid (a placement first fit on free GPUs).
    pub kinds: [u32; KINDS],
    /// Weights of the targets: a running job, a queued one, an ended one, an unknown one.
    pub targets: [u32; 4],
    /// Chance a call says why jobs wait.
    pub pending: f64,
    /// The most reasons a call gives.
    pub most_pending: u64,
}

impl Temperament {
    /// The temperament of `seed`.
    pub fn of(seed: u64) -> Self {
        let mut d = Draw::new(seed ^ 0x7e3a_c0de);
        // Two seeds in five are calm (they rarely fail, and mostly name jobs that exist), two
        // restless, one hostile: a policy that fails on most calls is benched within a minute,
        // and only a calm one lives long enough to reach the host's later paths.
        let class = d.below(5);
        let calm = class < 2;
        let chances: &[f64] = match class {
            0 | 1 => &[0.0, 0.0, 0.0, 0.002],
            2 | 3 => &[0.0, 0.0, 0.01, 0.05, 0.2],
            _ => &[0.0, 0.05, 0.2, 0.5, 1.0],
        };
        let chance = |d: &mut Draw| d.pick(chances);
        let mut kinds = [0; KINDS];
        for k in &mut kinds {
            *k = d.pick(&[0, 0, 1, 2, 5, 20]);
        }
        if calm {
            // A calm policy starts jobs, as a real one does, among whatever else it does.
            kinds[KINDS - 1] = kinds[KINDS - 1].max(5);
        }
        let sizes: &[u64] = match calm {
            true => &[0, 1, 4, 16, 64],
            false => &[0, 1, 4, 16, 64, 1_000, 20_000],
        };
        let mut targets = [0; 4];
        for (i, t) in targets.iter_mut().enumerate() {
            *t = match (calm, i) {
                (true, 2 | 3) => d.pick(&[0, 0, 1]),
                _ => d.pick(&[0, 1, 3, 10]),
            };
        }
        Temperament {
            calm,
            places: if calm { 1.0 } else { d.pick(&[0.0, 0.3, 0.8, 0.95]) },
            fails: chance(&mut d),
            traps: chance(&mut d),
            hangs: chance(&mut d) / 4.0,
            hogs: chance(&mut d) / 4.0,
            logs: d.pick(&[0.0, 0.01, 0.2, 1.0]),
            log_lines: d.pick(&[1, 10, 100, 4_000]),
            log_bytes: d.pick(&[10, 200, 4_096, 8_192]),
            most_actions: d.pick(sizes),
            entries: match calm {
                true => 0.0,
                false => d.pick(&[0.0, 0.01, 0.1]),
            },
            kinds,
            targets,
            pending: d.pick(&[0.0, 0.01, 0.2, 1.0]),
            most_pending: d.pick(&[1, 10, 1_000, 50_000]),
        }
    }
}

/// The fixture.
pub struct Fuzz {
    seed: u64,
    temperament: Temperament,
    /// Calls to `decide` on this instance.
    calls: u64,
    /// Jobs seen in earlier calls, to name again once they ended.
    seen: Vec<JobId>,
}

impl Policy for Fuzz {
    type Config = Config;

    const PLACES: bool = true;

    fn new(config: Config) -> Result<Self, PolicyError> {
        Ok(Fuzz { seed: config.seed, temperament: Temperament::of(config.seed), calls: 0, seen: Vec::new() })
    }

    fn decide(&mut self, s: &Snapshot) -> Result<Decision, PolicyError> {
        self.calls += 1;
        let t = &self.temperament;
        let mut d = Draw::new(self.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ self.calls);
        if d.chance(t.logs) {
            burst(&mut d, t.log_lines, t.log_bytes);
        }
        if d.chance(t.fails) {
            return Err(PolicyError::Failed(format!("fuzz seed {}: call {} fails", self.seed, self.calls)));
        }
        if d.chance(t.traps) {
            panic!("fuzz seed {}: call {} panics", self.seed, self.calls);
        }
        if d.chance(t.hangs) {
            spin_forever();
        }
        if d.chance(t.hogs) {
            let mut kept = Vec::new();
            loop {
                kept.push(black_box(vec![1u8; 1 << 20]));
            }
        }
        let mut jobs = Targets::of(s, &self.seen);
        let mut decision = Decision::new();
        let count = d.below(t.most_actions + 1);
        for _ in 0..count {
            let kind = d.weighted(&t.kinds);
            let Some(job) = jobs.pick(&mut d, &t.targets) else { continue };
            if let Some(action) = action(&mut d, s, &mut jobs, job, kind, t.entries) {
                decision.push(action.because(format!("fuzz {kind}")));
            }
        }
        if d.chance(t.places) {
            // First fit over what the snapshot shows free: what this call did before may have
            // taken some of it, and then the host refuses the placement.
            let mut free = sched::FreeGpus::up(s);
            for job in s.queue().filter(|j| jobs.queued.contains(&j.id())) {
                if let Some(p) = free.fit_job(&job) {
                    decision.push(p.action(job.id()).because("fuzz: first fit"));
                }
            }
        }
        if d.chance(t.pending) {
            for _ in 0..d.below(t.most_pending + 1) {
                let Some(job) = jobs.pick(&mut d, &t.targets) else { break };
                let len = d.pick(&[0, 8, 200, 64 << 10]) as usize;
                decision.pending(job, reason(&mut d, len));
            }
        }
        if d.chance(0.2) {
            let ms = d.number(30_000, u64::MAX);
            decision.call_again_in(Seconds(ms as f64 / 1000.0));
        }
        let new: Vec<JobId> = s.jobs().chain(s.queue()).map(|j| j.id()).filter(|id| !self.seen.contains(id)).collect();
        self.seen.extend(new);
        if self.seen.len() > 4_096 {
            self.seen.drain(..2_048);
        }
        Ok(decision)
    }
}

/// The jobs a call may name, by kind of target.
struct Targets {
    running: Vec<JobId>,
    queued: Vec<JobId>,
    ended: Vec<JobId>,
    /// One past the largest handle seen.
    next: u32,
}

impl Targets {
    fn of(s: &Snapshot, seen: &[JobId]) -> Self {
        let running: Vec<JobId> = s.jobs().map(|j| j.id()).collect();
        let queued: Vec<JobId> = s.queue().map(|j| j.id()).collect();
        let ended = seen.iter().copied().filter(|id| !running.contains(id) && !queued.contains(id)).collect();
        let next = running.iter().chain(&queued).chain(seen).map(|id| id.0 + 1).max().unwrap_or(0);
        Targets { running, queued, ended, next }
    }

    /// A job of a kind drawn by `weights` (running, queued, ended, unknown); None when the
    /// kind drawn has none.
    fn pick(&self, d: &mut Draw, weights: &[u32; 4]) -> Option<JobId> {
        let from = |d: &mut Draw, v: &[JobId]| (!v.is_empty()).then(|| v[d.below(v.len() as u64) as usize]);
        match d.weighted(weights) {
            0 => from(d, &self.running),
            1 => from(d, &self.queued),
            2 => from(d, &self.ended),
            _ => Some(JobId(match d.below(3) {
                0 => u32::MAX,
                1 => self.next + d.below(100) as u32,
                _ => d.bits() as u32,
            })),
        }
    }
}

/// One action of `kind` ([`Temperament::kinds`]) on `job`.
fn action(d: &mut Draw, s: &Snapshot, jobs: &mut Targets, job: JobId, kind: usize, flood: f64) -> Option<Action> {
    let nodes = s.nodes().len() as u64;
    let node = |d: &mut Draw| NodeId(d.number(nodes, u64::from(u32::MAX)) as u32);
    let cpu = s.nodes().map(|n| n.cpu().0).max().unwrap_or(1_000);
    let memory = s.nodes().map(|n| n.memory().0).max().unwrap_or(1 << 30);
    Some(match kind {
        0 => Action::set_cpu(job, Millicores(d.number(cpu, u64::MAX))),
        1 => Action::lift_cpu(job),
        2 => Action::set_memory(job, Bytes(d.number(memory, u64::MAX))),
        3 => Action::migrate(job, node(d)),
        4 => Action::deliver(job),
        5 => Action::stop(job),
        6 => Action::set_gpu_share(job, d.number(4, u64::from(u32::MAX)) as u32, d.number(50, 255) as u8),
        7 => Action::place_on(job, &entries(d, nodes, flood), d.chance(0.3)),
        8 => Action::preempt(job),
        9 => {
            let batch = d.chance(0.5).then(|| d.number(256, u64::from(u32::MAX)) as u32);
            Action::resize(job, &entries(d, nodes, flood), batch)
        }
        _ => return place_valid(d, s, jobs),
    })
}

/// Where a placement or resize goes: mostly one node, or a few up to the cluster's size, with
/// GPU indices in range or past it, now and then none, and with chance `flood` a flood of
/// entries.
fn entries(d: &mut Draw, nodes: u64, flood: f64) -> Vec<(NodeId, Vec<u32>)> {
    let count = match d.below(20) {
        _ if d.chance(flood) => d.pick(&[nodes + 1, 1_000, 200_000]),
        0 => 0,
        1 | 2 => 1 + d.below(nodes.max(1)),
        _ => 1,
    };
    (0..count)
        .map(|_| {
            let node = NodeId(d.number(nodes, u64::from(u32::MAX)) as u32);
            let gpus = (0..d.below(5)).map(|_| d.number(4, u64::from(u32::MAX)) as u32).collect();
            (node, gpus)
        })
        .collect()
}

/// A queued job placed on the first node with enough free GPUs (or any node, for a job with
/// none): valid unless another action of the call took them first. The job is then not drawn
/// again as queued.
fn place_valid(d: &mut Draw, s: &Snapshot, jobs: &mut Targets) -> Option<Action> {
    if jobs.queued.is_empty() {
        return None;
    }
    let i = d.below(jobs.queued.len() as u64) as usize;
    let job = s.job(jobs.queued[i])?;
    let want = job.gpus_asked() as usize;
    let node = s.nodes().find(|n| n.takes_work() && s.free_gpus(n.id()).len() >= want)?;
    let gpus: Vec<u32> = s.free_gpus(node.id()).into_iter().take(want).collect();
    jobs.queued.swap_remove(i);
    Some(Action::place(job.id(), node.id(), &gpus))
}

/// A reason `len` bytes long, control characters and all.
fn reason(d: &mut Draw, len: usize) -> String {
    let alphabet = ['a', 'z', ' ', '\n', '\r', '\u{1b}', '\0', 'é', '☃', '\t'];
    (0..len).map(|_| d.pick(&alphabet)).collect()
}

/// Up to `lines` log lines of up to `bytes` bytes, at levels drawn.
fn burst(d: &mut Draw, lines: u64, bytes: u64) {
    let n = 1 + d.below(lines);
    for i in 0..n {
        let level = d.pick(&[Level::Trace, Level::Debug, Level::Info, Level::Warn, Level::Error]);
        let len = d.below(bytes + 1) as usize;
        let mut line = format!("fuzz burst line {i} ");
        line.extend(std::iter::repeat_n('x', len.saturating_sub(line.len())));
        log::emit(level, &line);
    }
}

/// Never returns, and never lets the optimiser prove it.
fn spin_forever() -> ! {
    let mut x = 0u64;
    loop {
        x = black_box(x.wrapping_add(1));
    }
}

export_policy!(Fuzz);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_seed_draws_a_full_stream_and_the_same_seed_the_same_one() {
        let stream = |seed| {
            let mut d = Draw::new(seed);
            (0..4).map(|_| d.bits()).collect::<Vec<_>>()
        };
        assert_eq!(stream(0), stream(0));
        assert_ne!(stream(0), stream(1));
        assert!(stream(0).iter().all(|&x| x != 0));
    }

    #[test]
    fn temperaments_differ_between_seeds_and_cover_the_extremes() {
        let all: Vec<Temperament> = (0..200).map(Temperament::of).collect();
        assert!(all.iter().any(|t| t.fails == 1.0) && all.iter().any(|t| t.fails == 0.0));
        assert!(all.iter().all(|t| t.most_actions <= 64 || !t.calm));
        let calm = all.iter().filter(|t| t.calm).count();
        assert!((40..=120).contains(&calm), "{calm} of 200 seeds calm");
        assert!(all.iter().any(|t| t.most_actions == 20_000) && all.iter().any(|t| t.most_actions == 0));
        assert!(all.iter().any(|t| t.log_lines == 4_000 && t.logs > 0.0));
        for k in 0..KINDS {
            assert!(all.iter().any(|t| t.kinds[k] == 20), "kind {k} is some seed's favourite");
        }
    }

    #[test]
    fn weighted_draws_never_pick_a_zero_weight() {
        let mut d = Draw::new(3);
        for _ in 0..1000 {
            assert_ne!(d.weighted(&[5, 0, 1]), 1);
        }
        assert_eq!(d.weighted(&[0, 0, 0]), 0, "all zero: the first");
    }
}
