//! wasmsched's loop: observe (a backend) → snapshot → decide (each policy, sandboxed) →
//! validate → apply (the backend) → record, whatever drives it — an experiment on the
//! simulator (`wasmsched-lab`) or the long-running host (`wasmsched-host`).
//!
//! Start at [`control::run`] and [`control::drive`]: the [`control::Driver`] hands each tick's
//! changes to the active policy and its shadows, checks what they return
//! (`wasmsched_runtime::validate`), holds stops, migrations and preemptions to the
//! [`budget`], applies the rest through the backend and writes the [`record`] (the audit log
//! and the telemetry recording). The [`watchdog`] benches an active policy that fails on every
//! call, starves the queue or keeps every job from progressing; [`shadow`] compares a shadow's
//! decisions with the active one's. [`stats`] says how sure a difference between two
//! policies is; [`experiment`] runs several policies against each other on one cluster.

pub mod budget;
pub mod control;
pub mod experiment;
pub mod record;
pub mod shadow;
pub mod stats;
pub mod watchdog;
