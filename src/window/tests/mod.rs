//! Unit and property tests of the decision (`window/`), by subject.

mod check;
mod ids;
mod mcheck;
mod model;
mod support;
