//! Tenants as an operator declares them: a `[[tenants]]` table per tenant, in the host's config
//! and in a scenario, checked once and handed to the world ([`crate::world::World::set_tenants`]).
//!
//! ```toml
//! [[tenants]]
//! name = "vision"
//! weight = 2                    # fair share against the others' weights (default 1)
//! quota-gpus = 16               # guaranteed; the host never lets it hold more than its limit
//! cohort = "research"           # tenants that lend each other their idle quota
//! borrowing-limit-gpus = 8      # at most this many beyond its quota (default: what is idle)
//!
//! [[tenants]]
//! name = "speech"
//! quota-gpus = 8
//! cohort = "research"
//! ```
//!
//! A job names its tenant with the label `wasmsched.tenant` (a scenario's job with `tenant =`);
//! one that names none is the tenant `default`'s. A tenant that jobs name and nobody declared
//! has weight 1 and no quota. The limits themselves ([`wasmsched_rules::tenants`]) are checked
//! with every action (a placement or resize past a limit is refused with the reason) and by
//! every backend's default placement, which passes over a job whose tenant is at its limit.

use serde::{Deserialize, Serialize};

use crate::bindings::wit;

/// What a tenant or cohort name may be.
pub const NAME_RULE: &str = "1 to 63 letters, digits, '-', '_' or '.'";

/// Whether `name` is a valid tenant or cohort name ([`NAME_RULE`]).
pub fn valid_name(name: &str) -> bool {
    (1..=63).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// One `[[tenants]]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TenantConfig {
    /// The name jobs give in `wasmsched.tenant`.
    pub name: String,
    /// Its share against the other tenants' weights (default 1).
    #[serde(default = "one")]
    pub weight: f64,
    /// GPUs guaranteed to it; absent: no quota, no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_gpus: Option<u32>,
    /// With a cohort: at most this many GPUs beyond its quota; absent: what the cohort has idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit_gpus: Option<u32>,
    /// The tenants that lend each other their idle quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cohort: Option<String>,
}

fn one() -> f64 {
    1.0
}

/// A file of `[[tenants]]` tables and nothing else.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantsFile {
    #[serde(default)]
    tenants: Vec<TenantConfig>,
}

/// The tenants a file of `[[tenants]]` tables declares (`--tenants`), checked.
pub fn load(path: &std::path::Path) -> anyhow::Result<Vec<wit::Tenant>> {
    use anyhow::Context;
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read tenants file {}", path.display()))?;
    let file: TenantsFile = toml::from_str(&text)
        .with_context(|| format!("{} is not a file of [[tenants]] tables (see docs/tenants.md)", path.display()))?;
    declare(&file.tenants).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Check the declarations and turn them into the contract's tenants, in the order given; the
/// error says which table is wrong and what to write.
pub fn declare(tenants: &[TenantConfig]) -> Result<Vec<wit::Tenant>, String> {
    let mut out: Vec<wit::Tenant> = Vec::with_capacity(tenants.len());
    for (i, t) in tenants.iter().enumerate() {
        let at = format!("[[tenants]] #{} ({:?})", i + 1, t.name);
        if !valid_name(&t.name) {
            return Err(format!("{at}: the name must be {NAME_RULE}"));
        }
        if out.iter().any(|o| o.name == t.name) {
            return Err(format!("{at}: tenant {:?} is declared twice; merge the two tables", t.name));
        }
        if !(t.weight.is_finite() && t.weight > 0.0) {
            return Err(format!("{at}: weight must be a number above 0 (it is {})", t.weight));
        }
        if let Some(c) = &t.cohort
            && !valid_name(c)
        {
            return Err(format!("{at}: the cohort's name must be {NAME_RULE}"));
        }
        if t.borrowing_limit_gpus.is_some() && (t.quota_gpus.is_none() || t.cohort.is_none()) {
            return Err(format!(
                "{at}: borrowing-limit-gpus needs quota-gpus and a cohort to borrow from; add them, or drop the limit"
            ));
        }
        out.push(wit::Tenant {
            name: t.name.clone(),
            weight: t.weight,
            quota_gpus: t.quota_gpus,
            borrowing_limit_gpus: t.borrowing_limit_gpus,
            cohort: t.cohort.clone().unwrap_or_default(),
        });
    }
    Ok(out)
}

/// Jain's index of `x`: (Σx)² / (n Σx²); 1 for an empty or all-zero list.
pub fn jain(x: &[f64]) -> f64 {
    let (sum, squares) = x.iter().fold((0.0, 0.0), |(s, q), v| (s + v, q + v * v));
    if squares > 0.0 { sum * sum / (x.len() as f64 * squares) } else { 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<wit::Tenant>, String> {
        #[derive(Deserialize)]
        struct File {
            tenants: Vec<TenantConfig>,
        }
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        declare(&file.tenants)
    }

    #[test]
    fn the_module_example_declares_two_tenants_of_one_cohort() {
        let doc = include_str!("tenants.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| format!("{}\n", l.trim_start_matches("//!").trim_start()))
            .collect();
        let t = parse(&example).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].weight, t[0].quota_gpus, t[0].borrowing_limit_gpus), (2.0, Some(16), Some(8)));
        assert_eq!((t[1].weight, &t[1].cohort[..], t[1].borrowing_limit_gpus), (1.0, "research", None));
    }

    #[test]
    fn a_bad_declaration_says_which_table_and_what_to_write() {
        let cases = [
            ("[[tenants]]\nname = \"a b\"\n", "#1 (\"a b\"): the name must be 1 to 63"),
            ("[[tenants]]\nname = \"a\"\n[[tenants]]\nname = \"a\"\n", "#2 (\"a\"): tenant \"a\" is declared twice"),
            ("[[tenants]]\nname = \"a\"\nweight = 0\n", "weight must be a number above 0"),
            ("[[tenants]]\nname = \"a\"\nquota-gpus = 4\nborrowing-limit-gpus = 2\n", "needs quota-gpus and a cohort"),
            ("[[tenants]]\nname = \"a\"\ncohort = \"\"\n", "the cohort's name must be"),
            ("[[tenants]]\nname = \"a\"\nquota = 4\n", "unknown field `quota`"),
        ];
        for (text, expected) in cases {
            let e = parse(text).unwrap_err();
            assert!(e.contains(expected), "{text}: {e}");
        }
    }

    #[test]
    fn the_philly_virtual_clusters_file_declares_a_quota_for_each_of_64_gpus() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/tenants/philly-vcs.toml");
        let t = load(std::path::Path::new(path)).unwrap();
        assert_eq!(t.len(), 11);
        assert_eq!(t.iter().filter_map(|t| t.quota_gpus).sum::<u32>(), 64);
        assert!(t.iter().all(|t| t.cohort == "philly"));
        let e = load(std::path::Path::new("/nonexistent/tenants.toml")).unwrap_err();
        assert!(e.to_string().contains("cannot read tenants file"), "{e}");
    }
}
