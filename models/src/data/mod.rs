//! Data loaders. Every loader reads local files (nothing is downloaded at run time).

pub mod cifar;
pub mod idx;
pub mod mnist;
