//! `paybatch sim serve`, the built binary: it starts fast, says it is simulated, prints its
//! address and key, answers, stops on SIGTERM, and refuses a non-loopback address.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn paybatch() -> Command {
    Command::new(env!("CARGO_BIN_EXE_paybatch"))
}

/// Kills the child (by its handle) if a test ends early.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_prints_its_address_and_key_answers_and_stops_on_sigterm() {
    let started = Instant::now();
    let mut child = paybatch()
        .args(["sim", "serve", "--addr", "127.0.0.1:0", "--seed", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn paybatch");
    let stdout = child.stdout.take().expect("stdout");
    let mut running = Running(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok).take(2) {
            let _ = tx.send(line);
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("first line");
    let second = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("second line");
    assert!(started.elapsed() < Duration::from_secs(10));
    let prefix = "paybatch simulator (SIMULATED playground) listening on ";
    assert!(first.starts_with(prefix), "{first}");
    let base = first[prefix.len()..].to_string();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/v2"),
        "{base}"
    );
    assert_eq!(second, format!("api key: {}", paybatch::sim::DEFAULT_KEY));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let pong = rt.block_on(async {
        reqwest::Client::new()
            .get(format!("{base}/ping"))
            .header("X-Api-Key", paybatch::sim::DEFAULT_KEY)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .expect("ping")
            .text()
            .await
            .expect("body")
    });
    assert_eq!(pong, r#"{"message":"pong"}"#);

    #[cfg(unix)]
    {
        let pid = running.0.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = running.0.try_wait().expect("wait") {
                assert!(status.success(), "{status:?}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "still running 10 s after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn serve_refuses_a_non_loopback_address_without_public() {
    let out = paybatch()
        .args(["sim", "serve", "--addr", "0.0.0.0:0"])
        .output()
        .expect("run paybatch");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--public"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing was served");
}

#[test]
fn serve_rejects_malformed_flags() {
    for args in [
        &["--balance", "USD"][..],
        &["--balance", "USD=lots"],
        &["--addr", "localhost"],
        &["--failure-rate", "x"],
    ] {
        let out = paybatch()
            .args(["sim", "serve"])
            .args(args)
            .output()
            .expect("run paybatch");
        assert_eq!(out.status.code(), Some(2), "{args:?}: clap usage error");
    }
    let out = paybatch()
        .args([
            "sim",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--failure-rate",
            "1.5",
        ])
        .output()
        .expect("run paybatch");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("failure_rate"));
}
