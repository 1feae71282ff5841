//! NumPy `.npz` / `.npy` reading and writing.
//!
//! Validation sets are uploaded as `.npz` archives (`np.savez` or `np.savez_compressed`);
//! every array comes back as an [`infaas_core::Tensor`] named after its key (the member
//! name without `.npy`). Job outputs are written with [`write_npz`] as a stored
//! (uncompressed) archive of `.npy` version 1.0 files that `np.load` reads.
//!
//! Supported:
//! - `.npy` format versions 1.0, 2.0 and 3.0;
//! - little-endian dtypes `<f4 <f8 <i8 <i4 <i2 |i1 |u1 |b1`, plus `<u2 <u4 <u8`, which are
//!   converted to `INT64` (an error if a `<u8` value does not fit);
//! - fixed-width strings: `<U<n>` (UTF-32LE) and `|S<n>` (UTF-8 bytes), as `BYTES`,
//!   with the trailing NULs NumPy pads with stripped;
//! - `fortran_order: True`, transposed to C (row-major) order;
//! - scalars (`shape: ()`, giving shape `[]`) and zero-sized arrays.
//!
//! Input is untrusted: every malformed file gives an [`NpzError`] naming the array, never a
//! panic, and declared shapes are checked (with overflow checks) against the bytes actually
//! present before anything is allocated.
//!
//! Hand-written rather than `npyz` or `ndarray-npy` (issue 33, measured with
//! `cargo bench -p infaas-protocol --bench npz`, figures in docs/benchmarks.md): on untrusted
//! input npyz 0.9.1 panics with a multiplication overflow on a shape such as
//! `(4294967296, 4294967296)` and ndarray-npy 0.10.0 aborts the process allocating 4 TB for
//! a 24-byte file that declares `(1000000000000,)` `<f4`; ndarray-npy reads no strings and
//! needs each array's element type in advance; both name problems in `io::Error` text that
//! would have to be matched back into [`NpzError`]'s variants; their `npz` features pin
//! other `zip` majors; and an npyz-based reader took 1.1-2.9x the instructions of this code
//! (1.1x where inflating dominates) and an npyz-based writer 4.0-4.7x.

use std::io::{Cursor, Read, Write};

use infaas_core::{Tensor, TensorData};

/// An array read from or written to an NPZ file: a tensor named after its key.
pub type NpzArray = Tensor;

/// Default cap on the total uncompressed size of the members of one archive read by
/// [`read_npz`] (4 GiB). It bounds memory use on deflate "bombs"; use
/// [`read_npz_with_limit`] to choose another.
pub const DEFAULT_MAX_UNCOMPRESSED_BYTES: u64 = 4 << 30;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// `.npy` files are padded so the data starts on a multiple of this (as NumPy does).
const ALIGN: usize = 64;
/// Nesting depth allowed in the header literal (NumPy headers nest at most 3 deep).
const MAX_HEADER_DEPTH: usize = 16;
/// Initial buffer for one decompressed member; grows as needed.
const MAX_PREALLOC: u64 = 64 << 20;

/// Why an NPZ archive or `.npy` file could not be read or written.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NpzError {
    #[error("not an NPZ file (a zip archive of .npy files): {0}")]
    NotZip(String),
    #[error("array '{array}': cannot read it from the archive: {message}")]
    Zip { array: String, message: String },
    #[error("array '{array}': uncompressed size {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        array: String,
        size: u64,
        limit: u64,
    },
    #[error("array '{array}': not an .npy file (bad magic bytes)")]
    BadMagic { array: String },
    #[error("array '{array}': unsupported .npy format version {major}.{minor} (1.0, 2.0 and 3.0 are supported)")]
    UnsupportedVersion { array: String, major: u8, minor: u8 },
    #[error("array '{array}': truncated: {detail}")]
    Truncated { array: String, detail: String },
    #[error("array '{array}': malformed .npy header: {detail}")]
    BadHeader { array: String, detail: String },
    #[error("array '{array}': unsupported dtype '{dtype}'")]
    UnsupportedDtype { array: String, dtype: String },
    #[error("array '{array}': object arrays (dtype '{dtype}') hold pickled Python objects, which are not supported; store numbers, booleans or fixed-width strings (dtype '<U...') instead")]
    Pickled { array: String, dtype: String },
    #[error("array '{array}': big-endian dtype '{dtype}' is not supported; convert it with arr.astype(arr.dtype.newbyteorder('<'))")]
    BigEndian { array: String, dtype: String },
    #[error("array '{array}': shape {shape} is too large")]
    ShapeOverflow { array: String, shape: String },
    #[error("array '{array}': element count mismatch: shape {shape} of dtype '{dtype}' needs {expected} bytes of data but {actual} are present")]
    ElementCount {
        array: String,
        shape: String,
        dtype: String,
        expected: usize,
        actual: usize,
    },
    #[error("array '{array}': {detail}")]
    BadValue { array: String, detail: String },
    #[error("array '{array}': cannot write it: {detail}")]
    Write { array: String, detail: String },
}

// ---------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------

/// Reads every array of an NPZ archive, in file order, with the default size limit
/// ([`DEFAULT_MAX_UNCOMPRESSED_BYTES`]).
pub fn read_npz(bytes: &[u8]) -> Result<Vec<NpzArray>, NpzError> {
    read_npz_with_limit(bytes, DEFAULT_MAX_UNCOMPRESSED_BYTES)
}

/// Reads every array of an NPZ archive, in file order, refusing archives whose members
/// decompress to more than `max_uncompressed_bytes` in total.
pub fn read_npz_with_limit(
    bytes: &[u8],
    max_uncompressed_bytes: u64,
) -> Result<Vec<NpzArray>, NpzError> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| {
        if bytes.starts_with(MAGIC) {
            NpzError::NotZip(
                "this is a single .npy file; save the arrays with np.savez to make an .npz".into(),
            )
        } else {
            NpzError::NotZip(e.to_string())
        }
    })?;
    let mut arrays = Vec::with_capacity(archive.len());
    let mut total: u64 = 0;
    for index in 0..archive.len() {
        let member = archive
            .name_for_index(index)
            .unwrap_or_default()
            .to_string();
        let array = array_name(&member).to_string();
        let zip_err = |e: &dyn std::fmt::Display| NpzError::Zip {
            array: array.clone(),
            message: e.to_string(),
        };
        let mut file = archive.by_index(index).map_err(|e| zip_err(&e))?;
        if file.is_dir() {
            continue;
        }
        let size = file.size();
        total = total.saturating_add(size);
        if total > max_uncompressed_bytes {
            return Err(NpzError::TooLarge {
                array,
                size: total,
                limit: max_uncompressed_bytes,
            });
        }
        // Never trust the declared size for the allocation, and never read past it:
        // reading one byte more than declared detects a member that lies about its size
        // (and lets the zip reader check the CRC at the end of the stream).
        let mut data = Vec::with_capacity(usize::try_from(size.min(MAX_PREALLOC)).unwrap_or(0));
        (&mut file)
            .take(size.saturating_add(1))
            .read_to_end(&mut data)
            .map_err(|e| zip_err(&e))?;
        if data.len() as u64 != size {
            return Err(zip_err(&format!(
                "member holds {} bytes but its header declares {size}",
                data.len()
            )));
        }
        arrays.push(read_npy(&array, &data)?);
    }
    Ok(arrays)
}

/// The key NumPy uses for an archive member: its name without the `.npy` suffix.
fn array_name(member: &str) -> &str {
    member.strip_suffix(".npy").unwrap_or(member)
}

/// Reads one `.npy` file; `name` becomes the tensor's name and appears in errors.
pub fn read_npy(name: &str, bytes: &[u8]) -> Result<NpzArray, NpzError> {
    let ctx = Ctx(name);
    let (header, data) = split_header(ctx, bytes)?;
    let header = parse_header(ctx, &header)?;
    let dtype = parse_dtype(ctx, &header.descr)?;

    let count = header
        .shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| ctx.shape_overflow(&header.shape))?;
    let itemsize = dtype.itemsize();
    let expected = count
        .checked_mul(itemsize)
        .ok_or_else(|| ctx.shape_overflow(&header.shape))?;
    if data.len() < expected {
        return Err(NpzError::Truncated {
            array: name.to_string(),
            detail: format!(
                "shape {} of dtype '{}' needs {expected} bytes of data but only {} are present",
                fmt_shape(&header.shape),
                header.descr,
                data.len()
            ),
        });
    }
    if data.len() > expected {
        return Err(NpzError::ElementCount {
            array: name.to_string(),
            shape: fmt_shape(&header.shape),
            dtype: header.descr,
            expected,
            actual: data.len(),
        });
    }

    let values = decode(ctx, dtype, data)?;
    let values = if header.fortran_order && header.shape.len() > 1 {
        fortran_to_c(ctx, values, &header.shape)?
    } else {
        values
    };
    Tensor::new(name, header.shape, values).map_err(|e| NpzError::BadValue {
        array: name.to_string(),
        detail: e.to_string(),
    })
}

/// The array name, carried around to build errors.
#[derive(Clone, Copy)]
struct Ctx<'a>(&'a str);

impl Ctx<'_> {
    fn truncated(self, detail: impl Into<String>) -> NpzError {
        NpzError::Truncated {
            array: self.0.to_string(),
            detail: detail.into(),
        }
    }
    fn bad_header(self, detail: impl Into<String>) -> NpzError {
        NpzError::BadHeader {
            array: self.0.to_string(),
            detail: detail.into(),
        }
    }
    fn unsupported(self, dtype: &str) -> NpzError {
        NpzError::UnsupportedDtype {
            array: self.0.to_string(),
            dtype: dtype.to_string(),
        }
    }
    fn bad_value(self, detail: impl Into<String>) -> NpzError {
        NpzError::BadValue {
            array: self.0.to_string(),
            detail: detail.into(),
        }
    }
    fn shape_overflow(self, shape: &[usize]) -> NpzError {
        NpzError::ShapeOverflow {
            array: self.0.to_string(),
            shape: fmt_shape(shape),
        }
    }
}

/// Checks magic and version; returns the header text and the data bytes.
fn split_header<'b>(ctx: Ctx<'_>, bytes: &'b [u8]) -> Result<(String, &'b [u8]), NpzError> {
    let magic = bytes.get(..MAGIC.len());
    match magic {
        None if MAGIC.starts_with(bytes) => {
            return Err(ctx.truncated(format!("file is only {} bytes long", bytes.len())))
        }
        Some(m) if m == MAGIC => {}
        _ => {
            return Err(NpzError::BadMagic {
                array: ctx.0.to_string(),
            })
        }
    }
    let (major, minor) = match (bytes.get(6), bytes.get(7)) {
        (Some(&major), Some(&minor)) => (major, minor),
        _ => return Err(ctx.truncated("file ends inside the format version")),
    };
    let (len_bytes, header_start): (usize, usize) = match (major, minor) {
        (1, 0) => (2, 10),
        (2, 0) | (3, 0) => (4, 12),
        _ => {
            return Err(NpzError::UnsupportedVersion {
                array: ctx.0.to_string(),
                major,
                minor,
            })
        }
    };
    let len_field = bytes
        .get(8..8 + len_bytes)
        .ok_or_else(|| ctx.truncated("file ends inside the header length"))?;
    let header_len = len_field
        .iter()
        .rev()
        .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
    let header_end = header_start
        .checked_add(header_len)
        .ok_or_else(|| ctx.truncated("header length overflows"))?;
    let raw = bytes.get(header_start..header_end).ok_or_else(|| {
        ctx.truncated(format!(
            "header declares {header_len} bytes but the file ends after {}",
            bytes.len().saturating_sub(header_start)
        ))
    })?;
    let text = if major == 3 {
        std::str::from_utf8(raw)
            .map_err(|_| ctx.bad_header("version 3.0 header is not valid UTF-8"))?
            .to_string()
    } else {
        // Versions 1.0 and 2.0 headers are latin-1.
        raw.iter().map(|&b| char::from(b)).collect()
    };
    let data = bytes.get(header_end..).unwrap_or_default();
    Ok((text, data))
}

struct Header {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
}

/// Parses the header, a Python dict literal such as
/// `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
fn parse_header(ctx: Ctx<'_>, text: &str) -> Result<Header, NpzError> {
    let mut parser = LiteralParser {
        chars: text.chars().collect(),
        pos: 0,
    };
    let value = parser
        .value(0)
        .map_err(|e| ctx.bad_header(format!("{e} in {:?}", text.trim_end())))?;
    parser.skip_ws();
    if parser.pos != parser.chars.len() {
        return Err(ctx.bad_header(format!(
            "unexpected text after the dictionary in {:?}",
            text.trim_end()
        )));
    }
    let Literal::Dict(entries) = value else {
        return Err(ctx.bad_header("the header is not a dictionary"));
    };
    let get = |key: &str| {
        entries
            .iter()
            .find(|(k, _)| matches!(k, Literal::Str(s) if s == key))
            .map(|(_, v)| v)
    };

    let descr = match get("descr") {
        Some(Literal::Str(s)) => s.clone(),
        Some(Literal::List(_)) | Some(Literal::Tuple(_)) => {
            return Err(ctx.unsupported("structured (record) dtype"))
        }
        Some(_) => return Err(ctx.bad_header("'descr' is not a string")),
        None => return Err(ctx.bad_header("missing key 'descr'")),
    };
    let fortran_order = match get("fortran_order") {
        Some(Literal::Bool(b)) => *b,
        Some(_) => return Err(ctx.bad_header("'fortran_order' is not True or False")),
        None => return Err(ctx.bad_header("missing key 'fortran_order'")),
    };
    let shape = match get("shape") {
        Some(Literal::Tuple(dims)) | Some(Literal::List(dims)) => dims
            .iter()
            .map(|d| match d {
                Literal::Int(n) => usize::try_from(*n).map_err(|_| NpzError::ShapeOverflow {
                    array: ctx.0.to_string(),
                    shape: format!("with dimension {n}"),
                }),
                _ => Err(ctx.bad_header("'shape' holds something other than integers")),
            })
            .collect::<Result<Vec<usize>, NpzError>>()?,
        Some(_) => return Err(ctx.bad_header("'shape' is not a tuple")),
        None => return Err(ctx.bad_header("missing key 'shape'")),
    };
    Ok(Header {
        descr,
        fortran_order,
        shape,
    })
}

/// The subset of Python literals that `.npy` headers use.
#[derive(Debug)]
enum Literal {
    Str(String),
    Int(u64),
    Bool(bool),
    None,
    Tuple(Vec<Literal>),
    List(Vec<Literal>),
    Dict(Vec<(Literal, Literal)>),
}

struct LiteralParser {
    chars: Vec<char>,
    pos: usize,
}

impl LiteralParser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, want: char) -> Result<(), String> {
        self.skip_ws();
        match self.bump() {
            Some(c) if c == want => Ok(()),
            Some(c) => Err(format!("expected '{want}' but found '{c}'")),
            None => Err(format!("expected '{want}' but the header ended")),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Literal, String> {
        if depth > MAX_HEADER_DEPTH {
            return Err("nesting too deep".into());
        }
        self.skip_ws();
        match self.peek() {
            None => Err("the header ended early".into()),
            Some('\'') | Some('"') => self.string().map(Literal::Str),
            Some('(') => self.sequence(')', depth).map(Literal::Tuple),
            Some('[') => self.sequence(']', depth).map(Literal::List),
            Some('{') => self.dict(depth),
            Some(c) if c.is_ascii_digit() => self.int(),
            Some('-') => Err("negative number".into()),
            Some(c) if c.is_alphabetic() || c == '_' => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    self.pos += 1;
                }
                let word: String = self
                    .chars
                    .get(start..self.pos)
                    .unwrap_or_default()
                    .iter()
                    .collect();
                match word.as_str() {
                    "True" => Ok(Literal::Bool(true)),
                    "False" => Ok(Literal::Bool(false)),
                    "None" => Ok(Literal::None),
                    _ => Err(format!("unexpected word '{word}'")),
                }
            }
            Some(c) => Err(format!("unexpected character '{c}'")),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = self.bump().ok_or("the header ended early")?;
        let mut out = String::new();
        loop {
            match self.bump() {
                None => return Err("unterminated string".into()),
                Some('\\') => match self.bump() {
                    None => return Err("unterminated string".into()),
                    Some(c) => out.push(c),
                },
                Some(c) if c == quote => return Ok(out),
                Some(c) => out.push(c),
            }
        }
    }

    fn int(&mut self) -> Result<Literal, String> {
        let mut n: u64 = 0;
        while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(d)))
                .ok_or("integer too large")?;
            self.pos += 1;
        }
        // Python 2 era headers wrote long integers as `3L`.
        if matches!(self.peek(), Some('L') | Some('l')) {
            self.pos += 1;
        }
        Ok(Literal::Int(n))
    }

    fn sequence(&mut self, close: char, depth: usize) -> Result<Vec<Literal>, String> {
        self.bump(); // opening bracket
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.bump();
                return Ok(items);
            }
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match self.bump() {
                Some(',') => {}
                Some(c) if c == close => return Ok(items),
                Some(c) => return Err(format!("expected ',' or '{close}' but found '{c}'")),
                None => return Err(format!("expected ',' or '{close}' but the header ended")),
            }
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Literal, String> {
        self.bump(); // '{'
        let mut entries = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some('}') {
                self.bump();
                return Ok(Literal::Dict(entries));
            }
            let key = self.value(depth + 1)?;
            self.expect(':')?;
            let value = self.value(depth + 1)?;
            entries.push((key, value));
            self.skip_ws();
            match self.bump() {
                Some(',') => {}
                Some('}') => return Ok(Literal::Dict(entries)),
                Some(c) => return Err(format!("expected ',' or '}}' but found '{c}'")),
                None => return Err("expected ',' or '}' but the header ended".into()),
            }
        }
    }
}

/// Element types that can be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    Bool,
    U8,
    I8,
    I16,
    I32,
    I64,
    U16,
    U32,
    U64,
    F32,
    F64,
    /// UTF-32LE fixed width, in characters.
    Unicode(usize),
    /// Byte strings (`|S<n>`), in bytes.
    ByteStr(usize),
}

impl Dtype {
    fn itemsize(self) -> usize {
        match self {
            Dtype::Bool | Dtype::U8 | Dtype::I8 => 1,
            Dtype::I16 | Dtype::U16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
            // width * 4 is checked in parse_dtype
            Dtype::Unicode(chars) => chars.saturating_mul(4),
            Dtype::ByteStr(n) => n,
        }
    }
}

fn parse_dtype(ctx: Ctx<'_>, descr: &str) -> Result<Dtype, NpzError> {
    let (order, rest) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, descr.get(1..).unwrap_or_default()),
        _ => ('=', descr),
    };
    let mut chars = rest.chars();
    let kind = chars.next().ok_or_else(|| ctx.unsupported(descr))?;
    let width = chars.as_str();
    if kind == 'O' {
        return Err(NpzError::Pickled {
            array: ctx.0.to_string(),
            dtype: descr.to_string(),
        });
    }
    let size: Option<usize> = if !width.is_empty() && width.bytes().all(|b| b.is_ascii_digit()) {
        width.parse().ok()
    } else {
        None
    };
    let dtype = match (kind, size) {
        ('b', Some(1)) => Dtype::Bool,
        ('u', Some(1)) => Dtype::U8,
        ('i', Some(1)) => Dtype::I8,
        ('i', Some(2)) => Dtype::I16,
        ('i', Some(4)) => Dtype::I32,
        ('i', Some(8)) => Dtype::I64,
        ('u', Some(2)) => Dtype::U16,
        ('u', Some(4)) => Dtype::U32,
        ('u', Some(8)) => Dtype::U64,
        ('f', Some(4)) => Dtype::F32,
        ('f', Some(8)) => Dtype::F64,
        ('U', Some(n)) if n > 0 && n.checked_mul(4).is_some() => Dtype::Unicode(n),
        ('S' | 'a', Some(n)) if n > 0 => Dtype::ByteStr(n),
        _ => return Err(ctx.unsupported(descr)),
    };
    let multibyte = dtype.itemsize() > 1 || matches!(dtype, Dtype::Unicode(_));
    if order == '>' && multibyte {
        return Err(NpzError::BigEndian {
            array: ctx.0.to_string(),
            dtype: descr.to_string(),
        });
    }
    Ok(dtype)
}

/// Splits `data` (whose length is a multiple of `N`) into little-endian elements.
fn le_chunks<const N: usize, T>(data: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
    data.chunks_exact(N)
        .map(|c| f(c.try_into().unwrap_or([0u8; N])))
        .collect()
}

/// Decodes the data bytes; `data.len()` is already checked to be `count * itemsize`.
fn decode(ctx: Ctx<'_>, dtype: Dtype, data: &[u8]) -> Result<TensorData, NpzError> {
    Ok(match dtype {
        Dtype::Bool => TensorData::Bool(data.iter().map(|&b| b != 0).collect()),
        Dtype::U8 => TensorData::Uint8(data.to_vec()),
        Dtype::I8 => TensorData::Int8(data.iter().map(|&b| b as i8).collect()),
        Dtype::I16 => TensorData::Int16(le_chunks(data, i16::from_le_bytes)),
        Dtype::I32 => TensorData::Int32(le_chunks(data, i32::from_le_bytes)),
        Dtype::I64 => TensorData::Int64(le_chunks(data, i64::from_le_bytes)),
        Dtype::U16 => TensorData::Int64(le_chunks(data, |b| i64::from(u16::from_le_bytes(b)))),
        Dtype::U32 => TensorData::Int64(le_chunks(data, |b| i64::from(u32::from_le_bytes(b)))),
        Dtype::U64 => {
            let values = le_chunks(data, u64::from_le_bytes);
            let mut out = Vec::with_capacity(values.len());
            for (i, v) in values.into_iter().enumerate() {
                out.push(i64::try_from(v).map_err(|_| {
                    ctx.bad_value(format!(
                        "uint64 element {i} = {v} does not fit in INT64 (max {})",
                        i64::MAX
                    ))
                })?);
            }
            TensorData::Int64(out)
        }
        Dtype::F32 => TensorData::Fp32(le_chunks(data, f32::from_le_bytes)),
        Dtype::F64 => TensorData::Fp64(le_chunks(data, f64::from_le_bytes)),
        Dtype::Unicode(width) => {
            let mut out = Vec::with_capacity(data.len() / dtype.itemsize().max(1));
            for (i, item) in data.chunks_exact(dtype.itemsize().max(1)).enumerate() {
                let mut s = String::with_capacity(width);
                for cp in le_chunks(item, u32::from_le_bytes) {
                    let c = char::from_u32(cp).ok_or_else(|| {
                        ctx.bad_value(format!(
                            "string element {i} holds an invalid code point U+{cp:X}"
                        ))
                    })?;
                    s.push(c);
                }
                let trimmed = s.trim_end_matches('\0').len();
                s.truncate(trimmed);
                out.push(s);
            }
            TensorData::Bytes(out)
        }
        Dtype::ByteStr(n) => {
            let mut out = Vec::with_capacity(data.len() / n.max(1));
            for (i, item) in data.chunks_exact(n.max(1)).enumerate() {
                let end = item.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
                let bytes = item.get(..end).unwrap_or_default();
                let s = std::str::from_utf8(bytes).map_err(|_| {
                    ctx.bad_value(format!("byte-string element {i} is not valid UTF-8"))
                })?;
                out.push(s.to_string());
            }
            TensorData::Bytes(out)
        }
    })
}

/// Reorders column-major (Fortran) elements into row-major (C) order.
fn fortran_to_c(ctx: Ctx<'_>, data: TensorData, shape: &[usize]) -> Result<TensorData, NpzError> {
    fn permute<T: Clone>(ctx: Ctx<'_>, v: Vec<T>, shape: &[usize]) -> Result<Vec<T>, NpzError> {
        // Fortran strides, in elements: 1, d0, d0*d1, ... (bounded by the element count,
        // which was checked not to overflow).
        let mut strides = Vec::with_capacity(shape.len());
        let mut acc = 1usize;
        for &d in shape {
            strides.push(acc);
            acc = acc.saturating_mul(d);
        }
        let mut index = vec![0usize; shape.len()];
        let mut offset = 0usize;
        let mut out = Vec::with_capacity(v.len());
        for _ in 0..v.len() {
            let item = v
                .get(offset)
                .cloned()
                .ok_or_else(|| ctx.bad_value("internal error transposing a Fortran-order array"))?;
            out.push(item);
            // advance the C-order multi-index, last axis fastest
            for ((i, &d), &s) in index.iter_mut().zip(shape).zip(&strides).rev() {
                *i += 1;
                offset = offset.saturating_add(s);
                if *i < d {
                    break;
                }
                offset = offset.saturating_sub(s.saturating_mul(d));
                *i = 0;
            }
        }
        Ok(out)
    }
    Ok(match data {
        TensorData::Bool(v) => TensorData::Bool(permute(ctx, v, shape)?),
        TensorData::Uint8(v) => TensorData::Uint8(permute(ctx, v, shape)?),
        TensorData::Int8(v) => TensorData::Int8(permute(ctx, v, shape)?),
        TensorData::Int16(v) => TensorData::Int16(permute(ctx, v, shape)?),
        TensorData::Int32(v) => TensorData::Int32(permute(ctx, v, shape)?),
        TensorData::Int64(v) => TensorData::Int64(permute(ctx, v, shape)?),
        TensorData::Fp32(v) => TensorData::Fp32(permute(ctx, v, shape)?),
        TensorData::Fp64(v) => TensorData::Fp64(permute(ctx, v, shape)?),
        TensorData::Bytes(v) => TensorData::Bytes(permute(ctx, v, shape)?),
    })
}

/// Python tuple notation, as in the header: `()`, `(3,)`, `(2, 3)`.
fn fmt_shape(shape: &[usize]) -> String {
    match shape {
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

// ---------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------

/// Writes the arrays as a stored (uncompressed) NPZ archive of `.npy` 1.0 files
/// (2.0 only if a header would not fit in 1.0), little-endian, C order.
/// Members are named `<tensor name>.npy`; names must be unique.
pub fn write_npz(arrays: &[NpzArray]) -> Result<Vec<u8>, NpzError> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for tensor in arrays {
        let npy = write_npy(tensor)?;
        let write_err = |e: &dyn std::fmt::Display| NpzError::Write {
            array: tensor.name.clone(),
            detail: e.to_string(),
        };
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .last_modified_time(zip::DateTime::default())
            .large_file(npy.len() as u64 >= u64::from(u32::MAX));
        zip.start_file(format!("{}.npy", tensor.name), options)
            .map_err(|e| write_err(&e))?;
        zip.write_all(&npy).map_err(|e| write_err(&e))?;
    }
    let cursor = zip.finish().map_err(|e| NpzError::Write {
        array: arrays.last().map(|t| t.name.clone()).unwrap_or_default(),
        detail: e.to_string(),
    })?;
    Ok(cursor.into_inner())
}

/// Encodes one tensor as a `.npy` file.
pub fn write_npy(tensor: &NpzArray) -> Result<Vec<u8>, NpzError> {
    let write_err = |detail: String| NpzError::Write {
        array: tensor.name.clone(),
        detail,
    };
    let count = tensor
        .shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| write_err(format!("shape {} overflows", fmt_shape(&tensor.shape))))?;
    if count != tensor.data.len() {
        return Err(write_err(format!(
            "shape {} holds {count} elements but the tensor has {}",
            fmt_shape(&tensor.shape),
            tensor.data.len()
        )));
    }
    let (descr, itemsize) = match &tensor.data {
        TensorData::Bool(_) => ("|b1".to_string(), 1),
        TensorData::Uint8(_) => ("|u1".to_string(), 1),
        TensorData::Int8(_) => ("|i1".to_string(), 1),
        TensorData::Int16(_) => ("<i2".to_string(), 2),
        TensorData::Int32(_) => ("<i4".to_string(), 4),
        TensorData::Int64(_) => ("<i8".to_string(), 8),
        TensorData::Fp32(_) => ("<f4".to_string(), 4),
        TensorData::Fp64(_) => ("<f8".to_string(), 8),
        TensorData::Bytes(v) => {
            let width = v
                .iter()
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
                .max(1);
            let itemsize = width
                .checked_mul(4)
                .ok_or_else(|| write_err("string too long".into()))?;
            (format!("<U{width}"), itemsize)
        }
    };
    let data_len = count
        .checked_mul(itemsize)
        .ok_or_else(|| write_err("data size overflows".into()))?;

    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': {}, }}",
        fmt_shape(&tensor.shape)
    );
    // magic + version + length field + dict + padding + '\n', padded to ALIGN bytes
    let (version, len_field) = if 10 + dict.len() < usize::from(u16::MAX) {
        (1u8, 2usize)
    } else {
        (2u8, 4usize)
    };
    let unpadded = MAGIC.len() + 2 + len_field + dict.len() + 1;
    let total_header = unpadded.div_ceil(ALIGN) * ALIGN;
    let header_len = total_header - MAGIC.len() - 2 - len_field;

    let mut out = Vec::with_capacity(total_header.saturating_add(data_len));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        let len = u16::try_from(header_len).map_err(|_| write_err("header too long".into()))?;
        out.extend_from_slice(&len.to_le_bytes());
    } else {
        let len = u32::try_from(header_len).map_err(|_| write_err("header too long".into()))?;
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total_header - 1, b' ');
    out.push(b'\n');

    match &tensor.data {
        TensorData::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        TensorData::Uint8(v) => out.extend_from_slice(v),
        TensorData::Int8(v) => out.extend(v.iter().map(|&x| x as u8)),
        TensorData::Int16(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::Int32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::Int64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::Fp32(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::Fp64(v) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        TensorData::Bytes(v) => {
            let width = itemsize / 4;
            for s in v {
                let mut n = 0;
                for c in s.chars() {
                    out.extend_from_slice(&u32::from(c).to_le_bytes());
                    n += 1;
                }
                for _ in n..width {
                    out.extend_from_slice(&[0; 4]);
                }
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use infaas_core::DataType;

    const DIGITS_VAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../zoo/digits-val.npz");
    const COMPRESSED: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../zoo/testdata/compressed.npz"
    );

    /// Builds a `.npy` file by hand with the given version, header dict and data.
    fn npy(major: u8, dict: &str, data: &[u8]) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[major, 0]);
        let header = format!("{dict}\n");
        if major == 1 {
            out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        } else {
            out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        }
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    fn header(descr: &str, fortran: bool, shape: &str) -> String {
        let f = if fortran { "True" } else { "False" };
        format!("{{'descr': '{descr}', 'fortran_order': {f}, 'shape': {shape}, }}")
    }

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn t(name: &str, shape: Vec<usize>, data: TensorData) -> Tensor {
        Tensor::new(name, shape, data).unwrap()
    }

    #[test]
    fn reads_digits_validation_set() {
        let bytes = std::fs::read(DIGITS_VAL).unwrap();
        let arrays = read_npz(&bytes).unwrap();
        let names: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["x", "y"]);
        let (x, y) = (&arrays[0], &arrays[1]);
        assert_eq!(x.dtype(), DataType::Fp32);
        assert_eq!(y.dtype(), DataType::Int64);
        assert_eq!(x.shape.len(), 2);
        assert_eq!(x.shape[1], 64);
        assert_eq!(y.shape, vec![x.shape[0]]);
        assert!(x.shape[0] > 100);
        let TensorData::Int64(labels) = &y.data else {
            panic!("y is not int64")
        };
        assert!(labels.iter().all(|l| (0..10).contains(l)));
        let TensorData::Fp32(pixels) = &x.data else {
            panic!("x is not fp32")
        };
        assert!(pixels.iter().all(|p| (0.0..=1.0).contains(p)));
    }

    #[test]
    fn reads_two_input_validation_set() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../zoo/digits-two-input-val.npz"
        );
        let arrays = read_npz(&std::fs::read(path).unwrap()).unwrap();
        let names: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["x.left", "x.right", "y"]);
        let n = arrays[2].shape[0];
        assert_eq!(arrays[0].shape, vec![n, 32]);
        assert_eq!(arrays[1].shape, vec![n, 32]);
        assert_eq!(arrays[1].dtype(), DataType::Fp32);
    }

    #[test]
    fn reads_compressed_fixture_exactly() {
        let bytes = std::fs::read(COMPRESSED).unwrap();
        let arrays = read_npz(&bytes).unwrap();
        let names: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["f64", "i32", "flags", "words", "fortran"]);
        assert_eq!(
            arrays[0],
            t(
                "f64",
                vec![2, 3],
                TensorData::Fp64(vec![1.5, -2.25, 3.0, 4.0, 5.5, -6.125])
            )
        );
        assert_eq!(
            arrays[1],
            t(
                "i32",
                vec![4],
                TensorData::Int32(vec![7, -8, i32::MAX, i32::MIN])
            )
        );
        assert_eq!(
            arrays[2],
            t("flags", vec![3], TensorData::Bool(vec![true, false, true]))
        );
        assert_eq!(
            arrays[3],
            t(
                "words",
                vec![4],
                TensorData::Bytes(vec!["hi".into(), "hello".into(), "".into(), "héllo".into()])
            )
        );
        // stored column-major, read back row-major
        assert_eq!(
            arrays[4],
            t(
                "fortran",
                vec![2, 3],
                TensorData::Fp32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
            )
        );
    }

    #[test]
    fn round_trips_every_dtype() {
        let arrays = vec![
            t(
                "b",
                vec![2, 2],
                TensorData::Bool(vec![true, false, false, true]),
            ),
            t("u8", vec![3], TensorData::Uint8(vec![0, 128, 255])),
            t("i8", vec![3], TensorData::Int8(vec![-128, 0, 127])),
            t(
                "i16",
                vec![3],
                TensorData::Int16(vec![i16::MIN, -1, i16::MAX]),
            ),
            t(
                "i32",
                vec![1, 3],
                TensorData::Int32(vec![i32::MIN, 0, i32::MAX]),
            ),
            t(
                "i64",
                vec![3],
                TensorData::Int64(vec![i64::MIN, 42, i64::MAX]),
            ),
            t(
                "f32",
                vec![2, 1, 2],
                TensorData::Fp32(vec![1.5, -0.0, f32::MAX, f32::INFINITY]),
            ),
            t(
                "f64",
                vec![2],
                TensorData::Fp64(vec![std::f64::consts::PI, -1e300]),
            ),
            t(
                "labels",
                vec![3],
                TensorData::Bytes(vec!["cat".into(), "".into(), "日本語 ok".into()]),
            ),
            t(
                "empty_strings",
                vec![2],
                TensorData::Bytes(vec!["".into(), "".into()]),
            ),
            t("scalar", vec![], TensorData::Int64(vec![7])),
            t("zero_rows", vec![0, 64], TensorData::Fp32(vec![])),
            t("x.left", vec![1, 2], TensorData::Fp32(vec![0.25, 0.75])),
        ];
        let bytes = write_npz(&arrays).unwrap();
        let back = read_npz(&bytes).unwrap();
        assert_eq!(back, arrays);
        // deterministic output
        assert_eq!(write_npz(&arrays).unwrap(), bytes);
        // NaN survives bit-exactly
        let nan = t("nan", vec![1], TensorData::Fp32(vec![f32::NAN]));
        let back = read_npz(&write_npz(&[nan]).unwrap()).unwrap();
        let TensorData::Fp32(v) = &back[0].data else {
            panic!()
        };
        assert!(v[0].is_nan());
    }

    #[test]
    fn written_npy_is_aligned_version_1() {
        let npy = write_npy(&t("x", vec![2, 3], TensorData::Fp32(vec![0.0; 6]))).unwrap();
        assert_eq!(&npy[..8], b"\x93NUMPY\x01\x00");
        let header_len = u16::from_le_bytes([npy[8], npy[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        assert_eq!(npy[10 + header_len - 1], b'\n');
        let text = std::str::from_utf8(&npy[10..10 + header_len]).unwrap();
        assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
        assert_eq!(npy.len(), 10 + header_len + 24);
    }

    #[test]
    fn write_rejects_inconsistent_tensor() {
        let bad = Tensor {
            name: "x".into(),
            shape: vec![2, 2],
            data: TensorData::Fp32(vec![1.0]),
        };
        let err = write_npz(&[bad]).unwrap_err();
        assert!(err.to_string().contains("array 'x'"), "{err}");
    }

    #[test]
    fn reads_versions_2_and_3_and_scalars() {
        let data = f32_bytes(&[1.0, 2.0]);
        for major in [1, 2, 3] {
            let a = read_npy("v", &npy(major, &header("<f4", false, "(2,)"), &data)).unwrap();
            assert_eq!(a, t("v", vec![2], TensorData::Fp32(vec![1.0, 2.0])));
        }
        let s = read_npy(
            "s",
            &npy(1, &header("<f8", false, "()"), &2.5f64.to_le_bytes()),
        )
        .unwrap();
        assert_eq!(s, t("s", vec![], TensorData::Fp64(vec![2.5])));
        // key order and quoting do not matter; Python 2 long integers are accepted
        let odd = "{\"shape\": (2L,), \"fortran_order\": False, \"descr\": \"<f4\"}";
        let a = read_npy("o", &npy(1, odd, &data)).unwrap();
        assert_eq!(a.shape, vec![2]);
        // a version 3.0 header is UTF-8
        let a = read_npy("u", &npy(3, &header("<f4", false, "(2,)"), &data)).unwrap();
        assert_eq!(a.dtype(), DataType::Fp32);
    }

    #[test]
    fn converts_unsigned_to_int64() {
        let a = read_npy(
            "a",
            &npy(1, &header("<u2", false, "(2,)"), &[1, 0, 255, 255]),
        )
        .unwrap();
        assert_eq!(a.data, TensorData::Int64(vec![1, 65535]));
        let bytes: Vec<u8> = [7u32, u32::MAX]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let a = read_npy("a", &npy(1, &header("<u4", false, "(2,)"), &bytes)).unwrap();
        assert_eq!(a.data, TensorData::Int64(vec![7, u32::MAX as i64]));
        let bytes: Vec<u8> = [5u64, i64::MAX as u64]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let a = read_npy("a", &npy(1, &header("<u8", false, "(2,)"), &bytes)).unwrap();
        assert_eq!(a.data, TensorData::Int64(vec![5, i64::MAX]));
        let bytes = u64::MAX.to_le_bytes();
        let err = read_npy("big", &npy(1, &header("<u8", false, "(1,)"), &bytes)).unwrap_err();
        assert!(matches!(err, NpzError::BadValue { .. }), "{err}");
        assert!(err.to_string().contains("array 'big'"), "{err}");
    }

    #[test]
    fn reads_byte_strings() {
        let a = read_npy("s", &npy(1, &header("|S3", false, "(2,)"), b"ab\0xyz")).unwrap();
        assert_eq!(a.data, TensorData::Bytes(vec!["ab".into(), "xyz".into()]));
    }

    #[test]
    fn transposes_fortran_order_3d() {
        // shape (2, 3, 4), column-major: C element (i, j, k) sits at i + 2j + 6k
        let fdata: Vec<i64> = (0..24).collect();
        let bytes: Vec<u8> = fdata.iter().flat_map(|x| x.to_le_bytes()).collect();
        let a = read_npy("f", &npy(1, &header("<i8", true, "(2, 3, 4)"), &bytes)).unwrap();
        let mut expected = Vec::new();
        for i in 0..2 {
            for j in 0..3 {
                for k in 0..4 {
                    expected.push(i + 2 * j + 6 * k);
                }
            }
        }
        assert_eq!(a.shape, vec![2, 3, 4]);
        assert_eq!(a.data, TensorData::Int64(expected));
        // 1-d and zero-sized Fortran arrays are unchanged
        let a = read_npy("f", &npy(1, &header("|u1", true, "(3,)"), &[1, 2, 3])).unwrap();
        assert_eq!(a.data, TensorData::Uint8(vec![1, 2, 3]));
        let a = read_npy("f", &npy(1, &header("|u1", true, "(0, 3)"), &[])).unwrap();
        assert_eq!(a.shape, vec![0, 3]);
    }

    fn err_of(name: &str, bytes: &[u8]) -> String {
        let err = read_npy(name, bytes).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&format!("array '{name}'")), "{msg}");
        msg
    }

    #[test]
    fn rejects_non_zip() {
        let err = read_npz(b"hello, world").unwrap_err();
        assert!(matches!(err, NpzError::NotZip(_)), "{err}");
        let err = read_npz(b"").unwrap_err();
        assert!(matches!(err, NpzError::NotZip(_)), "{err}");
        // a bare .npy gets a hint
        let bare = npy(1, &header("<f4", false, "(1,)"), &f32_bytes(&[1.0]));
        let err = read_npz(&bare).unwrap_err();
        assert!(err.to_string().contains("np.savez"), "{err}");
    }

    #[test]
    fn rejects_truncated_npy() {
        let full = npy(1, &header("<f4", false, "(2, 3)"), &f32_bytes(&[0.0; 6]));
        let msg = err_of("x", &full[..full.len() - 1]);
        assert!(
            msg.contains("truncated") && msg.contains("24 bytes"),
            "{msg}"
        );
        let msg = err_of("x", &full[..20]);
        assert!(msg.contains("truncated"), "{msg}");
        let msg = err_of("x", &full[..4]);
        assert!(msg.contains("truncated"), "{msg}");
        // every prefix is an error, never a panic
        for n in 0..full.len() {
            assert!(read_npy("x", &full[..n]).is_err(), "prefix {n}");
        }
    }

    #[test]
    fn rejects_extra_data() {
        let full = npy(1, &header("<f4", false, "(2,)"), &f32_bytes(&[0.0; 3]));
        let msg = err_of("x", &full);
        assert!(msg.contains("element count mismatch"), "{msg}");
    }

    #[test]
    fn rejects_bad_magic_and_version() {
        let mut bytes = npy(1, &header("<f4", false, "(1,)"), &f32_bytes(&[1.0]));
        bytes[1] = b'X';
        let msg = err_of("m", &bytes);
        assert!(msg.contains("bad magic"), "{msg}");
        let msg = err_of("m", b"PK\x03\x04 not npy at all");
        assert!(msg.contains("bad magic"), "{msg}");
        let mut bytes = npy(1, &header("<f4", false, "(1,)"), &f32_bytes(&[1.0]));
        bytes[6] = 4;
        let msg = err_of("m", &bytes);
        assert!(msg.contains("version 4.0"), "{msg}");
    }

    #[test]
    fn rejects_object_arrays() {
        let msg = err_of("obj", &npy(1, &header("|O", false, "(2,)"), &[0; 16]));
        assert!(
            msg.contains("pickled") && msg.contains("not supported"),
            "{msg}"
        );
    }

    #[test]
    fn rejects_big_endian() {
        let msg = err_of("be", &npy(1, &header(">f4", false, "(1,)"), &[0; 4]));
        assert!(msg.contains("big-endian") && msg.contains(">f4"), "{msg}");
        let msg = err_of("be", &npy(1, &header(">U2", false, "(1,)"), &[0; 8]));
        assert!(msg.contains("big-endian"), "{msg}");
        // single bytes have no byte order
        assert!(read_npy("ok", &npy(1, &header(">u1", false, "(1,)"), &[3])).is_ok());
    }

    #[test]
    fn rejects_unknown_dtypes() {
        for descr in [
            "<c8", "<f2", "|V8", "<M8[ns]", "<U0", "", "<", "<i3", "<f4x",
        ] {
            let msg = err_of("x", &npy(1, &header(descr, false, "(1,)"), &[0; 8]));
            assert!(msg.contains("unsupported dtype"), "{descr}: {msg}");
        }
        let msg = err_of("x", "<c8".as_bytes()).to_string();
        assert!(msg.contains("bad magic"), "{msg}");
        let structured = "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }";
        let msg = err_of("rec", &npy(1, structured, &[0; 4]));
        assert!(msg.contains("structured"), "{msg}");
        let err = read_npy("x", &npy(1, &header("<c8", false, "(1,)"), &[0; 8])).unwrap_err();
        assert_eq!(err.to_string(), "array 'x': unsupported dtype '<c8'");
    }

    #[test]
    fn rejects_huge_shapes_without_allocating() {
        let msg = err_of(
            "h",
            &npy(1, &header("<f8", false, "(4294967296, 4294967296)"), &[]),
        );
        assert!(msg.contains("too large"), "{msg}");
        let msg = err_of(
            "h",
            &npy(1, &header("<f8", false, "(2305843009213693952,)"), &[]),
        );
        assert!(msg.contains("too large"), "{msg}");
        let msg = err_of(
            "h",
            &npy(1, &header("<f8", false, "(99999999999999999999999,)"), &[]),
        );
        assert!(msg.contains("header") || msg.contains("too large"), "{msg}");
        // fits in usize, but the bytes are not there
        let msg = err_of(
            "h",
            &npy(1, &header("<f4", false, "(1000000000000,)"), &[0; 8]),
        );
        assert!(msg.contains("truncated"), "{msg}");
        let msg = err_of(
            "h",
            &npy(1, &header("<U4611686018427387904", false, "(1,)"), &[]),
        );
        assert!(msg.contains("unsupported dtype"), "{msg}");
    }

    #[test]
    fn rejects_malformed_headers() {
        for dict in [
            "",
            "{",
            "[1, 2]",
            "{'descr': '<f4', 'shape': (1,)}",
            "{'descr': '<f4', 'fortran_order': 1, 'shape': (1,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': ('a',)}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} trailing",
            "{'descr': '<f4 'fortran_order': False, 'shape': (1,)}",
            "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}",
            &"(".repeat(10_000),
        ] {
            let err = read_npy("h", &npy(1, dict, &[0; 4])).unwrap_err();
            assert!(err.to_string().contains("array 'h'"), "{dict}: {err}");
        }
        // invalid UTF-8 in a version 3 header
        let mut bytes = npy(3, &header("<f4", false, "(1,)"), &[0; 4]);
        bytes[14] = 0xff;
        assert!(read_npy("h", &bytes).is_err());
    }

    #[test]
    fn rejects_invalid_strings() {
        let bytes = 0xD800u32.to_le_bytes();
        let msg = err_of("s", &npy(1, &header("<U1", false, "(1,)"), &bytes));
        assert!(msg.contains("invalid code point"), "{msg}");
        let msg = err_of("s", &npy(1, &header("|S2", false, "(1,)"), &[0xff, 0xfe]));
        assert!(msg.contains("UTF-8"), "{msg}");
    }

    #[test]
    fn rejects_corrupt_archives_without_panicking() {
        let arrays = vec![
            t(
                "x",
                vec![4, 4],
                TensorData::Fp32((0..16).map(|i| i as f32).collect()),
            ),
            t("y", vec![4], TensorData::Int64(vec![0, 1, 2, 3])),
        ];
        let good = write_npz(&arrays).unwrap();
        // every truncation fails cleanly
        for n in 0..good.len() {
            assert!(read_npz(&good[..n]).is_err(), "prefix {n}");
        }
        // deterministic pseudo-random byte flips never panic
        let compressed = std::fs::read(COMPRESSED).unwrap();
        for base in [&good, &compressed] {
            let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
            for _ in 0..2000 {
                let mut bytes = base.clone();
                for _ in 0..3 {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let pos = (state >> 33) as usize % bytes.len();
                    bytes[pos] ^= (state >> 17) as u8 | 1;
                }
                let _ = read_npz(&bytes);
            }
        }
    }

    #[test]
    fn rejects_a_corrupt_member() {
        // a stored zip whose member is not an .npy file
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        zip.start_file("labels.npy", options).unwrap();
        zip.write_all(b"not numpy").unwrap();
        let bytes = zip.finish().unwrap().into_inner();
        let err = read_npz(&bytes).unwrap_err();
        assert_eq!(
            err,
            NpzError::BadMagic {
                array: "labels".into()
            }
        );
    }

    #[test]
    fn enforces_the_uncompressed_limit() {
        let arrays = vec![t("x", vec![1000], TensorData::Fp64(vec![0.0; 1000]))];
        let bytes = write_npz(&arrays).unwrap();
        let err = read_npz_with_limit(&bytes, 4000).unwrap_err();
        assert!(matches!(err, NpzError::TooLarge { .. }), "{err}");
        assert!(read_npz_with_limit(&bytes, 1 << 20).is_ok());
    }
}
