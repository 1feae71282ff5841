//! `decode_v2_request` must never panic: 2,000 seeded random mutations of a valid
//! binary request (and of its header length) must each decode or fail cleanly.

// clippy.toml allows unwrap inside #[test] functions only, not in these helpers.
#![allow(clippy::unwrap_used)]

use infaas_protocol::decode_v2_request;
use serde_json::{json, Value};

/// SplitMix64: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A valid request with FP32, BYTES, BOOL and INT64 inputs, binary and JSON.
fn seed_request() -> (Vec<u8>, usize) {
    let mut raw = Vec::new();
    for i in 0..6 {
        raw.extend_from_slice(&(i as f32 * 0.5).to_le_bytes());
    }
    let bytes_start = raw.len();
    for s in ["ab", "", "xyz"] {
        raw.extend_from_slice(&(s.len() as u32).to_le_bytes());
        raw.extend_from_slice(s.as_bytes());
    }
    let bytes_len = raw.len() - bytes_start;
    raw.extend_from_slice(&[1, 0, 1]);
    let header = json!({
        "id": "fuzz",
        "parameters": {"binary_data_output": true},
        "inputs": [
            {"name": "f", "datatype": "FP32", "shape": [2, 3], "parameters": {"binary_data_size": 24}},
            {"name": "s", "datatype": "BYTES", "shape": [3], "parameters": {"binary_data_size": bytes_len}},
            {"name": "b", "datatype": "BOOL", "shape": [3], "parameters": {"binary_data_size": 3}},
            {"name": "i", "datatype": "INT64", "shape": [2, 2], "data": [[1, -2], [3, 4]]}
        ],
        "outputs": [{"name": "out", "parameters": {"binary_data": true}}]
    });
    let mut body = serde_json::to_vec(&header).unwrap();
    let h = body.len();
    body.extend_from_slice(&raw);
    (body, h)
}

/// Bytes that tend to matter to the parser: JSON syntax, digits, signs, extremes.
const INTERESTING: &[u8] = b"{}[]\",:-0123456789eE.tfn\\ \x00\x7f\x80\xff";

/// Numbers that stress sizes and shapes when they replace a digit of the header.
const NUMBERS: &[&str] = &[
    "9999999999999999999999",
    "-1",
    "18446744073709551615",
    "4294967295",
    "0",
    "1e400",
    "2.5",
];

/// One random edit of `part` (the JSON header or the binary data).
fn edit(rng: &mut Rng, part: &mut Vec<u8>) {
    match rng.below(7) {
        0 if !part.is_empty() => {
            let i = rng.below(part.len());
            part[i] ^= 1 << rng.below(8);
        }
        1 if !part.is_empty() => {
            let i = rng.below(part.len());
            part[i] = INTERESTING[rng.below(INTERESTING.len())];
        }
        2 => {
            let i = rng.below(part.len() + 1);
            part.insert(i, INTERESTING[rng.below(INTERESTING.len())]);
        }
        3 if !part.is_empty() => {
            let i = rng.below(part.len());
            part.remove(i);
        }
        4 => part.truncate(rng.below(part.len() + 1)),
        5 => {
            // Replace a digit (a shape, a size, a value) with a troublesome number.
            let from = rng.below(part.len() + 1);
            if let Some(d) = part.iter().skip(from).position(u8::is_ascii_digit) {
                let at = from + d;
                part.splice(at..at + 1, NUMBERS[rng.below(NUMBERS.len())].bytes());
            }
        }
        _ => {
            // Copy a random slice elsewhere (duplicates inputs, keys, elements).
            let (i, j) = (rng.below(part.len() + 1), rng.below(part.len() + 1));
            let chunk = part[i.min(j)..i.max(j)].to_vec();
            let at = rng.below(part.len() + 1);
            part.splice(at..at, chunk);
        }
    }
}

/// Replaces or removes one random node of the JSON header: keeps the JSON valid so
/// the edits reach shapes, sizes, datatypes and element checks.
fn edit_json(rng: &mut Rng, header: &[u8]) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(header) else {
        return header.to_vec();
    };
    let replacements = [
        json!(-1),
        json!(0),
        json!(3),
        json!(u64::MAX),
        json!(1e300),
        json!(2.5),
        json!("FP16"),
        json!("BYTES"),
        json!(""),
        json!(null),
        json!(true),
        json!([]),
        json!({}),
        json!([1, 2]),
        json!([[1], [2, 3]]),
    ];
    let replacement = replacements[rng.below(replacements.len())].clone();
    let mut node = &mut v;
    loop {
        let children = match &*node {
            Value::Array(a) => a.len(),
            Value::Object(o) => o.len(),
            _ => 0,
        };
        if children == 0 || rng.below(4) == 0 {
            *node = replacement;
            break;
        }
        let i = rng.below(children);
        if rng.below(8) == 0 {
            // Remove the child instead of descending.
            match node {
                Value::Array(a) => drop(a.remove(i)),
                Value::Object(o) => {
                    let key = o.keys().nth(i).cloned().unwrap_or_default();
                    o.remove(&key);
                }
                _ => {}
            }
            break;
        }
        node = match node {
            Value::Array(a) => &mut a[i],
            Value::Object(o) => o.values_mut().nth(i).unwrap(),
            _ => unreachable!(),
        };
    }
    serde_json::to_vec(&v).unwrap()
}

/// A mutated body and header length: edits to the header or the binary data with
/// the header length kept consistent (as a client computes it), and sometimes a
/// wrong or missing header length.
fn mutate(rng: &mut Rng, header: &[u8], binary: &[u8]) -> (Vec<u8>, Option<usize>) {
    let (mut header, mut binary) = (header.to_vec(), binary.to_vec());
    for _ in 0..1 + rng.below(3) {
        match rng.below(3) {
            0 => edit(rng, &mut binary),
            1 => edit(rng, &mut header),
            _ => header = edit_json(rng, &header),
        }
    }
    let mut h = Some(header.len());
    match rng.below(20) {
        0 => h = None,
        1 => h = Some(rng.below(header.len() + binary.len() + 16)),
        _ => {}
    }
    header.extend_from_slice(&binary);
    (header, h)
}

#[test]
fn seeded_mutations_never_panic() {
    let (seed_body, seed_h) = seed_request();
    let req = decode_v2_request(&seed_body, Some(seed_h)).unwrap();
    assert_eq!(req.inputs.len(), 4);

    let mut rng = Rng(0x1f2e_3d4c_5b6a_7988);
    let (mut ok, mut failed) = (0, 0);
    let mut kinds = std::collections::BTreeMap::new();
    for _ in 0..2000 {
        let (body, header_length) = mutate(&mut rng, &seed_body[..seed_h], &seed_body[seed_h..]);
        match decode_v2_request(&body, header_length) {
            Ok(_) => ok += 1,
            Err(e) => {
                // The variant, and for tensors the problem: which checks were reached.
                let debug = format!("{e:?}");
                let variant = debug.split([' ', '(']).next().unwrap_or("");
                let problem = debug.split("problem: ").nth(1).unwrap_or("");
                let problem = problem.split([' ', '(', ',']).next().unwrap_or("");
                let kind = format!("{variant}{problem}");
                *kinds.entry(kind).or_insert(0) += 1;
                failed += 1;
            }
        }
    }
    // Both outcomes must occur, or the mutations are not exercising anything.
    assert!(ok > 0 && failed > 0, "ok={ok} failed={failed}");
    println!("mutations: {ok} decoded, {failed} rejected: {kinds:?}");
}
