//! `verify`: every record's CRCs, the table against the file, and the padded-file
//! invariants, one `ok:` line per file.

use std::path::{Path, PathBuf};

use tfrecord_lirs::{Error, PageSize};

use crate::args::{page_size, VerifyArgs};
use crate::report::{per_file, Outcome};
use crate::storage::{reader_options, storage, table_for};

pub fn run(args: VerifyArgs) -> Outcome {
    let VerifyArgs {
        data,
        offsets,
        jobs,
        page_size: p,
        trust_table,
    } = args;
    let page = p.map(page_size).transpose()?;
    let data = crate::storage::data_files(&data)?;
    crate::storage::one_table_for_one_file(&data, offsets.is_some(), "--offsets")?;
    per_file("verify", "verified", &data, jobs, |file, report| {
        let table = table_for(file, offsets.clone());
        let text = verify(file, Some(table.clone()), page, trust_table, report)
            .map_err(|e| tfrecord_lirs::advice::explain(&storage(), file, &table, e))?;
        Ok((text.clone(), text))
    })
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
        reader_options(trust_table, false).padding(),
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
