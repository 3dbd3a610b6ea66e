//! What the row decoders share: rows allocated as the router's NamedTuples, timestamps made
//! into datetimes, and keys (owners, switches) checked once per block.

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDateTime, PyDelta, PyString, PyTuple, PyType, PyTzInfo};

use crate::rfc3339;

/// A row as an instance of `row_type` (a `typing.NamedTuple`: a tuple subclass without a
/// `__dict__`), allocated as the tuple type's own `__new__` allocates, without a Python-level
/// `__new__` call per row.
pub fn row<'py, const N: usize>(
    row_type: &Bound<'py, PyType>,
    items: [Bound<'py, PyAny>; N],
) -> PyResult<Bound<'py, PyAny>> {
    let py = row_type.py();
    unsafe {
        let object = ffi::PyType_GenericAlloc(row_type.as_type_ptr(), N as ffi::Py_ssize_t);
        if object.is_null() {
            return Err(PyErr::fetch(py));
        }
        for (index, item) in items.into_iter().enumerate() {
            ffi::PyTuple_SET_ITEM(object, index as ffi::Py_ssize_t, item.into_ptr());
        }
        Ok(Bound::from_owned_ptr(py, object))
    }
}

/// Only a tuple subclass with the tuple's own layout may be allocated by `row`.
pub fn check_row_type(row_type: &Bound<'_, PyType>) -> PyResult<()> {
    let tuple = row_type.py().get_type::<PyTuple>();
    let same_layout = unsafe {
        let (row, tuple) = (&*row_type.as_type_ptr(), &*tuple.as_type_ptr());
        row.tp_basicsize == tuple.tp_basicsize && row.tp_itemsize == tuple.tp_itemsize
    };
    if !row_type.is_subclass(&tuple)? || !same_layout {
        return Err(PyTypeError::new_err("row_type must be a NamedTuple"));
    }
    Ok(())
}

/// Timestamps of one block: `default` for records without one, nothing later than `latest`
/// (microseconds from the Unix epoch), time zones made once per offset.
pub struct Times<'py> {
    py: Python<'py>,
    default: Bound<'py, PyAny>,
    latest_micros: i64,
    zones: Vec<(i32, Bound<'py, PyTzInfo>)>,
}

impl<'py> Times<'py> {
    pub fn new(default: Bound<'py, PyDateTime>, latest_micros: i64) -> Self {
        let py = default.py();
        Times {
            py,
            default: default.into_any(),
            latest_micros,
            zones: Vec::new(),
        }
    }

    fn zone(&mut self, offset_minutes: i32) -> PyResult<Bound<'py, PyTzInfo>> {
        if let Some((_, zone)) = self
            .zones
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
        self.zones.push((offset_minutes, zone.clone()));
        Ok(zone)
    }

    /// The datetime of a record's `ts` (or the default), or `None` to hand the block back.
    pub fn get(&mut self, text: Option<&Cow<'_, str>>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(text) = text else {
            return Ok(Some(self.default.clone()));
        };
        let Some(parsed) = rfc3339::parse(text.as_bytes()) else {
            return Ok(None);
        };
        if parsed.unix_micros() > self.latest_micros {
            return Ok(None);
        }
        let zone = self.zone(parsed.offset_minutes)?;
        let ts = PyDateTime::new(
            self.py,
            parsed.year,
            parsed.month,
            parsed.day,
            parsed.hour,
            parsed.minute,
            parsed.second,
            parsed.microsecond,
            Some(&zone),
        )?;
        Ok(Some(ts.into_any()))
    }
}

/// Keys (owners, switches) met in one block, each checked once by the caller's `valid_key`
/// and made into one Python string that every row of that key shares.
pub struct Keys<'py> {
    valid_key: Bound<'py, PyAny>,
    known: Vec<(String, Bound<'py, PyString>)>,
}

impl<'py> Keys<'py> {
    pub fn new(valid_key: Bound<'py, PyAny>) -> Self {
        Keys {
            valid_key,
            known: Vec::new(),
        }
    }

    /// The key as a Python string, or `None` when it is not a valid key.
    pub fn get(&mut self, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        if let Some((_, text)) = self.known.iter().find(|(known, _)| known == key) {
            return Ok(Some(text.clone().into_any()));
        }
        let text = PyString::new(self.valid_key.py(), key);
        if !self.valid_key.call1((&text,))?.is_truthy()? {
            return Ok(None);
        }
        if self.known.len() < 64 {
            self.known.push((key.to_owned(), text.clone()));
        }
        Ok(Some(text.into_any()))
    }
}
