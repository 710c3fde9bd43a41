//! ember-train's tests, as one integration-test binary: unit tests inside the crate would compile
//! the whole library a second time in test mode (its training loops monomorphised over every
//! backend: minutes of CI per build), while this binary links the library as it is.

mod bcr;
mod compare;
mod conv;
mod memory;
mod policy;
mod report;
mod run;
mod scale;
mod technique;
