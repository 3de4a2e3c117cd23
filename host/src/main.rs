//! The `wasm-connect` binary.

use std::process::ExitCode;

use clap::Parser;
use wasm_connect::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A worker reports what it does; one-shot commands only speak up about problems.
    let default_filter = match cli.command {
        // tansu logs expected protocol outcomes (e.g. TopicAlreadyExists) as errors.
        Command::Standalone(_) => "info,librdkafka=warn,tansu_storage=off,tansu_broker=warn",
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
