//! A host that runs as several replicas sharing one backend (a Kubernetes cluster with
//! `[backend.election]`): one leads and acts, the others stand by with a warm world, and the
//! policies' states are kept where the next leader finds them. A backend that never runs as
//! several replicas implements none of this; [`crate::backend::Backend::replicas`] says None.

/// The replicas' side of a backend: who leads, and the states kept for the next leader.
pub trait Replicas {
    /// Where this host stands among its replicas. While it does not lead, the backend's
    /// `observe` changes nothing outside the host, and the loop asks no policy and applies
    /// nothing: the world stays warm for the moment it takes the lead.
    fn leadership(&self) -> Leadership;

    /// Whether this replica acts now.
    fn leads(&self) -> bool {
        self.leadership().leading
    }

    /// Every how many ticks the leader hands the policies' states to [`Replicas::keep`].
    fn keep_every(&self) -> u64;

    /// Keep the policies' states where the next leader finds them ([`Replicas::kept`]).
    fn keep(&mut self, checkpoints: &[Checkpoint]);

    /// The states the last leader kept, read when this host takes the lead.
    fn kept(&mut self) -> Vec<Checkpoint>;

    /// The host is stopping: stop acting and hand the lead on now rather than at its expiry.
    fn step_down(&mut self);
}

/// Where this host stands among replicas of it that share a backend (a Kubernetes cluster
/// with `[backend.election]`), as the status shows it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Leadership {
    /// This replica's identity.
    pub identity: String,
    /// Whether this replica acts now.
    pub leading: bool,
    /// Who held the lead at the last look (None: nobody, or not read yet).
    pub holder: Option<String>,
    /// Where the lead is kept: the Lease's `namespace/name`.
    pub lease: String,
    /// How many times the lead changed hands, as the Lease counts.
    pub transitions: u64,
    /// Times this replica took the lead since it started.
    pub acquired: u64,
}

/// A policy's state as the leader saved it, kept by the backend for the replica that leads
/// next ([`Replicas::keep`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// The policy's name in the config.
    pub policy: String,
    /// The sha256 of the version that saved it.
    pub sha256: String,
    /// That version's number among the policy's versions on the host that saved it.
    pub version: u32,
    /// The tick it was saved at.
    pub tick: u64,
    /// When, milliseconds since the Unix epoch.
    pub saved_unix_ms: u64,
    /// What the version's `save-state` returned.
    pub state: Vec<u8>,
    /// The versions (sha256) this state's line was carried away from by swaps, oldest first
    /// ([`LINE_KEPT`] at most): a state is never handed back to one of them, as a rollback's
    /// version would be handed the state of the version it replaced.
    pub left: Vec<String>,
}

/// How many versions a state's line remembers having left.
pub const LINE_KEPT: usize = 16;
