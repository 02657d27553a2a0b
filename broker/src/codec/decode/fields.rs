//! Typed readers for the fields of composite types (performatives, SASL
//! frames, delivery states, termini, the message header): each reads one
//! field of a given AMQP type, null meaning "absent, use the default", plus
//! the list framing of a composite (missing trailing fields, extra fields
//! from later protocol versions, size checks).

use bytes::Bytes;

use super::{unexpected, Decoder, Result};
use crate::codec::codes::{describe, descriptor_code, fc};
use crate::codec::error::CodecError;
use crate::codec::value::{Descriptor, Fields, Symbol, Value};

/// The fields of a composite list still to be read, and where the list ends.
pub(crate) struct ListFields {
    remaining: u32,
    /// `Decoder::remaining()` once the whole list has been read.
    end: usize,
}

impl Decoder<'_> {
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
