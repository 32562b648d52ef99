//! What can go wrong building or running a model: a bad folder, config or checkpoint, a
//! request the engine was not sized for, or an op or runtime failure, each saying which.

use tessera_runtime::RuntimeError;
use tessera_std::OpError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ModelError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// `config.json` is not valid JSON, lacks a field, or holds a value out of range or
    /// an architecture this runner does not implement.
    #[error("config.json: {0}")]
    Config(String),
    /// The checkpoint lacks a tensor, holds one of the wrong shape or dtype, or is not a
    /// valid safetensors file.
    #[error("weights: {0}")]
    Weights(String),
    /// The request does not fit what the engine was made for (batch, context, tokens).
    #[error("request: {0}")]
    Request(String),
    /// An op refused a call or failed.
    #[error(transparent)]
    Op(#[from] OpError),
    /// The runtime failed (allocation, transfer).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

impl ModelError {
    pub(crate) fn config(msg: impl Into<String>) -> ModelError {
        ModelError::Config(msg.into())
    }

    pub(crate) fn weights(msg: impl Into<String>) -> ModelError {
        ModelError::Weights(msg.into())
    }

    pub(crate) fn request(msg: impl Into<String>) -> ModelError {
        ModelError::Request(msg.into())
    }
}
