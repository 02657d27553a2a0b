//! Encoders: primitive writers that pick the smallest encoding, the generic
//! [`Value`] encoder, and [`CompositeWriter`], which writes a described list
//! field by field straight into the output buffer and trims trailing
//! null/default fields.
//!
//! Lists, maps and arrays are written with a one-byte size placeholder that
//! is patched once the body is written; only a body that turns out larger
//! than 255 bytes is moved to make room for the four-byte form. So encoding
//! needs no intermediate buffers and no size pre-computation.

mod composite;
mod small;

pub(crate) use composite::CompositeWriter;
pub(crate) use small::{SmallFrame, SMALL_BINARY_MAX};

use bytes::{BufMut, BytesMut};

use super::codes::fc;
use super::value::{Array, Descriptor, Fields, Symbol, Value};

pub(crate) fn put_null(out: &mut BytesMut) {
    out.put_u8(fc::NULL);
}

pub(crate) fn put_bool(out: &mut BytesMut, v: bool) {
    out.put_u8(if v { fc::TRUE } else { fc::FALSE });
}

pub(crate) fn put_ubyte(out: &mut BytesMut, v: u8) {
    out.put_slice(&[fc::UBYTE, v]);
}

pub(crate) fn put_ushort(out: &mut BytesMut, v: u16) {
    out.put_u8(fc::USHORT);
    out.put_u16(v);
}

pub(crate) fn put_uint(out: &mut BytesMut, v: u32) {
    match v {
        0 => out.put_u8(fc::UINT0),
        1..=255 => out.put_slice(&[fc::SMALLUINT, v as u8]),
        _ => {
            out.put_u8(fc::UINT);
            out.put_u32(v);
        }
    }
}

pub(crate) fn put_ulong(out: &mut BytesMut, v: u64) {
    match v {
        0 => out.put_u8(fc::ULONG0),
        1..=255 => out.put_slice(&[fc::SMALLULONG, v as u8]),
        _ => {
            out.put_u8(fc::ULONG);
            out.put_u64(v);
        }
    }
}

/// A binary, string or symbol: the 8-bit form (`code8`) when it fits.
fn put_variable(out: &mut BytesMut, code8: u8, bytes: &[u8]) {
    if let Ok(len) = u8::try_from(bytes.len()) {
        out.put_slice(&[code8, len]);
    } else {
        out.put_u8(code8 + 0x10);
        out.put_u32(bytes.len() as u32);
    }
    out.put_slice(bytes);
}

pub(crate) fn put_binary(out: &mut BytesMut, v: &[u8]) {
    put_variable(out, fc::VBIN8, v);
}

pub(crate) fn put_string(out: &mut BytesMut, v: &str) {
    put_variable(out, fc::STR8, v.as_bytes());
}

pub(crate) fn put_symbol(out: &mut BytesMut, v: &str) {
    put_variable(out, fc::SYM8, v.as_bytes());
}

/// Start a list, map or array (`code8` is its 8-bit form): writes the
/// constructor and placeholders for size and count. Returns its position.
fn begin_compound(out: &mut BytesMut, code8: u8) -> usize {
    let start = out.len();
    out.put_slice(&[code8, 0, 0]);
    start
}

/// Patch the size and count of a compound begun at `start`, widening it to
/// the 32-bit form (moving the body by 6 bytes) if it does not fit in 8.
fn finish_compound(out: &mut BytesMut, start: usize, count: usize) {
    let body_start = start + 3;
    let body_len = out.len() - body_start;
    if body_len < 255 && count <= 255 {
        out[start + 1] = (body_len + 1) as u8;
        out[start + 2] = count as u8;
        return;
    }
    debug_assert!(body_len + 4 <= u32::MAX as usize, "compound too large");
    out.put_bytes(0, 6);
    out.copy_within(body_start..body_start + body_len, body_start + 6);
    out[start] += 0x10;
    out[start + 1..start + 5].copy_from_slice(&((body_len + 4) as u32).to_be_bytes());
    out[start + 5..start + 9].copy_from_slice(&(count as u32).to_be_bytes());
}

pub(crate) fn put_descriptor(out: &mut BytesMut, descriptor: &Descriptor) {
    out.put_u8(fc::DESCRIBED);
    match descriptor {
        Descriptor::Code(code) => put_ulong(out, *code),
        Descriptor::Symbol(name) => put_symbol(out, name.as_str()),
    }
}

/// A `fields` map: symbol keys.
pub(crate) fn put_fields(out: &mut BytesMut, fields: &Fields) {
    let start = begin_compound(out, fc::MAP8);
    for (key, value) in fields {
        put_symbol(out, key.as_str());
        put_value(out, value);
    }
    finish_compound(out, start, fields.len() * 2);
}

pub(crate) fn put_map(out: &mut BytesMut, pairs: &[(Value, Value)]) {
    let start = begin_compound(out, fc::MAP8);
    for (key, value) in pairs {
        put_value(out, key);
        put_value(out, value);
    }
    finish_compound(out, start, pairs.len() * 2);
}

/// A `multiple="true"` symbol field, always as an array (the form every
/// peer accepts); the caller writes null for an empty list when the field
/// is optional.
pub(crate) fn put_symbol_array(out: &mut BytesMut, symbols: &[Symbol]) {
    let start = begin_compound(out, fc::ARRAY8);
    if symbols.iter().all(|s| s.0.len() <= 255) {
        out.put_u8(fc::SYM8);
        for s in symbols {
            out.put_u8(s.0.len() as u8);
            out.put_slice(s.0.as_bytes());
        }
    } else {
        out.put_u8(fc::SYM32);
        for s in symbols {
            out.put_u32(s.0.len() as u32);
            out.put_slice(s.0.as_bytes());
        }
    }
    finish_compound(out, start, symbols.len());
}

/// Append the smallest encoding of `value`.
pub(crate) fn put_value(out: &mut BytesMut, value: &Value) {
    match value {
        Value::Null => put_null(out),
        Value::Bool(v) => put_bool(out, *v),
        Value::Ubyte(v) => put_ubyte(out, *v),
        Value::Ushort(v) => put_ushort(out, *v),
        Value::Uint(v) => put_uint(out, *v),
        Value::Ulong(v) => put_ulong(out, *v),
        Value::Byte(v) => out.put_slice(&[fc::BYTE, *v as u8]),
        Value::Short(v) => {
            out.put_u8(fc::SHORT);
            out.put_i16(*v);
        }
        Value::Int(v) => match i8::try_from(*v) {
            Ok(small) => out.put_slice(&[fc::SMALLINT, small as u8]),
            Err(_) => {
                out.put_u8(fc::INT);
                out.put_i32(*v);
            }
        },
        Value::Long(v) => match i8::try_from(*v) {
            Ok(small) => out.put_slice(&[fc::SMALLLONG, small as u8]),
            Err(_) => {
                out.put_u8(fc::LONG);
                out.put_i64(*v);
            }
        },
        Value::Float(v) => {
            out.put_u8(fc::FLOAT);
            out.put_u32(v.to_bits());
        }
        Value::Double(v) => {
            out.put_u8(fc::DOUBLE);
            out.put_u64(v.to_bits());
        }
        Value::Decimal32(v) => {
            out.put_u8(fc::DECIMAL32);
            out.put_slice(v);
        }
        Value::Decimal64(v) => {
            out.put_u8(fc::DECIMAL64);
            out.put_slice(v);
        }
        Value::Decimal128(v) => {
            out.put_u8(fc::DECIMAL128);
            out.put_slice(v);
        }
        Value::Char(v) => {
            out.put_u8(fc::CHAR);
            out.put_u32(u32::from(*v));
        }
        Value::Timestamp(v) => {
            out.put_u8(fc::TIMESTAMP);
            out.put_i64(*v);
        }
        Value::Uuid(v) => {
            out.put_u8(fc::UUID);
            out.put_slice(v);
        }
        Value::Binary(v) => put_binary(out, v),
        Value::String(v) => put_string(out, v),
        Value::Symbol(v) => put_symbol(out, v.as_str()),
        Value::List(items) if items.is_empty() => out.put_u8(fc::LIST0),
        Value::List(items) => {
            let start = begin_compound(out, fc::LIST8);
            for item in items {
                put_value(out, item);
            }
            finish_compound(out, start, items.len());
        }
        Value::Map(pairs) => put_map(out, pairs),
        Value::Array(array) => put_array(out, array),
        Value::Described(described) => {
            put_descriptor(out, &described.0);
            put_value(out, &described.1);
        }
    }
}

/// The element constructor an array is encoded with: the smallest single
/// encoding of `array.format_code`'s type that fits every element. (Compact
/// zero-width forms such as uint0 are not used: they fit only all-zero
/// arrays and some peers do not expect them.)
pub(crate) fn array_element_code(array: &Array) -> u8 {
    let items = &array.items;
    let all = |f: &dyn Fn(&Value) -> bool| items.iter().all(f);
    let fits_u8 = |v: &Value| match v {
        Value::Uint(n) => *n <= 255,
        Value::Ulong(n) => *n <= 255,
        Value::Int(n) => i8::try_from(*n).is_ok(),
        Value::Long(n) => i8::try_from(*n).is_ok(),
        _ => true,
    };
    let short = |v: &Value| match v {
        Value::Binary(b) => b.len() <= 255,
        Value::String(s) => s.len() <= 255,
        Value::Symbol(s) => s.0.len() <= 255,
        _ => true,
    };
    let pick = |small: u8, wide: u8, fits: &dyn Fn(&Value) -> bool| {
        if all(fits) {
            small
        } else {
            wide
        }
    };
    match array.format_code {
        fc::TRUE | fc::FALSE | fc::BOOLEAN => fc::BOOLEAN,
        fc::UINT | fc::SMALLUINT | fc::UINT0 => pick(fc::SMALLUINT, fc::UINT, &fits_u8),
        fc::ULONG | fc::SMALLULONG | fc::ULONG0 => pick(fc::SMALLULONG, fc::ULONG, &fits_u8),
        fc::INT | fc::SMALLINT => pick(fc::SMALLINT, fc::INT, &fits_u8),
        fc::LONG | fc::SMALLLONG => pick(fc::SMALLLONG, fc::LONG, &fits_u8),
        fc::VBIN8 | fc::VBIN32 => pick(fc::VBIN8, fc::VBIN32, &short),
        fc::STR8 | fc::STR32 => pick(fc::STR8, fc::STR32, &short),
        fc::SYM8 | fc::SYM32 => pick(fc::SYM8, fc::SYM32, &short),
        fc::LIST0 | fc::LIST8 | fc::LIST32 => fc::LIST32,
        fc::MAP8 | fc::MAP32 => fc::MAP32,
        fc::ARRAY8 | fc::ARRAY32 => fc::ARRAY32,
        code if super::decode::fixed_width(code).is_some() => code,
        _ => fc::NULL,
    }
}

fn put_array(out: &mut BytesMut, array: &Array) {
    let start = begin_compound(out, fc::ARRAY8);
    if let Some(descriptor) = &array.descriptor {
        put_descriptor(out, descriptor);
    }
    let code = array_element_code(array);
    out.put_u8(code);
    for item in &array.items {
        put_element(out, code, item);
    }
    finish_compound(out, start, array.items.len());
}

/// One array element: its body without a constructor. An element whose
/// type does not match the array's is a caller bug; it is written as the
/// zero value of the array's type so the framing stays consistent.
fn put_element(out: &mut BytesMut, code: u8, item: &Value) {
    let matched = match (code, item) {
        (fc::NULL, Value::Null) => true,
        (fc::BOOLEAN, Value::Bool(v)) => {
            out.put_u8(u8::from(*v));
            true
        }
        (fc::UBYTE, Value::Ubyte(v)) => {
            out.put_u8(*v);
            true
        }
        (fc::USHORT, Value::Ushort(v)) => {
            out.put_u16(*v);
            true
        }
        (fc::SMALLUINT, Value::Uint(v)) => {
            out.put_u8(*v as u8);
            true
        }
        (fc::UINT, Value::Uint(v)) => {
            out.put_u32(*v);
            true
        }
        (fc::SMALLULONG, Value::Ulong(v)) => {
            out.put_u8(*v as u8);
            true
        }
        (fc::ULONG, Value::Ulong(v)) => {
            out.put_u64(*v);
            true
        }
        (fc::BYTE, Value::Byte(v)) => {
            out.put_i8(*v);
            true
        }
        (fc::SHORT, Value::Short(v)) => {
            out.put_i16(*v);
            true
        }
        (fc::SMALLINT, Value::Int(v)) => {
            out.put_i8(*v as i8);
            true
        }
        (fc::INT, Value::Int(v)) => {
            out.put_i32(*v);
            true
        }
        (fc::SMALLLONG, Value::Long(v)) => {
            out.put_i8(*v as i8);
            true
        }
        (fc::LONG, Value::Long(v)) => {
            out.put_i64(*v);
            true
        }
        (fc::FLOAT, Value::Float(v)) => {
            out.put_u32(v.to_bits());
            true
        }
        (fc::DOUBLE, Value::Double(v)) => {
            out.put_u64(v.to_bits());
            true
        }
        (fc::DECIMAL32, Value::Decimal32(v)) => {
            out.put_slice(v);
            true
        }
        (fc::DECIMAL64, Value::Decimal64(v)) => {
            out.put_slice(v);
            true
        }
        (fc::DECIMAL128, Value::Decimal128(v)) => {
            out.put_slice(v);
            true
        }
        (fc::CHAR, Value::Char(v)) => {
            out.put_u32(u32::from(*v));
            true
        }
        (fc::TIMESTAMP, Value::Timestamp(v)) => {
            out.put_i64(*v);
            true
        }
        (fc::UUID, Value::Uuid(v)) => {
            out.put_slice(v);
            true
        }
        (fc::VBIN8 | fc::STR8 | fc::SYM8 | fc::VBIN32 | fc::STR32 | fc::SYM32, _) => {
            match variable_bytes(item) {
                Some(bytes) => {
                    put_sized(out, code, bytes.len());
                    out.put_slice(bytes);
                    true
                }
                None => false,
            }
        }
        (fc::LIST32, Value::List(items)) => {
            let start = out.len();
            out.put_bytes(0, 8);
            for item in items {
                put_value(out, item);
            }
            patch_compound32(out, start, items.len());
            true
        }
        (fc::MAP32, Value::Map(pairs)) => {
            let start = out.len();
            out.put_bytes(0, 8);
            for (key, value) in pairs {
                put_value(out, key);
                put_value(out, value);
            }
            patch_compound32(out, start, pairs.len() * 2);
            true
        }
        (fc::ARRAY32, Value::Array(inner)) => {
            let start = out.len();
            out.put_bytes(0, 8);
            if let Some(descriptor) = &inner.descriptor {
                put_descriptor(out, descriptor);
            }
            let inner_code = array_element_code(inner);
            out.put_u8(inner_code);
            for item in &inner.items {
                put_element(out, inner_code, item);
            }
            patch_compound32(out, start, inner.items.len());
            true
        }
        _ => false,
    };
    if !matched {
        debug_assert!(
            false,
            "array element {item:?} does not match code 0x{code:02x}"
        );
        put_zero_element(out, code);
    }
}

fn variable_bytes(item: &Value) -> Option<&[u8]> {
    match item {
        Value::Binary(b) => Some(b),
        Value::String(s) => Some(s.as_bytes()),
        Value::Symbol(s) => Some(s.0.as_bytes()),
        _ => None,
    }
}

/// The size prefix of a binary/string/symbol body (8- or 32-bit by `code`).
fn put_sized(out: &mut BytesMut, code: u8, len: usize) {
    if code & 0xf0 == 0xa0 {
        out.put_u8(len as u8);
    } else {
        out.put_u32(len as u32);
    }
}

fn patch_compound32(out: &mut BytesMut, start: usize, count: usize) {
    let size = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&(count as u32).to_be_bytes());
}

fn put_zero_element(out: &mut BytesMut, code: u8) {
    match code {
        fc::LIST32 | fc::MAP32 => out.put_slice(&[0, 0, 0, 4, 0, 0, 0, 0]),
        fc::ARRAY32 => out.put_slice(&[0, 0, 0, 5, 0, 0, 0, 0, fc::NULL]),
        fc::VBIN8 | fc::STR8 | fc::SYM8 => out.put_u8(0),
        fc::VBIN32 | fc::STR32 | fc::SYM32 => out.put_u32(0),
        other => out.put_bytes(0, super::decode::fixed_width(other).unwrap_or(0)),
    }
}
