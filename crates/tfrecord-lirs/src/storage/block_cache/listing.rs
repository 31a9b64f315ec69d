//! Listings kept in the cache directory: the URLs a pattern matched when it was last
//! listed, so that a glob over a store that became unreachable still names its files
//! (whose blocks the cache may hold).
//!
//! On disk: `<u>/LISTING` (`u` = the CRC-64/NVME of the pattern, as an object's
//! directory): a first line `tfrecord-lirs listing 1`, the pattern, one URL a line,
//! then `crc64=<16 hex digits>` of every byte before that line. Written through a
//! temporary file and a rename, and read only when its checksum and pattern match:
//! a torn or damaged listing is never trusted.

use std::fs;

use super::{hash, BlockCache};

const LISTING: &str = "LISTING";
const HEADER: &str = "tfrecord-lirs listing 1\n";

impl BlockCache {
    /// Keeps `urls` as what `pattern` matches (best effort: a listing that cannot be
    /// kept only makes an offline glob fail as it would have).
    pub(crate) fn remember_listing(&self, pattern: &str, urls: &[String]) {
        let lines = std::iter::once(pattern).chain(urls.iter().map(String::as_str));
        if lines.clone().any(|l| l.contains('\n')) {
            return;
        }
        let mut body = String::from(HEADER);
        for line in lines {
            body.push_str(line);
            body.push('\n');
        }
        let text = format!("{body}crc64={:016x}\n", hash(&body));
        if self.remembered_listing(pattern).as_deref() == Some(urls) {
            return;
        }
        let dir = self.url_dir(pattern);
        if fs::create_dir_all(&dir).is_ok() {
            let _ = self.write_file(&dir, LISTING, text.as_bytes());
        }
    }

    /// The URLs `pattern` matched when it was last listed, if a whole listing of it
    /// is kept.
    pub(crate) fn remembered_listing(&self, pattern: &str) -> Option<Vec<String>> {
        let text = fs::read_to_string(self.url_dir(pattern).join(LISTING)).ok()?;
        let whole = text.strip_suffix('\n')?;
        let body_end = whole.rfind('\n')? + 1;
        let (body, check) = whole.split_at(body_end);
        let crc = check.strip_prefix("crc64=")?;
        if crc != format!("{:016x}", hash(body)) {
            return None;
        }
        let mut lines = body.strip_prefix(HEADER)?.lines();
        // Another pattern of the same hash: not this one's.
        if lines.next()? != pattern {
            return None;
        }
        Some(lines.map(str::to_string).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_is_kept_whole_or_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlockCache::open_alone(dir.path(), 1 << 30).unwrap();
        let pattern = "s3://b/train-*";
        assert_eq!(cache.remembered_listing(pattern), None);
        let urls = vec!["s3://b/train-0".to_string(), "s3://b/train-1".to_string()];
        cache.remember_listing(pattern, &urls);
        assert_eq!(cache.remembered_listing(pattern), Some(urls.clone()));
        assert_eq!(cache.remembered_listing("s3://b/valid-*"), None);
        // An empty match is a listing too.
        cache.remember_listing("s3://b/none-*", &[]);
        assert_eq!(cache.remembered_listing("s3://b/none-*"), Some(vec![]));
        // Torn (cut short) or damaged: not trusted.
        let path = cache.url_dir(pattern).join(LISTING);
        let whole = fs::read(&path).unwrap();
        for cut in [whole.len() - 1, whole.len() - 10, whole.len() / 2, 5, 0] {
            fs::write(&path, &whole[..cut]).unwrap();
            assert_eq!(cache.remembered_listing(pattern), None, "cut at {cut}");
        }
        let mut damaged = whole.clone();
        damaged[30] ^= 1;
        fs::write(&path, &damaged).unwrap();
        assert_eq!(cache.remembered_listing(pattern), None);
        // A new listing replaces it; no temporary file is left.
        let fewer = vec!["s3://b/train-0".to_string()];
        cache.remember_listing(pattern, &fewer);
        assert_eq!(cache.remembered_listing(pattern), Some(fewer));
        let names: Vec<String> = fs::read_dir(cache.url_dir(pattern))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, [LISTING]);
    }
}
