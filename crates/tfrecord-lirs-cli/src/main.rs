//! `tfrecord-lirs`: index, pad, verify, inspect and read TFRecord files at random.
//!
//! Exit status: 0 success; 1 a data or validation error (one `error: …` line on stderr
//! naming the file and, where relevant, the instance id and byte offset); 2 a usage error.

use std::io::{self, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use tfrecord_lirs::text_index::{encode_text_index, TextIndexFormat};
use tfrecord_lirs::{
    default_table_path, Compression, Error, Fit, OrderSpec, OrderVersion, PadOptions, PageSize,
    Reader, ReaderOptions,
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
    PageSize::new(bytes)
        .map(PageSize::get)
        .ok_or_else(|| format!("{bytes} is not a power of two from 512 to 16777216"))
}

/// `--order-version`: 1 or 2.
fn parse_order_version(s: &str) -> Result<OrderVersion, String> {
    let number = s.parse::<u64>().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::order_version(number).map_err(|e| e.to_string())
}

/// `--window`: at least one record.
fn parse_window(s: &str) -> Result<usize, String> {
    let n = s.parse::<usize>().map_err(|e| format!("{e}"))?;
    tfrecord_lirs::options::best_fit_window(n as u64).map_err(|e| e.to_string())?;
    Ok(n)
}

/// The default best-fit window, in records.
const DEFAULT_WINDOW: usize = 1024;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FitArg {
    /// Streaming, keeps input order.
    Next,
    /// Bounded look-ahead window; may reorder.
    Best,
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
    Index {
        /// The TFRecord file.
        data: PathBuf,
        /// A text index of DATA to build the table from (needs --from).
        #[arg(requires = "from")]
        index: Option<PathBuf>,
        /// The format of INDEX.
        #[arg(long, value_enum, value_name = "FORMAT", requires = "index")]
        from: Option<IndexFormatArg>,
        /// Where to write the table [default: DATA.offsets].
        #[arg(long)]
        out: Option<PathBuf>,
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
    /// OUT plus OUT.offsets.
    Pad {
        /// Input TFRecord file (padded or not; its fillers are dropped).
        input: PathBuf,
        /// Output data file.
        output: PathBuf,
        /// Page size in bytes: a power of two from 512 to 16777216.
        #[arg(long, default_value_t = 4096, value_parser = parse_page_size)]
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
    Verify {
        /// The TFRecord file.
        data: PathBuf,
        /// The offset table [default: DATA.offsets].
        #[arg(long)]
        offsets: Option<PathBuf>,
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
    Info {
        /// The TFRecord file.
        data: PathBuf,
        /// The offset table [default: DATA.offsets, if it exists].
        #[arg(long)]
        offsets: Option<PathBuf>,
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
            value_parser = clap::value_parser!(u64).range(1..)
        )]
        num_shards: u64,
        /// This shard's index, below --num-shards; needs --num-shards.
        #[arg(long, default_value_t = 0, requires = "num_shards")]
        shard_index: u64,
        /// Page size for page-aware units.
        #[arg(long, default_value_t = 4096, value_parser = parse_page_size)]
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
struct Failure(String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure(e.to_string())
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
        } if shard_index >= num_shards => Err((
            "order",
            format!("--shard-index {shard_index} must be below --num-shards {num_shards}"),
        )),
        Command::Pad {
            fit: FitArg::Next,
            window: Some(_),
            ..
        } => Err((
            "pad",
            "--window applies only to --fit best (next-fit looks at one record at a time)".into(),
        )),
        _ => Ok(()),
    }
}

/// The first argument that is a URL (`gs://…`, also as `--opt=URL`): the CLI reads
/// local files only (URLs need TensorFlow's file systems, i.e. the Python package).
fn url_argument() -> Option<String> {
    std::env::args_os().skip(1).find_map(|arg| {
        let arg = arg.to_str()?;
        let value = match arg.strip_prefix("--") {
            Some(opt) => opt.split_once('=')?.1,
            None => arg,
        };
        tfrecord_lirs::remote::is_url(Path::new(value)).then(|| value.to_string())
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse(); // usage errors exit 2
    if let Some(url) = url_argument() {
        Cli::command()
            .error(
                clap::error::ErrorKind::InvalidValue,
                format!(
                    "{url} is a URL, but tfrecord-lirs reads local files only; read URLs \
                     (gs://, s3://, ram://, ...) with the Python package tfrecord_lirs, \
                     which uses TensorFlow's file systems"
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
        Err(Failure(msg)) => {
            eprintln!("error: {}", msg.replace('\n', " "));
            ExitCode::from(1)
        }
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

fn file_size(path: &Path) -> Result<u64, Failure> {
    std::fs::metadata(path)
        .map(|m| m.len())
        .map_err(|e| Failure(format!("{}: {e}", path.display())))
}

fn page_size(bytes: u64) -> Result<PageSize, Failure> {
    PageSize::new(bytes).ok_or_else(|| {
        Failure(format!(
            "--page-size {bytes} is not a power of two from 512 to 16777216"
        ))
    })
}

/// When `table` does not exist, a compressed `data` is the real problem: say so rather
/// than "table not found" (`index` would refuse the file too).
fn refuse_compressed(data: &Path, table: &Path) -> Outcome {
    if table.exists() {
        return Ok(());
    }
    let mut head = Vec::new();
    let read = std::fs::File::open(data).and_then(|f| {
        f.take(tfrecord_lirs::format::HEADER_LEN as u64)
            .read_to_end(&mut head)
    });
    if read.is_err() {
        return Ok(()); // the caller reports the missing file
    }
    match tfrecord_lirs::format::compressed_head(&head) {
        Some(format) => Err(Error::compressed(data, format).into()),
        None => Ok(()),
    }
}

/// Writes to stdout, treating a closed pipe (`| head`) as a normal end.
fn write_stdout(f: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Outcome {
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match f(&mut out).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|e| Failure(format!("stdout: {e}"))),
    }
}

fn run(command: Command) -> Outcome {
    match command {
        Command::Index {
            data,
            index: Some(index),
            from: Some(format),
            out,
            sync,
        } => {
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
            data, out, sync, ..
        } => {
            let table = table_for(&data, out);
            let bar = progress(file_size(&data)?, "index");
            let n = tfrecord_lirs::build_offset_table_with(&data, &table, sync, |done| {
                bar.set_position(done)
            })?;
            bar.finish_and_clear();
            println!("{n}");
            Ok(())
        }
        Command::Export {
            data,
            format,
            out,
            sync,
        } => {
            let format = TextIndexFormat::from(format);
            match out {
                Some(out) if out.as_os_str() == "-" => {
                    let records = tfrecord_lirs::instance_records(&data)?;
                    let text = encode_text_index(records);
                    write_stdout(|stdout| stdout.write_all(text.as_bytes()))
                }
                out => {
                    let out = out.unwrap_or_else(|| format.default_path(&data));
                    let n = tfrecord_lirs::export_text_index(&data, &out, sync)?;
                    println!("{n}");
                    Ok(())
                }
            }
        }
        Command::Pad {
            input,
            output,
            page_size: p,
            fit,
            window,
            sync,
            compression,
            trust_table,
        } => {
            page_size(p)?;
            let options = PadOptions {
                page_size: p,
                fit: match fit {
                    FitArg::Next => Fit::Next,
                    FitArg::Best => Fit::Best {
                        window: window.unwrap_or(DEFAULT_WINDOW),
                    },
                },
                sync,
            };
            let compression = match compression {
                None => Compression::Auto,
                Some(CompressionArg::None) => Compression::None,
                Some(CompressionArg::Gzip) => Compression::Gzip,
                Some(CompressionArg::Zlib) => Compression::Zlib,
            };
            let bar = progress(file_size(&input)?, "pad");
            let summary = if trust_table {
                tfrecord_lirs::pad_file_from_table(&input, &output, &options, |done| {
                    bar.set_position(done)
                })?
            } else {
                tfrecord_lirs::pad_file_with(&input, &output, &options, compression, |done| {
                    bar.set_position(done)
                })?
            };
            bar.finish_and_clear();
            println!("instances: {}", summary.instances);
            println!("pages: {}", summary.pages);
            println!("filler bytes: {}", summary.filler_bytes);
            println!("overhead: {:.2}%", summary.overhead_percent());
            Ok(())
        }
        Command::Verify {
            data,
            offsets,
            page_size: p,
            trust_table,
        } => {
            let table_path = table_for(&data, offsets);
            refuse_compressed(&data, &table_path)?;
            let table = tfrecord_lirs::read_table_for(&data, &table_path)?;
            let page = p.map(page_size).transpose()?;
            let bar = progress(file_size(&data)?, "verify");
            let found = tfrecord_lirs::inspect_with(
                &data,
                Some((&table_path, &table)),
                page,
                reader_options(trust_table).padding(),
                |done| bar.set_position(done),
            )?;
            bar.finish_and_clear();
            // Without --page-size, the invariants are checked at the page size the
            // fillers end on; a file without fillers is not padded.
            let padded = match page {
                Some(p) => Some(p.get()),
                None => found.check_padded(&data)?,
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
            println!(
                "ok: {} instances, {} {fillers}, {} bytes, {table}, {padded}",
                found.instances, found.fillers, found.file_size
            );
            Ok(())
        }
        Command::Info {
            data,
            offsets,
            json,
            page_size: p,
            trust_table,
        } => info(
            &data,
            offsets,
            json,
            p.map(page_size).transpose()?,
            trust_table,
        ),
        Command::Get {
            data,
            id,
            offsets,
            trust_table,
        } => {
            let table = table_for(&data, offsets);
            refuse_compressed(&data, &table)?;
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
            refuse_compressed(&data, &table)?;
            let options = ReaderOptions {
                page_size: p,
                ..reader_options(trust_table)
            };
            let reader = Reader::open_one(&data, Some(&table), &options)?;
            let spec = OrderSpec {
                seed,
                epoch,
                page_aware,
                num_shards,
                shard_index,
            };
            let order = reader.epoch_order_with_version(&spec, order_version)?;
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
        ..ReaderOptions::default()
    }
}

fn info(
    data: &Path,
    offsets: Option<PathBuf>,
    json: bool,
    page: Option<PageSize>,
    trust_table: bool,
) -> Outcome {
    // A trusted table is needed to tell instances from padding.
    let required = offsets.is_some() || trust_table;
    let table_path = table_for(data, offsets);
    let table = match tfrecord_lirs::read_table_for(data, &table_path) {
        Ok(t) => Some(t),
        Err(_) if !required && !table_path.exists() => None,
        Err(e) => return Err(e.into()),
    };
    let bar = progress(file_size(data)?, "info");
    let found = tfrecord_lirs::inspect_with(
        data,
        table.as_deref().map(|t| (table_path.as_path(), t)),
        None,
        reader_options(trust_table).padding(),
        |done| bar.set_position(done),
    )?;
    bar.finish_and_clear();
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
    let pages = found.file_size.div_ceil(page);
    let table_json = match &table {
        Some(_) => serde_json::json!(table_path.display().to_string()),
        None => serde_json::Value::Null,
    };
    if json {
        let value = serde_json::json!({
            "file": data.display().to_string(),
            "file_size": found.file_size,
            "instances": found.instances,
            "fillers": found.fillers,
            "filler_bytes": found.filler_bytes,
            "payload_min": found.min_payload,
            "payload_mean": found.mean_payload(),
            "payload_max": found.max_payload,
            "page_size": page,
            "pages": pages,
            "padded": padded.is_some(),
            "padded_page_size": padded,
            "padded_problem": problem,
            "table": table_json,
            "table_trusted": trust_table,
        });
        return write_stdout(|out| writeln!(out, "{value:#}"));
    }
    write_stdout(|out| {
        writeln!(out, "file: {}", data.display())?;
        writeln!(out, "file size: {} bytes", found.file_size)?;
        writeln!(out, "instances: {}", found.instances)?;
        writeln!(
            out,
            "payload bytes: min {} / mean {:.1} / max {}",
            found.min_payload,
            found.mean_payload(),
            found.max_payload
        )?;
        writeln!(out, "pages: {pages} of {page} bytes")?;
        writeln!(
            out,
            "{}: {} ({} bytes)",
            if trust_table {
                "padding records"
            } else {
                "fillers"
            },
            found.fillers,
            found.filler_bytes
        )?;
        match (padded, &problem) {
            (Some(p), _) => writeln!(out, "padded: yes, for page size {p}")?,
            (None, Some(why)) => writeln!(out, "padded: no ({})", why.replace('\n', " "))?,
            (None, None) => writeln!(out, "padded: no")?,
        }
        match &table {
            Some(_) if trust_table => writeln!(
                out,
                "table: {} (trusted: records between its entries are padding)",
                table_path.display()
            ),
            Some(_) => writeln!(out, "table: {} (matches)", table_path.display()),
            None => writeln!(out, "table: none"),
        }
    })
}
