//! DAMOS: access-aware operation schemes.

mod apply;
mod model;

#[cfg(test)]
use apply::add_range;
pub(crate) use apply::{apply_schemes, update_watermarks, Ctx};
pub use apply::{hot_score, SchemeState, MAX_SCORE};
pub use model::*;

#[cfg(test)]
mod tests;
