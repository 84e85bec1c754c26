//! How many requests the host has at the apiserver at once: a bound that adapts, as TCP's
//! congestion window does. Every answer in time widens it by one request per bound's worth of
//! answers; an answer that says the apiserver is overloaded (429 Too Many Requests, a timeout,
//! 503) halves it, at most once a second, since one overload fails many requests together.
//! The bound stays between [`MIN`] and [`MAX`]: thousands of bindings at once made the
//! apiserver time out, one at a time would bind tens of pods a second.
//!
//! `Failure` says why a request that passed the gate failed (for the actions and the claims'
//! writes).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

/// The fewest requests kept in flight, however overloaded the apiserver says it is.
pub const MIN: usize = 4;
/// The most requests in flight at once.
pub const MAX: usize = 256;
/// The bound at the start.
pub const START: usize = 32;
/// A cut follows another only this long after it.
const CUT_EVERY: Duration = Duration::from_secs(1);

/// What an answer says of the apiserver's load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// It answered in time (whatever it answered).
    Fine,
    /// It said it is overloaded, or did not answer in time.
    Overloaded,
}

impl Load {
    /// What `result` says of the apiserver's load.
    pub fn of<T>(result: &Result<T, kube::Error>) -> Load {
        match result {
            Ok(_) => Load::Fine,
            Err(kube::Error::Api(status)) if matches!(status.code, 429 | 503 | 504) => Load::Overloaded,
            Err(kube::Error::Api(_)) => Load::Fine,
            Err(_) => Load::Overloaded,
        }
    }
}

/// Why an action failed: Kubernetes refused it, the host declined it before asking (it names
/// a NotReady node, say: nothing about the pod itself), or no answer.
pub(crate) enum Failure {
    Refused(String),
    Declined(String),
    Unreachable(String),
}

impl From<kube::Error> for Failure {
    fn from(e: kube::Error) -> Failure {
        match e {
            kube::Error::Api(status) if status.code == 404 => Failure::Refused("the pod is gone".into()),
            kube::Error::Api(status) => Failure::Refused(status.message),
            other => Failure::Unreachable(format!("the apiserver does not answer: {other}")),
        }
    }
}

/// The bound itself, apart from the requests it bounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// Requests allowed in flight.
    pub bound: usize,
    /// Answers in time since the bound last grew.
    fine: usize,
    last_cut: Option<Instant>,
    /// Times the bound was halved.
    pub cuts: u64,
}

impl Default for Window {
    fn default() -> Self {
        Window { bound: START, fine: 0, last_cut: None, cuts: 0 }
    }
}

impl Window {
    /// Take one answer into account at `now`.
    pub fn answer(&mut self, load: Load, now: Instant) {
        match load {
            Load::Fine => {
                self.fine += 1;
                if self.fine >= self.bound {
                    self.fine = 0;
                    self.bound = (self.bound + 1).min(MAX);
                }
            }
            Load::Overloaded => {
                if self.last_cut.is_some_and(|at| now.duration_since(at) < CUT_EVERY) {
                    return;
                }
                self.last_cut = Some(now);
                self.fine = 0;
                self.bound = (self.bound / 2).max(MIN);
                self.cuts += 1;
            }
        }
    }
}

/// The gate requests to the apiserver pass through; cheap to clone (one gate, shared).
#[derive(Clone)]
pub struct Gate {
    inner: Arc<Inner>,
}

struct Inner {
    permits: Semaphore,
    state: Mutex<State>,
}

struct State {
    window: Window,
    /// Permits that exist (in the semaphore or held): the bound, once the held ones over it
    /// come back.
    issued: usize,
}

impl Default for Gate {
    fn default() -> Self {
        let window = Window::default();
        let issued = window.bound;
        Gate { inner: Arc::new(Inner { permits: Semaphore::new(issued), state: Mutex::new(State { window, issued }) }) }
    }
}

impl Gate {
    /// Make the request with `request` once the bound lets it, and let its answer move the
    /// bound. The request is made only then, on the heap: ten thousand actions waiting at the
    /// gate hold a closure each, not a request in the making.
    pub async fn pass<T, F>(&self, request: impl FnOnce() -> F) -> Result<T, kube::Error>
    where
        F: Future<Output = Result<T, kube::Error>>,
    {
        let permit = self.inner.permits.acquire().await.expect("the gate's semaphore is never closed");
        let result = Box::pin(request()).await;
        let mut state = self.inner.state.lock().expect("gate lock");
        state.window.answer(Load::of(&result), Instant::now());
        if state.issued > state.window.bound {
            permit.forget();
            state.issued -= 1;
        } else {
            drop(permit);
        }
        if state.issued < state.window.bound {
            self.inner.permits.add_permits(state.window.bound - state.issued);
            state.issued = state.window.bound;
        }
        result
    }

    /// The bound now, and how many times it was cut.
    pub fn window(&self) -> (usize, u64) {
        let state = self.inner.state.lock().expect("gate lock");
        (state.window.bound, state.window.cuts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bounds_worth_of_answers_in_time_widens_it_by_one() {
        let mut w = Window::default();
        let now = Instant::now();
        for _ in 0..START - 1 {
            w.answer(Load::Fine, now);
        }
        assert_eq!(w.bound, START);
        w.answer(Load::Fine, now);
        assert_eq!(w.bound, START + 1);
    }

    #[test]
    fn an_overload_halves_it_once_a_second_and_never_below_the_floor() {
        let mut w = Window::default();
        let now = Instant::now();
        w.answer(Load::Overloaded, now);
        w.answer(Load::Overloaded, now + Duration::from_millis(10));
        assert_eq!((w.bound, w.cuts), (START / 2, 1), "one overload fails many requests: one cut");
        for s in 1..20 {
            w.answer(Load::Overloaded, now + Duration::from_secs(s));
        }
        assert_eq!(w.bound, MIN);
    }

    #[test]
    fn it_never_grows_past_the_ceiling() {
        let mut w = Window::default();
        for _ in 0..MAX * MAX {
            w.answer(Load::Fine, Instant::now());
        }
        assert_eq!(w.bound, MAX);
    }

    #[test]
    fn a_refusal_is_an_answer_and_a_429_or_a_timeout_is_overload() {
        let status = |code| {
            kube::Error::Api(
                kube::core::Status { code, message: String::new(), ..kube::core::Status::default() }.boxed(),
            )
        };
        assert_eq!(Load::of::<()>(&Err(status(409))), Load::Fine);
        assert_eq!(Load::of::<()>(&Err(status(429))), Load::Overloaded);
        assert_eq!(Load::of::<()>(&Err(kube::Error::Service("no answer within 5s".into()))), Load::Overloaded);
    }

    #[test]
    fn the_gate_holds_no_more_than_its_bound_in_flight() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let gate = Gate::default();
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        rt.block_on(async {
            let asks = (0..200).map(|_| {
                let (gate, now, most) = (gate.clone(), now.clone(), most.clone());
                async move {
                    gate.pass(|| async {
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(n, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        now.fetch_sub(1, Ordering::SeqCst);
                        Ok::<_, kube::Error>(())
                    })
                    .await
                }
            });
            futures_util::future::join_all(asks).await;
        });
        let most = most.load(Ordering::SeqCst);
        assert!(most <= START + 200 / START, "{most} in flight");
        assert!(most >= START, "{most} in flight: the gate should let its bound through");
    }
}
