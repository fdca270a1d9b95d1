//! Half of the idle-TUI row of `scripts/perf.sh` (spec section 24 "Real-time Index
//! Synchronization"): while an `agents tui` runs on the data directory, edit one file of a
//! resource and time until a search of the resource's index finds the new word. The search
//! reads the index as it is (`View::open`, no update before the read), so only the TUI's
//! watcher can have brought the word in.
//!
//! Environment: `BENCH_IDLE_INDEX` (the resource's index directory), `BENCH_IDLE_FILE` (the
//! file to edit), `BENCH_IDLE_WORD` (the new word). Prints `searchable after N ms`, or
//! `not searchable after N ms` and exits 1. Release build; run by `scripts/perf.sh`.

// A benchmark program reports on stdout; that is its whole output.
#![allow(clippy::print_stdout)]

use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cleveragents_engine::index::Policy;
use cleveragents_engine::index::view::{SearchQuery, View};

/// How long the edit may take to become searchable before the run gives up.
const GIVE_UP: Duration = Duration::from_secs(10);

fn finds(dir: &std::path::Path, word: &str) -> bool {
    View::open(dir, None, &Policy::default())
        .and_then(|v| {
            v.search(&SearchQuery {
                query: word.into(),
                limit: 5,
                ..Default::default()
            })
        })
        .is_ok_and(|hits| !hits.is_empty())
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let (dir, file, word) = (
        PathBuf::from(var("BENCH_IDLE_INDEX")),
        PathBuf::from(var("BENCH_IDLE_FILE")),
        var("BENCH_IDLE_WORD"),
    );
    assert!(!finds(&dir, &word), "{word} is already in the index");
    let started = Instant::now();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .expect("the file to edit opens");
    writeln!(f, "// {word}").expect("the edit is written");
    drop(f);
    while !finds(&dir, &word) {
        if started.elapsed() > GIVE_UP {
            println!("not searchable after {} ms", started.elapsed().as_millis());
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("searchable after {} ms", started.elapsed().as_millis());
}
