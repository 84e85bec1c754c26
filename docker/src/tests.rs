//! Unit tests of the Docker backend that need no engine.

use super::*;

#[test]
fn endpoints_are_checked_before_anything_is_contacted() {
    let with = |engines: Vec<&str>| {
        Docker::new(DockerConfig {
            engines: engines.into_iter().map(String::from).collect(),
            gpus: false,
            ..DockerConfig::default()
        })
    };
    assert!(matches!(with(vec![]), Err(DockerSetupError::NoEngine)));
    let e = with(vec!["ftp://host"]).err().expect("an unknown scheme is refused").to_string();
    assert!(e.contains("ftp://host") && e.contains("unix:///path/to/docker.sock"), "{e}");
    let docker = with(vec!["unix:///nonexistent/docker.sock", "tcp://127.0.0.1:1"]).expect("nothing is contacted yet");
    assert!(!docker.engine_up(0) && !docker.engine_up(1));
}

#[test]
fn an_engine_that_is_not_there_leaves_its_node_empty_and_is_retried_later() {
    let mut docker = Docker::new(DockerConfig {
        engines: vec!["unix:///nonexistent/docker.sock".into()],
        timeout: Duration::from_millis(200),
        gpus: false,
        ..DockerConfig::default()
    })
    .unwrap();
    let mut world = World::new();
    assert!(docker.observe(&mut world, 0));
    assert_eq!(world.nodes().len(), 1, "the node exists, its capacity unknown");
    assert_eq!(world.nodes()[0].cpu_millicores, 0);
    let down = docker.engines[0].down.as_ref().expect("marked down");
    assert_eq!(down.backoff, FIRST_BACKOFF);
    let errors = docker.apply(&[], &mut world);
    assert!(errors.is_empty());
}

#[test]
fn cpu_limits_are_read_from_nano_cpus_or_quota_and_period() {
    use bollard::models::HostConfig;
    let nano = HostConfig { nano_cpus: Some(1_500_000_000), ..Default::default() };
    assert_eq!(cpu_limit(&nano), Some(1500));
    let quota = HostConfig { cpu_quota: Some(50_000), cpu_period: Some(100_000), ..Default::default() };
    assert_eq!(cpu_limit(&quota), Some(500));
    let lifted = HostConfig { cpu_quota: Some(-1), ..Default::default() };
    assert_eq!(cpu_limit(&lifted), None);
    assert_eq!(cpu_limit(&HostConfig::default()), None);
}
