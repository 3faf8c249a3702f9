//! Values sent as parameters and read from rows, in PostgreSQL's text format.

use std::sync::Arc;

/// Type OIDs this client converts (see `pg_type`).
pub mod oid {
    /// `bool`.
    pub const BOOL: u32 = 16;
    /// `bytea`.
    pub const BYTEA: u32 = 17;
    /// `int8` / `bigint`.
    pub const INT8: u32 = 20;
    /// `int2` / `smallint`.
    pub const INT2: u32 = 21;
    /// `int4` / `integer`.
    pub const INT4: u32 = 23;
    /// `text`.
    pub const TEXT: u32 = 25;
    /// `float4` / `real`.
    pub const FLOAT4: u32 = 700;
    /// `float8` / `double precision`.
    pub const FLOAT8: u32 = 701;
    /// `numeric`.
    pub const NUMERIC: u32 = 1700;
}

/// One parameter or column value.
///
/// As a parameter (text format): `Int` is sent as `int8`, `Real` as `float8`, `Blob` as
/// `bytea`; `Text` and `Null` leave the type to the server, which infers it from the statement
/// (so `Text` fills `timestamptz`, `jsonb` or `boolean` columns too). Cast in SQL where the
/// inferred type is not the one wanted (`$1::int4::bool` for an `Int` into a `boolean`).
///
/// As a column: `int2`/`int4`/`int8` → `Int`, `float4`/`float8`/`numeric` → `Real`, `bytea` →
/// `Blob`, `bool` → `Int` 0/1, anything else → `Text`, SQL NULL → `Null`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl Value {
    /// True for `Null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The integer of an `Int`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The number of a `Real` or an `Int`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Real(f) => Some(*f),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The text of a `Text`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes of a `Blob`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Blob(b) => Some(b),
            _ => None,
        }
    }

    /// The parameter type OID sent in `Parse` (0: the server infers it).
    pub(crate) fn param_type(&self) -> u32 {
        match self {
            Value::Int(_) => oid::INT8,
            Value::Real(_) => oid::FLOAT8,
            Value::Blob(_) => oid::BYTEA,
            Value::Null | Value::Text(_) => 0,
        }
    }

    /// The text-format encoding; `None` for NULL.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> bool {
        match self {
            Value::Null => return false,
            Value::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
            Value::Real(f) => {
                let s = if f.is_nan() {
                    "NaN".to_string()
                } else if f.is_infinite() {
                    if *f > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
                } else {
                    // Rust prints the shortest text that reads back to the same double.
                    f.to_string()
                };
                out.extend_from_slice(s.as_bytes());
            }
            Value::Text(s) => out.extend_from_slice(s.as_bytes()),
            Value::Blob(b) => {
                out.extend_from_slice(b"\\x");
                for byte in b {
                    const DIGITS: &[u8; 16] = b"0123456789abcdef";
                    out.push(DIGITS[usize::from(byte >> 4)]);
                    out.push(DIGITS[usize::from(byte & 0xf)]);
                }
            }
        }
        true
    }

    /// Converts a text-format column of type `type_oid`; `None` when the text is not what the
    /// type promises.
    pub(crate) fn decode(type_oid: u32, text: &[u8]) -> Option<Value> {
        let s = std::str::from_utf8(text).ok()?;
        Some(match type_oid {
            oid::INT2 | oid::INT4 | oid::INT8 => Value::Int(s.parse().ok()?),
            oid::FLOAT4 | oid::FLOAT8 | oid::NUMERIC => Value::Real(match s {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                _ => s.parse().ok()?,
            }),
            oid::BOOL => Value::Int(match s {
                "t" => 1,
                "f" => 0,
                _ => return None,
            }),
            oid::BYTEA => Value::Blob(unhex(s.strip_prefix("\\x")?)?),
            _ => Value::Text(s.to_string()),
        })
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    b.chunks_exact(2)
        .map(|pair| {
            let hi = char::from(pair[0]).to_digit(16)?;
            let lo = char::from(pair[1]).to_digit(16)?;
            u8::try_from(hi * 16 + lo).ok()
        })
        .collect()
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(v.into())
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(v.into())
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(v.into())
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Blob(v.to_vec())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A result column: its name and type OID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name (its alias, or `?column?`).
    pub name: String,
    /// The type OID (see [`oid`]).
    pub type_oid: u32,
}

/// One row of a result. The column list is shared by every row of the result.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub(crate) columns: Arc<[Column]>,
    pub(crate) values: Vec<Value>,
}

impl Row {
    /// The columns, in order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The values, in column order.
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// The values, in column order.
    pub fn into_values(self) -> Vec<Value> {
        self.values
    }

    /// The number of columns.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True for a row without columns.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The value of column `index`.
    pub fn get(&self, index: usize) -> Option<&Value> {
        self.values.get(index)
    }

    /// The value of the first column named `name`.
    pub fn get_by_name(&self, name: &str) -> Option<&Value> {
        let i = self.columns.iter().position(|c| c.name == name)?;
        self.values.get(i)
    }

    /// The index of the first column named `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_format_round_trips_each_kind() {
        let cases = [
            (Value::Int(-42), oid::INT8),
            (Value::Real(0.1), oid::FLOAT8),
            (Value::Real(f64::INFINITY), oid::FLOAT8),
            (Value::Text("héllo".into()), oid::TEXT),
            (Value::Blob(vec![0, 1, 0xfe, 0xff]), oid::BYTEA),
        ];
        for (v, t) in cases {
            let mut buf = Vec::new();
            assert!(v.encode(&mut buf));
            assert_eq!(Value::decode(t, &buf).unwrap(), v);
        }
        assert!(!Value::Null.encode(&mut Vec::new()));
        assert_eq!(Value::decode(oid::BOOL, b"t"), Some(Value::Int(1)));
        assert_eq!(
            Value::decode(oid::NUMERIC, b"12.50"),
            Some(Value::Real(12.5))
        );
        assert_eq!(Value::decode(oid::BYTEA, b"\\x0g"), None);
        assert_eq!(Value::decode(oid::INT4, b"x"), None);
    }
}
