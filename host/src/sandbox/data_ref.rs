//! A key or value borrowed from wherever it lies (a consumed message, a batch a plugin
//! returned), so the hot paths in both directions copy it only where it must go.

use super::wit::types::Data;

/// A key or value borrowed from its batch or message; `None` beside it stands for null.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataRef<'a> {
    Bytes(&'a [u8]),
    Text(&'a str),
    Json(&'a str),
}

impl<'a> DataRef<'a> {
    /// The bytes, whatever the kind.
    pub fn bytes(&self) -> &'a [u8] {
        match *self {
            DataRef::Bytes(b) => b,
            DataRef::Text(s) | DataRef::Json(s) => s.as_bytes(),
        }
    }

    /// An owned copy.
    pub fn to_data(&self) -> Data {
        match *self {
            DataRef::Bytes(b) => Data::Bytes(b.to_vec()),
            DataRef::Text(s) => Data::Text(s.to_owned()),
            DataRef::Json(s) => Data::Json(s.to_owned()),
        }
    }
}

impl<'a> From<&'a Data> for DataRef<'a> {
    fn from(data: &'a Data) -> Self {
        match data {
            Data::Bytes(b) => DataRef::Bytes(b),
            Data::Text(s) => DataRef::Text(s),
            Data::Json(s) => DataRef::Json(s),
        }
    }
}
