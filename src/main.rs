//! The paybatch binary: parses arguments, sets up logging, runs the command, exits with its code.

use std::process::ExitCode;

use paybatch::cli::CliError;
use paybatch::exit::Exit;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// A large batch allocates and frees millions of small strings; mimalloc does that faster than
/// the system allocator (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// What is logged: `RUST_LOG` when it reads as a list of `target=level` directives (or one
/// level), otherwise the level of `-q`/`-v`.
fn log_filter(rust_log: Option<&str>, default_level: &str) -> Targets {
    rust_log
        .and_then(|text| text.parse::<Targets>().ok())
        .or_else(|| default_level.parse().ok())
        .unwrap_or_default()
}

fn main() -> ExitCode {
    let cli = match paybatch::cli::parse() {
        Ok(cli) => cli,
        Err(e) => return finish(Err(e)),
    };
    let default_level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    let filter = log_filter(std::env::var("RUST_LOG").ok().as_deref(), default_level);
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(paybatch::cli::stderr_color()),
        )
        .with(filter)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return Exit::Unexpected.into();
        }
    };
    let result = runtime.block_on(paybatch::cli::dispatch(cli));
    // Do not wait for background tasks (an embedded simulator) to wind down.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    finish(result)
}

/// The process's exit code: the command's outcome, mapped once in `cli`; an error is printed
/// here, once (`error: ...` then `help: ...`).
fn finish(result: Result<Exit, CliError>) -> ExitCode {
    match result {
        Ok(exit) => exit.into(),
        Err(e) => {
            e.print();
            e.exit.into()
        }
    }
}
