//! Where the instances are, and the page units they form: the offset tables of a
//! set of files, one global id space. Pure (no I/O): the engine's reader builds it from
//! the tables it opened, whose entries it reads through [`Offsets`]; the orders
//! ([`EpochOrder`](crate::order::EpochOrder)) read page units from it.

use std::ops::Deref;
use std::path::PathBuf;

use crate::error::Error;
use crate::framing::{PageSize, DEFAULT_PAGE_SIZE};

/// A file's offset table as the layout reads it: wherever the entries lie (mapped, read
/// on demand, in memory), the storage layer implements this; nothing here checks that
/// the entries increase (see [`span_of`]).
pub trait Offsets {
    /// Why a read of entries failed (the storage's error).
    type Error: std::error::Error + Send + Sync + 'static;
    /// All entries as one slice, held for as long as the view lives.
    type View<'a>: Deref<Target = [u64]>
    where
        Self: 'a;

    /// Entries in the table.
    fn len(&self) -> u64;

    /// Whether the table has no entries.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All entries as a slice when the table is mapped or in memory; `None` when its
    /// entries are read on demand.
    fn view(&self) -> Option<Self::View<'_>>;

    /// Entry `i` (`i < len`).
    fn get(&self, i: u64) -> Result<u64, Self::Error>;

    /// Entries `first..first + out.len()` into `out`.
    fn read_into(&self, first: u64, out: &mut [u64]) -> Result<(), Self::Error>;
}

/// The entries of a table held in memory (e.g. a layout of no files, or tests).
impl Offsets for Vec<u64> {
    type Error = NoEntries;
    type View<'a> = &'a [u64];

    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }

    fn view(&self) -> Option<&[u64]> {
        Some(self)
    }

    fn get(&self, i: u64) -> Result<u64, NoEntries> {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.as_slice().get(i).copied())
            .ok_or(NoEntries(i, i + 1))
    }

    fn read_into(&self, first: u64, out: &mut [u64]) -> Result<(), NoEntries> {
        let end = first + out.len() as u64;
        let entries = usize::try_from(first)
            .ok()
            .and_then(|from| self.as_slice().get(from..from + out.len()));
        match entries {
            Some(entries) => {
                out.copy_from_slice(entries);
                Ok(())
            }
            None => Err(NoEntries(first, end)),
        }
    }
}

/// Entries `first..end` (the two fields) asked of a table in memory that lacks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoEntries(pub u64, pub u64);

impl std::fmt::Display for NoEntries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoEntries(i, end) if *end == i + 1 => write!(f, "no entry {i}"),
            NoEntries(first, end) => write!(f, "no entries {first}..{end}"),
        }
    }
}

impl std::error::Error for NoEntries {}

/// Where every instance of every file is: offsets, file sizes, global id ranges. `T` is
/// how each file's table is read (the engine's `Layout` names its storage's table).
#[derive(Debug)]
pub struct Layout<T> {
    pub(crate) files: Vec<FileLayout<T>>,
    pub(crate) page: PageSize,
    pub(crate) len: u64,
}

/// One data file's part of a [`Layout`].
#[derive(Debug)]
pub struct FileLayout<T> {
    /// The offset table: record starts, read where the table lies (mapped, read on
    /// demand or in memory), never copied whole. Its entries are checked as they are
    /// used ([`span_of`]), not at open.
    pub table: T,
    /// Where the table is (named when a read of it fails).
    pub table_path: PathBuf,
    /// The data file's size.
    pub size: u64,
    /// The global id of the file's instance 0.
    pub first_id: u64,
}

/// Why an instance's span, as its table gives it, cannot be one: the table does not
/// describe the data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadSpan {
    /// The next entry (at `next`) is not past this one (at `start`).
    NotIncreasing {
        /// The instance's entry.
        start: u64,
        /// The next instance's entry.
        next: u64,
    },
    /// The span's end (the next entry, `end`) lies past the end of the file.
    PastEnd {
        /// The next instance's entry.
        end: u64,
    },
    /// The instance's own entry lies at or past the end of the file (the last entry).
    StartPastEnd {
        /// The instance's entry.
        start: u64,
    },
}

/// `[start, end)` of instance `i`'s span in a file of `size` bytes whose table is
/// `entries`: its record and the padding after it, checked against its neighbour and
/// the file size (so reading every instance once checks the whole table).
#[inline]
pub fn span_of(entries: &[u64], size: u64, i: usize) -> Result<(u64, u64), BadSpan> {
    let start = entries[i];
    match entries.get(i + 1) {
        Some(&next) if next <= start => Err(BadSpan::NotIncreasing { start, next }),
        Some(&next) if next > size => Err(BadSpan::PastEnd { end: next }),
        Some(&next) => Ok((start, next)),
        None if start >= size => Err(BadSpan::StartPastEnd { start }),
        None => Ok((start, size)),
    }
}

impl<T: Offsets> FileLayout<T> {
    /// Instances in the file.
    pub fn len(&self) -> u64 {
        self.table.len()
    }

    /// Whether the file has no instances.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Instance `i`'s entry and the next one (`None` for the last instance), read from
    /// the table wherever it is. `i < len`.
    pub fn entry_pair(&self, i: u64) -> Result<(u64, Option<u64>), T::Error> {
        if i + 1 < self.len() {
            let mut two = [0u64; 2];
            self.table.read_into(i, &mut two)?;
            Ok((two[0], Some(two[1])))
        } else {
            Ok((self.table.get(i)?, None))
        }
    }

    /// `[start, end)` of instance `i`'s span, checked as [`span_of`] does; the outer
    /// error is the table's read failing.
    #[allow(clippy::type_complexity)]
    pub fn span(&self, i: u64) -> Result<Result<(u64, u64), BadSpan>, T::Error> {
        let (start, next) = self.entry_pair(i)?;
        Ok(match next {
            Some(next) => span_of(&[start, next], self.size, 0),
            None => span_of(&[start], self.size, 0),
        })
    }
}

/// Whether instance `i` of a file of `size` bytes with table `entries` starts a
/// page unit: the first of its page, or next to a span longer than a page.
/// Entries not yet checked may be out of order: a span is then measured as
/// 0 bytes (the read of it reports the table).
fn starts_unit(entries: &[u64], size: u64, i: usize, page: PageSize) -> bool {
    let span_len = |j: usize| {
        let end = entries.get(j + 1).copied().unwrap_or(size);
        end.saturating_sub(entries[j])
    };
    i == 0
        || page.page_of(entries[i]) != page.page_of(entries[i - 1])
        || span_len(i - 1) > page.get()
        || span_len(i) > page.get()
}

impl<T: Offsets> Layout<T> {
    /// The layout of `files` (in global id order) for pages of `page`.
    pub fn new(files: Vec<FileLayout<T>>, page: PageSize) -> Layout<T> {
        let len = files.iter().map(FileLayout::len).sum();
        Layout { files, page, len }
    }

    /// Instances across all files.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// `n` instances described by no file (instance-based orders of a length).
    pub fn of_len(n: u64) -> crate::error::Result<Layout<T>> {
        Ok(Layout {
            files: Vec::new(),
            page: PageSize::checked(DEFAULT_PAGE_SIZE)?,
            len: n,
        })
    }

    /// The data files' bytes per instance on average (a span: the record with its
    /// framing and any padding after it); 0 with no instances.
    pub fn mean_span_bytes(&self) -> u64 {
        let bytes: u64 = self.files.iter().map(|f| f.size).sum();
        bytes.checked_div(self.len).unwrap_or(0)
    }

    /// Whether there are no instances.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The page size the page units are computed for.
    pub fn page_size(&self) -> PageSize {
        self.page
    }

    /// The files, in global id order.
    pub fn files(&self) -> &[FileLayout<T>] {
        &self.files
    }

    /// (file index, index within the file) of global `id`, which must be `< len`.
    pub fn locate(&self, id: u64) -> (usize, usize) {
        let f = self.files.partition_point(|file| file.first_id <= id) - 1;
        (f, (id - self.files[f].first_id) as usize)
    }

    /// Calls `visit(first_id, len)` for every page unit, in file order. Reads
    /// every table (the page units of order version 1); a table that is not mapped is read
    /// into memory for the scan, one file at a time.
    pub fn for_each_unit(&self, mut visit: impl FnMut(u64, u64)) -> crate::error::Result<()> {
        for file in &self.files {
            let failed = |source: Box<dyn std::error::Error + Send + Sync>| Error::Offsets {
                table: file.table_path.clone(),
                source,
            };
            let view = file.table.view();
            let read;
            let entries: &[u64] = match &view {
                Some(view) => view,
                None => {
                    let n = usize::try_from(file.len()).map_err(|e| failed(Box::new(e)))?;
                    let mut all = vec![0u64; n];
                    file.table
                        .read_into(0, &mut all)
                        .map_err(|e| failed(Box::new(e)))?;
                    read = all;
                    &read
                }
            };
            let mut start = 0usize;
            for i in 1..=entries.len() {
                if i == entries.len() || starts_unit(entries, file.size, i, self.page) {
                    visit(file.first_id + start as u64, (i - start) as u64);
                    start = i;
                }
            }
        }
        Ok(())
    }
}
