//! The router's ingest hot loop in Rust (issue 20): a block of NDJSON audit lines decoded,
//! checked and turned into the router's `AuditRow`s in one pass (`audit_rows`), and audit
//! rows encoded as a binary COPY stream (`audit_copy`).
//!
//! The Python paths stay the reference (`router/ingest/typed.py`, `router/ingest/records.py`):
//! this module takes only blocks every line of which is the common shape, row for row what
//! those paths make of it, and answers `None` for anything else, so the Python paths accept
//! or refuse it and word the error. Property tests hold the two side by side.

mod audit_copy;
mod calendar;
mod json_line;
mod rfc3339;

use std::borrow::Cow;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDateTime, PyDelta, PyList, PyString, PyTuple, PyType, PyTzInfo};

use json_line::Value;

/// One record's fields as written on its line.
struct AuditLine<'a> {
    owner: Cow<'a, str>,
    ts: Option<Cow<'a, str>>,
    content: Cow<'a, str>,
}

fn audit_line(line: &[u8]) -> Option<AuditLine<'_>> {
    let (mut owner, mut ts, mut content, mut seen) = (None, None, None, [false; 4]);
    for (name, value) in json_line::members(line)? {
        let slot = match name.as_ref() {
            "owner" => 0,
            "ts" => 1,
            "content" => 2,
            "attrs" => 3,
            _ => return None,
        };
        if std::mem::replace(&mut seen[slot], true) {
            return None;
        }
        match (slot, value) {
            (0, Value::Text(text)) => owner = Some(text),
            (1, Value::Text(text)) => ts = Some(text),
            (2, Value::Text(text)) => content = Some(text),
            (1 | 3, Value::Null) => {}
            _ => return None,
        }
    }
    Some(AuditLine {
        owner: owner?,
        ts,
        content: content?,
    })
}

/// The row tuple `(position, owner, ts, content, None)` as an instance of `row_type` (a
/// `typing.NamedTuple`, so a tuple subclass without a `__dict__`): allocated as the tuple
/// type's own `__new__` allocates, without a Python-level `__new__` call per row.
fn row<'py>(
    row_type: &Bound<'py, PyType>,
    items: [Bound<'py, PyAny>; 5],
) -> PyResult<Bound<'py, PyAny>> {
    let py = row_type.py();
    let tuple = py.get_type::<PyTuple>();
    // Only a tuple subclass with the tuple's own layout may be allocated so.
    let same_layout = unsafe {
        let (row, tuple) = (&*row_type.as_type_ptr(), &*tuple.as_type_ptr());
        row.tp_basicsize == tuple.tp_basicsize && row.tp_itemsize == tuple.tp_itemsize
    };
    if !row_type.is_subclass(&tuple)? || !same_layout {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "row_type must be a NamedTuple",
        ));
    }
    unsafe {
        let object = ffi::PyType_GenericAlloc(row_type.as_type_ptr(), 5);
        if object.is_null() {
            return Err(PyErr::fetch(py));
        }
        for (index, item) in items.into_iter().enumerate() {
            ffi::PyTuple_SET_ITEM(object, index as ffi::Py_ssize_t, item.into_ptr());
        }
        Ok(Bound::from_owned_ptr(py, object))
    }
}

/// Time zones by offset in minutes, made once per block.
struct Zones<'py> {
    py: Python<'py>,
    made: Vec<(i32, Bound<'py, PyTzInfo>)>,
}

impl<'py> Zones<'py> {
    fn get(&mut self, offset_minutes: i32) -> PyResult<Bound<'py, PyTzInfo>> {
        if let Some((_, zone)) = self
            .made
            .iter()
            .find(|(offset, _)| *offset == offset_minutes)
        {
            return Ok(zone.clone());
        }
        let zone = if offset_minutes == 0 {
            PyTzInfo::utc(self.py)?.to_owned()
        } else {
            let delta = PyDelta::new(self.py, 0, offset_minutes * 60, 0, true)?;
            PyTzInfo::fixed_offset(self.py, delta)?
        };
        self.made.push((offset_minutes, zone.clone()));
        Ok(zone)
    }
}

/// Owners met in this block, each checked once by the caller's `valid_key` and made into one
/// Python string that every row of that owner shares.
struct Owners<'py> {
    valid_key: Bound<'py, PyAny>,
    known: Vec<(String, Bound<'py, PyString>)>,
}

impl<'py> Owners<'py> {
    fn get(&mut self, owner: &str) -> PyResult<Option<Bound<'py, PyString>>> {
        if let Some((_, text)) = self.known.iter().find(|(known, _)| known == owner) {
            return Ok(Some(text.clone()));
        }
        let text = PyString::new(self.valid_key.py(), owner);
        if !self.valid_key.call1((&text,))?.is_truthy()? {
            return Ok(None);
        }
        if self.known.len() < 64 {
            self.known.push((owner.to_owned(), text.clone()));
        }
        Ok(Some(text))
    }
}

/// The rows of `block` (complete NDJSON lines joined by LF, the first numbered `first`), or
/// `None` when the Python path must take the block. `default_ts` is the ts of records without
/// one; a ts later than `latest_micros` (from the Unix epoch) or content of more than
/// `max_content_bytes` UTF-8 bytes sends the block to the Python path, which words the error.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn audit_rows<'py>(
    py: Python<'py>,
    block: &[u8],
    first: i64,
    default_ts: Bound<'py, PyDateTime>,
    latest_micros: i64,
    max_content_bytes: usize,
    row_type: Bound<'py, PyType>,
    valid_key: Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let mut owners = Owners {
        valid_key,
        known: Vec::new(),
    };
    let mut zones = Zones {
        py,
        made: Vec::new(),
    };
    let none = py.None().into_bound(py);
    let rows = PyList::empty(py);
    for (index, line) in block.split(|&byte| byte == b'\n').enumerate() {
        let Some(fields) = audit_line(line) else {
            return Ok(None);
        };
        let content = fields.content.as_ref();
        if content.len() > max_content_bytes || content.contains('\0') {
            return Ok(None);
        }
        let Some(owner) = owners.get(&fields.owner)? else {
            return Ok(None);
        };
        let ts = match fields.ts {
            None => default_ts.clone().into_any(),
            Some(text) => {
                let Some(parsed) = rfc3339::parse(text.as_bytes()) else {
                    return Ok(None);
                };
                if parsed.unix_micros() > latest_micros {
                    return Ok(None);
                }
                let zone = zones.get(parsed.offset_minutes)?;
                PyDateTime::new(
                    py,
                    parsed.year,
                    parsed.month,
                    parsed.day,
                    parsed.hour,
                    parsed.minute,
                    parsed.second,
                    parsed.microsecond,
                    Some(&zone),
                )?
                .into_any()
            }
        };
        let position = (first + index as i64).into_pyobject(py)?.into_any();
        let content = PyString::new(py, content).into_any();
        rows.append(row(
            &row_type,
            [position, owner.into_any(), ts, content, none.clone()],
        )?)?;
    }
    Ok(Some(rows))
}

#[pymodule]
fn shardlog_native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(audit_rows, module)?)?;
    module.add_function(wrap_pyfunction!(audit_copy::audit_copy, module)?)?;
    Ok(())
}
