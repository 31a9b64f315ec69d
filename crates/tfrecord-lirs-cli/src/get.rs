//! `get`: one instance's payload bytes, exactly, on stdout.

use tfrecord_lirs::Reader;

use crate::args::GetArgs;
use crate::report::{write_stdout, Outcome};
use crate::storage::{reader_options, table_for};

pub fn run(args: GetArgs) -> Outcome {
    let GetArgs {
        data,
        id,
        offsets,
        trust_table,
        index_missing,
    } = args;
    let data = crate::storage::data_file(&data, "get")?;
    let table = table_for(&data, offsets);
    let reader = Reader::open_one(
        &data,
        Some(&table),
        &reader_options(trust_table, index_missing),
    )?;
    let payload = reader.read(id)?;
    write_stdout(|out| out.write_all(&payload))
}
