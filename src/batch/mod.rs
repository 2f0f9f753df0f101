pub mod input;
pub mod output;
pub mod validate;
