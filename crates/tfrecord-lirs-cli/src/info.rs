//! `info`: what a file holds (instances, sizes, pages, fillers, padding, its table),
//! the memory this process may use and what the default backend makes of it, as
//! text or JSON, for one file or several.

use std::path::{Path, PathBuf};

use tfrecord_lirs::local::{choose_auto_read, memory_limit, AutoInputs, AutoRead};
use tfrecord_lirs::{Error, ErrorKind, PageSize};

use crate::args::{page_size, InfoArgs};
use crate::report::{finish_files, per_file, run_files, write_stdout, Outcome};
use crate::storage::{reader_options, storage, table_for};

pub fn run(args: InfoArgs) -> Outcome {
    let InfoArgs {
        data,
        offsets,
        jobs,
        json,
        page_size: p,
        trust_table,
    } = args;
    let page = p.map(page_size).transpose()?;
    let data = crate::storage::data_files(&data)?;
    crate::storage::one_table_for_one_file(&data, offsets.is_some(), "--offsets")?;
    // The default backend judges the files read together (those named here).
    let files_bytes: u64 = data
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    let info = |file: &Path, report: &mut dyn FnMut(u64)| {
        info(
            file,
            offsets.clone(),
            page,
            trust_table,
            files_bytes,
            report,
        )
    };
    if json && data.len() > 1 {
        let mut values = Vec::new();
        let outcomes = run_files("info", &data, jobs, |file, report| {
            let table = table_for(file, offsets.clone());
            let found = info(file, report)
                .map_err(|e| tfrecord_lirs::advice::explain(&storage(), file, &table, e))?;
            Ok(found.json())
        });
        for o in &outcomes {
            if let Ok(v) = &o.result {
                values.push(v.clone());
            }
        }
        write_stdout(|out| writeln!(out, "{:#}", serde_json::Value::Array(values)))?;
        // stdout stays one JSON value: a failure is reported on stderr only.
        if outcomes.iter().any(|o| o.result.is_err()) {
            return finish_files("info", "described", &outcomes);
        }
        return Ok(());
    }
    per_file("info", "described", &data, jobs, |file, report| {
        let table = table_for(file, offsets.clone());
        let found = info(file, report)
            .map_err(|e| tfrecord_lirs::advice::explain(&storage(), file, &table, e))?;
        let text = if json {
            format!("{:#}\n", found.json())
        } else {
            found.text()
        };
        Ok((text.clone(), text))
    })
}

/// What `info` found about one file.
struct InfoFound {
    data: PathBuf,
    found: tfrecord_lirs::Inspection,
    page: u64,
    padded: Option<u64>,
    problem: Option<String>,
    table: Option<PathBuf>,
    trust_table: bool,
    /// The default backend's choice for this file as a local file, and why.
    auto: (AutoRead, String),
}

fn info(
    data: &Path,
    offsets: Option<PathBuf>,
    page: Option<PageSize>,
    trust_table: bool,
    files_bytes: u64,
    report: &mut dyn FnMut(u64),
) -> Result<InfoFound, Error> {
    // A trusted table is needed to tell instances from padding.
    let required = offsets.is_some() || trust_table;
    let table_path = table_for(data, offsets);
    let table = match tfrecord_lirs::read_table_for_in(&storage(), data, &table_path) {
        Ok(t) => Some(t),
        // No table where the default one would be: described without one.
        Err(e) if !required && e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let found = tfrecord_lirs::inspect_in(
        &storage(),
        data,
        table.as_deref().map(|t| (table_path.as_path(), t)),
        None,
        reader_options(trust_table, false).padding(),
        report,
    )?;
    // Padded for the page size given, or (as `verify` judges it) for the one the
    // fillers end on; a broken layout is reported, not an error.
    let (padded, problem) = match page {
        Some(p) => {
            let yes = found.fillers > 0 && found.padded_page_sizes.contains(&p.get());
            (yes.then_some(p.get()), None)
        }
        None => match found.check_padded(data) {
            Ok(p) => (p, None),
            Err(e) => (None, Some(crate::remedy::say(&e))),
        },
    };
    let page = page
        .map(PageSize::get)
        .or(padded)
        .or(found.filler_page_size)
        .unwrap_or(tfrecord_lirs::format::DEFAULT_PAGE_SIZE);
    let auto = choose_auto_read(AutoInputs {
        file_bytes: found.file_size,
        records: found.instances,
        files_bytes: files_bytes.max(found.file_size),
        memory: memory_limit().bytes(),
        // `info` knows no order: it judges the default one (not page-aware), and its
        // reason says so.
        page_aware: tfrecord_lirs::options::defaults::PAGE_AWARE,
    });
    Ok(InfoFound {
        data: data.to_path_buf(),
        found,
        page,
        padded,
        problem,
        table: table.map(|_| table_path),
        trust_table,
        auto,
    })
}

impl InfoFound {
    fn json(&self) -> serde_json::Value {
        let found = &self.found;
        serde_json::json!({
            "file": self.data.display().to_string(),
            "file_size": found.file_size,
            "instances": found.instances,
            "fillers": found.fillers,
            "filler_bytes": found.filler_bytes,
            "payload_min": found.min_payload,
            "payload_mean": found.mean_payload(),
            "payload_max": found.max_payload,
            "page_size": self.page,
            "pages": found.file_size.div_ceil(self.page),
            "padded": self.padded.is_some(),
            "padded_page_size": self.padded,
            "padded_problem": self.problem,
            "table": self.table.as_ref().map(|t| t.display().to_string()),
            "table_trusted": self.trust_table,
            "memory": memory_json(),
            "auto_backend": {"read": self.auto.0.name(), "why": self.auto.1},
        })
    }

    fn text(&self) -> String {
        let found = &self.found;
        let mut out = String::new();
        out.push_str(&format!("file: {}\n", self.data.display()));
        out.push_str(&format!("file size: {} bytes\n", found.file_size));
        out.push_str(&format!("instances: {}\n", found.instances));
        out.push_str(&format!(
            "payload bytes: min {} / mean {:.1} / max {}\n",
            found.min_payload,
            found.mean_payload(),
            found.max_payload
        ));
        out.push_str(&format!(
            "pages: {} of {} bytes\n",
            found.file_size.div_ceil(self.page),
            self.page
        ));
        out.push_str(&format!(
            "{}: {} ({} bytes)\n",
            if self.trust_table {
                "padding records"
            } else {
                "fillers"
            },
            found.fillers,
            found.filler_bytes
        ));
        match (self.padded, &self.problem) {
            (Some(p), _) => out.push_str(&format!("padded: yes, for page size {p}\n")),
            (None, Some(why)) => {
                out.push_str(&format!("padded: no ({})\n", why.replace('\n', " ")))
            }
            (None, None) => out.push_str("padded: no\n"),
        }
        match &self.table {
            Some(t) if self.trust_table => out.push_str(&format!(
                "table: {} (trusted: records between its entries are padding)\n",
                t.display()
            )),
            Some(t) => out.push_str(&format!("table: {} (matches)\n", t.display())),
            None => out.push_str("table: none\n"),
        }
        out.push_str(&format!("memory: {}\n", memory_limit().describe()));
        out.push_str(&format!(
            "backend auto (local file): {}: {}\n",
            self.auto.0.name(),
            self.auto.1
        ));
        out
    }
}

/// The memory this process may use, as JSON.
fn memory_json() -> serde_json::Value {
    let limit = memory_limit();
    serde_json::json!({
        "bytes": limit.bytes(),
        "machine": limit.machine,
        "cgroup_limit": limit.cgroup.as_ref().map(|c| c.bytes),
        "cgroup_file": limit.cgroup.as_ref().map(|c| c.file.display().to_string()),
    })
}
