//! What a saved state says about the dataset it is a state of, and the one rule by
//! which every state (a loader's, an epoch state, a worker's, a TensorFlow iterator's)
//! is checked against the dataset it is restored into (docs/FORMAT.md §6).
//!
//! A dataset is identified by each file's base name, instances and bytes, in id
//! order. Base names, not full paths: a dataset moved elsewhere (another mount point,
//! a local copy of a bucket, another node of a job) still restores, while two splits
//! of the same sizes (TFDS and Beam put the split in every shard's name:
//! `mnist-train.tfrecord-00000-of-00004`) or the same files in another order are told
//! apart. No digest of the offset tables besides: it would tell apart only files of
//! the same names and sizes cut into records differently, at the cost of a pass over
//! every table per saved state, and a file rewritten with other records of the same
//! cuts would still pass.

use std::path::Path;

use crate::error::{Error, Result};

/// The most bytes of a file name a state holds (longer names are refused when
/// decoded: a damaged length must not allocate without bound).
const MAX_NAME_BYTES: u64 = 4096;

/// The dataset a state belongs to (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DatasetIdentity {
    /// Each file's (instances, bytes), in id order.
    pub files: Vec<(u64, u64)>,
    /// Each file's base name, in id order; `None` in a state saved before names were
    /// kept (compared by instances and bytes only then).
    pub names: Option<Vec<String>>,
}

impl DatasetIdentity {
    /// The identity of files `(path, instances, bytes)` in id order.
    pub fn of_files<'a>(files: impl IntoIterator<Item = (&'a Path, u64, u64)>) -> DatasetIdentity {
        let (mut shapes, mut names) = (Vec::new(), Vec::new());
        for (path, instances, bytes) in files {
            shapes.push((instances, bytes));
            names.push(file_name(path));
        }
        DatasetIdentity {
            files: shapes,
            names: Some(names),
        }
    }

    /// Instances of every file.
    pub fn instances(&self) -> u64 {
        // Saturating: a damaged state's counts must not overflow.
        self.files
            .iter()
            .fold(0u64, |sum, &(n, _)| sum.saturating_add(n))
    }

    /// How the dataset of a state (`self`, the saved one) differs from `here` (the
    /// dataset it is restored into, called `holder` in the message, e.g. "this
    /// Loader"), naming each file that differs by position (its name, instances and
    /// bytes in both; the first three, then how many more); `None` if they are the
    /// same. Names are compared only when both have them.
    ///
    /// ```
    /// use std::path::Path;
    /// use tfrecord_lirs_format::dataset_identity::DatasetIdentity;
    /// let train = DatasetIdentity::of_files([(Path::new("/a/train-0"), 10, 400)]);
    /// let moved = DatasetIdentity::of_files([(Path::new("/b/train-0"), 10, 400)]);
    /// let valid = DatasetIdentity::of_files([(Path::new("/a/valid-0"), 10, 400)]);
    /// assert_eq!(train.differences(&moved, "this Loader"), None);
    /// let text = train.differences(&valid, "this Loader").unwrap();
    /// assert!(text.contains("the state's file 0 train-0 (10 instances, 400 bytes), \
    ///                        this Loader's file 0 valid-0 (10 instances, 400 bytes)"));
    /// ```
    pub fn differences(&self, here: &DatasetIdentity, holder: &str) -> Option<String> {
        let same_name = |i: usize| match (&self.names, &here.names) {
            (Some(a), Some(b)) => a.get(i) == b.get(i),
            _ => true,
        };
        let count = self.files.len().max(here.files.len());
        let differ: Vec<String> = (0..count)
            .filter(|&i| !(self.files.get(i) == here.files.get(i) && same_name(i)))
            .map(|i| {
                format!(
                    "the state's {}, {holder}'s {}",
                    self.describe(i),
                    here.describe(i)
                )
            })
            .collect();
        if differ.is_empty() {
            return None;
        }
        let shown = differ.len().min(3);
        let more = differ.len() - shown;
        Some(format!(
            "{} files in the state, {} in {holder}; they differ at: {}{}",
            self.files.len(),
            here.files.len(),
            differ[..shown].join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        ))
    }

    /// File `i` as a message names it.
    fn describe(&self, i: usize) -> String {
        let name = self
            .names
            .as_ref()
            .and_then(|n| n.get(i))
            .map_or_else(|| format!("file {i}"), |n| format!("file {i} {n}"));
        match self.files.get(i) {
            Some((n, bytes)) => format!("{name} ({n} instances, {bytes} bytes)"),
            None => "no such file".to_string(),
        }
    }

    /// Appends the identity as bytes (little-endian u64 words): the file count, then
    /// each file's instances, bytes and name length, then the name (UTF-8). The names
    /// must be there (a state saved now always has them).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let names = self.names.as_deref().unwrap_or(&[]);
        out.extend_from_slice(&(self.files.len() as u64).to_le_bytes());
        for (i, &(instances, bytes)) in self.files.iter().enumerate() {
            let name = names.get(i).map_or("", String::as_str);
            for word in [instances, bytes, name.len() as u64] {
                out.extend_from_slice(&word.to_le_bytes());
            }
            out.extend_from_slice(name.as_bytes());
        }
    }

    /// Reads [`encode_into`](DatasetIdentity::encode_into)'s bytes at the start of
    /// `bytes`: the identity and the bytes after it;
    /// [`DataLoss`](crate::error::Error::DataLoss) naming `what` for
    /// bytes that are not one.
    pub fn decode_from<'a>(bytes: &'a [u8], what: &str) -> Result<(DatasetIdentity, &'a [u8])> {
        let mut rest = bytes;
        let word = |rest: &mut &'a [u8]| -> Result<u64> {
            let (head, tail) = rest.split_at_checked(8).ok_or_else(|| {
                Error::data_loss(format!("{what} ends early in its files (truncated)"))
            })?;
            *rest = tail;
            let mut w = [0u8; 8];
            w.copy_from_slice(head);
            Ok(u64::from_le_bytes(w))
        };
        let count = word(&mut rest)?;
        // Every file takes at least 24 bytes: a count past that is damage.
        if u128::from(count) * 24 > rest.len() as u128 {
            return Err(Error::data_loss(format!(
                "{what} claims {count} files but holds {} bytes of them",
                rest.len()
            )));
        }
        let (mut files, mut names) = (Vec::new(), Vec::new());
        for i in 0..count {
            let (instances, size, len) = (word(&mut rest)?, word(&mut rest)?, word(&mut rest)?);
            if len > MAX_NAME_BYTES || len > rest.len() as u64 {
                return Err(Error::data_loss(format!(
                    "{what}'s file {i} has a name of {len} bytes, more than it holds or \
                     than {MAX_NAME_BYTES}"
                )));
            }
            let (name, tail) = rest.split_at(len as usize);
            rest = tail;
            let name = std::str::from_utf8(name).map_err(|_| {
                Error::data_loss(format!("{what}'s file {i} has a name that is not UTF-8"))
            })?;
            files.push((instances, size));
            names.push(name.to_string());
        }
        Ok((
            DatasetIdentity {
                files,
                names: Some(names),
            },
            rest,
        ))
    }
}

/// The base name of data file `path` (the whole path when it has none), as a state
/// names it: a URL's last segment too (`gs://bucket/dir/train-0` is `train-0`).
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or(path.as_os_str())
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(names: &[&str]) -> DatasetIdentity {
        DatasetIdentity::of_files(names.iter().map(|n| (Path::new(*n), 100, 1600)))
    }

    #[test]
    fn names_not_places_tell_datasets_apart() {
        let train = identity(&["/data/t-0", "/data/t-1"]);
        assert_eq!(train.names, Some(vec!["t-0".into(), "t-1".into()]));
        assert_eq!(train.instances(), 200);
        assert_eq!(
            train.differences(&identity(&["gs://b/x/t-0", "gs://b/x/t-1"]), "here"),
            None
        );
        let swapped = train.differences(&identity(&["t-1", "t-0"]), "this Sampler");
        let text = swapped.unwrap();
        assert!(
            text.starts_with("2 files in the state, 2 in this Sampler; they differ at: the state's file 0 t-0 (100 instances, 1600 bytes), this Sampler's file 0 t-1"),
            "{text}"
        );
        // Another count of one file, and a missing file.
        let mut fewer = identity(&["t-0"]);
        fewer.files[0].0 = 99;
        let text = train.differences(&fewer, "here").unwrap();
        assert!(text.contains("here's file 0 t-0 (99 instances"), "{text}");
        assert!(
            text.contains(
                "the state's file 1 t-1 (100 instances, 1600 bytes), here's no such file"
            ),
            "{text}"
        );
        // Without names (an old state): instances and bytes only.
        let old = DatasetIdentity {
            names: None,
            ..train.clone()
        };
        assert_eq!(old.differences(&identity(&["v-0", "v-1"]), "here"), None);
        let many = identity(&["a", "b", "c", "d", "e"]);
        let text = many.differences(&identity(&["v", "w", "x", "y", "z"]), "here");
        assert!(text.unwrap().ends_with("; and 2 more"));
    }

    #[test]
    fn identity_encodes_and_damage_is_data_loss() {
        let train = identity(&["t-0", "t-1"]);
        let mut bytes = Vec::new();
        train.encode_into(&mut bytes);
        bytes.extend_from_slice(b"after");
        let (back, rest) = DatasetIdentity::decode_from(&bytes, "state").unwrap();
        assert_eq!((back, rest), (train, &b"after"[..]));
        let with = |at: usize, word: u64| {
            let mut b = bytes.clone();
            b[at..at + 8].copy_from_slice(&word.to_le_bytes());
            b
        };
        for (damaged, want) in [
            (bytes[..20].to_vec(), "claims 2 files"),
            (with(0, 1 << 40), "claims 1099511627776 files"),
            (with(24, 5000), "name of 5000 bytes"),
            (bytes[..57].to_vec(), "ends early"),
        ] {
            let e = DatasetIdentity::decode_from(&damaged, "state").unwrap_err();
            assert_eq!(e.kind(), "DataLoss", "{e}");
            assert!(e.to_string().contains(want), "{e} / {want}");
        }
        let mut bad = bytes.clone();
        bad[32] = 0xff;
        let e = DatasetIdentity::decode_from(&bad, "state").unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }
}
