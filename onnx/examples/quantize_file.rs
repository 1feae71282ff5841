//! Rewrite an ONNX file and print what changed.
//!
//!     cargo run -p infaas-onnx --example quantize_file -- IN.onnx OUT.onnx [--fp16] [--min-elements N] [--full-range]
//!
//! Default: INT8 dynamic quantisation (`quantize_dynamic_int8`, 7-bit weights);
//! `--full-range`: 8-bit weights (exact only on CPUs with VNNI); `--fp16`: `convert_fp16`.

use std::process::ExitCode;

use infaas_onnx::{convert_fp16, quantize_dynamic_int8, OnnxModel, QuantizeOptions};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut paths = Vec::new();
    let mut fp16 = false;
    let mut opts = QuantizeOptions::default();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--fp16" => fp16 = true,
            "--full-range" => opts.reduce_range = false,
            "--min-elements" => {
                let v = args.next().ok_or("--min-elements needs a value")?;
                opts.min_weight_elements = v.parse().map_err(|e| format!("--min-elements: {e}"))?;
            }
            _ => paths.push(a),
        }
    }
    let [input, output] = paths.as_slice() else {
        return Err(
            "usage: quantize_file IN.onnx OUT.onnx [--fp16] [--min-elements N] [--full-range]"
                .into(),
        );
    };
    let bytes = std::fs::read(input).map_err(|e| format!("reading {input}: {e}"))?;
    let model = OnnxModel::parse(&bytes).map_err(|e| format!("{input}: {e}"))?;
    let out = if fp16 {
        convert_fp16(&model).map_err(|e| e.to_string())?
    } else {
        let (out, report) = quantize_dynamic_int8(&model, &opts).map_err(|e| e.to_string())?;
        println!("quantized nodes: {}", report.quantized_nodes);
        for s in &report.skipped {
            println!("skipped: {s}");
        }
        println!(
            "weights: {} -> {} bytes",
            report.original_weight_bytes, report.quantized_weight_bytes
        );
        out
    };
    let out_bytes = out.to_bytes();
    std::fs::write(output, &out_bytes).map_err(|e| format!("writing {output}: {e}"))?;
    println!(
        "file: {} -> {} bytes (ratio {:.3})",
        bytes.len(),
        out_bytes.len(),
        out_bytes.len() as f64 / bytes.len().max(1) as f64
    );
    println!("ops: {:?}", out.op_counts());
    Ok(())
}
