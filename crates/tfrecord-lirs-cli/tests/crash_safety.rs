//! Crash safety of writing: `tfrecord-lirs pad` and `tfrecord-lirs index` are killed
//! with SIGKILL at each of the writers' kill points (the engine's feature
//! `fault-injection`: `TFRECORD_LIRS_KILL_AT=<point>[:<n>]`), so every kill lands at a
//! known step, and the output directory must never hold a table under its final name
//! that disagrees with the data file next to it: at each point the state is the one
//! that step allows (the old pair, no table beside complete data, or the new pair),
//! checked with `inspect` against the table. Temporary files a killed process leaves
//! behind (`.lirs-tmp-*`) are counted and removed; they never sit under a final name.
#![cfg(feature = "fault-injection")]

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tfrecord_lirs::{default_table_path, inspect, read_table, TFRecordWriter};

const BIN: &str = env!("CARGO_BIN_EXE_tfrecord-lirs");

/// A plain TFRecord file of `n` records of 100..1600 bytes; returns the instance count.
fn write_input(path: &Path, n: usize, salt: u8) -> u64 {
    let mut w = TFRecordWriter::create(path).unwrap();
    for i in 0..n {
        let len = 100 + (i * 7919) % 1500;
        let payload: Vec<u8> = (0..len)
            .map(|j| 1 + ((i * 31 + j + salt as usize) % 250) as u8)
            .collect();
        w.write_instance(&payload).unwrap();
    }
    w.finish_synced(false).unwrap();
    n as u64
}

/// Runs `args` to completion.
fn run_to_end(args: &[&str]) {
    let status = Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{args:?}");
}

/// Runs `args` with the kill point `at`; asserts that the process was killed there.
fn run_killed_at(args: &[&str], at: &str) {
    let status = Command::new(BIN)
        .args(args)
        .env("TFRECORD_LIRS_KILL_AT", at)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "{args:?} with kill point {at}: not killed there ({status})"
    );
}

/// Removes and counts temporary files left by a killed writer.
fn sweep_temporaries(dir: &Path) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(".lirs-tmp-")
        {
            std::fs::remove_file(entry.path()).unwrap();
            n += 1;
        }
    }
    n
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// What a directory holds after a kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A table that matches its data file, of this many instances.
    Pair(u64),
    /// A complete data file of this many instances and no table.
    DataOnly(u64),
}

/// The state of `data` and its table; panics if the table disagrees with the data or
/// the data under its final name is damaged.
fn state(data: &Path, what: &str) -> State {
    let table_path = default_table_path(data);
    if table_path.exists() {
        let table = read_table(&table_path).unwrap_or_else(|e| panic!("{what}: {e}"));
        let found = inspect(data, Some((&table_path, &table)), None)
            .unwrap_or_else(|e| panic!("{what}: table disagrees with its data file: {e}"));
        State::Pair(found.instances)
    } else {
        let found = inspect(data, None, None)
            .unwrap_or_else(|e| panic!("{what}: data file without table is damaged: {e}"));
        State::DataOnly(found.instances)
    }
}

#[test]
fn pad_killed_at_each_step_leaves_the_old_pair_no_table_or_the_new_pair() {
    let dir = tempfile::tempdir().unwrap();
    let inputs: Vec<(PathBuf, u64)> = [(3_000usize, 1u8), (2_200, 2)]
        .iter()
        .enumerate()
        .map(|(k, &(n, salt))| {
            let p = dir.path().join(format!("input{k}.tfrecord"));
            let count = write_input(&p, n, salt);
            (p, count)
        })
        .collect();
    let out = dir.path().join("out.tfrecord");
    // Each step of `pad` over an existing pair (the old one, of the other input), and
    // the state it must leave when killed there.
    let (old, new) = (&inputs[0], &inputs[1]);
    let steps: [(&str, State); 8] = [
        ("data-instance:1", State::Pair(old.1)),
        ("data-instance:1000", State::Pair(old.1)),
        ("old-table-removed", State::DataOnly(old.1)),
        ("data-written", State::DataOnly(old.1)),
        ("data-renamed", State::DataOnly(new.1)),
        ("table-entries", State::DataOnly(new.1)),
        ("table-written", State::DataOnly(new.1)),
        ("table-renamed", State::Pair(new.1)),
    ];
    let mut temporaries = 0;
    for (at, expected) in steps {
        for (page, fit) in [("4096", "next"), ("512", "best"), ("65536", "next")] {
            // The old pair, complete.
            run_to_end(&["pad", path_str(&old.0), path_str(&out), "--force"]);
            assert_eq!(state(&out, "the old pair"), State::Pair(old.1));
            let args = [
                "pad",
                path_str(&new.0),
                path_str(&out),
                "--page-size",
                page,
                "--fit",
                fit,
                "--force",
            ];
            run_killed_at(&args, at);
            let what = format!("{args:?} killed at {at}");
            assert_eq!(state(&out, &what), expected, "{what}");
            temporaries += sweep_temporaries(dir.path());
        }
    }
    // Killed while a temporary file was open, the writer leaves it (never renamed).
    assert!(temporaries > 0);
}

#[test]
fn index_killed_at_each_step_leaves_the_old_table_or_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.tfrecord");
    let table_path = default_table_path(&data);
    // A stale table: the file's first 1000 records were indexed, then more appended.
    write_input(&data, 1000, 3);
    run_to_end(&["index", path_str(&data)]);
    let stale = std::fs::read(&table_path).unwrap();
    write_input(&data, 6_000, 3);
    run_to_end(&["index", path_str(&data)]);
    let fresh = std::fs::read(&table_path).unwrap();
    assert_ne!(stale, fresh);

    // Another out-of-date table: the fresh one without its last entry (a table that is
    // current is left as it is, with no step to kill at).
    let short = fresh[..fresh.len() - 8].to_vec();
    let mut temporaries = 0;
    // Each step, and whether the table is the new one once killed there.
    for (at, replaced) in [
        ("table-entries", false),
        ("table-written", false),
        ("table-renamed", true),
    ] {
        for before in [&stale, &short] {
            std::fs::write(&table_path, before).unwrap();
            run_killed_at(&["index", path_str(&data)], at);
            let now = std::fs::read(&table_path).unwrap();
            let expected = if replaced { &fresh } else { before };
            assert!(
                now == *expected,
                "killed at {at}: the table is not the {} one ({} bytes)",
                if replaced { "new" } else { "old" },
                now.len()
            );
            if now == fresh {
                let offsets = read_table(&table_path).unwrap();
                inspect(&data, Some((&table_path, &offsets)), None)
                    .unwrap_or_else(|e| panic!("killed at {at}: {e}"));
            }
            temporaries += sweep_temporaries(dir.path());
        }
    }
    assert!(temporaries > 0);
}
