//! `export`: a DALI or `tfrecord`-package text index of a data file, to a file or
//! stdout.

use tfrecord_lirs::text_index::{encode_text_index, TextIndexFormat};

use crate::args::ExportArgs;
use crate::report::{write_stdout, Outcome};
use crate::storage::storage;

pub fn run(args: ExportArgs) -> Outcome {
    let ExportArgs {
        data,
        format,
        out,
        sync,
    } = args;
    let format = TextIndexFormat::from(format);
    let data = crate::storage::data_file(&data, "export")?;
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
