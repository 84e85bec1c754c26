//! The copy's create body, against a recorded `docker inspect` of a created container
//! (`docker create --cpus 1.5 --memory 512m --gpus '"device=0,1"' -e NVIDIA_VISIBLE_DEVICES=all
//! --network none --init` with the managed, gpus and checkpoint labels).

use std::collections::HashMap;

use bollard::models::HostConfig;

use super::*;

const CREATED: &str = include_str!("inspect-created.json");

fn recorded() -> ContainerInspectResponse {
    serde_json::from_str(CREATED).expect("a recorded docker inspect")
}

fn label<'a>(body: &'a ContainerCreateBody, key: &str) -> Option<&'a str> {
    body.labels.as_ref()?.get(key).map(String::as_str)
}

fn visible(body: &ContainerCreateBody) -> Vec<&str> {
    body.env.iter().flatten().filter(|v| v.starts_with("NVIDIA_VISIBLE_DEVICES=")).map(String::as_str).collect()
}

#[test]
fn a_placed_copy_keeps_the_config_and_gets_exactly_the_chosen_gpus() {
    let info = recorded();
    let body = copy_body(&info, &Changes { gpus: Some(vec![3, 5]), ..Changes::default() });
    assert_eq!(body.image.as_deref(), Some("wasmsched-fixture:1"));
    assert_eq!(
        body.cmd.as_deref(),
        Some(&["/bin/sh".to_string(), "-c".into(), "train --checkpoint /ckpt/model".into()][..])
    );
    let hc = body.host_config.as_ref().unwrap();
    assert_eq!((hc.nano_cpus, hc.memory, hc.init), (Some(1_500_000_000), Some(512 << 20), Some(true)));
    assert_eq!(hc.network_mode.as_deref(), Some("none"));
    let requests = hc.device_requests.as_deref().unwrap();
    assert_eq!(requests.len(), 1, "the original GPU request is replaced, not added to: {requests:?}");
    assert_eq!(requests[0].driver.as_deref(), Some("nvidia"));
    assert_eq!(requests[0].device_ids.as_deref(), Some(&["3".to_string(), "5".into()][..]));
    assert_eq!(requests[0].count, None, "the NVIDIA driver refuses a count beside device ids");
    assert_eq!(requests[0].capabilities, Some(vec![vec!["gpu".to_string()]]));
    assert_eq!(visible(&body), ["NVIDIA_VISIBLE_DEVICES=3,5"], "the image's `all` would expose every GPU");
    assert!(body.env.as_ref().unwrap().contains(&"EPOCHS=30".to_string()));
    assert_eq!(label(&body, REPLACES), info.id.as_deref());
    assert_eq!(label(&body, ARRIVED), Some("1795447854898"), "the original's creation, Unix ms");
    assert_eq!(label(&body, "wasmsched.checkpoint"), Some("/ckpt"));
    assert_eq!(label(&body, WAIT), None);
    assert_eq!(body.hostname, None, "Docker's hostname was the original's short id");
}

#[test]
fn a_preempted_copy_waits_without_gpus_and_carries_its_service_and_arrival() {
    let mut info = recorded();
    let labels = info.config.as_mut().unwrap().labels.as_mut().unwrap();
    labels.insert(ARRIVED.into(), "1700000000000".into());
    let changes =
        Changes { gpus: Some(Vec::new()), preempted: true, service: Some((61_000, 122_000)), ..Changes::default() };
    let body = copy_body(&info, &changes);
    assert_eq!(body.host_config.as_ref().unwrap().device_requests, None);
    assert!(visible(&body).is_empty());
    assert_eq!(label(&body, WAIT), Some("preempted"));
    assert_eq!((label(&body, RUN_MS), label(&body, GPU_MS)), (Some("61000"), Some("122000")));
    assert_eq!(label(&body, ARRIVED), Some("1700000000000"), "the first arrival is kept through copies");
}

#[test]
fn a_resized_copy_gets_exactly_its_new_gpus_its_new_size_and_the_batch_size_in_force() {
    let mut info = recorded();
    let config = info.config.as_mut().unwrap();
    config.env.as_mut().unwrap().push(format!("{BATCH_SIZE_ENV}=64"));
    config.labels.as_mut().unwrap().insert(BATCH_IN_FORCE.into(), "64".into());
    let changes =
        Changes { gpus: Some(vec![0, 1, 2, 3]), asks_gpus: Some(4), batch_size: Some(512), ..Changes::default() };
    let body = copy_body(&info, &changes);
    let requests = body.host_config.as_ref().unwrap().device_requests.clone().unwrap();
    assert_eq!(requests.len(), 1, "one GPU request: {requests:?}");
    assert_eq!(requests[0].device_ids.as_deref(), Some(&["0", "1", "2", "3"].map(String::from)[..]));
    assert_eq!(gpus_of(body.host_config.as_ref(), 8), [0, 1, 2, 3], "read back as the job's GPUs");
    assert_eq!(visible(&body), ["NVIDIA_VISIBLE_DEVICES=0,1,2,3"]);
    let batch: Vec<&String> = body.env.iter().flatten().filter(|v| v.starts_with(BATCH_SIZE_ENV)).collect();
    assert_eq!(batch, [&format!("{BATCH_SIZE_ENV}=512")], "the new batch size replaces the old");
    assert_eq!(label(&body, BATCH_IN_FORCE), Some("512"));
    let labels: HashMap<String, String> = body.labels.clone().unwrap().into_iter().collect();
    assert_eq!(batch_in_force(&labels), Some(512), "read back as the batch size in force");
    assert_eq!(label(&body, "wasmsched.gpus"), Some("4"), "preempted later, it waits for its new size");
    assert_eq!(wasmsched_core::declare::from_labels("x", "i", &labels).spec.gpus, 4);
    assert_eq!(label(&body, WAIT), None);
    // A resize that keeps its batch size leaves the variable and the label as they were.
    let kept = copy_body(&info, &Changes { gpus: Some(vec![1]), asks_gpus: Some(1), ..Changes::default() });
    assert_eq!(label(&kept, BATCH_IN_FORCE), Some("64"));
    assert!(kept.env.iter().flatten().any(|v| v == &format!("{BATCH_SIZE_ENV}=64")));
}

#[test]
fn a_copy_that_moves_without_gpus_keeps_its_device_requests_and_leaves_the_queue() {
    let mut info = recorded();
    let labels = info.config.as_mut().unwrap().labels.as_mut().unwrap();
    labels.insert(WAIT.into(), "preempted".into());
    info.config.as_mut().unwrap().hostname = Some("trainer-a".into());
    let body = copy_body(&info, &Changes::default());
    assert_eq!(body.host_config.as_ref().unwrap().device_requests, info.host_config.as_ref().unwrap().device_requests);
    assert_eq!(visible(&body), ["NVIDIA_VISIBLE_DEVICES=all"], "untouched");
    assert_eq!(label(&body, WAIT), None, "a started copy no longer waits");
    assert_eq!(body.hostname.as_deref(), Some("trainer-a"), "a hostname the user chose is kept");
}

#[test]
fn a_containers_gpus_come_from_its_device_requests() {
    let with = |driver: &str, count: Option<i64>, ids: Option<&[&str]>, caps: &[&str]| HostConfig {
        device_requests: Some(vec![DeviceRequest {
            driver: Some(driver.into()),
            count,
            device_ids: ids.map(|i| i.iter().map(|s| s.to_string()).collect()),
            capabilities: Some(vec![caps.iter().map(|c| c.to_string()).collect()]),
            options: None,
        }]),
        ..Default::default()
    };
    assert_eq!(gpus_of(Some(&recorded().host_config.unwrap()), 4), [0, 1]);
    assert_eq!(gpus_of(Some(&with("", Some(-1), None, &["gpu"])), 3), [0, 1, 2], "--gpus all");
    assert_eq!(gpus_of(Some(&with("", Some(2), None, &["gpu"])), 4), [0, 1], "--gpus 2");
    assert_eq!(gpus_of(Some(&with("nvidia", None, Some(&["2", "GPU-1a2b", "9"]), &[])), 4), [2], "only known indices");
    assert_eq!(gpus_of(Some(&with("", Some(-1), None, &["tpu"])), 4), Vec::<u32>::new(), "not a GPU request");
    assert_eq!(gpus_of(None, 4), Vec::<u32>::new());
}

#[test]
fn attained_service_is_the_labels_plus_the_current_run() {
    let labels = HashMap::from([(RUN_MS.to_string(), "1000".to_string()), (GPU_MS.to_string(), "3000".to_string())]);
    assert_eq!(attained(&labels, Some(10_000), 12_500, 2), (3_500, 8_000));
    assert_eq!(attained(&labels, None, 12_500, 2), (1_000, 3_000), "a queued container adds nothing");
    assert_eq!(attained(&HashMap::new(), Some(10_000), 12_000, 0), (2_000, 2_000), "GPU time is run time without GPUs");
}

#[test]
fn docker_times_are_read_to_the_millisecond_and_the_zero_time_is_none() {
    assert_eq!(unix_ms_of("2026-11-23T15:30:54.898335186Z"), Some(1_795_447_854_898));
    assert_eq!(unix_ms_of("2026-11-23T15:30:54Z"), Some(1_795_447_854_000));
    assert_eq!(unix_ms_of("0001-01-01T00:00:00Z"), None);
    assert_eq!(unix_ms_of("yesterday"), None);
}

#[test]
fn a_copy_with_a_gpu_share_starts_with_that_mps_percentage_and_says_so_in_a_label() {
    let info = recorded();
    let mps = |body: &ContainerCreateBody| -> Vec<String> {
        body.env.iter().flatten().filter(|v| v.starts_with("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=")).cloned().collect()
    };
    let body = copy_body(&info, &Changes { gpu_share: Some(40), ..Changes::default() });
    assert_eq!(mps(&body), ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40"]);
    assert_eq!(label(&body, GPU_SHARE), Some("40"));
    assert_eq!(body.host_config.as_ref().unwrap().device_requests, info.host_config.as_ref().unwrap().device_requests);
    // A copy of that copy at 100 % runs uncapped again; one with no change keeps 40 %.
    let mut again = info.clone();
    again.config.as_mut().unwrap().env = body.env.clone();
    let whole = copy_body(&again, &Changes { gpu_share: Some(100), ..Changes::default() });
    assert!(mps(&whole).is_empty() && label(&whole, GPU_SHARE) == Some("100"));
    assert_eq!(mps(&copy_body(&again, &Changes::default())), ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40"]);
}
