//! The decoding cursor: reads primitives, generic values, typed composite
//! fields and list headers from the front of a `Bytes`, advancing it.
//!
//! Everything here reads untrusted network bytes, so every read is checked
//! against the bytes present, every size or count is checked before it is
//! trusted, nesting is bounded by [`NESTING_DEPTH_MAX`], and no `Vec` is
//! pre-sized by more than the bytes that could fill it. Binary values are
//! zero-copy slices of the input.

use bytes::{Buf, Bytes};

use super::codes::{describe, descriptor_code, fc};
use super::error::CodecError;
use super::value::{Array, Descriptor, Fields, Symbol, Value, NESTING_DEPTH_MAX};

type Result<T> = std::result::Result<T, CodecError>;

/// Upper bound on the elements a `Vec` is pre-sized for: beyond it the
/// vector grows as elements are actually decoded, so a lying count cannot
/// reserve memory that the bytes do not back (and nested lists cannot
/// multiply such reservations).
const PREALLOC_ELEMENTS_MAX: usize = 256;

/// A cursor over the bytes of one decode call.
pub(crate) struct Decoder<'a> {
    buf: &'a mut Bytes,
    depth: usize,
    /// Array elements of a zero-width encoding (null, true, uint0, list0, ...)
    /// occupy no bytes, so their count is charged here instead: at most one
    /// such element per input byte, which bounds the memory a tiny input can
    /// make the decoder allocate.
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

/// The fields of a composite list still to be read, and where the list ends.
pub(crate) struct ListFields {
    remaining: u32,
    /// `Decoder::remaining()` once the whole list has been read.
    end: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder reading from the front of `buf`.
    pub(crate) fn new(buf: &'a mut Bytes) -> Self {
        let zero_width_budget = buf.len();
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
    fn variable(&mut self, code: u8) -> Result<Bytes> {
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

    fn map_header(&mut self, wide: bool) -> Result<(u32, usize)> {
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

    // ----- typed fields of composites -------------------------------------
    // Each reads one field, returning None for null (the field's default).

    pub(crate) fn opt_bool(&mut self) -> Result<Option<bool>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            fc::TRUE => Ok(Some(true)),
            fc::FALSE => Ok(Some(false)),
            fc::BOOLEAN => Ok(Some(self.bool_byte()?)),
            other => Err(unexpected("boolean", other)),
        }
    }

    pub(crate) fn opt_ubyte(&mut self) -> Result<Option<u8>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            fc::UBYTE => Ok(Some(self.u8()?)),
            other => Err(unexpected("ubyte", other)),
        }
    }

    pub(crate) fn opt_ushort(&mut self) -> Result<Option<u16>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            fc::USHORT => Ok(Some(self.u16()?)),
            other => Err(unexpected("ushort", other)),
        }
    }

    pub(crate) fn opt_uint(&mut self) -> Result<Option<u32>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            fc::UINT0 => Ok(Some(0)),
            fc::SMALLUINT => Ok(Some(u32::from(self.u8()?))),
            fc::UINT => Ok(Some(self.u32()?)),
            other => Err(unexpected("uint", other)),
        }
    }

    pub(crate) fn opt_ulong(&mut self) -> Result<Option<u64>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            fc::ULONG0 => Ok(Some(0)),
            fc::SMALLULONG => Ok(Some(u64::from(self.u8()?))),
            fc::ULONG => Ok(Some(self.u64()?)),
            other => Err(unexpected("ulong", other)),
        }
    }

    pub(crate) fn opt_binary(&mut self) -> Result<Option<Bytes>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            code @ (fc::VBIN8 | fc::VBIN32) => Ok(Some(self.variable(code)?)),
            other => Err(unexpected("binary", other)),
        }
    }

    pub(crate) fn opt_string(&mut self) -> Result<Option<String>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            code @ (fc::STR8 | fc::STR32) => Ok(Some(self.string_body(code)?)),
            other => Err(unexpected("string", other)),
        }
    }

    pub(crate) fn opt_symbol(&mut self) -> Result<Option<Symbol>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            code @ (fc::SYM8 | fc::SYM32) => Ok(Some(self.symbol_body(code)?)),
            other => Err(unexpected("symbol", other)),
        }
    }

    /// Any value; null is `None`.
    pub(crate) fn opt_value(&mut self) -> Result<Option<Value>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            code => Ok(Some(self.value_with(code)?)),
        }
    }

    /// A map with any keys (e.g. attach's unsettled map).
    pub(crate) fn opt_map(&mut self) -> Result<Option<Vec<(Value, Value)>>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            code @ (fc::MAP8 | fc::MAP32) => Ok(Some(self.map_body(code == fc::MAP32)?)),
            other => Err(unexpected("map", other)),
        }
    }

    /// A `fields` map (or annotations, filter-set): symbol keys, any values.
    pub(crate) fn opt_fields(&mut self) -> Result<Option<Fields>> {
        let code = match self.u8()? {
            fc::NULL => return Ok(None),
            code @ (fc::MAP8 | fc::MAP32) => code,
            other => return Err(unexpected("map", other)),
        };
        let (n_pairs, end) = self.map_header(code == fc::MAP32)?;
        self.enter()?;
        let mut fields = Vec::with_capacity(self.prealloc(n_pairs));
        for _ in 0..n_pairs {
            let key = match self.u8()? {
                code @ (fc::SYM8 | fc::SYM32) => self.symbol_body(code)?,
                other => return Err(unexpected("symbol key", other)),
            };
            let value = self.value()?;
            fields.push((key, value));
        }
        self.expect_end(end, "map size does not match its entries")?;
        self.leave();
        Ok(Some(fields))
    }

    /// A `multiple="true"` symbol field: null, one symbol, or an array of
    /// symbols. `None` only for null, so mandatory fields can tell an empty
    /// array from an absent field.
    pub(crate) fn opt_symbols(&mut self) -> Result<Option<Vec<Symbol>>> {
        let code = self.u8()?;
        match code {
            fc::NULL => Ok(None),
            fc::SYM8 | fc::SYM32 => Ok(Some(vec![self.symbol_body(code)?])),
            fc::ARRAY8 | fc::ARRAY32 => {
                let (count, body) =
                    self.compound_header(if code == fc::ARRAY32 { 4 } else { 1 })?;
                if body == 0 {
                    return Err(CodecError::InvalidSize("array without element constructor"));
                }
                let end = self.remaining() - body;
                let element = self.u8()?;
                if element != fc::SYM8 && element != fc::SYM32 {
                    return Err(unexpected("symbol array", element));
                }
                if count as usize > body - 1 {
                    return Err(CodecError::InvalidSize("array count exceeds its size"));
                }
                let mut symbols = Vec::with_capacity(self.prealloc(count));
                for _ in 0..count {
                    symbols.push(self.symbol_body(element)?);
                }
                self.expect_end(end, "array size does not match its elements")?;
                Ok(Some(symbols))
            }
            other => Err(unexpected("symbol or symbol array", other)),
        }
    }

    /// Like [`Decoder::opt_symbols`], with null as the empty list.
    pub(crate) fn symbols(&mut self) -> Result<Option<Vec<Symbol>>> {
        Ok(Some(self.opt_symbols()?.unwrap_or_default()))
    }

    /// A field that is null or a described value: returns its descriptor,
    /// leaving the cursor on the described value's body.
    pub(crate) fn opt_descriptor(&mut self) -> Result<Option<Descriptor>> {
        match self.u8()? {
            fc::NULL => Ok(None),
            fc::DESCRIBED => Ok(Some(self.descriptor()?)),
            other => Err(unexpected("described type", other)),
        }
    }

    // ----- composite lists ------------------------------------------------

    /// Read the list header of a composite's body (list0, list8 or list32).
    pub(crate) fn list_fields(&mut self) -> Result<ListFields> {
        match self.u8()? {
            fc::LIST0 => Ok(ListFields {
                remaining: 0,
                end: self.remaining(),
            }),
            code @ (fc::LIST8 | fc::LIST32) => {
                let (count, body) = self.compound_header(if code == fc::LIST32 { 4 } else { 1 })?;
                if count as usize > body {
                    return Err(CodecError::InvalidSize("list count exceeds its size"));
                }
                Ok(ListFields {
                    remaining: count,
                    end: self.remaining() - body,
                })
            }
            other => Err(unexpected("list", other)),
        }
    }

    /// Read the next field of a composite with `read`; a field beyond the
    /// list's count is absent (`None`, i.e. the default).
    pub(crate) fn field<T>(
        &mut self,
        list: &mut ListFields,
        read: impl FnOnce(&mut Self) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        if list.remaining == 0 {
            return Ok(None);
        }
        list.remaining -= 1;
        read(self)
    }

    /// Read the next field, which is mandatory.
    pub(crate) fn required<T>(
        &mut self,
        list: &mut ListFields,
        read: impl FnOnce(&mut Self) -> Result<Option<T>>,
        name: &'static str,
    ) -> Result<T> {
        self.field(list, read)?
            .ok_or(CodecError::MissingField(name))
    }

    /// Skip fields beyond the ones this codec knows (a later protocol
    /// version may add some) and check the list's size.
    pub(crate) fn end_list(&mut self, list: ListFields) -> Result<()> {
        for _ in 0..list.remaining {
            self.skip_value()?;
        }
        self.expect_end(list.end, "list size does not match its fields")
    }

    /// Decode the list body of a described composite whose descriptor was
    /// read, field by field with `fields`.
    pub(crate) fn composite<T>(
        &mut self,
        fields: impl FnOnce(&mut Self, &mut ListFields) -> Result<T>,
    ) -> Result<T> {
        self.enter()?;
        let mut list = self.list_fields()?;
        let decoded = fields(self, &mut list)?;
        self.end_list(list)?;
        self.leave();
        Ok(decoded)
    }

    /// Null or a described composite whose descriptor is `code`, decoded
    /// with `fields`; any other descriptor is an `UnknownDescriptor` error.
    pub(crate) fn opt_composite<T>(
        &mut self,
        code: u64,
        fields: impl FnOnce(&mut Self, &mut ListFields) -> Result<T>,
    ) -> Result<Option<T>> {
        match self.opt_descriptor()? {
            None => Ok(None),
            Some(descriptor) if descriptor_code(&descriptor) == Some(code) => {
                self.composite(fields).map(Some)
            }
            Some(descriptor) => Err(CodecError::UnknownDescriptor(describe(&descriptor))),
        }
    }

    /// Like [`Decoder::opt_composite`], but null is an error too.
    pub(crate) fn expect_composite<T>(
        &mut self,
        code: u64,
        fields: impl FnOnce(&mut Self, &mut ListFields) -> Result<T>,
    ) -> Result<T> {
        self.opt_composite(code, fields)?
            .ok_or(unexpected("described type", fc::NULL))
    }
}
