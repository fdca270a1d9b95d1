//! The one integration-test binary: every module drives the real `agents` binary or the
//! library against real files in temporary directories.

mod actors;
mod cli;
mod reliability;
mod support;
