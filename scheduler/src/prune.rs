//! Pruning dominated variants at registration: a generated variant that is slower than
//! another variant of the same model at equal or better accuracy is not kept.
//!
//! Dominance is judged at equal resources only: two variants are compared when they belong
//! to the same model and run on the same hardware with the same intra-op threads and the
//! same max batch, i.e. they differ only in their file (source, ORT-optimised, INT8, FP16).
//! Thread counts and max batches trade cores and queueing for latency, so a variant is never
//! pruned against another setting of them; GPU variants are compared with GPU variants only.
//!
//! Variant `b` dominates variant `a` when
//!
//! 1. `b`'s file is at least as accurate as `a`'s, and
//! 2. `a` is not faster than `b` at any batch size `a` was profiled at: `a` counts as faster
//!    at a batch only when both its mean and its p50 are more than [`SPEED_TOLERANCE`] below
//!    `b`'s there (and `b` must have been profiled at every batch `a` was).
//!
//! When `a` and `b` dominate each other (equal accuracy, latencies within the tolerance both
//! ways) only one of them may go: the one later in [`keep_order`] (the ORT-optimised file,
//! then the source, then FP16, then INT8).
//!
//! Why mean and p50: the mean is what a variant's throughput and cost per query are computed
//! from; the p50 guards it against a few slow runs, which inflate one variant's mean and
//! would otherwise make a dominated file look faster at one of its seven batch sizes and keep
//! it. Both have to agree before a variant counts as faster. (p99 is not used: with the
//! profiler's 30 runs per batch it is about the single slowest run.)
//!
//! Why 5 %: it absorbs the jitter of two profiles of equal work, so that two files of equal
//! speed are not both kept, one for each batch size the noise favoured; a real speed-up
//! (INT8 kernels on large MatMuls: up to about 3x on the zoo's large MLP) is far larger. A
//! busy machine can slow a whole batch size's window by much more than 5 % (up to about 60 %
//! measured here for a 0.1 ms model on 2 cores under other builds): files closer than that
//! in speed may then be kept or pruned differently from one registration to the next, which
//! is harmless as they are near-equal, while clearly different files (the INT8 file of the
//! integration test, 2-5x slower) are decided the same way every time.
//!
//! The pruned variants are those dominated by a variant that nothing dominates: a variant
//! whose only dominators are themselves dominated (possible, with a tolerance, only through
//! a cycle of near-ties of equal accuracy) is kept, so a pruned variant always names a
//! dominator that is kept, and every (model, hardware, threads, max batch) group keeps at
//! least one variant. Variants not profiled yet, without an accuracy or without latency
//! points are neither pruned nor used to prune.

use std::collections::BTreeMap;

use infaas_core::{FileKind, LatencyPoint, Variant};

/// How much faster (relative, on both mean and p50) a variant must be at some batch size not
/// to count as "not faster" than another. See the module documentation.
pub const SPEED_TOLERANCE: f64 = 0.05;

/// A variant that is not kept, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Pruned {
    pub variant_id: String,
    /// The variant's name.
    pub name: String,
    pub file_id: String,
    pub file_kind: FileKind,
    pub accuracy: f64,
    /// The kept variant that dominates it (same hardware, threads and max batch).
    pub dominated_by_id: String,
    pub dominated_by: String,
    pub dominated_by_kind: FileKind,
    pub dominated_by_accuracy: f64,
    /// Equal accuracy and latencies within the tolerance both ways: [`keep_order`] decided
    /// which of the two stays.
    pub tie: bool,
    /// E.g. `accuracy 0.379 <= 1.000 of opt, not faster at any batch`.
    pub reason: String,
}

/// Which file's variant stays of two that tie (equal accuracy, speeds within the tolerance):
/// the lower rank. The ORT-optimised file first (the source's graph with the optimisations
/// applied: it loads faster), then the source, then the reduced precisions, which bring no
/// measured gain in that case (FP16 before INT8).
pub fn keep_order(kind: FileKind) -> u8 {
    match kind {
        FileKind::Optimized => 0,
        FileKind::Source => 1,
        FileKind::Fp16 => 2,
        FileKind::Int8 => 3,
    }
}

/// A variant that takes part: profiled, with an accuracy and latency points.
fn candidate(v: &Variant) -> Option<f64> {
    if v.status != "profiled" || v.latency.is_empty() {
        return None;
    }
    v.accuracy.filter(|a| a.is_finite())
}

fn point(v: &Variant, batch: usize) -> Option<&LatencyPoint> {
    v.latency.iter().find(|l| l.batch == batch)
}

/// Whether `b` was profiled at every batch size `a` was.
fn covers(b: &Variant, a: &Variant) -> bool {
    a.latency.iter().all(|l| point(b, l.batch).is_some())
}

/// Whether `a` is faster than `b` at some batch size both were profiled at: mean and p50
/// both more than [`SPEED_TOLERANCE`] below `b`'s.
fn faster(a: &Variant, b: &Variant) -> bool {
    let factor = 1.0 - SPEED_TOLERANCE;
    a.latency.iter().any(|la| {
        point(b, la.batch)
            .is_some_and(|lb| la.mean_ms < factor * lb.mean_ms && la.p50_ms < factor * lb.p50_ms)
    })
}

/// One variant of a group with its accuracy.
#[derive(Clone, Copy)]
struct Cand<'a> {
    v: &'a Variant,
    acc: f64,
}

/// Whether `b` dominates `a` (both of one group); with the tie-break, never both ways.
fn dominates(b: Cand<'_>, a: Cand<'_>) -> bool {
    if b.acc < a.acc || !covers(b.v, a.v) || faster(a.v, b.v) {
        return false;
    }
    !ties(a, b) || rank(b) < rank(a)
}

/// Whether `a` would dominate `b` too, were it not for the tie-break: equal accuracy, and `b`
/// not faster than `a` at any batch either.
fn ties(a: Cand<'_>, b: Cand<'_>) -> bool {
    a.acc == b.acc && covers(a.v, b.v) && !faster(b.v, a.v)
}

fn rank(c: Cand<'_>) -> (u8, &str) {
    (keep_order(c.v.file_kind), c.v.name.as_str())
}

fn reason(a: Cand<'_>, b: Cand<'_>, tie: bool) -> String {
    let by = b.v.file_kind.name_token();
    let mut r = format!(
        "accuracy {:.3} <= {:.3} of {by}, not faster at any batch",
        a.acc, b.acc
    );
    if tie {
        r.push_str(&format!(
            ", tied within {:.0}%: {by} kept",
            SPEED_TOLERANCE * 100.0
        ));
    }
    r
}

/// The variants of `variants` that are not kept, with the variant that dominates each and
/// why (see the module documentation), in the order of `variants`.
pub fn dominated(variants: &[Variant]) -> Vec<Pruned> {
    let mut groups: BTreeMap<(&str, &str, usize, usize), Vec<Cand<'_>>> = BTreeMap::new();
    for v in variants {
        if let Some(acc) = candidate(v) {
            groups
                .entry((
                    v.model_id.as_str(),
                    v.hardware.as_str(),
                    v.threads,
                    v.max_batch,
                ))
                .or_default()
                .push(Cand { v, acc });
        }
    }
    let mut by_id: BTreeMap<&str, Pruned> = BTreeMap::new();
    for group in groups.values() {
        let undominated: Vec<Cand<'_>> = group
            .iter()
            .copied()
            .filter(|&a| !group.iter().any(|&b| dominates(b, a)))
            .collect();
        for &a in group {
            // The best kept dominator: the most accurate, then the first in the keep order.
            let best = undominated
                .iter()
                .copied()
                .filter(|&b| dominates(b, a))
                .min_by(|x, y| {
                    y.acc
                        .total_cmp(&x.acc)
                        .then_with(|| rank(*x).cmp(&rank(*y)))
                });
            let Some(b) = best else { continue };
            let tie = ties(a, b);
            by_id.insert(
                a.v.id.as_str(),
                Pruned {
                    variant_id: a.v.id.clone(),
                    name: a.v.name.clone(),
                    file_id: a.v.file_id.clone(),
                    file_kind: a.v.file_kind,
                    accuracy: a.acc,
                    dominated_by_id: b.v.id.clone(),
                    dominated_by: b.v.name.clone(),
                    dominated_by_kind: b.v.file_kind,
                    dominated_by_accuracy: b.acc,
                    tie,
                    reason: reason(a, b, tie),
                },
            );
        }
    }
    variants
        .iter()
        .filter_map(|v| by_id.remove(v.id.as_str()))
        .collect()
}

/// The ids of the files none of whose variants is kept (every variant of the file is in
/// `pruned`): their stored files can go.
pub fn files_without_variants(variants: &[Variant], pruned: &[Pruned]) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for v in variants {
        if !files.contains(&v.file_id) {
            files.push(v.file_id.clone());
        }
    }
    files.retain(|f| {
        variants
            .iter()
            .filter(|v| &v.file_id == f)
            .all(|v| pruned.iter().any(|p| p.variant_id == v.id))
    });
    files
}

/// `{hardware}.t{threads}.b{max_batch}`: a variant's setting.
fn setting(v: &Variant) -> String {
    format!("{}.t{}.b{}", v.hardware.as_str(), v.threads, v.max_batch)
}

/// The registration report's account of `pruned` (from [`dominated`] over `variants`), or
/// `None` when nothing was pruned; one part per file, joined by `"; "`:
///
/// * none of the file's variants kept: `pruned int8 (REASON)`, with the reason most of them
///   share, then any other reason with the settings it applies to:
///   `pruned int8 (REASON; at cpu.t2.b1, cpu.t2.b2: REASON2)`;
/// * some kept: `pruned fp32 at cpu.t1.b1, cpu.t1.b2 (REASON)`, one part per reason.
pub fn report(variants: &[Variant], pruned: &[Pruned]) -> Option<String> {
    if pruned.is_empty() {
        return None;
    }
    let whole = files_without_variants(variants, pruned);
    // Files in the order a model gets them.
    let mut files: Vec<(FileKind, &str)> = Vec::new();
    for p in pruned {
        if !files.iter().any(|(_, f)| *f == p.file_id) {
            files.push((p.file_kind, p.file_id.as_str()));
        }
    }
    files.sort_by_key(|(k, _)| file_order(*k));
    let mut parts = Vec::new();
    for (kind, file) in files {
        // The file's reasons, most variants first (then in order of appearance), each with
        // the settings of its variants.
        let mut reasons: Vec<(&str, Vec<String>)> = Vec::new();
        for p in pruned.iter().filter(|p| p.file_id == file) {
            let Some(v) = variants.iter().find(|v| v.id == p.variant_id) else {
                continue;
            };
            match reasons.iter_mut().find(|(r, _)| *r == p.reason) {
                Some((_, settings)) => settings.push(setting(v)),
                None => reasons.push((p.reason.as_str(), vec![setting(v)])),
            }
        }
        reasons.sort_by_key(|(_, settings)| std::cmp::Reverse(settings.len()));
        let token = kind.name_token();
        if whole.iter().any(|f| f == file) {
            let mut why = Vec::new();
            for (i, (r, settings)) in reasons.iter().enumerate() {
                why.push(if i == 0 {
                    r.to_string()
                } else {
                    format!("at {}: {r}", settings.join(", "))
                });
            }
            parts.push(format!("pruned {token} ({})", why.join("; ")));
        } else {
            for (r, settings) in reasons {
                parts.push(format!("pruned {token} at {} ({r})", settings.join(", ")));
            }
        }
    }
    Some(parts.join("; "))
}

/// Files in the order a model gets them.
fn file_order(kind: FileKind) -> u8 {
    match kind {
        FileKind::Source => 0,
        FileKind::Optimized => 1,
        FileKind::Int8 => 2,
        FileKind::Fp16 => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infaas_core::HardwareKind;

    const BATCHES: [usize; 4] = [1, 2, 4, 8];

    /// A profiled variant of model `m` whose latency at batch `b` is `ms(b)` (mean and p50
    /// alike, p99 twice that).
    fn variant(
        kind: FileKind,
        hw: HardwareKind,
        threads: usize,
        max_batch: usize,
        accuracy: f64,
        ms: impl Fn(usize) -> f64,
    ) -> Variant {
        let name = Variant::make_name("m", kind, hw, threads, max_batch);
        Variant {
            id: format!("id-{name}"),
            model_id: "model".into(),
            file_id: format!("file-{}", kind.as_str()),
            name,
            file_kind: kind,
            hardware: hw,
            threads,
            max_batch,
            status: "profiled".into(),
            accuracy: Some(accuracy),
            load_ms: Some(10.0),
            memory_bytes: Some(1 << 20),
            latency: BATCHES
                .iter()
                .filter(|&&b| b <= max_batch)
                .map(|&b| LatencyPoint {
                    batch: b,
                    p50_ms: ms(b),
                    p99_ms: 2.0 * ms(b),
                    mean_ms: ms(b),
                    throughput_per_s: b as f64 / ms(b) * 1e3,
                })
                .collect(),
        }
    }

    fn cpu(kind: FileKind, threads: usize, accuracy: f64, ms: impl Fn(usize) -> f64) -> Variant {
        variant(kind, HardwareKind::Cpu, threads, 8, accuracy, ms)
    }

    fn names(p: &[Pruned]) -> Vec<&str> {
        p.iter().map(|p| p.name.as_str()).collect()
    }

    /// The linear latency of a file: `base` + 0.1 ms a row.
    fn lin(base: f64) -> impl Fn(usize) -> f64 {
        move |b| base + 0.1 * b as f64
    }

    #[test]
    fn dominated_int8_is_pruned_with_its_reason() {
        // INT8 as fast as the optimised FP32 file (2% faster: noise) but far less accurate.
        let vs = vec![
            cpu(FileKind::Optimized, 1, 1.0, lin(1.0)),
            cpu(FileKind::Int8, 1, 0.379, |b| lin(1.0)(b) * 0.98),
        ];
        let p = dominated(&vs);
        assert_eq!(names(&p), vec!["m.int8.cpu.t1.b8"]);
        assert_eq!(p[0].dominated_by, "m.opt.cpu.t1.b8");
        assert_eq!(p[0].dominated_by_kind, FileKind::Optimized);
        assert_eq!(p[0].accuracy, 0.379);
        assert_eq!(p[0].dominated_by_accuracy, 1.0);
        assert!(!p[0].tie);
        assert_eq!(
            p[0].reason,
            "accuracy 0.379 <= 1.000 of opt, not faster at any batch"
        );
        assert_eq!(files_without_variants(&vs, &p), vec!["file-int8"]);
        assert_eq!(
            report(&vs, &p).as_deref(),
            Some("pruned int8 (accuracy 0.379 <= 1.000 of opt, not faster at any batch)")
        );
    }

    #[test]
    fn faster_but_less_accurate_int8_is_kept() {
        // Faster by 30% at the largest batch only: a real trade of accuracy for speed.
        let vs = vec![
            cpu(FileKind::Optimized, 1, 0.98, lin(1.0)),
            cpu(FileKind::Int8, 1, 0.97, |b| {
                lin(1.0)(b) * if b == 8 { 0.7 } else { 1.2 }
            }),
        ];
        assert_eq!(dominated(&vs), Vec::new());
        assert_eq!(report(&vs, &[]), None);
    }

    #[test]
    fn faster_on_the_mean_alone_is_noise() {
        // INT8's mean is 20% lower at batch 4 but its p50 is not: isolated slow runs of the
        // other file, not a speed-up.
        let mut int8 = cpu(FileKind::Int8, 1, 0.9, lin(1.0));
        int8.latency[2].mean_ms *= 0.8;
        let mut int8_p50 = cpu(FileKind::Int8, 2, 0.9, lin(1.0));
        int8_p50.latency[2].p50_ms *= 0.8;
        let vs = vec![
            cpu(FileKind::Optimized, 1, 1.0, lin(1.0)),
            int8,
            cpu(FileKind::Optimized, 2, 1.0, lin(1.0)),
            int8_p50,
        ];
        assert_eq!(
            names(&dominated(&vs)),
            vec!["m.int8.cpu.t1.b8", "m.int8.cpu.t2.b8"]
        );
    }

    #[test]
    fn equal_accuracy_near_ties_keep_exactly_one() {
        // Source and optimised files alike in accuracy, within 4% of each other both ways:
        // exactly one goes, the source, whichever way the noise fell.
        for source_factor in [0.96, 1.0, 1.04] {
            let vs = vec![
                cpu(FileKind::Source, 1, 0.97, |b| lin(1.0)(b) * source_factor),
                cpu(FileKind::Optimized, 1, 0.97, lin(1.0)),
            ];
            let p = dominated(&vs);
            assert_eq!(names(&p), vec!["m.fp32.cpu.t1.b8"], "{source_factor}");
            assert!(p[0].tie);
            assert_eq!(
                p[0].reason,
                "accuracy 0.970 <= 0.970 of opt, not faster at any batch, tied within 5%: opt kept"
            );
        }
        // The same in the other order of the input.
        let vs = vec![
            cpu(FileKind::Optimized, 1, 0.97, lin(1.0)),
            cpu(FileKind::Source, 1, 0.97, lin(1.0)),
        ];
        assert_eq!(names(&dominated(&vs)), vec!["m.fp32.cpu.t1.b8"]);
        // A source clearly faster at one batch is kept, and it prunes the optimised file
        // when that one is nowhere faster.
        let vs = vec![
            cpu(FileKind::Source, 1, 0.97, |b| {
                lin(1.0)(b) * if b == 1 { 0.8 } else { 1.0 }
            }),
            cpu(FileKind::Optimized, 1, 0.97, lin(1.0)),
        ];
        let p = dominated(&vs);
        assert_eq!(names(&p), vec!["m.opt.cpu.t1.b8"]);
        assert!(!p[0].tie);
        assert_eq!(
            p[0].reason,
            "accuracy 0.970 <= 0.970 of fp32, not faster at any batch"
        );
    }

    #[test]
    fn three_equal_files_keep_the_optimised_one() {
        let vs = vec![
            cpu(FileKind::Source, 2, 0.9, lin(1.0)),
            cpu(FileKind::Optimized, 2, 0.9, lin(1.0)),
            cpu(FileKind::Int8, 2, 0.9, lin(1.0)),
        ];
        let p = dominated(&vs);
        assert_eq!(names(&p), vec!["m.fp32.cpu.t2.b8", "m.int8.cpu.t2.b8"]);
        assert!(p.iter().all(|p| p.dominated_by == "m.opt.cpu.t2.b8"));
        assert_eq!(
            files_without_variants(&vs, &p),
            vec!["file-source", "file-int8"]
        );
    }

    #[test]
    fn different_threads_and_batches_are_not_compared() {
        // The INT8 variant at 2 threads is slower than the optimised one at 1 thread, and
        // less accurate: still kept, as nothing at 2 threads dominates it. Likewise across
        // max batches.
        let vs = vec![
            cpu(FileKind::Optimized, 1, 1.0, lin(1.0)),
            cpu(FileKind::Int8, 2, 0.5, lin(5.0)),
            variant(FileKind::Source, HardwareKind::Cpu, 1, 4, 1.0, lin(0.1)),
            variant(FileKind::Int8, HardwareKind::Cpu, 1, 2, 0.5, lin(9.0)),
        ];
        assert_eq!(dominated(&vs), Vec::new());
    }

    #[test]
    fn gpu_variants_only_against_gpu_variants() {
        // A fast, accurate CPU variant does not prune the GPU variants; on the GPU the FP16
        // file, less accurate and no faster, goes.
        let gpu = |kind, acc, ms: f64| variant(kind, HardwareKind::Gpu, 1, 8, acc, lin(ms));
        let vs = vec![
            cpu(FileKind::Optimized, 1, 1.0, lin(0.01)),
            gpu(FileKind::Optimized, 0.99, 2.0),
            gpu(FileKind::Fp16, 0.98, 2.0),
        ];
        let p = dominated(&vs);
        assert_eq!(names(&p), vec!["m.fp16.gpu.t1.b8"]);
        assert_eq!(p[0].dominated_by, "m.opt.gpu.t1.b8");
    }

    #[test]
    fn the_last_variant_and_unprofiled_ones_stay() {
        // One variant: nothing to compare with.
        let one = vec![cpu(FileKind::Int8, 1, 0.1, lin(9.0))];
        assert_eq!(dominated(&one), Vec::new());
        // A variant not profiled (or without an accuracy) neither goes nor prunes.
        let mut pending = cpu(FileKind::Optimized, 1, 1.0, lin(0.1));
        pending.status = "pending".into();
        let mut unmeasured = cpu(FileKind::Source, 1, 1.0, lin(0.1));
        unmeasured.accuracy = None;
        let vs = vec![pending, unmeasured, cpu(FileKind::Int8, 1, 0.1, lin(9.0))];
        assert_eq!(dominated(&vs), Vec::new());
        // A dominator not profiled at every batch of the other proves nothing there.
        let mut short = cpu(FileKind::Optimized, 1, 1.0, lin(0.1));
        short.latency.pop();
        let vs = vec![short, cpu(FileKind::Int8, 1, 0.1, lin(9.0))];
        assert_eq!(dominated(&vs), Vec::new());
    }

    #[test]
    fn partial_pruning_is_reported_per_variant() {
        // INT8 is less accurate, faster at 2 threads and not at 1: only its 1-thread variant
        // goes, and the file stays.
        let vs = vec![
            cpu(FileKind::Optimized, 1, 0.95, lin(1.0)),
            cpu(FileKind::Int8, 1, 0.9, lin(1.0)),
            cpu(FileKind::Optimized, 2, 0.95, lin(1.0)),
            cpu(FileKind::Int8, 2, 0.9, lin(0.5)),
        ];
        let p = dominated(&vs);
        assert_eq!(names(&p), vec!["m.int8.cpu.t1.b8"]);
        assert_eq!(files_without_variants(&vs, &p), Vec::<String>::new());
        assert_eq!(
            report(&vs, &p).as_deref(),
            Some("pruned int8 at cpu.t1.b8 (accuracy 0.900 <= 0.950 of opt, not faster at any batch)")
        );
    }

    #[test]
    fn a_file_pruned_by_different_files_is_reported_once() {
        // INT8 is dominated everywhere, by opt at three settings and by the source at the
        // fourth, where the source is faster than opt (and prunes it).
        let fast_at_one = |b: usize| lin(1.0)(b) * if b == 1 { 0.8 } else { 1.0 };
        let mut vs = Vec::new();
        for threads in [1, 2, 3] {
            vs.push(cpu(FileKind::Source, threads, 1.0, |b| lin(1.0)(b) * 1.2));
            vs.push(cpu(FileKind::Optimized, threads, 1.0, lin(1.0)));
            vs.push(cpu(FileKind::Int8, threads, 0.1, lin(2.0)));
        }
        vs.push(cpu(FileKind::Source, 4, 1.0, fast_at_one));
        vs.push(cpu(FileKind::Optimized, 4, 1.0, lin(1.0)));
        vs.push(cpu(FileKind::Int8, 4, 0.1, lin(2.0)));
        let p = dominated(&vs);
        assert_eq!(
            names(&p),
            vec![
                "m.fp32.cpu.t1.b8",
                "m.int8.cpu.t1.b8",
                "m.fp32.cpu.t2.b8",
                "m.int8.cpu.t2.b8",
                "m.fp32.cpu.t3.b8",
                "m.int8.cpu.t3.b8",
                "m.opt.cpu.t4.b8",
                "m.int8.cpu.t4.b8",
            ]
        );
        assert_eq!(
            report(&vs, &p).as_deref(),
            Some(
                "pruned fp32 at cpu.t1.b8, cpu.t2.b8, cpu.t3.b8 \
                 (accuracy 1.000 <= 1.000 of opt, not faster at any batch); \
                 pruned opt at cpu.t4.b8 (accuracy 1.000 <= 1.000 of fp32, not faster at any batch); \
                 pruned int8 (accuracy 0.100 <= 1.000 of opt, not faster at any batch; \
                 at cpu.t4.b8: accuracy 0.100 <= 1.000 of fp32, not faster at any batch)"
            )
        );
    }

    #[test]
    fn chained_near_ties_go_by_the_keep_order() {
        // Equal accuracy; at batch 1 the source is 7.4% faster than INT8, at batch 2 INT8 is
        // 7.4% faster than the source, so neither prunes the other, while the optimised file
        // is within 5% of both everywhere: it ties with each and, first in the keep order,
        // prunes both.
        let at = |b1: f64, b2: f64| move |b: usize| if b == 1 { b1 } else { b2 };
        let vs = vec![
            cpu(FileKind::Source, 1, 0.9, at(1.00, 1.08)),
            cpu(FileKind::Optimized, 1, 0.9, at(1.04, 1.04)),
            cpu(FileKind::Int8, 1, 0.9, at(1.08, 1.00)),
        ];
        let p = dominated(&vs);
        assert_eq!(names(&p), vec!["m.fp32.cpu.t1.b8", "m.int8.cpu.t1.b8"]);
        assert!(p
            .iter()
            .all(|p| p.dominated_by == "m.opt.cpu.t1.b8" && p.tie));
    }

    #[test]
    fn a_dominance_cycle_prunes_nothing() {
        // Equal accuracy; each file is more than 5% faster than the next at one batch and
        // never more than 5% slower than it: source beats opt, opt beats INT8, INT8 beats the
        // source. Every one is dominated, none by a variant that nothing dominates: all stay.
        let at = |l: [f64; 3]| move |b: usize| l[b.trailing_zeros() as usize];
        let v = |kind, l| variant(kind, HardwareKind::Cpu, 1, 4, 0.9, at(l));
        let vs = vec![
            v(FileKind::Source, [1.00, 1.03, 1.06]),
            v(FileKind::Optimized, [1.06, 1.00, 1.03]),
            v(FileKind::Int8, [1.03, 1.06, 1.00]),
        ];
        let c = |i: usize| Cand {
            v: &vs[i],
            acc: 0.9,
        };
        assert!(dominates(c(0), c(1)) && dominates(c(1), c(2)) && dominates(c(2), c(0)));
        assert_eq!(dominated(&vs), Vec::new());
    }
}
