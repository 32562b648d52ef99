//! MSL → Metal library → compute pipeline state, compiled once per distinct source with
//! IEEE float semantics (fast math off: the IR's NaN, min / max and cast rules depend on
//! it) and MSL 3.1 (for `bfloat`).

use crate::backend::BackendKind;
use crate::error::{Result, RuntimeError};
use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_foundation::NSString;
use objc2_metal::{
    MTLCompileOptions, MTLComputePipelineState, MTLDevice, MTLLanguageVersion, MTLLibrary,
};
use std::collections::HashMap;
use std::sync::Mutex;

pub(crate) type Pipeline = Retained<ProtocolObject<dyn MTLComputePipelineState>>;

fn error(message: String) -> RuntimeError {
    RuntimeError::Backend {
        backend: BackendKind::Metal,
        message,
    }
}

/// Pipelines by (entry point, source).
#[derive(Default)]
pub(crate) struct PipelineCache {
    pipelines: Mutex<HashMap<(String, String), Pipeline>>,
}

impl PipelineCache {
    /// The pipeline for `entry` in `source`, compiling it on first use.
    pub(crate) fn get(
        &self,
        device: &ProtocolObject<dyn MTLDevice>,
        kernel_name: &str,
        entry: &str,
        source: &str,
    ) -> Result<Pipeline> {
        let key = (entry.to_string(), source.to_string());
        if let Some(p) = self
            .pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
        {
            return Ok(p.clone());
        }
        let options = MTLCompileOptions::new();
        #[allow(deprecated)] // `mathMode` needs macOS 15; this works on every version.
        options.setFastMathEnabled(false);
        options.setLanguageVersion(MTLLanguageVersion::Version3_1);
        let library: Retained<ProtocolObject<dyn MTLLibrary>> = device
            .newLibraryWithSource_options_error(&NSString::from_str(source), Some(&options))
            .map_err(|e| {
                error(format!(
                    "the Metal compiler rejected the MSL of `{kernel_name}`: {}",
                    e.localizedDescription()
                ))
            })?;
        let function = library
            .newFunctionWithName(&NSString::from_str(entry))
            .ok_or_else(|| {
                error(format!(
                    "the MSL of `{kernel_name}` has no kernel function `{entry}`"
                ))
            })?;
        let pipeline = device
            .newComputePipelineStateWithFunction_error(&function)
            .map_err(|e| {
                error(format!(
                    "cannot build a pipeline for `{kernel_name}`: {}",
                    e.localizedDescription()
                ))
            })?;
        self.pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, pipeline.clone());
        Ok(pipeline)
    }
}
