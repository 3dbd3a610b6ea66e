//! NDJSON flow lines into the router's `FlowRow(position, switch, ts, src_ip, dst_ip, src_port,
//! dst_port, ip_version, proto, bytes, packets, last_seen, tcp_flags, sampling_rate)`, the
//! addresses in PostgreSQL's binary inet form (router/db/inet.py).

use std::borrow::Cow;
use std::ffi::{c_char, c_int, c_void};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDateTime, PyList, PyType};

use crate::json_line::{self, Value};
use crate::rows::{check_row_type, row, Keys, Times};

const MAX_BIGINT: u64 = i64::MAX as u64;
const MAX_INTEGER: u64 = i32::MAX as u64;
const AF_INET: c_int = 2;
const AF_INET6: c_int = 10;

extern "C" {
    // The C library's parser, the one Python's socket.inet_pton calls: the same addresses.
    fn inet_pton(family: c_int, text: *const c_char, out: *mut c_void) -> c_int;
}

/// An address as binary inet (family, prefix bits, is_cidr, length, the address), as
/// `router.db.inet.encode_address` makes it; `None` for anything else (spaces, zone indexes,
/// not an address), which the Python path words.
fn address(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if bytes.is_empty()
        || bytes.len() > 63
        || !bytes
            .iter()
            .all(|byte| byte.is_ascii_hexdigit() || matches!(byte, b':' | b'.'))
    {
        return None;
    }
    let mut terminated = [0u8; 64];
    terminated[..bytes.len()].copy_from_slice(bytes);
    let (family, header): (c_int, [u8; 4]) = if bytes.contains(&b':') {
        (AF_INET6, [3, 128, 0, 16])
    } else {
        (AF_INET, [2, 32, 0, 4])
    };
    let mut out = [0u8; 16];
    let parsed = unsafe { inet_pton(family, terminated.as_ptr().cast(), out.as_mut_ptr().cast()) };
    if parsed != 1 {
        return None;
    }
    let mut encoded = header.to_vec();
    encoded.extend_from_slice(&out[..usize::from(header[3])]);
    Some(encoded)
}

#[derive(Default)]
struct FlowLine<'a> {
    switch: Option<Cow<'a, str>>,
    ts: Option<Cow<'a, str>>,
    src_ip: Option<Cow<'a, str>>,
    dst_ip: Option<Cow<'a, str>>,
    src_port: Option<u64>,
    dst_port: Option<u64>,
    octets: Option<u64>,
    ip_version: Option<u64>,
    proto: Option<u64>,
    packets: Option<u64>,
    tcp_flags: Option<u64>,
    sampling_rate: Option<u64>,
}

fn in_range(value: u64, low: u64, high: u64) -> Option<u64> {
    (low..=high).contains(&value).then_some(value)
}

fn flow_line(line: &[u8]) -> Option<FlowLine<'_>> {
    let mut found = FlowLine::default();
    let mut seen = 0u16;
    for (name, value) in json_line::members(line)? {
        let (slot, bit) = match name.as_ref() {
            "switch" => (0, 1),
            "ts" => (1, 2),
            "src_ip" => (2, 4),
            "dst_ip" => (3, 8),
            "src_port" => (4, 16),
            "dst_port" => (5, 32),
            "bytes" => (6, 64),
            "ip_version" => (7, 128),
            "proto" => (8, 256),
            "packets" => (9, 512),
            "tcp_flags" => (10, 1024),
            "sampling_rate" => (11, 2048),
            _ => return None,
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        match (slot, value) {
            (0, Value::Text(text)) => found.switch = Some(text),
            (1, Value::Text(text)) => found.ts = Some(text),
            (2, Value::Text(text)) => found.src_ip = Some(text),
            (3, Value::Text(text)) => found.dst_ip = Some(text),
            (4, Value::Natural(number)) => found.src_port = Some(in_range(number, 0, 65535)?),
            (5, Value::Natural(number)) => found.dst_port = Some(in_range(number, 0, 65535)?),
            (6, Value::Natural(number)) => found.octets = Some(in_range(number, 0, MAX_BIGINT)?),
            (7, Value::Natural(number)) => found.ip_version = Some(number),
            (8, Value::Natural(number)) => found.proto = Some(in_range(number, 0, 255)?),
            (9, Value::Natural(number)) => found.packets = Some(in_range(number, 0, MAX_BIGINT)?),
            (10, Value::Natural(number)) => found.tcp_flags = Some(in_range(number, 0, 255)?),
            (11, Value::Natural(number)) => {
                found.sampling_rate = Some(in_range(number, 1, MAX_INTEGER)?)
            }
            (1 | 7 | 8 | 10 | 11, Value::Null) => {}
            _ => return None,
        }
    }
    Some(found)
}

/// The flows of `block` as `audit_rows` takes audit records: `None` when the Python path
/// (router/ingest/typed.py, then records.flow_row) must take the block.
#[pyfunction]
pub fn flow_rows<'py>(
    py: Python<'py>,
    block: &[u8],
    first: i64,
    default_ts: Bound<'py, PyDateTime>,
    latest_micros: i64,
    row_type: Bound<'py, PyType>,
    valid_key: Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyList>>> {
    check_row_type(&row_type)?;
    let (mut switches, mut times) = (Keys::new(valid_key), Times::new(default_ts, latest_micros));
    let none = py.None().into_bound(py);
    let optional = |value: Option<u64>| -> PyResult<Bound<'py, PyAny>> {
        Ok(match value {
            Some(number) => number.into_pyobject(py)?.into_any(),
            None => none.clone(),
        })
    };
    let rows = PyList::empty(py);
    for (index, line) in block.split(|&byte| byte == b'\n').enumerate() {
        let Some(flow) = flow_line(line) else {
            return Ok(None);
        };
        let (Some(switch), Some(src_ip), Some(dst_ip)) = (&flow.switch, &flow.src_ip, &flow.dst_ip)
        else {
            return Ok(None);
        };
        let (Some(src_port), Some(dst_port), Some(octets)) =
            (flow.src_port, flow.dst_port, flow.octets)
        else {
            return Ok(None);
        };
        let (Some(src), Some(dst)) = (address(src_ip), address(dst_ip)) else {
            return Ok(None);
        };
        let version: u64 = if src[0] == 2 { 4 } else { 6 };
        if dst[0] != src[0] || flow.ip_version.is_some_and(|declared| declared != version) {
            return Ok(None);
        }
        let Some(switch) = switches.get(switch)? else {
            return Ok(None);
        };
        let Some(ts) = times.get(flow.ts.as_ref())? else {
            return Ok(None);
        };
        let items = [
            (first + index as i64).into_pyobject(py)?.into_any(),
            switch,
            ts,
            PyBytes::new(py, &src).into_any(),
            PyBytes::new(py, &dst).into_any(),
            src_port.into_pyobject(py)?.into_any(),
            dst_port.into_pyobject(py)?.into_any(),
            version.into_pyobject(py)?.into_any(),
            optional(flow.proto)?,
            octets.into_pyobject(py)?.into_any(),
            flow.packets.unwrap_or(0).into_pyobject(py)?.into_any(),
            none.clone(),
            optional(flow.tcp_flags)?,
            optional(flow.sampling_rate)?,
        ];
        rows.append(row(&row_type, items)?)?;
    }
    Ok(Some(rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_addresses_as_binary_inet() {
        assert_eq!(address("10.0.0.1").unwrap(), vec![2, 32, 0, 4, 10, 0, 0, 1]);
        let v6 = address("2001:DB8::1").unwrap();
        assert_eq!(&v6[..6], &[3, 128, 0, 16, 0x20, 0x01]);
        assert_eq!(v6.len(), 20);
        assert_eq!(address("::ffff:1.2.3.4").unwrap()[16..], [1, 2, 3, 4]);
        for text in [
            "",
            " 10.0.0.1",
            "10.0.0.256",
            "010.0.0.1",
            "fe80::1%eth0",
            "1.2.3",
            "::g",
        ] {
            assert!(address(text).is_none(), "{text}");
        }
    }
}
