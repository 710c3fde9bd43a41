//! The `ember` command line end to end: every command run as a user would, and every bad input
//! it refuses (one error line, non-zero exit, nothing of the user's changed). One test binary.

mod act_cli;
mod basics;
mod bcr_cli;
mod cifar_cli;
mod common;
mod compare_cli;
mod faults;
mod hinm_cli;
mod lut_cli;
#[cfg(feature = "mpi")]
mod mpi_cli;
mod policy_cli;
mod pretrained_cli;
mod profile_cli;
mod scale_cli;
mod sparse_act_cli;
