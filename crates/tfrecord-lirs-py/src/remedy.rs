//! Python's words for what to do about an error: the package's calls and arguments.
//! The one place the extension words a [`Remedy`]; every exception it raises for a
//! core error goes through [`say`].

use std::path::Path;

use tfrecord_lirs::remedy::{named_table, TRUST_WHEN};
use tfrecord_lirs::{Error, Remedy};

/// The message Python raises for `e`: its message, the remedy in Python's words.
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
    format!("{TRUST_WHEN}, open it with trust_table=True")
}

/// `remedy` in Python's terms.
pub fn words(remedy: &Remedy) -> String {
    match remedy {
        Remedy::BuildTable { data, table } => format!(
            "make one with {} (or open it with index_missing=True), or write a padded copy with its table with tfrecord_lirs.pad({:?}, OUT)",
            build(data, table),
            data.display().to_string()
        ),
        Remedy::RebuildTable { data, table } => {
            format!("rebuild the table with {}", build(data, table))
        }
        Remedy::RestoreOrRebuildTable { data, table } => format!(
            "restore the file, or if it is complete as it is, rebuild the table with {}",
            build(data, table)
        ),
        Remedy::OwnTable { data, own } => format!(
            "pass {}'s own table ({}), or build it there with {}",
            data.display(),
            own.display(),
            build(data, own)
        ),
        Remedy::Reopen { data, table } => format!(
            "open it again (a new DataSource, Loader or sampler), and if it was rewritten on purpose, rebuild its table first with {}",
            build(data, table)
        ),
        Remedy::RebuildOrTrustTable { data, table } => {
            format!("rebuild it with {}; or, {}", build(data, table), trust())
        }
        Remedy::TrustTable => trust(),
        Remedy::Pad { data, compression } => {
            let d = data.display().to_string();
            let lower = compression.to_ascii_lowercase();
            format!(
                "tfrecord_lirs.pad({d:?}, OUT) decompresses it as it reads and writes a padded copy OUT with its table in one step (the compression is detected from the first bytes; to name it: compression={lower:?}), or decompress it first and index that"
            )
        }
        Remedy::Repad { data } => format!(
            "rewrite it with tfrecord_lirs.pad({:?}, OUT) (which drops the fillers and lays the instances out from byte 0)",
            data.display().to_string()
        ),
        Remedy::RepadOrPageSize { data } => format!(
            "rewrite the file with tfrecord_lirs.pad({:?}, OUT), or pass page_size",
            data.display().to_string()
        ),
        Remedy::IndexOrRepad { data, table } => format!(
            "build the table with {}, or rewrite a file that holds only fillers with tfrecord_lirs.pad({:?}, OUT)",
            build(data, table),
            data.display().to_string()
        ),
        Remedy::Overwrite { .. } => {
            "choose another output path, or pass overwrite=True to tfrecord_lirs.pad to replace it"
                .to_string()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every remedy in Python's words names a call or argument of the package and no
    /// command of the CLI.
    #[test]
    fn every_remedy_names_python() {
        for remedy in Remedy::examples() {
            let text = words(&remedy);
            assert!(
                text.contains("tfrecord_lirs.") || text.contains("trust_table=True"),
                "{remedy:?}: {text}"
            );
            assert!(
                !text.contains("tfrecord-lirs ") && !text.contains("--"),
                "{remedy:?}: {text}"
            );
        }
        let [build, rebuild, restore, own, reopen, either, trust, pad, repad, page, empty, overwrite] =
            Remedy::examples().try_into().unwrap();
        let call = r#"tfrecord_lirs.build_offset_table("d.tfrecord", "t.offsets")"#;
        assert_eq!(
            words(&build),
            format!("make one with {call} (or open it with index_missing=True), or write a padded copy with its table with tfrecord_lirs.pad(\"d.tfrecord\", OUT)")
        );
        assert_eq!(words(&rebuild), format!("rebuild the table with {call}"));
        assert!(words(&restore).starts_with("restore the file") && words(&restore).ends_with(call));
        // Another file's table: the call builds data's own table at its own path.
        assert_eq!(
            words(&own),
            r#"pass d.tfrecord's own table (d.tfrecord.offsets), or build it there with tfrecord_lirs.build_offset_table("d.tfrecord")"#
        );
        assert!(
            words(&reopen).starts_with("open it again (a new DataSource")
                && words(&reopen).ends_with(call)
        );
        assert!(words(&either).starts_with(&format!("rebuild it with {call}; or, if this file")));
        assert!(words(&trust).ends_with("open it with trust_table=True"));
        assert!(
            words(&pad).starts_with(r#"tfrecord_lirs.pad("d.tfrecord", OUT)"#)
                && words(&pad).contains(r#"compression="gzip""#)
        );
        assert!(
            words(&repad).starts_with(r#"rewrite it with tfrecord_lirs.pad("d.tfrecord", OUT)"#)
        );
        assert!(words(&page).ends_with("or pass page_size"));
        assert_eq!(
            words(&empty),
            format!("build the table with {call}, or rewrite a file that holds only fillers with tfrecord_lirs.pad(\"d.tfrecord\", OUT)")
        );
        assert!(words(&overwrite).contains("pass overwrite=True"));
    }
}
