//! The TensorFlow op's words for what to do about an error: the arguments of
//! `LIRSDataset` (the op's attrs), and the package's calls where no argument helps. The
//! one place the op words a [`Remedy`]; every status it returns for a core error goes
//! through [`say`].

use std::path::Path;

use tfrecord_lirs::remedy::{named_table, TRUST_WHEN};
use tfrecord_lirs::{Error, Remedy};

/// The message the op's status carries for `e`: its message, the remedy in the op's
/// words.
pub fn say(e: &Error) -> String {
    e.worded(&words)
}

/// The call that (re)builds the table of `data` at `table`.
fn build(data: &Path, table: &Path) -> String {
    let mut args = format!("{:?}", data.display().to_string());
    if let Some(t) = named_table(data, table) {
        args.push_str(&format!(", {:?}", t.display().to_string()));
    }
    format!("tfrecord_lirs.build_offset_table({args})")
}

/// The trusting remedy's words.
fn trust() -> String {
    format!("{TRUST_WHEN}, pass trust_table=True to LIRSDataset (or tfrecord_lirs.read)")
}

/// `remedy` in the op's terms.
pub fn words(remedy: &Remedy) -> String {
    match remedy {
        Remedy::BuildTable { data, table } => format!(
            "let LIRSDataset build it when it opens the file (index_missing=True, the default), or build it once with {}",
            build(data, table)
        ),
        Remedy::RebuildTable { data, table } => format!(
            "rebuild the table with {}, then make the LIRSDataset again",
            build(data, table)
        ),
        Remedy::RestoreOrRebuildTable { data, table } => format!(
            "restore the file, or if it is complete as it is, rebuild the table with {}, then make the LIRSDataset again",
            build(data, table)
        ),
        Remedy::OwnTable { data, own } => format!(
            "pass {}'s own table ({}) in LIRSDataset's offset_tables, or build it there with {}",
            data.display(),
            own.display(),
            build(data, own)
        ),
        Remedy::Reopen { data, table } => format!(
            "iterate a new LIRSDataset (a new iterator), and if the file was rewritten on purpose, rebuild its table first with {}",
            build(data, table)
        ),
        Remedy::RebuildOrTrustTable { data, table } => {
            format!("rebuild it with {}; or, {}", build(data, table), trust())
        }
        Remedy::TrustTable => trust(),
        Remedy::Pad { data, compression } => format!(
            "LIRSDataset reads records at random, which compression_type=\"{compression}\" does not allow: write an uncompressed padded copy with its table once with tfrecord_lirs.pad({:?}, OUT), which decompresses as it reads, and give OUT to LIRSDataset",
            data.display().to_string()
        ),
        Remedy::Repad { data } => format!(
            "rewrite it once with tfrecord_lirs.pad({:?}, OUT) (which drops the fillers and lays the instances out from byte 0), and give OUT to LIRSDataset",
            data.display().to_string()
        ),
        Remedy::RepadOrPageSize { data } => format!(
            "rewrite the file once with tfrecord_lirs.pad({:?}, OUT) and give OUT to LIRSDataset, or pass its page_size",
            data.display().to_string()
        ),
        Remedy::IndexOrRepad { data, table } => format!(
            "build the table with {}, or rewrite a file that holds only fillers with tfrecord_lirs.pad({:?}, OUT), then make the LIRSDataset again",
            build(data, table),
            data.display().to_string()
        ),
        Remedy::Overwrite { .. } => {
            "choose another output path for tfrecord_lirs.pad, or pass it overwrite=True to replace it (LIRSDataset itself writes no file)"
                .to_string()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every remedy in the op's words names LIRSDataset or the package's calls, never
    /// a command of the CLI.
    #[test]
    fn every_remedy_names_the_op() {
        for remedy in Remedy::examples() {
            let text = words(&remedy);
            assert!(text.contains("LIRSDataset"), "{remedy:?}: {text}");
            assert!(
                !text.contains("tfrecord-lirs ") && !text.contains("--"),
                "{remedy:?}: {text}"
            );
        }
        let [build, rebuild, restore, own, reopen, either, trust, pad, repad, page, empty, overwrite] =
            Remedy::examples().try_into().unwrap();
        let call = r#"tfrecord_lirs.build_offset_table("d.tfrecord", "t.offsets")"#;
        assert!(words(&build).contains("index_missing=True") && words(&build).ends_with(call));
        assert!(words(&rebuild).starts_with(&format!("rebuild the table with {call}")));
        assert!(words(&restore).starts_with("restore the file"));
        // Another file's table: the call builds data's own table at its own path.
        assert!(words(&own).ends_with(r#"tfrecord_lirs.build_offset_table("d.tfrecord")"#));
        assert!(words(&own).contains("offset_tables"));
        assert!(
            words(&reopen).starts_with("iterate a new LIRSDataset")
                && words(&reopen).ends_with(call)
        );
        assert!(words(&either).starts_with(&format!("rebuild it with {call}; or, if this file")));
        assert!(
            words(&trust).ends_with("pass trust_table=True to LIRSDataset (or tfrecord_lirs.read)")
        );
        assert!(
            words(&pad).contains(r#"compression_type="GZIP""#)
                && words(&pad).contains(r#"tfrecord_lirs.pad("d.tfrecord", OUT)"#)
        );
        assert!(words(&repad)
            .starts_with(r#"rewrite it once with tfrecord_lirs.pad("d.tfrecord", OUT)"#));
        assert!(words(&page).ends_with("or pass its page_size"));
        assert!(words(&empty).contains(call) && words(&empty).contains("holds only fillers"));
        assert!(words(&overwrite).contains("overwrite=True"));
    }
}
