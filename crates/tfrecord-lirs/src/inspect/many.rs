//! One command over many files (`index`, `verify`, `info`, `pad` of a set of shards):
//! the files shared out over worker threads, progress over their total bytes, every
//! file done even when some fail, and one summary naming each failure. The CLI and
//! the Python package both run their per-file loops through [`run_per_file`] and
//! print [`summary`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{Error, Result};

use crate::storage::Storage;

/// The most worker threads [`jobs`] picks by itself: the work is I/O and CRC bound,
/// and a few files in flight keep a disk or a network busy.
const MAX_AUTO_JOBS: usize = 8;

/// The worker threads for `requested` (0: automatic, the available parallelism up to
/// 8) over `files` files: never more than there are files.
pub fn jobs(requested: usize, files: usize) -> usize {
    let wanted = match requested {
        0 => crate::pool::threads_up_to(MAX_AUTO_JOBS),
        n => n,
    };
    wanted.clamp(1, files.max(1))
}

/// What became of one file.
#[derive(Debug)]
pub struct FileOutcome<T> {
    /// The file.
    pub path: PathBuf,
    /// Its result.
    pub result: Result<T>,
}

/// Runs `work` on every file of `files` with [`jobs`]`(jobs, files.len())` threads;
/// returns the outcomes in the order of `files` (each file is done whatever became of
/// the others). `work` gets the file and a callback for the bytes of it done so far;
/// `progress` gets the bytes done over all files (called from the worker threads).
pub fn run_per_file<T: Send>(
    files: &[PathBuf],
    jobs: usize,
    progress: &(dyn Fn(u64) + Sync),
    work: impl Fn(&Path, &mut dyn FnMut(u64)) -> Result<T> + Sync,
) -> Vec<FileOutcome<T>> {
    let threads = self::jobs(jobs, files.len());
    let next = AtomicUsize::new(0);
    let done_bytes = AtomicU64::new(0);
    let slots: Vec<Mutex<Option<Result<T>>>> = files.iter().map(|_| Mutex::new(None)).collect();
    let worker = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(path) = files.get(i) else { break };
        let mut reported = 0u64;
        let mut report = |done: u64| {
            let delta = done.saturating_sub(reported);
            reported = reported.max(done);
            progress(done_bytes.fetch_add(delta, Ordering::Relaxed) + delta);
        };
        // A panic in one file's work is that file's error, not the end of the run.
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(path, &mut report)))
                .unwrap_or_else(|_| {
                    Err(Error::internal(format!(
                        "{}: the work on this file panicked (a bug in tfrecord-lirs)",
                        path.display()
                    )))
                });
        if let Ok(mut slot) = slots[i].lock() {
            *slot = Some(result);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            // A thread the OS refuses leaves its share to the others.
            let _ = std::thread::Builder::new()
                .name("lirs-per-file".into())
                .spawn_scoped(scope, worker);
        }
        worker();
    });
    files
        .iter()
        .zip(slots)
        .map(|(path, slot)| FileOutcome {
            path: path.clone(),
            result: slot
                .into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err(Error::internal("a worker thread did not finish"))),
        })
        .collect()
}

/// The summary of a run of `verb` ("indexed", "verified", ...) over `outcomes`: how many
/// files succeeded, and each failed file with its error (as the front end `say`s it) on
/// a line of its own.
pub fn summary<T>(
    verb: &str,
    outcomes: &[FileOutcome<T>],
    say: &dyn Fn(&Error) -> String,
) -> String {
    let failed: Vec<&FileOutcome<T>> = outcomes.iter().filter(|o| o.result.is_err()).collect();
    let mut text = format!(
        "{verb} {} of {} files",
        outcomes.len() - failed.len(),
        outcomes.len()
    );
    if failed.is_empty() {
        return text;
    }
    text.push_str(&format!("; {} failed:", failed.len()));
    for outcome in failed {
        if let Err(e) = &outcome.result {
            // Most errors name their file first already.
            let message = say(e);
            let path = outcome.path.display().to_string();
            if message.starts_with(&path) {
                text.push_str(&format!("\n  {message}"));
            } else {
                text.push_str(&format!("\n  {path}: {message}"));
            }
        }
    }
    text
}

/// Where `pad` of many inputs writes `input`: the directory `out_dir`, under the
/// input's file name. Two inputs with the same file name are refused by
/// [`pad_outputs`].
pub fn pad_output_in(out_dir: &Path, input: &Path) -> Result<PathBuf> {
    let name = input.file_name().ok_or_else(|| {
        Error::invalid_argument(format!(
            "{}: the input has no file name to name its padded copy by",
            input.display()
        ))
    })?;
    // The copy is plain TFRecord: a compressed input's extension is dropped.
    let name = name.to_string_lossy();
    let plain = [".gz", ".gzip", ".zlib", ".GZ", ".GZIP", ".ZLIB"]
        .iter()
        .find_map(|ext| name.strip_suffix(ext).filter(|n| !n.is_empty()))
        .unwrap_or(&name);
    Ok(out_dir.join(plain))
}

/// The outputs of `pad` of `inputs` into directory `out_dir` (see [`pad_output_in`]),
/// made if missing (as `mkdir -p`); refuses two inputs of the same file name (one copy
/// would replace the other) and an `out_dir` that is a file.
pub fn pad_outputs(inputs: &[PathBuf], out_dir: &Path) -> Result<Vec<PathBuf>> {
    pad_outputs_in(&Storage::local(), inputs, out_dir)
}

/// [`pad_outputs`] into `out_dir` through `storage`: a URL `out_dir` is a prefix, not a
/// directory to check (object stores have none).
pub fn pad_outputs_in(
    storage: &Storage,
    inputs: &[PathBuf],
    out_dir: &Path,
) -> Result<Vec<PathBuf>> {
    if storage.is_local(out_dir) && !out_dir.is_dir() {
        if out_dir.exists() {
            return Err(Error::invalid_argument(format!(
                "{} is not a directory: pad of several inputs writes each input's padded copy into an output directory",
                out_dir.display()
            )));
        }
        // An output directory named for the copies is made, as `mkdir -p` would.
        std::fs::create_dir_all(out_dir).map_err(|e| Error::io(out_dir, e))?;
    }
    let mut seen = std::collections::HashMap::new();
    inputs
        .iter()
        .map(|input| {
            let out = pad_output_in(out_dir, input)?;
            if let Some(first) = seen.insert(out.clone(), input.clone()) {
                return Err(Error::invalid_argument(format!(
                    "{} and {} have the same file name: their padded copies would both be {}",
                    first.display(),
                    input.display(),
                    out.display()
                )));
            }
            Ok(out)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_done_and_failures_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = (0..7).map(|i| dir.path().join(format!("f{i}"))).collect();
        for (i, f) in files.iter().enumerate() {
            if i != 3 {
                std::fs::write(f, vec![0u8; 10 * i]).unwrap();
            }
        }
        let last = AtomicU64::new(0);
        let outcomes = run_per_file(
            &files,
            3,
            &|done| {
                last.fetch_max(done, Ordering::Relaxed);
            },
            |path, report| {
                let len = std::fs::metadata(path)
                    .map_err(|e| Error::io(path, e))?
                    .len();
                report(len);
                Ok(len)
            },
        );
        assert_eq!(outcomes.len(), 7);
        assert_eq!(
            last.load(Ordering::Relaxed),
            (0..7).filter(|&i| i != 3).map(|i| 10 * i).sum::<u64>()
        );
        for (i, o) in outcomes.iter().enumerate() {
            assert_eq!(o.path, files[i]);
            assert_eq!(o.result.is_ok(), i != 3);
        }
        let text = summary("checked", &outcomes, &Error::to_string);
        assert!(
            text.starts_with("checked 6 of 7 files; 1 failed:\n  "),
            "{text}"
        );
        assert!(text.contains("f3: "), "{text}");
        assert_eq!(
            summary("checked", &outcomes[..2], &Error::to_string),
            "checked 2 of 2 files"
        );
    }

    #[test]
    fn jobs_are_bounded_by_the_files() {
        assert_eq!(jobs(4, 2), 2);
        assert_eq!(jobs(1, 10), 1);
        assert!((1..=MAX_AUTO_JOBS).contains(&jobs(0, 100)));
        assert_eq!(jobs(0, 0), 1);
    }

    #[test]
    fn pad_outputs_need_a_directory_and_distinct_names() {
        let dir = tempfile::tempdir().unwrap();
        let a = PathBuf::from("x/a.tfrecord");
        let b = PathBuf::from("y/b.tfrecord");
        let gz = PathBuf::from("c.tfrecord.gz");
        assert_eq!(
            pad_output_in(dir.path(), &gz).unwrap(),
            dir.path().join("c.tfrecord")
        );
        let outs = pad_outputs(&[a.clone(), b.clone()], dir.path()).unwrap();
        assert_eq!(
            outs,
            vec![dir.path().join("a.tfrecord"), dir.path().join("b.tfrecord")]
        );
        let clash = pad_outputs(&[a.clone(), PathBuf::from("z/a.tfrecord")], dir.path());
        assert!(clash
            .unwrap_err()
            .to_string()
            .contains("have the same file name"));
        // A missing directory is made; a file where the directory should be is refused.
        let made = dir.path().join("made/deeper");
        let outs = pad_outputs(&[a.clone(), b.clone()], &made).unwrap();
        assert!(made.is_dir());
        assert_eq!(outs, vec![made.join("a.tfrecord"), made.join("b.tfrecord")]);
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let not_dir = pad_outputs(&[a, b], &file);
        assert!(not_dir
            .unwrap_err()
            .to_string()
            .contains("is not a directory"));
    }
}
