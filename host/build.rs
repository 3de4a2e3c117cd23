//! Records the commit the worker is built from, for `GET /` (Kafka Connect's `commit`): the
//! `WASM_CONNECT_COMMIT` environment variable if set (builds from a source archive), else
//! `git rev-parse`, else `unknown`. A build outside a git checkout still succeeds.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=WASM_CONNECT_COMMIT");
    let commit = std::env::var("WASM_CONNECT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=16", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=WASM_CONNECT_COMMIT={commit}");
    // Built again when HEAD moves: HEAD itself (a checkout), the branch it names (a commit),
    // packed refs. Only files that exist are named: cargo runs a script again on every build
    // while a named file is missing.
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name])
            && Path::new(&path).exists()
        {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
