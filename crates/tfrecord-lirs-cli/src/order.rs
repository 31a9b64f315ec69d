//! `order`: one epoch's shuffled instance ids, one per line, over one file or several
//! (one dataset, as the loaders see it); with `--reuse-factor`, the epoch's refurbish
//! schedule (id, refresh or reuse, generation).

use std::path::PathBuf;

use tfrecord_lirs::{
    Error, OrderParams, Reader, ReaderOptions, RefurbishParams, RefurbishSchedule,
};

use crate::args::{page_size, OrderArgs};
use crate::report::{write_stdout, Outcome};
use crate::storage::{data_files, one_table_for_one_file, reader_options, table_for};

pub fn run(args: OrderArgs) -> Outcome {
    let OrderArgs {
        data,
        offsets,
        seed,
        epoch,
        page_aware,
        num_shards,
        shard_index,
        page_size: p,
        trust_table,
        index_missing,
        order_version,
        reuse_factor,
        batch_size,
    } = args;
    page_size(p)?;
    let data = data_files(&data)?;
    one_table_for_one_file(&data, offsets.is_some(), "--offsets")?;
    let files: Vec<(PathBuf, PathBuf)> = data
        .into_iter()
        .map(|file| {
            let table = table_for(&file, offsets.clone());
            (file, table)
        })
        .collect();
    let options = ReaderOptions {
        page_size: p,
        ..reader_options(trust_table, index_missing)
    };
    let reader = Reader::open(&files, &options)?;
    if let Some(reuse_factor) = reuse_factor {
        let params = RefurbishParams {
            seed,
            reuse_factor,
            batch_size,
            num_shards,
            shard_index,
            order_version,
        };
        let schedule = RefurbishSchedule::new(reader.len(), &params)
            .and_then(|s| s.epoch(epoch))
            .map_err(Error::from)?;
        return write_stdout(|out| {
            for u in schedule {
                let what = if u.refresh { "refresh" } else { "reuse" };
                writeln!(out, "{}\t{what}\t{}", u.id, u.generation)?;
            }
            Ok(())
        });
    }
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
