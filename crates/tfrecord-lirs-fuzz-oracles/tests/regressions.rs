//! Every input under `fuzz/regressions/TARGET/` (each once found a bug, or is a seed
//! kept with them) replayed through TARGET's oracle, the code the libFuzzer target
//! runs, in a plain `cargo test`: a fixed finding cannot come back unseen.

use std::path::{Path, PathBuf};

use tfrecord_lirs_fuzz_oracles::{common, replay, TARGETS};

fn regressions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions")
}

/// One test, not one per target: the oracles share one scratch directory.
#[test]
fn every_regression_input_passes_its_oracle() {
    /// Removes the oracles' scratch directory however the test ends.
    struct RemoveScratch;
    impl Drop for RemoveScratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(common::scratch());
        }
    }
    let _scratch = RemoveScratch;
    let root = regressions_dir();
    let mut replayed = 0;
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|d| d.unwrap().path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let target = dir.file_name().unwrap().to_string_lossy().into_owned();
        // A directory named after no target would never be replayed.
        assert!(
            TARGETS.contains(&target.as_str()),
            "{}: no fuzz target {target:?} (known: {TARGETS:?})",
            dir.display()
        );
        let mut inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|f| f.unwrap().path())
            .collect();
        inputs.sort();
        for input in inputs {
            let bytes = std::fs::read(&input).unwrap();
            eprintln!("replaying {}", input.display());
            replay(&target, &bytes).unwrap();
            replayed += 1;
        }
    }
    assert!(
        replayed > 0,
        "no regression inputs under {}",
        root.display()
    );
}

/// The trusted empty-table reproducer decodes into the input it was found as, so the
/// replay above really runs that case (and a change of the input type that would make
/// old inputs mean something else is noticed).
#[test]
fn the_trusted_empty_table_reproducer_decodes_as_found() {
    use tfrecord_lirs_fuzz_oracles::{decode, table_open_read};
    let bytes = std::fs::read(
        regressions_dir().join("table_open_read/trusted-empty-table-beside-a-record"),
    )
    .unwrap();
    let input: table_open_read::Input = decode(&bytes).expect("decodes");
    assert!(input.trust_table, "{input:?}");
    assert!(
        matches!(&input.table, table_open_read::Table::Raw(t) if t.is_empty()),
        "{input:?}"
    );
}
