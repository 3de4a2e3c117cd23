//! The `wasm-connect` binary.

use std::process::ExitCode;

use clap::Parser;
use wasm_connect::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A worker reports what it does; one-shot commands only speak up about problems.
    let default_filter = match cli.command {
        // Third-party crates (the embedded broker's protocol codec in particular) are chatty at
        // info; tansu_storage logs expected outcomes (TopicAlreadyExists) as errors.
        Command::Standalone(_) | Command::Distributed(_) => {
            "warn,wasm_connect=info,plugin=info,tansu_storage=off"
        }
        _ => "warn",
    };
    wasm_connect::logging::init(default_filter);
    if matches!(
        cli.command,
        Command::Standalone(_) | Command::Distributed(_)
    ) {
        wasm_connect::herder::capacity::raise_open_file_limit();
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(cli.run())
}
