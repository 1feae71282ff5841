//! Reading and writing NPZ files of realistic sizes: 1,000 images of 3 x 32 x 32 FP32
//! (12 MB) and 10,000 rows of 128 INT64 (10 MB), each written as a stored archive with
//! [`write_npz`] and read back with [`read_npz`]; the image archive is also read as a
//! deflate-compressed archive (`np.savez_compressed`). Medians over rounds.
//!
//! Run: `cargo bench -p infaas-protocol --bench npz`. With `NPZ_BENCH_ONCE=1` each case runs
//! once, and `NPZ_BENCH_CASE=<n>` runs only the n-th case (from 0), to count instructions:
//! `NPZ_BENCH_ONCE=1 NPZ_BENCH_CASE=1 valgrind --tool=callgrind --toggle-collect='*npz_case*'
//! <bench binary>`.

use std::io::{Cursor, Write};
use std::time::{Duration, Instant};

use infaas_core::{Tensor, TensorData};
use infaas_protocol::npz::{read_npz, write_npz};

/// Pixels in [0, 1) from a linear congruential generator, so deflate finds little to remove.
fn images() -> Tensor {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let data = (0..1000 * 3 * 32 * 32)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect();
    Tensor::new("x", vec![1000, 3, 32, 32], TensorData::Fp32(data)).expect("a tensor")
}

fn rows() -> Tensor {
    let data = (0..10_000 * 128).map(|i| (i * 7919) % 100_003).collect();
    Tensor::new("y", vec![10_000, 128], TensorData::Int64(data)).expect("a tensor")
}

/// The stored archive's members re-packed with deflate, as `np.savez_compressed` writes.
fn compressed(stored: &[u8]) -> Vec<u8> {
    let mut input = zip::ZipArchive::new(Cursor::new(stored)).expect("a zip");
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for i in 0..input.len() {
        let mut member = input.by_index(i).expect("a member");
        let name = member.name().to_string();
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut member, &mut bytes).expect("read");
        out.start_file(name, options).expect("start");
        out.write_all(&bytes).expect("write");
    }
    out.finish().expect("finish").into_inner()
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort_unstable();
    xs[xs.len() / 2]
}

/// One run of a case; named so that callgrind can count only these.
#[inline(never)]
fn npz_case(f: &dyn Fn()) {
    f();
}

fn time(rounds: usize, f: &dyn Fn()) -> Duration {
    npz_case(f);
    median(
        (0..rounds)
            .map(|_| {
                let t = Instant::now();
                npz_case(f);
                t.elapsed()
            })
            .collect(),
    )
}

/// A case: its label, the archive's size in bytes and one run.
type Case<'a> = (&'static str, usize, Box<dyn Fn() + 'a>);

fn write_case<'a>(label: &'static str, tensor: &'a Tensor, bytes: usize) -> Case<'a> {
    let run = move || {
        std::hint::black_box(write_npz(std::slice::from_ref(tensor)).expect("written"));
    };
    (label, bytes, Box::new(run))
}

fn read_case<'a>(label: &'static str, npz: &'a [u8]) -> Case<'a> {
    let run = move || {
        std::hint::black_box(read_npz(npz).expect("read"));
    };
    (label, npz.len(), Box::new(run))
}

fn main() {
    let once = std::env::var_os("NPZ_BENCH_ONCE").is_some();
    let rounds = if once { 0 } else { 15 };
    let (x, y) = (images(), rows());
    let (x_npz, y_npz) = (
        write_npz(std::slice::from_ref(&x)).expect("written"),
        write_npz(std::slice::from_ref(&y)).expect("written"),
    );
    let x_deflated = compressed(&x_npz);
    println!("{:<44} {:>10} {:>10}", "case", "MB", "median");
    let cases = [
        write_case("write 1,000 x 3x32x32 FP32", &x, x_npz.len()),
        read_case("read 1,000 x 3x32x32 FP32", &x_npz),
        read_case("read 1,000 x 3x32x32 FP32 (deflate)", &x_deflated),
        write_case("write 10,000 x 128 INT64", &y, y_npz.len()),
        read_case("read 10,000 x 128 INT64", &y_npz),
    ];
    let only: Option<usize> = std::env::var("NPZ_BENCH_CASE")
        .ok()
        .and_then(|c| c.parse().ok());
    for (i, (label, bytes, f)) in cases.iter().enumerate() {
        if only.is_some_and(|only| only != i) {
            continue;
        }
        let t = time(rounds, f.as_ref());
        if !once {
            println!(
                "{label:<44} {:>10.1} {:>7.2} ms",
                *bytes as f64 / 1e6,
                t.as_secs_f64() * 1e3
            );
        }
    }
}
