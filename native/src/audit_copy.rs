//! The binary COPY stream of audit rows `(ts, content, attrs)` for the columns
//! `(ts timestamptz, content text, attrs jsonb)`: what asyncpg's `copy_records_to_table`
//! sends for the same rows, built without a Python call per value.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDateAccess;
use pyo3::types::{
    PyBytes, PyDateTime, PyDelta, PyDeltaAccess, PyList, PyString, PyTimeAccess, PyTuple, PyTzInfo,
    PyTzInfoAccess,
};

use crate::calendar;

const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
const TRAILER: &[u8] = &(-1i16).to_be_bytes();
/// PostgreSQL counts time from 2000-01-01 UTC.
const POSTGRES_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;
/// jsonb's binary form: a version byte, then the JSON text.
const JSONB_VERSION: u8 = 1;

fn timestamptz(ts: &Bound<'_, PyAny>) -> PyResult<i64> {
    let ts = ts
        .cast::<PyDateTime>()
        .map_err(|_| PyTypeError::new_err("ts must be a datetime"))?;
    let Some(zone) = ts.get_tzinfo() else {
        return Err(PyValueError::new_err("ts must be timezone-aware"));
    };
    let offset_micros = if zone.is(PyTzInfo::utc(ts.py())?) {
        0
    } else {
        let offset = ts.call_method0("utcoffset")?;
        let offset = offset.cast::<PyDelta>()?;
        (i64::from(offset.get_days()) * 86_400 + i64::from(offset.get_seconds())) * 1_000_000
            + i64::from(offset.get_microseconds())
    };
    let micros = calendar::unix_micros(
        ts.get_year(),
        ts.get_month(),
        ts.get_day(),
        [ts.get_hour(), ts.get_minute(), ts.get_second()],
        ts.get_microsecond(),
        offset_micros,
    );
    Ok(micros - POSTGRES_EPOCH_UNIX_MICROS)
}

fn text<'a>(value: &'a Bound<'_, PyAny>, name: &str) -> PyResult<&'a str> {
    value
        .cast::<PyString>()
        .map_err(|_| PyTypeError::new_err(format!("{name} must be a str")))?
        .to_str()
}

fn length(bytes: usize) -> PyResult<[u8; 4]> {
    i32::try_from(bytes)
        .map(i32::to_be_bytes)
        .map_err(|_| PyValueError::new_err("a value is longer than PostgreSQL takes"))
}

fn row(out: &mut Vec<u8>, row: &Bound<'_, PyAny>) -> PyResult<()> {
    let row = row
        .cast::<PyTuple>()
        .map_err(|_| PyTypeError::new_err("a row must be a tuple"))?;
    if row.len() != 3 {
        return Err(PyValueError::new_err("a row must be (ts, content, attrs)"));
    }
    let ts = timestamptz(&row.get_item(0)?)?;
    let content_item = row.get_item(1)?;
    let content = text(&content_item, "content")?;
    let attrs_item = row.get_item(2)?;
    out.extend_from_slice(&3i16.to_be_bytes());
    out.extend_from_slice(&8i32.to_be_bytes());
    out.extend_from_slice(&ts.to_be_bytes());
    out.extend_from_slice(&length(content.len())?);
    out.extend_from_slice(content.as_bytes());
    if attrs_item.is_none() {
        out.extend_from_slice(&(-1i32).to_be_bytes());
    } else {
        let attrs = text(&attrs_item, "attrs")?;
        out.extend_from_slice(&length(attrs.len() + 1)?);
        out.push(JSONB_VERSION);
        out.extend_from_slice(attrs.as_bytes());
    }
    Ok(())
}

/// The whole stream (header, rows, trailer) for `rows`, a list of `(ts, content, attrs)`.
#[pyfunction]
pub fn audit_copy<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::with_capacity(HEADER.len() + TRAILER.len() + rows.len() * 64);
    out.extend_from_slice(HEADER);
    for item in rows.iter() {
        row(&mut out, &item)?;
    }
    out.extend_from_slice(TRAILER);
    Ok(PyBytes::new(py, &out))
}
