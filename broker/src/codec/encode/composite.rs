//! [`CompositeWriter`]: writes a described list (a composite type) field by
//! field straight into the output buffer, writing defaults as null and
//! trimming trailing nulls when the list is finished.

use bytes::{BufMut, Bytes, BytesMut};

use super::{
    begin_compound, finish_compound, put_binary, put_bool, put_fields, put_map, put_null,
    put_string, put_symbol, put_symbol_array, put_ubyte, put_uint, put_ulong, put_ushort,
    put_value,
};
use crate::codec::codes::fc;
use crate::codec::value::{Fields, Symbol, Value};

/// Writes a described list (a composite type) field by field; fields equal
/// to their default are written as null, and trailing nulls are trimmed
/// when the list is finished.
pub(crate) struct CompositeWriter<'a> {
    out: &'a mut BytesMut,
    /// Position of the list constructor.
    start: usize,
    /// Where the field being written starts.
    field_start: usize,
    n_fields: usize,
    /// Length of `out` after the last non-null field, and that field's count.
    kept_len: usize,
    kept_count: usize,
}

impl<'a> CompositeWriter<'a> {
    /// Write the descriptor `code` and open the list.
    pub(crate) fn begin(out: &'a mut BytesMut, code: u64) -> Self {
        out.put_u8(fc::DESCRIBED);
        put_ulong(out, code);
        let start = begin_compound(out, fc::LIST8);
        let field_start = out.len();
        CompositeWriter {
            out,
            start,
            field_start,
            n_fields: 0,
            kept_len: field_start,
            kept_count: 0,
        }
    }

    /// Close the field just written: remember it unless it is null.
    fn mark(&mut self) {
        self.n_fields += 1;
        let len = self.out.len();
        if !(len == self.field_start + 1 && self.out[self.field_start] == fc::NULL) {
            self.kept_len = len;
            self.kept_count = self.n_fields;
        }
        self.field_start = len;
    }

    /// Trim trailing nulls and patch the list header (list0 if no field is left).
    pub(crate) fn finish(self) {
        self.out.truncate(self.kept_len);
        if self.kept_count == 0 {
            self.out.truncate(self.start);
            self.out.put_u8(fc::LIST0);
        } else {
            finish_compound(self.out, self.start, self.kept_count);
        }
    }

    /// A field written by `write` (e.g. a nested composite).
    pub(crate) fn with(&mut self, write: impl FnOnce(&mut BytesMut)) -> &mut Self {
        write(self.out);
        self.mark();
        self
    }

    /// An optional field: null when `None`.
    pub(crate) fn opt<T>(
        &mut self,
        value: Option<T>,
        write: impl FnOnce(&mut BytesMut, T),
    ) -> &mut Self {
        match value {
            Some(v) => write(self.out, v),
            None => put_null(self.out),
        }
        self.mark();
        self
    }

    pub(crate) fn uint(&mut self, v: u32) -> &mut Self {
        self.opt(Some(v), put_uint)
    }

    /// A uint field with a default: null when equal to it.
    pub(crate) fn uint_default(&mut self, v: u32, default: u32) -> &mut Self {
        self.opt((v != default).then_some(v), put_uint)
    }

    pub(crate) fn opt_uint(&mut self, v: Option<u32>) -> &mut Self {
        self.opt(v, put_uint)
    }

    pub(crate) fn ulong(&mut self, v: u64) -> &mut Self {
        self.opt(Some(v), put_ulong)
    }

    pub(crate) fn opt_ulong(&mut self, v: Option<u64>) -> &mut Self {
        self.opt(v, put_ulong)
    }

    pub(crate) fn ubyte(&mut self, v: u8) -> &mut Self {
        self.opt(Some(v), put_ubyte)
    }

    pub(crate) fn ubyte_default(&mut self, v: u8, default: u8) -> &mut Self {
        self.opt((v != default).then_some(v), put_ubyte)
    }

    pub(crate) fn opt_ushort(&mut self, v: Option<u16>) -> &mut Self {
        self.opt(v, put_ushort)
    }

    pub(crate) fn ushort_default(&mut self, v: u16, default: u16) -> &mut Self {
        self.opt((v != default).then_some(v), put_ushort)
    }

    /// A mandatory boolean (e.g. role): always written.
    pub(crate) fn boolean(&mut self, v: bool) -> &mut Self {
        self.opt(Some(v), put_bool)
    }

    /// A boolean that defaults to false: null when false.
    pub(crate) fn flag(&mut self, v: bool) -> &mut Self {
        self.opt(v.then_some(true), put_bool)
    }

    pub(crate) fn opt_bool(&mut self, v: Option<bool>) -> &mut Self {
        self.opt(v, put_bool)
    }

    pub(crate) fn string(&mut self, v: &str) -> &mut Self {
        self.opt(Some(v), put_string)
    }

    pub(crate) fn opt_string(&mut self, v: Option<&str>) -> &mut Self {
        self.opt(v, put_string)
    }

    pub(crate) fn symbol(&mut self, v: &Symbol) -> &mut Self {
        self.opt(Some(v.as_str()), put_symbol)
    }

    pub(crate) fn opt_symbol(&mut self, v: Option<&Symbol>) -> &mut Self {
        self.opt(v.map(Symbol::as_str), put_symbol)
    }

    pub(crate) fn binary(&mut self, v: &[u8]) -> &mut Self {
        self.opt(Some(v), put_binary)
    }

    pub(crate) fn opt_binary(&mut self, v: Option<&Bytes>) -> &mut Self {
        self.opt(v.map(|b| &b[..]), put_binary)
    }

    pub(crate) fn opt_fields(&mut self, v: Option<&Fields>) -> &mut Self {
        self.opt(v, put_fields)
    }

    pub(crate) fn opt_map(&mut self, v: Option<&Vec<(Value, Value)>>) -> &mut Self {
        self.opt(v.map(Vec::as_slice), put_map)
    }

    /// An optional `multiple` symbol field: null when empty.
    pub(crate) fn symbols(&mut self, v: &[Symbol]) -> &mut Self {
        self.opt((!v.is_empty()).then_some(v), put_symbol_array)
    }

    pub(crate) fn opt_value(&mut self, v: Option<&Value>) -> &mut Self {
        self.opt(v, put_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_nulls_and_defaults_are_trimmed() {
        let mut out = BytesMut::new();
        let mut w = CompositeWriter::begin(&mut out, 0x13);
        w.opt_uint(None).uint(7).flag(false).uint_default(3, 3);
        w.finish();
        assert_eq!(&out[..], &[0x00, 0x53, 0x13, 0xc0, 4, 2, 0x40, 0x52, 7]);

        let mut out = BytesMut::new();
        let mut w = CompositeWriter::begin(&mut out, 0x18);
        w.opt_uint(None).flag(false).symbols(&[]);
        w.finish();
        assert_eq!(&out[..], &[0x00, 0x53, 0x18, 0x45]);
    }

    #[test]
    fn large_composites_widen_to_list32() {
        let mut out = BytesMut::new();
        let mut w = CompositeWriter::begin(&mut out, 0x10);
        let long = "x".repeat(300);
        w.string(&long).uint(1);
        w.finish();
        assert_eq!(&out[..4], &[0x00, 0x53, 0x10, 0xd0]);
        let size = u32::from_be_bytes([out[4], out[5], out[6], out[7]]) as usize;
        assert_eq!(size, out.len() - 8);
        assert_eq!(&out[8..12], &[0, 0, 0, 2]);
        assert_eq!(&out[12..17], &[0xb1, 0, 0, 1, 44]);
        assert_eq!(&out[out.len() - 2..], &[0x52, 1]);
    }

    #[test]
    fn writing_appends_after_existing_bytes() {
        let mut out = BytesMut::from(&b"prefix"[..]);
        let mut w = CompositeWriter::begin(&mut out, 0x24);
        w.opt_uint(None);
        w.finish();
        assert_eq!(&out[..], b"prefix\x00\x53\x24\x45");
    }
}
