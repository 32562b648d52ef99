//! The GGUF block formats llama.cpp defines (ggml-common.h): what a block holds, how
//! many weights it covers and how many bytes it takes.

use crate::error::OpError;

/// A llama.cpp block format. The discriminant is the `format` constexpr of the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GgufFormat {
    /// `{ f16 d; u8 qs[16] }`: 32 weights `(nibble − 8)·d`, low nibbles first.
    Q4_0 = 0,
    /// `{ f16 d; i8 qs[32] }`: 32 weights `q·d`.
    Q8_0 = 1,
    /// `{ f16 d, dmin; u8 scales[12]; u8 qs[128] }`: 256 weights in 8 groups of 32,
    /// `d·sc·nibble − dmin·m` with 6-bit `sc`, `m` packed in `scales`.
    Q4K = 2,
    /// Q4_K's layout with a fifth bit per weight in `qh[32]` before `qs`.
    Q5K = 3,
    /// `{ u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }`: 256 weights
    /// `d·sc·(6-bit q − 32)`, 16 groups of 16.
    Q6K = 4,
}

/// Every format, in the order of the declaration's choice.
pub const FORMATS: [GgufFormat; 5] = [
    GgufFormat::Q4_0,
    GgufFormat::Q8_0,
    GgufFormat::Q4K,
    GgufFormat::Q5K,
    GgufFormat::Q6K,
];

/// The spellings of [`FORMATS`], as llama.cpp's type names in lower case.
pub const FORMAT_NAMES: [&str; 5] = ["q4_0", "q8_0", "q4_k", "q5_k", "q6_k"];

impl GgufFormat {
    /// Weights per block (llama.cpp's `QK4_0`, `QK8_0`, `QK_K`).
    pub fn block_elems(self) -> usize {
        match self {
            GgufFormat::Q4_0 | GgufFormat::Q8_0 => 32,
            _ => 256,
        }
    }

    /// Bytes per block (`sizeof(block_q4_0)` …).
    pub fn block_bytes(self) -> usize {
        match self {
            GgufFormat::Q4_0 => 18,
            GgufFormat::Q8_0 => 34,
            GgufFormat::Q4K => 144,
            GgufFormat::Q5K => 176,
            GgufFormat::Q6K => 210,
        }
    }

    /// The lower-case name, `q4_k`.
    pub fn name(self) -> &'static str {
        FORMAT_NAMES[self as usize]
    }

    /// The format called `name`, or an error listing the names.
    pub fn parse(op: &'static str, name: &str) -> Result<GgufFormat, OpError> {
        FORMAT_NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| FORMATS[i])
            .ok_or_else(|| {
                OpError::invalid(
                    op,
                    format!("format `{name}` is not one of {}", FORMAT_NAMES.join(", ")),
                )
            })
    }

    /// Bytes of a row of `k` weights: `k / block_elems · block_bytes`.
    pub fn row_bytes(self, k: usize) -> usize {
        k / self.block_elems() * self.block_bytes()
    }
}
