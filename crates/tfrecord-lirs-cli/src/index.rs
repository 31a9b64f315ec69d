//! `index`: each data file's offset table, from a scan of the file (several files
//! `--jobs` at a time) or, with `--from`, from another reader's text index checked
//! against the file.

use std::path::PathBuf;

use crate::args::IndexArgs;
use crate::report::{per_file, Failure, Outcome};
use tfrecord_lirs::Indexed;

use crate::storage::{data_files, one_table_for_one_file, storage, table_for};

pub fn run(args: IndexArgs) -> Outcome {
    let IndexArgs {
        data,
        from,
        out,
        jobs,
        sync,
    } = args;
    if let Some(format) = from {
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
        return Ok(());
    }
    let data = data_files(&data)?;
    one_table_for_one_file(&data, out.is_some(), "--out")?;
    per_file("index", "indexed", &data, jobs, |file, report| {
        let table = table_for(file, out.clone());
        match tfrecord_lirs::index_file_in(&storage(), file, &table, sync, report)? {
            Indexed::Built(n) => Ok((n.to_string(), format!("{n} instances"))),
            // stdout keeps the count alone (a script reads it); stderr says why nothing
            // was written.
            Indexed::Current(n) => {
                eprintln!(
                    "{}: table {} is current (not rebuilt)",
                    file.display(),
                    table.display()
                );
                Ok((n.to_string(), format!("{n} instances (table current)")))
            }
        }
    })
}
