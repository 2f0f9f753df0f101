//! The help and the manual: every command's `--help` ends with examples (rendered in-process,
//! the same text as the binary's), the top-level help lists every exit code, and the manual
//! page has the sections a reader of manual pages looks for.

use crate::support::{Workspace, help_of, paybatch_in as paybatch, stdout_of as stdout};
use clap::CommandFactory;

/// Every command path (`["catalog", "list"]`), paybatch itself first.
fn commands() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, path: &[String], out: &mut Vec<Vec<String>>) {
        out.push(path.to_vec());
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            let mut p = path.to_vec();
            p.push(sub.get_name().to_string());
            walk(sub, &p, out);
        }
    }
    let mut out = Vec::new();
    walk(&paybatch::cli::Cli::command(), &[], &mut out);
    out
}

/// Every command's help, in-process (`help_of`); the binary prints the same text (checked on
/// one command and paybatch itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_help_ends_with_examples_of_real_commands() {
    let ws = Workspace::new();
    for args in [
        &["--help"][..],
        &["run", "-h"],
        &["catalog", "list", "--help"],
    ] {
        let out = paybatch(ws.dir.path(), args, &[]).await;
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert_eq!(stdout(&out), help_of(args), "{args:?}: the binary's help");
    }
    let all = commands();
    assert!(all.len() > 15, "{all:?}");
    for path in all {
        for flag in ["--help", "-h"] {
            let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
            args.push(flag);
            let text = help_of(&args);
            if path.is_empty() && flag == "-h" {
                continue; // the short help of paybatch itself is the list of commands
            }
            let examples = text
                .rfind("\nExamples:\n")
                .unwrap_or_else(|| panic!("{args:?} has no Examples section: {text}"));
            let tail = &text[examples + "\nExamples:\n".len()..];
            // Nothing follows the examples: each line is what it does, or the command.
            for line in tail.lines().filter(|l| !l.trim().is_empty()) {
                let line = line.trim();
                assert!(
                    line.starts_with("# ") || line.starts_with("paybatch "),
                    "{args:?}: the examples end the help: {line:?} in {tail}"
                );
            }
            // One of them at least is this command.
            let named = format!("paybatch {}", path.join(" "));
            let commands: Vec<&str> = tail
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("paybatch"))
                .collect();
            assert!(!commands.is_empty(), "{args:?}: {tail}");
            assert!(
                path.is_empty() || commands.iter().any(|c| c.starts_with(named.trim())),
                "{args:?}: {tail}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_top_level_help_lists_every_exit_code() {
    let ws = Workspace::new();
    let out = paybatch(ws.dir.path(), &["--help"], &[]).await;
    let text = stdout(&out);
    let codes = &text[text.find("Exit codes:").expect("exit codes")..];
    for code in ["0", "1", "2", "3", "4", "5", "6", "130", "143"] {
        assert!(
            codes
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{code} "))),
            "exit code {code}: {codes}"
        );
    }
    assert!(
        codes.contains("SIGINT") && codes.contains("SIGTERM"),
        "{codes}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manual_has_exit_status_environment_files_and_examples() {
    let ws = Workspace::new();
    let out = paybatch(ws.dir.path(), &["man"], &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let page = stdout(&out);
    let sections: Vec<&str> = page
        .lines()
        .filter_map(|l| l.strip_prefix(".SH "))
        .collect();
    for wanted in ["EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES"] {
        assert!(sections.contains(&wanted), "{wanted} in {sections:?}");
    }
    assert!(!sections.contains(&"EXTRA"), "{sections:?}");
    let exit_status = &page[page.find(".SH EXIT STATUS").expect("section")..];
    assert!(exit_status.contains("\\fB130\\fR") && exit_status.contains("\\fB143\\fR"));
    assert!(page.contains("\\fBPAYBATCH_LEDGER\\fR"), "{page}");
    assert!(page.contains("paybatch.db"), "{page}");

    // The page of each command has its own examples.
    let out = paybatch(ws.dir.path(), &["man", "--out-dir", "man1"], &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let report = std::fs::read_to_string(ws.path("man1").join("paybatch-report.1")).expect("page");
    assert!(report.contains(".SH EXAMPLES"), "{report}");
    assert!(report.contains("paybatch report \\-\\-batch"), "{report}");
}

/// `run --dry-run` is not a flag: it is refused (exit 2) before anything is read or made, with
/// where to look instead, not clap's tip about values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_dry_run_points_to_validate_and_plan_only() {
    let ws = Workspace::new();
    ws.write(
        "b.csv",
        "reference,product_code,face_value,currency\nR-1,AMZ-US,10.00,USD\n",
    );
    let out = paybatch(ws.dir.path(), &["run", "b.csv", "--dry-run"], &[]).await;
    let said = crate::support::stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("paybatch validate"), "{said}");
    assert!(said.contains("--plan-only"), "{said}");
    assert!(!said.contains("as a value"), "{said}");
    assert!(!ws.ledger().exists(), "nothing made");
    let json = paybatch(ws.dir.path(), &["run", "b.csv", "--dry-run", "--json"], &[]).await;
    let value: serde_json::Value =
        serde_json::from_str(stdout(&json).trim()).expect("the refusal as JSON");
    assert_eq!(value["exit_code"], 2, "{value}");
}
