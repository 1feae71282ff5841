//! Subnormal floats flushed to zero while a session runs.
//!
//! Subnormals (magnitudes below about 1.2e-38 in `f32`) take a slow path through the CPU's
//! floating-point unit. Models make them in ordinary use: an attention mask adds a large
//! negative number to the scores of padded positions, and the exponentials of those underflow.
//! On the zoo's transformer encoder a batch-1 run takes up to 40% longer on short (heavily
//! padded) sequences than on full ones for that reason alone; with subnormals flushed every row
//! costs the same and the mean validation row is about 20% faster (ONNX Runtime, one thread,
//! INT8 and FP32 alike). Convolutional nets with ReLUs rarely make any and run as before.
//!
//! So every run sets the x86-64 control flags *flush-to-zero* (results that would be subnormal
//! are zero) and *denormals-are-zero* (subnormal inputs read as zero) on the thread it runs on,
//! and puts the thread's flags back afterwards: the run may be on an engine's own thread or on
//! a borrowed one (see [`crate::engine::InlineRunner`]), whose other work keeps its own flags.
//! Sessions with intra-op threads get the same flags on their pool through ONNX Runtime's
//! `session.set_denormal_as_zero`. (ONNX Runtime applies that setting to the calling thread only
//! for the first session a process builds, so it cannot stand in for this guard.)
//!
//! A value this small changes no model's answer beyond float rounding; accuracy and latency
//! profiles are measured with the flags set, as the variants are served. On other CPU
//! architectures only ONNX Runtime's pool setting applies.

/// Holds the flags set until dropped; then the thread's previous flags return.
pub(crate) struct FlushToZero {
    #[cfg(target_arch = "x86_64")]
    saved: u32,
}

#[cfg(target_arch = "x86_64")]
impl FlushToZero {
    /// MXCSR bit 15, flush-to-zero, and bit 6, denormals-are-zero.
    const FLAGS: u32 = (1 << 15) | (1 << 6);

    pub(crate) fn enter() -> FlushToZero {
        let saved = read_mxcsr();
        if saved & Self::FLAGS != Self::FLAGS {
            write_mxcsr(saved | Self::FLAGS);
        }
        FlushToZero { saved }
    }

    /// Whether the flags are set on this thread now.
    #[cfg(test)]
    fn active() -> bool {
        read_mxcsr() & Self::FLAGS == Self::FLAGS
    }
}

#[cfg(target_arch = "x86_64")]
impl Drop for FlushToZero {
    fn drop(&mut self) {
        // Also clears the exception flags the run raised (sticky bits of the same register).
        write_mxcsr(self.saved);
    }
}

#[cfg(target_arch = "x86_64")]
fn read_mxcsr() -> u32 {
    let mut value: u32 = 0;
    // SAFETY: STMXCSR stores the 32-bit control/status register at the given address, a
    // valid, aligned u32 of this frame; SSE is part of every x86-64 CPU.
    unsafe {
        std::arch::asm!("stmxcsr [{}]", in(reg) &mut value, options(nostack, preserves_flags));
    }
    value
}

#[cfg(target_arch = "x86_64")]
fn write_mxcsr(value: u32) {
    // SAFETY: LDMXCSR loads a value read from the same register with only the FTZ and DAZ
    // bits changed (both defined on every x86-64 CPU), or the value saved before; no reserved
    // bit is set, so it cannot fault.
    unsafe {
        std::arch::asm!("ldmxcsr [{}]", in(reg) &value, options(nostack, preserves_flags, readonly));
    }
}

#[cfg(not(target_arch = "x86_64"))]
impl FlushToZero {
    /// Elsewhere the CPU's defaults stand (ONNX Runtime's pool setting still applies).
    pub(crate) fn enter() -> FlushToZero {
        FlushToZero {}
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::FlushToZero;

    #[test]
    fn subnormals_are_zero_inside_and_the_thread_s_flags_return_after() {
        let tiny = std::hint::black_box(1.0e-39_f32);
        assert!(tiny.is_subnormal());
        let before = std::hint::black_box(tiny) * std::hint::black_box(1.0_f32);
        assert_eq!(before, tiny, "outside the guard subnormals are kept");
        assert!(!FlushToZero::active());
        {
            let _guard = FlushToZero::enter();
            assert!(FlushToZero::active());
            // Denormals-are-zero: a subnormal operand reads as 0.
            let product = std::hint::black_box(tiny) * std::hint::black_box(1.0_f32);
            assert_eq!(product, 0.0);
            // Flush-to-zero: a result that would be subnormal is 0.
            let small = std::hint::black_box(1.0e-20_f32);
            assert_eq!(small * std::hint::black_box(1.0e-20_f32), 0.0);
        }
        assert!(!FlushToZero::active());
        let after = std::hint::black_box(tiny) * std::hint::black_box(1.0_f32);
        assert_eq!(after, tiny, "the thread's flags are back");
    }
}
