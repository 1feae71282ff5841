//! Shared helpers of the store integration tests.
#![allow(dead_code)] // each test binary uses a different subset

pub use infaas_testing::backends;

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use infaas_store::{open_object_store, ByteStream, Db, ObjectStore, ObjectStoreConfig};
use sha2::{Digest, Sha256};

use infaas_testing::backends::Backends;

/// The database and object store of one test.
pub struct Stores {
    pub db: Db,
    pub objects: Arc<dyn ObjectStore>,
}

pub async fn open(b: &Backends) -> Stores {
    let db = Db::connect(&b.database_url)
        .await
        .unwrap_or_else(|e| panic!("{}: connecting to the database: {e}", b.name));
    let cfg = ObjectStoreConfig::parse(&b.object_store, b.s3_endpoint.clone(), None)
        .unwrap_or_else(|e| panic!("{}: {e}", b.name));
    let objects = open_object_store(&cfg)
        .await
        .unwrap_or_else(|e| panic!("{}: opening the object store: {e}", b.name));
    Stores { db, objects }
}

/// Deterministic pseudo-random bytes of chunk `index` (xorshift seeded by seed and index).
fn chunk_bytes(seed: u64, index: u64, len: usize) -> Bytes {
    let mut x = (seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    Bytes::from(out)
}

/// `total` bytes made lazily one `chunk`-sized piece at a time (never one buffer), and their
/// SHA-256 (computed the same way, chunk by chunk).
pub fn generated_stream(total: usize, chunk: usize, seed: u64) -> (ByteStream, [u8; 32]) {
    let pieces =
        move || (0..total.div_ceil(chunk)).map(move |i| (i as u64, chunk.min(total - i * chunk)));
    let mut hasher = Sha256::new();
    for (i, len) in pieces() {
        hasher.update(chunk_bytes(seed, i, len));
    }
    let stream = futures::stream::iter(pieces()).map(move |(i, len)| Ok(chunk_bytes(seed, i, len)));
    (Box::pin(stream), hasher.finalize().into())
}

/// Reads an object as a stream; returns its size, SHA-256 and largest chunk.
pub async fn stream_digest(objects: &dyn ObjectStore, key: &str) -> (u64, [u8; 32], usize) {
    let mut stream = objects
        .get_stream(key)
        .await
        .unwrap_or_else(|e| panic!("get_stream {key}: {e}"));
    let mut hasher = Sha256::new();
    let (mut size, mut largest) = (0u64, 0usize);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap_or_else(|e| panic!("reading {key}: {e}"));
        size += chunk.len() as u64;
        largest = largest.max(chunk.len());
        hasher.update(&chunk);
    }
    (size, hasher.finalize().into(), largest)
}
