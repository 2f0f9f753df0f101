//! The integration tests, one binary with a module per area (as cargo's own testsuite): the
//! library is linked once for all of them. Each area drives the library, the real binary, a real
//! simulator on a loopback port and a real SQLite ledger in a temporary directory; `support`
//! holds what they share.
//!
//! Run one area with `cargo test --test suite AREA::` (e.g. `chaos::`). A new area is a file
//! `tests/suite/AREA.rs` and a line `mod AREA;` below. `tests/wide_rows.rs` stays a binary of its
//! own: it measures the peak memory of the runs it starts, and a child's peak (`wait4`) counts
//! the memory of the process that started it, here the whole suite.

#[path = "../support/mod.rs"]
mod support;

mod after_sending;
mod approval_record;
mod approved;
mod attack_compact;
mod attack_early_look;
mod attack_lost;
mod attack_send;
mod attack_service;
mod attack_sim_state;
mod attack_speed;
mod attack_summary;
mod attack_thread;
mod attack_window;
mod books;
mod cancelled_intents;
mod cards;
mod chaos;
mod client_contract;
mod converted_preflight;
mod csv_input;
mod excel;
mod fast_defaults;
mod finance_edges;
mod fuzz_input;
mod header_hint;
mod help;
mod history;
mod hostile_answers;
mod hostile_csv;
mod hostile_service;
mod in_flight;
mod journal_formats;
mod json_keys;
mod key_echo;
mod ledger_v7;
mod minimal_answers;
mod mismatch;
mod multi_item;
mod one_pass;
mod operator;
mod operator_day;
mod ops;
mod output_targets;
mod outputs;
mod payouts;
mod period_report;
mod pipeline;
mod pipes_and_advice;
mod readonly;
mod reconcile;
mod refused_items;
mod repeats;
mod report;
mod result_format;
mod security;
mod service_ledger;
mod sim_cli;
mod sim_endpoints;
mod sim_faults;
mod sim_orders;
mod sim_payout_life;
mod status_during_run;
mod terminal;
mod window;
