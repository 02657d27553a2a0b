//! The decoding cursor: reads primitives, generic values, typed composite
//! fields and list headers from the front of a `Bytes`, advancing it.
//!
//! Everything here reads untrusted network bytes, so every read is checked
//! against the bytes present, every size or count is checked before it is
//! trusted, nesting is bounded by [`NESTING_DEPTH_MAX`], and no `Vec` is
//! pre-sized by more than the bytes that could fill it. Binary values are
//! zero-copy slices of the input.

use bytes::{Buf, Bytes};

use super::codes::fc;
use super::error::CodecError;
use super::value::{Array, Descriptor, Symbol, Value, NESTING_DEPTH_MAX};

pub(crate) mod fast;
mod fields;

pub(crate) use fields::ListFields;

type Result<T> = std::result::Result<T, CodecError>;

/// Upper bound on the elements a `Vec` is pre-sized for: beyond it the
/// vector grows as elements are actually decoded, so a lying count cannot
/// reserve memory that the bytes do not back (and nested lists cannot
/// multiply such reservations).
const PREALLOC_ELEMENTS_MAX: usize = 256;

/// Array elements of a zero-width encoding (null, true, uint0, list0, ...)
/// that one decode call accepts beyond one per input byte. Without this
/// slack a short encoding of many nulls would be refused although a longer
/// encoding of the same value (e.g. with wide descriptors) is accepted.
const ZERO_WIDTH_ELEMENTS_FREE: usize = 4096;

/// A cursor over the bytes of one decode call.
pub(crate) struct Decoder<'a> {
    buf: &'a mut Bytes,
    depth: usize,
    /// Array elements of a zero-width encoding (null, true, uint0, list0, ...)
    /// occupy no bytes, so their count is charged here instead: at most one
    /// such element per input byte plus [`ZERO_WIDTH_ELEMENTS_FREE`], which
    /// bounds the memory a tiny input can make the decoder allocate.
    zero_width_budget: usize,
}

/// An unexpected-type error for a field of type `expected`.
pub(crate) fn unexpected(expected: &'static str, found: u8) -> CodecError {
    CodecError::UnexpectedType { expected, found }
}

/// Width in bytes of a fixed-width encoding, `None` for variable-width,
/// compound and array encodings (and for codes AMQP does not define).
pub(crate) fn fixed_width(code: u8) -> Option<usize> {
    match code {
        fc::NULL | fc::TRUE | fc::FALSE | fc::UINT0 | fc::ULONG0 | fc::LIST0 => Some(0),
        fc::BOOLEAN
        | fc::UBYTE
        | fc::BYTE
        | fc::SMALLUINT
        | fc::SMALLULONG
        | fc::SMALLINT
        | fc::SMALLLONG => Some(1),
        fc::USHORT | fc::SHORT => Some(2),
        fc::UINT | fc::INT | fc::FLOAT | fc::DECIMAL32 | fc::CHAR => Some(4),
        fc::ULONG | fc::LONG | fc::DOUBLE | fc::DECIMAL64 | fc::TIMESTAMP => Some(8),
        fc::DECIMAL128 | fc::UUID => Some(16),
        _ => None,
    }
}

/// Whether `code` is a variable-width, compound or array encoding, and if
/// so, whether its size prefix is 4 bytes wide (else 1).
fn sized_width(code: u8) -> Option<usize> {
    match code {
        fc::VBIN8 | fc::STR8 | fc::SYM8 | fc::LIST8 | fc::MAP8 | fc::ARRAY8 => Some(1),
        fc::VBIN32 | fc::STR32 | fc::SYM32 | fc::LIST32 | fc::MAP32 | fc::ARRAY32 => Some(4),
        _ => None,
    }
}

impl<'a> Decoder<'a> {
    /// A decoder reading from the front of `buf`.
    pub(crate) fn new(buf: &'a mut Bytes) -> Self {
        let zero_width_budget = buf.len().saturating_add(ZERO_WIDTH_ELEMENTS_FREE);
        Decoder {
            buf,
            depth: 0,
            zero_width_budget,
        }
    }

    /// Bytes not yet consumed.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Enter one level of nesting (a described value, list, map or array).
    pub(crate) fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > NESTING_DEPTH_MAX {
            return Err(CodecError::TooDeep);
        }
        Ok(())
    }

    /// Leave a level entered with [`Decoder::enter`].
    pub(crate) fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Fail unless exactly the bytes a size prefix announced were consumed.
    fn expect_end(&self, end: usize, what: &'static str) -> Result<()> {
        if self.remaining() == end {
            Ok(())
        } else {
            Err(CodecError::InvalidSize(what))
        }
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        if self.buf.is_empty() {
            return Err(CodecError::Truncated);
        }
        Ok(self.buf.get_u8())
    }

    /// The next byte, without consuming it.
    pub(crate) fn peek_u8(&self) -> Result<u8> {
        self.buf.first().copied().ok_or(CodecError::Truncated)
    }

    fn array_of<const N: usize>(&mut self) -> Result<[u8; N]> {
        if self.buf.len() < N {
            return Err(CodecError::Truncated);
        }
        let mut bytes = [0u8; N];
        self.buf.copy_to_slice(&mut bytes);
        Ok(bytes)
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.array_of()?))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.array_of()?))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.array_of()?))
    }

    /// The next `n` bytes as they are (a slice, no copy).
    pub(crate) fn raw(&mut self, n: usize) -> Result<Bytes> {
        if self.buf.len() < n {
            return Err(CodecError::Truncated);
        }
        Ok(self.buf.split_to(n))
    }

    fn advance(&mut self, n: usize) -> Result<()> {
        if self.buf.len() < n {
            return Err(CodecError::Truncated);
        }
        self.buf.advance(n);
        Ok(())
    }

    /// Read the 1- or 4-byte size prefix of a sized encoding and check that
    /// that many bytes follow.
    fn size_prefix(&mut self, width: usize) -> Result<usize> {
        let size = if width == 1 {
            usize::from(self.u8()?)
        } else {
            self.u32()? as usize
        };
        if size > self.remaining() {
            return Err(CodecError::Truncated);
        }
        Ok(size)
    }

    /// The bytes of a binary, string or symbol whose constructor was `code`.
    pub(crate) fn variable(&mut self, code: u8) -> Result<Bytes> {
        let width = if code & 0xf0 == 0xa0 { 1 } else { 4 };
        let len = self.size_prefix(width)?;
        Ok(self.buf.split_to(len))
    }

    fn string_body(&mut self, code: u8) -> Result<String> {
        let width = if code == fc::STR8 { 1 } else { 4 };
        let len = self.size_prefix(width)?;
        let text = std::str::from_utf8(&self.buf[..len])
            .map_err(|_| CodecError::InvalidText)?
            .to_owned();
        self.buf.advance(len);
        Ok(text)
    }

    fn symbol_body(&mut self, code: u8) -> Result<Symbol> {
        let width = if code == fc::SYM8 { 1 } else { 4 };
        let len = self.size_prefix(width)?;
        let bytes = &self.buf[..len];
        if !bytes.is_ascii() {
            return Err(CodecError::InvalidText);
        }
        // ASCII is valid UTF-8, so this conversion cannot fail.
        let text = String::from_utf8_lossy(bytes).into_owned();
        self.buf.advance(len);
        Ok(Symbol(text))
    }

    /// Read the size and count of a list, map or array body whose constructor
    /// has been read. Returns the count and the bytes after the count field.
    fn compound_header(&mut self, width: usize) -> Result<(u32, usize)> {
        let size = self.size_prefix(width)?;
        if size < width {
            return Err(CodecError::InvalidSize(
                "compound size smaller than its count",
            ));
        }
        let count = if width == 1 {
            u32::from(self.u8()?)
        } else {
            self.u32()?
        };
        Ok((count, size - width))
    }

    fn prealloc(&self, count: u32) -> usize {
        (count as usize)
            .min(self.remaining())
            .min(PREALLOC_ELEMENTS_MAX)
    }

    // ----- generic values -------------------------------------------------

    /// Decode any value.
    pub(crate) fn value(&mut self) -> Result<Value> {
        let code = self.u8()?;
        self.value_with(code)
    }

    /// Decode any value whose constructor byte `code` was already read.
    pub(crate) fn value_with(&mut self, code: u8) -> Result<Value> {
        if code == fc::DESCRIBED {
            self.enter()?;
            let descriptor = self.descriptor()?;
            let value = self.value()?;
            self.leave();
            return Ok(Value::Described(Box::new((descriptor, value))));
        }
        self.value_body(code)
    }

    /// Decode the body of a (non-described) value with constructor `code`;
    /// also used for array elements, which share one constructor.
    fn value_body(&mut self, code: u8) -> Result<Value> {
        Ok(match code {
            fc::NULL => Value::Null,
            fc::BOOLEAN => Value::Bool(self.bool_byte()?),
            fc::TRUE => Value::Bool(true),
            fc::FALSE => Value::Bool(false),
            fc::UBYTE => Value::Ubyte(self.u8()?),
            fc::USHORT => Value::Ushort(self.u16()?),
            fc::UINT => Value::Uint(self.u32()?),
            fc::SMALLUINT => Value::Uint(u32::from(self.u8()?)),
            fc::UINT0 => Value::Uint(0),
            fc::ULONG => Value::Ulong(self.u64()?),
            fc::SMALLULONG => Value::Ulong(u64::from(self.u8()?)),
            fc::ULONG0 => Value::Ulong(0),
            fc::BYTE => Value::Byte(self.u8()? as i8),
            fc::SHORT => Value::Short(self.u16()? as i16),
            fc::INT => Value::Int(self.u32()? as i32),
            fc::SMALLINT => Value::Int(i32::from(self.u8()? as i8)),
            fc::LONG => Value::Long(self.u64()? as i64),
            fc::SMALLLONG => Value::Long(i64::from(self.u8()? as i8)),
            fc::FLOAT => Value::Float(f32::from_bits(self.u32()?)),
            fc::DOUBLE => Value::Double(f64::from_bits(self.u64()?)),
            fc::DECIMAL32 => Value::Decimal32(self.array_of()?),
            fc::DECIMAL64 => Value::Decimal64(self.array_of()?),
            fc::DECIMAL128 => Value::Decimal128(self.array_of()?),
            fc::CHAR => {
                Value::Char(char::from_u32(self.u32()?).ok_or(CodecError::InvalidValue("char"))?)
            }
            fc::TIMESTAMP => Value::Timestamp(self.u64()? as i64),
            fc::UUID => Value::Uuid(self.array_of()?),
            fc::VBIN8 | fc::VBIN32 => Value::Binary(self.variable(code)?),
            fc::STR8 | fc::STR32 => Value::String(self.string_body(code)?),
            fc::SYM8 | fc::SYM32 => Value::Symbol(self.symbol_body(code)?),
            fc::LIST0 => Value::List(Vec::new()),
            fc::LIST8 | fc::LIST32 => Value::List(self.list_body(code == fc::LIST32)?),
            fc::MAP8 | fc::MAP32 => Value::Map(self.map_body(code == fc::MAP32)?),
            fc::ARRAY8 | fc::ARRAY32 => Value::Array(self.array_body(code == fc::ARRAY32)?),
            other => return Err(CodecError::InvalidFormatCode(other)),
        })
    }

    fn bool_byte(&mut self) -> Result<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(CodecError::InvalidValue("boolean")),
        }
    }

    fn list_body(&mut self, wide: bool) -> Result<Vec<Value>> {
        let (count, body) = self.compound_header(if wide { 4 } else { 1 })?;
        // Every element takes at least its one constructor byte.
        if count as usize > body {
            return Err(CodecError::InvalidSize("list count exceeds its size"));
        }
        self.enter()?;
        let end = self.remaining() - body;
        let mut items = Vec::with_capacity(self.prealloc(count));
        for _ in 0..count {
            items.push(self.value()?);
        }
        self.expect_end(end, "list size does not match its elements")?;
        self.leave();
        Ok(items)
    }

    pub(crate) fn map_header(&mut self, wide: bool) -> Result<(u32, usize)> {
        let (count, body) = self.compound_header(if wide { 4 } else { 1 })?;
        if count % 2 != 0 {
            return Err(CodecError::InvalidSize("odd map count"));
        }
        if count as usize > body {
            return Err(CodecError::InvalidSize("map count exceeds its size"));
        }
        Ok((count / 2, self.remaining() - body))
    }

    fn map_body(&mut self, wide: bool) -> Result<Vec<(Value, Value)>> {
        let (n_pairs, end) = self.map_header(wide)?;
        self.enter()?;
        let mut pairs = Vec::with_capacity(self.prealloc(n_pairs));
        for _ in 0..n_pairs {
            let key = self.value()?;
            let value = self.value()?;
            pairs.push((key, value));
        }
        self.expect_end(end, "map size does not match its entries")?;
        self.leave();
        Ok(pairs)
    }

    fn array_body(&mut self, wide: bool) -> Result<Array> {
        let (count, body) = self.compound_header(if wide { 4 } else { 1 })?;
        if body == 0 {
            return Err(CodecError::InvalidSize("array without element constructor"));
        }
        self.enter()?;
        let end = self.remaining() - body;
        let mut format_code = self.u8()?;
        let descriptor = if format_code == fc::DESCRIBED {
            let descriptor = self.descriptor()?;
            format_code = self.u8()?;
            Some(descriptor)
        } else {
            None
        };
        if format_code == fc::DESCRIBED {
            return Err(CodecError::InvalidFormatCode(format_code));
        }
        let element_bytes = self
            .remaining()
            .checked_sub(end)
            .ok_or(CodecError::InvalidSize(
                "array descriptor exceeds the array",
            ))?;
        match fixed_width(format_code) {
            Some(0) => {
                self.zero_width_budget = self
                    .zero_width_budget
                    .checked_sub(count as usize)
                    .ok_or(CodecError::InvalidSize("array count"))?;
            }
            Some(width) => {
                if (count as usize).saturating_mul(width) != element_bytes {
                    return Err(CodecError::InvalidSize(
                        "array count does not match its size",
                    ));
                }
            }
            // Variable-width and compound elements take at least one byte.
            None => {
                if count as usize > element_bytes {
                    return Err(CodecError::InvalidSize("array count exceeds its size"));
                }
            }
        }
        let mut items = Vec::with_capacity(self.prealloc(count));
        for _ in 0..count {
            items.push(self.value_body(format_code)?);
        }
        self.expect_end(end, "array size does not match its elements")?;
        self.leave();
        Ok(Array {
            descriptor,
            format_code,
            items,
        })
    }

    /// Decode a descriptor (the value after a 0x00 constructor): a ulong or
    /// a symbol.
    pub(crate) fn descriptor(&mut self) -> Result<Descriptor> {
        match self.u8()? {
            fc::SMALLULONG => Ok(Descriptor::Code(u64::from(self.u8()?))),
            fc::ULONG => Ok(Descriptor::Code(self.u64()?)),
            fc::ULONG0 => Ok(Descriptor::Code(0)),
            code @ (fc::SYM8 | fc::SYM32) => Ok(Descriptor::Symbol(self.symbol_body(code)?)),
            other => Err(unexpected("descriptor (ulong or symbol)", other)),
        }
    }

    /// Skip one value without decoding it: O(1) for fixed-width and sized
    /// encodings (the size prefix is trusted only after checking the bytes
    /// are present), recursive only through descriptors.
    pub(crate) fn skip_value(&mut self) -> Result<()> {
        let code = self.u8()?;
        if code == fc::DESCRIBED {
            self.enter()?;
            self.skip_value()?;
            self.skip_value()?;
            self.leave();
            return Ok(());
        }
        if let Some(width) = fixed_width(code) {
            return self.advance(width);
        }
        match sized_width(code) {
            Some(width) => {
                let size = self.size_prefix(width)?;
                self.advance(size)
            }
            None => Err(CodecError::InvalidFormatCode(code)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings of one value each, covering every category of format code.
    fn samples() -> Vec<Vec<u8>> {
        vec![
            vec![0x40],
            vec![0x56, 1],
            vec![0x41],
            vec![0x50, 9],
            vec![0x60, 0, 9],
            vec![0x70, 0, 0, 0, 9],
            vec![0x80, 0, 0, 0, 0, 0, 0, 0, 9],
            vec![0x94, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
            vec![0x98, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
            vec![0xa0, 2, 1, 2],
            vec![0xb1, 0, 0, 0, 1, b'a'],
            vec![0x45],
            vec![0xc0, 3, 2, 0x41, 0x42],
            vec![0xd1, 0, 0, 0, 8, 0, 0, 0, 2, 0xa3, 1, b'k', 0x40],
            vec![0xe0, 4, 2, 0x52, 1, 2],
            vec![0x00, 0x53, 0x75, 0xa0, 1, 7],
            vec![0x00, 0xa3, 1, b'd', 0x00, 0x53, 1, 0x45],
        ]
    }

    #[test]
    fn skip_value_consumes_exactly_what_value_decodes() {
        for sample in samples() {
            let mut padded = sample.clone();
            padded.push(0xee);
            let mut decoded = Bytes::from(padded.clone());
            Decoder::new(&mut decoded).value().unwrap();
            let mut skipped = Bytes::from(padded);
            Decoder::new(&mut skipped).skip_value().unwrap();
            assert_eq!(skipped, decoded, "{sample:02x?}");
            assert_eq!(&skipped[..], &[0xee]);
        }
    }

    #[test]
    fn skip_value_rejects_truncated_and_invalid_input() {
        for sample in samples() {
            for cut in 0..sample.len() {
                let mut input = Bytes::copy_from_slice(&sample[..cut]);
                assert!(
                    Decoder::new(&mut input).skip_value().is_err(),
                    "{sample:02x?}/{cut}"
                );
            }
        }
        let mut invalid = Bytes::from_static(&[0x01]);
        assert_eq!(
            Decoder::new(&mut invalid).skip_value(),
            Err(CodecError::InvalidFormatCode(0x01))
        );
    }

    #[test]
    fn binary_values_are_slices_of_the_input() {
        let input = Bytes::from_static(&[0xa0, 3, 1, 2, 3]);
        let mut cursor = input.clone();
        let Value::Binary(bytes) = Decoder::new(&mut cursor).value().unwrap() else {
            panic!("not a binary");
        };
        assert_eq!(bytes.as_ptr(), input[2..].as_ptr());
    }

    #[test]
    fn zero_width_array_elements_are_bounded_by_input_length() {
        // 200 `true`s in a 4-byte array: fine, within the free allowance.
        let mut input = Bytes::from_static(&[0xe0, 2, 200, 0x41]);
        assert!(Decoder::new(&mut input).value().is_ok());
        // An array32 of 5000 nulls in 10 bytes: beyond it.
        let mut input = Bytes::from_static(&[0xf0, 0, 0, 0, 5, 0, 0, 0x13, 0x88, 0x40]);
        assert!(matches!(
            Decoder::new(&mut input).value(),
            Err(CodecError::InvalidSize(_))
        ));
        // Several arrays share one budget per decode call.
        let array = [0xf0, 0, 0, 0, 5, 0, 0, 0x0b, 0xb8, 0x40]; // 3000 nulls
        let list = [&[0xc0, 21, 2][..], &array, &array].concat();
        let mut input = Bytes::from(list);
        assert!(matches!(
            Decoder::new(&mut input).value(),
            Err(CodecError::InvalidSize(_))
        ));
    }
}
