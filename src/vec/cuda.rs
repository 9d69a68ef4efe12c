//! The CUDA backend (placeholder until the driver-API implementation lands).

include!("nocuda.rs");
