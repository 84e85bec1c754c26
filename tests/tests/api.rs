//! The control API: status, metrics and rollback over HTTP on loopback, behind a token.

use wasmsched::api::{self, ApiError, client};

use wasmsched_tests::live::{Running, Setup, component, serving, sha256, variant};

#[test]
fn status_metrics_and_rollback_answer_over_http_with_the_token() {
    let setup = Setup::new();
    let (v1, v2) = (variant("fair-share", 1), variant("fair-share", 2));
    setup.land("fs", &v1);
    let running = Running::start(setup.config("1s", "100", "[policy.fs]\ndeadline = \"2s\"\n"));
    running.wait("fs", |s| serving(s, "fs").is_some());
    let server = api::serve(
        running.handle.clone(),
        "127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap(),
        Some("s3cret".into()),
    )
    .unwrap();
    let addr = server.addr();

    let (code, _) = client::request(addr, "GET", "/status", None).unwrap();
    assert_eq!(code, 401, "no token, no status");
    let status = client::status(addr, Some("s3cret")).unwrap();
    assert_eq!(serving(&status, "fs"), Some(sha256(&v1)));
    assert!(status.render().contains("fs"));

    let (code, metrics) = client::request(addr, "GET", "/metrics", Some("s3cret")).unwrap();
    assert_eq!(code, 200);
    assert!(metrics.contains("wasmsched_ticks_total"), "{metrics}");
    assert!(metrics.contains(&format!("sha256=\"{}\"", sha256(&v1))), "{metrics}");

    let (code, body) = client::request(addr, "POST", "/rollback/fs", Some("s3cret")).unwrap();
    assert_eq!(code, 409, "{body}");
    let (code, _) = client::request(addr, "POST", "/rollback/nope", Some("s3cret")).unwrap();
    assert_eq!(code, 404);
    setup.land("fs", &v2);
    running.wait("v2", |s| serving(s, "fs").as_deref() == Some(&*sha256(&v2)));
    let back = client::rollback(addr, "fs", Some("s3cret")).unwrap();
    assert_eq!(back.sha256, sha256(&v1));
    assert_eq!(serving(&client::status(addr, Some("s3cret")).unwrap(), "fs"), Some(sha256(&v1)));
    drop(server);
    running.stop();
}

#[test]
fn the_api_refuses_to_listen_beyond_loopback_without_a_token() {
    let setup = Setup::new();
    setup.land("fs", &component("fair-share"));
    let running = Running::start(setup.config("1s", "100", "[policy.fs]\n"));
    let err =
        api::serve(running.handle.clone(), "0.0.0.0:0".parse::<std::net::SocketAddr>().unwrap(), None).err().unwrap();
    assert!(matches!(err, ApiError::TokenRequired(_)), "{err}");
    assert!(err.to_string().contains("token"));
    running.stop();
}

#[test]
fn the_api_answers_on_a_unix_socket_and_its_probes_say_ready_and_live() {
    let setup = Setup::new();
    setup.land("fs", &component("fair-share"));
    let running = Running::start(setup.config("1s", "100", "[policy.fs]\n"));
    let socket = setup.dir.path().join("run/api.sock");
    let addr = api::Listen::Unix(socket.clone());
    // A socket left by a host that stopped does not stand in the way.
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let server = api::serve(running.handle.clone(), addr.clone(), None).unwrap();
    assert_eq!(server.addr(), &addr);
    running.wait("a tick", |s| s.ticks > 0);
    assert_eq!(client::probe(&addr, client::Probe::Ready), Ok(()));
    assert_eq!(client::probe(&addr, client::Probe::Live), Ok(()));
    assert!(client::status(&addr, None).unwrap().policy("fs").is_some());
    running.stop();
    let why = client::probe(&addr, client::Probe::Live).unwrap_err();
    assert!(why.contains("503") && why.contains("stopped"), "{why}");
    drop(server);
    assert!(!socket.exists(), "the socket goes with the server");
    let why = client::probe(&addr, client::Probe::Ready).unwrap_err();
    assert!(why.contains("is `wasmsched run` running"), "{why}");
}
