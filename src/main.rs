//! The paybatch binary: parses arguments, sets up logging, runs the command, exits with its code.

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// A large batch allocates and frees millions of small strings; mimalloc does that faster than
/// the system allocator (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match paybatch::cli::parse() {
        Ok(cli) => cli,
        Err(code) => return exit_code(code),
    };
    let default_level = match (cli.quiet, cli.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, _) => "debug",
    };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(paybatch::cli::stderr_color())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return exit_code(paybatch::exit::UNEXPECTED);
        }
    };
    let code = runtime.block_on(paybatch::cli::dispatch(cli));
    // Do not wait for background tasks (an embedded simulator) to wind down.
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    exit_code(code)
}

/// The process's exit code: the command's outcome, mapped once in `cli` (0 to 6).
fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
