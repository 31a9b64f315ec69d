//! How results reach the terminal: a command's failure (one `error:` line, exit
//! status 1), stdout that tolerates a closed pipe, progress bars on a terminal's
//! stderr, and runs over several files with their per-file lines and summary.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use tfrecord_lirs::many::FileOutcome;
use tfrecord_lirs::Error;

use crate::storage::file_size;

/// A command's failure: printed as one `error:` line, exit status 1.
pub enum Failure {
    /// The message to print.
    Message(String),
    /// Already printed (the summary of a run over several files).
    Reported,
}

/// A core error in the CLI's words ([`crate::remedy`]).
impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Message(crate::remedy::say(&e))
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Message(message)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::Message(e.to_string())
    }
}

pub type Outcome = Result<(), Failure>;

/// A byte-count progress bar on stderr, shown only when stderr is a terminal.
pub fn progress(total: u64, what: &str) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// Writes to stdout, treating a closed pipe (`| head`) as a normal end.
pub fn write_stdout(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Outcome {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match f(&mut out).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|e| Failure::Message(format!("stdout: {e}"))),
    }
}

/// The outcomes of `work` over `files` (see [`tfrecord_lirs::many::run_per_file`]),
/// with one progress bar over their total bytes.
pub fn run_files<T: Send>(
    command: &str,
    files: &[PathBuf],
    jobs: usize,
    work: impl Fn(&Path, &mut dyn FnMut(u64)) -> Result<T, Error> + Sync,
) -> Vec<FileOutcome<T>> {
    let total = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let bar = progress(total, command);
    let outcomes =
        tfrecord_lirs::many::run_per_file(files, jobs, &|done| bar.set_position(done), work);
    bar.finish_and_clear();
    outcomes
}

/// Exit status of a run over several files: the summary on stdout when all succeeded,
/// on stderr (as the `error:` line, each failure on its own line) when any failed.
pub fn finish_files<T>(command: &str, verb: &str, outcomes: &[FileOutcome<T>]) -> Outcome {
    let summary = tfrecord_lirs::many::summary(verb, outcomes, &crate::remedy::say);
    if outcomes.iter().any(|o| o.result.is_err()) {
        eprintln!("error: {command}: {summary}");
        return Err(Failure::Reported);
    }
    write_stdout(|out| writeln!(out, "{summary}"))
}

/// `command` over `files`: `work` returns (what one file alone prints, what it prints
/// after the file's name among several). One file keeps the single-file output and
/// error line exactly; several print each file's result, then the summary.
pub fn per_file(
    command: &str,
    verb: &str,
    files: &[PathBuf],
    jobs: usize,
    work: impl Fn(&Path, &mut dyn FnMut(u64)) -> Result<(String, String), Error> + Sync,
) -> Outcome {
    if let [file] = files {
        let bar = progress(file_size(file)?, command);
        let (alone, _) = work(file, &mut |done| bar.set_position(done))?;
        bar.finish_and_clear();
        return write_stdout(|out| write!(out, "{}", with_newline(&alone)));
    }
    let outcomes = run_files(command, files, jobs, work);
    write_stdout(|out| {
        for o in &outcomes {
            if let Ok((_, among)) = &o.result {
                write!(out, "{}: {}", o.path.display(), with_newline(among))?;
            }
        }
        Ok(())
    })?;
    finish_files(command, verb, &outcomes)
}

fn with_newline(text: &str) -> String {
    if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    }
}
