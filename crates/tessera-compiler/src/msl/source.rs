//! The emitter's product: MSL text plus the facts a runtime needs to bind and dispatch it.

use tessera_ir::Scalar;

/// One kernel's Metal Shading Language source and its binding layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MslSource {
    /// The specialised kernel name, for messages: `rms_norm[T=f16, n=4096u32]`.
    pub kernel_name: String,
    /// The `kernel void` function's name in [`MslSource::code`].
    pub entry: String,
    /// A complete MSL translation unit.
    pub code: String,
    /// The entry point's parameters in declaration order.
    pub args: Vec<MslArg>,
    /// Bytes of threadgroup memory the kernel declares (statically sized arrays).
    pub threadgroup_bytes: usize,
    /// True if the kernel uses simdgroup collectives, so its threadgroup size must be a
    /// positive multiple of 32.
    pub uses_simdgroups: bool,
}

/// A parameter of the generated entry point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MslArg {
    /// A tensor: `device T* name [[buffer(buffer)]]` (`const device T*` when read-only).
    Tensor {
        /// Index into `Kernel::params`.
        param: usize,
        buffer: u32,
        elem: Scalar,
        writable: bool,
        name: String,
    },
    /// A runtime scalar: `constant T& name [[buffer(buffer)]]`, set with its bytes.
    Scalar {
        /// Index into `Kernel::params`.
        param: usize,
        buffer: u32,
        ty: Scalar,
        name: String,
    },
    /// A thread-position attribute the Metal runtime fills in.
    Builtin(MslBuiltin),
}

/// The Metal attributes the emitter reads thread positions from. Grid-shaped ones are
/// `uint3` (Metal wants them of one dimensionality); simdgroup ones are `uint`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MslBuiltin {
    ThreadPositionInThreadgroup,
    ThreadgroupPositionInGrid,
    ThreadsPerThreadgroup,
    ThreadgroupsPerGrid,
    ThreadIndexInSimdgroup,
    SimdgroupIndexInThreadgroup,
    SimdgroupsPerThreadgroup,
}

impl MslBuiltin {
    /// The attribute's name inside `[[…]]`.
    pub fn attribute(self) -> &'static str {
        match self {
            MslBuiltin::ThreadPositionInThreadgroup => "thread_position_in_threadgroup",
            MslBuiltin::ThreadgroupPositionInGrid => "threadgroup_position_in_grid",
            MslBuiltin::ThreadsPerThreadgroup => "threads_per_threadgroup",
            MslBuiltin::ThreadgroupsPerGrid => "threadgroups_per_grid",
            MslBuiltin::ThreadIndexInSimdgroup => "thread_index_in_simdgroup",
            MslBuiltin::SimdgroupIndexInThreadgroup => "simdgroup_index_in_threadgroup",
            MslBuiltin::SimdgroupsPerThreadgroup => "simdgroups_per_threadgroup",
        }
    }

    /// The parameter's name in the generated code.
    pub fn var(self) -> &'static str {
        match self {
            MslBuiltin::ThreadPositionInThreadgroup => "tsr_tid",
            MslBuiltin::ThreadgroupPositionInGrid => "tsr_tgid",
            MslBuiltin::ThreadsPerThreadgroup => "tsr_tpg",
            MslBuiltin::ThreadgroupsPerGrid => "tsr_ngroups",
            MslBuiltin::ThreadIndexInSimdgroup => "tsr_lane",
            MslBuiltin::SimdgroupIndexInThreadgroup => "tsr_sgid",
            MslBuiltin::SimdgroupsPerThreadgroup => "tsr_nsg",
        }
    }

    /// True for the `uint3` attributes, false for the `uint` ones.
    pub fn is_vector(self) -> bool {
        matches!(
            self,
            MslBuiltin::ThreadPositionInThreadgroup
                | MslBuiltin::ThreadgroupPositionInGrid
                | MslBuiltin::ThreadsPerThreadgroup
                | MslBuiltin::ThreadgroupsPerGrid
        )
    }
}
