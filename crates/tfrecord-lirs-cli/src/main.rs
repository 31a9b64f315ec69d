//! `tfrecord-lirs`: index, pad, verify, inspect and read TFRecord files at random.
//!
//! Exit status: 0 success; 1 a data or validation error (one `error: …` line on stderr
//! naming the file and, where relevant, the instance id and byte offset); 2 a usage error.
//!
//! Paths are local files, or object-storage URLs (`s3://`, `gs://`, `az://`,
//! `http(s)://`) read and written through the core's [`Storage`] with its
//! `object_store` client; any other scheme (`ram://`, `hdfs://`: TensorFlow's) is a
//! usage error saying so.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use tfrecord_lirs::cloud::ObjectStoreFileSystem;
use tfrecord_lirs::options::defaults;
use tfrecord_lirs::remote::{is_url, scheme};
use tfrecord_lirs::text_index::{self, encode_text_index, TextIndexFormat};
use tfrecord_lirs::{
    default_table_path, Error, ErrorKind, OrderParams, OrderVersion, PageSize, Reader,
    ReaderOptions, Storage,
};

#[derive(Parser)]
#[command(
    name = "tfrecord-lirs",
    version,
    about = "Random access and full-range shuffling for TFRecord files (LIRS)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// `--page-size`: a power of two from 512 to 16777216, else a usage error.
fn parse_page_size(s: &str) -> Result<u64, String> {
    let bytes: u64 = s.parse().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::page_size(bytes)
        .map(PageSize::get)
        .map_err(|_| page_size_words(bytes))
}

/// `--num-shards`: at least 1 (the core's rule).
fn parse_num_shards(s: &str) -> Result<u64, String> {
    let n = s.parse::<u64>().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::num_shards(n).map_err(|e| e.to_string())
}

/// `--order-version`: 1 or 2.
fn parse_order_version(s: &str) -> Result<OrderVersion, String> {
    let number = s.parse::<u64>().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::order_version(number).map_err(|e| e.to_string())
}

/// `--window`: at least one record.
fn parse_window(s: &str) -> Result<usize, String> {
    let n = s.parse::<usize>().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::best_fit_lookahead(n as u64).map_err(|e| e.to_string())?;
    Ok(n)
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FitArg {
    /// Streaming, keeps input order.
    Next,
    /// Bounded look-ahead window; may reorder.
    Best,
    /// Best fit if the padding pays for these records (it saves a larger share of page
    /// reads than the share of bytes it adds), else no padding; says what it chose.
    Auto,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CompressionArg {
    /// A plain TFRecord file.
    None,
    /// A gzip stream (TFRecordOptions(compression_type="GZIP")).
    Gzip,
    /// A zlib stream (TFRecordOptions(compression_type="ZLIB")).
    Zlib,
}

/// The text index formats of other TFRecord readers (docs/FORMAT.md).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum IndexFormatArg {
    /// NVIDIA DALI's `tfrecord2idx` (`offset size` per record).
    Dali,
    /// The `tfrecord` PyPI package's `tfrecord2idx` (`offset size` per record).
    TfrecordPy,
}

impl From<IndexFormatArg> for TextIndexFormat {
    fn from(arg: IndexFormatArg) -> TextIndexFormat {
        match arg {
            IndexFormatArg::Dali => TextIndexFormat::Dali,
            IndexFormatArg::TfrecordPy => TextIndexFormat::TfrecordPy,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Scan DATA (CRC-checked, fillers skipped), write its offset table, print the instance count.
    ///
    /// With `--from FORMAT INDEX`, the table is taken from a DALI or `tfrecord`-package
    /// text index and checked against DATA (every record's CRCs; each entry's offset and
    /// size; unlisted records must be fillers); a wrong index is an error naming its line.
    ///
    /// Several files (`index a b c`, or a shell glob) are indexed each to its own
    /// table, `--jobs` at a time: every file is done even if some fail, and a summary
    /// names each failure (exit status 1 if any failed).
    Index {
        /// The TFRecord files (with --from: DATA INDEX, a data file and its text index).
        #[arg(required = true, value_name = "DATA")]
        data: Vec<PathBuf>,
        /// The format of the text index INDEX (the second argument).
        #[arg(long, value_enum, value_name = "FORMAT")]
        from: Option<IndexFormatArg>,
        /// Where to write the table [default: DATA.offsets] (one DATA only).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Files worked on at once (0: automatic).
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// fsync the table and its directory before exiting (durable on power loss).
        #[arg(long)]
        sync: bool,
    },
    /// Write a DALI or `tfrecord`-package text index of DATA (instances only, fillers left
    /// out), print the instance count.
    Export {
        /// The TFRecord file.
        data: PathBuf,
        /// Index format.
        #[arg(long, value_enum)]
        format: IndexFormatArg,
        /// Where to write the index, `-` for stdout [default: DATA.idx for dali,
        /// DATA without its extension + .tfindex for tfrecord-py].
        #[arg(long)]
        out: Option<PathBuf>,
        /// fsync the index and its directory before exiting (durable on power loss).
        #[arg(long)]
        sync: bool,
    },
    /// Rewrite any TFRecord file (plain, GZIP or ZLIB) as a padded (page-aligned) file
    /// OUT plus OUT.offsets; prints the overhead and the page reads per instance,
    /// padded and unpadded.
    ///
    /// With several inputs, OUT is a directory: each input's copy is written into it
    /// under the input's file name, `--jobs` at a time, with a summary. An existing
    /// output is not replaced without --force.
    Pad {
        /// Input TFRecord files (padded or not; their fillers are dropped).
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// The output data file, or with several inputs (or an existing directory) the
        /// output directory.
        #[arg(value_name = "OUT")]
        output: PathBuf,
        /// Replace existing outputs.
        #[arg(long)]
        force: bool,
        /// Files worked on at once (0: automatic).
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// Page size in bytes: a power of two from 512 to 16777216.
        #[arg(long, default_value_t = defaults::PAGE_SIZE, value_parser = parse_page_size)]
        page_size: u64,
        /// Placement policy.
        #[arg(long, value_enum, default_value = "next")]
        fit: FitArg,
        /// Best-fit look-ahead window, in records (only with --fit best) [default: 1024].
        #[arg(long, value_parser = parse_window)]
        window: Option<usize>,
        /// fsync the data, the table and their directory before exiting (durable on
        /// power loss).
        #[arg(long)]
        sync: bool,
        /// How INPUT is compressed; GZIP and ZLIB input (as TensorFlow writes with
        /// TFRecordOptions) is decompressed as it is read [default: detected from its
        /// first bytes].
        #[arg(long, value_enum)]
        compression: Option<CompressionArg>,
        /// Take INPUT's instances from its table INPUT.offsets, trusted: for a file
        /// padded by another tool (e.g. the LIRS reference implementation), whose
        /// padding records a scan would take for instances.
        #[arg(long, conflicts_with = "compression")]
        trust_table: bool,
    },
    /// Check every record's CRCs, the table against the file, and padded-file invariants.
    ///
    /// Several files are checked `--jobs` at a time, with a summary naming each failure.
    Verify {
        /// The TFRecord files.
        #[arg(required = true, value_name = "DATA")]
        data: Vec<PathBuf>,
        /// The offset table [default: DATA.offsets] (one DATA only).
        #[arg(long)]
        offsets: Option<PathBuf>,
        /// Files worked on at once (0: automatic).
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// Check the padded-file invariants for this page size [default: the one the
        /// fillers end on, if the file has fillers].
        #[arg(long, value_parser = parse_page_size)]
        page_size: Option<u64>,
        /// Trust the table: instance i is the record at its offset i, and any records
        /// between (or before the first) are padding written by another tool (e.g. the
        /// LIRS reference implementation). Padding must still be valid records.
        #[arg(long)]
        trust_table: bool,
    },
    /// Instance count, sizes, pages, fillers, padding.
    ///
    /// Several files are described one after the other (with --json: a JSON array).
    Info {
        /// The TFRecord files.
        #[arg(required = true, value_name = "DATA")]
        data: Vec<PathBuf>,
        /// The offset table [default: DATA.offsets, if it exists] (one DATA only).
        #[arg(long)]
        offsets: Option<PathBuf>,
        /// Files worked on at once (0: automatic).
        #[arg(long, default_value_t = 0)]
        jobs: usize,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Count pages and judge padding for this page size [default: the one the
        /// fillers end on, if the file has fillers].
        #[arg(long, value_parser = parse_page_size)]
        page_size: Option<u64>,
        /// Trust the table: instance i is the record at its offset i, and any records
        /// between (or before the first) are padding written by another tool (e.g. the
        /// LIRS reference implementation). Padding must still be valid records.
        #[arg(long)]
        trust_table: bool,
    },
    /// Write exactly the payload bytes of instance ID to stdout.
    Get {
        /// The TFRecord file.
        data: PathBuf,
        /// The instance id (0-based, file order).
        id: u64,
        /// The offset table [default: DATA.offsets].
        #[arg(long)]
        offsets: Option<PathBuf>,
        /// Trust the table: instance i is the record at its offset i, and any records
        /// between (or before the first) are padding written by another tool (e.g. the
        /// LIRS reference implementation). Padding must still be valid records.
        #[arg(long)]
        trust_table: bool,
    },
    /// Print one epoch's shuffled instance ids, one per line.
    Order {
        /// The TFRecord file.
        data: PathBuf,
        /// The offset table [default: DATA.offsets].
        #[arg(long)]
        offsets: Option<PathBuf>,
        /// Shuffle seed.
        #[arg(long)]
        seed: u64,
        /// Epoch number.
        #[arg(long, default_value_t = 0)]
        epoch: u64,
        /// Shuffle whole pages (units of instances starting in the same page).
        #[arg(long)]
        page_aware: bool,
        /// Number of shards (workers); needs --shard-index.
        #[arg(
            long,
            default_value_t = 1,
            requires = "shard_index",
            value_parser = parse_num_shards
        )]
        num_shards: u64,
        /// This shard's index, below --num-shards; needs --num-shards.
        #[arg(long, default_value_t = 0, requires = "num_shards")]
        shard_index: u64,
        /// Page size for page-aware units.
        #[arg(long, default_value_t = defaults::PAGE_SIZE, value_parser = parse_page_size)]
        page_size: u64,
        /// Trust the table: instance i is the record at its offset i, and any records
        /// between (or before the first) are padding written by another tool (e.g. the
        /// LIRS reference implementation). Padding must still be valid records.
        #[arg(long)]
        trust_table: bool,
        /// Order algorithm: 1 (Fisher-Yates, FORMAT.md 5.1-5.7) or 2 (keyed bijections in
        /// O(1) memory, FORMAT.md 5.8).
        #[arg(long, default_value = "1", value_parser = parse_order_version)]
        order_version: OrderVersion,
    },
}

/// A command's failure: printed as one `error:` line, exit status 1.
enum Failure {
    /// The message to print.
    Message(String),
    /// Already printed (the summary of a run over several files).
    Reported,
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure::Message(e.to_string())
    }
}

type Outcome = Result<(), Failure>;

/// Checks that tie several arguments together, as usage errors (exit 2).
fn check_usage(command: &Command) -> Result<(), (&'static str, String)> {
    match command {
        Command::Order {
            num_shards,
            shard_index,
            ..
        } if tfrecord_lirs::options::shard(*num_shards, *shard_index).is_err() => Err((
            "order",
            format!("--shard-index {shard_index} must be below --num-shards {num_shards}"),
        )),
        Command::Pad {
            fit: FitArg::Next | FitArg::Auto,
            window: Some(_),
            ..
        } => Err((
            "pad",
            "--window applies only to --fit best (next-fit looks at one record at a time)".into(),
        )),
        Command::Index {
            data,
            from: Some(_),
            ..
        } if data.iter().any(|p| is_url(p)) => Err((
            "index",
            "--from FORMAT reads a local data file and its local text index (URLs: index \
             the object itself, without --from)"
                .into(),
        )),
        Command::Index {
            data,
            from: Some(_),
            ..
        } if data.len() != 2 => Err((
            "index",
            "--from FORMAT takes two arguments, DATA INDEX: the data file and its text index"
                .into(),
        )),
        Command::Index {
            data,
            out: Some(_),
            from: None,
            ..
        } if data.len() > 1 => Err((
            "index",
            "--out names one table: give one DATA with it (several files get DATA.offsets each)"
                .into(),
        )),
        // `index DATA INDEX` without --from: a text index is not a data file.
        Command::Index {
            data, from: None, ..
        } if data.len() > 1 => match data
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
        Command::Verify {
            data,
            offsets: Some(_),
            ..
        }
        | Command::Info {
            data,
            offsets: Some(_),
            ..
        } if data.len() > 1 => Err((
            if matches!(command, Command::Verify { .. }) {
                "verify"
            } else {
                "info"
            },
            "--offsets names one table: give one DATA with it".into(),
        )),
        Command::Pad {
            inputs,
            trust_table: true,
            ..
        } if inputs.len() > 1 => Err((
            "pad",
            "--trust-table takes one INPUT (each file's table is its own)".into(),
        )),
        _ => Ok(()),
    }
}

/// Where every path of a command is: local files, and object storage through the
/// core's `object_store` client (credentials and endpoints from the environment).
fn storage() -> Storage {
    static STORAGE: OnceLock<Storage> = OnceLock::new();
    STORAGE
        .get_or_init(|| Storage::with_file_system(Arc::new(ObjectStoreFileSystem::new())))
        .clone()
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

fn main() -> ExitCode {
    let cli = Cli::parse(); // usage errors exit 2
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
    if let Err((name, msg)) = check_usage(&cli.command) {
        let mut cmd = Cli::command();
        cmd.build();
        let err = match cmd.find_subcommand_mut(name) {
            Some(sub) => sub.error(clap::error::ErrorKind::ArgumentConflict, msg),
            None => cmd.error(clap::error::ErrorKind::ArgumentConflict, msg),
        };
        err.exit(); // exit 2, like clap's own usage errors
    }
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Message(msg)) => {
            eprintln!("error: {}", msg.replace('\n', " "));
            ExitCode::from(1)
        }
        Err(Failure::Reported) => ExitCode::from(1),
    }
}

fn table_for(data: &Path, table: Option<PathBuf>) -> PathBuf {
    table.unwrap_or_else(|| default_table_path(data))
}

/// A byte-count progress bar on stderr, shown only when stderr is a terminal.
fn progress(total: u64, what: &str) -> ProgressBar {
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

/// The size of local file `path` for a progress bar (0 for a URL: the command's own
/// open reports a missing object).
fn file_size(path: &Path) -> Result<u64, Failure> {
    if is_url(path) {
        return Ok(0);
    }
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| Failure::Message(format!("{}: {e}", path.display())))
}

fn page_size(bytes: u64) -> Result<PageSize, Failure> {
    tfrecord_lirs::options::page_size(bytes)
        .map_err(|_| Failure::Message(format!("--page-size {}", page_size_words(bytes))))
}

/// What is wrong with page size `bytes` (the core's rule, the CLI's words).
fn page_size_words(bytes: u64) -> String {
    format!(
        "{bytes} is not a power of two from {} to {}",
        tfrecord_lirs::format::MIN_PAGE_SIZE,
        tfrecord_lirs::format::MAX_PAGE_SIZE
    )
}

/// Writes to stdout, treating a closed pipe (`| head`) as a normal end.
fn write_stdout(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Outcome {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match f(&mut out).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|e| Failure::Message(format!("stdout: {e}"))),
    }
}

fn run(command: Command) -> Outcome {
    match command {
        Command::Index {
            data,
            from: Some(format),
            out,
            sync,
            ..
        } => {
            // Two arguments with --from (checked as a usage error).
            let [data, index] = <[PathBuf; 2]>::try_from(data)
                .map_err(|_| Failure::Message("--from FORMAT takes DATA INDEX".into()))?;
            let table = table_for(&data, out);
            let n = tfrecord_lirs::build_offset_table_from_text_index(
                &data,
                &index,
                format.into(),
                &table,
                sync,
            )?;
            println!("{n}");
            Ok(())
        }
        Command::Index {
            data,
            out,
            sync,
            jobs,
            ..
        } => per_file("index", "indexed", &data, jobs, |file, report| {
            let table = table_for(file, out.clone());
            let n = tfrecord_lirs::build_offset_table_in(&storage(), file, &table, sync, report)?;
            Ok((n.to_string(), format!("{n} instances")))
        }),
        Command::Export {
            data,
            format,
            out,
            sync,
        } => {
            let format = TextIndexFormat::from(format);
            match out {
                Some(out) if out.as_os_str() == "-" => {
                    let records = tfrecord_lirs::instance_records_in(&storage(), &data)?;
                    let text = encode_text_index(records);
                    write_stdout(|stdout| stdout.write_all(text.as_bytes()))
                }
                out => {
                    let out = out.unwrap_or_else(|| format.default_path(&data));
                    let n = tfrecord_lirs::export_text_index_in(&storage(), &data, &out, sync)?;
                    println!("{n}");
                    Ok(())
                }
            }
        }
        Command::Pad {
            inputs: paths,
            output: out,
            force,
            jobs,
            page_size: p,
            fit,
            window,
            sync,
            compression,
            trust_table,
        } => {
            page_size(p)?;
            let fit = match fit {
                FitArg::Next => "next",
                FitArg::Best => "best",
                FitArg::Auto => "auto",
            };
            let compression = match compression {
                None => defaults::COMPRESSION,
                Some(CompressionArg::None) => "none",
                Some(CompressionArg::Gzip) => "gzip",
                Some(CompressionArg::Zlib) => "zlib",
            };
            // The core's request and outputs from these names, as Python's pad() has.
            let request = tfrecord_lirs::options::pad::PadArgs {
                page_size: p,
                fit: &tfrecord_lirs::options::pad::fit_name(fit, window),
                compression,
                trust_table,
                overwrite: force,
                sync,
            }
            .request(storage())?;
            let outputs = tfrecord_lirs::options::pad::outputs(&paths, &out, false)?;
            let inputs: Vec<(PathBuf, PathBuf)> = paths.into_iter().zip(outputs).collect();
            let pad_one = |input: &Path, output: &Path, report: &mut dyn FnMut(u64)| {
                let (summary, chose) = tfrecord_lirs::pad(input, output, &request, report)?;
                Ok::<_, Error>(pad_report(&summary, chose.as_deref()))
            };
            if let [(input, output)] = inputs.as_slice() {
                let bar = progress(file_size(input)?, "pad");
                let text = pad_one(input, output, &mut |done| bar.set_position(done))?;
                bar.finish_and_clear();
                print!("{text}");
                return Ok(());
            }
            let files: Vec<PathBuf> = inputs.iter().map(|(i, _)| i.clone()).collect();
            per_file("pad", "padded", &files, jobs, |file, report| {
                let output = inputs
                    .iter()
                    .find(|(i, _)| i == file)
                    .map(|(_, o)| o.as_path())
                    .ok_or_else(|| Error::internal("an input without its output"))?;
                let text = pad_one(file, output, report)?;
                Ok((text.clone(), format!("-> {}\n{text}", output.display())))
            })
        }
        Command::Verify {
            data,
            offsets,
            page_size: p,
            trust_table,
            jobs,
        } => {
            let page = p.map(page_size).transpose()?;
            per_file("verify", "verified", &data, jobs, |file, report| {
                let table = table_for(file, offsets.clone());
                let text = verify(file, Some(table.clone()), page, trust_table, report)
                    .map_err(|e| tfrecord_lirs::advice::explain(file, &table, e))?;
                Ok((text.clone(), text))
            })
        }
        Command::Info {
            data,
            offsets,
            json,
            page_size: p,
            trust_table,
            jobs,
        } => {
            let page = p.map(page_size).transpose()?;
            if json && data.len() > 1 {
                let mut values = Vec::new();
                let outcomes = run_files("info", &data, jobs, |file, report| {
                    let table = table_for(file, offsets.clone());
                    let found = info(file, offsets.clone(), page, trust_table, report)
                        .map_err(|e| tfrecord_lirs::advice::explain(file, &table, e))?;
                    Ok(found.json())
                });
                for o in &outcomes {
                    if let Ok(v) = &o.result {
                        values.push(v.clone());
                    }
                }
                write_stdout(|out| writeln!(out, "{:#}", serde_json::Value::Array(values)))?;
                // stdout stays one JSON value: a failure is reported on stderr only.
                if outcomes.iter().any(|o| o.result.is_err()) {
                    return finish_files("info", "described", &outcomes);
                }
                return Ok(());
            }
            per_file("info", "described", &data, jobs, |file, report| {
                let table = table_for(file, offsets.clone());
                let found = info(file, offsets.clone(), page, trust_table, report)
                    .map_err(|e| tfrecord_lirs::advice::explain(file, &table, e))?;
                let text = if json {
                    format!("{:#}\n", found.json())
                } else {
                    found.text()
                };
                Ok((text.clone(), text))
            })
        }
        Command::Get {
            data,
            id,
            offsets,
            trust_table,
        } => {
            let table = table_for(&data, offsets);
            let reader = Reader::open_one(&data, Some(&table), &reader_options(trust_table))?;
            let payload = reader.read(id)?;
            write_stdout(|out| out.write_all(&payload))
        }
        Command::Order {
            data,
            offsets,
            seed,
            epoch,
            page_aware,
            num_shards,
            shard_index,
            page_size: p,
            trust_table,
            order_version,
        } => {
            page_size(p)?;
            let table = table_for(&data, offsets);
            let options = ReaderOptions {
                page_size: p,
                ..reader_options(trust_table)
            };
            let reader = Reader::open_one(&data, Some(&table), &options)?;
            let params = OrderParams {
                seed,
                epoch,
                page_aware,
                num_shards,
                shard_index,
            };
            let order = reader.epoch_order_with_version(&params, order_version)?;
            write_stdout(|out| {
                for id in order {
                    writeln!(out, "{id}")?;
                }
                Ok(())
            })
        }
    }
}

/// The reader options of `--trust-table`.
fn reader_options(trust_table: bool) -> ReaderOptions {
    ReaderOptions {
        trust_table,
        storage: storage(),
        ..ReaderOptions::default()
    }
}

/// The outcomes of `work` over `files` (see [`tfrecord_lirs::many::run_per_file`]),
/// with one progress bar over their total bytes.
fn run_files<T: Send>(
    command: &str,
    files: &[PathBuf],
    jobs: usize,
    work: impl Fn(&Path, &mut dyn FnMut(u64)) -> Result<T, Error> + Sync,
) -> Vec<tfrecord_lirs::many::FileOutcome<T>> {
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
fn finish_files<T>(
    command: &str,
    verb: &str,
    outcomes: &[tfrecord_lirs::many::FileOutcome<T>],
) -> Outcome {
    let summary = tfrecord_lirs::many::summary(verb, outcomes);
    if outcomes.iter().any(|o| o.result.is_err()) {
        eprintln!("error: {command}: {summary}");
        return Err(Failure::Reported);
    }
    write_stdout(|out| writeln!(out, "{summary}"))
}

/// `command` over `files`: `work` returns (what one file alone prints, what it prints
/// after the file's name among several). One file keeps the single-file output and
/// error line exactly; several print each file's result, then the summary.
fn per_file(
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

/// What `pad` prints about one written file.
fn pad_report(summary: &tfrecord_lirs::PadSummary, chose: Option<&str>) -> String {
    let mut text = String::new();
    if let Some(reason) = chose {
        text.push_str(&format!("{reason}\n"));
    }
    text.push_str(&format!(
        "instances: {}\npages: {}\nfiller bytes: {}\noverhead: {:.2}%\npage reads per instance: {:.3} (unpadded: {:.3})\n",
        summary.instances,
        summary.pages,
        summary.filler_bytes,
        summary.overhead_percent(),
        summary.page_reads_per_instance(),
        summary.unpadded_page_reads_per_instance()
    ));
    text
}

/// `verify` of one file: its `ok:` line.
fn verify(
    data: &Path,
    offsets: Option<PathBuf>,
    page: Option<PageSize>,
    trust_table: bool,
    report: &mut dyn FnMut(u64),
) -> Result<String, Error> {
    let table_path = table_for(data, offsets);
    let table = tfrecord_lirs::read_table_for_in(&storage(), data, &table_path)?;
    let found = tfrecord_lirs::inspect_in(
        &storage(),
        data,
        Some((&table_path, &table)),
        page,
        reader_options(trust_table).padding(),
        report,
    )?;
    // Without --page-size, the invariants are checked at the page size the fillers end
    // on; a file without fillers is not padded.
    let padded = match page {
        Some(p) => Some(p.get()),
        None => found.check_padded(data)?,
    };
    let padded = match padded {
        Some(p) => format!("padded for page size {p}"),
        None => "not padded".to_string(),
    };
    let (fillers, table) = if trust_table {
        ("padding records", "table trusted")
    } else {
        ("fillers", "table matches")
    };
    Ok(format!(
        "ok: {} instances, {} {fillers}, {} bytes, {table}, {padded}",
        found.instances, found.fillers, found.file_size
    ))
}

/// What `info` found about one file.
struct InfoFound {
    data: PathBuf,
    found: tfrecord_lirs::Inspection,
    page: u64,
    padded: Option<u64>,
    problem: Option<String>,
    table: Option<PathBuf>,
    trust_table: bool,
}

fn info(
    data: &Path,
    offsets: Option<PathBuf>,
    page: Option<PageSize>,
    trust_table: bool,
    report: &mut dyn FnMut(u64),
) -> Result<InfoFound, Error> {
    // A trusted table is needed to tell instances from padding.
    let required = offsets.is_some() || trust_table;
    let table_path = table_for(data, offsets);
    let table = match tfrecord_lirs::read_table_for_in(&storage(), data, &table_path) {
        Ok(t) => Some(t),
        // No table where the default one would be: described without one.
        Err(e) if !required && e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let found = tfrecord_lirs::inspect_in(
        &storage(),
        data,
        table.as_deref().map(|t| (table_path.as_path(), t)),
        None,
        reader_options(trust_table).padding(),
        report,
    )?;
    // Padded for the page size given, or (as `verify` judges it) for the one the
    // fillers end on; a broken layout is reported, not an error.
    let (padded, problem) = match page {
        Some(p) => {
            let yes = found.fillers > 0 && found.padded_page_sizes.contains(&p.get());
            (yes.then_some(p.get()), None)
        }
        None => match found.check_padded(data) {
            Ok(p) => (p, None),
            Err(e) => (None, Some(e.to_string())),
        },
    };
    let page = page
        .map(PageSize::get)
        .or(padded)
        .or(found.filler_page_size)
        .unwrap_or(tfrecord_lirs::format::DEFAULT_PAGE_SIZE);
    Ok(InfoFound {
        data: data.to_path_buf(),
        found,
        page,
        padded,
        problem,
        table: table.map(|_| table_path),
        trust_table,
    })
}

impl InfoFound {
    fn json(&self) -> serde_json::Value {
        let found = &self.found;
        serde_json::json!({
            "file": self.data.display().to_string(),
            "file_size": found.file_size,
            "instances": found.instances,
            "fillers": found.fillers,
            "filler_bytes": found.filler_bytes,
            "payload_min": found.min_payload,
            "payload_mean": found.mean_payload(),
            "payload_max": found.max_payload,
            "page_size": self.page,
            "pages": found.file_size.div_ceil(self.page),
            "padded": self.padded.is_some(),
            "padded_page_size": self.padded,
            "padded_problem": self.problem,
            "table": self.table.as_ref().map(|t| t.display().to_string()),
            "table_trusted": self.trust_table,
        })
    }

    fn text(&self) -> String {
        let found = &self.found;
        let mut out = String::new();
        out.push_str(&format!("file: {}\n", self.data.display()));
        out.push_str(&format!("file size: {} bytes\n", found.file_size));
        out.push_str(&format!("instances: {}\n", found.instances));
        out.push_str(&format!(
            "payload bytes: min {} / mean {:.1} / max {}\n",
            found.min_payload,
            found.mean_payload(),
            found.max_payload
        ));
        out.push_str(&format!(
            "pages: {} of {} bytes\n",
            found.file_size.div_ceil(self.page),
            self.page
        ));
        out.push_str(&format!(
            "{}: {} ({} bytes)\n",
            if self.trust_table {
                "padding records"
            } else {
                "fillers"
            },
            found.fillers,
            found.filler_bytes
        ));
        match (self.padded, &self.problem) {
            (Some(p), _) => out.push_str(&format!("padded: yes, for page size {p}\n")),
            (None, Some(why)) => {
                out.push_str(&format!("padded: no ({})\n", why.replace('\n', " ")))
            }
            (None, None) => out.push_str("padded: no\n"),
        }
        match &self.table {
            Some(t) if self.trust_table => out.push_str(&format!(
                "table: {} (trusted: records between its entries are padding)\n",
                t.display()
            )),
            Some(t) => out.push_str(&format!("table: {} (matches)\n", t.display())),
            None => out.push_str("table: none\n"),
        }
        out
    }
}
