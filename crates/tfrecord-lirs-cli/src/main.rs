//! `tfrecord-lirs`: index, pad, verify, inspect and read TFRecord files at random.
//!
//! Exit status: 0 success; 1 a data or validation error (one `error: …` line on stderr
//! naming the file and, where relevant, the instance id and byte offset); 2 a usage error.
//!
//! Paths are local files, or object-storage URLs (`s3://`, `gs://`, `az://`,
//! `http(s)://`) read and written through the core's [`Storage`] with its
//! `object_store` client; any other scheme (`ram://`, `hdfs://`: TensorFlow's) is a
//! usage error saying so.
//!
//! The command line's schema is in `args.rs`, the usage rules clap cannot say in
//! `usage.rs`, how results and failures are printed in `report.rs`, where files are in
//! `storage.rs`; each subcommand has its own file.
//!
//! [`Storage`]: tfrecord_lirs::Storage

mod args;
mod export;
mod get;
mod index;
mod info;
mod order;
mod pad;
mod remedy;
mod report;
mod storage;
mod usage;
mod verify;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::report::{Failure, Outcome};

fn main() -> ExitCode {
    let cli = Cli::parse(); // usage errors exit 2
    usage::check(&cli.command); // exits 2 on a usage error
    let cached = storage::use_cache(cli.cache_dir.as_deref(), cli.cache_bytes);
    match cached.and_then(|()| run(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Message(msg)) => {
            eprintln!("error: {}", msg.replace('\n', " "));
            ExitCode::from(1)
        }
        Err(Failure::Reported) => ExitCode::from(1),
    }
}

fn run(command: Command) -> Outcome {
    match command {
        Command::Index(args) => index::run(args),
        Command::Export(args) => export::run(args),
        Command::Pad(args) => pad::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Info(args) => info::run(args),
        Command::Get(args) => get::run(args),
        Command::Order(args) => order::run(args),
    }
}
