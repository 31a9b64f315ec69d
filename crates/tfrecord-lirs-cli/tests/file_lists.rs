//! Every command taking files takes patterns and shell expansions alike: a pattern is
//! expanded by the core (offset tables never taken for data), a second `index` over
//! the same pattern leaves current tables as they are, and `order` over several files
//! is the Loader's order.

use std::path::{Path, PathBuf};

use tfrecord_lirs::format;

mod common;

use common::{run, s, stderr, stdout};

/// `n` files of 10, 11, ... records; each record's payload is its global id (u64 LE).
fn shards(dir: &Path, n: usize) -> Vec<PathBuf> {
    let mut id = 0u64;
    (0..n)
        .map(|i| {
            let p = dir.join(format!("train.tfrecord-{i:05}-of-{n:05}"));
            let mut bytes = Vec::new();
            for _ in 0..(10 + i) {
                format::encode_record(&id.to_le_bytes(), &mut bytes);
                id += 1;
            }
            std::fs::write(&p, bytes).unwrap();
            p
        })
        .collect()
}

/// What a shell gives for `dir/train.tfrecord-*-of-*`: every match, sorted.
fn shell_expansion(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().contains("-of-"))
        .collect();
    all.sort();
    all
}

#[test]
fn index_twice_then_verify_over_a_pattern_quoted_or_shell_expanded() {
    let dir = tempfile::tempdir().unwrap();
    shards(dir.path(), 4);
    let pattern = dir.path().join("train.tfrecord-*-of-*");
    let first = run(&["index", s(&pattern)]);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    assert!(
        stdout(&first).contains("indexed 4 of 4 files"),
        "{}",
        stdout(&first)
    );
    // The second launch of a script: the shell now also expands to the 4 tables.
    let expanded = shell_expansion(dir.path());
    assert_eq!(expanded.len(), 8);
    let mut args = vec!["index"];
    args.extend(expanded.iter().map(|p| s(p)));
    let second = run(&args);
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    assert!(
        stdout(&second).contains("indexed 4 of 4 files"),
        "{}",
        stdout(&second)
    );
    assert_eq!(
        stdout(&second).matches("(table current)").count(),
        4,
        "{}",
        stdout(&second)
    );
    assert_eq!(
        stderr(&second).matches("is current (not rebuilt)").count(),
        4
    );
    // The same quoted.
    let third = run(&["index", s(&pattern)]);
    assert_eq!(third.status.code(), Some(0), "{}", stderr(&third));
    assert_eq!(stdout(&third).matches("(table current)").count(), 4);
    // verify right after index, shell-expanded and quoted.
    args[0] = "verify";
    let verify = run(&args);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    assert!(
        stdout(&verify).contains("verified 4 of 4 files"),
        "{}",
        stdout(&verify)
    );
    let verify = run(&["verify", s(&pattern)]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    let info = run(&["info", s(&pattern)]);
    assert_eq!(info.status.code(), Some(0), "{}", stderr(&info));
}

#[test]
fn a_pattern_of_nothing_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    shards(dir.path(), 2);
    let none = dir.path().join("valid.tfrecord-*");
    for command in ["index", "verify", "info", "order"] {
        let mut args = vec![command, s(&none)];
        if command == "order" {
            args.extend(["--seed", "1"]);
        }
        let out = run(&args);
        assert_eq!(out.status.code(), Some(1), "{command}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(s(&none)) && err.contains("no data file matches"),
            "{err}"
        );
    }
    // A pattern of tables only matches no data file.
    run(&["index", s(&dir.path().join("train.tfrecord-*"))]);
    let tables = dir.path().join("*.offsets");
    let out = run(&["verify", s(&tables)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no data file matches"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_single_file_index_still_prints_the_count_alone() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path(), 1);
    for _ in 0..2 {
        let out = run(&["index", s(&files[0])]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(stdout(&out), "10\n");
    }
}

#[test]
fn order_over_several_files_is_the_loaders_order() {
    let dir = tempfile::tempdir().unwrap();
    let files = shards(dir.path(), 3);
    let pattern = dir.path().join("train.tfrecord-*-of-*");
    assert_eq!(run(&["index", s(&pattern)]).status.code(), Some(0));
    let pairs: Vec<(PathBuf, PathBuf)> = files
        .iter()
        .map(|f| (f.clone(), tfrecord_lirs::default_table_path(f)))
        .collect();
    let reader = std::sync::Arc::new(
        tfrecord_lirs::Reader::open(&pairs, &tfrecord_lirs::ReaderOptions::default()).unwrap(),
    );
    for (shards, index) in [(1u64, 0u64), (2, 1)] {
        let options = tfrecord_lirs::LoaderOptions {
            seed: 7,
            num_shards: shards,
            shard_index: index,
            ..Default::default()
        };
        let mut loader = tfrecord_lirs::DatasetLoader::new(reader.clone(), options).unwrap();
        loader.set_epoch(2);
        let walked = loader_ids(&mut loader);
        let (n, i) = (shards.to_string(), index.to_string());
        let out = run(&[
            "order",
            s(&pattern),
            "--seed",
            "7",
            "--epoch",
            "2",
            "--num-shards",
            &n,
            "--shard-index",
            &i,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let printed: Vec<u64> = stdout(&out).lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(printed, walked);
        if shards == 1 {
            assert_eq!(printed.len(), 10 + 11 + 12);
        }
    }
}

/// The ids a loader delivers in its current epoch (each payload is its id).
fn loader_ids(loader: &mut tfrecord_lirs::DatasetLoader) -> Vec<u64> {
    let mut ids = Vec::new();
    loader.begin().unwrap();
    while let Some(batch) = loader.next_batch() {
        for payload in batch.unwrap().iter() {
            ids.push(u64::from_le_bytes(payload.try_into().unwrap()));
        }
    }
    ids
}
