//! The `SchedulingPolicy` resource from the command line: its definition (`wasmsched crd`) and
//! a rollback of one (`wasmsched rollback NAME --resource`).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use wasmsched::backend::kubernetes::resource;

/// `wasmsched crd`: the CustomResourceDefinition, as YAML for `kubectl apply -f -`.
pub fn crd() -> anyhow::Result<ExitCode> {
    let yaml = serde_saphyr::to_string(&resource::definition()).context("cannot write the definition as YAML")?;
    out!("{}", CRD_HEADER.trim_end());
    out!("{}", yaml.trim_end());
    Ok(ExitCode::SUCCESS)
}

/// What `wasmsched crd` prints first (and `examples/kubernetes/crd.yaml` begins with).
pub const CRD_HEADER: &str = "\
# The SchedulingPolicy resource (schedulingpolicies.wasmsched.io): a policy component the host
# serves, from an OCI artifact pinned by digest or a ConfigMap. Written by `wasmsched crd`; a
# test checks that this file is what it prints.
";

/// `wasmsched rollback NAME --resource`: apply again the spec of the version served before.
pub fn rollback(name: &str, namespace: Option<&str>, kubeconfig: Option<&Path>) -> anyhow::Result<ExitCode> {
    let namespace = namespace.unwrap_or(resource::DEFAULT_NAMESPACE);
    let rolled = super::oci::block_on(async {
        let api = resource::api(kubeconfig, namespace).await.context("pass --kubeconfig PATH, or export KUBECONFIG")?;
        anyhow::Ok(resource::rollback(&api, namespace, name).await?)
    })??;
    out!(
        "rolled back SchedulingPolicy {namespace}/{name} to generation {}'s spec ({}): now generation {}; \
         every replica fetches it and the leader swaps it in (kubectl -n {namespace} get schedulingpolicy {name})",
        rolled.from_generation,
        rolled.digest,
        rolled.generation
    );
    Ok(ExitCode::SUCCESS)
}
