//! `index`: each data file's offset table, from a scan of the file (several files
//! `--jobs` at a time) or, with `--from`, from another reader's text index checked
//! against the file.

use std::path::PathBuf;

use crate::args::IndexArgs;
use crate::report::{per_file, Failure, Outcome};
use crate::storage::{storage, table_for};

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
    per_file("index", "indexed", &data, jobs, |file, report| {
        let table = table_for(file, out.clone());
        let n = tfrecord_lirs::build_offset_table_in(&storage(), file, &table, sync, report)?;
        Ok((n.to_string(), format!("{n} instances")))
    })
}
