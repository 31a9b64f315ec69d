//! The CLI's words for what to do about an error: its commands and flags. The one
//! place the CLI words a [`Remedy`]; every error it prints goes through [`say`].

use std::path::Path;

use tfrecord_lirs::remedy::{named_table, TRUST_WHEN};
use tfrecord_lirs::{Error, Remedy};

/// The line the CLI prints for `e`: its message, the remedy in the CLI's words.
pub fn say(e: &Error) -> String {
    e.worded(&words)
}

/// The command that (re)builds the table of `data` at `table`.
fn index(data: &Path, table: &Path) -> String {
    let d = data.display();
    match named_table(data, table) {
        None => format!("`tfrecord-lirs index {d}`"),
        Some(t) => format!("`tfrecord-lirs index {d} --out {}`", t.display()),
    }
}

/// The trusting remedy's words.
fn trust() -> String {
    format!("{TRUST_WHEN}, read it with --trust-table")
}

/// `remedy` in the CLI's terms.
pub fn words(remedy: &Remedy) -> String {
    match remedy {
        Remedy::BuildTable { data, table } => format!(
            "make one with {}, or write a padded copy with its table with `tfrecord-lirs pad {} OUT`",
            index(data, table),
            data.display()
        ),
        Remedy::RebuildTable { data, table } => {
            format!("rebuild the table with {}", index(data, table))
        }
        Remedy::RestoreOrRebuildTable { data, table } => format!(
            "restore the file, or if it is complete as it is, rebuild the table with {}",
            index(data, table)
        ),
        Remedy::OwnTable { data, own } => format!(
            "pass {}'s own table ({}), or build it there with {}",
            data.display(),
            own.display(),
            index(data, own)
        ),
        Remedy::Reopen { data, table } => format!(
            "run the command again, and if the file was rewritten on purpose, rebuild its table first with {}",
            index(data, table)
        ),
        Remedy::RebuildOrTrustTable { data, table } => {
            format!("rebuild it with {}; or, {}", index(data, table), trust())
        }
        Remedy::TrustTable => trust(),
        Remedy::Pad { data, compression } => {
            let d = data.display();
            let lower = compression.to_ascii_lowercase();
            format!(
                "`tfrecord-lirs pad {d} OUT` decompresses it as it reads and writes a padded copy OUT with its table in one step (the compression is detected from the first bytes; to name it: `--compression {lower}`), or decompress it first (GZIP: `gunzip -c {d} > OUT`; ZLIB: `zlib-flate -uncompress < {d} > OUT`) and index that"
            )
        }
        Remedy::Repad { data } => format!(
            "rewrite it with `tfrecord-lirs pad {} OUT` (which drops the fillers and lays the instances out from byte 0)",
            data.display()
        ),
        Remedy::RepadOrPageSize { data } => format!(
            "rewrite the file with `tfrecord-lirs pad {} OUT`, or give --page-size",
            data.display()
        ),
        Remedy::IndexOrRepad { data, table } => format!(
            "build the table with {}, or rewrite a file that holds only fillers with `tfrecord-lirs pad {} OUT`",
            index(data, table),
            data.display()
        ),
        Remedy::Overwrite { .. } => {
            "choose another output path, or pass --force to replace it".to_string()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every remedy in the CLI's words names a command or flag of the CLI and no other
    /// front end's call.
    #[test]
    fn every_remedy_names_the_cli() {
        for remedy in Remedy::examples() {
            let text = words(&remedy);
            assert!(
                text.contains("tfrecord-lirs ")
                    || text.contains("--trust-table")
                    || text.contains("--force"),
                "{remedy:?}: {text}"
            );
            assert!(
                !text.contains("tfrecord_lirs.") && !text.contains("=True"),
                "{remedy:?}: {text}"
            );
        }
        let [build, rebuild, restore, own, reopen, either, trust, pad, repad, page, empty, overwrite] =
            Remedy::examples().try_into().unwrap();
        let out = "`tfrecord-lirs index d.tfrecord --out t.offsets`";
        assert_eq!(
            words(&build),
            format!("make one with {out}, or write a padded copy with its table with `tfrecord-lirs pad d.tfrecord OUT`")
        );
        assert_eq!(words(&rebuild), format!("rebuild the table with {out}"));
        assert!(words(&restore).starts_with("restore the file") && words(&restore).ends_with(out));
        // Another file's table: the command builds data's own table at its own path.
        assert_eq!(
            words(&own),
            "pass d.tfrecord's own table (d.tfrecord.offsets), or build it there with `tfrecord-lirs index d.tfrecord`"
        );
        assert!(
            words(&reopen).starts_with("run the command again") && words(&reopen).ends_with(out)
        );
        assert!(words(&either).starts_with(&format!("rebuild it with {out}; or, if this file")));
        assert!(words(&trust).ends_with("read it with --trust-table"));
        assert!(
            words(&pad).contains("`tfrecord-lirs pad d.tfrecord OUT`")
                && words(&pad).contains("--compression gzip")
        );
        assert!(words(&repad).starts_with("rewrite it with `tfrecord-lirs pad d.tfrecord OUT`"));
        assert!(words(&page).ends_with("or give --page-size"));
        assert_eq!(
            words(&empty),
            format!("build the table with {out}, or rewrite a file that holds only fillers with `tfrecord-lirs pad d.tfrecord OUT`")
        );
        assert_eq!(
            words(&overwrite),
            "choose another output path, or pass --force to replace it"
        );
    }
}
