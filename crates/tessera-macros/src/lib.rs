//! tessera-macros (under construction).
