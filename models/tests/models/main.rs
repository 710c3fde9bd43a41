//! ember-models' integration tests.

mod pretrained;
