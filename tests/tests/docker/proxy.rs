//! A Unix-socket proxy of the test's own between the host and the engine: cutting it makes the
//! engine go away for the host (the socket disappears, open connections break) while the
//! machine's engine itself keeps running; restoring it brings the engine back.

use std::io::ErrorKind;
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

#[derive(Default)]
struct Shared {
    up: AtomicBool,
    listening: AtomicBool,
    stop: AtomicBool,
    open: Mutex<Vec<UnixStream>>,
}

pub struct Proxy {
    path: PathBuf,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listen at `path`, forwarding every connection to the engine's socket `upstream`.
    pub fn start(path: PathBuf, upstream: PathBuf) -> Proxy {
        let shared = Arc::new(Shared::default());
        shared.up.store(true, Ordering::SeqCst);
        let thread = {
            let (path, shared) = (path.clone(), shared.clone());
            std::thread::spawn(move || serve(&path, &upstream, &shared))
        };
        let proxy = Proxy { path, shared, thread: Some(thread) };
        proxy.settle(true);
        proxy
    }

    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// The engine goes away: no socket, every open connection broken.
    pub fn cut(&self) {
        self.shared.up.store(false, Ordering::SeqCst);
        self.settle(false);
    }

    /// The engine is back.
    pub fn restore(&self) {
        self.shared.up.store(true, Ordering::SeqCst);
        self.settle(true);
    }

    fn settle(&self, listening: bool) {
        while self.shared.listening.load(Ordering::SeqCst) != listening {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(path: &PathBuf, upstream: &PathBuf, shared: &Shared) {
    let mut listener: Option<UnixListener> = None;
    while !shared.stop.load(Ordering::SeqCst) {
        let up = shared.up.load(Ordering::SeqCst);
        if up && listener.is_none() {
            let _ = std::fs::remove_file(path);
            let l = UnixListener::bind(path).expect("the proxy binds its socket");
            l.set_nonblocking(true).unwrap();
            listener = Some(l);
            shared.listening.store(true, Ordering::SeqCst);
        } else if !up && listener.is_some() {
            listener = None;
            let _ = std::fs::remove_file(path);
            for c in shared.open.lock().unwrap().drain(..) {
                let _ = c.shutdown(Shutdown::Both);
            }
            shared.listening.store(false, Ordering::SeqCst);
        }
        let accepted = listener.as_ref().map(UnixListener::accept);
        match accepted {
            Some(Ok((client, _))) => {
                client.set_nonblocking(false).unwrap();
                let Ok(server) = UnixStream::connect(upstream) else { continue };
                let mut open = shared.open.lock().unwrap();
                open.extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
            Some(Err(e)) if e.kind() != ErrorKind::WouldBlock => panic!("the proxy cannot accept: {e}"),
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let _ = std::fs::remove_file(path);
}

/// Copy `from` to `to` until either side closes, then close both ways.
fn pipe(mut from: UnixStream, mut to: UnixStream) {
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from, &mut to);
        let _ = to.shutdown(Shutdown::Write);
    });
}
