//! Inspection of a data file (and its table): what `verify` and `info` report, and the
//! padded-file invariants checked against it (the table's own checks are the reader's,
//! in `read/table_check.rs`).

use std::path::Path;

use crate::error::{Error, Remedy, Result};
use tfrecord_lirs_format::framing::{filler_fits_page, instance_is_placed};
use tfrecord_lirs_format::framing::{Padding, PageSize, MAX_PAGE_SIZE, MIN_PAGE_SIZE};

use crate::read::table_check::check_table_shape;
use crate::scan::{RecordScanner, PROGRESS_EVERY};
use crate::storage::Storage;

/// What a full scan of a data file (and optionally its table) found.
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    /// Instances (non-filler records).
    pub instances: u64,
    /// Filler records.
    pub fillers: u64,
    /// File size in bytes.
    pub file_size: u64,
    /// Bytes taken by filler records.
    pub filler_bytes: u64,
    /// Smallest instance payload, in bytes (0 when there are none).
    pub min_payload: u64,
    /// Largest instance payload, in bytes.
    pub max_payload: u64,
    /// Sum of instance payload sizes.
    pub total_payload: u64,
    /// Page sizes for which the padded-file invariants (b) and (c) hold, when the file
    /// has at least one filler and one instance (a file without fillers is reported as
    /// not padded). Smallest first. Any page larger than a small file trivially holds
    /// it whole, so this alone does not tell the page size: see
    /// [`padded_for`](Inspection::padded_for).
    pub padded_page_sizes: Vec<u64>,
    /// The page size the fillers point to: the largest power of two P from 512 bytes
    /// to 16 MiB such that every filler is one the padded writer could have written for
    /// P: it ends on a page boundary, or starts fewer than 24 bytes before one (after a
    /// large instance). `None` without fillers, or if some filler fits no page size.
    pub filler_page_size: Option<u64>,
    /// For each candidate page size, the first filler the padded writer could not have
    /// written for it: (its offset, its end).
    misfit_fillers: Vec<Option<(u64, u64)>>,
    /// For each candidate page size, how many pairs of consecutive fillers have ends a
    /// multiple of it apart (out of `filler_pairs`): the page grid of a file that
    /// fits no grid because bytes were removed or inserted.
    filler_spacing: Vec<u64>,
    filler_pairs: u64,
    /// For each candidate page size (512 B .. 16 MiB, smallest first), the first
    /// instance placed against invariants (b)/(c).
    violations: Vec<Option<Misplaced>>,
}

/// An instance placed against invariant (b) or (c) for some page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Misplaced {
    id: u64,
    offset: u64,
    framed: u64,
    span: u64,
}

/// The error for instance `m` breaking (b) or (c) at page size `p`.
fn misplaced_error(data: &Path, p: PageSize, m: Misplaced, how: &str) -> Error {
    let Misplaced {
        id,
        offset,
        framed,
        span,
    } = m;
    let why = if p.is_small(framed) {
        format!("padded-file invariant (b) broken for page size {}{how}: instance of {framed} framed bytes with span of {span} bytes crosses a page boundary", p.get())
    } else {
        format!("padded-file invariant (c) broken for page size {}{how}: instance of {framed} framed bytes does not start on a page boundary", p.get())
    };
    Error::layout(data, Some(id), offset, why)
}

impl Inspection {
    /// The page size the file is padded for, judged from its fillers: the largest page
    /// size, at most [`filler_page_size`](Inspection::filler_page_size), for which
    /// invariants (b) and (c) hold. `None` if the file has no fillers (or no
    /// instances), a filler off the 512-byte grid, or no such page size.
    ///
    /// Only page sizes every filler ends on are candidates, so a damaged padded file
    /// is not passed off as padded for some page larger than the whole file.
    pub fn padded_for(&self) -> Option<u64> {
        let limit = self.filler_page_size?;
        self.padded_page_sizes
            .iter()
            .rev()
            .find(|&&p| p <= limit)
            .copied()
    }

    /// Checks the padded-file invariants at the page size the fillers point to
    /// (`verify` without `--page-size`). `Ok(None)` for a file without fillers or
    /// instances (not padded: nothing to check); `Ok(Some(page size))` as
    /// [`padded_for`](Inspection::padded_for). Otherwise an error naming `data`:
    /// the first instance breaking (b)/(c) at
    /// [`filler_page_size`](Inspection::filler_page_size); or, when the fillers fit
    /// no page grid (bytes removed or inserted), the first instance or filler off the
    /// grid of the page size most consecutive fillers are a multiple of apart; or else
    /// the first filler not ending on a 512-byte boundary.
    pub fn check_padded(&self, data: &Path) -> Result<Option<u64>> {
        if self.fillers == 0 || self.instances == 0 {
            return Ok(None);
        }
        if let Some(p) = self.padded_for() {
            return Ok(Some(p));
        }
        let candidates: Vec<PageSize> = candidate_page_sizes().collect();
        let index_of = |p: u64| candidates.iter().position(|c| c.get() == p);
        if let Some(k) = self.filler_page_size.and_then(index_of) {
            if let Some(m) = self.violations.get(k).copied().flatten() {
                let how = " (the page size inferred from the fillers, which all end on its page boundaries)";
                return Err(misplaced_error(data, candidates[k], m, how));
            }
        }
        // The fillers fit no page grid: bytes were removed or inserted. If most
        // fillers are still a whole number of pages apart, that is the page size:
        // report the first instance or filler off its grid.
        let guess = (0..candidates.len()).rev().find(|&k| {
            self.filler_pairs > 0
                && self
                    .filler_spacing
                    .get(k)
                    .is_some_and(|&n| 2 * n > self.filler_pairs)
        });
        if let Some(k) = guess {
            let p = candidates[k];
            let how = " (the page size most fillers are spaced by)";
            let instance = self.violations.get(k).copied().flatten();
            let filler = self.misfit_fillers.get(k).copied().flatten();
            match (instance, filler) {
                (Some(m), Some((f, _))) if m.offset < f => {
                    return Err(misplaced_error(data, p, m, how))
                }
                (Some(m), None) => return Err(misplaced_error(data, p, m, how)),
                (_, Some((offset, end))) => {
                    return Err(Error::layout(
                        data,
                        None,
                        offset,
                        format!(
                            "filler record ends at byte {end}, not on a page boundary for page size {}{how}: the padded writer ends every filler on a page boundary (or starts it less than 24 bytes before one)",
                            p.get()
                        ),
                    ))
                }
                (None, None) => {}
            }
        }
        let (offset, end) = self
            .misfit_fillers
            .first()
            .copied()
            .flatten()
            .unwrap_or((0, 0));
        Err(Error::layout(
            data,
            None,
            offset,
            format!(
                "filler record ends at byte {end}, not on a 512-byte boundary: the padded writer ends every filler on a page boundary (or starts it less than 24 bytes before one), so no page size can be inferred and the padded-file invariants cannot be checked"
            ),
        )
        .with_remedy(Remedy::RepadOrPageSize {
            data: data.to_path_buf(),
        }))
    }

    /// Mean instance payload size.
    pub fn mean_payload(&self) -> f64 {
        if self.instances == 0 {
            0.0
        } else {
            self.total_payload as f64 / self.instances as f64
        }
    }
}

/// The page sizes of `candidates` whose first offence in `firsts` (one per candidate)
/// is `None`, smallest first.
fn clean_page_sizes<'a, T>(
    candidates: &'a [PageSize],
    firsts: &'a [Option<T>],
) -> impl DoubleEndedIterator<Item = u64> + 'a {
    candidates
        .iter()
        .zip(firsts)
        .filter(|(_, first)| first.is_none())
        .map(|(p, _)| p.get())
}

/// Every candidate page size, smallest first.
fn candidate_page_sizes() -> impl Iterator<Item = PageSize> {
    (MIN_PAGE_SIZE.trailing_zeros()..=MAX_PAGE_SIZE.trailing_zeros())
        .filter_map(|shift| PageSize::new(1 << shift))
}

/// Scans `data`, checking every record's CRCs and, if `table` is given, that the table
/// matches the file: each entry is an instance's record start, each span holds one
/// instance followed only by fillers, and the spans tile the file. With `page`, the
/// padded-file invariants for that page size are checked too; without, see
/// [`Inspection::check_padded`] to check them at the page size the fillers point to.
pub fn inspect(
    data: &Path,
    table: Option<(&Path, &[u64])>,
    page: Option<PageSize>,
) -> Result<Inspection> {
    inspect_with_progress(data, table, page, |_| {})
}

/// [`inspect`], calling `progress` with the bytes scanned so far now and then.
pub fn inspect_with_progress(
    data: &Path,
    table: Option<(&Path, &[u64])>,
    page: Option<PageSize>,
    progress: impl FnMut(u64),
) -> Result<Inspection> {
    inspect_with(data, table, page, Padding::Fillers, progress)
}

/// [`inspect_with_progress`] with the table trusted as `padding` says. With
/// [`Padding::Opaque`] and a table, the table is authoritative: the records at its
/// offsets are the instances, and every other record (before the first, between,
/// after the last) is padding, counted as a filler whatever its payload; every
/// record's CRCs are still checked, padding's included, and each entry must be a
/// record start that is not a LIRS filler. The page size is then inferred from the
/// padding as from fillers.
pub fn inspect_with(
    data: &Path,
    table: Option<(&Path, &[u64])>,
    page: Option<PageSize>,
    padding: Padding,
    progress: impl FnMut(u64),
) -> Result<Inspection> {
    inspect_in(&Storage::local(), data, table, page, padding, progress)
}

/// [`inspect_with`] of `data` through `storage` (a URL when `storage` has a file
/// system for it): the same scan, checks and errors as for a local file.
pub fn inspect_in(
    storage: &Storage,
    data: &Path,
    table: Option<(&Path, &[u64])>,
    page: Option<PageSize>,
    padding: Padding,
    mut progress: impl FnMut(u64),
) -> Result<Inspection> {
    let opaque = padding == Padding::Opaque && table.is_some();
    // The scanner numbers instances by counting non-filler records; with an
    // authoritative table, an instance's id is its table position instead.
    let renumber = |e: Error| match table {
        Some((_, offsets)) if opaque => {
            e.renumber_frame(|o| offsets.binary_search(&o).ok().map(|i| i as u64))
        }
        _ => e,
    };
    let mut scanner = RecordScanner::open_in(storage, data)?;
    let mut last_report = 0u64;
    let file_size = scanner.file_size();
    // The same rule the reader applies at open, before the records are walked.
    if let Some((table_path, offsets)) = table {
        // Positioned reads without a map (a URL has only its file system's reads).
        let src = storage.open_unmapped(data)?;
        let entry = |i: u64| Ok(offsets[i as usize]);
        check_table_shape(
            (data, table_path),
            (offsets.len() as u64, &entry),
            file_size,
            0,
            &*src,
            padding,
        )?;
    }
    let mut out = Inspection {
        instances: 0,
        fillers: 0,
        file_size,
        filler_bytes: 0,
        min_payload: u64::MAX,
        max_payload: 0,
        total_payload: 0,
        padded_page_sizes: Vec::new(),
        filler_page_size: None,
        misfit_fillers: Vec::new(),
        filler_spacing: Vec::new(),
        filler_pairs: 0,
        violations: Vec::new(),
    };
    let candidates: Vec<PageSize> = candidate_page_sizes().collect();
    let mut violations: Vec<Option<Misplaced>> = vec![None; candidates.len()];
    let mut misfit_fillers: Vec<Option<(u64, u64)>> = vec![None; candidates.len()];
    let mut filler_spacing = vec![0u64; candidates.len()];
    let mut last_filler_end: Option<u64> = None;
    // The previous instance, whose span ends where the next instance starts.
    let mut open_instance: Option<(u64, u64, u64)> = None; // (id, offset, framed)
    let close = |inst: Option<(u64, u64, u64)>,
                 end: u64,
                 violations: &mut [Option<Misplaced>]|
     -> Result<()> {
        let Some((id, offset, framed)) = inst else {
            return Ok(());
        };
        // Padding after an instance is another tool's when the table is trusted (the
        // reference implementation pads before a large record up to its page, which can
        // be pages away): (b) is judged on the instance's record alone.
        let m = Misplaced {
            id,
            offset,
            framed,
            span: if opaque { framed } else { end - offset },
        };
        for (first, p) in violations.iter_mut().zip(&candidates) {
            if first.is_none() && !instance_is_placed(*p, offset, framed, m.span) {
                *first = Some(m);
            }
        }
        if let Some(p) = page {
            if !instance_is_placed(p, offset, framed, m.span) {
                return Err(misplaced_error(data, p, m, ""));
            }
        }
        Ok(())
    };
    let mut next_entry = 0usize; // index into the table of the next expected instance
    while let Some(record) = scanner.next_record().map_err(renumber)? {
        let (offset, framed) = (record.offset, record.framed_len);
        let lirs_filler = record.is_filler();
        let listed = table.is_some_and(|(_, offsets)| offsets.get(next_entry) == Some(&offset));
        let filler = if opaque { !listed } else { lirs_filler };
        if offset - last_report >= PROGRESS_EVERY {
            last_report = offset;
            progress(offset);
        }
        if filler {
            out.fillers += 1;
            out.filler_bytes += framed;
            let end = offset + framed;
            for (first, p) in misfit_fillers.iter_mut().zip(&candidates) {
                if first.is_none() && !filler_fits_page(*p, offset, end) {
                    *first = Some((offset, end));
                }
            }
            if let Some(last) = last_filler_end {
                out.filler_pairs += 1;
                for (n, p) in filler_spacing.iter_mut().zip(&candidates) {
                    *n += u64::from((end - last) % p.get() == 0);
                }
            }
            last_filler_end = Some(end);
        } else {
            let n = record.payload.len() as u64;
            out.min_payload = out.min_payload.min(n);
            out.max_payload = out.max_payload.max(n);
            out.total_payload += n;
        }
        if let Some((table_path, offsets)) = table {
            let expected = offsets.get(next_entry).copied();
            match expected {
                // Entries are visited in order, so one that is not this record's start
                // but lies before its end points into the middle of this record.
                Some(e) if e != offset && e < offset + framed => {
                    return Err(Error::table(
                        table_path,
                        Some(next_entry as u64),
                        Some(e),
                        format!(
                            "offset {e} is not a record start in {} (it lies inside the record at byte {offset}): the table does not match the data file",
                            data.display(),
                        ),
                    ));
                }
                Some(e) if e == offset => {
                    if lirs_filler {
                        return Err(Error::table(
                            table_path,
                            Some(next_entry as u64),
                            Some(e),
                            format!(
                                "offset {e} points at a filler record in {}, not an instance",
                                data.display()
                            ),
                        ));
                    }
                    next_entry += 1;
                }
                _ if !filler => {
                    let (why, remedy) = if next_entry == offsets.len() {
                        let why = format!(
                            "unindexed instance: the table {} covers {} instances but the data file goes on with more records",
                            table_path.display(),
                            offsets.len()
                        );
                        let remedy = Remedy::RebuildOrTrustTable {
                            data: data.to_path_buf(),
                            table: table_path.to_path_buf(),
                        };
                        (why, remedy)
                    } else {
                        let why = format!(
                            "instance record not in the table {} (the table's next entry is byte {})",
                            table_path.display(),
                            offsets[next_entry]
                        );
                        (why, Remedy::TrustTable)
                    };
                    return Err(Error::layout(data, None, offset, why).with_remedy(remedy));
                }
                _ if next_entry == 0 && !opaque => {
                    return Err(Error::layout(
                        data,
                        None,
                        offset,
                        "filler before the first instance: spans must tile the file from byte 0",
                    ));
                }
                _ => {}
            }
        }
        if !filler {
            close(open_instance, offset, &mut violations)?;
            open_instance = Some((out.instances, offset, framed));
            out.instances += 1;
        }
    }
    close(open_instance, file_size, &mut violations)?;
    progress(file_size);
    if let Some((table_path, offsets)) = table {
        if next_entry < offsets.len() {
            return Err(Error::table(
                table_path,
                Some(next_entry as u64),
                Some(offsets[next_entry]),
                format!(
                    "the table has {} entries but {} holds only {} instances",
                    offsets.len(),
                    data.display(),
                    next_entry
                ),
            ));
        }
    }
    if out.instances == 0 {
        out.min_payload = 0;
    }
    if out.fillers > 0 && out.instances > 0 {
        out.padded_page_sizes = clean_page_sizes(&candidates, &violations).collect();
    }
    if out.fillers > 0 {
        out.filler_page_size = clean_page_sizes(&candidates, &misfit_fillers).next_back();
    }
    out.violations = violations;
    out.misfit_fillers = misfit_fillers;
    out.filler_spacing = filler_spacing;
    Ok(out)
}
