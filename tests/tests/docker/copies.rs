//! Jobs carried over from their checkpoints: a migration to another engine, a preemption back
//! into the queue and a placement again, a resize to new GPUs and batch size, and a copy a host
//! left half-made. Each is a copy of the container ([`wasmsched::backend::docker`]'s copy steps)
//! that must resume training where the original stopped.

use std::time::{Duration, Instant};

use wasmsched::backend::docker::{Docker, DockerConfig};
use wasmsched::backend::{Backend, Placer};
use wasmsched::bindings::wit;
use wasmsched::world::{JobId, NodeId, World};

use crate::engine::{self, eventually, trainer_engine_or_skip};
use crate::{action, backend, step, test_label};

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn migration_restarts_a_job_from_its_checkpoint_on_another_engine() {
    let (e, _serial) = trainer_engine_or_skip!();
    let Some(second) = engine::SecondEngine::start(e) else { return };
    let label = test_label("migrate");
    let c = e.start_trainer("migrate", &[("test", &label), ("checkpoint", "/ckpt")], CHECKPOINTED, None);
    let mut docker = Docker::new(DockerConfig {
        engines: vec![e.endpoint.clone(), second.endpoint.clone()],
        selector: format!("wasmsched.test={label}"),
        timeout: Duration::from_secs(10),
        gpus: false,
    })
    .unwrap();
    let mut world = World::new();
    let handle = eventually("three epochs on the first engine", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 300);
        let (spec, _) = world.jobs().next()?;
        (world.history(spec.handle).count() >= 3).then_some(spec.handle)
    });
    let started = Instant::now();
    let errors = docker.apply(&[action(handle, wit::ActionKind::Migrate(NodeId(1)))], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    eprintln!(
        "migration (stop, checkpoint out, image carried, create, checkpoint in, start): {:.1?}",
        started.elapsed()
    );
    assert_eq!(world.state(handle).unwrap().node, 1);
    assert_eq!(second.running().len(), 1, "the job runs on the second engine");
    assert!(e.rt.block_on(e.client.inspect_container(&c.id, None)).is_err(), "and no longer on the first");
    let (seen, last_before) = (world.history(handle).count(), world.history(handle).last().unwrap().epoch);
    let after = eventually("epochs on the second engine", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 300);
        let after: Vec<u32> = world.history(handle).skip(seen).map(|r| r.epoch).collect();
        (after.len() >= 2).then_some(after)
    });
    assert_resumed(last_before, &after);
    assert_eq!(world.jobs().map(|(s, _)| s.handle).collect::<Vec<_>>(), [handle], "one job, its handle kept");
}

/// A trainer that checkpoints every epoch to `/ckpt/model` (declared as its checkpoint folder).
const CHECKPOINTED: &[&str] =
    &["--epochs", "400", "--samples", "2000", "--threads", "1", "--checkpoint", "/ckpt/model"];

/// The epochs a copy printed, `after`, follow `last_before`, the last one read from the
/// original: it resumed from its checkpoint (the epoch under way when it was stopped may have
/// been saved and not yet read), not from scratch.
fn assert_resumed(last_before: u32, after: &[u32]) {
    assert!(
        after[0] == last_before + 1 || after[0] == last_before + 2,
        "training resumed from the checkpoint, not from scratch: epoch {last_before}, then {after:?}"
    );
}

/// Start queued job `job` on `node`, without GPUs (this engine's node has none).
fn place(job: JobId, node: u32) -> wit::Action {
    let nodes = vec![wit::NodePlacement { node: NodeId(node), gpus: Vec::new() }];
    action(job, wit::ActionKind::Place(wit::Placement { nodes, share: false }))
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn a_created_container_waits_until_placed_and_resumes_from_its_checkpoint_after_a_preemption() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("queue");
    let _sweep = e.sweep(&label);
    let c = e.create_trainer("queue", &[("test", &label), ("checkpoint", "/ckpt")], CHECKPOINTED);
    let mut docker = backend(&e.endpoint, &label);
    docker.set_placer(Placer::Policy);
    let mut world = World::new();
    for _ in 0..3 {
        step(&mut docker, &mut world, 300);
    }
    let (spec, state) = world.queue().next().expect("the created container is a queued job");
    let handle = spec.handle;
    assert_eq!(state.queued, Some(wit::WaitReason::NeverStarted));
    assert_eq!(state.since_ms, spec.arrival_ms, "it waits since it arrived: its creation");
    assert_eq!((world.job_count(), world.history(handle).count()), (0, 0));
    assert_eq!(e.labelled(&label)[0].state, "created", "a placing policy's queue is left alone");

    let placed = Instant::now();
    let errors = docker.apply(&[place(handle, 0)], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(world.state(handle).unwrap().is_running());
    let first = eventually("the first epoch after the placement", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 200);
        (world.history(handle).count() > 0).then(|| placed.elapsed())
    });
    let records = eventually("three epochs", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 300);
        let r: Vec<u32> = world.history(handle).map(|r| r.epoch).collect();
        (r.len() >= 3).then_some(r)
    });
    assert_eq!(records[..3], [1, 2, 3], "a fresh start");
    let run_before = world.state(handle).unwrap().run_ms;
    assert!(run_before > 0, "run time accrues while it runs");

    let preempting = Instant::now();
    let errors = docker.apply(&[action(handle, wit::ActionKind::Preempt)], &mut world);
    let preempt_took = preempting.elapsed();
    assert!(errors.is_empty(), "{errors:?}");
    let state = world.state(handle).unwrap();
    assert_eq!(state.queued, Some(wit::WaitReason::Preempted));
    assert_eq!(state.run_ms, run_before, "its attained service is kept");
    let listed = e.labelled(&label);
    assert_eq!(listed.len(), 1, "the original is gone, its copy waits: {listed:?}");
    assert_eq!((listed[0].state.as_str(), listed[0].name.as_str()), ("created", c.name.as_str()));
    assert_ne!(listed[0].id, c.id);
    assert_eq!(listed[0].labels.get("wasmsched.wait").map(String::as_str), Some("preempted"));
    let (seen, last_before) = (world.history(handle).count(), world.history(handle).last().unwrap().epoch);
    for _ in 0..3 {
        step(&mut docker, &mut world, 300);
    }
    assert_eq!(world.queue().map(|(s, _)| s.handle).collect::<Vec<_>>(), [handle], "it waits, its handle kept");
    assert_eq!(world.history(handle).count(), seen, "and does not run");

    // A host started now finds it waiting as preempted, with the service it had.
    let mut restarted = backend(&e.endpoint, &label);
    restarted.set_placer(Placer::Policy);
    let mut fresh = World::new();
    step(&mut restarted, &mut fresh, 300);
    let (_, again) = fresh.queue().next().expect("still queued after a host restart");
    assert_eq!((again.queued, again.run_ms), (Some(wit::WaitReason::Preempted), run_before));
    drop(restarted);

    let replacing = Instant::now();
    let errors = docker.apply(&[place(handle, 0)], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    let resumed = eventually("an epoch after the second placement", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 200);
        (world.history(handle).count() > seen).then(|| replacing.elapsed())
    });
    let after = eventually("two epochs after the second placement", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 200);
        let after: Vec<u32> = world.history(handle).skip(seen).map(|r| r.epoch).collect();
        (after.len() >= 2).then_some(after)
    });
    eprintln!(
        "place → first progress {first:.1?}; preempt (stop, checkpoint out, copy, checkpoint in) {preempt_took:.1?}; \
         place again → first progress {resumed:.1?} (epoch {last_before}, then {})",
        after[0]
    );
    assert_resumed(last_before, &after);
    assert_eq!(world.all_jobs().map(|(s, _)| s.handle).collect::<Vec<_>>(), [handle], "one job, its handle kept");
    assert_eq!(e.labelled(&label)[0].state, "running");
}

/// A resize: the container stopped, copied from its checkpoint with the batch size in force,
/// and started. This engine has no GPUs (nor the NVIDIA runtime), so the resize names none: the
/// copy's device request for exactly the resize's GPUs is checked by `copy/tests.rs`, and live
/// at the end of this test only where the engine has the NVIDIA runtime.
#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn a_resize_restarts_the_job_from_its_checkpoint_at_its_new_batch_size() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("resize");
    let _sweep = e.sweep(&label);
    let labels =
        [("test", label.as_str()), ("checkpoint", "/ckpt"), ("gpu-counts", "0,1,2"), ("batch-size", "64-1024")];
    let c = e.start_trainer("resize", &labels, CHECKPOINTED, None);
    let mut docker = backend(&e.endpoint, &label);
    let mut world = World::new();
    let handle = eventually("three epochs", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 300);
        let (spec, _) = world.jobs().next()?;
        (world.history(spec.handle).count() >= 3).then_some(spec.handle)
    });
    assert_eq!(world.state(handle).unwrap().batch_size, 64, "the least of its range until a resize sets one");
    let resize = |nodes: Vec<wit::NodePlacement>, batch_size| {
        let placement = wit::Placement { nodes, share: false };
        action(handle, wit::ActionKind::Resize(wit::Resize { placement, batch_size }))
    };

    // A container runs on one engine: a resize spread over two is refused, saying what to do.
    let spread = (0..2).map(|node| wit::NodePlacement { node: NodeId(node), gpus: Vec::new() }).collect();
    let errors = docker.apply(&[resize(spread, None)], &mut world);
    assert!(errors.len() == 1 && errors[0].reason.contains("a single node"), "{errors:?}");
    assert_eq!(e.labelled(&label)[0].id, c.id, "the container is left as it was");

    // An elastic container that declares no checkpoint would start its training over: refused,
    // and left as it was.
    let bare = e.start_trainer("resize-bare", &[("test", label.as_str()), ("gpu-counts", "0,1")], CHECKPOINTED, None);
    let bare_handle = eventually("the container without a checkpoint seen", Duration::from_secs(30), || {
        step(&mut docker, &mut world, 300);
        world.jobs().map(|(spec, _)| spec.handle).find(|&h| h != handle)
    });
    let placement = wit::Placement { nodes: vec![wit::NodePlacement::new(0, [])], share: false };
    let no_checkpoint = action(bare_handle, wit::ActionKind::Resize(wit::Resize { placement, batch_size: Some(128) }));
    let errors = docker.apply(&[no_checkpoint], &mut world);
    assert!(errors.len() == 1 && errors[0].reason.contains("declares no wasmsched.checkpoint"), "{errors:?}");
    assert!(e.labelled(&label).iter().any(|l| l.id == bare.id), "the container is left as it was");
    bare.remove();
    eventually("the container without a checkpoint gone", Duration::from_secs(30), || {
        step(&mut docker, &mut world, 300);
        (world.jobs().count() == 1).then_some(())
    });

    let started = Instant::now();
    let errors = docker.apply(&[resize(vec![wit::NodePlacement::new(0, [])], Some(256))], &mut world);
    let took = started.elapsed();
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(world.state(handle).unwrap().batch_size, 256, "the batch size in force");
    let listed = e.labelled(&label);
    assert_eq!(listed.len(), 1, "the original is gone, its copy runs: {listed:?}");
    assert_ne!(listed[0].id, c.id);
    assert_eq!((listed[0].name.as_str(), listed[0].state.as_str()), (c.name.as_str(), "running"));
    assert_eq!(listed[0].labels.get("wasmsched.batch-size-in-force").map(String::as_str), Some("256"));
    let copy = e.rt.block_on(e.client.inspect_container(&listed[0].id, None)).unwrap();
    let env = copy.config.and_then(|c| c.env).unwrap_or_default();
    assert!(env.contains(&"WASMSCHED_BATCH_SIZE=256".to_string()), "told the batch size: {env:?}");
    let (seen, last_before) = (world.history(handle).count(), world.history(handle).last().unwrap().epoch);
    let (after, first) = eventually("epochs after the resize", Duration::from_secs(60), || {
        step(&mut docker, &mut world, 200);
        let after: Vec<u32> = world.history(handle).skip(seen).map(|r| r.epoch).collect();
        (after.len() >= 2).then(|| (after, started.elapsed()))
    });
    assert_resumed(last_before, &after);
    assert_eq!(world.all_jobs().map(|(s, _)| s.handle).collect::<Vec<_>>(), [handle], "one job, its handle kept");
    eprintln!("resize (stop, checkpoint out, copy, checkpoint in, start): {took:.1?}; to its second epoch {first:.1?}");

    // A host started now reads the batch size in force from the copy's label.
    let mut fresh = World::new();
    step(&mut backend(&e.endpoint, &label), &mut fresh, 300);
    assert_eq!(fresh.jobs().next().map(|(_, s)| s.batch_size), Some(256), "after a host restart");

    let runtimes = e.rt.block_on(e.client.info()).ok().and_then(|i| i.runtimes).unwrap_or_default();
    if !runtimes.contains_key("nvidia") {
        eprintln!(
            "SKIPPED (a resize onto GPUs, live): this engine has no NVIDIA runtime ({:?}), so no container can be \
             given a GPU here; copy/tests.rs checks the copy's device request",
            runtimes.keys().collect::<Vec<_>>()
        );
        return;
    }
    let errors = docker.apply(&[resize(vec![wit::NodePlacement::new(0, [0])], None)], &mut world);
    assert!(errors.is_empty(), "{errors:?}");
    let listed = e.labelled(&label);
    let copy = e.rt.block_on(e.client.inspect_container(&listed[0].id, None)).unwrap();
    let requests = copy.host_config.and_then(|h| h.device_requests).unwrap_or_default();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].device_ids.as_deref(), Some(&["0".to_string()][..]), "exactly GPU 0");
    let state = world.state(handle).unwrap();
    assert_eq!((state.gpus.len(), state.batch_size), (1, 256), "{state:?}");
}

#[test]
#[cfg_attr(
    not(live_docker),
    ignore = "needs a Docker Engine: `.ci/docker-engine start`, export WASMSCHED_DOCKER=<its endpoint>"
)]
fn a_copy_a_host_left_half_made_is_finished_by_the_next_one() {
    let (e, _serial) = trainer_engine_or_skip!();
    let label = test_label("half-made");
    let _sweep = e.sweep(&label);
    let original = e.create_trainer("half-made", &[("test", &label), ("checkpoint", "/ckpt")], CHECKPOINTED);
    // A checkpoint in the original, and a copy made of it but nothing copied in yet: a host
    // that stopped half-way through a placement or preemption leaves this.
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(5);
    header.set_mode(0o644);
    tar.append_data(&mut header, "ckpt/model", &b"epoch"[..]).unwrap();
    let options = bollard::query_parameters::UploadToContainerOptions { path: "/".into(), ..Default::default() };
    let body = bollard::body_full(tar.into_inner().unwrap().into());
    e.rt.block_on(e.client.upload_to_container(&original.id, Some(options), body)).unwrap();
    let labels = [("test", label.as_str()), ("checkpoint", "/ckpt"), ("replaces", original.id.as_str())];
    let copy = e.create_trainer("half-made-copy", &labels, CHECKPOINTED);

    let mut docker = backend(&e.endpoint, &label);
    docker.set_placer(Placer::Policy);
    let mut world = World::new();
    step(&mut docker, &mut world, 300);
    assert_eq!((world.queue_len(), world.job_count()), (1, 0), "one job, not two");
    let listed = e.labelled(&label);
    assert_eq!(listed.len(), 1, "the original is removed: {listed:?}");
    assert_eq!((listed[0].id.as_str(), listed[0].name.as_str()), (copy.id.as_str(), original.name.as_str()));
    let options = bollard::query_parameters::DownloadFromContainerOptions { path: "/ckpt/model".into() };
    let carried = e.rt.block_on(async {
        let mut stream = e.client.download_from_container(&copy.id, Some(options));
        let mut all = Vec::new();
        while let Some(chunk) = futures_util::StreamExt::next(&mut stream).await {
            all.extend_from_slice(&chunk.expect("the checkpoint is in the copy"));
        }
        all
    });
    assert!(carried.windows(5).any(|w| w == b"epoch"), "the checkpoint was carried over");
}
