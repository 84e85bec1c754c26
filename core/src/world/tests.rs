use super::*;

fn spec(name: &str) -> wit::JobSpec {
    let mut s = sample::job_spec(0);
    s.name = name.into();
    s
}

#[test]
fn a_migrated_job_holds_as_many_gpus_on_its_new_node_the_lowest_free_there() {
    let mut t = World::new();
    for n in 0..2 {
        t.add_node(wit::Node { name: format!("n{n}"), ..sample::gpu_cluster(1, 4, 0, 0).nodes()[0].clone() });
    }
    let hold = |t: &mut World, job, node: u32, gpus: &[u32]| {
        t.state_mut(job).unwrap().gpus = gpus.iter().map(|&index| GpuSlot { node: NodeId(node), index }).collect();
    };
    let mover = t.add_job(spec("mover"), NodeId(0));
    hold(&mut t, mover, 0, &[0, 1]);
    let there = t.add_job(spec("there"), NodeId(1));
    hold(&mut t, there, 1, &[0, 2]);
    assert_eq!(t.gpus_after_migration(mover, NodeId(1)), [1, 3], "as many as it holds, around the ones held there");
    let cpu = t.add_job(spec("cpu"), NodeId(0));
    assert!(t.gpus_after_migration(cpu, NodeId(1)).is_empty(), "a job without GPUs takes none");
    hold(&mut t, there, 1, &[0, 1, 2]);
    assert_eq!(t.gpus_after_migration(mover, NodeId(1)), [3], "fewer where fewer are free");
}

#[test]
fn a_fresh_cursor_gets_a_full_resync_with_history() {
    let mut t = World::new();
    t.add_node(sample::world(1, 0, 0).nodes()[0].clone());
    let a = t.add_job(spec("a"), NodeId(0));
    t.record(a, 1, vec![0.5]);
    t.record(a, 2, vec![0.6]);
    let s = t.snapshot_for(&mut Cursor::fresh());
    assert!(s.resync);
    assert_eq!(s.added.len(), 1);
    assert_eq!(s.progress.epoch, [1, 2]);
    assert_eq!(s.progress.values, [0.5, 0.6]);
}

#[test]
fn names_cross_once_and_progress_only_when_new() {
    let mut t = sample::world(1, 3, 2);
    let mut c = Cursor::fresh();
    let first = t.snapshot_for(&mut c);
    assert_eq!((first.added.len(), first.progress.job.len()), (3, 6));
    let second = t.snapshot_for(&mut c);
    assert!(!second.resync);
    assert!(second.added.is_empty() && second.progress.job.is_empty());
    assert_eq!(second.jobs.handle.len(), 3);
    t.record(JobId(1), 3, vec![0.7]);
    let third = t.snapshot_for(&mut c);
    assert_eq!(
        (third.progress.job.as_slice(), third.progress.values.as_slice()),
        ([JobId(1)].as_slice(), [0.7].as_slice())
    );
}

#[test]
fn jobs_that_came_and_went_between_calls_are_added_and_removed() {
    let mut t = sample::world(1, 3, 0);
    let mut c = Cursor::fresh();
    t.snapshot_for(&mut c);
    assert!(t.remove_job(JobId(1)));
    let d = t.add_job(spec("d"), NodeId(0));
    let s = t.snapshot_for(&mut c);
    assert_eq!(s.removed, [1]);
    assert_eq!(s.added.iter().map(|a| a.handle).collect::<Vec<_>>(), [d]);
    assert_eq!(s.jobs.handle, [JobId(0), JobId(2), d]);
}

#[test]
fn nodes_cross_when_they_change_and_gpu_use_every_tick() {
    let mut t = sample::world(2, 1, 0);
    let mut c = Cursor::fresh();
    let first = t.snapshot_for(&mut c);
    assert_eq!(first.nodes.as_ref().map(Vec::len), Some(2));
    assert_eq!(first.gpus.utilisation_percent, [40.0, 40.0]);
    assert!(t.set_gpu_use(NodeId(1), 0, 75.0, 1 << 30));
    assert!(!t.set_gpu_use(NodeId(1), 1, 75.0, 1 << 30), "node 1 has one GPU");
    assert!(!t.set_gpu_use(NodeId(2), 0, 75.0, 1 << 30), "there is no node 2");
    let second = t.snapshot_for(&mut c);
    assert_eq!(second.nodes, None, "nodes unchanged: not resent");
    assert_eq!(second.gpus.utilisation_percent, [40.0, 75.0]);
    t.add_node(wit::Node {
        name: "n2".into(),
        cpu_millicores: 1000,
        memory_bytes: 1 << 30,
        gpu_memory_bytes: vec![],
        gpu_type: String::new(),
        labels: Vec::new(),
        domains: Vec::new(),
    });
    assert_eq!(t.snapshot_for(&mut c).nodes.map(|n| n.len()), Some(3));
    assert_eq!(t.snapshot_for(&mut Cursor::fresh()).nodes.map(|n| n.len()), Some(3), "a resync resends them");
}

#[test]
fn a_node_whose_capacity_becomes_known_is_resent_and_other_gpus_keep_their_use() {
    let mut t = sample::world(2, 1, 0);
    let mut c = Cursor::fresh();
    t.snapshot_for(&mut c);
    assert!(t.set_gpu_use(NodeId(1), 0, 75.0, 1 << 30));
    let same = t.nodes()[0].clone();
    assert!(t.set_node(NodeId(0), same));
    assert_eq!(t.snapshot_for(&mut c).nodes, None, "an unchanged node is not resent");
    let wider = wit::Node { gpu_memory_bytes: vec![8 << 30; 2], ..t.nodes()[0].clone() };
    assert!(t.set_node(NodeId(0), wider));
    let s = t.snapshot_for(&mut c);
    assert_eq!(s.nodes.map(|n| n[0].gpu_memory_bytes.len()), Some(2));
    assert_eq!(s.gpus.utilisation_percent, [0.0, 0.0, 75.0], "node 0's new GPUs idle, node 1's kept");
    assert!(!t.set_node(NodeId(5), t.nodes()[0].clone()), "there is no node 5");
}

#[test]
fn history_is_bounded_per_job() {
    let mut t = sample::world(1, 1, 0);
    for e in 0..(HISTORY_KEPT as u32 + 10) {
        t.record(JobId(0), e, vec![0.1]);
    }
    assert_eq!(t.history(JobId(0)).count(), HISTORY_KEPT);
    assert_eq!(t.history(JobId(0)).next().unwrap().epoch, 10);
}

#[test]
fn an_arms_view_hides_the_other_arms_queue_and_keeps_every_running_job() {
    let mut t = sample::with_queue(2, 2, 3, 1);
    let names: Vec<String> = t.all_jobs().map(|(s, _)| s.name.clone()).collect();
    let hidden = t.queue().next().map(|(s, _)| s.name.clone()).unwrap();
    let view = t.without_queued(|s| s.name == hidden);
    assert_eq!((view.job_count(), view.queue_len()), (2, 2));
    assert!(view.all_jobs().all(|(s, _)| s.name != hidden));
    assert_eq!(view.all_jobs().count() + 1, names.len());
    // A running job is never hidden, whatever the picker says.
    assert_eq!(t.without_queued(|_| true).job_count(), 2);
    assert_eq!(t.without_queued(|_| true).queue_len(), 0);
    // A cursor fed the view sends the hidden job when it shows up.
    let mut c = Cursor::fresh();
    assert_eq!(view.snapshot_for(&mut c).added.len(), 4);
    t.set_time_ms(1);
    assert_eq!(t.snapshot_for(&mut c).added.iter().map(|s| s.name.clone()).collect::<Vec<_>>(), [hidden]);
}
