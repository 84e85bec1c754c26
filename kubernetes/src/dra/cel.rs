//! The CEL selectors of device classes and claims, evaluated by a CEL crate against each device
//! as Kubernetes exposes it: `device.driver`, `device.attributes[DOMAIN].NAME`,
//! `device.capacity[DOMAIN].NAME` (a quantity: `compareTo`, `isGreaterThan`, `isLessThan`,
//! `asInteger`, `asApproximateFloat`, and `quantity("40Gi")` to compare with) and
//! `device.allowMultipleAllocations`. An attribute named without a domain is in its driver's.
//! A version attribute is a semantic version, as Kubernetes' semver library has it: `major`,
//! `minor`, `patch`, `compareTo`, `isGreaterThan`, `isLessThan`, and `semver("1.2.3")` (or
//! `semver("v1.2", true)`, normalised) and `isSemver` to make and check one. An expression is
//! compiled once and kept.

use std::collections::HashMap;
use std::sync::Arc;

use cel_interpreter::extractors::This;
use cel_interpreter::objects::{Key, Map};
use cel_interpreter::{Context, ExecutionError, Program, Value};
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The key of the one-entry map a quantity is in CEL here: kept apart from plain numbers, so
/// `capacity.memory > 40` is an error as in Kubernetes, not a comparison of units.
const QUANTITY: &str = "quantity (milli-units)";

/// A quantity in thousandths of its unit (`500m` is 500, `1Gi` is 1024³ × 1000); None for
/// garbage. Saturates rather than overflows.
pub fn milli(q: &Quantity) -> Option<i128> {
    let text = q.0.trim();
    if let Some(m) = text.strip_suffix('m') {
        return m.parse::<i128>().ok();
    }
    crate::pod::bytes(q).map(|b| i128::from(b) * 1000)
}

fn quantity_value(milli: i128) -> Value {
    let units = i64::try_from(milli).unwrap_or(if milli < 0 { i64::MIN } else { i64::MAX });
    let map: HashMap<Key, Value> = HashMap::from([(Key::from(QUANTITY.to_string()), Value::Int(units))]);
    Value::Map(Map::from(map))
}

fn quantity_of(v: &Value) -> Result<i64, ExecutionError> {
    match v {
        Value::Map(m) => match m.get(&Key::from(QUANTITY.to_string())) {
            Some(Value::Int(n)) => Ok(*n),
            _ => Err(ExecutionError::function_error("quantity", "not a quantity")),
        },
        _ => Err(ExecutionError::function_error("quantity", "not a quantity")),
    }
}

/// The key of the one-entry map a semantic version is in CEL here (its text, as parsed).
const SEMVER: &str = "semver";

fn semver_value(v: &semver::Version) -> Value {
    let map: HashMap<Key, Value> =
        HashMap::from([(Key::from(SEMVER.to_string()), Value::String(Arc::new(v.to_string())))]);
    Value::Map(Map::from(map))
}

fn semver_of(v: &Value) -> Option<semver::Version> {
    match v {
        Value::Map(m) => match m.get(&Key::from(SEMVER.to_string())) {
            Some(Value::String(s)) => semver::Version::parse(s).ok(),
            _ => None,
        },
        _ => None,
    }
}

/// `text` as a semantic version: strictly, or `normalize`d as Kubernetes does (a leading `v`
/// dropped, missing minor and patch as 0, leading zeros dropped).
fn parse_semver(text: &str, normalize: bool) -> Option<semver::Version> {
    if !normalize {
        return semver::Version::parse(text).ok();
    }
    let text = text.strip_prefix('v').unwrap_or(text);
    let (core, rest) = match text.find(['-', '+']) {
        Some(i) => text.split_at(i),
        None => (text, ""),
    };
    let mut parts: Vec<String> = core.split('.').map(|p| p.trim_start_matches('0').to_string()).collect();
    for p in parts.iter_mut().filter(|p| p.is_empty()) {
        *p = "0".into();
    }
    while parts.len() < 3 {
        parts.push("0".into());
    }
    semver::Version::parse(&format!("{}{rest}", parts.join("."))).ok()
}

/// Two quantities, or two versions, compared.
fn compare(This(this): This<Value>, other: Value) -> Result<i64, ExecutionError> {
    if let (Some(a), Some(b)) = (semver_of(&this), semver_of(&other)) {
        return Ok(a.cmp(&b) as i64);
    }
    Ok(quantity_of(&this)?.cmp(&quantity_of(&other)?) as i64)
}

/// A part of a version.
fn part(this: &Value, name: &str, of: fn(&semver::Version) -> u64) -> Result<i64, ExecutionError> {
    let v = semver_of(this).ok_or_else(|| ExecutionError::function_error(name, "not a semver"))?;
    i64::try_from(of(&v)).map_err(|_| ExecutionError::function_error(name, "too large"))
}

/// The functions Kubernetes adds to CEL that device selectors use.
fn root() -> Context<'static> {
    let mut root = Context::default();
    root.add_function("quantity", |text: Arc<String>| -> Result<Value, ExecutionError> {
        milli(&Quantity(text.to_string()))
            .map(quantity_value)
            .ok_or_else(|| ExecutionError::function_error("quantity", format!("{text:?} is not a quantity")))
    });
    root.add_function("compareTo", compare);
    root.add_function("isGreaterThan", |this: This<Value>, other: Value| {
        Ok::<_, ExecutionError>(compare(this, other)? > 0)
    });
    root.add_function("isLessThan", |this: This<Value>, other: Value| {
        Ok::<_, ExecutionError>(compare(this, other)? < 0)
    });
    root.add_function("semver", |text: Arc<String>, rest: cel_interpreter::extractors::Arguments| {
        let normalize = matches!(rest.0.get(1), Some(Value::Bool(true)));
        parse_semver(&text, normalize)
            .map(|v| semver_value(&v))
            .ok_or_else(|| ExecutionError::function_error("semver", format!("{text:?} is not a semantic version")))
    });
    root.add_function("isSemver", |text: Arc<String>, rest: cel_interpreter::extractors::Arguments| {
        let normalize = matches!(rest.0.get(1), Some(Value::Bool(true)));
        Ok::<_, ExecutionError>(parse_semver(&text, normalize).is_some())
    });
    root.add_function("major", |This(this): This<Value>| part(&this, "major", |v| v.major));
    root.add_function("minor", |This(this): This<Value>| part(&this, "minor", |v| v.minor));
    root.add_function("patch", |This(this): This<Value>| part(&this, "patch", |v| v.patch));
    root.add_function("asInteger", |This(this): This<Value>| Ok::<_, ExecutionError>(quantity_of(&this)? / 1000));
    root.add_function("asApproximateFloat", |This(this): This<Value>| {
        Ok::<_, ExecutionError>(quantity_of(&this)? as f64 / 1000.0)
    });
    root
}

/// An attribute's value in CEL: a list attribute is a list.
fn attribute_value(a: &DeviceAttribute) -> Value {
    let list = |items: Vec<Value>| Value::List(Arc::new(items));
    let text = |s: &String| Value::String(Arc::new(s.clone()));
    match a {
        DeviceAttribute { bool: Some(b), .. } => Value::Bool(*b),
        DeviceAttribute { int: Some(i), .. } => Value::Int(*i),
        DeviceAttribute { string: Some(s), .. } => text(s),
        // A version the driver wrote badly stays its text: comparing it is then an error.
        DeviceAttribute { version: Some(s), .. } => {
            semver::Version::parse(s).map_or_else(|_| text(s), |v| semver_value(&v))
        }
        DeviceAttribute { bools: Some(b), .. } => list(b.iter().map(|&b| Value::Bool(b)).collect()),
        DeviceAttribute { ints: Some(i), .. } => list(i.iter().map(|&i| Value::Int(i)).collect()),
        DeviceAttribute { strings: Some(s), .. } => list(s.iter().map(text).collect()),
        DeviceAttribute { versions: Some(s), .. } => {
            list(s.iter().map(|s| semver::Version::parse(s).map_or_else(|_| text(s), |v| semver_value(&v))).collect())
        }
        _ => Value::Null,
    }
}

/// `name` split into its domain and identifier; a name without a domain is in `driver`'s.
pub fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// Device `d` of `driver` as CEL's `device`.
pub fn device_value(driver: &str, d: &Device) -> Value {
    let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, a) in d.attributes.iter().flatten() {
        let (domain, id) = qualified(name, driver);
        attributes.entry(domain.to_string()).or_default().insert(id.to_string(), attribute_value(a));
    }
    let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
    for (name, c) in d.capacity.iter().flatten() {
        let (domain, id) = qualified(name, driver);
        let value = milli(&c.value).map_or(Value::Null, quantity_value);
        capacity.entry(domain.to_string()).or_default().insert(id.to_string(), value);
    }
    let nested = |m: HashMap<String, HashMap<String, Value>>| {
        Value::Map(Map::from(m.into_iter().map(|(k, v)| (k, Value::Map(Map::from(v)))).collect::<HashMap<_, _>>()))
    };
    Value::Map(Map::from(HashMap::from([
        ("driver".to_string(), Value::String(Arc::new(driver.to_string()))),
        ("attributes".to_string(), nested(attributes)),
        ("capacity".to_string(), nested(capacity)),
        ("allowMultipleAllocations".to_string(), Value::Bool(d.allow_multiple_allocations.unwrap_or(false))),
    ])))
}

/// `expression` compiled. The crate's parser panics on some malformed text (an empty one):
/// that panic is caught here and said as an error, as any other that does not compile.
fn compile(expression: &str) -> Result<Arc<Program>, String> {
    if expression.trim().is_empty() {
        return Err("it is empty".into());
    }
    match std::panic::catch_unwind(|| Program::compile(expression)) {
        Ok(compiled) => compiled.map(Arc::new).map_err(|e| format!("{e}")),
        Err(_) => Err("the CEL parser cannot read it".into()),
    }
}

/// Compiled selectors, by their text, and the context their functions live in.
pub struct Selectors {
    root: Context<'static>,
    compiled: HashMap<String, Result<Arc<Program>, String>>,
}

impl Default for Selectors {
    fn default() -> Self {
        Selectors { root: root(), compiled: HashMap::new() }
    }
}

impl Selectors {
    /// Whether `device` (as [`device_value`] made it) satisfies `expression`; why not, when the
    /// expression does not compile, fails on this device, or is not a boolean.
    pub fn matches(&mut self, expression: &str, device: &Value) -> Result<bool, String> {
        let program = self
            .compiled
            .entry(expression.to_string())
            .or_insert_with(|| compile(expression))
            .clone()
            .map_err(|e| format!("the CEL expression {expression:?} does not compile: {e}"))?;
        let mut scope = self.root.new_inner_scope();
        scope.add_variable_from_value("device", device.clone());
        match program.execute(&scope) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("the CEL expression {expression:?} gives {other:?}, not true or false")),
            Err(e) => Err(format!("the CEL expression {expression:?} fails on this device: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::resource::v1::DeviceCapacity;

    use super::*;

    fn gpu(product: &str, memory: &str) -> Device {
        Device {
            name: "gpu-0".into(),
            attributes: Some(BTreeMap::from([
                ("productName".to_string(), DeviceAttribute { string: Some(product.into()), ..Default::default() }),
                ("index".to_string(), DeviceAttribute { int: Some(0), ..Default::default() }),
                ("other.io/healthy".to_string(), DeviceAttribute { bool: Some(true), ..Default::default() }),
                (
                    "driverVersion".to_string(),
                    DeviceAttribute { version: Some("550.54.15".into()), ..Default::default() },
                ),
            ])),
            capacity: Some(BTreeMap::from([(
                "memory".to_string(),
                DeviceCapacity { value: Quantity(memory.into()), ..Default::default() },
            )])),
            ..Default::default()
        }
    }

    #[test]
    fn selectors_see_the_driver_attributes_and_capacity_as_kubernetes_names_them() {
        let mut s = Selectors::default();
        let d = device_value("gpu.nvidia.com", &gpu("NVIDIA A100-SXM4-80GB", "80Gi"));
        let yes = [
            "device.driver == 'gpu.nvidia.com'",
            "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')",
            "device.attributes['gpu.nvidia.com'].index == 0",
            "device.attributes['other.io'].healthy",
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
            "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('79Gi'))",
            "device.capacity['gpu.nvidia.com'].memory == quantity('80Gi')",
            "device.capacity['gpu.nvidia.com'].memory.asInteger() == 85899345920",
            "!device.allowMultipleAllocations",
            "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
            "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('v550.54', true)) > 0",
            "device.attributes['gpu.nvidia.com'].driverVersion.major() == 550",
            "device.attributes['gpu.nvidia.com'].driverVersion.patch() == 15",
            "device.attributes['gpu.nvidia.com'].driverVersion == semver('550.54.15')",
            "semver('1.2.3-rc.1').isLessThan(semver('1.2.3'))",
            "isSemver('1.2.3') && !isSemver('1.2') && isSemver('v1.2', true)",
        ];
        for e in yes {
            assert_eq!(s.matches(e, &d), Ok(true), "{e}");
        }
        assert_eq!(s.matches("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('40Gi'))", &d), Ok(false));
        assert_eq!(s.matches("device.driver == 'other'", &d), Ok(false));
    }

    #[test]
    fn a_bad_expression_says_why_and_never_panics() {
        let mut s = Selectors::default();
        let d = device_value("gpu.nvidia.com", &gpu("x", "1Gi"));
        for e in [
            "device.attributes['nope'].x",
            "device.driver",
            "device.capacity['gpu.nvidia.com'].memory > 40",
            "((",
            "quantity('garbage') == quantity('1')",
            "semver('1.2')",
            "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(quantity('1'))",
            "device.capacity['gpu.nvidia.com'].memory.major()",
            "",
        ] {
            let why = s.matches(e, &d).expect_err(e);
            assert!(why.contains("CEL expression"), "{e}: {why}");
        }
    }
}
