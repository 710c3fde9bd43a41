//! ember-models' integration tests.

mod pretrained;
mod shape;
