//! tessera-compiler (under construction).
