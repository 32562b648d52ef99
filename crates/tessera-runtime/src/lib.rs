//! tessera-runtime (under construction).
