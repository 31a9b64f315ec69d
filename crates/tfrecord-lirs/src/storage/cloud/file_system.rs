//! The [`FileSystem`] operations of object storage: open, read whole, create, delete,
//! list a pattern's matches (no rename: object stores have none).

use std::io;

use url::Url;

use super::process::{invalid, port_suffix};
use super::reader::ObjectReader;
use super::writer::ObjectWriter;
use super::ObjectStoreFileSystem;
use crate::storage::remote::{Durability, FileSystem, RemoteWrite};
use crate::storage::ReadAt;

impl FileSystem for ObjectStoreFileSystem {
    fn open_read(&self, url: &str) -> io::Result<Box<dyn ReadAt>> {
        let object = self.locate(url)?;
        let (process, store) = object.here()?;
        let meta = process
            .runtime
            .block_on(store.head(&object.path))
            .map_err(|e| object.error(e))?;
        Ok(Box::new(ObjectReader {
            object,
            size: meta.size,
            identity: identity(&meta),
        }))
    }

    fn read_all(&self, url: &str) -> io::Result<Vec<u8>> {
        let object = self.locate(url)?;
        let (process, store) = object.here()?;
        let bytes = process.runtime.block_on(async {
            let got = store.get(&object.path).await?;
            got.bytes().await
        });
        Ok(bytes.map_err(|e| object.error(e))?.to_vec())
    }

    fn create(&self, url: &str) -> io::Result<Box<dyn RemoteWrite>> {
        Ok(Box::new(ObjectWriter {
            object: self.locate(url)?,
            data: Vec::new(),
            closed: false,
        }))
    }

    fn rename(&self, from: &str, _to: &str) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{from}: object storage has no rename"),
        ))
    }

    fn delete(&self, url: &str) -> io::Result<()> {
        let object = self.locate(url)?;
        let (process, store) = object.here()?;
        match process.runtime.block_on(store.delete(&object.path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(object.error(e)),
        }
    }

    fn durability(&self, _url: &str) -> Durability {
        Durability::WholeObject
    }

    /// Lists the objects under the pattern's literal directory and keeps those whose
    /// URL it matches (`*` and `?` never match `/`, as `tf.io.gfile.glob`).
    fn glob(&self, pattern: &str) -> io::Result<Vec<String>> {
        use futures::TryStreamExt;
        let matcher = glob::Pattern::new(pattern)
            .map_err(|e| invalid(format!("{pattern}: not a pattern ({e})")))?;
        let dir = tfrecord_lirs_format::file_list::literal_dir(pattern);
        let object = self.locate(dir)?;
        let (process, store) = object.here()?;
        let (prefix, scheme) = (object.path.clone(), &object.scheme);
        let parsed = Url::parse(dir).map_err(|e| invalid(format!("{dir}: not a URL ({e})")))?;
        let base = format!(
            "{}://{}{}",
            scheme,
            parsed.host_str().unwrap_or_default(),
            port_suffix(&parsed)
        );
        let prefix = (!prefix.as_ref().is_empty()).then_some(prefix);
        let metas: Vec<object_store::ObjectMeta> = process
            .runtime
            .block_on(store.list(prefix.as_ref()).try_collect())
            .map_err(|e| object.error(e))?;
        let options = glob::MatchOptions {
            require_literal_separator: true,
            ..glob::MatchOptions::new()
        };
        Ok(metas
            .into_iter()
            .map(|m| format!("{base}/{}", m.location))
            .filter(|url| matcher.matches_with(url, options))
            .collect())
    }
}

/// What identifies this version of an object: its ETag, version (generation) and
/// last-modified time as the store reports them; `None` when it reports none of them
/// (a last-modified of 0 is a client's stand-in for none).
fn identity(meta: &object_store::ObjectMeta) -> Option<String> {
    let modified = meta.last_modified.timestamp_nanos_opt().unwrap_or_default();
    if meta.e_tag.is_none() && meta.version.is_none() && modified == 0 {
        return None;
    }
    Some(format!(
        "etag={:?} version={:?} modified={modified}",
        meta.e_tag, meta.version
    ))
}
