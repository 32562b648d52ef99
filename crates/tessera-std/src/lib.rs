//! tessera-std (under construction).
