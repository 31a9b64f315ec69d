//! Usage errors clap's schema cannot say (exit status 2, as clap's own): rules that
//! tie several arguments together, and URLs of schemes this command does not serve.

use std::path::Path;

use clap::CommandFactory;
use tfrecord_lirs::cloud::ObjectStoreFileSystem;
use tfrecord_lirs::remote::scheme;
use tfrecord_lirs::text_index;

use crate::args::{Cli, Command, FitArg, IndexArgs, InfoArgs, OrderArgs, PadArgs, VerifyArgs};
use crate::storage::storage;

/// Exits with a usage error (status 2) if an argument is a URL object storage does
/// not serve, or if `command`'s arguments do not fit together.
pub fn check(command: &Command) {
    if let Some((url, scheme)) = unserved_url_argument() {
        Cli::command()
            .error(
                clap::error::ErrorKind::InvalidValue,
                format!(
                    "{url} is a {scheme}:// URL, but tfrecord-lirs reads local files and \
                     object storage only (s3://, gs://, az://, http(s)://); read {scheme}:// \
                     URLs with the Python package tfrecord_lirs, which uses TensorFlow's \
                     file systems"
                ),
            )
            .exit(); // exit 2: a usage error
    }
    if let Err((name, msg)) = check_arguments(command) {
        let mut cmd = Cli::command();
        cmd.build();
        let err = match cmd.find_subcommand_mut(name) {
            Some(sub) => sub.error(clap::error::ErrorKind::ArgumentConflict, msg),
            None => cmd.error(clap::error::ErrorKind::ArgumentConflict, msg),
        };
        err.exit(); // exit 2, like clap's own usage errors
    }
}

/// The first argument (also as `--opt=URL`) that is a URL of a scheme object storage
/// does not serve (`ram://`, `hdfs://`: TensorFlow's file systems), and its scheme.
fn unserved_url_argument() -> Option<(String, String)> {
    std::env::args_os().skip(1).find_map(|arg| {
        let arg = arg.to_str()?;
        let value = match arg.strip_prefix("--") {
            Some(opt) => opt.split_once('=')?.1,
            None => arg,
        };
        let scheme = scheme(Path::new(value))?;
        (!ObjectStoreFileSystem::serves(scheme)).then(|| (value.to_string(), scheme.to_string()))
    })
}

/// Checks that tie several arguments together: the subcommand and the message.
fn check_arguments(command: &Command) -> Result<(), (&'static str, String)> {
    match command {
        Command::Order(OrderArgs {
            num_shards,
            shard_index,
            ..
        }) if tfrecord_lirs::options::shard(*num_shards, *shard_index).is_err() => Err((
            "order",
            format!("--shard-index {shard_index} must be below --num-shards {num_shards}"),
        )),
        Command::Pad(PadArgs {
            fit: FitArg::Next | FitArg::Auto,
            window: Some(_),
            ..
        }) => Err((
            "pad",
            "--window applies only to --fit best (next-fit looks at one record at a time)".into(),
        )),
        Command::Index(IndexArgs {
            data,
            from: Some(_),
            ..
        }) if data.iter().any(|p| !storage().is_local(p)) => Err((
            "index",
            "--from FORMAT reads a local data file and its local text index (URLs: index \
             the object itself, without --from)"
                .into(),
        )),
        Command::Index(IndexArgs {
            data,
            from: Some(_),
            ..
        }) if data.len() != 2 => Err((
            "index",
            "--from FORMAT takes two arguments, DATA INDEX: the data file and its text index"
                .into(),
        )),
        Command::Index(IndexArgs {
            data,
            out: Some(_),
            from: None,
            ..
        }) if data.len() > 1 => Err((
            "index",
            "--out names one table: give one DATA with it (several files get DATA.offsets each)"
                .into(),
        )),
        // `index DATA INDEX` without --from: a text index is not a data file.
        Command::Index(IndexArgs {
            data, from: None, ..
        }) if data.len() > 1 => match data
            .iter()
            .find_map(|p| Some((p, text_index::format_by_name(p)?)))
        {
            Some((index, format)) => Err((
                "index",
                format!(
                    "{} is a text index ({format}), not a TFRecord file: build a table from it with `index DATA {} --from {format}`",
                    index.display(),
                    index.display()
                ),
            )),
            None => Ok(()),
        },
        Command::Verify(VerifyArgs {
            data,
            offsets: Some(_),
            ..
        })
        | Command::Info(InfoArgs {
            data,
            offsets: Some(_),
            ..
        }) if data.len() > 1 => Err((
            if matches!(command, Command::Verify(_)) {
                "verify"
            } else {
                "info"
            },
            "--offsets names one table: give one DATA with it".into(),
        )),
        Command::Pad(PadArgs {
            inputs,
            trust_table: true,
            ..
        }) if inputs.len() > 1 => Err((
            "pad",
            "--trust-table takes one INPUT (each file's table is its own)".into(),
        )),
        _ => Ok(()),
    }
}
