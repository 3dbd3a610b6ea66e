//! The router's ingest hot loop in Rust (issue 20): blocks of NDJSON audit records and flows
//! decoded, checked and turned into the router's rows in one pass (`audit_rows`, `flow_rows`),
//! and audit rows encoded as a binary COPY stream (`audit_copy`).
//!
//! The Python paths stay the reference (`router/ingest/typed.py`, `router/ingest/records.py`):
//! the decoders take only blocks every line of which is the common shape, row for row what
//! those paths make of it, and answer `None` for anything else, so the Python paths accept or
//! refuse it and word the error. Property tests hold the two side by side.

mod audit_copy;
mod audit_rows;
mod calendar;
mod flow_rows;
mod json_line;
mod rfc3339;
mod rows;

use pyo3::prelude::*;

#[pymodule]
fn shardlog_native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(audit_rows::audit_rows, module)?)?;
    module.add_function(wrap_pyfunction!(flow_rows::flow_rows, module)?)?;
    module.add_function(wrap_pyfunction!(audit_copy::audit_copy, module)?)?;
    Ok(())
}
