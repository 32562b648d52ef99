//! tessera (under construction).
