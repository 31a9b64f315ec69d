//! `pad`: any TFRecord file rewritten as a padded (page-aligned) file and its table,
//! one input into a file or several into a directory, and what each copy costs.

use std::path::{Path, PathBuf};

use tfrecord_lirs::options::defaults;
use tfrecord_lirs::pad_args;
use tfrecord_lirs::Error;

use crate::args::{page_size, CompressionArg, FitArg, PadArgs};
use crate::report::{per_file, progress, Outcome};
use crate::storage::{file_size, storage};

pub fn run(args: PadArgs) -> Outcome {
    let PadArgs {
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
    } = args;
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
    let request = pad_args::PadArgs {
        page_size: p,
        fit: &pad_args::fit_name(fit, window),
        compression,
        trust_table,
        overwrite: force,
        sync,
    }
    .request(storage())?;
    // A pattern is a list, even of one match: OUT is then a directory.
    let listed = paths.iter().any(|p| {
        p.to_str()
            .is_some_and(tfrecord_lirs::format::file_list::is_pattern)
    });
    let paths = crate::storage::data_files(&paths)?;
    let outputs = pad_args::outputs(&request.options.storage, &paths, &out, listed)?;
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
