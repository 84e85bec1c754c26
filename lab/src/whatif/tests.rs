use wasmsched_core::world::{Cursor, GpuSlot, NodeId, sample};

use super::*;

fn stint(first_reading_ms: u64) -> Stint {
    Stint {
        from_ms: 0,
        to_ms: first_reading_ms,
        node: NodeId(0),
        gpu_nodes: Vec::new(),
        cpu_core_ms: 0.0,
        cpu_millicores: 0,
        unread_ms: 0,
        open: true,
    }
}

#[test]
fn a_first_runs_readings_before_its_first_rate_take_that_rate_and_a_later_runs_do_not() {
    let mut first = stint(0);
    first.read_cpu(0, 1000, true);
    first.read_cpu(0, 2000, true);
    first.read_cpu(1500, 3000, true);
    assert_eq!(first.cpu_core_ms, 1.5 * 3000.0, "the container was starting: its first rate stands for it");
    // Zeros between readings are a pause: not charged, not carried.
    first.read_cpu(0, 4000, true);
    first.read_cpu(1000, 5000, true);
    assert_eq!(first.cpu_core_ms, 1.5 * 3000.0 + 1000.0);
    assert_eq!((first.cpu_millicores, first.unread_ms), (1000, 0));

    let mut later = stint(0);
    later.read_cpu(0, 1000, false);
    later.read_cpu(2000, 2000, false);
    assert_eq!(later.cpu_core_ms, 2000.0, "a restart's pause is not work");
}

/// A node of `cores` and no GPU.
fn node(cores: u64) -> wit::Node {
    wit::Node {
        name: "n".into(),
        cpu_millicores: cores * 1000,
        memory_bytes: 1 << 34,
        gpu_memory_bytes: Vec::new(),
        gpu_type: String::new(),
        labels: Vec::new(),
        domains: Vec::new(),
    }
}

/// One tick of a recording cut from `world` for `cursor`, with the last records of the jobs
/// that left since the world last forgot them.
fn tick(world: &mut World, cursor: &mut Cursor, number: u64) -> RecordedTick {
    let departed = world
        .departed_unsent(cursor)
        .into_iter()
        .map(|(job, r)| wasmsched_core::recording::DepartedRecord {
            job,
            time_ms: r.time_ms,
            epoch: r.epoch,
            values: r.values.iter().map(|v| Some(*v)).collect(),
        })
        .collect();
    let snapshot = world.snapshot_for(cursor);
    world.forget_departed();
    RecordedTick { tick: number, snapshot, decision: None, arms: Vec::new(), departed }
}

#[test]
fn a_cpu_job_is_its_own_profile_from_its_readings_its_epochs_and_its_exit() {
    let mut world = World::new();
    let mut cursor = Cursor::fresh();
    world.add_node(node(4));
    let mut spec = sample::job_spec(0);
    (spec.name, spec.model, spec.arrival_ms, spec.gpus, spec.max_epochs) = ("job".into(), "trainer".into(), 0, 0, None);
    let handle = world.enqueue_job(spec);
    let mut ticks = vec![tick(&mut world, &mut cursor, 1)];
    // Placed at 0 s: its engine has no rate at 1 s, then 2 cores; an epoch every 2 s from 3 s
    // (a second of start-up); its last epoch at 11 s, the tick its container exits (no rate),
    // and gone at 12 s.
    world.start_job(handle, NodeId(0), Vec::<GpuSlot>::new());
    for t in 1..=12u64 {
        world.set_time_ms(t * 1000);
        if t == 12 {
            world.remove_job(handle);
        } else {
            let exiting = t == 11;
            world.state_mut(handle).unwrap().cpu_used_millicores = if t == 1 || exiting { 0 } else { 2000 };
            if t >= 3 && t % 2 == 1 {
                world.record_at(handle, t * 1000, ((t - 1) / 2) as u32, vec![0.1 * t as f64]);
            }
        }
        ticks.push(tick(&mut world, &mut cursor, t + 1));
    }
    let recorded = Recorded::of("r", 1000, BudgetConfig::off(), &ticks).unwrap();
    let trail = &recorded.jobs[0];
    assert_eq!((trail.epochs_done(), trail.left_ms, trail.jct_s()), (5, Some(12_000), Some(11.0)));
    assert_eq!(trail.stints.len(), 1);
    // 0–1 s at the first rate (2 cores), 1–10 s read, 10–11 s at the last rate: 22 core-s.
    assert!((trail.stints[0].cpu_core_ms - 22_000.0).abs() < 1e-6, "{:?}", trail.stints[0]);
    let (scenario, replay) = recorded.scenario().unwrap();
    let plan = &scenario.workload.jobs[0];
    let Some(Speed::Profile { core_s_per_epoch, max_cores, startup_s }) = replay.jobs[0].speed else {
        panic!("{:?}", replay.jobs[0])
    };
    assert!((core_s_per_epoch - 4.4).abs() < 1e-9 && max_cores == 2.0 && startup_s == 1.0, "{:?}", replay.jobs[0]);
    assert_eq!(plan.max_epochs, Some(5), "it ran what it ran");
    assert!(plan.measured && plan.profile.is_some());
    assert_eq!(plan.curve().epochs(), 5);
}

#[test]
fn a_recording_with_no_node_or_no_job_is_refused_with_what_to_record() {
    let mut world = World::new();
    let mut cursor = Cursor::fresh();
    let empty = [tick(&mut world, &mut cursor, 1)];
    let err = Recorded::of("r", 1000, BudgetConfig::off(), &empty).unwrap_err().to_string();
    assert!(err.contains("shows no node"), "{err}");
    world.add_node(node(2));
    let idle = [tick(&mut world, &mut cursor, 2)];
    let err = Recorded::of("r", 1000, BudgetConfig::off(), &idle).unwrap_err().to_string();
    assert!(err.contains("shows no job"), "{err}");
}

#[test]
fn a_metric_missing_at_an_epoch_is_the_one_before_it_and_the_last_stands_beyond() {
    let trail = Trail {
        spec: sample::job_spec(0),
        stints: Vec::new(),
        epochs: vec![(1, 2, 0.5), (2, 3, f64::NAN), (3, 4, 0.7)],
        left_ms: None,
        batch_size: 0,
        peak: (0, 0),
    };
    assert_eq!(fit::curve(&trail, 6), [0.5, 0.5, 0.5, 0.7, 0.7, 0.7]);
}

#[test]
fn a_replays_clock_starts_at_the_first_arrival_and_takes_a_year_of_arrivals_at_most() {
    let day_ms = 86_400_000u64;
    let recorded = |arrivals: &[u64]| {
        let mut world = World::new();
        let mut cursor = Cursor::fresh();
        world.add_node(node(4));
        let mut ticks = Vec::new();
        for (k, &arrival) in arrivals.iter().enumerate() {
            world.set_time_ms(arrival);
            let mut spec = sample::job_spec(0);
            (spec.name, spec.model, spec.arrival_ms, spec.gpus) = (format!("j{k}"), "ncf".into(), arrival, 0);
            let handle = world.enqueue_job(spec);
            world.start_job(handle, NodeId(0), Vec::new());
            world.record_at(handle, arrival + 5_000, 1, vec![0.5]);
            ticks.push(tick(&mut world, &mut cursor, k as u64 + 1));
        }
        Recorded::of("r", 60_000, BudgetConfig::off(), &ticks).unwrap()
    };
    // A host up for ten days before its jobs came: the replay starts with them, on the tick.
    let (scenario, _) = recorded(&[10 * day_ms + 90_000, 10 * day_ms + 150_000]).scenario().unwrap();
    let arrivals: Vec<f64> = scenario.workload.jobs.iter().map(|j| j.arrival_s).collect();
    assert_eq!(arrivals, [30.0, 90.0]);
    let err = recorded(&[0, 400 * day_ms]).scenario().unwrap_err().to_string();
    assert!(err.contains("arrive over 400 days") && err.contains("cut the recording"), "{err}");
}
