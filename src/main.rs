//! The `kdigest` binary: parse arguments, run, map errors to exit codes.

use std::process::ExitCode;

use clap::Parser;
use kdigest::cli::{Cli, exit_code, run};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            for cause in error.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::from(exit_code(&error))
        }
    }
}
