//! Policy files: `validate` (admission, the same checks a hot reload makes) and `new` (a
//! policy project of one's own).

use std::path::PathBuf;
use std::process::ExitCode;

use wasmsched::scaffold::{self, Lang};
use wasmsched::{admission, world};

use super::{RuntimeArgs, print_admissions};

/// `wasmsched validate`: one line per file; a failure for any file that would not serve.
pub fn validate(files: &[PathBuf], runtime: &RuntimeArgs) -> anyhow::Result<ExitCode> {
    let (rt, limits) = runtime.runtime()?;
    let world = world::sample::with_queue(2, 6, 2, 5);
    let results = files.iter().map(|f| (f.display().to_string(), admission::admit_file(&rt, f, limits, &world)));
    let failed = print_admissions(results);
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `wasmsched new`: write a policy project and say what to run next.
pub fn new(name: &str, lang: Lang, dir: Option<PathBuf>, sdk: Option<PathBuf>) -> anyhow::Result<ExitCode> {
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    let project = scaffold::create(name, lang, &dir, &sdk.unwrap_or_else(scaffold::default_sdk))?;
    let [install, test, build] = project.commands();
    out!("wrote a {lang} policy project in {}; next, in that folder:", project.dir.display());
    out!("  {install:<64} # the toolchain, once\n  {test:<64} # the native tests\n  {build:<64} # the component");
    out!("  wasmsched validate {}", project.wasm.display());
    Ok(ExitCode::SUCCESS)
}
