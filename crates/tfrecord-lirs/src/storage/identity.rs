//! Which version of a file a path names now, as its storage answers it: a local file's
//! `stat` (device, inode, size, modification time). An object's version (its ETag,
//! generation or last-modified time) is answered by the opened source
//! ([`ReadAt::identity`](crate::ReadAt::identity)): a look at a URL costs a request, so
//! only an open asks.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::SystemTime;

use crate::storage::Storage;

/// A local file as it is now: a rewrite or a replacement changes at least one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// The device holding it.
    pub device: u64,
    /// Its inode on that device.
    pub inode: u64,
    /// Its size in bytes.
    pub len: u64,
    /// When it was last modified (nanoseconds), where the platform says.
    pub modified: Option<SystemTime>,
}

impl Storage {
    /// `path`'s identity now: a local file's [`FileStat`]; `None` for a URL (not looked
    /// at: a look costs a request) or a path that cannot be stat'ed.
    ///
    /// ```
    /// use std::path::Path;
    /// use tfrecord_lirs::Storage;
    /// let dir = std::env::temp_dir();
    /// let storage = Storage::local();
    /// assert!(storage.stat(&dir).is_some());
    /// assert!(storage.stat(Path::new("s3://bucket/x")).is_none());
    /// ```
    pub fn stat(&self, path: &Path) -> Option<FileStat> {
        let meta = self.local_metadata(path)?;
        Some(FileStat {
            device: meta.dev(),
            inode: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
        })
    }

    /// The scheme of a URL (`gs` for `gs://bucket/x`); `None` for a local path. The one
    /// rule for every caller (see [`remote::scheme`](crate::remote::scheme)).
    pub fn scheme(path: &Path) -> Option<&str> {
        super::remote::scheme(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_the_same_until_it_is_replaced_and_a_url_has_no_stat() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a");
        std::fs::write(&path, b"one").unwrap();
        let storage = Storage::local();
        let first = storage.stat(&path).unwrap();
        assert_eq!(storage.stat(&path), Some(first));
        assert_eq!(first.len, 3);
        // Replaced by another file of the same size: another inode.
        let other = dir.path().join("b");
        std::fs::write(&other, b"two").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let now = storage.stat(&path).unwrap();
        assert_ne!(now, first);
        assert_eq!(now.len, first.len);
        assert_eq!(storage.stat(&dir.path().join("missing")), None);
        assert_eq!(storage.stat(Path::new("s3://bucket/a")), None);
        assert_eq!(Storage::scheme(Path::new("gs://b/x")), Some("gs"));
        assert_eq!(Storage::scheme(Path::new("/data/x")), None);
    }
}
