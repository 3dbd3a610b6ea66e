//! NDJSON audit lines into the router's `AuditRow(position, owner, ts, content, attrs)`.

use std::borrow::Cow;

use pyo3::prelude::*;
use pyo3::types::{PyDateTime, PyList, PyString, PyType};

use crate::json_line::{self, Value};
use crate::rows::{check_row_type, row, Keys, Times};

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

/// The rows of `block` (complete NDJSON lines joined by LF, the first numbered `first`), or
/// `None` when the Python path must take the block. `default_ts` is the ts of records without
/// one; a ts later than `latest_micros` (from the Unix epoch) or content of more than
/// `max_content_bytes` UTF-8 bytes sends the block to the Python path, which words the error.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn audit_rows<'py>(
    py: Python<'py>,
    block: &[u8],
    first: i64,
    default_ts: Bound<'py, PyDateTime>,
    latest_micros: i64,
    max_content_bytes: usize,
    row_type: Bound<'py, PyType>,
    valid_key: Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    check_row_type(&row_type)?;
    let (mut owners, mut times) = (Keys::new(valid_key), Times::new(default_ts, latest_micros));
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
        let Some(ts) = times.get(fields.ts.as_ref())? else {
            return Ok(None);
        };
        let position = (first + index as i64).into_pyobject(py)?.into_any();
        let content = PyString::new(py, content).into_any();
        rows.append(row(
            &row_type,
            [position, owner, ts, content, none.clone()],
        )?)?;
    }
    Ok(Some(rows))
}
