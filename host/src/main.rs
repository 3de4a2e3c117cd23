//! The `wasm-connect` binary.

use std::process::ExitCode;

use clap::Parser;
use wasm_connect::cli::{Cli, Command};

/// mimalloc, for Rust and (through its `override` feature) for librdkafka's C allocations:
/// librdkafka allocates each fetched message on its broker thread and a task frees it on
/// another, and with glibc's allocator those frees wait on the broker thread's arena lock.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A worker reports what it does; one-shot commands only speak up about problems.
    let default_filter = match cli.command {
        // Third-party crates (the embedded broker's protocol codec in particular) are chatty at
        // info; tansu_storage logs expected outcomes (TopicAlreadyExists) as errors.
        Command::Standalone(_) => "warn,wasm_connect=info,plugin=info,tansu_storage=off",
        _ => "warn",
    };
    wasm_connect::logging::init(default_filter);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(cli.run())
}
