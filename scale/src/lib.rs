//! The scale harness: wasmsched against kube-scheduler on a real Kubernetes with thousands of
//! nodes that exist only as API objects, in the manner of Kubernetes' own `scheduler_perf`.
//!
//! [`kubernetes::run`] is the whole experiment (nodes, one run per scheduler, the report, the
//! clean-up); start reading there. [`kubernetes::sia::run`] is the other one: a live Sia run of
//! pod groups on object nodes shaped like the simulator's `heterogeneous-64`. The pure parts beside it are tested without a cluster:
//! percentiles and rates ([`stats`]), `/proc` readings ([`procfs`]), the node and pod
//! manifests, the host's config, the host's status and log, the tables, and the Sia
//! run's workload, groups and audit log (`kubernetes/…`). `scale/README.md` says what is measured and how to run it.

pub mod kubernetes;
pub mod procfs;
pub mod stats;
