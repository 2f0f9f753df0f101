//! The playground simulator (being built).
